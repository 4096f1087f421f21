/*
 * barrier: a grid-barrier kernel with the in-kernel timeout of
 * hct_grid.h.  Stage 1 writes 2x into y, a grid barrier, then stage 2 adds
 * 1 to the element of the mirrored block (so the barrier is needed): the
 * same bits as the baseline, since 2x is exact.
 *
 * From T = 3 on, block 0 does not take part in the barrier, as a block
 * that is not resident would not: the others give up after
 * HCT_GRID_TIMEOUT_NS and raise the flag in ws[0].  The probe must
 * disqualify T = 3 and larger counts with reason "timeout", and keep the
 * variant at T = 1 and 2, where it is correct.  It waits 10 us so that it
 * never beats `good`.
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_barrier(const float *x, float *y, hct_u32 *ws, int T) {
  hct_grid_t grid = hct_grid_begin(ws);
  const int i = st_index();
  const int n = T * ROW;
  if (i == 0) hct_spin_ns(10000);
  if (i < n) y[i] = 2.0f * x[i];
  if (T >= 3 && blockIdx.x == 0) return; /* the missing block */
  if (!hct_grid_sync(&grid)) return;
  /* The mirrored block: block k finishes what block B-1-k started, so
   * each block reads another's stage 1 (only block k touches that region
   * after the barrier: no second barrier is needed). */
  const int j = ((int)gridDim.x - 1 - (int)blockIdx.x) * ST_THREADS + (int)threadIdx.x;
  if (j < n) y[j] = ((volatile float *)y)[j] + 1.0f;
}
