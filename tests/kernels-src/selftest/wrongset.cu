/*
 * wrongset: (9) right on the first input set it sees in an allocation and
 * wrong on every other one, as a variant that keeps something of the first
 * weights it was given (scratch "st", "zero": "once", remembers the first
 * x): every check runs it on one set of buffers and passes it; the timing
 * rotates over many sets, and the verification of its timed launches must
 * record "timed" (bits differ from the baseline's on every set but one).
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_wrongset(const float *x, float *y, hct_u32 *st, int T) {
  const int i = st_index();
  if (i >= T * ROW) return;
  const hct_u64 first = ((volatile hct_u64 *)st)[0];
  float v = st_value(x[i]);
  /* Another set than the first: the lowest mantissa bit flipped. */
  if (first != 0 && first != (hct_u64)x) v = __uint_as_float(__float_as_uint(v) ^ 1u);
  y[i] = v;
}

/* The second launch, one thread: remembers the first set's address. */
HCT_ENTRY void st_wrongset_note(const float *x, hct_u32 *st) {
  hct_u64 *first = (hct_u64 *)st;
  if (*first == 0) *first = (hct_u64)x;
}
