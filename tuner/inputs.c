/*
 * inputs.c: an op's inputs, drawn by the rules of its manifest ("inputs":
 * value = mean + sd * N(0,1) / sqrt(fan_in), never a stored zero), and the
 * token rows a check compares with the float64 reference (the reference's
 * "rows": docs/manifest.md).  Nothing here knows an op: what hc_read needs
 * is in kernels-src/hc_read/manifest.json.
 *
 * Both depend on the check's seed alone, so a trial's inputs can be drawn
 * again from the seed stored with it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tuner.h"

/* ---- drawing ------------------------------------------------------------------*/

/* The hash of a name (XXH3, hctune's one hash): each buffer draws from its
 * own stream, so resid is the same whether pending is present or not. */
static uint64_t name_hash(const char *s) { return XXH3_64bits(s, strlen(s)); }

/* Stores v into element i of a buffer of dtype dt; returns 0 when the
 * stored value is zero (the caller draws again).  The manifest loader
 * admits rules for float dtypes only. */
static int store(hct_dtype_t dt, void *data, size_t i, double v) {
  switch (dt) {
  case HCT_DT_BF16: {
    uint16_t h = hct__f32_to_bf16((float)v);
    ((uint16_t *)data)[i] = h;
    return (h & 0x7fffu) != 0;
  }
  case HCT_DT_F16: {
    uint16_t h = hct__f32_to_f16((float)v);
    ((uint16_t *)data)[i] = h;
    return (h & 0x7fffu) != 0;
  }
  default: {
    float f = (float)v;
    ((float *)data)[i] = f;
    return f != 0.0f;
  }
  }
}

#define FILL_CHUNK 65536

typedef struct fill_ctx_s {
  hct_dtype_t dtype;
  void *data;
  size_t elems;
  double mean, sd;
  uint64_t seed;
} fill_ctx_t;

static void fill_chunks(void *arg, int begin, int end) {
  fill_ctx_t *f = arg;
  for (int ch = begin; ch < end; ch++) {
    hct_rng_t rng;
    hct__rng_seed(&rng, f->seed + 0x9e3779b97f4a7c15ull * (uint64_t)(ch + 1));
    size_t e0 = (size_t)ch * FILL_CHUNK, e1 = HCT_MIN(f->elems, e0 + FILL_CHUNK);
    for (size_t e = e0; e < e1; e++)
      while (!store(f->dtype, f->data, e, f->mean + f->sd * hct__rng_normal(&rng))) {
      }
  }
}

int hct__inputs_fill(hct_hostset_t *s, uint64_t seed) {
  const hct_op_t *op = s->op;
  if (!op->has_inputs)
    return hct__error(HCT_EMANIFEST, "op '%s': its manifest has no \"inputs\": the tuner cannot draw them",
                      op->name);
  s->seed = seed;
  for (int i = 0; i < s->n; i++) {
    hct_hbuf_t *b = &s->bufs[i];
    const hct_buffer_t *spec = b->spec;
    if (spec->role == HCT_BUF_OUTPUT || b->data == NULL) continue;
    if (spec->role == HCT_BUF_WEIGHT && s->inputs_only) continue;
    const hct_input_rule_t *rule = &spec->rule;
    if (!rule->set) /* the loader requires one: a hand-made op, then */
      return hct__error(HCT_EMANIFEST, "op '%s': buffer '%s' has no rule in \"inputs\"", op->name, spec->name);
    double sd = rule->sd;
    if (rule->fan_in[0] != '\0') {
      int64_t fan;
      if (hct__symtab_get(&op->constants, rule->fan_in, &fan) != 0 || fan <= 0)
        return hct__error(HCT_EMANIFEST, "op '%s': fan_in '%s' of '%s' is not a positive constant",
                          op->name, rule->fan_in, spec->name);
      sd /= sqrt((double)fan);
    }
    /* Drawn in fixed chunks, each from its own stream, on every core: the
     * values depend on the seed alone, not on the number of threads. */
    fill_ctx_t fc = {spec->dtype, b->data, b->elems, rule->mean, sd, seed ^ name_hash(spec->name)};
    hct__par_for((int)((b->elems + FILL_CHUNK - 1) / FILL_CHUNK), fill_chunks, &fc);
  }
  int32_t *rows = realloc(s->rows, (size_t)s->T * sizeof *rows);
  if (rows == NULL) return hct__error(HCT_ENOMEM, "op '%s': no memory for %d token rows", op->name, s->T);
  s->rows = rows;
  s->nrows = hct__inputs_rows(op, s->T, seed, rows);
  return 0;
}

/* ---- the rows checked against float64 -----------------------------------------*/

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

int hct__inputs_rows(const hct_op_t *op, int T, uint64_t seed, int32_t *rows) {
  const int sample = op->reference.sample;
  if (sample <= 0 || T <= sample) {
    for (int t = 0; t < T; t++) rows[t] = t;
    return T;
  }
  /* The edges (the first and last tiles are where a kernel's bounds go
   * wrong), then sample - 2 distinct rows of 1..T-2 by Floyd's algorithm:
   * each draw one number, whatever was drawn before. */
  int n = 0;
  rows[n++] = 0;
  rows[n++] = T - 1;
  hct_rng_t rng;
  hct__rng_seed(&rng, seed ^ name_hash("reference.rows"));
  const int range = T - 2, want = sample - 2;
  for (int j = range - want; j < range; j++) {
    int r = (int)(hct__rng_next(&rng) % (uint64_t)(j + 1)), pick = 1 + r;
    for (int k = 2; k < n; k++)
      if (rows[k] == pick) {
        pick = 1 + j;
        break;
      }
    rows[n++] = pick;
  }
  qsort(rows, (size_t)n, sizeof *rows, cmp_i32);
  return n;
}
