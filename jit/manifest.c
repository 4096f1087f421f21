/*
 * manifest.c: loads kernels-src/<op>/manifest.json (format: docs/manifest.md)
 * into the structures of jit.h, and enumerates parameter points.
 *
 * Every error names the file and the field, so a broken manifest is fixed
 * from the message alone.  Expressions are checked for syntax here (with
 * dummy values) so that a typo fails at load time, not in the middle of a
 * probe.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit.h"

typedef struct {
  const char *op;   /* the folder's name, which names the op */
  const char *path; /* of manifest.json */
  int err;
} ctx_t;

/* The first error of a load, as one line: the op, its manifest, the field
 * and the cause ("op 'foo' (k/foo/manifest.json): variant 'v1' launches[0]:
 * unknown name 'BLOKS'"), so a broken op is fixed from the message alone. */
static int bad(ctx_t *c, const char *field, const char *cause) {
  if (!c->err)
    c->err = hct__error(HCT_EMANIFEST, "op '%s' (%s): %s: %s", c->op, c->path, field, cause);
  return c->err;
}

/* Refuses a key of `obj` that `known` does not list: a misspelt optional
 * field ("constraint" for "constraints") would otherwise be ignored, and
 * the op would run without what its author wrote. */
static int check_keys(ctx_t *c, json_t *obj, const char *field, const char *const *known,
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
      return bad(c, field, cause);
    }
  }
  return 0;
}
#define CHECK_KEYS(c, obj, field, known) check_keys(c, obj, field, known, HCT_ARRAY_SIZE(known))

/* The fields each object of a manifest may have (docs/manifest.md). */
static const char *const keys_top[] = {"op",     "description", "selftest",     "tokens",
                                       "constants", "buffers",  "inputs",       "reference",
                                       "kl",     "timing",      "probe_tokens", "checks",
                                       "search", "flops",       "variants",     "families"};
static const char *const keys_buffer[] = {"name", "dtype", "role", "elems", "row"};
static const char *const keys_input[] = {"buffer", "mean", "sd", "fan_in"};
static const char *const keys_reference[] = {"template", "rows", "scratch", "launches"};
static const char *const keys_rows[] = {"sample", "why"};
static const char *const keys_scratch[] = {"name", "bytes", "zero"};
static const char *const keys_variant[] = {
    "name",     "template",    "class",  "reference",   "min_arch",  "hip",
    "wave64",   "arch_specific", "tokens", "grid_barrier", "description", "params",
    "constraints", "scratch",  "launches", "tensor_maps", "search"};
static const char *const keys_param[] = {"name", "values"};
static const char *const keys_launch[] = {"entry", "grid", "block", "smem", "pdl", "args"};
static const char *const keys_tmap[] = {"name", "buffer", "dtype", "dims", "box", "swizzle"};
static const char *const keys_kl[] = {"mean_factor", "abs_floor", "maxerr_factor",
                                      "baseline_max_rel_err"};
static const char *const keys_timing[] = {"mode", "batch"};

static const char *get_str(ctx_t *c, json_t *obj, const char *key, const char *field, int required) {
  json_t *v = json_object_get(obj, key);
  if (v == NULL || json_is_null(v)) {
    if (required) bad(c, field, "missing");
    return NULL;
  }
  if (!json_is_string(v)) {
    bad(c, field, "not a string");
    return NULL;
  }
  return json_string_value(v);
}

/* Copies src (NULL: nothing) into dst[len]; `key` names it in the error. */
static void copy_str(ctx_t *c, char *dst, size_t len, const char *src, const char *field,
                     const char *key) {
  if (src == NULL) return;
  if (strlen(src) >= len) {
    char cause[128];
    snprintf(cause, sizeof cause, "%s too long: %zu characters, at most %zu", key, strlen(src),
             len - 1);
    bad(c, field, cause);
    return;
  }
  hct__strlcpy(dst, src, len);
}

/* A number or an expression string, stored as text. */
static void get_expr(ctx_t *c, json_t *v, char *dst, size_t len, const char *field) {
  if (json_is_integer(v)) {
    snprintf(dst, len, "%lld", (long long)json_integer_value(v));
  } else if (json_is_string(v)) {
    copy_str(c, dst, len, json_string_value(v), field, "expression");
  } else {
    bad(c, field, "must be a number or an expression string");
  }
}

static const struct {
  const char *name;
  hct_dtype_t dt;
  size_t size;
} dtypes[] = {{"f32", HCT_DT_F32, 4}, {"bf16", HCT_DT_BF16, 2}, {"f16", HCT_DT_F16, 2},
              {"u32", HCT_DT_U32, 4}, {"i32", HCT_DT_I32, 4}};

static const struct {
  const char *name;
  hct_buf_role_t role;
} roles[] = {{"input", HCT_BUF_INPUT},
             {"weight", HCT_BUF_WEIGHT},
             {"output", HCT_BUF_OUTPUT},
             {"inout", HCT_BUF_INOUT},
             {"optional", HCT_BUF_OPTIONAL}};


size_t hct__dtype_size(hct_dtype_t t) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(dtypes); i++)
    if (dtypes[i].dt == t) return dtypes[i].size;
  return 0;
}

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

static int get_range(ctx_t *c, json_t *obj, const char *field, int *lo, int *hi) {
  json_t *v = json_object_get(obj, "tokens");
  if (v == NULL) return 0; /* keep defaults */
  if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 0)) ||
      !json_is_integer(json_array_get(v, 1)))
    return bad(c, field, "must be [min, max]");
  *lo = (int)json_integer_value(json_array_get(v, 0));
  *hi = (int)json_integer_value(json_array_get(v, 1));
  if (*lo < 1 || *hi < *lo) return bad(c, field, "needs 1 <= min <= max");
  return 0;
}

/* Checks an expression's syntax and names: every name it may use gets a
 * dummy value of 1. */
static void check_expr(ctx_t *c, const hct_symtab_t *names, const char *expr, const char *field) {
  int64_t v;
  if (c->err) return;
  if (hct__expr_eval(expr, names, &v) != 0) {
    char cause[600];
    snprintf(cause, sizeof cause, "%s", hct_last_error());
    bad(c, field, cause);
  }
}

/* The "scratch" array of a variant or of the reference into v. */
static void load_scratch(ctx_t *c, json_t *scr, hct_variant_t *v, const char *field,
                         const hct_symtab_t *names) {
  size_t i;
  json_t *js;
  if (scr != NULL && !json_is_array(scr)) {
    bad(c, field, "scratch must be an array");
    return;
  }
  json_array_foreach(scr, i, js) {
    if (c->err) return;
    if (v->n_scratch == (int)HCT_ARRAY_SIZE(v->scratch)) {
      bad(c, field, "too many scratch buffers");
      return;
    }
    if (!json_is_object(js)) {
      bad(c, field, "a scratch entry must be an object");
      return;
    }
    if (CHECK_KEYS(c, js, field, keys_scratch) != 0) return;
    hct_scratch_t *s = &v->scratch[v->n_scratch++];
    copy_str(c, s->name, sizeof s->name, get_str(c, js, "name", field, 1), field, "name");
    json_t *b = json_object_get(js, "bytes");
    if (b == NULL) {
      bad(c, field, "scratch needs bytes");
      return;
    }
    get_expr(c, b, s->bytes, sizeof s->bytes, field);
    check_expr(c, names, s->bytes, field);
    json_t *z = json_object_get(js, "zero");
    if (z == NULL || json_is_false(z))
      s->zero = HCT_ZERO_NEVER;
    else if (json_is_true(z))
      s->zero = HCT_ZERO_EACH_RUN;
    else if (json_is_string(z) && strcmp(json_string_value(z), "once") == 0)
      s->zero = HCT_ZERO_ONCE;
    else {
      bad(c, field, "scratch zero must be true, false or \"once\"");
      return;
    }
  }
}

