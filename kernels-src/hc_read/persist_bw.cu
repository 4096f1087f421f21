/*
 * persist_bw: hc_read in one persistent launch, bitwise equal to v1, one
 * grid barrier.
 *
 * The canonical order fixes each (token, stream) norm's per-thread fmaf
 * chains and butterflies, each down row's 32 lane chains and butterfly,
 * each up row's; not which block computes them.  So every block computes
 * the whole norm itself (it needs every stream's scale anyway), and owns
 * whole rows of w_down: NB blocks, one per SM, 640 threads; block b owns
 * rows j = b, b + NB, ... (< K) and the channels C/NB*b .. of the up and
 * mix.  Every load is contiguous.
 *
 *   start    by cp.async: w_norm and R of the first tokens (group 0), its
 *            w_down rows (group 1), the w_up rows of its channels (group
 *            2).  With PDL the weights are requested before the wait for
 *            the previous kernel.
 *   passes   TP tokens at a time (shared memory holds R of TP tokens):
 *            R of the pass (after the first), R' = fl(R + P); the norms
 *            of every (token, stream) of the pass, the canonical per-
 *            thread chains laid out as "virtual warps" (a warp takes the
 *            32 chains of one canonical warp, then its butterfly), the
 *            8-warp butterfly; xn = fl(fl(R' * w_norm) * rs) in place; the
 *            lane chains of its rows, a warp per (row, token), then the
 *            row's butterfly: lo, stored.
 *   barrier  (hct_grid.h, arrive and wait split: its share of R' is
 *            computed between)
 *   end      every block gathers lo; up and mix by hcr_upmix_warp (fast_common.h: canonical lane partials, sums by
 *            recursive halving, gates and mix in registers); its share of R' stored.
 *
 * Parameters: NB blocks (<= SM_COUNT, all resident), TP tokens a pass,
 * PDL (programmatic dependent launch, sm_90).
 *
 * Scratch: lo (T*K floats), ws (the barrier's state, zeroed once at
 * allocation: hct_grid.h).
 *
 * Built by nvcc too (tools/lab/): HCR_LAB leaves the entry out, and every
 * stage can record the global timer into `trace` (hct_lab.h: without
 * HCR_LAB, as in hctune, the HCT_LAB_ hooks and the parameter are not
 * there).
 */
#include "hc_read.h"
#include "hct_grid.h"
/* No L2 prefetch parameter here: the weights go straight to shared memory. */
#ifndef PF
#define PF 0
#endif
#include "fast_common.h"
#include "persist_common.h"

#ifndef NB
#error "persist_bw: NB must be defined"
#endif
#ifndef TP
#error "persist_bw: TP must be defined"
#endif
#ifndef PDL
#error "persist_bw: PDL must be defined"
#endif
#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "persist_bw: needs the copy engine's bulk copies (sm_90 or later)"
#endif
#include "hct_bulk.h"
#include "hct_lab.h"

#define PB_NT 640                     /* threads */
#define PB_NW (PB_NT / HCT_LW)        /* warps: 20 */
#define PB_RMAX ((K + NB - 1) / NB)   /* rows a block, at most */
#define PB_NCU (C / NB)               /* channels a block */
#define PB_UPC HCR_UP_CHUNKS          /* chunks of a w_up row: 40 */
#define PB_TMAX HCR_PERSIST_TMAX      /* tokens: 8 */
#define PB_VW (HCR_NORM_THREADS / HCT_LW) /* warps of the canonical norm: 8 */
#define PB_RS (TP * S * PB_VW)        /* red: the warp sums, then rs from here */
static_assert(PB_RS + TP * S <= 128, "persist_bw: red holds a pass's norm sums and scales");
static_assert(C % NB == 0, "persist_bw: channels split evenly");
static_assert(PB_NCU <= PB_NW, "persist_bw: the end takes a channel a warp");
static_assert(PB_RMAX * TP <= PB_NW, "persist_bw: a pass takes a warp per (row, token)");
static_assert(C % HCR_NORM_THREADS == 0, "persist_bw: the norm's chains are whole");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "persist_bw: a row of w_up is one or two chunks per lane");
static_assert(S == 4, "persist_bw: the mix is written for 4 streams");

