/*
 * upmix.h: steps 3 and 4 of upmix_dec and splitk, fused: a warp takes the
 * 4 rows of w_up of one channel (one per stream) for every token, reduces
 * the 4 x TB canonical butterflies at once (hcr_multi_sum) and mixes the
 * gated streams in registers: the gate tensor is never written (the
 * warp's work is hcr_upmix_warp, fast_common.h).  Needs UW and CPW, and
 * fast_common.h.
 */
#ifndef HCR_UPMIX_H
#define HCR_UPMIX_H

#define HCR_UPMIX_SLO (2 * 8 * (K / 8))



/* hcr_multi_sum (fast_common.h) reduces several butterflies at once. */

#define HCR_UPMIX_UT (UW * HCT_LW)

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
    case 1: hcr_upmix_warp<1, CPW>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    case 2: hcr_upmix_warp<2, CPW>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    case 4: hcr_upmix_warp<4, CPW>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    default: hcr_upmix_warp<8, CPW>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
  }
}

#endif /* HCR_UPMIX_H */