/* Whether a pointer argument ("@x", without the @) may be passed: a buffer
 * or scratch of a variant; for the reference (`reference`), its scratch,
 * "rows", "ref.<output or inout>", and the op's buffers that are not
 * outputs (the device copies of the check's inputs).  0, or the cause. */
static int pointer_ok(const hct_op_t *op, const hct_variant_t *v, const char *name, int reference,
                      char *cause, size_t len) {
  for (int s = 0; s < v->n_scratch; s++)
    if (strcmp(v->scratch[s].name, name) == 0) return 0;
  if (reference && strcmp(name, "rows") == 0) return 0;
  if (reference && strncmp(name, "ref.", 4) == 0) {
    const hct_buffer_t *b = hct__buffer_find(op, name + 4);
    if (b == NULL) {
      snprintf(cause, len, "argument '@%s' names no buffer", name);
      return -1;
    }
    if (b->role != HCT_BUF_OUTPUT && b->role != HCT_BUF_INOUT) {
      snprintf(cause, len, "argument '@%s': '%s' is not an output or inout buffer", name, b->name);
      return -1;
    }
    return 0;
  }
  const hct_buffer_t *b = hct__buffer_find(op, name);
  if (b == NULL) {
    snprintf(cause, len, "argument '@%s' names no buffer or scratch", name);
    return -1;
  }
  if (reference && b->role == HCT_BUF_OUTPUT) {
    snprintf(cause, len, "argument '@%s' is an output: the reference writes '@ref.%s'", name, name);
    return -1;
  }
  return 0;
}

/* The defaults of "search": exhaustive, and for halving a quarter kept per
 * round (and whatever is not clearly slower than the cut) from 3 samples
 * up to 24, two survivors, two carried from the previous T, families of
 * more than 8 points. */
static const hct_search_t search_defaults = {HCT_SEARCH_EXHAUSTIVE, 0.25, 1, 3, 2, 24, 2, 2, 8};

/* Reads a "search" object (op or variant level: `field` names it) over
 * *out, which holds the defaults it inherits. */
static int load_search(ctx_t *c, json_t *js, const char *field, hct_search_t *out) {
  if (js == NULL) return 0;
  if (!json_is_object(js)) return bad(c, field, "must be an object");
  static const char *const known[] = {"strategy", "keep", "rule", "first_samples", "growth",
                                      "max_samples", "final_points", "carry", "min_points", "why"};
  if (CHECK_KEYS(c, js, field, known) != 0) return c->err;
  json_t *x;
  const char *st = json_string_value(json_object_get(js, "strategy"));
  if (json_object_get(js, "strategy") != NULL) {
    if (st != NULL && strcmp(st, "exhaustive") == 0) out->strategy = HCT_SEARCH_EXHAUSTIVE;
    else if (st != NULL && strcmp(st, "halving") == 0) out->strategy = HCT_SEARCH_HALVING;
    else return bad(c, field, "strategy must be exhaustive or halving");
  }
  const char *rule = json_string_value(json_object_get(js, "rule"));
  if (json_object_get(js, "rule") != NULL) {
    if (rule != NULL && strcmp(rule, "ci") == 0) out->ci_rule = 1;
    else if (rule != NULL && strcmp(rule, "median") == 0) out->ci_rule = 0;
    else return bad(c, field, "rule must be ci or median");
  }
  if ((x = json_object_get(js, "keep")) != NULL) {
    if (!json_is_number(x) || !(json_number_value(x) > 0 && json_number_value(x) < 1))
      return bad(c, field, "keep must be a number between 0 and 1, both excluded");
    out->keep = json_number_value(x);
  }
  static const struct {
    const char *name;
    size_t off;
    int lo, hi;
  } ints[] = {{"first_samples", offsetof(hct_search_t, first_samples), 1, 1000},
              {"growth", offsetof(hct_search_t, growth), 2, 16},
              {"max_samples", offsetof(hct_search_t, max_samples), 1, 10000},
              {"final_points", offsetof(hct_search_t, final_points), 1, 64},
              {"carry", offsetof(hct_search_t, carry), 0, 64},
              {"min_points", offsetof(hct_search_t, min_points), 1, 100000}};
  for (size_t k = 0; k < HCT_ARRAY_SIZE(ints); k++) {
    if ((x = json_object_get(js, ints[k].name)) == NULL) continue;
    if (!json_is_integer(x) || json_integer_value(x) < ints[k].lo || json_integer_value(x) > ints[k].hi) {
      char cause[128];
      snprintf(cause, sizeof cause, "%s must be an integer in %d..%d", ints[k].name, ints[k].lo, ints[k].hi);
      return bad(c, field, cause);
    }
    *(int *)((char *)out + ints[k].off) = (int)json_integer_value(x);
  }
  if (out->max_samples < out->first_samples) return bad(c, field, "max_samples is below first_samples");
  return 0;
}

/* "probe_tokens": the representative counts probed by default, ascending,
 * distinct, inside the op's range, at most one token list. */
static int load_probe_tokens(ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *pt = json_object_get(root, "probe_tokens");
  if (pt == NULL) return 0;
  if (!json_is_array(pt) || json_array_size(pt) == 0 || json_array_size(pt) > HCT_MAX_TOKEN_LIST) {
    char cause[128];
    snprintf(cause, sizeof cause, "must be an array of 1 to %d token counts", HCT_MAX_TOKEN_LIST);
    return bad(c, "probe_tokens", cause);
  }
  size_t i;
  json_t *x;
  json_array_foreach(pt, i, x) {
    long long T = json_is_integer(x) ? json_integer_value(x) : -1;
    char cause[160];
    snprintf(cause, sizeof cause, "item %zu (%lld) must be a count in the op's tokens %d..%d, above the one before it",
             i, T, op->tmin, op->tmax);
    if (T < op->tmin || T > op->tmax || (i > 0 && T <= op->probe_tokens[i - 1])) return bad(c, "probe_tokens", cause);
    op->probe_tokens[op->n_probe_tokens++] = (int)T;
  }
  return 0;
}

/* "flops": optional, the floating-point operations of one call, an
 * expression of T and the constants (the report's compute floor,
 * docs/manifest.md). */
static int load_flops(ctx_t *c, json_t *root, hct_op_t *op, const hct_symtab_t *names) {
  json_t *fl = json_object_get(root, "flops");
  if (fl == NULL) return 0;
  get_expr(c, fl, op->flops_expr, sizeof op->flops_expr, "flops");
  check_expr(c, names, op->flops_expr, "flops");
  return c->err;
}

/* "checks": {"all_points_up_to": N, "why": "..."}: above N tokens the
 * probe checks only the points the search keeps (tuner/probe.c), because
 * a check there copies gigabytes back per run.  N inside the op's range;
 * the reason is required, since it trades checks for time.  Absent: every
 * point is checked at every count. */
static int load_checks(ctx_t *c, json_t *root, hct_op_t *op) {
  op->checks_all_up_to = INT_MAX;
  json_t *js = json_object_get(root, "checks");
  if (js == NULL) return 0;
  if (!json_is_object(js)) return bad(c, "checks", "must be an object");
  static const char *const known[] = {"all_points_up_to", "why"};
  if (CHECK_KEYS(c, js, "checks", known) != 0) return c->err;
  json_t *x = json_object_get(js, "all_points_up_to");
  long long n = json_is_integer(x) ? json_integer_value(x) : -1;
  if (n < op->tmin || n > op->tmax) {
    char cause[160];
    snprintf(cause, sizeof cause, "all_points_up_to must be a token count in the op's tokens %d..%d",
             op->tmin, op->tmax);
    return bad(c, "checks", cause);
  }
  const char *why = get_str(c, js, "why", "checks.why", 1);
  if (why == NULL) return c->err;
  if (why[0] == '\0') return bad(c, "checks.why", "must say why (not empty)");
  op->checks_all_up_to = (int)n;
  hct__strlcpy(op->checks_why, why, sizeof op->checks_why);
  return 0;
}

/* The "launches" array of a variant or (reference) of the op's reference
 * into v: non-empty, every expression valid over names, every pointer
 * argument one pointer_ok allows. */
