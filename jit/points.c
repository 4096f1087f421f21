/*
 * points.c: a variant's parameter points: enumerated, read from and
 * written as JSON, their names bound for expressions; whether a variant
 * fits a card and its constraints hold at a point; tensor maps evaluated.
 * Pure functions of the loaded op; any thread.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

int hct__variant_fits(const hct_variant_t *v, hct_backend_kind_t backend, int arch_num,
                      int warp_size, char *why, size_t len) {
  if (backend == HCT_BACKEND_CUDA && v->min_arch > arch_num) {
    snprintf(why, len, "needs sm_%d or newer", v->min_arch);
    return 0;
  }
  /* sm_90a code (wgmma, setmaxnreg) exists on sm_90 only: a newer card
   * has no such instructions. */
  if (backend == HCT_BACKEND_CUDA && v->arch_specific && v->min_arch != arch_num) {
    snprintf(why, len, "arch-specific: compiled for sm_%da, runs on sm_%d only", v->min_arch,
             v->min_arch);
    return 0;
  }
  if (backend == HCT_BACKEND_HIP && !v->hip) {
    snprintf(why, len, "does not support HIP");
    return 0;
  }
  if (warp_size == 64 && !v->wave64) {
    snprintf(why, len, "does not support 64-wide waves");
    return 0;
  }
  return 1;
}
int hct__constraints_hold(const hct_variant_t *v, const hct_symtab_t *syms, int partial, char *why,
                          size_t len) {
  for (int i = 0; i < v->n_constraints; i++) {
    int64_t val = 0;
    int rc = hct__expr_eval(v->constraints[i], syms, &val);
    if (rc == HCT_ENOENT && partial) continue;
    if (rc != 0) {
      snprintf(why, len, "constraint '%s' cannot be evaluated: %s", v->constraints[i], hct_last_error());
      hct__error_clear();
      return 0;
    }
    if (val == 0) {
      snprintf(why, len, "constraint '%s' is false", v->constraints[i]);
      return 0;
    }
  }
  hct__error_clear();
  return 1;
}
int hct__tmap_arg(const hct_tmap_spec_t *maps, int n, const char *text) {
  static const char prefix[] = "@tmap(";
  size_t len = strlen(text);
  if (strncmp(text, prefix, sizeof prefix - 1) != 0) return 0;
  if (len < sizeof prefix || text[len - 1] != ')') return -1;
  for (int i = 0; i < n; i++) {
    size_t nl = strlen(maps[i].name);
    if (nl == len - sizeof prefix && strncmp(text + sizeof prefix - 1, maps[i].name, nl) == 0)
      return i + 1;
  }
  return -1;
}
void hct__point_first(const hct_variant_t *v, hct_point_t *pt) {
  memset(pt, 0, sizeof *pt);
  for (int p = 0; p < v->n_params; p++) pt->v[p] = v->params[p].values[0];
}
int hct__param_points(const hct_variant_t *v, hct_point_t *out, int max) {
  int idx[HCT_MAX_PARAMS] = {0};
  int n = 0;
  for (;;) {
    if (n < max) {
      for (int p = 0; p < v->n_params; p++) out[n].v[p] = v->params[p].values[idx[p]];
    }
    n++;
    int p = v->n_params - 1;
    while (p >= 0 && ++idx[p] == v->params[p].n_values) idx[p--] = 0;
    if (p < 0) break;
  }
  return n < max ? n : max;
}
int hct__point_from_json(const hct_variant_t *v, const json_t *params, hct_point_t *pt) {
  memset(pt, 0, sizeof *pt);
  if (params != NULL && !json_is_object(params))
    return hct__error(HCT_EINVAL, "params of '%s': not a JSON object", v->name);
  size_t given = params != NULL ? json_object_size(params) : 0;
  if ((size_t)v->n_params != given)
    return hct__error(HCT_EINVAL, "params of '%s': the variant has %d parameters, %zu given", v->name,
                      v->n_params, given);
  for (int p = 0; p < v->n_params; p++) {
    const hct_param_t *par = &v->params[p];
    json_t *x = json_object_get(params, par->name);
    if (!json_is_integer(x))
      return hct__error(HCT_EINVAL, "params of '%s': '%s' missing or not an integer", v->name,
                        par->name);
    long long val = json_integer_value(x);
    int known = 0;
    for (int i = 0; i < par->n_values && !known; i++) known = par->values[i] == val;
    if (!known)
      return hct__error(HCT_ERANGE, "params of '%s': %s=%lld is not a value the manifest lists",
                        v->name, par->name, val);
    pt->v[p] = val;
  }
  return 0;
}
int hct__point_parse(const hct_variant_t *v, const char *text, hct_point_t *pt) {
  json_error_t jerr;
  json_t *j = json_loads(text != NULL ? text : "{}", 0, &jerr);
  if (j == NULL) return hct__error(HCT_EINVAL, "params of '%s': %s", v->name, jerr.text);
  int rc = hct__point_from_json(v, j, pt);
  json_decref(j);
  return rc;
}
void hct__point_json(const hct_variant_t *v, const hct_point_t *pt, char *buf, size_t len) {
  size_t off = (size_t)snprintf(buf, len, "{");
  for (int p = 0; p < v->n_params && off < len; p++)
    off += (size_t)snprintf(buf + off, len - off, "%s\"%s\":%lld", p ? "," : "", v->params[p].name,
                            (long long)pt->v[p]);
  if (off < len) snprintf(buf + off, len - off, "}");
}
int hct__tmap_eval(const hct_tmap_spec_t *t, const hct_symtab_t *syms, size_t bytes,
                   hct_tmap_dims_t *out) {
  memset(out, 0, sizeof *out);
  out->dtype = t->dtype;
  out->rank = t->rank;
  out->swizzle = t->swizzle;
  const uint64_t esize = hct__dtype_size(t->dtype);
  uint64_t stride = esize;
  for (int d = 0; d < t->rank; d++) {
    int64_t dim, box;
    int rc = hct__expr_eval(t->dims[d], syms, &dim);
    if (rc == 0) rc = hct__expr_eval(t->box[d], syms, &box);
    if (rc != 0)
      return hct__error(rc, "tensor map '%s': dimension %d: %s", t->name, d, hct_last_error());
    if (dim < 1 || dim > ((int64_t)1 << 32))
      return hct__error(HCT_ERANGE, "tensor map '%s': dims[%d] = %lld, want 1..2^32", t->name, d,
                        (long long)dim);
    if (box < 1 || box > 256)
      return hct__error(HCT_ERANGE, "tensor map '%s': box[%d] = %lld, want 1..256", t->name, d,
                        (long long)box);
    out->dims[d] = (uint64_t)dim;
    out->box[d] = (uint32_t)box;
    out->strides[d] = stride;
    /* The driver wants every stride above the element a multiple of 16. */
    if (d > 0 && stride % 16 != 0)
      return hct__error(HCT_EINVAL, "tensor map '%s': a row of dimension %d is %llu bytes, not a "
                                    "multiple of 16", t->name, d, (unsigned long long)stride);
    stride *= (uint64_t)dim;
  }
  if (t->swizzle > 0 && out->box[0] * esize > (uint64_t)t->swizzle)
    return hct__error(HCT_EINVAL, "tensor map '%s': an inner box of %llu bytes exceeds the %d-byte "
                                  "swizzle span", t->name, (unsigned long long)(out->box[0] * esize),
                      t->swizzle);
  if ((out->box[0] * esize) % 16 != 0)
    return hct__error(HCT_EINVAL, "tensor map '%s': an inner box of %llu bytes, not a multiple of "
                                  "16", t->name, (unsigned long long)(out->box[0] * esize));
  if (stride > bytes)
    return hct__error(HCT_ERANGE, "tensor map '%s': spans %llu bytes of '%s', which has %zu",
                      t->name, (unsigned long long)stride, t->target, bytes);
  return 0;
}
void hct__point_symtab(const hct_op_t *op, const hct_variant_t *v, const hct_point_t *pt,
                       hct_symtab_t *syms) {
  *syms = op->constants;
  for (int p = 0; p < v->n_params; p++) hct__symtab_set(syms, v->params[p].name, pt->v[p]);
}
