/*
 * prefill.h: what every variant of hc_read_prefill shares: the norm stage
 * (the spec's canonical step 1, with xn rounded to bf16 for the GEMMs) and
 * the mix stage that reads the gated tensor back (the spec's step 4).  The
 * arithmetic is hc_read's (kernels-src/common/hc_read.h); only the layout
 * of xn (bf16 [T][D]) is the prefill op's own.
 *
 * Layouts: resid, pending [T][S][C] f32; w_norm [S][C] bf16; w_down [K][D]
 * bf16; w_up [D][K] bf16; scratch xn bf16 [T][D], lo bf16 [T][K], gated f32
 * [T][D] (index s*C + c); mixed [T][C] f32 and its bf16/f16 images.
 */
#ifndef HC_PREFILL_H
#define HC_PREFILL_H

#include "hc_read.h"

/* Grid (S, T), block 256: one block per (stream, token).  R' stored into
 * resid when pending is given; xn[t][s*C + c] = bf16(fl(fl(R'*w) * rs)). */
HCT_ENTRY void __launch_bounds__(HCR_NORM_THREADS)
    hc_pf_norm(float *resid, const float *pending, const hct_u16 *w_norm, hct_u16 *xn, int T) {
  __shared__ float red[9];
  const int s = (int)blockIdx.x, t = (int)blockIdx.y;
  if (t >= T) return;
  hcr_norm_stream_t<true, false>(t, s, resid, pending, w_norm, xn, red);
}

/* Grid (cdiv(T*C, 256)), block 256: one thread per (token, channel), the
 * spec's step 4 on the gated tensor (hcr_mix). */
HCT_ENTRY void __launch_bounds__(256)
    hc_pf_mix(const float *resid, const float *gated, float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16,
              int T) {
  const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;
  if (idx >= (long long)T * C) return;
  const int t = (int)(idx / C), c = (int)(idx % C);
  hcr_mix(t, c, resid, gated, mixed, mixed_bf16, mixed_f16);
}

#endif /* HC_PREFILL_H */