static void load_launches(ctx_t *c, const hct_op_t *op, json_t *launches, hct_variant_t *v,
                          const char *field, const hct_symtab_t *names, int reference) {
  size_t i;
  if (!json_is_array(launches) || json_array_size(launches) == 0) {
    bad(c, field, "launches must be a non-empty array");
    return;
  }
  json_t *jl;
  json_array_foreach(launches, i, jl) {
    if (c->err) return;
    if (v->n_launches == HCT_MAX_LAUNCHES) {
      bad(c, field, "too many launches");
      return;
    }
    hct_launch_t *l = &v->launches[v->n_launches++];
    char lf[200];
    snprintf(lf, sizeof lf, "%s launches[%zu]", field, i);
    if (!json_is_object(jl)) {
      bad(c, lf, "not an object");
      return;
    }
    if (CHECK_KEYS(c, jl, lf, keys_launch) != 0) return;
    copy_str(c, l->entry, sizeof l->entry, get_str(c, jl, "entry", lf, 1), lf, "entry");
    static const char *const dims[] = {"grid", "block"};
    for (int d = 0; d < 2; d++) {
      json_t *arr = json_object_get(jl, dims[d]);
      char(*dst)[96] = d == 0 ? l->grid : l->block;
      if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > 3) {
        bad(c, lf, d == 0 ? "grid must be an array of 1 to 3 items" : "block must be an array of 1 to 3 items");
        return;
      }
      for (size_t k = 0; k < 3; k++) {
        if (k < json_array_size(arr)) get_expr(c, json_array_get(arr, k), dst[k], 96, lf);
        else hct__strlcpy(dst[k], "1", 96);
        check_expr(c, names, dst[k], lf);
      }
    }
    json_t *sm = json_object_get(jl, "smem");
    if (sm != NULL) get_expr(c, sm, l->smem, sizeof l->smem, lf);
    else hct__strlcpy(l->smem, "0", sizeof l->smem);
    check_expr(c, names, l->smem, lf);
    json_t *pdl = json_object_get(jl, "pdl");
    if (pdl != NULL) get_expr(c, pdl, l->pdl, sizeof l->pdl, lf);
    else hct__strlcpy(l->pdl, "0", sizeof l->pdl);
    check_expr(c, names, l->pdl, lf);
    json_t *args = json_object_get(jl, "args");
    if (!json_is_array(args)) {
      bad(c, lf, "args must be an array");
      return;
    }
    size_t k;
    json_t *ja;
    json_array_foreach(args, k, ja) {
      if (l->n_args == HCT_MAX_ARGS) {
        bad(c, lf, "too many args");
        return;
      }
      hct_arg_t *a = &l->args[l->n_args++];
      get_expr(c, ja, a->text, sizeof a->text, lf);
      if (c->err) return;
      int tm = hct__tmap_arg(v->tmaps, v->n_tmaps, a->text);
      if (tm < 0) {
        char cause[160];
        snprintf(cause, sizeof cause, "argument '%.63s' names no entry of tensor_maps", a->text);
        bad(c, lf, cause);
        return;
      }
      if (tm > 0) {
        a->tmap = tm;
      } else if (a->text[0] == '@') {
        a->is_pointer = 1;
        char cause[160];
        if (pointer_ok(op, v, a->text + 1, reference, cause, sizeof cause) != 0) {
          bad(c, lf, cause);
          return;
        }
      } else {
        check_expr(c, names, a->text, lf);
      }
    }
  }
}

/* Whether `name` is a buffer of the op or a scratch of v; its buffer (NULL
 * for scratch) in *buf. */
static int names_memory(const hct_op_t *op, const hct_variant_t *v, const char *name,
                        const hct_buffer_t **buf) {
  *buf = NULL;
  for (int b = 0; b < op->n_buffers; b++)
    if (strcmp(op->buffers[b].name, name) == 0) {
      *buf = &op->buffers[b];
      return 1;
    }
  for (int s = 0; s < v->n_scratch; s++)
    if (strcmp(v->scratch[s].name, name) == 0) return 1;
  return 0;
}

static const struct {
  const char *name;
  int bytes;
} swizzles[] = {{"none", 0}, {"32B", 32}, {"64B", 64}, {"128B", 128}};

/* "tensor_maps": [{"name", "buffer", "dtype", "dims", "box", "swizzle"}] */
static void load_tmaps(ctx_t *c, const hct_op_t *op, json_t *jv, hct_variant_t *v,
                       const hct_symtab_t *names, const char *vfield) {
  json_t *arr = json_object_get(jv, "tensor_maps");
  if (arr == NULL) return;
  char field[200];
  snprintf(field, sizeof field, "%s tensor_maps", vfield);
  if (!json_is_array(arr)) {
    bad(c, field, "must be an array");
    return;
  }
  size_t i;
  json_t *jt;
  json_array_foreach(arr, i, jt) {
    if (c->err) return;
    snprintf(field, sizeof field, "%s tensor_maps[%zu]", vfield, i);
    if (v->n_tmaps == HCT_MAX_TMAPS) {
      bad(c, field, "too many tensor maps (at most 8)");
      return;
    }
    if (!json_is_object(jt)) {
      bad(c, field, "not an object");
      return;
    }
    if (CHECK_KEYS(c, jt, field, keys_tmap) != 0) return;
    hct_tmap_spec_t *t = &v->tmaps[v->n_tmaps++];
    copy_str(c, t->name, sizeof t->name, get_str(c, jt, "name", field, 1), field, "name");
    copy_str(c, t->target, sizeof t->target, get_str(c, jt, "buffer", field, 1), field, "buffer");
    const char *dt = get_str(c, jt, "dtype", field, 1);
    const char *sw = get_str(c, jt, "swizzle", field, 0);
    if (c->err) return;
    for (int k = 0; k + 1 < v->n_tmaps; k++)
      if (strcmp(v->tmaps[k].name, t->name) == 0) {
        bad(c, field, "name used twice");
        return;
      }
    const hct_buffer_t *buf;
    if (!names_memory(op, v, t->target, &buf)) {
      bad(c, field, "buffer names no buffer or scratch");
      return;
    }
    size_t k;
    for (k = 0; k < HCT_ARRAY_SIZE(dtypes) && strcmp(dt, dtypes[k].name) != 0; k++) {}
    if (k == HCT_ARRAY_SIZE(dtypes)) {
      bad(c, field, "dtype must be f32, bf16, f16, u32 or i32");
      return;
    }
    t->dtype = dtypes[k].dt;
    if (buf != NULL && buf->dtype != t->dtype) {
      bad(c, field, "dtype differs from the buffer's");
      return;
    }
    t->swizzle = -1;
    for (k = 0; k < HCT_ARRAY_SIZE(swizzles); k++)
      if (strcmp(sw ? sw : "none", swizzles[k].name) == 0) t->swizzle = swizzles[k].bytes;
    if (t->swizzle < 0) {
      bad(c, field, "swizzle must be none, 32B, 64B or 128B");
      return;
    }
    json_t *dims = json_object_get(jt, "dims"), *box = json_object_get(jt, "box");
    if (!json_is_array(dims) || json_array_size(dims) < 1 ||
        json_array_size(dims) > HCT_TMAP_MAX_RANK) {
      bad(c, field, "dims must be an array of 1 to 5 expressions, innermost first");
      return;
    }
    if (!json_is_array(box) || json_array_size(box) != json_array_size(dims)) {
      bad(c, field, "box must be an array of as many expressions as dims");
      return;
    }
    t->rank = (int)json_array_size(dims);
    for (int d = 0; d < t->rank; d++) {
      get_expr(c, json_array_get(dims, (size_t)d), t->dims[d], sizeof t->dims[d], field);
      check_expr(c, names, t->dims[d], field);
      get_expr(c, json_array_get(box, (size_t)d), t->box[d], sizeof t->box[d], field);
      check_expr(c, names, t->box[d], field);
    }
  }
}

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

