/*
 * hang: (3) never finishes: thread 0 waits for a flag in ws that nothing
 * ever sets (the tuner zeroes ws before the run).  No barrier timeout
 * here: the watchdog must kill the worker, and the probe record "hang".
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_hang(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i >= T * ROW) return;
  if (i == 0) {
    /* A volatile read is a side effect: the loop cannot be removed. */
    volatile hct_u32 *never = ws + 8;
    while (*never == 0) {
    }
  }
  y[i] = st_value(x[i]);
}
