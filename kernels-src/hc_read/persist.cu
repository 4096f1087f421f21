/*
 * persist: hc_read in one persistent launch, class kl, one grid barrier.
 *
 * Blocks are dealt to (stream s, row group g): S*RG blocks, one per SM,
 * 640 threads.  Block (s, g) owns the K/RG rows j of w_down from g*K/RG
 * on, over the columns of stream s only, and the C/(S*RG) channels
 * c0 = b*C/(S*RG) .. of the up and mix.
 *
 *   start    the block requests by cp.async into shared memory its w_down
 *            rows over stream s, R of stream s for every token, w_norm of
 *            s and R of its channels; its w_up rows (s'*C + c for its
 *            channels and all four streams) follow after stage A.  About
 *            120 KB a block, 13.1 MB for the grid.
 *   stage A  y = fl(R' * w_norm) over stream s and the sum of squares of
 *            R' (the whole stream is here, so every block of stream s
 *            computes the same rs, bit for bit, without a barrier); the
 *            dots of its rows with y by fmaf, a thread per (chunk of 8
 *            columns, half of the rows), reduced over the chunks; times
 *            rs: q[t][s][j] = rs * (w_down[j][s] . y).  lo is linear in
 *            the four streams' q, so the norm needs no grid barrier; only
 *            the rounding differs from v1.
 *   barrier  (hct_grid.h); with pending, each block now stores its share
 *            of R' (not before: other blocks read R until they arrive)
 *   stage B  every block gathers lo[t][j] = ((q0 + q1) + q2) + q3, the
 *            same order everywhere;
 *   stage C  a warp per channel: lane L takes elements 10L .. 10L+9 of
 *            the four rows s*C + c (even work for every lane; the
 *            canonical order gives lanes 0..7 twice the others' share),
 *            all 4*T sums reduced at once (hcr_multi_sum), the gates and
 *            the mix in registers.
 *
 * Deterministic: a fixed order everywhere, so the same bits on every run.
 * Tensor cores were tried for
 * the dots (3xTF32 mma.sync): at T = 1 they did 8 times the useful work
 * (16 rows x 8 tokens for 10 x 1) and took 3 us a stage on the H200
 * (docs/perf/h200.md); fmaf needs a tenth of that.
 *
 * Parameters: RG, row groups (K/RG rows a block; S*RG blocks must all be
 * resident, so S*RG <= SM_COUNT); PDL, launched as a programmatic
 * dependent launch (sm_90): the block lets the next kernel's launch begin
 * at once and requests its w_down rows before it waits for the previous
 * kernel, so a read's launch and weight stream overlap the previous
 * kernel's tail; GB, nanoseconds of back-off between the barrier's polls.
 * w_up requested at the start instead of after the norm was measured
 * slower at T = 1, 2, 4 and 8 (docs/perf/h200.md).
 *
 * Scratch: part (q, T*S*K floats), ws (the barrier's state, zeroed once
 * at allocation: hct_grid.h).
 *
 * Built by nvcc too (tools/lab/): HCR_LAB leaves the entry out, and every
 * stage can record the global timer into `trace` (hct_lab.h: without
 * HCR_LAB, as in hctune, the HCT_LAB_ hooks and the parameter are not
 * there).
 */
#include "hc_read.h"
#ifndef GB
#error "persist: GB must be defined"
#endif
#define HCT_GRID_BACKOFF_NS GB
#include "hct_grid.h"
/* No L2 prefetch parameter here: the weights go straight to shared memory. */
#define PF 0
#include "fast_common.h"
#include "persist_common.h"

#ifndef RG
#error "persist: RG must be defined"
#endif
#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "persist: needs the copy engine's bulk copies (sm_90 or later)"
#endif
#include "hct_bulk.h"
#include "hct_lab.h"
#ifndef PDL
#error "persist: PDL must be defined"
#endif


