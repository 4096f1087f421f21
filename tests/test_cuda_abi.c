/*
 * test_cuda_abi.c: jit/cuda_abi.h, hctune's own declaration of the CUDA
 * driver's and NVRTC's interface, against the toolkit's cuda.h and
 * nvrtc.h where a toolkit is installed (the Makefile names them from
 * CUDA_HOME): every constant's value, the sizes, alignments and offsets
 * the driver calls rely on, and every driver function's type.  Without a toolkit it skips, saying
 * so: there is nothing to compare with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#if defined(HCT_TOOLKIT_CUDA_H) && defined(HCT_TOOLKIT_NVRTC_H) && \
    __has_include(HCT_TOOLKIT_CUDA_H) && __has_include(HCT_TOOLKIT_NVRTC_H)
#define HAVE_TOOLKIT 1
#include HCT_TOOLKIT_CUDA_H
#include HCT_TOOLKIT_NVRTC_H
#define HCT_CUDA_VALUES_ONLY
#include "cuda_abi.h"
/* The driver's table (jit/cuda_api.h), its types here the toolkit's. */
#include "cuda_api.h"
/* The fallbacks kept for old drivers take their successors' parameters
 * (cuda.h declares only the successor unless asked for the old ones). */
#define cuDeviceGetUuid_v1 cuDeviceGetUuid_v2
#define cuEventElapsedTime_v1 cuEventElapsedTime_v2
#endif

size_t hct_test_cuda_layout(int i);

static void test_values(void **state) {
#ifdef HAVE_TOOLKIT
  static const struct {
    const char *name;
    long long ours, toolkit;
  } v[] = {
#define ROW(name, value) {#name, value, (long long)(name)},
      HCT_CUDA_VALUES(ROW)
#undef ROW
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (v[i].ours != v[i].toolkit) {
      fprintf(stderr, "%s: jit/cuda_abi.h says %lld, the toolkit %lld\n", v[i].name, v[i].ours,
              v[i].toolkit);
      bad++;
    }
  if (bad) fail_msg("%d constants of jit/cuda_abi.h differ from the toolkit's", bad);
#else
  skip();
#endif
}

static void test_layout(void **state) {
#ifdef HAVE_TOOLKIT
  static const struct {
    const char *what;
    size_t toolkit;
  } v[] = {
#define ROW(e) {#e, (size_t)(e)},
      HCT_CUDA_LAYOUT(ROW)
#undef ROW
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (hct_test_cuda_layout((int)i) != v[i].toolkit) {
      fprintf(stderr, "%s: %zu in jit/cuda_abi.h, %zu in the toolkit\n", v[i].what,
              hct_test_cuda_layout((int)i), v[i].toolkit);
      bad++;
    }
  if (bad) fail_msg("%d sizes or offsets of jit/cuda_abi.h differ from the toolkit's", bad);
#else
  skip();
#endif
}

/* Every function of the driver's table (jit/cuda_api.h) has the
 * toolkit's parameters and result: a field declared with a wrong type
 * (an int for a size_t, a missing pointer) would be called wrongly by
 * every GPU call and seen by none of the tests without one. */
static void test_signatures(void **state) {
#ifdef HAVE_TOOLKIT
  static const struct {
    const char *name;
    int same;
  } v[] = {
#define SIG(ret, name, args, sym, req) {#name, __builtin_types_compatible_p(__typeof__(&name), ret(*) args)},
      HCT_CU_SYMBOLS(SIG)
#undef SIG
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (!v[i].same) {
      fprintf(stderr, "%s: jit/cuda_api.h's type is not the toolkit's\n", v[i].name);
      bad++;
    }
  if (bad) fail_msg("%d functions of jit/cuda_api.h differ from the toolkit's", bad);
  assert_true(sizeof v / sizeof v[0] >= 40);
#else
  skip();
#endif
}

int main(void) {
#ifndef HAVE_TOOLKIT
  fprintf(stderr, "test_cuda_abi: skipped: no CUDA toolkit headers (CUDA_HOME) to compare with\n");
#endif
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_values), cmocka_unit_test(test_layout),
                                     cmocka_unit_test(test_signatures)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
