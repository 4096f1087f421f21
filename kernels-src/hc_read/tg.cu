/*
 * tg: hc_read in four launches, bitwise equal to v1, with a down kernel
 * that takes a token group from blockIdx.y.
 *
 *   hc_tg_norm   v2's norm, one block per (token, stream), plus the L2
 *                prefetch of both weights over SM_COUNT blocks (as
 *                upmix_dec).
 *   hc_tg_down   grid (K/RPB, cdiv(T, TG)): one warp per row as in v1, but
 *                for the TG tokens of its group at once, so a row of w_down
 *                is read once per group instead of once per token; few rows
 *                per block (RPB) make more blocks when T is small.  Each
 *                lane holds QB = 8 chunks of weights in registers and loads
 *                the next 8 while it uses these.
 *   hc_tg_up     one warp per row of w_up for all T tokens (w_up read
 *                once); the T butterflies run together by recursive halving
 *                (TB - 1 + 5 - log2 TB shuffles instead of 5 T; the sums
 *                are the canonical butterfly's).
 *   hc_tg_mix    v1's mix.
 *
 * Every lane partial is the canonical fmaf chain and every butterfly the
 * canonical tree, so the bits are v1's.
 *
 * Parameters: PF (as upmix_dec), RPB rows per down block, TG tokens per
 * down block, UPW rows (warps) per up block.
 *
 * Scratch: xn T*D*4, lo T*K*4, gate T*D*4.
 */
#include "hc_read.h"

#ifndef PF
#error "tg: PF must be defined"
#endif
#ifndef RPB
#error "tg: RPB must be defined"
#endif
#ifndef TG
#error "tg: TG must be defined"
#endif
#ifndef UPW
#error "tg: UPW must be defined"
#endif

static_assert(K % RPB == 0, "tg: RPB must divide K");
static_assert(D % UPW == 0, "tg: UPW must divide D");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "tg: a row of w_up is one or two chunks per lane");

/* ---- step 1: v2's norm and the L2 prefetch (fast_common.h) ---------------*/

#include "fast_common.h"

/* Grid (max(T*S, PF ? SM_COUNT : 0)), block 256. */
HCT_ENTRY void __launch_bounds__(HCR_NORM_THREADS)
    hc_tg_norm(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,
               const hct_u16 *w_up, float *xn, int T) {
  __shared__ float red[9];
  hcr_fast_norm(resid, pending, w_norm, w_down, w_up, xn, T, red);
}

/* ---- step 2 ---------------------------------------------------------------*/

#define TG_QB 8 /* chunks per lane in registers at a time */
static_assert(HCR_DOWN_Q % TG_QB == 0, "tg: the 40 steps are batches of 8");

/* Grid (K/RPB, cdiv(T, TG)), block RPB*32: warp w takes row
 * blockIdx.x*RPB + w for tokens blockIdx.y*TG .. +TG-1 (those < T). */
HCT_ENTRY void __launch_bounds__(RPB *HCT_LW)
    hc_tg_down(const hct_u16 *w_down, const float *xn, float *lo, int T) {
  const int lane = (int)threadIdx.x % HCT_LW;
  const int j = (int)blockIdx.x * RPB + (int)threadIdx.x / HCT_LW;
  const int t0 = (int)blockIdx.y * TG;
  const hct_u4 *w = (const hct_u4 *)(w_down + (long long)j * D);
  const hct_f4 *HCT_RESTRICT x[TG];
  float acc[TG];
#pragma unroll
  for (int u = 0; u < TG; ++u) {
    x[u] = (const hct_f4 *)(xn + (long long)(t0 + u < T ? t0 + u : 0) * D);
    acc[u] = 0.0f;
  }
  hct_u4 cur[TG_QB], nxt[TG_QB];
#pragma unroll
  for (int m = 0; m < TG_QB; ++m) cur[m] = w[lane + HCT_LW * m];
  hcr_pdl_launch();
  hcr_pdl_wait();
#pragma unroll 1
  for (int qb = 0; qb < HCR_DOWN_Q; qb += TG_QB) {
    if (qb + TG_QB < HCR_DOWN_Q) {
#pragma unroll
      for (int m = 0; m < TG_QB; ++m) nxt[m] = w[lane + HCT_LW * (qb + TG_QB + m)];
    }
#pragma unroll
    for (int m = 0; m < TG_QB; ++m) {
      const int c = lane + HCT_LW * (qb + m);
#pragma unroll
      for (int u = 0; u < TG; ++u) acc[u] = hcr_dot8(cur[m], x[u][2 * c], x[u][2 * c + 1], acc[u]);
    }
#pragma unroll
    for (int m = 0; m < TG_QB; ++m) cur[m] = nxt[m];
  }
#pragma unroll
  for (int u = 0; u < TG; ++u) {
    const float v = hct_warp_sum(acc[u]);
    if (lane == 0 && t0 + u < T) lo[(long long)(t0 + u) * K + j] = v;
  }
}

/* ---- step 3 ---------------------------------------------------------------*/

