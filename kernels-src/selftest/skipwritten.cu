/*
 * skipwritten: (12) computes an element only where its output still holds
 * the poison pattern, as if the poison were the only "not yet computed"
 * an output could hold: right wherever the outputs are poisoned before the
 * run, which every check did before issue 20.  In an engine the buffer
 * holds the last call's results; the repeat check's run on fresh inputs
 * leaves the previous run's outputs in place, and must record "repeat".
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_skipwritten(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i >= T * ROW) return;
  if (__float_as_uint(y[i]) != 0x7fc0deadu) return; /* "already computed" */
  y[i] = st_value(x[i]);
}
