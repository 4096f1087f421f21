/*
 * up4: hc_read in four launches, bitwise equal to v1, with an up kernel
 * made for several tokens.
 *
 *   hc_up4_norm  v2's norm plus the L2 prefetch of both weights (as tg).
 *   hc_up4_down  tg's down: a warp per row for a group of TG tokens.
 *   hc_up4_up    a warp takes 8 rows of w_up as two batches of 4: the
 *                weights of both batches (8 rows x 2 chunks per lane) are
 *                loaded before the first dot, then per batch the 4 x TB
 *                canonical lane partials (4 rows x TB tokens, TB the least
 *                power of two >= T) are reduced together by recursive
 *                halving: the butterflies of all rows and tokens interleave
 *                (31 shuffles for 32 sums), each sum still the canonical
 *                tree.  w_up is read once for all tokens.
 *   hc_up4_mix   v1's mix.
 *
 * Parameters: PF (as upmix_dec), RPB and TG (as tg), UPW warps per up
 * block (8 rows each).
 *
 * Scratch: xn T*D*4, lo T*K*4, gate T*D*4.
 */
#include "hc_read.h"

#ifndef PF
#error "up4: PF must be defined"
#endif
#ifndef RPB
#error "up4: RPB must be defined"
#endif
#ifndef TG
#error "up4: TG must be defined"
#endif
#ifndef UPW
#error "up4: UPW must be defined"
#endif

static_assert(K % RPB == 0, "up4: RPB must divide K");
static_assert(D % (8 * UPW) == 0, "up4: 8*UPW must divide D");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "up4: a row of w_up is one or two chunks per lane");

/* ---- step 1: v2's norm and the L2 prefetch (fast_common.h) ---------------*/

#include "fast_common.h"

/* Grid (max(T*S, PF ? SM_COUNT : 0)), block 256. */
HCT_ENTRY void __launch_bounds__(HCR_NORM_THREADS)
    hc_up4_norm(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,
               const hct_u16 *w_up, float *xn, int T) {
  __shared__ float red[9];
  hcr_fast_norm(resid, pending, w_norm, w_down, w_up, xn, T, red);
}

/* ---- step 2 ---------------------------------------------------------------*/

#define UP4_QB 8 /* chunks per lane in registers at a time */
static_assert(HCR_DOWN_Q % UP4_QB == 0, "up4: the 40 steps are batches of 8");

/* Grid (K/RPB, cdiv(T, TG)), block RPB*32: warp w takes row
 * blockIdx.x*RPB + w for tokens blockIdx.y*TG .. +TG-1 (those < T). */
