/*
 * tiletest.h: what the tiletest op's templates share (issue 34).  The op is
 * selftest's, y = 2 * x + 1 over T rows of ROW floats, probed sparsely (T =
 * 16, 256, 4096: every probed count a multiple of 16), so that its
 * decisions serve counts no probe timed.  Two variants are wrong only in a
 * partial last tile of 16 rows, and the fastest of their decisions at
 * every probed count: the probe's checks where a decision serves (its
 * range's ends and partial tiles, tuner/probe_serve.c) must keep both from
 * being served at any T (tests/gpu-prefill.sh).  Never offered to engines.
 *
 * Every entry takes (const float *x, float *y, hct_u32 *ws, int T); grid
 * cdiv(T*ROW, 256), block 256, one element per thread.
 */
#ifndef TILETEST_H
#define TILETEST_H

#include "hct_kernel.h"
#include "hct_grid.h"

#ifndef ROW
#error "tiletest: ROW must be defined (an op constant)"
#endif

#define ST_THREADS 256

/* fmaf, so every right variant's bits equal the baseline's: one rounding. */
HCT_DEV float st_value(float x) { return fmaf(2.0f, x, 1.0f); }

HCT_DEV int st_index(void) { return (int)(blockIdx.x * ST_THREADS + threadIdx.x); }

#endif /* TILETEST_H */
