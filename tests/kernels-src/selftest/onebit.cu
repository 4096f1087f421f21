/*
 * onebit: (4) differs from the reference in one bit of one element at one
 * token count only: at T == 3, element 5 has its lowest mantissa bit
 * flipped.  Right at every other T, so only a check at T = 3 catches it:
 * the probe must record "parity" there.
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_onebit(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i >= T * ROW) return;
  float v = st_value(x[i]);
  if (T == 3 && i == 5) v = __uint_as_float(__float_as_uint(v) ^ 1u);
  y[i] = v;
}
