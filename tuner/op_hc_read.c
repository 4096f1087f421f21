/*
 * op_hc_read.c: the hc_read op on the host: random inputs and the float64
 * reference of /work/shared/spec/hc_read.md.
 *
 * The reference follows the math, not the canonical order: every sum is
 * taken in float64, so it stands for the exact result of the op.  Two
 * roundings of the contract are kept because they define the op, not an
 * order: R' = fl(R + P) is a float32 sum (it is what resid must hold), and
 * the weights are bf16 values.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tuner.h"

/* ---- inputs ------------------------------------------------------------------*/

/* How each tensor is drawn: mean + sd * N(0,1) / sqrt(fan_in). */
static const struct fill_rule_s {
  const char *buffer;
  double mean, sd;
  const char *fan_in; /* an op constant, or NULL for 1 */
} fill_rules[] = {
    {"resid", 0.0, 1.0, NULL},
    {"pending", 0.0, 1.0, NULL},
    {"w_norm", 1.0, 0.1, NULL},
    {"w_down", 0.0, 1.0, "D"},
    {"w_up", 0.0, 1.0, "K"},
};

/* The hash of a name (XXH3, hctune's one hash): each buffer draws from its
 * own stream, so resid is the same whether pending is present or not. */
static uint64_t name_hash(const char *s) { return XXH3_64bits(s, strlen(s)); }

/* Stores v into element i of a buffer of dtype dt; returns 0 when the
 * stored value is zero (the caller draws again). */
static int store(hct_dtype_t dt, void *data, size_t i, double v) {
  switch (dt) {
  case HCT_DT_F32: {
    float f = (float)v;
    ((float *)data)[i] = f;
    return f != 0.0f;
  }
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
  case HCT_DT_U32:
  case HCT_DT_I32:
    break;
  }
  return -1;
}

#define FILL_CHUNK 65536

typedef struct fill_ctx_s {
  const hct_buffer_t *spec;
  void *data;
  size_t elems;
  double mean, sd;
  uint64_t seed;
  atomic_int bad;
} fill_ctx_t;

static void fill_chunks(void *arg, int begin, int end) {
  fill_ctx_t *f = arg;
  for (int ch = begin; ch < end; ch++) {
    hct_rng_t rng;
    hct__rng_seed(&rng, f->seed + 0x9e3779b97f4a7c15ull * (uint64_t)(ch + 1));
    size_t e0 = (size_t)ch * FILL_CHUNK, e1 = HCT_MIN(f->elems, e0 + FILL_CHUNK);
    for (size_t e = e0; e < e1; e++) {
      int ok;
      do {
        ok = store(f->spec->dtype, f->data, e, f->mean + f->sd * hct__rng_normal(&rng));
      } while (ok == 0);
      if (ok < 0) {
        atomic_store(&f->bad, 1);
        return;
      }
    }
  }
}

static int hc_read_fill(hct_hostset_t *s, uint64_t seed) {
  s->seed = seed;
  for (int i = 0; i < s->n; i++) {
    hct_hbuf_t *b = &s->bufs[i];
    const hct_buffer_t *spec = b->spec;
    if (spec->role == HCT_BUF_OUTPUT || b->data == NULL) continue;
    if (spec->role == HCT_BUF_WEIGHT && s->inputs_only) continue;
    const struct fill_rule_s *rule = NULL;
    for (size_t r = 0; r < HCT_ARRAY_SIZE(fill_rules); r++)
      if (strcmp(fill_rules[r].buffer, spec->name) == 0) rule = &fill_rules[r];
    if (rule == NULL)
      return hct__error(HCT_EMANIFEST, "buffer '%s' of op '%s': hctune has no rule to draw it",
                        spec->name, s->op->name);
    double sd = rule->sd;
    if (rule->fan_in != NULL) {
      int64_t fan;
      if (hct__symtab_get(&s->op->constants, rule->fan_in, &fan) != 0 || fan <= 0)
        return hct__error(HCT_EMANIFEST, "op '%s': constant '%s' (fan-in of '%s') missing or not positive",
                          s->op->name, rule->fan_in, spec->name);
      sd /= sqrt((double)fan);
    }
    /* Drawn in fixed chunks, each from its own stream, on every core: the
     * values depend on the seed alone, not on the number of threads. */
    fill_ctx_t fc = {spec, b->data, b->elems, rule->mean, sd, seed ^ name_hash(spec->name), 0};
    hct__par_for((int)((b->elems + FILL_CHUNK - 1) / FILL_CHUNK), fill_chunks, &fc);
    if (atomic_load(&fc.bad))
      return hct__error(HCT_EMANIFEST, "buffer '%s': dtype cannot hold random normal values",
                        spec->name);
  }
  return 0;
}

