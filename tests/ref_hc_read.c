/*
 * ref_hc_read.c: the CPU float64 reference of hc_read
 * (/work/shared/spec/hc_read.md), a cross-check of the op's GPU reference
 * template in the tests only (tests/test_reference.c): the product draws
 * inputs and computes references from the op's folder alone.
 *
 * The reference follows the math, not the canonical order: every sum is
 * taken in float64, so it stands for the exact result of the op.  Two
 * roundings of the contract are kept because they define the op, not an
 * order: R' = fl(R + P) is a float32 sum (it is what resid must hold), and
 * the weights are bf16 values.  Sums run in index order with products
 * and sums rounded apart (the Makefile builds this file with
 * -ffp-contract=off), as kernels-src/common/hc_read_ref.h does on the GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_hc_read.h"

/* ---- the reference ----------------------------------------------------------*/

/* One projection: out[t][r] = f(sum_k w[r][k] * in[t][k]) for the rows r
 * of a bf16 matrix [rows][n], f the identity (down) or the logistic gate
 * (up).  Each row's weights are widened once and used for every token. */
static int project(int T, const uint16_t *wm, int rows, int n, const double *in, double *out,
                   int gate) {
  double *w = malloc((size_t)n * sizeof *w);
  if (w == NULL) return HCT_ENOMEM;
  for (int r = 0; r < rows; r++) {
    const uint16_t *wr = wm + (size_t)r * n;
    for (int k = 0; k < n; k++) w[k] = hct__bf16_to_f32(wr[k]);
    for (int t = 0; t < T; t++) {
      const double *v = in + (size_t)t * n;
      double acc = 0.0;
      for (int k = 0; k < n; k++) acc += w[k] * v[k];
      out[(size_t)t * rows + r] = gate ? 1.0 / (1.0 + exp(-acc)) : acc;
    }
  }
  free(w);
  return 0;
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

int ref_hc_read_cpu(hct_hostset_t *s) {
  dims_t x = {.T = s->T};
  int rc = hct__reference_shape(s);
  if (rc != 0) return rc;
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
  }
  for (int n = 0; n < s->nrows; n++)
    for (int d = 0; d < x.D; d++)
      resid->ref[(size_t)n * x.D + d] = rp[(size_t)s->rows[n] * x.D + d];

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
  for (int n = 0; n < s->nrows; n++)
    for (int c = 0; c < x.C; c++) {
      const int t = s->rows[n];
      double m = 0.0;
      for (int st = 0; st < x.S; st++) {
        const size_t e = ((size_t)t * x.S + st) * x.C + c;
        m += gate[(size_t)t * x.D + (size_t)st * x.C + c] * rp[e];
      }
      const size_t o = (size_t)n * x.C + c;
      outs[0]->ref[o] = m;
      outs[1]->ref[o] = hct__bf16_to_f32(hct__f32_to_bf16((float)m));
      outs[2]->ref[o] = hct__f16_to_f32(hct__f32_to_f16((float)m));
    }

  free(rp), free(xn), free(gate), free(lo);
  return 0;
}

