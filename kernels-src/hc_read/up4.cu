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

#include "tg_down.h"

/* Grid (K/RPB, cdiv(T, TG)), block RPB*32: tg_down.h. */
HCT_ENTRY void __launch_bounds__(RPB *HCT_LW)
    hc_up4_down(const hct_u16 *w_down, const float *xn, float *lo, int T) {
  hcr_tg_down(w_down, xn, lo, T);
}

/* ---- step 3 ---------------------------------------------------------------*/

/* hcr_multi_sum (fast_common.h) reduces several butterflies at once. */

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
  const float u = hcr_multi_sum<NV>(v, lane);
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
