/*
 * op_selftest.c: the selftest op on the host (kernels-src/selftest/):
 * y = 2 * x + 1 over T rows of ROW floats, its inputs and its float64
 * reference.  The op exists to prove the tuner's fault handling on a real
 * GPU (each variant fails one way); it is never offered to engines.
 */
#include <string.h>

#include "tuner.h"

/* The buffer `name` of s as f32, or an error naming it. */
static int f32_buf(hct_hostset_t *s, const char *name, hct_hbuf_t **out) {
  hct_hbuf_t *b = hct__hostset_buf(s, name);
  if (b == NULL || b->spec->dtype != HCT_DT_F32)
    return hct__error(HCT_EMANIFEST, "op '%s': needs an f32 buffer '%s'", s->op->name, name);
  *out = b;
  return 0;
}

/* x: normal values, never zero (a zero would hide a missing factor). */
static int selftest_fill(hct_hostset_t *s, uint64_t seed) {
  hct_hbuf_t *x = NULL;
  int rc = f32_buf(s, "x", &x);
  if (rc != 0) return rc;
  s->seed = seed;
  hct_rng_t rng;
  hct__rng_seed(&rng, seed);
  float *d = x->data;
  for (size_t i = 0; i < x->elems; i++) {
    float v;
    do {
      v = (float)hct__rng_normal(&rng);
    } while (v == 0.0f);
    d[i] = v;
  }
  return 0;
}

static int selftest_reference(hct_hostset_t *s) {
  hct_hbuf_t *x = NULL, *y = NULL;
  int rc;
  if ((rc = f32_buf(s, "x", &x)) != 0 || (rc = f32_buf(s, "y", &y)) != 0) return rc;
  if (x->elems != y->elems)
    return hct__error(HCT_EMANIFEST, "op '%s': 'x' and 'y' differ in size", s->op->name);
  int64_t row;
  if (hct__symtab_get(&s->op->constants, "ROW", &row) != 0 || row <= 0)
    return hct__error(HCT_EMANIFEST, "op '%s': constant 'ROW' missing or not positive",
                      s->op->name);
  const float *xd = x->data;
  for (size_t i = 0; i < y->elems; i++) y->ref[i] = 2.0 * (double)xd[i] + 1.0;
  y->row_len = (int)row;
  return 0;
}

const hct_op_impl_t hct__op_selftest = {"selftest", selftest_fill, selftest_reference};
