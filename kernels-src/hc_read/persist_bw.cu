/*
 * persist_bw: hc_read in one persistent launch, bitwise equal to v1, two
 * grid barriers.
 *
 * The canonical order fixes each lane's fmaf chain and each butterfly,
 * not which thread or block computes them.  Lane L of row j walks chunks
 * c = L + 32q; the butterfly first adds lanes 16 apart, then 8, then 4:
 * so the 8 lanes L = a + 4m (m = 0..7) of one "class" a = L % 4 are closed
 * under the first three steps, and their partial sum G_a (the value every
 * such lane holds after offsets 16, 8, 4) is
 *     G_a = ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7))   (p_m: lane a + 4m)
 * and the row's sum is lo = (G_0 + G_2) + (G_1 + G_3) (offsets 2, 1).
 * Every lane ends with these same bits (a + b == b + a).
 *
 * Blocks are dealt to (class a, row group g): 4*RG blocks, one per SM, 640
 * threads.  Block (a, g) owns the chains of its K/RG rows for the lanes of
 * class a: it needs the chunks c = 4c' + a (c' = 0..319) of its rows and
 * of xn, a quarter of each, and computes G_a for its rows.
 *
 *   start    an L2 prefetch of its w_down rows; by cp.async R at its
 *            chunks (all tokens) and w_norm there, and the w_up rows of
 *            its channels (C/(4*RG) of them, all 4 streams); its w_down
 *            chunks by cp.async once the norm is done.
 *   stage 1  blocks 0 .. T*S-1 run v2's norm of (t, s) with 256 threads
 *            and publish rs[t][s] (the same statements as v1: ss by fmaf
 *            over c = i + 256k, the warp butterfly, the 8-warp butterfly).
 *   barrier
 *   stage 2  xn = fl(fl(R' * w_norm) * rs) at its chunks; the lane chains
 *            (weights and xn from shared memory), G_a of each (row,
 *            token) by the tree above, stored to `part`; with pending,
 *            its share of R' stored to resid.
 *   barrier
 *   stage 3  lo = (G_0 + G_2) + (G_1 + G_3); up and mix as upmix_dec
 *            (canonical lane partials of rows s*C + c, all sums reduced at
 *            once by recursive halving, gates and mix in registers).
 *
 * Scratch: rs (T*S floats), part (G, 4*T*K floats), ws (the barrier's flag and
 * arrival counts, zeroed once at allocation: hct_grid.h).
 *
 * Built by nvcc too (tools/lab/): HCR_LAB leaves the entry out, and every
 * stage can record the global timer into `trace` (null in hctune).
 */
#include "hc_read.h"
#include "hct_grid.h"
/* No L2 prefetch parameter here: the weights go straight to shared memory. */
#define PF 0
#include "fast_common.h"
#include "persist_common.h"

#ifndef RG
#error "persist_bw: RG must be defined"
#endif

#define PB_NT 640                    /* threads */
#define PB_NW (PB_NT / HCT_LW)       /* warps: 20 */
#define PB_NA 4                      /* lane classes */
#define PB_NB (PB_NA * RG)           /* blocks */
#define PB_RPB (K / RG)              /* rows a block */
#define PB_LPA (HCT_LW / PB_NA)      /* lanes a class: 8 */
#define PB_CPA (D / 8 / PB_NA)       /* chunks of a row a class holds: 320 */
#define PB_Q HCR_DOWN_Q              /* steps of a lane chain: 40 */
#define PB_NCU (C / PB_NB)           /* channels a block, stage 3 */
#define PB_UPC HCR_UP_CHUNKS         /* chunks of a w_up row: 40 */
#define PB_TMAX HCR_PERSIST_TMAX     /* tokens: 8 */
#define PB_RSH (PB_CPA / RG)         /* chunks of R' a block stores (pending) */
static_assert(PB_LPA * PB_Q == PB_CPA, "persist_bw: a class's chains cover its chunks");
static_assert(K % RG == 0 && C % PB_NB == 0 && PB_CPA % RG == 0,
              "persist_bw: rows, channels and R' split evenly");
static_assert(PB_NCU <= PB_NW, "persist_bw: stage 3 takes a channel a warp");
static_assert(PB_NT >= HCR_NORM_THREADS, "persist_bw: the norm needs 256 threads");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "persist_bw: a row of w_up is one or two chunks per lane");
static_assert(S == 4, "persist_bw: the mix is written for 4 streams");

