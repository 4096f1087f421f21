/*
 * good: (6) correct, bit for bit the baseline's, and without its wait:
 * the probe must choose it at every T.
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_good(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i < T * ROW) y[i] = st_value(x[i]);
}
