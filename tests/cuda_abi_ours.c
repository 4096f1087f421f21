/*
 * cuda_abi_ours.c: the sizes and offsets of HCT_CUDA_LAYOUT as
 * jit/cuda_abi.h declares the types, in a file of its own because
 * tests/test_cuda_abi.c sees the toolkit's cuda.h under the same names.
 */
#include "cuda_abi.h"

#define HCT_LAYOUT_ROW(e) (size_t)(e),
static const size_t ours[] = {HCT_CUDA_LAYOUT(HCT_LAYOUT_ROW)};

size_t hct_test_cuda_layout(int i);
size_t hct_test_cuda_layout(int i) {
  return i >= 0 && i < (int)(sizeof ours / sizeof ours[0]) ? ours[i] : (size_t)-1;
}