/* Shared memory, in bytes (the manifest's smem expression is this sum). */
#define PB_SMEM(T)                                                                             \
  (PB_RPB * PB_CPA * 16 + PB_NCU * S * PB_UPC * 16 + (T) * PB_CPA * 32 + PB_CPA * 16 +        \
   PB_RPB * PB_LPA * PB_TMAX * 4 + 2 * PB_TMAX * (K / 8) * 16 + 64 * 4 + PB_TMAX * PB_RSH * 32)

HCT_DEV void pb_stamp(hct_u64 *trace, int i) {
  if (trace != 0 && threadIdx.x == 0) trace[blockIdx.x * 16 + i] = hct_globaltimer();
}

/* Stage 1 for (t, s): v2's norm, threads 0..255 (statement for statement
 * hcr_fast_norm_stream's sum), publishing rs only. */
HCT_DEV void pb_norm_rs(int t, int s, const float *resid, const float *pending, float *rsg,
                        float *red) {
  const int tid = (int)threadIdx.x;
  const long long base = ((long long)t * S + s) * C;
  if (tid < HCR_NORM_THREADS) {
    float x[HCR_NORM_PER_THREAD];
#pragma unroll
    for (int k = 0; k < HCR_NORM_PER_THREAD; ++k) {
      const int c = tid + k * HCR_NORM_THREADS;
      x[k] = c < C ? resid[base + c] : 0.0f;
      if (pending != 0 && c < C) x[k] = x[k] + pending[base + c];
    }
    float a = 0.0f;
#pragma unroll
    for (int k = 0; k < HCR_NORM_PER_THREAD; ++k)
      if (tid + k * HCR_NORM_THREADS < C) a = fmaf(x[k], x[k], a);
    a = hct_warp_sum(a);
    if ((tid & (HCT_LW - 1)) == 0) red[tid / HCT_LW] = a;
  }
  __syncthreads();
  if (tid < HCT_LW) {
    float b = tid < HCR_NORM_THREADS / HCT_LW ? red[tid] : 0.0f;
    b += hct_shfl_xor(b, 4);
    b += hct_shfl_xor(b, 2);
    b += hct_shfl_xor(b, 1);
    if (tid == 0) rsg[t * S + s] = rsqrtf(b / (float)C + HCT_EPS);
  }
  __syncthreads();
}

/* Stage 2's chains for TT tokens a thread: thread (m, r, tg) runs lane
 * a + 4m of row r for tokens tg*TT .. tg*TT+TT-1 (those below T). */
