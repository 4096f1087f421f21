/*
 * v2: v1 with the norm spread over one block per (token, stream), four
 * times the blocks of v1's norm.  Each block runs exactly v1's per-stream
 * code (same per-thread order, same butterflies), so the bits are v1's.
 * Down, up and mix are v1's kernels.
 *
 * Parameters: DOWN_WARPS, UP_WARPS as in v1.
 */
#include "hc_read.h"

#ifndef DOWN_WARPS
#error "v2: DOWN_WARPS must be defined"
#endif
#ifndef UP_WARPS
#error "v2: UP_WARPS must be defined"
#endif

/* Grid (S, T), block 256. */
HCT_ENTRY void __launch_bounds__(HCR_NORM_THREADS)
    hc_v2_norm(float *resid, const float *pending, const hct_u16 *w_norm, float *xn, int T) {
  __shared__ float red[9];
  const int s = (int)blockIdx.x, t = (int)blockIdx.y;
  if (s >= S || t >= T) return;
  hcr_norm_stream(t, s, resid, pending, w_norm, xn, red);
}

/* Grid (cdiv(K, DOWN_WARPS), T), block DOWN_WARPS*32. */
HCT_ENTRY void __launch_bounds__(DOWN_WARPS *HCT_LW)
    hc_v2_down(const hct_u16 *w_down, const float *xn, float *lo, int T) {
  const int j = (int)blockIdx.x * DOWN_WARPS + (int)threadIdx.x / HCT_LW;
  const int t = (int)blockIdx.y;
  if (j >= K || t >= T) return;
  hcr_down_row(t, j, (int)threadIdx.x & (HCT_LW - 1), w_down, xn, lo);
}

/* Grid (cdiv(D, UP_WARPS), T), block UP_WARPS*32. */
HCT_ENTRY void __launch_bounds__(UP_WARPS *HCT_LW)
    hc_v2_up(const hct_u16 *w_up, const float *lo, float *gate, int T) {
  const int i = (int)blockIdx.x * UP_WARPS + (int)threadIdx.x / HCT_LW;
  const int t = (int)blockIdx.y;
  if (i >= D || t >= T) return;
  hcr_up_row(t, i, (int)threadIdx.x & (HCT_LW - 1), w_up, lo, gate);
}

/* Grid (cdiv(T*C, 256)), block 256. */
HCT_ENTRY void __launch_bounds__(256)
    hc_v2_mix(const float *resid, const float *gate, float *mixed, hct_u16 *mixed_bf16,
              hct_u16 *mixed_f16, int T) {
  const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;
  if (idx >= (long long)T * C) return;
  const int t = (int)(idx / C), c = (int)(idx % C);
  hcr_mix(t, c, resid, gate, mixed, mixed_bf16, mixed_f16);
}
