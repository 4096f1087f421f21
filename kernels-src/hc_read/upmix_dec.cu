/*
 * upmix_dec: hc_read in three launches, bitwise equal to v1.
 *
 *   hc_ud_norm   v2's norm, one block per (token, stream), with w_norm
 *                loaded before the reduction instead of after it; every
 *                block first asks L2 to prefetch its share of w_down and
 *                w_up, so the 13.11 MB stream from memory starts at the
 *                first launch and runs under the norm and the launch gaps.
 *   hc_ud_down   the down projection split by lanes: a block computes the
 *                canonical partials of LG lanes (of 32) for 64/LG rows and
 *                TPT*TT tokens, so it needs only LG/32 of xn; its weights come in
 *                by cp.async in 4 groups of q, all issued before the first
 *                use.  With LG < 32 the partials go to `part`, and the last
 *                block of a row group (an atomic count in ws) runs the
 *                canonical butterfly of each row's 32 lane partials.
 *   hc_ud_upmix  up and mix fused: a warp takes a channel c, loads the rows
 *                s*C + c of w_up for the 4 streams, makes the 4 x TB
 *                canonical lane partials, reduces all of them at once by
 *                recursive halving (31 shuffles instead of 5 per sum; every
 *                sum still adds the same two partials at every level of the
 *                butterfly 16, 8, 4, 2, 1), and lane t mixes token t in
 *                registers: the gate is never written.
 *
 * Why it is bitwise: each lane partial is the same fmaf chain as in
 * hcr_down_row / hcr_up_row (same elements, same order, from 0.0f), and
 * each butterfly adds the same partials in the same tree; which block or
 * thread computes a partial does not change its bits.
 *
 * Parameters:
 *   PF   L2 prefetch of the weights in the norm launch: 0 none, 1
 *        prefetch.global.L2 per 32 bytes, 2 cp.async.bulk.prefetch.L2 of
 *        4 KB pieces (sm_90+).
 *   LG   lanes per down block (4, 8, 16 or 32), with RB = 64/LG rows, so
 *        every block stages 40 KB of w_down (under the default 48 KB);
 *   TPT  tokens per down thread (a weight chunk feeds TPT chains);
 *   TT   token threads per down block: block 64*TT, TPT*TT tokens per
 *        block, grid y = cdiv(T, TPT*TT);
 *   UW   warps per upmix block; CPW channels per warp.  The upmix
 *        reduction is sized at run time by TB, the least power of two
 *        >= T.
 *
 * Scratch: xn T*D*4, part T*K*32*4 (lane partials), lo T*K*4, ws 4096
 * zeroed (down counters; each last block puts its counter back to 0).
 */
#include "hc_read.h"

#ifndef PF
#error "upmix_dec: PF must be defined"
#endif
#ifndef LG
#error "upmix_dec: LG must be defined"
#endif
#ifndef TPT
#error "upmix_dec: TPT must be defined"
#endif
#ifndef TT
#error "upmix_dec: TT must be defined"
#endif
#ifndef UW
#error "upmix_dec: UW must be defined"
#endif
#ifndef CPW
#error "upmix_dec: CPW must be defined"
#endif

static_assert(HCT_LW % LG == 0, "upmix_dec: LG must divide 32");
static_assert(LG >= 4 && LG <= HCT_LW, "upmix_dec: LG is 4 .. 32");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "upmix_dec: a row of w_up is one or two chunks per lane");
static_assert(C % (UW * CPW) == 0, "upmix_dec: UW*CPW must divide C");

/* ---- step 1: v2's norm and the L2 prefetch (fast_common.h) ---------------*/

#include "fast_common.h"

/* Grid (max(T*S, PF ? SM_COUNT : 0)), block 256. */
HCT_ENTRY void __launch_bounds__(HCR_NORM_THREADS)
    hc_ud_norm(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,
               const hct_u16 *w_up, float *xn, int T) {
  __shared__ float red[9];
  hcr_fast_norm(resid, pending, w_norm, w_down, w_up, xn, T, red);
}

/* ---- step 2 ---------------------------------------------------------------*/

#define UD_RB (64 / LG)             /* rows per down block */
#define UD_TPB (TPT * TT)           /* tokens per down block */
#define UD_DT (LG * UD_RB * TT)     /* threads of a down block: 64 * TT */
#define UD_NLG (HCT_LW / LG)        /* lane groups: blocks per row group */
#define UD_NG 4                     /* cp.async groups of steps q */
#define UD_QG (HCR_DOWN_Q / UD_NG)  /* steps per group: 10 */
static_assert(HCR_DOWN_Q % UD_NG == 0, "upmix_dec: the steps q must split into 4 groups");
static_assert(K % UD_RB == 0, "upmix_dec: 64/LG must divide K");

HCT_DEV void ud_wait_groups(int n) {
  switch (n) {
    case 0: hct_cp_async_wait<0>(); break;
    case 1: hct_cp_async_wait<1>(); break;
    case 2: hct_cp_async_wait<2>(); break;
    default: hct_cp_async_wait<3>(); break;
  }
}

HCT_DEV float ud_load_cg(const float *p) { return *(const volatile float *)p; }

