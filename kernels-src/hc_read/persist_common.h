/*
 * persist_common.h: what the persistent hc_read variants (persist,
 * persist_bw) share: loads that bypass L1 for data other blocks wrote in
 * the same launch, and the fused up and mix of one channel by one warp
 * in the canonical order (stage C of persist_bw).  Needs fast_common.h
 * (hcr_multi_sum, hcr_shfl_idx).
 */
#ifndef HCR_PERSIST_COMMON_H
#define HCR_PERSIST_COMMON_H

#define HCR_PERSIST_TMAX 8 /* tokens a launch holds in shared memory */

/* Loads past L1: data another block wrote in this launch. */
HCT_DEV float hcr_ldcg(const float *p) {
#if defined(HCT_CUDA)
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
#else
  return *(const volatile float *)p;
#endif
}

/* The end of an up-and-mix warp: gt holds, in lane v << (5 - M), the gate
 * of value v = s*TB + t (token t, stream s); the lanes that mix (`mixer`,
 * token tm) gather their four gates and store the mix of R' (r) and its
 * 16-bit images for channel c. */
template <int TB, int M>
HCT_DEV void hcr_persist_mix(float gt, const float (&r)[S], int tm, bool mixer, int c, float *mixed,
                             hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  float gs[S];
#pragma unroll
  for (int s = 0; s < S; ++s) gs[s] = hcr_shfl_idx(gt, (s * TB + tm) << (5 - M));
  if (mixer) {
    float m = gs[0] * r[0];
#pragma unroll
    for (int s = 1; s < S; ++s) m = fmaf(gs[s], r[s], m);
    const long long o = (long long)tm * C + c;
    mixed[o] = m;
    mixed_bf16[o] = hct_f32_to_bf16(m);
    mixed_f16[o] = hct_f32_to_f16(m);
  }
}

/* Stage C for one channel c by one warp, TB >= T tokens: r holds R' of
 * (token lane % TB, stream s, channel c) in lanes below T and TB (the
 * caller loads it early, off the critical path). */
template <int TB>
HCT_DEV void hcr_persist_upmix(const hct_u4 (&w)[S][2], const hct_f4 *slo, const float (&r)[S],
                               int lane, int c, int T, float *mixed, hct_u16 *mixed_bf16,
                               hct_u16 *mixed_f16) {
  constexpr int NV = S * TB;
  constexpr int M = TB == 1 ? 2 : TB == 2 ? 3 : TB == 4 ? 4 : 5;
  static_assert((1 << M) == NV, "persist_common.h: 4 streams x TB tokens is 2^M");
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS;
  const int tm = lane & (TB - 1);
  const bool mixer = lane < T && lane < TB;
  float v[NV];
#pragma unroll
  for (int t = 0; t < TB; ++t) {
    const hct_f4 *l0 = slo + t * (K / 8), *l1 = slo + (HCR_PERSIST_TMAX + t) * (K / 8);
    const hct_f4 a = l0[lane], b = l1[lane];
    hct_f4 a2 = {0.0f, 0.0f, 0.0f, 0.0f}, b2 = a2;
    if (two) {
      a2 = l0[lane + HCT_LW];
      b2 = l1[lane + HCT_LW];
    }
#pragma unroll
    for (int s = 0; s < S; ++s) {
      float acc = hcr_dot8(w[s][0], a, b, 0.0f);
      if (two) acc = hcr_dot8(w[s][1], a2, b2, acc);
      v[s * TB + t] = acc;
    }
  }
  const float gt = hcr_sigmoid(hcr_multi_sum<NV>(v, lane));
  hcr_persist_mix<TB, M>(gt, r, tm, mixer, c, mixed, mixed_bf16, mixed_f16);
}

#endif /* HCR_PERSIST_COMMON_H */
