/*
 * tail: right at every multiple of 16 rows, and twice the right value in
 * the rows of a partial last tile (T % 16 != 0): a kernel that mishandles
 * its tail.  No wait, so it is the fastest wherever it is timed, which is
 * only at the probed counts (16, 256, 4096), where it is right.  The variants
 * on it are named tiled* as tests/fake/fake_worker.c plants the same defect,
 * so that tests/gpu-prefill.sh runs against the fake worker too.
 */
#include "tiletest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_tail(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i >= T * ROW) return;
  float v = st_value(x[i]);
  if (T % 16 != 0 && i / ROW >= T / 16 * 16) v = 2.0f * v;
  y[i] = v;
}