/* A variant's "params" (each a name and its values, added to `names`)
 * and "constraints" (expressions over names). */
static void load_params(ctx_t *c, json_t *jv, hct_variant_t *v, const char *field,
                        hct_symtab_t *names) {
  size_t i;
  json_t *params = json_object_get(jv, "params");
  if (params != NULL && !json_is_array(params)) bad(c, field, "params must be an array");
  json_t *jp;
  json_array_foreach(params, i, jp) {
    if (c->err) return;
    if (v->n_params == HCT_MAX_PARAMS) {
      bad(c, field, "too many params");
      return;
    }
    if (!json_is_object(jp)) {
      bad(c, field, "a param must be an object");
      return;
    }
    if (CHECK_KEYS(c, jp, field, keys_param) != 0) return;
    hct_param_t *p = &v->params[v->n_params++];
    copy_str(c, p->name, sizeof p->name, get_str(c, jp, "name", field, 1), field, "name");
    json_t *vals = json_object_get(jp, "values");
    if (!json_is_array(vals) || json_array_size(vals) == 0 ||
        json_array_size(vals) > HCT_MAX_PARAM_VALUES) {
      bad(c, field, "param values must be a non-empty array of at most 16 integers");
      return;
    }
    size_t k;
    json_t *jval;
    json_array_foreach(vals, k, jval) {
      if (!json_is_integer(jval)) {
        bad(c, field, "param values must be integers");
        return;
      }
      p->values[p->n_values++] = json_integer_value(jval);
    }
    hct__symtab_set(names, p->name, 1);
  }

  json_t *cons = json_object_get(jv, "constraints");
  if (cons != NULL && !json_is_array(cons)) {
    bad(c, field, "constraints must be an array of expressions");
    return;
  }
  json_t *jc;
  json_array_foreach(cons, i, jc) {
    if (v->n_constraints == HCT_MAX_CONSTRAINTS) {
      bad(c, field, "too many constraints");
      return;
    }
    get_expr(c, jc, v->constraints[v->n_constraints], sizeof v->constraints[0], field);
    check_expr(c, names, v->constraints[v->n_constraints], field);
    v->n_constraints++;
  }
}

static void load_variant(ctx_t *c, hct_op_t *op, json_t *jv, hct_variant_t *v, int idx) {
  char field[160];
  snprintf(field, sizeof field, "variants[%d]", idx);
  if (!json_is_object(jv)) {
    bad(c, field, "not an object");
    return;
  }
  copy_str(c, v->name, sizeof v->name, get_str(c, jv, "name", field, 1), field, "name");
  if (c->err) return;
  snprintf(field, sizeof field, "variant '%s'", v->name);
  if (CHECK_KEYS(c, jv, field, keys_variant) != 0) return;
  copy_str(c, v->template_file, sizeof v->template_file, get_str(c, jv, "template", field, 1),
           field, "template");
  copy_str(c, v->description, sizeof v->description, get_str(c, jv, "description", field, 0),
           field, "description");
  const char *cls = get_str(c, jv, "class", field, 1);
  if (c->err) return;
  size_t i;
  if (hct__parity_from_name(cls, &v->parity) < 0) {
    hct__error_clear();
    bad(c, field, "class must be baseline, bitwise or kl");
    return;
  }
  copy_str(c, v->reference, sizeof v->reference, get_str(c, jv, "reference", field, 0), field,
           "reference");
  if (v->parity == HCT_PARITY_BITWISE && v->reference[0] == '\0') {
    bad(c, field, "a bitwise variant needs a reference");
    return;
  }
  json_t *x;
  v->min_arch = (x = json_object_get(jv, "min_arch")) ? (int)json_integer_value(x) : 0;
  v->hip = json_is_true(json_object_get(jv, "hip"));
  v->wave64 = json_is_true(json_object_get(jv, "wave64"));
  v->grid_barrier = json_is_true(json_object_get(jv, "grid_barrier"));
  x = json_object_get(jv, "arch_specific");
  if (x != NULL && !json_is_boolean(x)) {
    bad(c, field, "arch_specific must be true or false");
    return;
  }
  v->arch_specific = json_is_true(x);
  if (v->arch_specific && v->min_arch < 90) {
    bad(c, field, "arch_specific needs a min_arch of 90 or more (sm_90a is the first such target)");
    return;
  }
  if (v->arch_specific && v->hip) {
    bad(c, field, "an arch_specific variant is CUDA only: hip must be false");
    return;
  }
  v->tmin = op->tmin;
  v->tmax = op->tmax;
  get_range(c, jv, field, &v->tmin, &v->tmax);
  v->search = op->search;
  {
    char sfield[200];
    snprintf(sfield, sizeof sfield, "%s: search", field);
    if (load_search(c, json_object_get(jv, "search"), sfield, &v->search) != 0) return;
  }

  /* Names an expression of this variant may use. */
  hct_symtab_t names = op->constants;
  static const char *const device_names[] = {"T", "SMEM_OPTIN", "SM_COUNT", "WARP", "ARCH", "HIP"};
  for (i = 0; i < HCT_ARRAY_SIZE(device_names); i++) hct__symtab_set(&names, device_names[i], 1);

  load_params(c, jv, v, field, &names);
  if (c->err) return;
  load_scratch(c, json_object_get(jv, "scratch"), v, field, &names);
  if (c->err) return;
  load_tmaps(c, op, jv, v, &names, field);
  if (c->err) return;
  if (v->n_tmaps > 0 && v->hip) {
    bad(c, field, "tensor_maps are CUDA only: hip must be false");
    return;
  }
  load_launches(c, op, json_object_get(jv, "launches"), v, field, &names, 0);
}

/* "inputs": one rule per input, weight, inout and optional buffer, none
 * for an output.  Absent, the op loads (it compiles and is served) but
 * cannot be probed: the tuner says so. */
static int load_inputs(ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *inputs = json_object_get(root, "inputs");
  if (inputs == NULL) return 0;
  if (!json_is_array(inputs)) return bad(c, "inputs", "must be an array of rules");
  op->has_inputs = 1;
  size_t i;
  json_t *ji;
  json_array_foreach(inputs, i, ji) {
    char field[80], cause[160];
    snprintf(field, sizeof field, "inputs[%zu]", i);
    if (!json_is_object(ji)) return bad(c, field, "not an object");
    if (CHECK_KEYS(c, ji, field, keys_input) != 0) return c->err;
    const char *name = get_str(c, ji, "buffer", field, 1);
    if (c->err) return c->err;
    hct_buffer_t *b = (hct_buffer_t *)hct__buffer_find(op, name);
    if (b == NULL) {
      snprintf(cause, sizeof cause, "'%s' is not a buffer of the op", name);
      return bad(c, field, cause);
    }
    snprintf(field, sizeof field, "inputs[%zu] ('%s')", i, b->name);
    if (b->role == HCT_BUF_OUTPUT) return bad(c, field, "an output is written by the op, not drawn");
    if (b->rule.set) return bad(c, field, "a second rule for the buffer");
    if (b->dtype != HCT_DT_F32 && b->dtype != HCT_DT_BF16 && b->dtype != HCT_DT_F16)
      return bad(c, field, "hctune draws f32, bf16 and f16 buffers only");
    json_t *mean = json_object_get(ji, "mean"), *sd = json_object_get(ji, "sd");
    if (!json_is_number(mean) || !isfinite(json_number_value(mean)))
      return bad(c, field, "mean must be a finite number");
    if (!json_is_number(sd) || !(json_number_value(sd) > 0) || !isfinite(json_number_value(sd)))
      return bad(c, field, "sd must be a finite number above 0");
    b->rule.mean = json_number_value(mean);
    b->rule.sd = json_number_value(sd);
    char ff[96];
    snprintf(ff, sizeof ff, "%s fan_in", field);
    const char *fan = get_str(c, ji, "fan_in", ff, 0);
    if (c->err) return c->err;
    if (fan != NULL) {
      int64_t v;
      if (hct__symtab_get(&op->constants, fan, &v) != 0) {
        snprintf(cause, sizeof cause, "fan_in '%s' is not a constant of the op", fan);
        return bad(c, field, cause);
      }
      if (v <= 0) {
        snprintf(cause, sizeof cause, "fan_in '%s' is %lld: must be positive", fan, (long long)v);
        return bad(c, field, cause);
      }
      copy_str(c, b->rule.fan_in, sizeof b->rule.fan_in, fan, field, "fan_in");
    }
    b->rule.set = 1;
  }
  for (int k = 0; k < op->n_buffers; k++) {
    const hct_buffer_t *b = &op->buffers[k];
    if (b->role == HCT_BUF_OUTPUT || b->rule.set) continue;
    char cause[160];
    snprintf(cause, sizeof cause, "buffer '%s' (%s) has no rule: every buffer the op reads needs one",
             b->name, roles[b->role].name);
    return bad(c, "inputs", cause);
  }
  return 0;
}

