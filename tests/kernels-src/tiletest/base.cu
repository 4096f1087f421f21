/*
 * base: the tiletest baseline (selftest's).  Correct, and slow on purpose: thread 0 of
 * block 0 waits 20 us first, so that the correct challenger (`good`) is
 * faster beyond any noise and the probe must choose it.
 */
#include "tiletest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_base(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i == 0) hct_spin_ns(20000);
  if (i < T * ROW) y[i] = st_value(x[i]);
}