/* Shared memory, in bytes (the manifest's smem expression is this sum). */
#define PB_SMEM(T)                                                                              \
  (PB_RMAX * D * 2 + PB_NCU * S * PB_UPC * 16 + ((T) < TP ? (T) : TP) * D * 4 + D * 2 +        \
   2 * PB_TMAX * (K / 8) * 16 + 128 * 4 + 32)


/* cp.async of the block's w_down rows b + NB*i (one group). */
HCT_DEV void pb_load_wd(hct_u4 *wd, const hct_u16 *w_down, int b, int nrow) {
  for (int p = (int)threadIdx.x; p < nrow * (D / 8); p += PB_NT) {
    const int i = p / (D / 8), ch = p % (D / 8);
    hct_cp_async16(&wd[p], w_down + (long long)(b + NB * i) * D + 8 * ch);
  }
  hct_cp_async_commit();
}

/* A block's share of R' for the store after the barrier: D/NB elements
 * from b*D/NB in each token, PB_SH of them a thread.  Element i of the
 * thread's (token i / PB_SH, k = i % PB_SH): its offset in resid, or -1. */
#define PB_SH ((D / NB + PB_NT - 1) / PB_NT)
HCT_DEV long long pb_share_at(int i, int T) {
  const int t = i / PB_SH, e = (int)threadIdx.x + (i % PB_SH) * PB_NT;
  if (t >= T || e >= D / NB) return -1;
  return (long long)t * D + (long long)blockIdx.x * (D / NB) + e;
}

/* cp.async of R of tokens t0 .. t0+n-1 into xr (one group). */
HCT_DEV void pb_load_r(float *xr, const float *resid, int t0, int n) {
  for (int p = (int)threadIdx.x; p < n * (D / 4); p += PB_NT)
    hct_cp_async16(xr + 4 * p, resid + (long long)t0 * D + 4 * p);
  hct_cp_async_commit();
}

/* One pass over tokens t0 .. t0+n-1, whose R is in xr (landed, visible):
 * the canonical norms, xn in place, the lane chains of the block's rows,
 * lo stored.  `nrow` rows j = b + NB*i. */
HCT_DEV void pb_pass(float *xr, const hct_u16 *wn, const hct_u4 *wd, const float *pending, float *red,
                     float *lo, int t0, int n, int nrow, bool first, hct_u64 *bar, hct_u4 *wu,
                     const hct_u16 *w_up, int cu0 HCT_LAB_TRACE) {
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int b = (int)blockIdx.x;
  /* R' = fl(R + P), once per element, in place. */
  if (pending != 0)
    for (int p = tid; p < n * D; p += PB_NT) xr[p] = xr[p] + pending[(long long)t0 * D + p];
  if (pending != 0) __syncthreads();
  /* Norm partials: virtual warp v = (pair, w), pair = tt*S + s; lane L
   * holds thread i = 32w + L of the canonical 256: fmaf over c = i + 256m. */
  for (int v = wp; v < n * S * PB_VW; v += PB_NW) {
    const int pair = v / PB_VW, w = v % PB_VW;
    const float *x = xr + pair * C + HCT_LW * w + lane; /* pair*C = tt*D + s*C */
    float a = 0.0f;
#pragma unroll
    for (int m = 0; m < C / HCR_NORM_THREADS; ++m) a = fmaf(x[m * HCR_NORM_THREADS], x[m * HCR_NORM_THREADS], a);
    a = hct_warp_sum(a);
    if (lane == 0) red[pair * PB_VW + w] = a;
  }
  if (first) {
    HCT_LAB_STORE(3);
    /* The first norm is done: now w_up (see pb_read's start). */
    if (threadIdx.x == 0)
      hct_bulk_copy_runs(wu, w_up + (long long)cu0 * K, (long long)C * K * 2, PB_NCU * K * 2, S, bar);
  }
  __syncthreads();
  /* The 8-warp butterfly of each pair: warp `pair`, warp w's sum in lane w. */
  if (wp < n * S) {
    float v = lane < PB_VW ? red[wp * PB_VW + lane] : 0.0f;
    v += hct_shfl_xor(v, 4);
    v += hct_shfl_xor(v, 2);
    v += hct_shfl_xor(v, 1);
    if (lane == 0) red[PB_RS + wp] = rsqrtf(v / (float)C + HCT_EPS);
  }
  __syncthreads();
  const float *rs = red + PB_RS;
  /* xn = fl(fl(R' * w_norm) * rs), in place (two roundings, as v1). */
  for (int p = tid; p < n * D; p += PB_NT) {
    const int tt = p / D, k = p % D;
    const float y = xr[p] * hct_bf16_to_f32(wn[k]);
    xr[p] = y * rs[tt * S + k / C];
  }
  if (first) {
    hct_cp_async_wait<0>(); /* w_down */
    HCT_LAB_STORE(4);
  }
  __syncthreads();
  /* The lane chains: warp (row i, token tt), lane L walks chunks L + 32q. */
  if (wp < nrow * n) {
    const int i = wp / n, tt = wp % n;
    const float acc = hcr_down_sum<8>(wd + i * (D / 8), (const hct_f4 *)(xr + tt * D), lane);
    if (lane == 0) lo[(long long)(t0 + tt) * K + b + NB * i] = acc;
  }
  if (t0 == 0) HCT_LAB_STORE(5);
  __syncthreads(); /* xr is reloaded by the next pass */
}

