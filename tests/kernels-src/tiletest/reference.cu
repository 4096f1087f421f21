/*
 * reference: the float64 reference of the selftest op, y = 2x + 1, for the
 * token rows the tuner checks (row n of ref_y is token rows[n]).  Grid
 * (cdiv(ROW, 256), NROWS), block 256.
 */
#include "hct_kernel.h"

#ifndef ROW
#error "selftest reference: ROW must be defined (an op constant)"
#endif

HCT_ENTRY void __launch_bounds__(256) st_reference(const int *rows, const float *x, double *ref_y) {
  const int n = (int)blockIdx.y, i = (int)(blockIdx.x * 256 + threadIdx.x);
  if (i >= ROW) return;
  const long long t = rows[n];
  /* 2x is exact in float64: one rounding, the same fused or not. */
  ref_y[(long long)n * ROW + i] = 2.0 * (double)x[t * ROW + i] + 1.0;
}
