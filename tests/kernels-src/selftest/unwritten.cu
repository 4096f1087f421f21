/*
 * unwritten: (5) leaves one output element unwritten (element 7, at every
 * T): it keeps the poison the tuner wrote before the run, and the probe
 * must record "unwritten".
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_unwritten(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i >= T * ROW || i == 7) return;
  y[i] = st_value(x[i]);
}
