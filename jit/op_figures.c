/*
 * op_figures.c: an op's figures from its manifest, evaluated at T: its
 * batch, the bytes it must move at the least (the floor a report compares
 * times with), its flops, and the counts a probe measures at
 * (probe_tokens).  Any thread.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

int hct__op_batch(const hct_op_t *op, int T) {
  hct_symtab_t syms = op->constants;
  hct__symtab_set(&syms, "T", T);
  int64_t b = 0;
  int rc = hct__expr_eval(op->batch_expr, &syms, &b);
  if (rc != 0) {
    char cause[512];
    snprintf(cause, sizeof cause, "%s", hct_last_error());
    return hct__error(rc, "op '%s': timing.batch '%s' at T=%d: %s", op->name, op->batch_expr, T, cause);
  }
  if (b < 1 || b > HCT_MAX_BATCH)
    return hct__error(HCT_ERANGE, "op '%s': timing.batch '%s' is %lld at T=%d, outside 1..%d", op->name,
                      op->batch_expr, (long long)b, T, HCT_MAX_BATCH);
  return (int)b;
}
/* One expression of the op over T and its constants, as a double (the
 * report's floors: counts past 2^53 lose only digits it does not show). */
static int op_eval(const hct_op_t *op, const char *expr, const char *what, int T, double *out) {
  hct_symtab_t syms = op->constants;
  hct__symtab_set(&syms, "T", T);
  int64_t v = 0;
  int rc = hct__expr_eval(expr, &syms, &v);
  if (rc != 0) {
    char cause[512];
    snprintf(cause, sizeof cause, "%s", hct_last_error());
    return hct__error(rc, "op '%s': %s '%s' at T=%d: %s", op->name, what, expr, T, cause);
  }
  *out = (double)v;
  return 0;
}
int hct__op_floor_bytes(const hct_op_t *op, int T, double *bytes) {
  /* What a call must move at least: each buffer the kernels read or write
   * once.  An inout buffer (resid) is read, and written back only with
   * its optional partner (pending), which the timing does not pass; an
   * optional buffer is absent. */
  static const int counted[] = {[HCT_BUF_INPUT] = 1, [HCT_BUF_WEIGHT] = 1, [HCT_BUF_OUTPUT] = 1,
                                [HCT_BUF_INOUT] = 1, [HCT_BUF_OPTIONAL] = 0};
  *bytes = 0;
  for (int i = 0; i < op->n_buffers; i++) {
    const hct_buffer_t *b = &op->buffers[i];
    if ((size_t)b->role >= HCT_ARRAY_SIZE(counted) || !counted[b->role]) continue;
    double n;
    int rc = op_eval(op, b->elems, "buffer elems", T, &n);
    if (rc < 0) return rc;
    *bytes += n * (double)hct__dtype_size(b->dtype);
  }
  return 0;
}
int hct__op_flops(const hct_op_t *op, int T, double *flops) {
  *flops = 0;
  if (op->flops_expr[0] == '\0') return 0;
  return op_eval(op, op->flops_expr, "flops", T, flops);
}
int hct__op_probe_tokens(const hct_op_t *op, hct_tokens_t *out) {
  memset(out, 0, sizeof *out);
  if (op->n_probe_tokens > 0) {
    for (int k = 0; k < op->n_probe_tokens; k++) hct__tokens_add(out, op->probe_tokens[k]);
    return 0;
  }
  if (op->tmax - op->tmin >= HCT_MAX_TOKEN_LIST)
    return hct__error(HCT_ERANGE, "op '%s': its range %d..%d is more than %d token counts and its manifest "
                      "names no probe_tokens: name some with --tokens", op->name, op->tmin, op->tmax,
                      HCT_MAX_TOKEN_LIST);
  for (int T = op->tmin; T <= op->tmax; T++) hct__tokens_add(out, T);
  return 0;
}