/* ---- the reference ----------------------------------------------------------*/

/* One projection of the reference: out[t][r] = f(sum_k w[r][k] * in[t][k])
 * for the rows r of a bf16 matrix [rows][n], f the identity (down) or the
 * logistic gate (up).  Each row's weights are widened once and used for
 * every token. */
typedef struct proj_s {
  int T, n, rows;
  const uint16_t *w;  /* [rows][n] */
  const double *in;   /* [T][n] */
  double *out;        /* [T][rows] */
  int gate;           /* apply 1 / (1 + exp(-u)) */
  atomic_int oom;     /* a thread could not get its row buffer */
} proj_t;

static void proj_rows(void *arg, int begin, int end) {
  proj_t *x = arg;
  double *w = malloc((size_t)x->n * sizeof *w);
  if (w == NULL) {
    atomic_store(&x->oom, 1);
    return;
  }
  for (int r = begin; r < end; r++) {
    const uint16_t *wr = x->w + (size_t)r * x->n;
    for (int k = 0; k < x->n; k++) w[k] = hct__bf16_to_f32(wr[k]);
    for (int t = 0; t < x->T; t++) {
      const double *v = x->in + (size_t)t * x->n;
      double acc = 0.0;
      for (int k = 0; k < x->n; k++) acc += w[k] * v[k];
      x->out[(size_t)t * x->rows + r] = x->gate ? 1.0 / (1.0 + exp(-acc)) : acc;
    }
  }
  free(w);
}

/* Runs one projection over the rows in parallel; 0, or HCT_ENOMEM. */
static int project(int T, const uint16_t *w, int rows, int n, const double *in, double *out, int gate) {
  proj_t x = {.T = T, .n = n, .rows = rows, .w = w, .in = in, .out = out, .gate = gate};
  atomic_init(&x.oom, 0);
  hct__par_for(rows, proj_rows, &x);
  return atomic_load(&x.oom) ? HCT_ENOMEM : 0;
}

static int get_const(const hct_op_t *op, const char *name, int *out) {
  int64_t v;
  if (hct__symtab_get(&op->constants, name, &v) != 0 || v <= 0 || v > (1 << 24))
    return hct__error(HCT_EMANIFEST, "op '%s': constant '%s' missing or out of range", op->name, name);
  *out = (int)v;
  return 0;
}

/* The named buffer with host data of the given dtype, or an error. */
static int need(hct_hostset_t *s, const char *name, hct_dtype_t dt, int optional, hct_hbuf_t **out) {
  hct_hbuf_t *b = hct__hostset_buf(s, name);
  if (b == NULL) return hct__error(HCT_EMANIFEST, "op '%s': no buffer '%s'", s->op->name, name);
  if (b->spec->dtype != dt)
    return hct__error(HCT_EMANIFEST, "buffer '%s': unexpected dtype for op '%s'", name, s->op->name);
  if (b->data == NULL && !optional)
    return hct__error(HCT_EINVAL, "buffer '%s': no host data", name);
  *out = b;
  return 0;
}

/* The op's sizes, from its constants. */
typedef struct dims_s {
  int T, S, C, D, K;
} dims_t;