#define PK_NT 640                   /* threads */
#define PK_NW (PK_NT / HCT_LW)      /* warps: 20 */
#define PK_NB (S * RG)              /* blocks */
#define PK_RPB (K / RG)             /* w_down rows a block: 10 */
#define PK_RPT (PK_RPB / 2)         /* rows a thread in stage A: 5 */
#define PK_NCU (C / PK_NB)          /* channels a block, stage C: 20 */
#define PK_NR (S * PK_NCU)          /* w_up rows a block: 80 */
#define PK_TMAX HCR_PERSIST_TMAX    /* tokens: 8 */
#define PK_CPS (C / 8)              /* chunks of 8 columns in a stream: 320 */
#define PK_UPE (K / HCT_LW)         /* elements of a w_up row a lane: 10 */
#define PK_LOS (PK_TMAX * 12 + 4)   /* floats a lane's lo slice (padded: conflict-free) */
static_assert(K % RG == 0 && C % PK_NB == 0 && PK_RPB % 2 == 0, "persist: rows and channels must split evenly");
static_assert(PK_CPS * 2 == PK_NT, "persist: stage A is a thread per (chunk, half of the rows)");
static_assert(PK_UPE % 2 == 0 && PK_UPE <= 12, "persist: a lane's w_up elements are whole bf16 pairs");
static_assert(PK_NCU == PK_NW, "persist: stage C is a warp per channel");
static_assert(C % PK_NT == 0 && C % RG == 0, "persist: stage A's elements split evenly");
static_assert(S == 4, "persist: the mix is written for 4 streams");

/* Shared memory, in bytes (the manifest's smem expression is this sum). */
#define PK_SMEM(T)                                                                               \
  (PK_RPB * PK_CPS * 16 + PK_NR * K * 2 + (T) * C * 4 + HCT_LW * PK_LOS * 4 +                   \
   PK_NW * PK_RPT * PK_TMAX * 4 + 256 * 4 + PK_TMAX * (C / RG) * 4 + C * 2 + 32)

/* Stage A's elementwise part for TB >= T tokens: y = fl(R' * w_norm) in
 * place, this block's share of R' kept for the store after the barrier
 * (every block's reads of resid are done by then), and this thread's
 * partial sums of squares. */
template <int TB>
HCT_DEV void pk_norm_part(float *y, const hct_u16 *wn, float *rsh, const float *pending, int s,
                          int g, int T, float (&a)[TB]) {
  const int tid = (int)threadIdx.x;
#pragma unroll
  for (int t = 0; t < TB; ++t) {
    a[t] = 0.0f;
    if (t >= T) continue;
#pragma unroll
    for (int i = 0; i < C / PK_NT; ++i) {
      const int c = tid + i * PK_NT;
      float x = y[t * C + c];
      if (pending != 0) {
        const long long at = ((long long)t * S + s) * C + c;
        x = x + pending[at];
        if (c / (C / RG) == g) rsh[t * (C / RG) + c % (C / RG)] = x;
      }
      a[t] = fmaf(x, x, a[t]);
      y[t * C + c] = x * hct_bf16_to_f32(wn[c]);
    }
  }
}

/* The warp sums of N <= 32 values at once, zero-padded to P = 2^M
 * (hcr_multi_sum): returns, in every lane, the sum of value lane >> (5-M). */
template <int N, int P>
HCT_DEV float pk_warp_sums(const float *v, int lane) {
  static_assert(N <= P && P <= 32, "pk_warp_sums: at most 32 values");
  float w[P];
#pragma unroll
  for (int i = 0; i < P; ++i) w[i] = i < N ? v[i] : 0.0f;
  return hcr_multi_sum<P>(w, lane);
}

#define PK_POW2(n) ((n) <= 1 ? 1 : (n) <= 2 ? 2 : (n) <= 4 ? 4 : (n) <= 8 ? 8 : (n) <= 16 ? 16 : 32)
#define PK_LOG2(p) ((p) == 1 ? 0 : (p) == 2 ? 1 : (p) == 4 ? 2 : (p) == 8 ? 3 : (p) == 16 ? 4 : 5)

/* Stores the warp sums of values [v0, v0 + N) of acc (value v = i*TB + t:
 * row i, token t) to out[i*TMAX + t], each from the first lane holding it. */
template <int TB, int N>
HCT_DEV void pk_store_sums(const float *acc, int v0, int lane, float *out) {
  constexpr int P = PK_POW2(N), M = PK_LOG2(P);
  const float r = pk_warp_sums<N, P>(acc + v0, lane);
  const int v = lane >> (5 - M);
  if ((lane & ((1 << (5 - M)) - 1)) == 0 && v < N)
    out[((v0 + v) / TB) * PK_TMAX + (v0 + v) % TB] = r;
}

