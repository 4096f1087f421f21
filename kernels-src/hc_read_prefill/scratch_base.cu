/* scratch: a stand-in baseline so that this branch's scratch manifest
 * loads and compiles (the prefill helper's pair_simt is the real one).
 * Dropped at the merge. */
#include "hct_kernel.h"
HCT_ENTRY void hcp_scratch_base(float *mixed, int T) {
  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  if (i < (long long)T * C) mixed[i] = 0.0f;
}