/* "reference": the float64 reference template, the rows it computes, its
 * scratch and launches (the same format as a variant's, with NROWS among
 * the names and @rows, @ref.<out> among the pointers).  Every output and
 * inout must be written by some launch. */
static int load_reference(ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *jr = json_object_get(root, "reference");
  if (jr == NULL) return 0;
  if (!json_is_object(jr)) return bad(c, "reference", "not an object");
  if (CHECK_KEYS(c, jr, "reference", keys_reference) != 0) return c->err;
  hct_reference_t *r = &op->reference;
  r->present = 1;
  hct_variant_t *v = &r->v;
  hct__strlcpy(v->name, "reference", sizeof v->name);
  copy_str(c, v->template_file, sizeof v->template_file,
           get_str(c, jr, "template", "reference.template", 1), "reference.template", "template");
  if (c->err) return c->err;
  if (v->template_file[0] == '\0') return bad(c, "reference.template", "empty");
  /* It runs wherever a candidate of the op does. */
  v->parity = HCT_PARITY_KL;
  v->hip = 1;
  v->wave64 = 1;
  v->tmin = op->tmin;
  v->tmax = op->tmax;
  json_t *rows = json_object_get(jr, "rows");
  if (rows != NULL) {
    if (!json_is_object(rows)) return bad(c, "reference.rows", "not an object");
    if (CHECK_KEYS(c, rows, "reference.rows", keys_rows) != 0) return c->err;
    json_t *n = json_object_get(rows, "sample");
    if (!json_is_integer(n) || json_integer_value(n) < 2 || json_integer_value(n) > HCT_MAX_TOKENS)
      return bad(c, "reference.rows.sample", "must be an integer of at least 2 (the first and the last row)");
    r->sample = (int)json_integer_value(n);
    const char *why = get_str(c, rows, "why", "reference.rows.why", 1);
    if (c->err) return c->err;
    if (why[0] == '\0') return bad(c, "reference.rows.why", "empty: say which rows are checked and why");
    copy_str(c, r->why, sizeof r->why, why, "reference.rows.why", "why");
  }
  hct_symtab_t names = op->constants;
  static const char *const ref_names[] = {"T", "NROWS", "SMEM_OPTIN", "SM_COUNT", "WARP", "ARCH", "HIP"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(ref_names); i++) hct__symtab_set(&names, ref_names[i], 1);
  load_scratch(c, json_object_get(jr, "scratch"), v, "reference", &names);
  if (c->err) return c->err;
  load_launches(c, op, json_object_get(jr, "launches"), v, "reference", &names, 1);
  if (c->err) return c->err;
  for (int k = 0; k < op->n_buffers; k++) {
    const hct_buffer_t *b = &op->buffers[k];
    if (b->role != HCT_BUF_OUTPUT && b->role != HCT_BUF_INOUT) continue;
    char want[48];
    snprintf(want, sizeof want, "@ref.%s", b->name);
    int found = 0;
    for (int l = 0; l < v->n_launches; l++)
      for (int a = 0; a < v->launches[l].n_args; a++) found |= strcmp(v->launches[l].args[a].text, want) == 0;
    if (!found) {
      char cause[160];
      snprintf(cause, sizeof cause, "no launch writes '%s': the reference must give every output", want);
      return bad(c, "reference.launches", cause);
    }
  }
  return 0;
}

/* The op's name, description, token range and constants. */
static int load_header(ctx_t *c, json_t *root, hct_op_t *op) {
  if (!json_is_object(root)) return bad(c, "top level", "not an object");
  if (CHECK_KEYS(c, root, "top level", keys_top) != 0) return c->err;
  /* The folder names the op (hct__manifest_load), so that a copy of an op's
   * folder under another name is another op with nothing else changed; an
   * "op" field, where a manifest still has one, must agree with it. */
  copy_str(c, op->name, sizeof op->name, get_str(c, root, "op", "op", 0), "op", "op");
  copy_str(c, op->description, sizeof op->description,
           get_str(c, root, "description", "description", 0), "description", "description");
  op->selftest = json_is_true(json_object_get(root, "selftest"));
  op->tmin = 1;
  op->tmax = 8;
  get_range(c, root, "tokens", &op->tmin, &op->tmax);
  if (c->err) return c->err;

  json_t *consts = json_object_get(root, "constants");
  if (consts != NULL && !json_is_object(consts)) return bad(c, "constants", "not an object");
  const char *key;
  json_t *jv;
  json_object_foreach(consts, key, jv) {
    if (!json_is_integer(jv)) return bad(c, "constants", "values must be integers");
    /* The rest of the table holds T, the card's names and the params. */
    if (op->constants.n == 40) return bad(c, "constants", "too many (at most 40)");
    /* The symbol table keeps pointers: the names live in the manifest
     * copy we keep for the op's lifetime. */
    hct__symtab_set(&op->constants, key, json_integer_value(jv));
  }
  return 0;
}

/* "buffers": the op's tensors, every expression over the constants and T. */
static int load_buffers(ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *bufs = json_object_get(root, "buffers");
  if (!json_is_array(bufs) || json_array_size(bufs) == 0) return bad(c, "buffers", "must be a non-empty array");
  size_t i;
  json_t *jb;
  hct_symtab_t names = op->constants;
  hct__symtab_set(&names, "T", 1);
  json_array_foreach(bufs, i, jb) {
    if (op->n_buffers == HCT_MAX_BUFFERS) return bad(c, "buffers", "too many");
    hct_buffer_t *b = &op->buffers[op->n_buffers++];
    char field[64];
    snprintf(field, sizeof field, "buffers[%zu]", i);
    if (!json_is_object(jb)) return bad(c, field, "not an object");
    if (CHECK_KEYS(c, jb, field, keys_buffer) != 0) return c->err;
    copy_str(c, b->name, sizeof b->name, get_str(c, jb, "name", field, 1), field, "name");
    const char *dt = get_str(c, jb, "dtype", field, 1);
    const char *role = get_str(c, jb, "role", field, 1);
    if (c->err) return c->err;
    size_t k;
    for (k = 0; k < HCT_ARRAY_SIZE(dtypes) && strcmp(dt, dtypes[k].name) != 0; k++) {}
    if (k == HCT_ARRAY_SIZE(dtypes)) return bad(c, field, "dtype must be f32, bf16, f16, u32 or i32");
    b->dtype = dtypes[k].dt;
    for (k = 0; k < HCT_ARRAY_SIZE(roles) && strcmp(role, roles[k].name) != 0; k++) {}
    if (k == HCT_ARRAY_SIZE(roles))
      return bad(c, field, "role must be input, weight, output, inout or optional");
    b->role = roles[k].role;
    json_t *el = json_object_get(jb, "elems");
    if (el == NULL) return bad(c, field, "elems missing");
    get_expr(c, el, b->elems, sizeof b->elems, field);
    check_expr(c, &names, b->elems, field);
    json_t *row = json_object_get(jb, "row");
    if (row != NULL) {
      char rf[80];
      snprintf(rf, sizeof rf, "%s row", field);
      get_expr(c, row, b->row, sizeof b->row, rf);
      check_expr(c, &names, b->row, rf);
    }
    if (c->err) return c->err;
  }
  return 0;
}

