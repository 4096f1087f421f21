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

#include "tg_down.h"

/* Grid (K/RPB, cdiv(T, TG)), block RPB*32: tg_down.h. */
HCT_ENTRY void __launch_bounds__(RPB *HCT_LW)
    hc_tg_down(const hct_u16 *w_down, const float *xn, float *lo, int T) {
  hcr_tg_down(w_down, xn, lo, T);
}

/* ---- step 3 ---------------------------------------------------------------*/

/* hcr_multi_sum (fast_common.h) reduces several butterflies at once. */

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
  const float u = hcr_multi_sum<TB>(v, lane);
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