/*
 * Reduces N = 2^M sums of 32 lane partials at once (M <= 5): halving
 * stages at offsets 16, 8, ... (a lane keeps the lower half of its values
 * when its offset bit is clear, the upper half when set, and adds its
 * partner's copy of each kept value), then plain butterfly stages for the
 * offsets left.  Partners always hold the same sums, so every sum is the
 * canonical butterfly's, bit for bit.  Returns the sum of value
 * lane >> (5 - M).
 */
/* One halving stage at offset OFF over the first N values. */
template <int N, int OFF>
HCT_DEV void tg_halve(float *v, int lane) {
  const bool up = (lane & OFF) != 0;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const float keep = up ? v[N / 2 + i] : v[i];
    const float send = up ? v[i] : v[N / 2 + i];
    v[i] = keep + hct_shfl_xor(send, OFF);
  }
}

template <int N>
HCT_DEV float tg_multi_sum(float (&v)[N], int lane) {
  static_assert(N >= 1 && N <= HCT_LW && (N & (N - 1)) == 0, "tg_multi_sum: N is 2^M <= 32");
  if (N >= 2) tg_halve<N, 16>(v, lane);
  if (N >= 4) tg_halve<(N >= 4 ? N / 2 : 2), 8>(v, lane);
  if (N >= 8) tg_halve<(N >= 8 ? N / 4 : 2), 4>(v, lane);
  if (N >= 16) tg_halve<(N >= 16 ? N / 8 : 2), 2>(v, lane);
  if (N >= 32) tg_halve<(N >= 32 ? N / 16 : 2), 1>(v, lane);
  float a = v[0];
  /* The offsets left, still in the canonical order (largest first). */
  if (N < 2) a += hct_shfl_xor(a, 16);
  if (N < 4) a += hct_shfl_xor(a, 8);
  if (N < 8) a += hct_shfl_xor(a, 4);
  if (N < 16) a += hct_shfl_xor(a, 2);
  if (N < 32) a += hct_shfl_xor(a, 1);
  return a;
}


/* Row i for TB >= T tokens: lane partials, then the TB sums at once. */
template <int TB>
HCT_DEV void tg_up_row(hct_u4 w0, hct_u4 w1, const float *lo, float *gate, int lane, int i, int T) {
  constexpr int M = TB == 1 ? 0 : TB == 2 ? 1 : TB == 4 ? 2 : 3;
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS;
  float v[TB];
#pragma unroll
  for (int t = 0; t < TB; ++t) {
    const hct_f4 *l = (const hct_f4 *)(lo + (long long)(t < T ? t : 0) * K);
    float acc = hcr_dot8(w0, l[2 * lane], l[2 * lane + 1], 0.0f);
    if (two) acc = hcr_dot8(w1, l[2 * (lane + HCT_LW)], l[2 * (lane + HCT_LW) + 1], acc);
    v[t] = acc;
  }
  const float u = tg_multi_sum<TB>(v, lane);
  /* Lane L holds token L >> (5 - M); its first lane writes. */
  const int t = lane >> (5 - M);
  if ((lane & ((1 << (5 - M)) - 1)) == 0 && t < T) gate[(long long)t * D + i] = hcr_sigmoid(u);
}

/* Grid (D/UPW), block UPW*32: warp w takes row blockIdx.x*UPW + w. */
HCT_ENTRY void __launch_bounds__(UPW *HCT_LW)
    hc_tg_up(const hct_u16 *w_up, const float *lo, float *gate, int T) {
  const int lane = (int)threadIdx.x % HCT_LW;
  const int i = (int)blockIdx.x * UPW + (int)threadIdx.x / HCT_LW;
  const hct_u4 *row = (const hct_u4 *)(w_up + (long long)i * K);
  const hct_u4 w0 = row[lane];
  const hct_u4 w1 = lane + HCT_LW < HCR_UP_CHUNKS ? row[lane + HCT_LW] : hct_u4{0, 0, 0, 0};
  hcr_pdl_launch();
  hcr_pdl_wait();
  if (T <= 1) tg_up_row<1>(w0, w1, lo, gate, lane, i, T);
  else if (T <= 2) tg_up_row<2>(w0, w1, lo, gate, lane, i, T);
  else if (T <= 4) tg_up_row<4>(w0, w1, lo, gate, lane, i, T);
  else tg_up_row<8>(w0, w1, lo, gate, lane, i, T);
}

/* ---- step 4 ---------------------------------------------------------------*/

/* Grid (cdiv(T*C, 256)), block 256: v1's mix. */
HCT_ENTRY void __launch_bounds__(256)
    hc_tg_mix(const float *resid, const float *gate, float *mixed, hct_u16 *mixed_bf16,
              hct_u16 *mixed_f16, int T) {
  hcr_pdl_launch();
  hcr_pdl_wait();
  const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;
  if (idx >= (long long)T * C) return;
  const int t = (int)(idx / C), c = (int)(idx % C);
  hcr_mix(t, c, resid, gate, mixed, mixed_bf16, mixed_f16);
}