static int hc_read_reference(hct_hostset_t *s) {
  dims_t x = {.T = s->T};
  int rc;
  if ((rc = get_const(s->op, "S", &x.S)) || (rc = get_const(s->op, "C", &x.C)) ||
      (rc = get_const(s->op, "D", &x.D)) || (rc = get_const(s->op, "K", &x.K)))
    return rc;
  if (x.D != x.S * x.C) return hct__error(HCT_EMANIFEST, "op '%s': D is not S*C", s->op->name);
  hct_hbuf_t *resid, *pending, *w_norm, *w_down, *w_up, *outs[3];
  static const struct {
    const char *name;
    hct_dtype_t dt;
  } out_specs[3] = {{"mixed", HCT_DT_F32}, {"mixed_bf16", HCT_DT_BF16}, {"mixed_f16", HCT_DT_F16}};
  if ((rc = need(s, "resid", HCT_DT_F32, 0, &resid)) || (rc = need(s, "pending", HCT_DT_F32, 1, &pending)) ||
      (rc = need(s, "w_norm", HCT_DT_BF16, 0, &w_norm)) || (rc = need(s, "w_down", HCT_DT_BF16, 0, &w_down)) ||
      (rc = need(s, "w_up", HCT_DT_BF16, 0, &w_up)))
    return rc;
  for (int i = 0; i < 3; i++)
    if ((rc = need(s, out_specs[i].name, out_specs[i].dt, 0, &outs[i]))) return rc;
  const size_t TD = (size_t)x.T * x.D;
  if (resid->elems != TD || (pending->data && pending->elems != TD) ||
      w_norm->elems != (size_t)x.D || w_down->elems != (size_t)x.K * x.D ||
      w_up->elems != (size_t)x.D * x.K)
    return hct__error(HCT_EMANIFEST, "op '%s': buffer sizes do not match S, C, D, K at T=%d",
                      s->op->name, x.T);
  for (int i = 0; i < 3; i++)
    if (outs[i]->elems != (size_t)x.T * x.C)
      return hct__error(HCT_EMANIFEST, "buffer '%s': size is not T*C", outs[i]->spec->name);

  float *rp = malloc(TD * sizeof *rp);
  double *xn = malloc(TD * sizeof *xn);
  double *gate = malloc(TD * sizeof *gate);
  double *lo = malloc((size_t)x.T * x.K * sizeof *lo);
  if (!rp || !xn || !gate || !lo) {
    free(rp), free(xn), free(gate), free(lo);
    return hct__error(HCT_ENOMEM, "op '%s': no memory for the reference at T=%d", s->op->name, x.T);
  }

  /* R' = fl(R + P): the float32 sum is part of the contract. */
  const float *R = resid->data, *P = pending->data;
  for (size_t e = 0; e < TD; e++) {
    float v = R[e];
    if (P != NULL) v = v + P[e];
    rp[e] = v;
    resid->ref[e] = v;
  }
  resid->row_len = x.C;

  /* Norm, per (t, s). */
  const uint16_t *wn = w_norm->data;
  for (int t = 0; t < x.T; t++)
    for (int st = 0; st < x.S; st++) {
      const size_t base = ((size_t)t * x.S + st) * x.C;
      double ss = 0.0;
      for (int c = 0; c < x.C; c++) ss += (double)rp[base + c] * rp[base + c];
      const double rs = 1.0 / sqrt(ss / x.C + (double)1e-6f);
      for (int c = 0; c < x.C; c++)
        xn[base + c] = (double)rp[base + c] * hct__bf16_to_f32(wn[(size_t)st * x.C + c]) * rs;
    }

  /* Down (lo = w_down . xn), then up and the gate (g = sigma(w_up . lo)). */
  if (project(x.T, w_down->data, x.K, x.D, xn, lo, 0) != 0 ||
      project(x.T, w_up->data, x.D, x.K, lo, gate, 1) != 0) {
    free(rp), free(xn), free(gate), free(lo);
    return hct__error(HCT_ENOMEM, "op '%s': no memory for the reference at T=%d", s->op->name, x.T);
  }

  /* Mix.  The bf16 and f16 outputs are images of mixed: their reference is
   * the image of the exact value (rounded through float32, as the kernels
   * round their float32 result), so the 1e-5 bound on the baseline measures
   * the kernel, not the format's own rounding. */
  for (int t = 0; t < x.T; t++)
    for (int c = 0; c < x.C; c++) {
      double m = 0.0;
      for (int st = 0; st < x.S; st++) {
        const size_t e = ((size_t)t * x.S + st) * x.C + c;
        m += gate[(size_t)t * x.D + (size_t)st * x.C + c] * rp[e];
      }
      const size_t o = (size_t)t * x.C + c;
      outs[0]->ref[o] = m;
      outs[1]->ref[o] = hct__bf16_to_f32(hct__f32_to_bf16((float)m));
      outs[2]->ref[o] = hct__f16_to_f32(hct__f32_to_f16((float)m));
    }
  for (int i = 0; i < 3; i++) outs[i]->row_len = x.C;

  free(rp), free(xn), free(gate), free(lo);
  return 0;
}

const hct_op_impl_t hct__op_hc_read = {"hc_read", hc_read_fill, hc_read_reference};
