/*
 * prefill_upmix.h: the up GEMM with the mix as its epilogue, of upmix (the
 * gated tensor never written): a block holds the same UBN/S
 * channels of all S streams (w_up rows s*C + c), so each thread has, in
 * registers, the 4 gates of its (token, channel) pairs and mixes them with
 * R' read from resid.  Each u is prefill_mma.h's mma sequence, the gate
 * hcr_sigmoid and the mix hcr_mix_sum (hc_read.h), as in pair_mma's up and
 * mix kernels: the outputs are pair_mma's bits given the same lo.
 */
#ifndef HC_PREFILL_UPMIX_H
#define HC_PREFILL_UPMIX_H

#include "prefill_mma.h"

/* Grid (D/UBN, cdiv(T, UBM)), block pm_up_cfg::THREADS. */
HCT_ENTRY void __launch_bounds__(pm_up_cfg::THREADS)
    hc_um_upmix(const float *HCT_RESTRICT resid, const hct_u16 *HCT_RESTRICT w_up, const hct_u16 *HCT_RESTRICT lo,
                float *HCT_RESTRICT mixed, hct_u16 *HCT_RESTRICT mixed_bf16, hct_u16 *HCT_RESTRICT mixed_f16,
                int T) {
  typedef pm_up_cfg CF;
  static_assert(CF::NT == S * CF::NTG, "a warp holds every stream of its channels");
  HCT_DYN_SHARED(hct_u16, smem);
  const int m0 = (int)blockIdx.y * UBM, c0 = (int)blockIdx.x * CF::BNG;
  float acc[CF::MT][CF::NT][4];
  pm_up_tile(w_up, lo, T, m0, c0, smem, acc);
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int wm = warp / CF::WARPS_N, wn = warp % CF::WARPS_N;
#pragma unroll
  for (int mt = 0; mt < CF::MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int t = m0 + wm * CF::WTM + mt * 16 + (lane >> 2) + 8 * h;
      if (t >= T) continue;
#pragma unroll
      for (int jc = 0; jc < CF::NTG; ++jc) {
        const int c = c0 + wn * CF::WNG + jc * 8 + 2 * (lane & 3);
        float g0[S], g1[S], r0[S], r1[S];
#pragma unroll
        for (int s = 0; s < S; ++s) {
          const pm_f2 r = *(const pm_f2 *)(resid + ((long long)t * S + s) * C + c);
          r0[s] = r.x;
          r1[s] = r.y;
          g0[s] = hcr_sigmoid(acc[mt][s * CF::NTG + jc][2 * h]);
          g1[s] = hcr_sigmoid(acc[mt][s * CF::NTG + jc][2 * h + 1]);
        }
        pm_f2 m;
        m.x = hcr_mix_sum(g0, 1, r0, 1);
        m.y = hcr_mix_sum(g1, 1, r1, 1);
        const long long o = (long long)t * C + c;
        *(pm_f2 *)(mixed + o) = m;
        *(hct_u32 *)(mixed_bf16 + o) = (hct_u32)hct_f32_to_bf16(m.x) | ((hct_u32)hct_f32_to_bf16(m.y) << 16);
        *(hct_u32 *)(mixed_f16 + o) = (hct_u32)hct_f32_to_f16(m.x) | ((hct_u32)hct_f32_to_f16(m.y) << 16);
      }
    }
}

#endif /* HC_PREFILL_UPMIX_H */
