/*
 * v1_wrong: hc_read's v1 with a down kernel that walks its chunks in the
 * reverse order (q descending).  The math is the same, the roundings are
 * not, so a correct probe must reject it as bitwise against v1 with the
 * reason parity.  Do not "fix" it.
 */
#include "../hc_read/v1.cu"

/* Grid (cdiv(K, DOWN_WARPS), T), block DOWN_WARPS*32. */
HCT_ENTRY void __launch_bounds__(DOWN_WARPS *HCT_LW)
    hc_wrong_down(const hct_u16 *w_down, const float *xn, float *lo, int T) {
  const int j = (int)blockIdx.x * DOWN_WARPS + (int)threadIdx.x / HCT_LW;
  const int t = (int)blockIdx.y;
  if (j >= K || t >= T) return;
  const int lane = (int)threadIdx.x & (HCT_LW - 1);
  const hct_u4 *w = (const hct_u4 *)(w_down + (long long)j * D);
  const hct_f4 *x = (const hct_f4 *)(xn + (long long)t * D);
  float acc = 0.0f;
  for (int q = HCR_DOWN_Q - 1; q >= 0; --q) {
    const int c = lane + HCT_LW * q;
    acc = hcr_dot8(w[c], x[2 * c], x[2 * c + 1], acc);
  }
  acc = hct_warp_sum(acc);
  if (lane == 0) lo[(long long)t * K + j] = acc;
}
