/*
 * test_hostbuf.c: the cache of large host buffers (tuner/hostbuf.c): a
 * buffer given back is handed out again for the same size, filled with
 * 0xff bytes (never what a run wrote into it before), other sizes get
 * their own, small ones are plain malloc, and release frees the idle ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tuner.h"

static void test_reuse_and_fill(void **state) {
  (void)state;
  const size_t big = (size_t)96 << 20, other = (size_t)80 << 20;
  unsigned char *a = hct__hostbuf_get(big);
  assert_non_null(a);
  memset(a, 0x12, big);
  hct__hostbuf_put(a);
  unsigned char *b = hct__hostbuf_get(big);
  assert_ptr_equal(a, b); /* the same pages: no first touch again */
  for (size_t i = 0; i < big; i += 4093) assert_int_equal(b[i], 0xff);
  assert_int_equal(b[big - 1], 0xff);
  /* While b is in use, the same size is a new buffer, another size too. */
  unsigned char *c = hct__hostbuf_get(big), *d = hct__hostbuf_get(other);
  assert_true(c != NULL && c != b && d != NULL && d != b);
  hct__hostbuf_put(c);
  hct__hostbuf_put(d);
  hct__hostbuf_put(b);
  /* Small ones are not kept. */
  void *s = hct__hostbuf_get(1024);
  assert_non_null(s);
  hct__hostbuf_put(s);
  hct__hostbuf_put(NULL);
  hct__hostbuf_release();
  /* After release a buffer of that size is a fresh one (ASan sees the
   * old ones freed: a use of them would be reported). */
  unsigned char *e = hct__hostbuf_get(other);
  assert_non_null(e);
  hct__hostbuf_put(e);
  hct__hostbuf_release();
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_reuse_and_fill)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