/* "kl": the factors of kl parity, with their defaults. */
static int load_kl(ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *kl = json_object_get(root, "kl");
  op->kl_mean_factor = 1.25;
  op->kl_abs_floor = 1e-9;
  op->maxerr_factor = 4.0;
  op->baseline_max_rel_err = 1e-5;
  if (kl == NULL) return 0;
  if (!json_is_object(kl)) return bad(c, "kl", "not an object");
  if (CHECK_KEYS(c, kl, "kl", keys_kl) != 0) return c->err;
  static const struct {
    const char *name;
    size_t off;
  } factors[] = {{"mean_factor", offsetof(hct_op_t, kl_mean_factor)},
                 {"abs_floor", offsetof(hct_op_t, kl_abs_floor)},
                 {"maxerr_factor", offsetof(hct_op_t, maxerr_factor)},
                 {"baseline_max_rel_err", offsetof(hct_op_t, baseline_max_rel_err)}};
  for (size_t k = 0; k < HCT_ARRAY_SIZE(factors); k++) {
    json_t *x = json_object_get(kl, factors[k].name);
    if (x == NULL) continue;
    char field[64];
    snprintf(field, sizeof field, "kl.%s", factors[k].name);
    if (!json_is_number(x) || !isfinite(json_number_value(x)) || json_number_value(x) < 0)
      return bad(c, field, "must be a finite number, not below 0");
    *(double *)((char *)op + factors[k].off) = json_number_value(x);
  }
  if (!(op->baseline_max_rel_err > 0.0) || op->baseline_max_rel_err >= 1.0)
    return bad(c, "kl.baseline_max_rel_err", "must be a number in (0, 1)");
  return 0;
}

/* "timing": the deciding measurement and the batch expression, which must
 * be a launch count the worker takes at every count the op is probed at by
 * default, and at both ends of its range. */
static int load_timing(ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *timing = json_object_get(root, "timing");
  op->timing_cold = 1;
  hct__strlcpy(op->batch_expr, "96", sizeof op->batch_expr);
  if (timing != NULL) {
    if (!json_is_object(timing)) return bad(c, "timing", "not an object");
    if (CHECK_KEYS(c, timing, "timing", keys_timing) != 0) return c->err;
    const char *mode = get_str(c, timing, "mode", "timing.mode", 0);
    if (mode != NULL && strcmp(mode, "cold") != 0 && strcmp(mode, "hot") != 0)
      return bad(c, "timing.mode", "must be cold or hot");
    if (mode != NULL) op->timing_cold = strcmp(mode, "cold") == 0;
    json_t *x = json_object_get(timing, "batch");
    if (x != NULL) get_expr(c, x, op->batch_expr, sizeof op->batch_expr, "timing.batch");
    hct_symtab_t names = op->constants;
    hct__symtab_set(&names, "T", 1);
    check_expr(c, &names, op->batch_expr, "timing.batch");
    if (c->err) return c->err;
  }
  int at[HCT_MAX_TOKEN_LIST + 2], n_at = 0;
  at[n_at++] = op->tmin;
  at[n_at++] = op->tmax;
  for (int k = 0; k < op->n_probe_tokens; k++) at[n_at++] = op->probe_tokens[k];
  for (int k = 0; k < n_at; k++) {
    int b = hct__op_batch(op, at[k]);
    if (b < 0) {
      char cause[600];
      snprintf(cause, sizeof cause, "at T=%d: %s", at[k], hct_last_error());
      return bad(c, "timing.batch", cause);
    }
    if (k == 0) op->batch = b;
  }
  return 0;
}

/* Cross-checks of the variants: unique names, references that exist and
 * end at the baseline or a kl variant, exactly one baseline. */
static int check_variants(ctx_t *c, const hct_op_t *op) {
  int baselines = 0;
  for (int a = 0; a < op->n_variants; a++) {
    const hct_variant_t *v = &op->variants[a];
    char field[64];
    snprintf(field, sizeof field, "variant '%s'", v->name);
    baselines += v->parity == HCT_PARITY_BASELINE;
    for (int b = a + 1; b < op->n_variants; b++)
      if (strcmp(v->name, op->variants[b].name) == 0) {
        char cause[80];
        snprintf(cause, sizeof cause, "name used twice (variants[%d] and variants[%d])", a, b);
        return bad(c, field, cause);
      }
    if (v->reference[0] != '\0' && hct__variant_find(op, v->reference) == NULL)
      return bad(c, field, "reference names no variant of this op");
    /* Only bits have a reference: a kl variant is judged against the
     * float64 reference with the baseline's error as its yardstick. */
    if (v->reference[0] != '\0' && v->parity != HCT_PARITY_BITWISE)
      return bad(c, field, "only a bitwise variant names a reference");
    if (strcmp(v->reference, v->name) == 0) return bad(c, field, "reference names the variant itself");
  }
  if (baselines != 1) return bad(c, "variants", "need exactly one variant of class baseline");
  /* A chain of references must end at a variant that is not bitwise (the
   * baseline, or a kl one): a cycle would leave bits with no origin.  A
   * chain longer than the variants there are has come back on itself. */
  for (int a = 0; a < op->n_variants; a++) {
    const hct_variant_t *v = &op->variants[a];
    for (int steps = 0; v != NULL && v->parity == HCT_PARITY_BITWISE; steps++) {
      if (steps == op->n_variants) {
        char field[64];
        snprintf(field, sizeof field, "variant '%s'", op->variants[a].name);
        return bad(c, field, "its references go round in a cycle");
      }
      v = hct__variant_find(op, v->reference);
    }
  }
  return 0;
}

/* The most points the load-time checks of a variant look at: a space
 * larger than this is checked on its first points only. */
#define CHECK_POINTS 4096
/* Scratch beyond this at the op's largest T is a typo, not a plan. */
#define SCRATCH_MAX ((int64_t)1 << 40)

/* The card's names get the values of a large card (an H100) in the
 * load-time checks: a scratch sized by SM_COUNT is checked at a real
 * size, and no card's value is zero. */
static const struct {
  const char *name;
  int64_t value;
} card_values[] = {{"SMEM_OPTIN", 232448}, {"SM_COUNT", 132}, {"WARP", 32},
                   {"ARCH", 90},           {"HIP", 0}};

/* What a probe would refuse of v's points, found at load time: a space
 * that no point survives (the constraints over the constants and the
 * parameters alone: those over T or the card are left for the probe), and
 * a scratch size that is negative or over SCRATCH_MAX at the variant's
 * largest T (`nrows`, for the reference, the rows it computes there). */
static int check_points(ctx_t *c, const hct_op_t *op, const hct_variant_t *v, const char *field,
                        int nrows) {
  int idx[HCT_MAX_PARAMS] = {0}, alive = 0, complete = 0;
  for (int n = 0; n < CHECK_POINTS && !complete; n++) {
    hct_point_t pt;
    memset(&pt, 0, sizeof pt);
    for (int p = 0; p < v->n_params; p++) pt.v[p] = v->params[p].values[idx[p]];
    hct_symtab_t syms;
    hct__point_symtab(op, v, &pt, &syms);
    char why[256];
    if (hct__constraints_hold(v, &syms, 1, why, sizeof why)) {
      alive = 1;
      hct__symtab_set(&syms, "T", v->tmax);
      hct__symtab_set(&syms, "NROWS", nrows);
      for (size_t k = 0; k < HCT_ARRAY_SIZE(card_values); k++)
        hct__symtab_set(&syms, card_values[k].name, card_values[k].value);
      for (int s = 0; s < v->n_scratch; s++) {
        int64_t bytes = 0;
        /* An expression that cannot be evaluated here (a division by a
         * parameter that is zero at this point) is the probe's to judge. */
        if (hct__expr_eval(v->scratch[s].bytes, &syms, &bytes) != 0) {
          hct__error_clear();
          continue;
        }
        if (bytes >= 0 && bytes <= SCRATCH_MAX) continue;
        char cause[400], pj[128];
        hct__point_json(v, &pt, pj, sizeof pj);
        snprintf(cause, sizeof cause, "scratch '%s': bytes '%.96s' is %lld at T=%d, point %s: %s",
                 v->scratch[s].name, v->scratch[s].bytes, (long long)bytes, v->tmax, pj,
                 bytes < 0 ? "negative" : "over the limit of 1 TiB");
        return bad(c, field, cause);
      }
    }
    int p = v->n_params - 1;
    while (p >= 0 && ++idx[p] == v->params[p].n_values) idx[p--] = 0;
    complete = p < 0;
  }
  /* Empty only when every point was looked at. */
  if (!alive && complete && v->n_constraints > 0)
    return bad(c, field, "empty parameter space: no point satisfies the constraints");
  return 0;
}

