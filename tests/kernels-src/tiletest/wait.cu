/*
 * wait: right, bit for bit the baseline's, after thread 0 of block 0 waits
 * WAIT ns (a parameter): honest variants slower than the planted ones and
 * faster than the baseline's 20 us, so that each decision has an honest
 * winner once the planted ones are out.
 */
#include "tiletest.h"

#ifndef WAIT
#error "wait: WAIT must be defined (a parameter)"
#endif

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_wait(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i == 0) hct_spin_ns(WAIT);
  if (i < T * ROW) y[i] = st_value(x[i]);
}
