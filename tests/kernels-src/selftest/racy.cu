/*
 * racy: (10) nondeterministic, as a kernel with a race: every thread
 * flips the lowest mantissa bit of its element when a hash of the global
 * timer (in microseconds) and its index falls in 1 of 64, so two runs on
 * identical inputs differ in about 1/64 of their elements, in different
 * places.  Class bitwise: the determinism check (two allocations, identical
 * inputs) must record "nondeterminism".
 */
#include "selftest.h"

HCT_ENTRY void __launch_bounds__(ST_THREADS)
    st_racy(const float *x, float *y, hct_u32 *ws, int T) {
  const int i = st_index();
  if (i >= T * ROW) return;
  float v = st_value(x[i]);
  hct_u64 h = (hct_globaltimer() >> 10) * 0x9e3779b97f4a7c15ull ^ (hct_u64)i * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  if ((h & 63) == 0) v = __uint_as_float(__float_as_uint(v) ^ 1u);
  y[i] = v;
}
