/*
 * selftest.h: what the selftest op's templates share.  The op is
 * y = 2 * x + 1 over T rows of ROW floats (reference.cu holds the float64
 * reference); each variant breaks it in one way the tuner must
 * catch (see manifest.json).  Never offered to engines.
 *
 * Every entry takes (const float *x, float *y, hct_u32 *ws, int T); grid
 * cdiv(T*ROW, 256), block 256, one element per thread.
 */
#ifndef SELFTEST_H
#define SELFTEST_H

#include "hct_kernel.h"
#include "hct_grid.h"

#ifndef ROW
#error "selftest: ROW must be defined (an op constant)"
#endif

#define ST_THREADS 256

/* fmaf, so every variant's bits equal the baseline's: one rounding. */
HCT_DEV float st_value(float x) { return fmaf(2.0f, x, 1.0f); }

HCT_DEV int st_index(void) { return (int)(blockIdx.x * ST_THREADS + threadIdx.x); }

#endif /* SELFTEST_H */
