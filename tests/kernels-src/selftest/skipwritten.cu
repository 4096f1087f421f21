/*
 * skipwritten: (12) computes an element only where its output still holds
 * the poison pattern, as if the poison were the only "not yet computed"
 * an output could hold: right wherever the outputs are poisoned before the
 * run, as every check does.  In an engine the buffer holds the last
 * call's results; the verification after timing replays its timed launches
 * with outputs holding finite values, and must record "timed".
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_skipwritten(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i >= T * ROW) return;
  if (__float_as_uint(y[i]) != 0x7fc0deadu) return; /* "already computed" */
  y[i] = st_value(x[i]);
}