/* Stage A's dots for TB tokens: thread (chunk ch, half h) takes rows
 * h*RPT .. h*RPT+RPT-1 of the block over the 8 columns of its chunk; the
 * sums over the chunks of a warp land in red[warp][i*TMAX + t]. */
template <int TB>
HCT_DEV void pk_down(const hct_u4 *wd, const float *y, float *red, int T) {
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int ch = tid % PK_CPS, h = tid / PK_CPS;
  hct_u4 w[PK_RPT];
#pragma unroll
  for (int i = 0; i < PK_RPT; ++i) w[i] = wd[(h * PK_RPT + i) * PK_CPS + ch];
  float acc[PK_RPT * TB];
#pragma unroll
  for (int t = 0; t < TB; ++t) {
    hct_f4 a = {0.0f, 0.0f, 0.0f, 0.0f}, b = a;
    if (t < T) {
      const hct_f4 *yp = (const hct_f4 *)(y + t * C + ch * 8);
      a = yp[0];
      b = yp[1];
    }
#pragma unroll
    for (int i = 0; i < PK_RPT; ++i) acc[i * TB + t] = hcr_dot8(w[i], a, b, 0.0f);
  }
  float *out = red + wp * PK_RPT * PK_TMAX;
  constexpr int N = PK_RPT * TB;
  if constexpr (N <= 32) {
    pk_store_sums<TB, N>(acc, 0, lane, out);
  } else {
    pk_store_sums<TB, 32>(acc, 0, lane, out);
    pk_store_sums<TB, N - 32>(acc, 32, lane, out);
  }
}

/* Stage C for channel c = cu0 + cl by one warp, TB >= T tokens: lane L
 * dots elements 10L .. 10L+9 of the rows s*C + c with lo (its slice in
 * lo2, [L][t][12]); the 4*TB sums at once; gates; the mix of token
 * lane < T with r (R' of that token, the four streams). */
template <int TB>
HCT_DEV void pk_upmix(const hct_u32 *wu, const float *lo2, const float (&r)[S], int lane, int cl,
                      int c, int T, float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16 HCT_LAB_TRACE) {
  constexpr int NV = S * TB;
  constexpr int M = PK_LOG2(NV);
  float v[NV];
  hct_u32 w[S][PK_UPE / 2];
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int i = 0; i < PK_UPE / 2; ++i) w[s][i] = wu[(s * PK_NCU + cl) * (K / 2) + lane * (PK_UPE / 2) + i];
#pragma unroll
  for (int t = 0; t < TB; ++t) {
    const hct_f4 *lp = (const hct_f4 *)(lo2 + lane * PK_LOS + t * 12);
    const hct_f4 l0 = lp[0], l1 = lp[1], l2 = lp[2];
    const float l[12] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w, l2.x, l2.y, l2.z, l2.w};
#pragma unroll
    for (int s = 0; s < S; ++s) {
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < PK_UPE / 2; ++i) {
        acc = fmaf(hct_bf16_lo(w[s][i]), l[2 * i], acc);
        acc = fmaf(hct_bf16_hi(w[s][i]), l[2 * i + 1], acc);
      }
      v[s * TB + t] = acc;
    }
  }
  HCT_LAB_STORE(11);
  const float gt = hcr_sigmoid(hcr_multi_sum<NV>(v, lane));
  HCT_LAB_STORE(12);
  hcr_gate_mix<TB, M>(gt, r, lane & (TB - 1), lane < T && lane < TB, c, mixed, mixed_bf16,
                      mixed_f16);
}

/* cp.async of R of stream s for T tokens into y and of w_norm of s into
 * wn (one group). */
HCT_DEV void pk_load_r(float *y, hct_u16 *wn, const float *resid, const hct_u16 *w_norm, int s, int T) {
  const int tid = (int)threadIdx.x;
  for (int p = tid; p < T * (C / 4); p += PK_NT) {
    const int t = p / (C / 4), q = p % (C / 4);
    hct_cp_async16(y + t * C + 4 * q, resid + ((long long)t * S + s) * C + 4 * q);
  }
  for (int p = tid; p < C / 8; p += PK_NT) hct_cp_async16(wn + 8 * p, w_norm + (long long)s * C + 8 * p);
  hct_cp_async_commit();
}