template <int TT>
HCT_DEV void pb_chains(const hct_u4 *wd, const float *xs, float *pp, int T) {
  const int tid = (int)threadIdx.x;
  const int m = tid % PB_LPA, r = (tid / PB_LPA) % PB_RPB, tg = tid / (PB_LPA * PB_RPB);
  const int t0 = tg * TT;
  if (t0 >= T) return;
  const hct_u4 *w = wd + r * PB_CPA + m;
  float acc[TT];
#pragma unroll
  for (int i = 0; i < TT; ++i) acc[i] = 0.0f;
#pragma unroll 8
  for (int q = 0; q < PB_Q; ++q) {
    const hct_u4 wq = w[PB_LPA * q];
#pragma unroll
    for (int i = 0; i < TT; ++i) {
      const hct_f4 *x = (const hct_f4 *)(xs + ((t0 + i) * PB_CPA + m + PB_LPA * q) * 8);
      acc[i] = hcr_dot8(wq, x[0], x[1], acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < TT; ++i)
    if (t0 + i < T) pp[(r * PB_LPA + m) * PB_TMAX + t0 + i] = acc[i];
}

template <int TB>
HCT_DEV void pb_read(float *resid, const float *pending, const hct_u16 *w_norm,
                     const hct_u16 *w_down, const hct_u16 *w_up, float *rsg, float *part,
                     hct_u32 *ws, float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T,
                     hct_u64 *trace) {
  HCT_DYN_SHARED(hct_u4, pb_sm);
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int b = (int)blockIdx.x, a = b / RG, g = b % RG;
  const int j0 = g * PB_RPB, cu0 = b * PB_NCU;
  pb_stamp(trace, 0);
  hct_grid_t grid = hct_grid_begin(ws);

  hct_u4 *wd = pb_sm;                                  /* [r][c'] chunk 4c'+a of row j0+r */
  hct_u4 *wu = wd + PB_RPB * PB_CPA;                   /* [cl][s][chunk] */
  float *xs = (float *)(wu + PB_NCU * S * PB_UPC);     /* [t][c'][8]: R, then xn */
  hct_u4 *wn = (hct_u4 *)(xs + T * PB_CPA * 8);        /* [c'] w_norm chunk 4c'+a */
  float *pp = (float *)(wn + PB_CPA);                  /* lane partials [r][m][t] */
  hct_f4 *slo = (hct_f4 *)(pp + PB_RPB * PB_LPA * PB_TMAX); /* lo, [half][t][chunk] */
  float *red = (float *)(slo + 2 * PB_TMAX * (K / 8)); /* 64 floats: norm, rs */
  float *rsh = red + 64;                               /* R' of its share, [t][chunk][8] */

  /* ---- start --------------------------------------------------------------
   * An L2 prefetch of this block's quarter of its row group's w_down bytes
   * (the four class blocks of a row group cover its rows once; sm_90),
   * then by cp.async R and w_norm at its chunks (group 0) and its w_up
   * rows (group 1).  Its w_down chunks, 16 bytes every 64, go by cp.async
   * too (group 2), issued after the norm from L2: cp.async of scattered
   * pieces is slow to issue, and the norm must not wait behind it. */
#if defined(HCT_CUDA) && HCT_ARCH >= 90
  if (wp == PB_NW - 1 && lane < PB_RPB) {
    const char *row = (const char *)(w_down + (long long)(j0 + lane) * D);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row + a * (D / 2)), "r"(D / 2)
                 : "memory");
  }
#endif
  for (int p = tid; p < T * PB_CPA * 2; p += PB_NT) {
    const int t = p / (PB_CPA * 2), cp = (p / 2) % PB_CPA, h = p % 2;
    const int k = 8 * (4 * cp + a); /* column in D */
    hct_cp_async16(xs + (t * PB_CPA + cp) * 8 + 4 * h, resid + (long long)t * D + k + 4 * h);
  }
  for (int p = tid; p < PB_CPA; p += PB_NT)
    hct_cp_async16(&wn[p], (const hct_u4 *)w_norm + 4 * p + a);
  hct_cp_async_commit();
  for (int p = tid; p < PB_NCU * S * PB_UPC; p += PB_NT) {
    const int q = p % PB_UPC, cs = p / PB_UPC; /* cs = cl*S + s */
    const int cl = cs / S, s = cs % S;
    hct_cp_async16(&wu[p], (const hct_u4 *)(w_up + ((long long)s * C + cu0 + cl) * K) + q);
  }
  hct_cp_async_commit();
  pb_stamp(trace, 1);

  /* ---- stage 1 ------------------------------------------------------------ */
  if (b < T * S) pb_norm_rs(b / S, b % S, resid, pending, rsg, red);
  /* R of stage 3's channels, read now: from the barrier on, blocks store
   * R' into resid. */
  const int tm = lane % TB;
  float rr[S] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (wp < PB_NCU && lane < T && lane < TB)
#pragma unroll
    for (int s = 0; s < S; ++s) rr[s] = resid[((long long)tm * S + s) * C + cu0 + wp];
  hct_cp_async_wait<1>(); /* this block's reads of resid are done */
  hct_grid_arrive(&grid);
  for (int p = tid; p < PB_RPB * PB_CPA; p += PB_NT) {
    const int r = p / PB_CPA, cp = p % PB_CPA;
    hct_cp_async16(&wd[p], (const hct_u4 *)(w_down + (long long)(j0 + r) * D) + 4 * cp + a);
  }
  hct_cp_async_commit();
  pb_stamp(trace, 2);
  if (!hct_grid_wait(&grid)) return;
  pb_stamp(trace, 3);

  /* ---- stage 2 ------------------------------------------------------------ */
  if (tid < T * S) red[tid] = hcr_ldcg(rsg + tid);
  __syncthreads();
  for (int p = tid; p < T * PB_CPA * 8; p += PB_NT) {
    const int t = p / (PB_CPA * 8), cp = (p / 8) % PB_CPA, e = p % 8;
    const int k = 8 * (4 * cp + a) + e, s = k / C;
    float x = xs[p];
    if (pending != 0) {
      x = x + pending[(long long)t * D + k];
      if (cp % RG == g) rsh[(t * PB_RSH + cp / RG) * 8 + e] = x;
    }
    const hct_u4 w4 = wn[cp];
    const hct_u32 ww = e < 2 ? w4.x : e < 4 ? w4.y : e < 6 ? w4.z : w4.w;
    const float wv = (e & 1) ? hct_bf16_hi(ww) : hct_bf16_lo(ww);
    const float y = x * wv;
    xs[p] = y * red[t * S + s];
  }
  if (pending != 0)
    __syncthreads();
  if (pending != 0)
    for (int p = tid; p < T * PB_RSH * 8; p += PB_NT) {
      const int t = p / (PB_RSH * 8), i = (p / 8) % PB_RSH, e = p % 8;
      const int cp = i * RG + g;
      resid[(long long)t * D + 8 * (4 * cp + a) + e] = rsh[p];
    }
  hct_cp_async_wait<0>();
  __syncthreads();
  pb_stamp(trace, 4);
  if (TB <= 2)
    pb_chains<1>(wd, xs, pp, T);
  else
    pb_chains<TB / 4 == 0 ? 1 : TB / 4>(wd, xs, pp, T);
  __syncthreads();
  if (tid < PB_RPB * PB_TMAX) {
    const int r = tid / PB_TMAX, t = tid % PB_TMAX;
    if (t < T) {
      const float *v = pp + r * PB_LPA * PB_TMAX + t;
#define PB_P(m) v[(m) * PB_TMAX]
      const float ga = ((PB_P(0) + PB_P(4)) + (PB_P(2) + PB_P(6))) +
                       ((PB_P(1) + PB_P(5)) + (PB_P(3) + PB_P(7)));
#undef PB_P
      part[((long long)a * T + t) * K + j0 + r] = ga;
    }
  }
  pb_stamp(trace, 5);
  if (!hct_grid_sync(&grid)) return;
  pb_stamp(trace, 6);

  /* ---- stage 3 ------------------------------------------------------------ */
  for (int p = tid; p < TB * K; p += PB_NT) {
    const int t = p / K, k = p % K;
    float l = 0.0f;
    if (t < T) {
      const float *G = part + (long long)t * K + k;
      const long long ca = (long long)T * K; /* class stride */
      l = (hcr_ldcg(G) + hcr_ldcg(G + 2 * ca)) + (hcr_ldcg(G + ca) + hcr_ldcg(G + 3 * ca));
    }
    ((float *)slo)[(((k >> 2) & 1) * PB_TMAX + t) * (K / 2) + (k >> 3) * 4 + (k & 3)] = l;
  }
  __syncthreads(); /* lo */
  pb_stamp(trace, 7);
  const bool two = lane + HCT_LW < PB_UPC;
  if (wp < PB_NCU) {
    const int cl = wp, c = cu0 + cl;
    hct_u4 w[S][2];
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const hct_u4 *row = wu + (cl * S + s) * PB_UPC;
      w[s][0] = row[lane];
      w[s][1] = two ? row[lane + HCT_LW] : hct_u4{0, 0, 0, 0};
    }
    if (pending != 0 && lane < T && lane < TB)
#pragma unroll
      for (int s = 0; s < S; ++s) rr[s] = rr[s] + pending[((long long)tm * S + s) * C + c];
    hcr_persist_upmix<TB>(w, slo, rr, lane, c, T, mixed, mixed_bf16, mixed_f16);
  }
  pb_stamp(trace, 8);
}

#define PB_ARGS resid, pending, w_norm, w_down, w_up, rsg, part, ws, mixed, mixed_bf16, mixed_f16, T
#define PB_PARAMS                                                                               \
  float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,            \
      const hct_u16 *w_up, float *rsg, float *part, hct_u32 *ws, float *mixed,                  \
      hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T
HCT_DEV void pb_dispatch(PB_PARAMS, hct_u64 *trace) {
  if (T <= 1)
    pb_read<1>(PB_ARGS, trace);
  else if (T <= 2)
    pb_read<2>(PB_ARGS, trace);
  else if (T <= 4)
    pb_read<4>(PB_ARGS, trace);
  else
    pb_read<8>(PB_ARGS, trace);
}

#ifndef HCR_LAB
/* Grid 4*RG, block 640, dynamic shared memory PB_SMEM(T) (the manifest's
 * expression). */
HCT_ENTRY void __launch_bounds__(PB_NT, 1) hc_pb_read(PB_PARAMS) { pb_dispatch(PB_ARGS, 0); }
#endif