template <int TB>
HCT_DEV void pb_read(float *resid, const float *pending, const hct_u16 *w_norm,
                     const hct_u16 *w_down, const hct_u16 *w_up, float *lo, hct_u32 *ws,
                     float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T HCT_LAB_TRACE) {
  HCT_DYN_SHARED(hct_u4, pb_sm);
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int b = (int)blockIdx.x, cu0 = b * PB_NCU;
  const int nrow = (K - b + NB - 1) / NB;
  const int tp = T < TP ? T : TP;
  HCT_LAB_STORE(0);
  hct_grid_t grid = hct_grid_begin(ws);

  hct_u4 *wd = pb_sm;                                  /* [i][chunk] rows b + NB*i */
  hct_u4 *wu = wd + PB_RMAX * (D / 8);                 /* [s][cl][chunk] */
  float *xr = (float *)(wu + PB_NCU * S * PB_UPC);     /* [tt][D]: R, R', then xn */
  hct_u16 *wn = (hct_u16 *)(xr + tp * D);              /* w_norm */
  hct_f4 *slo = (hct_f4 *)(wn + D);                    /* lo, [half][t][chunk] */
  float *red = (float *)(slo + 2 * PB_TMAX * (K / 8)); /* 128 floats: norm sums, rs */
  hct_u64 *bar = (hct_u64 *)(red + 128);               /* w_up's mbarrier */

  /* ---- start --------------------------------------------------------------
   * By cp.async from every thread: w_norm and R of the first pass (group
   * 0, the SM's first requests: the norm needs them first), its w_down
   * rows (group 1); its w_up rows, 20 contiguous rows a stream, by four
   * bulk copies once the first norm is done (bulk copies of R issued with
   * those of the weights landed only with the last of them:
   * docs/perf/h200.md).  With PDL, w_norm and w_down go first, before the
   * wait for the previous kernel. */
  if (tid == 0) hct_bulk_init(bar);
  if (PDL) {
    hcr_pdl_launch();
    for (int p = tid; p < D / 8; p += PB_NT) hct_cp_async16(wn + 8 * p, w_norm + 8 * p);
    pb_load_wd(wd, w_down, b, nrow);
    hcr_pdl_wait();
    pb_load_r(xr, resid, 0, tp);
  } else {
    /* R first and alone (see persist.cu). */
    for (int p = tid; p < D / 8; p += PB_NT) hct_cp_async16(wn + 8 * p, w_norm + 8 * p);
    pb_load_r(xr, resid, 0, tp);
    hct_cp_async_wait<0>();
    pb_load_wd(wd, w_down, b, nrow);
  }
  /* R of the end's channels, read now (resid changes after the barrier). */
  const int tm = lane % TB;
  float rr[1][S] = {{0.0f, 0.0f, 0.0f, 0.0f}};
  if (wp < PB_NCU && lane < T && lane < TB)
#pragma unroll
    for (int s = 0; s < S; ++s) rr[0][s] = resid[((long long)tm * S + s) * C + cu0 + wp];
  HCT_LAB_STORE(1);

  /* ---- passes ------------------------------------------------------------- */
  for (int t0 = 0; t0 < T; t0 += tp) {
    const int n = T - t0 < tp ? T - t0 : tp;
    if (t0 > 0) {
      pb_load_r(xr, resid, t0, n);
      hct_cp_async_wait<0>();
    } else if (PDL) {
      hct_cp_async_wait<0>(); /* w_norm, w_down, R */
    }
    __syncthreads();
    if (t0 == 0) HCT_LAB_STORE(2);
    pb_pass(xr, wn, wd, pending, red, lo, t0, n, nrow, t0 == 0, bar, wu, w_up, cu0 HCT_LAB_PASS);
  }
  HCT_LAB_STORE(6);
  hct_grid_arrive(&grid);
  /* Its share of R' (T*D/NB elements from b*D/NB in each token), for after
   * the barrier: every block's reads of resid are done by then. */
  float rsh[PB_TMAX * PB_SH];
  if (pending != 0)
#pragma unroll
    for (int i = 0; i < PB_TMAX * PB_SH; ++i) {
      const long long at = pb_share_at(i, T);
      if (at >= 0) rsh[i] = resid[at] + pending[at];
    }
  if (!hct_grid_wait(&grid)) return;
  HCT_LAB_STORE(7);

  /* ---- end ---------------------------------------------------------------- */
  if (pending != 0)
#pragma unroll
    for (int i = 0; i < PB_TMAX * PB_SH; ++i) {
      const long long at = pb_share_at(i, T);
      if (at >= 0) resid[at] = rsh[i];
    }
  for (int p = tid; p < TB * K; p += PB_NT) {
    const int t = p / K, k = p % K;
    ((float *)slo)[(((k >> 2) & 1) * PB_TMAX + t) * (K / 2) + (k >> 3) * 4 + (k & 3)] =
        t < T ? hcr_ldcg(lo + p) : 0.0f;
  }
  hct_bulk_wait(bar, 0);
  __syncthreads();
  HCT_LAB_STORE(8);
  const bool two = lane + HCT_LW < PB_UPC;
  if (wp < PB_NCU) {
    const int cl = wp, c = cu0 + cl;
    hct_u4 w[1][S][2];
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const hct_u4 *row = wu + (s * PB_NCU + cl) * PB_UPC;
      w[0][s][0] = row[lane];
      w[0][s][1] = two ? row[lane + HCT_LW] : hct_u4{0, 0, 0, 0};
    }
    if (pending != 0 && lane < T && lane < TB)
#pragma unroll
      for (int s = 0; s < S; ++s) rr[0][s] = rr[0][s] + pending[((long long)tm * S + s) * C + c];
    hcr_upmix_warp<TB, 1>(w, rr, slo, lane, c, T, mixed, mixed_bf16, mixed_f16);
  }
  HCT_LAB_STORE(9);
}

#define PB_ARGS resid, pending, w_norm, w_down, w_up, lo, ws, mixed, mixed_bf16, mixed_f16, T
#define PB_PARAMS                                                                               \
  float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,            \
      const hct_u16 *w_up, float *lo, hct_u32 *ws, float *mixed, hct_u16 *mixed_bf16,           \
      hct_u16 *mixed_f16, int T
HCT_DEV void pb_dispatch(PB_PARAMS HCT_LAB_TRACE) {
  if (T <= 1)
    pb_read<1>(PB_ARGS HCT_LAB_PASS);
  else if (T <= 2)
    pb_read<2>(PB_ARGS HCT_LAB_PASS);
  else if (T <= 4)
    pb_read<4>(PB_ARGS HCT_LAB_PASS);
  else
    pb_read<8>(PB_ARGS HCT_LAB_PASS);
}

#ifndef HCR_LAB
/* Grid NB, block 640, dynamic shared memory PB_SMEM(T) (the manifest's
 * expression). */
HCT_ENTRY void __launch_bounds__(PB_NT, 1) hc_pb_read(PB_PARAMS) { pb_dispatch(PB_ARGS); }
#endif