/* "variants": each one, then their cross-checks and their points. */
/* "families" (issue 29): the variants whose bits define a family an
 * engine may ask for ("bits:<head>").  Each must be a variant of the op
 * other than the baseline (whose bits are "bitwise" already), named once.
 * Read after the variants, whose names it checks. */
static int load_families(ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *jf = json_object_get(root, "families"), *x;
  size_t i;
  if (jf == NULL) return 0;
  if (!json_is_array(jf)) return bad(c, "families", "not an array of variant names");
  json_array_foreach(jf, i, x) {
    char field[64], cause[160];
    snprintf(field, sizeof field, "families[%zu]", i);
    if (!json_is_string(x)) return bad(c, field, "not a string");
    const char *name = json_string_value(x);
    const hct_variant_t *v = hct__variant_find(op, name);
    if (op->n_families == HCT_MAX_FAMILIES) return bad(c, "families", "too many");
    snprintf(cause, sizeof cause, "'%.40s' names no variant of this op", name);
    if (v == NULL) return bad(c, field, cause);
    snprintf(cause, sizeof cause, "'%.40s' is the baseline: its bits are parity 'bitwise'", name);
    if (v->parity == HCT_PARITY_BASELINE) return bad(c, field, cause);
    snprintf(cause, sizeof cause, "'%.40s' named twice", name);
    if (hct__op_family(op, name) != NULL) return bad(c, field, cause);
    hct__strlcpy(op->families[op->n_families++], v->name, sizeof op->families[0]);
  }
  return 0;
}

static int load_variants(ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *vars = json_object_get(root, "variants");
  size_t i;
  json_t *jv;
  if (!json_is_array(vars) || json_array_size(vars) == 0) return bad(c, "variants", "must be a non-empty array");
  json_array_foreach(vars, i, jv) {
    if (op->n_variants == HCT_MAX_VARIANTS) return bad(c, "variants", "too many");
    load_variant(c, op, jv, &op->variants[op->n_variants++], (int)i);
    if (c->err) return c->err;
  }
  if (check_variants(c, op) != 0) return c->err;
  if (load_families(c, root, op) != 0) return c->err;
  for (int a = 0; a < op->n_variants; a++) {
    char field[64];
    snprintf(field, sizeof field, "variant '%s'", op->variants[a].name);
    if (check_points(c, op, &op->variants[a], field, 0) != 0) return c->err;
  }
  if (op->reference.present) {
    int nrows = op->reference.sample > 0 && op->reference.sample < op->tmax ? op->reference.sample
                                                                             : op->tmax;
    if (check_points(c, op, &op->reference.v, "reference", nrows) != 0) return c->err;
  }
  return 0;
}

static int load_json(ctx_t *c, json_t *root, hct_op_t *op) {
  if (load_header(c, root, op) != 0 || load_buffers(c, root, op) != 0) return c->err;
  if (load_inputs(c, root, op) != 0 || load_reference(c, root, op) != 0) return c->err;
  if (load_kl(c, root, op) != 0) return c->err;
  if (load_probe_tokens(c, root, op) != 0) return c->err;
  if (load_checks(c, root, op) != 0) return c->err;
  hct_symtab_t names = op->constants;
  hct__symtab_set(&names, "T", 1);
  if (load_flops(c, root, op, &names) != 0) return c->err;
  op->search = search_defaults;
  if (load_search(c, json_object_get(root, "search"), "search", &op->search) != 0) return c->err;
  if (load_timing(c, root, op) != 0) return c->err;
  return load_variants(c, root, op);
}

/* ---- files: the manifest and the templates it names ---------------------- */

