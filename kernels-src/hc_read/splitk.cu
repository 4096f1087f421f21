/*
 * splitk: hc_read in three launches, class kl: the down projection split
 * along k over SPLIT blocks per row group, for full-chip memory
 * parallelism, with a fixed-order reduction.
 *
 *   hc_sk_norm   v2's norm, one block per (token, stream), and the L2
 *                prefetch of both weights spread over SM_COUNT blocks (as
 *                upmix_dec).
 *   hc_sk_down   grid (SPLIT, K/RPB): warp w of block (p, g) takes row
 *                g*RPB + w over the p-th slice of D/SPLIT columns; each lane
 *                loads all of its CPL = D/(256*SPLIT) chunks of weights
 *                before the first use, then for every token a chunked dot
 *                and the butterfly give the slice's partial.  The last
 *                block of the row group (an atomic count in ws) adds the
 *                SPLIT partials in order p = 0, 1, ...: deterministic.
 *   hc_sk_upmix  up and mix fused, as upmix_dec's.
 *
 * Parameters: PF (as upmix_dec), SPLIT (a divisor of D/256), RPB (rows,
 * i.e. warps, per down block), UW and CPW (upmix: warps per block,
 * channels per warp).
 *
 * Scratch: xn T*D*4, part T*SPLIT*K*4, lo T*K*4, ws 4096 zeroed (one
 * counter per row group; each last block puts its counter back to 0).
 */
#include "hc_read.h"

#ifndef PF
#error "splitk: PF must be defined"
#endif
#ifndef SPLIT
#error "splitk: SPLIT must be defined"
#endif
#ifndef RPB
#error "splitk: RPB must be defined"
#endif
#ifndef UW
#error "splitk: UW must be defined"
#endif
#ifndef CPW
#error "splitk: CPW must be defined"
#endif

static_assert((D / (8 * HCT_LW)) % SPLIT == 0, "splitk: SPLIT must divide D/256");
static_assert(K % RPB == 0, "splitk: RPB must divide K");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "splitk: a row of w_up is one or two chunks per lane");
static_assert(C % (UW * CPW) == 0, "splitk: UW*CPW must divide C");

/* ---- step 1: v2's norm and the L2 prefetch (fast_common.h) ---------------*/

#include "fast_common.h"

/* Grid (max(T*S, PF ? SM_COUNT : 0)), block 256. */
HCT_ENTRY void __launch_bounds__(HCR_NORM_THREADS)
    hc_sk_norm(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,
               const hct_u16 *w_up, float *xn, int T) {
  __shared__ float red[9];
  hcr_fast_norm(resid, pending, w_norm, w_down, w_up, xn, T, red);
}

/* ---- step 2 ---------------------------------------------------------------*/

#define SK_CPS (D / 8 / SPLIT)      /* chunks of 8 per slice */
#define SK_CPL (SK_CPS / HCT_LW)    /* chunks per lane */
#define SK_DT (RPB * HCT_LW)

HCT_DEV float sk_load_cg(const float *p) { return *(const volatile float *)p; }

/* Grid (SPLIT, K/RPB), block RPB*32. */
HCT_ENTRY void __launch_bounds__(SK_DT)
    hc_sk_down(const hct_u16 *w_down, const float *xn, float *part, float *lo, hct_u32 *ws,
               int T) {
  __shared__ int sk_last;
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int sp = (int)blockIdx.x, j = (int)blockIdx.y * RPB + wp;
  const hct_u4 *w = (const hct_u4 *)(w_down + (long long)j * D) + sp * SK_CPS;
  hct_u4 wr[SK_CPL];
#pragma unroll
  for (int m = 0; m < SK_CPL; ++m) wr[m] = w[lane + HCT_LW * m];
  hcr_pdl_launch();
  hcr_pdl_wait();
  for (int t = 0; t < T; ++t) {
    const hct_f4 *HCT_RESTRICT x = (const hct_f4 *)(xn + (long long)t * D) + 2 * sp * SK_CPS;
    float acc = 0.0f;
#pragma unroll
    for (int m = 0; m < SK_CPL; ++m) {
      const int c = lane + HCT_LW * m;
      acc = hcr_dot8(wr[m], x[2 * c], x[2 * c + 1], acc);
    }
    acc = hct_warp_sum(acc);
    if (lane == 0) part[((long long)t * SPLIT + sp) * K + j] = acc;
  }
  __threadfence();
  __syncthreads();
  const int idx = (int)blockIdx.y;
  if (tid == 0) sk_last = atomicAdd(&ws[idx], 1u) == (hct_u32)(SPLIT - 1);
  __syncthreads();
  if (!sk_last) return;
  /* The last block of the row group: the SPLIT partials, in order. */
  __threadfence();
  for (int p = tid; p < T * RPB; p += SK_DT) {
    const int t = p / RPB, jj = (int)blockIdx.y * RPB + p % RPB;
    /* Every load issued before the first add: one memory latency, not
     * SPLIT of them (volatile loads keep their order, so load first). */
    float v[SPLIT];
#pragma unroll
    for (int q = 0; q < SPLIT; ++q) v[q] = sk_load_cg(&part[((long long)t * SPLIT + q) * K + jj]);
    float a = 0.0f;
#pragma unroll
    for (int q = 0; q < SPLIT; ++q) a += v[q];
    lo[(long long)t * K + jj] = a;
  }
  if (tid == 0) ws[idx] = 0u;
}

/* ---- steps 3 and 4 (upmix.h) ---------------------------------------------*/

#include "upmix.h"

HCT_ENTRY void __launch_bounds__(HCR_UPMIX_UT)
    hc_sk_upmix(const float *resid, const hct_u16 *w_up, const float *lo, float *mixed,
                hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  __shared__ hct_f4 slo[HCR_UPMIX_SLO];
  hcr_upmix(resid, w_up, lo, mixed, mixed_bf16, mixed_f16, T, slo);
}