HCT_ENTRY void __launch_bounds__(RPB *HCT_LW)
    hc_up4_down(const hct_u16 *w_down, const float *xn, float *lo, int T) {
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
  hct_u4 cur[UP4_QB], nxt[UP4_QB];
#pragma unroll
  for (int m = 0; m < UP4_QB; ++m) cur[m] = w[lane + HCT_LW * m];
  hcr_pdl_launch();
  hcr_pdl_wait();
#pragma unroll 1
  for (int qb = 0; qb < HCR_DOWN_Q; qb += UP4_QB) {
    if (qb + UP4_QB < HCR_DOWN_Q) {
#pragma unroll
      for (int m = 0; m < UP4_QB; ++m) nxt[m] = w[lane + HCT_LW * (qb + UP4_QB + m)];
    }
#pragma unroll
    for (int m = 0; m < UP4_QB; ++m) {
      const int c = lane + HCT_LW * (qb + m);
#pragma unroll
      for (int u = 0; u < TG; ++u) acc[u] = hcr_dot8(cur[m], x[u][2 * c], x[u][2 * c + 1], acc[u]);
    }
#pragma unroll
    for (int m = 0; m < UP4_QB; ++m) cur[m] = nxt[m];
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
HCT_DEV void up4_halve(float *v, int lane) {
  const bool up = (lane & OFF) != 0;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const float keep = up ? v[N / 2 + i] : v[i];
    const float send = up ? v[i] : v[N / 2 + i];
    v[i] = keep + hct_shfl_xor(send, OFF);
  }
}

template <int N>
HCT_DEV float up4_multi_sum(float (&v)[N], int lane) {
  static_assert(N >= 1 && N <= HCT_LW && (N & (N - 1)) == 0, "up4_multi_sum: N is 2^M <= 32");
  if (N >= 2) up4_halve<N, 16>(v, lane);
  if (N >= 4) up4_halve<(N >= 4 ? N / 2 : 2), 8>(v, lane);
  if (N >= 8) up4_halve<(N >= 8 ? N / 4 : 2), 4>(v, lane);
  if (N >= 16) up4_halve<(N >= 16 ? N / 8 : 2), 2>(v, lane);
  if (N >= 32) up4_halve<(N >= 32 ? N / 16 : 2), 1>(v, lane);
  float a = v[0];
  /* The offsets left, still in the canonical order (largest first). */
  if (N < 2) a += hct_shfl_xor(a, 16);
  if (N < 4) a += hct_shfl_xor(a, 8);
  if (N < 8) a += hct_shfl_xor(a, 4);
  if (N < 16) a += hct_shfl_xor(a, 2);
  if (N < 32) a += hct_shfl_xor(a, 1);
  return a;
}


/* One batch of 4 rows (weights w[r][0..1]) for TB >= T tokens: value
 * r*TB + t is the lane partial of row i0 + r, token t. */
template <int TB>
HCT_DEV void up4_batch(const hct_u4 (&w)[4][2], const float *lo, float *gate, int lane, int i0,
                       int T) {
  constexpr int NV = 4 * TB;
  constexpr int M = TB == 1 ? 2 : TB == 2 ? 3 : TB == 4 ? 4 : 5;
  static_assert((1 << M) == NV, "up4: 4 rows x TB tokens is 2^M");
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS;
  float v[NV];
#pragma unroll
  for (int t = 0; t < TB; ++t) {
    const hct_f4 *l = (const hct_f4 *)(lo + (long long)(t < T ? t : 0) * K);
    const hct_f4 a = l[2 * lane], b = l[2 * lane + 1];
    hct_f4 a2 = {0.0f, 0.0f, 0.0f, 0.0f}, b2 = a2;
    if (two) {
      a2 = l[2 * (lane + HCT_LW)];
      b2 = l[2 * (lane + HCT_LW) + 1];
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float acc = hcr_dot8(w[r][0], a, b, 0.0f);
      if (two) acc = hcr_dot8(w[r][1], a2, b2, acc);
      v[r * TB + t] = acc;
    }
  }
  const float u = up4_multi_sum<NV>(v, lane);
  /* Lane L holds value L >> (5 - M); the first lane of each run writes. */
  const int idx = lane >> (5 - M), r = idx / TB, t = idx % TB;
  if ((lane & ((1 << (5 - M)) - 1)) == 0 && t < T)
    gate[(long long)t * D + i0 + r] = hcr_sigmoid(u);
}

template <int TB>
HCT_DEV void up4_rows(const hct_u4 (&w)[2][4][2], const float *lo, float *gate, int lane, int i0,
                      int T) {
  up4_batch<TB>(w[0], lo, gate, lane, i0, T);
  up4_batch<TB>(w[1], lo, gate, lane, i0 + 4, T);
}

/* Grid (D/(8*UPW)), block UPW*32: warp w takes rows (blockIdx.x*UPW + w)*8
 * .. +7. */
HCT_ENTRY void __launch_bounds__(UPW *HCT_LW)
    hc_up4_up(const hct_u16 *w_up, const float *lo, float *gate, int T) {
  const int lane = (int)threadIdx.x % HCT_LW;
  const int i0 = ((int)blockIdx.x * UPW + (int)threadIdx.x / HCT_LW) * 8;
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS;
  /* Both batches in flight before any dot. */
  hct_u4 w[2][4][2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const hct_u4 *row = (const hct_u4 *)(w_up + (long long)(i0 + 4 * b + r) * K);
      w[b][r][0] = row[lane];
      w[b][r][1] = two ? row[lane + HCT_LW] : hct_u4{0, 0, 0, 0};
    }
  hcr_pdl_launch();
  hcr_pdl_wait();
  if (T <= 1) up4_rows<1>(w, lo, gate, lane, i0, T);
  else if (T <= 2) up4_rows<2>(w, lo, gate, lane, i0, T);
  else if (T <= 4) up4_rows<4>(w, lo, gate, lane, i0, T);
  else up4_rows<8>(w, lo, gate, lane, i0, T);
}

/* ---- step 4 ---------------------------------------------------------------*/

/* Grid (cdiv(T*C, 256)), block 256: v1's mix. */
HCT_ENTRY void __launch_bounds__(256)
    hc_up4_mix(const float *resid, const float *gate, float *mixed, hct_u16 *mixed_bf16,
              hct_u16 *mixed_f16, int T) {
  hcr_pdl_launch();
  hcr_pdl_wait();
  const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;
  if (idx >= (long long)T * C) return;
  const int t = (int)(idx / C), c = (int)(idx % C);
  hcr_mix(t, c, resid, gate, mixed, mixed_bf16, mixed_f16);
}
