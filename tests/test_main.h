/*
 * test_main.h: what every test program's main() shares.  The Makefile
 * force-includes it (-include) ahead of each tests/test_*.c, so a program
 * gets it without repeating it and a new one cannot forget it:
 *
 *   - HCT_TEST_FILTER (tests/run.sh PROGRAM TEST sets it) runs only the
 *     tests whose names match it, through cmocka_set_test_filter (* and ?
 *     match any text and any character).  cmocka_run_group_tests is
 *     wrapped to read it, so every main() honours it unchanged; stdout is
 *     made line-buffered there too.
 *   - hct_test_bin() is $HCT_BIN (the bin/ folder tests/run.sh exports)
 *     for the programs that run hctune or hctuned, and fails the program
 *     with one line when it is not set: a test that cannot run its subject
 *     has not passed.
 */
#ifndef HCT_TEST_MAIN_H
#define HCT_TEST_MAIN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

static inline void hct_test_filter_from_env(void) {
  /* Line by line, so tests/run.sh shows a long program's progress and its
   * lines keep their order against stderr's. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *f = getenv("HCT_TEST_FILTER");
  if (f != NULL && f[0] != '\0') cmocka_set_test_filter(f);
}

#undef cmocka_run_group_tests
#define cmocka_run_group_tests(group_tests, group_setup, group_teardown)                 \
  (hct_test_filter_from_env(),                                                           \
   _cmocka_run_group_tests(#group_tests, group_tests,                                    \
                           sizeof(group_tests) / sizeof((group_tests)[0]), group_setup, \
                           group_teardown))

/* $HCT_BIN, or NULL after printing "<program>: HCT_BIN is not set ..." on
 * stderr: the caller returns 1. */
static inline const char *hct_test_bin(const char *program) {
  const char *bin = getenv("HCT_BIN");
  if (bin != NULL && bin[0] != '\0') return bin;
  fprintf(stderr,
          "%s: HCT_BIN is not set: it names the bin/ folder whose hctune this tests "
          "(tests/run.sh sets it; e.g. HCT_BIN=bin)\n",
          program);
  return NULL;
}

/* The source tree's root, for the files tests read beside the code
 * (tests/fake/, tests/kernels-src/): $HCT_TEST_ROOT (tests/run.sh sets
 * it), else the working folder.  $HCTUNE_KERNELS is a list of folders
 * (the product's ops, then the tests' own), so no path is built from it. */
static inline const char *hct_test_root(void) {
  const char *root = getenv("HCT_TEST_ROOT");
  return root != NULL && root[0] != '\0' ? root : ".";
}

#endif /* HCT_TEST_MAIN_H */