/* cp.async of the block's w_down rows over stream s (one group). */
HCT_DEV void pk_load_wd(hct_u4 *wd, const hct_u16 *w_down, int j0, int s) {
  for (int p = (int)threadIdx.x; p < PK_RPB * PK_CPS; p += PK_NT) {
    const int r = p / PK_CPS, ch = p % PK_CPS;
    hct_cp_async16(&wd[p], w_down + (long long)(j0 + r) * D + (long long)s * C + 8 * ch);
  }
  hct_cp_async_commit();
}

/* The block's w_up rows, 20 contiguous rows a stream: four bulk copies by
 * thread 0, completing on bar[0]. */
HCT_DEV void pk_load_wu(hct_u32 *wu, const hct_u16 *w_up, int cu0, hct_u64 *bar) {
  if (threadIdx.x != 0) return;
  hct_bulk_copy_runs(wu, w_up + (long long)cu0 * K, (long long)C * K * 2, PK_NCU * K * 2, S, &bar[0]);
}

template <int TB>
HCT_DEV void pk_read(float *resid, const float *pending, const hct_u16 *w_norm,
                     const hct_u16 *w_down, const hct_u16 *w_up, float *part, hct_u32 *ws,
                     float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T HCT_LAB_TRACE) {
  HCT_DYN_SHARED(hct_u4, pk_sm);
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int b = (int)blockIdx.x, s = b / RG, g = b % RG;
  const int j0 = g * PK_RPB, cu0 = b * PK_NCU;
  HCT_LAB_STORE(0);
  hct_grid_t grid = hct_grid_begin(ws);

  hct_u4 *wd = pk_sm;                                   /* [row][chunk] */
  hct_u32 *wu = (hct_u32 *)(wd + PK_RPB * PK_CPS);      /* [s'][cl][K/2] bf16 pairs */
  float *y = (float *)(wu + PK_NR * (K / 2));           /* [t][c] */
  float *lo2 = y + T * C;                               /* [lane][t][12] */
  float *red = lo2 + HCT_LW * PK_LOS;                   /* [warp][row][t] */
  float *ssq = red + PK_NW * PK_RPT * PK_TMAX;          /* squares [warp][t], then rs */
  float *rsh = ssq + 256;                               /* R' of its share, [t][C/RG] */
  hct_u16 *wn = (hct_u16 *)(rsh + PK_TMAX * (C / RG));  /* w_norm of stream s */
  hct_u64 *bar = (hct_u64 *)(wn + C);                   /* w_up's mbarrier */

  /* ---- start --------------------------------------------------------------
   * R of stream s for every token and w_norm of s by cp.async from every
   * thread (group 0, the first requests of the SM: the norm needs them
   * first), its w_down rows likewise (group 1); its w_up rows, 20
   * contiguous rows a stream, by four bulk copies once the norm is done
   * (bulk copies of R issued with those of the weights landed only with
   * the last of them: docs/perf/h200.md).  With PDL, w_down goes first,
   * before the wait for the previous kernel. */
  if (tid == 0) hct_bulk_init(&bar[0]);
  if (PDL) {
    hcr_pdl_launch();
    pk_load_wd(wd, w_down, j0, s);
    hcr_pdl_wait();
    pk_load_r(y, wn, resid, w_norm, s, T);
  } else {
    /* R first and alone (it lands in about 1 us, against 2.8 us when
     * requested together with w_down); the threads then stall issuing
     * w_down, so the norm starts at about the same time either way
     * (tools/lab, docs/perf/h200.md). */
    pk_load_r(y, wn, resid, w_norm, s, T);
    hct_cp_async_wait<0>();
    pk_load_wd(wd, w_down, j0, s);
  }
  /* R of stage C's channels (all four streams), read now: resid changes
   * after the barrier. */
  const int tm = lane % TB;
  float rr[S] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (lane < T)
#pragma unroll
    for (int sr = 0; sr < S; ++sr) rr[sr] = resid[((long long)tm * S + sr) * C + cu0 + wp];
  HCT_LAB_STORE(1);

  /* ---- stage A ---------------------------------------------------------- */
  if (PDL) hct_cp_async_wait<0>();
  __syncthreads(); /* R and w_norm (and the mbarrier's init) */
  HCT_LAB_STORE(2);
  {
    float a[TB];
    pk_norm_part<TB>(y, wn, rsh, pending, s, g, T, a);
    const float v = hcr_multi_sum<TB>(a, lane);
    /* Lane t << (5 - log2 TB) holds token t's warp sum. */
    constexpr int SH = 5 - PK_LOG2(TB);
    if ((lane & ((1 << SH) - 1)) == 0 && (lane >> SH) < T) ssq[wp * PK_TMAX + (lane >> SH)] = v;
  }
  __syncthreads(); /* y, the squares' partials */
  HCT_LAB_STORE(3);
  pk_load_wu(wu, w_up, cu0, bar);
  hct_cp_async_wait<0>();
  __syncthreads(); /* w_down */
  HCT_LAB_STORE(10);
  if (tid >= PK_NT - T) { /* the last warp: thread 0 goes on to the dots */
    const int t = tid - (PK_NT - T);
    float ss = 0.0f;
#pragma unroll
    for (int w = 0; w < PK_NW; ++w) ss += ssq[w * PK_TMAX + t];
    ssq[PK_NW * PK_TMAX + t] = rsqrtf(ss / (float)C + HCT_EPS);
  }
  pk_down<TB>(wd, y, red, T);
  HCT_LAB_STORE(4);
  __syncthreads();
  if (tid < PK_RPB * PK_TMAX) {
    const int r = tid / PK_TMAX, t = tid % PK_TMAX, h = r / PK_RPT;
    if (t < T) {
      float dot = 0.0f;
      for (int w = h * (PK_NW / 2); w < (h + 1) * (PK_NW / 2); ++w)
        dot += red[(w * PK_RPT + r % PK_RPT) * PK_TMAX + t];
      part[((long long)t * S + s) * K + j0 + r] = ssq[PK_NW * PK_TMAX + t] * dot;
    }
  }
  HCT_LAB_STORE(5);
  if (!hct_grid_sync(&grid)) return;
  HCT_LAB_STORE(6);
  if (pending != 0)
    for (int p = tid; p < T * (C / RG); p += PK_NT) {
      const int t = p / (C / RG), e = p % (C / RG);
      resid[((long long)t * S + s) * C + g * (C / RG) + e] = rsh[p];
    }

  /* ---- stage B: lo, each lane's slice of K for stage C ------------------ */
  for (int p = tid; p < PK_TMAX * K; p += PK_NT) {
    const int t = p / K, k = p % K;
    float l = 0.0f;
    if (t < T) {
      const float *q = part + (long long)t * S * K + k;
      l = ((hcr_ldcg(q) + hcr_ldcg(q + K)) + hcr_ldcg(q + 2 * K)) + hcr_ldcg(q + 3 * K);
    }
    lo2[(k / PK_UPE) * PK_LOS + t * 12 + k % PK_UPE] = l;
  }
  HCT_LAB_STORE(7);
  hct_bulk_wait(&bar[0], 0);
  __syncthreads(); /* lo */
  HCT_LAB_STORE(8);

  /* ---- stage C: up, gates, mix ------------------------------------------ */
  {
    const int cl = wp, c = cu0 + cl;
    if (pending != 0 && lane < T)
#pragma unroll
      for (int sr = 0; sr < S; ++sr) rr[sr] = rr[sr] + pending[((long long)tm * S + sr) * C + c];
    pk_upmix<TB>(wu, lo2, rr, lane, cl, c, T, mixed, mixed_bf16, mixed_f16 HCT_LAB_PASS);
  }
  HCT_LAB_STORE(9);
}

#define PK_ARGS resid, pending, w_norm, w_down, w_up, part, ws, mixed, mixed_bf16, mixed_f16, T HCT_LAB_PASS
#define PK_PARAMS                                                                               \
  float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,            \
      const hct_u16 *w_up, float *part, hct_u32 *ws, float *mixed, hct_u16 *mixed_bf16,         \
      hct_u16 *mixed_f16, int T
HCT_DEV void pk_dispatch(PK_PARAMS HCT_LAB_TRACE) {
  if (T <= 1)
    pk_read<1>(PK_ARGS);
  else if (T <= 2)
    pk_read<2>(PK_ARGS);
  else if (T <= 4)
    pk_read<4>(PK_ARGS);
  else
    pk_read<8>(PK_ARGS);
}

#ifndef HCR_LAB
/* Grid S*RG, block 640, dynamic shared memory PK_SMEM(T) (the manifest's
 * expression). */
HCT_ENTRY void __launch_bounds__(PK_NT, 1) hc_ps_read(PK_PARAMS) {
  pk_dispatch(resid, pending, w_norm, w_down, w_up, part, ws, mixed, mixed_bf16, mixed_f16, T);
}
#endif
