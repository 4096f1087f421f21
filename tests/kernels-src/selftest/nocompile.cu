/*
 * nocompile: (1) fails to compile, as a template with a mistake would: it
 * calls a function that does not exist.  The probe must record "compile"
 * with the compiler's log and go on.
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_nocompile(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i < T * ROW) y[i] = st_value_that_does_not_exist(x[i]);
}
