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

/* The pinning hook: a log of what was pinned and unpinned. */
static struct {
  void *pinned[8];
  int n_pin, n_unpin, fail;
} pins;

static int fake_pin(void *arg, void *p, size_t bytes) {
  assert_ptr_equal(arg, &pins);
  assert_int_equal((uintptr_t)p % 4096, 0); /* page-aligned, as pinning wants */
  if (pins.fail) return hct__error(HCT_EUNSUPPORTED, "no pinning here");
  pins.pinned[pins.n_pin++ % 8] = p;
  return 0;
}

static void fake_unpin(void *arg, void *p) {
  assert_ptr_equal(arg, &pins);
  int found = 0;
  for (int i = 0; i < 8; i++) found |= pins.pinned[i] == p;
  assert_true(found);
  pins.n_unpin++;
}

/* Kept buffers are pinned once when made, not again when reused, and
 * unpinned before they are freed; small ones never; a failing pin leaves
 * the buffer usable and the next ones unpinned. */
static void test_pinned(void **state) {
  (void)state;
  const size_t big = (size_t)80 << 20;
  hct__hostbuf_pin(fake_pin, fake_unpin, &pins);
  unsigned char *a = hct__hostbuf_get(big);
  assert_non_null(a);
  assert_int_equal(pins.n_pin, 1);
  hct__hostbuf_put(a);
  unsigned char *b = hct__hostbuf_get(big);
  assert_ptr_equal(a, b);
  assert_int_equal(pins.n_pin, 1); /* reused: pinned already */
  hct__hostbuf_put(b);
  void *s = hct__hostbuf_get(1024);
  hct__hostbuf_put(s);
  assert_int_equal(pins.n_pin, 1);
  hct__hostbuf_release();
  assert_int_equal(pins.n_unpin, 1);
  pins.fail = 1;
  unsigned char *c = hct__hostbuf_get(big), *d = hct__hostbuf_get(big + 4096);
  assert_true(c != NULL && d != NULL);
  c[0] = d[big] = 1; /* usable all the same */
  assert_int_equal(pins.n_pin, 1);
  hct__hostbuf_put(c);
  hct__hostbuf_put(d);
  hct__hostbuf_release();
  assert_int_equal(pins.n_unpin, 1); /* nothing pinned, nothing unpinned */
  hct__hostbuf_pin(NULL, NULL, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_reuse_and_fill), cmocka_unit_test(test_pinned)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
