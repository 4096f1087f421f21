/*
 * oob: (2) writes out of bounds: besides the right answer, thread 0 stores
 * 2^40 floats past the end of y, far outside any allocation, so the store
 * is an illegal address (a sticky error: the worker's context is lost).
 * The probe must record "fault", restart the worker, and go on.
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_oob(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i >= T * ROW) return;
  y[i] = st_value(x[i]);
  if (i == 0) {
    /* volatile: the store must happen even though nothing reads it. */
    volatile float *wild = y + (1ll << 40);
    *wild = 1.0f;
  }
}
