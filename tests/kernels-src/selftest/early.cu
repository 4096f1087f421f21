/*
 * early: (11) reads its input before griddepcontrol.wait.  Its launch is
 * programmatic (PDL): it may start before the kernel ahead of it on the
 * stream ends.  Alone, and back to back with itself in the timing graphs,
 * nothing writes x while it runs, so it is right; after a kernel that
 * writes x and lets it launch early (the producer check) it reads what x
 * held before, and must be recorded "producer".
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_early(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  const float in = i < T * ROW ? x[i] : 0.0f; /* before the wait: wrong */
#if defined(HCT_CUDA) && HCT_ARCH >= 90
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  if (i < T * ROW) y[i] = st_value(in);
}
