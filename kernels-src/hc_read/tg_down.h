/*
 * tg_down.h: the down step of tg and up4: grid (K/RPB, cdiv(T, TG)), a warp
 * per row of w_down for the TG tokens of its group, so a row is read once
 * per group; each lane keeps HCR_TG_QB chunks of weights in registers and
 * loads the next ones while it uses these.  Every lane's fmaf chain and the
 * butterfly are the canonical ones.  Needs RPB and TG, and fast_common.h.
 */
#ifndef HCR_TG_DOWN_H
#define HCR_TG_DOWN_H

#ifndef RPB
#error "tg_down.h: RPB must be defined"
#endif
#ifndef TG
#error "tg_down.h: TG must be defined"
#endif

#define HCR_TG_QB 8 /* chunks per lane in registers at a time */
static_assert(HCR_DOWN_Q % HCR_TG_QB == 0, "tg_down.h: the 40 steps are batches of 8");

/* Grid (K/RPB, cdiv(T, TG)), block RPB*32: warp w takes row
 * blockIdx.x*RPB + w for tokens blockIdx.y*TG .. +TG-1 (those < T). */
HCT_DEV void hcr_tg_down(const hct_u16 *w_down, const float *xn, float *lo, int T) {
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
  hct_u4 cur[HCR_TG_QB], nxt[HCR_TG_QB];
#pragma unroll
  for (int m = 0; m < HCR_TG_QB; ++m) cur[m] = w[lane + HCT_LW * m];
  hcr_pdl_launch();
  hcr_pdl_wait();
#pragma unroll 1
  for (int qb = 0; qb < HCR_DOWN_Q; qb += HCR_TG_QB) {
    if (qb + HCR_TG_QB < HCR_DOWN_Q) {
#pragma unroll
      for (int m = 0; m < HCR_TG_QB; ++m) nxt[m] = w[lane + HCT_LW * (qb + HCR_TG_QB + m)];
    }
#pragma unroll
    for (int m = 0; m < HCR_TG_QB; ++m) {
      const int c = lane + HCT_LW * (qb + m);
#pragma unroll
      for (int u = 0; u < TG; ++u) acc[u] = hcr_dot8(cur[m], x[u][2 * c], x[u][2 * c + 1], acc[u]);
    }
#pragma unroll
    for (int m = 0; m < HCR_TG_QB; ++m) cur[m] = nxt[m];
  }
#pragma unroll
  for (int u = 0; u < TG; ++u) {
    const float v = hct_warp_sum(acc[u]);
    if (lane == 0 && t0 + u < T) lo[(long long)(t0 + u) * K + j] = v;
  }
}

#endif /* HCR_TG_DOWN_H */
