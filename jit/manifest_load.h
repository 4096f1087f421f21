/*
 * manifest_load.h: what the files that load a manifest share, and nothing
 * else includes: the load's context, the field readers, and the parts of
 * a variant that jit/manifest.c reads through jit/manifest_variant.c.
 *
 * Files:
 *   jit/manifest.c          the file and the op's sections; the entry
 *                           points of jit.h (hct__manifest_load ...)
 *   jit/manifest_variant.c  the variants: fields, cross-checks, points
 *   jit/manifest_fields.c   the one-line error, unknown keys, strings,
 *                           expressions, ranges, dtype names
 *
 * Loading is single-threaded per op; the functions keep no state but the
 * context.
 */
#ifndef HCT_MANIFEST_LOAD_H
#define HCT_MANIFEST_LOAD_H

#include <jansson.h>

#include "jit.h"

/* The load of one op: its name, its manifest's path, the first error. */
typedef struct {
  const char *op;   /* the folder's name, which names the op */
  const char *path; /* of manifest.json */
  int err;
} hct_mf_ctx_t;

/* ---- reading fields (jit/manifest_fields.c) ------------------------------ */

/* The first error of a load, as one line: the op, its manifest, the field
 * and the cause ("op 'foo' (k/foo/manifest.json): variant 'v1' launches[0]:
 * unknown name 'BLOKS'"); later ones are dropped.  Returns the error. */
int hct__mf_bad(hct_mf_ctx_t *c, const char *field, const char *cause);
/* Refuses a key of `obj` that `known` (n names) does not list. */
int hct__mf_check_keys(hct_mf_ctx_t *c, json_t *obj, const char *field, const char *const *known,
                       size_t n);
#define CHECK_KEYS(c, obj, field, known) hct__mf_check_keys(c, obj, field, known, HCT_ARRAY_SIZE(known))
/* A string member (NULL when absent: an error when required). */
const char *hct__mf_get_str(hct_mf_ctx_t *c, json_t *obj, const char *key, const char *field,
                            int required);
/* Copies src (NULL: nothing) into dst[len]; `key` names it in the error. */
void hct__mf_copy_str(hct_mf_ctx_t *c, char *dst, size_t len, const char *src, const char *field,
                      const char *key);
/* A number or an expression string, stored as text. */
void hct__mf_get_expr(hct_mf_ctx_t *c, json_t *v, char *dst, size_t len, const char *field);
/* "tokens": [lo, hi] of obj into *lo, *hi (absent: left as they are). */
int hct__mf_get_range(hct_mf_ctx_t *c, json_t *obj, const char *field, int *lo, int *hi);
/* An expression evaluated over `names` (dummy values): a typo fails here. */
void hct__mf_check_expr(hct_mf_ctx_t *c, const hct_symtab_t *names, const char *expr,
                        const char *field);

/* The dtype names a manifest may use, with their sizes. */
typedef struct hct_mf_dtype_s {
  const char *name;
  hct_dtype_t dt;
  size_t size;
} hct_mf_dtype_t;
extern const hct_mf_dtype_t hct__mf_dtypes[];
extern const size_t hct__mf_n_dtypes;

/* ---- the variants (jit/manifest_variant.c) ------------------------------- */

/* "scratch" of a variant or of the reference, into v. */
void hct__mf_load_scratch(hct_mf_ctx_t *c, json_t *scr, hct_variant_t *v, const char *field,
                          const hct_symtab_t *names);
/* A "search" object (op or variant level) over *out, which holds the
 * defaults it inherits. */
int hct__mf_load_search(hct_mf_ctx_t *c, json_t *js, const char *field, hct_search_t *out);
/* "launches" of a variant or (reference = 1) of the reference, into v. */
void hct__mf_load_launches(hct_mf_ctx_t *c, const hct_op_t *op, json_t *launches, hct_variant_t *v,
                           const char *field, const hct_symtab_t *names, int reference);
/* "variants" and "families" of root into op, then every variant's points
 * (and the reference's) checked. */
int hct__mf_load_variants(hct_mf_ctx_t *c, json_t *root, hct_op_t *op);

#endif /* HCT_MANIFEST_LOAD_H */
