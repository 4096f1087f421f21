/*
 * upmix.h: steps 3 and 4 of upmix_dec and splitk, fused: a warp takes the
 * 4 rows of w_up of one channel (one per stream) for every token, reduces
 * the 4 x TB canonical butterflies at once (hcr_multi_sum) and mixes the
 * gated streams in registers: the gate tensor is never written.  Needs UW
 * and CPW, and fast_common.h.
 */
#ifndef HCR_UPMIX_H
#define HCR_UPMIX_H

#define HCR_UPMIX_SLO (2 * 8 * (K / 8))



/* hcr_multi_sum (fast_common.h) reduces several butterflies at once. */

#define HCR_UPMIX_UT (UW * HCT_LW)

/*
 * Steps 3 and 4 for the channels c0 .. c0+CPW-1 of one warp, with lo of
 * the tokens in shared memory (tokens T..TB-1 zero) as slo[h][t][chunk].  Value s*TB + t of a
 * lane is its partial of row s*C + c for token t; after hcr_multi_sum lane
 * L holds the full sum of value L >> (5 - M), and lane t < T gathers its
 * four gates and mixes.
 */
template <int TB>
HCT_DEV void hcr_upmix_warp(const hct_u4 (&w)[CPW][S][2], const float (&rr)[CPW][S],
                           const hct_f4 *slo, int lane, int c0, int T, float *mixed,
                           hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  constexpr int NV = S * TB;
  constexpr int M = TB == 1 ? 2 : TB == 2 ? 3 : TB == 4 ? 4 : 5;
  static_assert(S == 4 && (1 << M) == NV, "upmix.h: 4 streams x TB tokens is 2^M");
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS;
  const int tm = lane & (TB - 1);
  const bool mixer = lane < T && lane < TB;
#pragma unroll
  for (int i = 0; i < CPW; ++i) {
    float v[NV];
#pragma unroll
    for (int t = 0; t < TB; ++t) {
      const hct_f4 *l0 = slo + t * (K / 8), *l1 = slo + (8 + t) * (K / 8);
      const hct_f4 a = l0[lane], b = l1[lane];
      hct_f4 a2 = {0.0f, 0.0f, 0.0f, 0.0f}, b2 = a2;
      if (two) {
        a2 = l0[lane + HCT_LW];
        b2 = l1[lane + HCT_LW];
      }
#pragma unroll
      for (int s = 0; s < S; ++s) {
        float acc = hcr_dot8(w[i][s][0], a, b, 0.0f);
        if (two) acc = hcr_dot8(w[i][s][1], a2, b2, acc);
        v[s * TB + t] = acc;
      }
    }
    const float g = hcr_sigmoid(hcr_multi_sum<NV>(v, lane));
    float gs[S];
#pragma unroll
    for (int s = 0; s < S; ++s) gs[s] = hcr_shfl_idx(g, (s * TB + tm) << (5 - M));
    if (mixer) {
      float m = gs[0] * rr[i][0];
#pragma unroll
      for (int s = 1; s < S; ++s) m = fmaf(gs[s], rr[i][s], m);
      const long long o = (long long)tm * C + c0 + i;
      mixed[o] = m;
      mixed_bf16[o] = hct_f32_to_bf16(m);
      mixed_f16[o] = hct_f32_to_f16(m);
    }
  }
}

/*
 * Grid (C / (UW*CPW)), block UW*32.  Warp w of block b takes channels
 * (b*UW + w)*CPW + i, i < CPW.  The reduction is sized by TB, the least
 * power of two >= T, picked at run time (one binary serves every T).
 */
/* The body of the upmix entry of upmix_dec and splitk; `slo` is the entry's
 * __shared__ hct_f4[HCR_UPMIX_SLO]. */
HCT_DEV void hcr_upmix(const float *resid, const hct_u16 *w_up, const float *lo, float *mixed,
                       hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T, hct_f4 *slo) {
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int c0 = ((int)blockIdx.x * UW + wp) * CPW;
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS; /* lanes with a second chunk */
  const int TB = T <= 1 ? 1 : T <= 2 ? 2 : T <= 4 ? 4 : 8;
  const int tm = lane & (TB - 1);                 /* the token lane t mixes */
  const bool mixer = lane < T && lane < TB;

  /* Weights first: every load of the warp is in flight before any use. */
  hct_u4 w[CPW][S][2];
#pragma unroll
  for (int i = 0; i < CPW; ++i)
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const hct_u4 *row = (const hct_u4 *)(w_up + ((long long)s * C + c0 + i) * K);
      w[i][s][0] = row[lane];
      w[i][s][1] = two ? row[lane + HCT_LW] : hct_u4{0, 0, 0, 0};
    }
  hcr_pdl_launch();
  hcr_pdl_wait();
  /* R' of the token this lane mixes. */
  float rr[CPW][S];
#pragma unroll
  for (int i = 0; i < CPW; ++i)
#pragma unroll
    for (int s = 0; s < S; ++s)
      rr[i][s] = mixer ? resid[((long long)tm * S + s) * C + c0 + i] : 0.0f;

  /* lo of the T tokens, tokens T..TB-1 as zeros (their sums are unused),
   * as slo[h][t][chunk]: the first (h 0) and second (h 1) float4 of each
   * chunk of 8, so a warp reads 32 consecutive float4 (4 wavefronts, not
   * 8 as with chunks side by side). */
  const hct_f4 *lo4 = (const hct_f4 *)lo;
  for (int p = tid; p < TB * K / 4; p += HCR_UPMIX_UT) {
    const int t = p / (K / 4), q = p % (K / 4);
    slo[((q & 1) * 8 + t) * (K / 8) + (q >> 1)] =
        t < T ? lo4[p] : hct_f4{0.0f, 0.0f, 0.0f, 0.0f};
  }
  __syncthreads();

  switch (TB) {
    case 1: hcr_upmix_warp<1>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    case 2: hcr_upmix_warp<2>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    case 4: hcr_upmix_warp<4>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    default: hcr_upmix_warp<8>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
  }
}

#endif /* HCR_UPMIX_H */
