/*
 * firstruns: (7) correct only on its first runs in an allocation: a count
 * of its runs is kept in scratch "st", declared "zero": "once" (zeroed when
 * allocated, never again), and from run FIRST_RUNS on it returns at once,
 * writing nothing: what an engine would get from its third call.  One
 * check per fresh allocation and run once would pass it; the repeat check
 * (three runs in one allocation) must record "repeat".  No wait: if it got
 * through, it would win.
 */
#include "selftest.h"

#ifndef FIRST_RUNS
#define FIRST_RUNS 2
#endif

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_firstruns(const float *x, float *y, hct_u32 *st, int T) {
  const int i = st_index();
  if (((volatile hct_u32 *)st)[0] >= FIRST_RUNS) return; /* the runs after */
  if (i < T * ROW) y[i] = st_value(x[i]);
}

/* The second launch of a run, one thread: counts the run.  A launch of its
 * own so every block of the first saw the same count. */
HCT_ENTRY void st_firstruns_count(hct_u32 *st) { st[0] += 1; }