/* A path fits under `root` (both resolved): root itself or below it. */
static int path_under(const char *path, const char *root) {
  size_t n = strlen(root);
  return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* A template of the op: a relative path without "..", inside the op's
 * folder or the shared include folder once every symlink is resolved (a
 * template is handed to the compiler whole, so a path that escapes would
 * hand it any file of the host), and a regular file of at most
 * HCT_TEMPLATE_MAX bytes. */
static int check_template(ctx_t *c, const hct_op_t *op, const char *file, const char *field) {
  char cause[PATH_MAX + 200];
  if (file[0] == '\0') return bad(c, field, "empty template path");
  if (file[0] == '/') return bad(c, field, "an absolute template path: templates lie in the op's folder");
  for (const char *p = file; *p != '\0'; p += strcspn(p, "/"), p += *p == '/')
    if (strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0'))
      return bad(c, field, "'..' in the template path: templates lie in the op's folder");
  char path[PATH_MAX], real[PATH_MAX], root[PATH_MAX], common[PATH_MAX], common_real[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", op->dir, file);
  if (realpath(path, real) == NULL) {
    snprintf(cause, sizeof cause, "template '%s': %s", file, strerror(errno));
    return bad(c, field, cause);
  }
  hct__common_include_dir(op, common, sizeof common);
  int inside = realpath(op->dir, root) != NULL && path_under(real, root);
  if (!inside && realpath(common, common_real) != NULL) inside = path_under(real, common_real);
  if (!inside) {
    snprintf(cause, sizeof cause, "template '%s' resolves to '%.1024s', outside the op's folder and "
             "'%.1024s'", file, real, common);
    return bad(c, field, cause);
  }
  if (hct__read_regular(real, HCT_TEMPLATE_MAX, NULL, NULL) != 0) {
    snprintf(cause, sizeof cause, "template '%s': %s", file, hct_last_error());
    hct__error_clear();
    return bad(c, field, cause);
  }
  return 0;
}

/* Every template of the op, checked where the load can see them. */
static int check_files(ctx_t *c, const hct_op_t *op) {
  for (int a = 0; a < op->n_variants; a++) {
    char field[64];
    snprintf(field, sizeof field, "variant '%s' template", op->variants[a].name);
    if (check_template(c, op, op->variants[a].template_file, field) != 0) return c->err;
  }
  if (op->reference.present &&
      check_template(c, op, op->reference.v.template_file, "reference.template") != 0)
    return c->err;
  return 0;
}

/* Symbol names must outlive the JSON document: keep them in the op. */
typedef struct {
  hct_op_t op;
  char names[64][32];
} op_store_t;

/* The folder of op `opname` among the colon-separated folders of
 * `kernels`: the first holding <opname>/manifest.json (stat only: nothing
 * is opened here), else the first folder. */
static void op_folder(const char *kernels, const char *opname, char *dir, size_t len) {
  dir[0] = '\0';
  for (const char *p = kernels; *p != '\0';) {
    size_t n = strcspn(p, ":");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%.*s/%s/manifest.json", (int)n, p, opname);
    if (dir[0] == '\0' || access(path, F_OK) == 0) {
      snprintf(dir, len, "%.*s/%s", (int)n, p, opname);
      if (access(path, F_OK) == 0) return;
    }
    p += n + (p[n] == ':');
  }
}

/* Parses the manifest at `path` of op folder `dir` into st->op. */
static int load_file(ctx_t *c, const char *dir, op_store_t *st) {
  char *text = NULL;
  size_t len = 0;
  int rc = hct__read_regular(c->path, HCT_MANIFEST_MAX, &text, &len);
  if (rc == HCT_ENOENT) return hct__error(HCT_ENOENT, "op '%s': no manifest at '%s'", c->op, c->path);
  if (rc < 0) {
    char cause[PATH_MAX + 200];
    snprintf(cause, sizeof cause, "%s", hct_last_error());
    return bad(c, "manifest.json", cause);
  }
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  if (root == NULL) {
    char cause[256];
    snprintf(cause, sizeof cause, "not JSON: line %d: %s", jerr.line, jerr.text);
    return bad(c, "manifest.json", cause);
  }
  if (strlen(dir) >= sizeof st->op.dir) {
    json_decref(root);
    return bad(c, "folder", "its path is longer than 511 characters");
  }
  hct__strlcpy(st->op.dir, dir, sizeof st->op.dir);
  rc = load_json(c, root, &st->op);
  if (rc == 0 && st->op.name[0] != '\0' && strcmp(st->op.name, c->op) != 0)
    rc = bad(c, "op", "differs from the folder name, which names the op: drop the field");
  if (rc == 0 && strlen(c->op) >= sizeof st->op.name)
    rc = bad(c, "op", "the folder name is longer than 31 characters");
  if (rc == 0) hct__strlcpy(st->op.name, c->op, sizeof st->op.name);
  /* Re-point constant names into our own storage. */
  for (int i = 0; rc == 0 && i < st->op.constants.n; i++) {
    hct__strlcpy(st->names[i], st->op.constants.syms[i].name, sizeof st->names[i]);
    st->op.constants.syms[i].name = st->names[i];
  }
  json_decref(root);
  if (rc == 0) rc = check_files(c, &st->op);
  return rc;
}

int hct__manifest_load(const char *kernels_dir, const char *opname, hct_op_t **out) {
  if (opname == NULL || opname[0] == '\0' || strchr(opname, '/') != NULL || opname[0] == '.')
    return hct__error(HCT_EINVAL, "op '%s': not a valid op name", opname ? opname : "");
  char dir[PATH_MAX], path[PATH_MAX + 16];
  op_folder(kernels_dir, opname, dir, sizeof dir);
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  op_store_t *st = calloc(1, sizeof *st);
  if (st == NULL) return hct__error(HCT_ENOMEM, "out of memory loading '%s'", path);
  ctx_t c = {opname, path, 0};
  int rc = load_file(&c, dir, st);
  if (rc != 0) {
    free(st);
    return rc;
  }
  *out = &st->op;
  return 0;
}

void hct__manifest_free(hct_op_t *op) { free(op); /* op is the first member of op_store_t */ }

int hct__manifest_copy(const hct_op_t *op, hct_op_t **out) {
  op_store_t *st = malloc(sizeof *st);
  if (st == NULL) return hct__error(HCT_ENOMEM, "op '%s': out of memory", op->name);
  memcpy(st, op, sizeof *st); /* op is the first member of its op_store_t */
  for (int i = 0; i < st->op.constants.n; i++) st->op.constants.syms[i].name = st->names[i];
  *out = &st->op;
  return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(a, b); }

int hct__manifest_list(const char *kernels_dir, char names[][32], int max) {
  int n = 0, folders = 0;
  for (const char *p = kernels_dir; *p != '\0';) {
    size_t len = strcspn(p, ":");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)len, p);
    p += len + (p[len] == ':');
    DIR *d = opendir(dir);
    if (d == NULL) continue;
    folders++;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
      if (e->d_name[0] == '.' || strlen(e->d_name) >= 32) continue;
      /* An op found in an earlier folder hides this one's. */
      int seen = 0;
      for (int k = 0; k < n && !seen; k++) seen = strcmp(names[k], e->d_name) == 0;
      char path[PATH_MAX + 300];
      snprintf(path, sizeof path, "%s/%s/manifest.json", dir, e->d_name);
      /* lstat-free existence: a FIFO or a dangling link still names an op,
       * which its load then refuses with the cause. */
      struct stat st;
      if (seen || lstat(path, &st) != 0) continue;
      hct__strlcpy(names[n++], e->d_name, 32);
    }
    closedir(d);
  }
  if (folders == 0)
    return hct__error(HCT_ENOENT, "kernel templates '%s': cannot open folder", kernels_dir);
  qsort(names, (size_t)n, 32, cmp_names);
  return n;
}

const hct_variant_t *hct__op_baseline(const hct_op_t *op) {
  for (int i = 0; i < op->n_variants; i++)
    if (op->variants[i].parity == HCT_PARITY_BASELINE) return &op->variants[i];
  return NULL;
}

const hct_variant_t *hct__variant_find(const hct_op_t *op, const char *name) {
  for (int i = 0; i < op->n_variants; i++)
    if (strcmp(op->variants[i].name, name) == 0) return &op->variants[i];
  return NULL;
}

const hct_buffer_t *hct__buffer_find(const hct_op_t *op, const char *name) {
  for (int b = 0; b < op->n_buffers; b++)
    if (strcmp(op->buffers[b].name, name) == 0) return &op->buffers[b];
  return NULL;
}

const hct_variant_t *hct__variant_reference(const hct_op_t *op, const hct_variant_t *v) {
  return v->parity == HCT_PARITY_BITWISE ? hct__variant_find(op, v->reference) : NULL;
}

hct_parity_t hct__variant_competes(const hct_op_t *op, const hct_variant_t *v) {
  if (v->parity != HCT_PARITY_BITWISE) return v->parity;
  /* Bits equal to bits equal to ... the baseline's are the baseline's;
   * anywhere a kl variant sits in the chain, the error is that one's. */
  const hct_variant_t *r = v;
  for (int steps = 0; r != NULL && steps <= op->n_variants; steps++) {
    r = hct__variant_reference(op, r);
    if (r == NULL) break;
    if (r->parity == HCT_PARITY_BASELINE) return HCT_PARITY_BITWISE;
    if (r->parity == HCT_PARITY_KL) return HCT_PARITY_KL;
  }
  return HCT_PARITY_KL; /* no chain (the manifest loader refuses one): no bitwise promise */
}

int hct__variant_in_decision(const hct_op_t *op, const hct_variant_t *v, hct_parity_t decision) {
  hct_parity_t cls = hct__variant_competes(op, v);
  return cls != HCT_PARITY_KL || decision == HCT_PARITY_KL;
}

const hct_variant_t *hct__op_family(const hct_op_t *op, const char *head) {
  for (int f = 0; head != NULL && f < op->n_families; f++)
    if (strcmp(op->families[f], head) == 0) return hct__variant_find(op, head);
  return NULL;
}

int hct__variant_in_family(const hct_op_t *op, const hct_variant_t *v, const hct_variant_t *head) {
  /* The head, or bits equal to bits equal to ... the head's. */
  const hct_variant_t *r = v;
  for (int steps = 0; r != NULL && steps <= op->n_variants; steps++) {
    if (r == head) return 1;
    r = hct__variant_reference(op, r);
  }
  return 0;
}

int hct__variant_in_parity(const hct_op_t *op, const hct_variant_t *v, const char *parity) {
  const char *head = hct__parity_family(parity);
  hct_parity_t cls = HCT_PARITY_BITWISE;
  if (head != NULL) {
    const hct_variant_t *h = hct__op_family(op, head);
    return h != NULL && hct__variant_in_family(op, v, h);
  }
  if (hct__parity_from_name(parity, &cls) < 0) hct__error_clear();
  return hct__variant_in_decision(op, v, cls);
}

const hct_variant_t *hct__op_parity_variant(const hct_op_t *op, const char *parity) {
  const char *head = hct__parity_family(parity);
  if (head == NULL) return hct__op_baseline(op);
  const hct_variant_t *v = hct__op_family(op, head);
  if (v == NULL)
    hct__error(HCT_ENOENT, "parity '%.48s': op '%s' has no family '%.31s' (its manifest's \"families\")",
               parity, op->name, head);
  return v;
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
