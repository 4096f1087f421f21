/*
 * manifest_fields.c: reading the fields of a manifest, for the files that
 * load one (jit/manifest.c, jit/manifest_variant.c, through
 * jit/manifest_load.h): the first error of a load as one line naming the
 * op, its file and the field; unknown keys refused; strings, expressions
 * and token ranges read and checked; the dtype names and their sizes.
 * Calls nothing of the loader above it.
 */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "manifest_load.h"

/* The first error of a load, as one line: the op, its manifest, the field
 * and the cause ("op 'foo' (k/foo/manifest.json): variant 'v1' launches[0]:
 * unknown name 'BLOKS'"), so a broken op is fixed from the message alone. */
int hct__mf_bad(hct_mf_ctx_t *c, const char *field, const char *cause) {
  if (!c->err)
    c->err = hct__error(HCT_EMANIFEST, "op '%s' (%s): %s: %s", c->op, c->path, field, cause);
  return c->err;
}
/* Refuses a key of `obj` that `known` does not list: a misspelt optional
 * field ("constraint" for "constraints") would otherwise be ignored, and
 * the op would run without what its author wrote. */
int hct__mf_check_keys(hct_mf_ctx_t *c, json_t *obj, const char *field, const char *const *known,
                      size_t n) {
  const char *key;
  json_t *x;
  if (c->err || !json_is_object(obj)) return c->err;
  json_object_foreach(obj, key, x) {
    size_t k;
    for (k = 0; k < n && strcmp(known[k], key) != 0; k++) {}
    if (k == n) {
      char cause[160];
      snprintf(cause, sizeof cause, "unknown field '%.100s'", key);
      return hct__mf_bad(c, field, cause);
    }
  }
  return 0;
}
const char *hct__mf_get_str(hct_mf_ctx_t *c, json_t *obj, const char *key, const char *field, int required) {
  json_t *v = json_object_get(obj, key);
  if (v == NULL || json_is_null(v)) {
    if (required) hct__mf_bad(c, field, "missing");
    return NULL;
  }
  if (!json_is_string(v)) {
    hct__mf_bad(c, field, "not a string");
    return NULL;
  }
  return json_string_value(v);
}
/* Copies src (NULL: nothing) into dst[len]; `key` names it in the error. */
void hct__mf_copy_str(hct_mf_ctx_t *c, char *dst, size_t len, const char *src, const char *field,
                     const char *key) {
  if (src == NULL) return;
  if (strlen(src) >= len) {
    char cause[128];
    snprintf(cause, sizeof cause, "%s too long: %zu characters, at most %zu", key, strlen(src),
             len - 1);
    hct__mf_bad(c, field, cause);
    return;
  }
  hct__strlcpy(dst, src, len);
}
/* A number or an expression string, stored as text. */
void hct__mf_get_expr(hct_mf_ctx_t *c, json_t *v, char *dst, size_t len, const char *field) {
  if (json_is_integer(v)) {
    snprintf(dst, len, "%lld", (long long)json_integer_value(v));
  } else if (json_is_string(v)) {
    hct__mf_copy_str(c, dst, len, json_string_value(v), field, "expression");
  } else {
    hct__mf_bad(c, field, "must be a number or an expression string");
  }
}
const hct_mf_dtype_t hct__mf_dtypes[] = {{"f32", HCT_DT_F32, 4}, {"bf16", HCT_DT_BF16, 2}, {"f16", HCT_DT_F16, 2},
              {"u32", HCT_DT_U32, 4}, {"i32", HCT_DT_I32, 4}};
const size_t hct__mf_n_dtypes = HCT_ARRAY_SIZE(hct__mf_dtypes);
size_t hct__dtype_size(hct_dtype_t t) {
  for (size_t i = 0; i < hct__mf_n_dtypes; i++)
    if (hct__mf_dtypes[i].dt == t) return hct__mf_dtypes[i].size;
  return 0;
}
int hct__mf_get_range(hct_mf_ctx_t *c, json_t *obj, const char *field, int *lo, int *hi) {
  json_t *v = json_object_get(obj, "tokens");
  if (v == NULL) return 0; /* keep defaults */
  if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 0)) ||
      !json_is_integer(json_array_get(v, 1)))
    return hct__mf_bad(c, field, "must be [min, max]");
  *lo = (int)json_integer_value(json_array_get(v, 0));
  *hi = (int)json_integer_value(json_array_get(v, 1));
  if (*lo < 1 || *hi < *lo) return hct__mf_bad(c, field, "needs 1 <= min <= max");
  return 0;
}
/* Checks an expression's syntax and names: every name it may use gets a
 * dummy value of 1. */
void hct__mf_check_expr(hct_mf_ctx_t *c, const hct_symtab_t *names, const char *expr, const char *field) {
  int64_t v;
  if (c->err) return;
  if (hct__expr_eval(expr, names, &v) != 0) {
    char cause[600];
    snprintf(cause, sizeof cause, "%s", hct_last_error());
    hct__mf_bad(c, field, cause);
  }
}