/*
 * Grid ((32/LG) * (K/RB), cdiv(T, TPT*TT)), block 64*TT, dynamic shared
 * memory 40960 bytes: the block's weights (RB = 64/LG rows x LG lanes x
 * 40 steps) as [q][row][lane] 16-byte chunks, so a warp reads consecutive
 * chunks (no bank conflict) and the TT token threads of a chunk share one
 * read.  Thread (l, r, tt): lane lg*LG + l of row rg*RB + r, for the TPT
 * tokens blockIdx.y*TPT*TT + tt*TPT + u; one weight chunk feeds the TPT
 * chains from registers (its bf16 unpacking is shared).
 */
HCT_ENTRY void __launch_bounds__(UD_DT)
    hc_ud_down(const hct_u16 *w_down, const float *xn, float *part, float *lo, hct_u32 *ws,
               int T) {
  extern __shared__ hct_u4 ud_w[];
  const int tid = (int)threadIdx.x;
  const int lg = (int)blockIdx.x % UD_NLG, rg = (int)blockIdx.x / UD_NLG;
  const int j0 = rg * UD_RB, L0 = lg * LG;

  /* All of the block's weights are requested before any is used. */
#pragma unroll
  for (int g = 0; g < UD_NG; ++g) {
    for (int p = tid; p < UD_QG * UD_RB * LG; p += UD_DT) {
      const int l = p % LG, r = (p / LG) % UD_RB, q = g * UD_QG + p / (LG * UD_RB);
      const hct_u4 *src =
          (const hct_u4 *)(w_down + (long long)(j0 + r) * D) + (L0 + l + HCT_LW * q);
      hct_cp_async16(&ud_w[(q * UD_RB + r) * LG + l], src);
    }
    hct_cp_async_commit();
  }
  hcr_pdl_launch();
  hcr_pdl_wait();

  const int l = tid % LG, r = (tid / LG) % UD_RB, tt = tid / (LG * UD_RB);
  const int t0 = (int)blockIdx.y * UD_TPB + tt * TPT;
  const int j = j0 + r, L = L0 + l;
  /* A token past T computes token 0's values and stores nothing, so every
   * thread takes part in the barriers and, with LG == 32, the shuffles. */
  const hct_f4 *HCT_RESTRICT x[TPT];
  float acc[TPT];
#pragma unroll
  for (int u = 0; u < TPT; ++u) {
    x[u] = (const hct_f4 *)(xn + (long long)(t0 + u < T ? t0 + u : 0) * D);
    acc[u] = 0.0f;
  }
#pragma unroll
  for (int g = 0; g < UD_NG; ++g) {
    ud_wait_groups(UD_NG - 1 - g);
    __syncthreads();
#pragma unroll
    for (int qq = 0; qq < UD_QG; ++qq) {
      const int q = g * UD_QG + qq;
      const int c = L + HCT_LW * q;
      const hct_u4 wc = ud_w[(q * UD_RB + r) * LG + l];
#pragma unroll
      for (int u = 0; u < TPT; ++u) acc[u] = hcr_dot8(wc, x[u][2 * c], x[u][2 * c + 1], acc[u]);
    }
  }

#if LG == HCT_LW
  /* A logical warp is one row's 32 lanes in lane order. */
#pragma unroll
  for (int u = 0; u < TPT; ++u) {
    const float v = hct_warp_sum(acc[u]);
    if (l == 0 && t0 + u < T) lo[(long long)(t0 + u) * K + j] = v;
  }
#else
  __shared__ int ud_last;
#pragma unroll
  for (int u = 0; u < TPT; ++u)
    if (t0 + u < T) part[((long long)(t0 + u) * K + j) * HCT_LW + L] = acc[u];
  __threadfence();
  __syncthreads();
  const int idx = rg * (int)gridDim.y + (int)blockIdx.y;
  if (tid == 0) ud_last = atomicAdd(&ws[idx], 1u) == (hct_u32)(UD_NLG - 1);
  __syncthreads();
  if (!ud_last) return;
  /* The last block of the row group: every other block's partials are
   * visible (each fenced before counting); read them past L1. */
  __threadfence();
  const int wp = tid / HCT_LW, lane = tid % HCT_LW;
  for (int base = 0; base < UD_TPB * UD_RB; base += UD_DT / HCT_LW) {
    const int pr = base + wp;
    const int t = (int)blockIdx.y * UD_TPB + pr / UD_RB, jj = j0 + pr % UD_RB;
    const bool ok = pr < UD_TPB * UD_RB && t < T;
    float v = ok ? ud_load_cg(&part[((long long)t * K + jj) * HCT_LW + lane]) : 0.0f;
    v = hct_warp_sum(v);
    if (ok && lane == 0) lo[(long long)t * K + jj] = v;
  }
  /* Ready for the next launch without a memset. */
  if (tid == 0) ws[idx] = 0u;
#endif
}

/* ---- steps 3 and 4 (upmix.h) ---------------------------------------------*/

#include "upmix.h"

HCT_ENTRY void __launch_bounds__(HCR_UPMIX_UT)
    hc_ud_upmix(const float *resid, const hct_u16 *w_up, const float *lo, float *mixed,
                hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  __shared__ hct_f4 slo[HCR_UPMIX_SLO];
  hcr_upmix(resid, w_up, lo, mixed, mixed_bf16, mixed_f16, T, slo);
}
