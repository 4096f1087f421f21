/*
 * manifest.c: loads kernels-src/<op>/manifest.json (format: docs/manifest.md)
 * into the structures of jit.h: the file read and its op-level sections
 * (header, buffers, inputs, reference, kl, timing, checks, figures), the
 * templates it names checked under the op's folder, and the loaded op
 * freed, copied and listed.  The variants are jit/manifest_variant.c's,
 * the field readers jit/manifest_fields.c's; a loaded op is queried
 * through jit/variants.c, jit/points.c and jit/op_figures.c.
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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest_load.h"

/* The fields each object of a manifest may have (docs/manifest.md). */
static const char *const keys_top[] = {"op",     "description", "selftest",     "tokens",
                                       "constants", "buffers",  "inputs",       "reference",
                                       "kl",     "timing",      "probe_tokens", "checks",
                                       "search", "flops",       "variants",     "families"};
static const char *const keys_buffer[] = {"name", "dtype", "role", "elems", "row"};
static const char *const keys_input[] = {"buffer", "mean", "sd", "fan_in"};
static const char *const keys_reference[] = {"template", "rows", "scratch", "launches"};
static const char *const keys_rows[] = {"sample", "why"};
static const char *const keys_kl[] = {"mean_factor", "abs_floor", "maxerr_factor",
                                      "baseline_max_rel_err"};
static const char *const keys_timing[] = {"mode", "batch"};
static const struct {
  const char *name;
  hct_buf_role_t role;
} roles[] = {{"input", HCT_BUF_INPUT},
             {"weight", HCT_BUF_WEIGHT},
             {"output", HCT_BUF_OUTPUT},
             {"inout", HCT_BUF_INOUT},
             {"optional", HCT_BUF_OPTIONAL}};
/* The defaults of "search": exhaustive, and for halving a quarter kept per
 * round (and whatever is not clearly slower than the cut) from 3 samples
 * up to 24, two survivors, two carried from the previous T, families of
 * more than 8 points. */
static const hct_search_t search_defaults = {HCT_SEARCH_EXHAUSTIVE, 0.25, 1, 3, 2, 24, 2, 2, 8};
/* "probe_tokens": the representative counts probed by default, ascending,
 * distinct, inside the op's range, at most one token list. */
static int load_probe_tokens(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *pt = json_object_get(root, "probe_tokens");
  if (pt == NULL) return 0;
  if (!json_is_array(pt) || json_array_size(pt) == 0 || json_array_size(pt) > HCT_MAX_TOKEN_LIST) {
    char cause[128];
    snprintf(cause, sizeof cause, "must be an array of 1 to %d token counts", HCT_MAX_TOKEN_LIST);
    return hct__mf_bad(c, "probe_tokens", cause);
  }
  size_t i;
  json_t *x;
  json_array_foreach(pt, i, x) {
    long long T = json_is_integer(x) ? json_integer_value(x) : -1;
    char cause[160];
    snprintf(cause, sizeof cause, "item %zu (%lld) must be a count in the op's tokens %d..%d, above the one before it",
             i, T, op->tmin, op->tmax);
    if (T < op->tmin || T > op->tmax || (i > 0 && T <= op->probe_tokens[i - 1])) return hct__mf_bad(c, "probe_tokens", cause);
    op->probe_tokens[op->n_probe_tokens++] = (int)T;
  }
  return 0;
}
/* "flops": optional, the floating-point operations of one call, an
 * expression of T and the constants (the report's compute floor,
 * docs/manifest.md). */
static int load_flops(hct_mf_ctx_t *c, json_t *root, hct_op_t *op, const hct_symtab_t *names) {
  json_t *fl = json_object_get(root, "flops");
  if (fl == NULL) return 0;
  hct__mf_get_expr(c, fl, op->flops_expr, sizeof op->flops_expr, "flops");
  hct__mf_check_expr(c, names, op->flops_expr, "flops");
  return c->err;
}
/* "checks": {"all_points_up_to": N, "why": "..."}: above N tokens the
 * probe checks only the points the search keeps (tuner/probe.c), because
 * a check there copies gigabytes back per run.  N inside the op's range;
 * the reason is required, since it trades checks for time.  Absent: every
 * point is checked at every count. */
static int load_checks(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  op->checks_all_up_to = INT_MAX;
  json_t *js = json_object_get(root, "checks");
  if (js == NULL) return 0;
  if (!json_is_object(js)) return hct__mf_bad(c, "checks", "must be an object");
  static const char *const known[] = {"all_points_up_to", "why"};
  if (CHECK_KEYS(c, js, "checks", known) != 0) return c->err;
  json_t *x = json_object_get(js, "all_points_up_to");
  long long n = json_is_integer(x) ? json_integer_value(x) : -1;
  if (n < op->tmin || n > op->tmax) {
    char cause[160];
    snprintf(cause, sizeof cause, "all_points_up_to must be a token count in the op's tokens %d..%d",
             op->tmin, op->tmax);
    return hct__mf_bad(c, "checks", cause);
  }
  const char *why = hct__mf_get_str(c, js, "why", "checks.why", 1);
  if (why == NULL) return c->err;
  if (why[0] == '\0') return hct__mf_bad(c, "checks.why", "must say why (not empty)");
  op->checks_all_up_to = (int)n;
  hct__strlcpy(op->checks_why, why, sizeof op->checks_why);
  return 0;
}
/* "inputs": one rule per input, weight, inout and optional buffer, none
 * for an output.  Absent, the op loads (it compiles and is served) but
 * cannot be probed: the tuner says so. */
static int load_inputs(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *inputs = json_object_get(root, "inputs");
  if (inputs == NULL) return 0;
  if (!json_is_array(inputs)) return hct__mf_bad(c, "inputs", "must be an array of rules");
  op->has_inputs = 1;
  size_t i;
  json_t *ji;
  json_array_foreach(inputs, i, ji) {
    char field[80], cause[160];
    snprintf(field, sizeof field, "inputs[%zu]", i);
    if (!json_is_object(ji)) return hct__mf_bad(c, field, "not an object");
    if (CHECK_KEYS(c, ji, field, keys_input) != 0) return c->err;
    const char *name = hct__mf_get_str(c, ji, "buffer", field, 1);
    if (c->err) return c->err;
    hct_buffer_t *b = (hct_buffer_t *)hct__buffer_find(op, name);
    if (b == NULL) {
      snprintf(cause, sizeof cause, "'%s' is not a buffer of the op", name);
      return hct__mf_bad(c, field, cause);
    }
    snprintf(field, sizeof field, "inputs[%zu] ('%s')", i, b->name);
    if (b->role == HCT_BUF_OUTPUT) return hct__mf_bad(c, field, "an output is written by the op, not drawn");
    if (b->rule.set) return hct__mf_bad(c, field, "a second rule for the buffer");
    if (b->dtype != HCT_DT_F32 && b->dtype != HCT_DT_BF16 && b->dtype != HCT_DT_F16)
      return hct__mf_bad(c, field, "hctune draws f32, bf16 and f16 buffers only");
    json_t *mean = json_object_get(ji, "mean"), *sd = json_object_get(ji, "sd");
    if (!json_is_number(mean) || !isfinite(json_number_value(mean)))
      return hct__mf_bad(c, field, "mean must be a finite number");
    if (!json_is_number(sd) || !(json_number_value(sd) > 0) || !isfinite(json_number_value(sd)))
      return hct__mf_bad(c, field, "sd must be a finite number above 0");
    b->rule.mean = json_number_value(mean);
    b->rule.sd = json_number_value(sd);
    char ff[96];
    snprintf(ff, sizeof ff, "%s fan_in", field);
    const char *fan = hct__mf_get_str(c, ji, "fan_in", ff, 0);
    if (c->err) return c->err;
    if (fan != NULL) {
      int64_t v;
      if (hct__symtab_get(&op->constants, fan, &v) != 0) {
        snprintf(cause, sizeof cause, "fan_in '%s' is not a constant of the op", fan);
        return hct__mf_bad(c, field, cause);
      }
      if (v <= 0) {
        snprintf(cause, sizeof cause, "fan_in '%s' is %lld: must be positive", fan, (long long)v);
        return hct__mf_bad(c, field, cause);
      }
      hct__mf_copy_str(c, b->rule.fan_in, sizeof b->rule.fan_in, fan, field, "fan_in");
    }
    b->rule.set = 1;
  }
  for (int k = 0; k < op->n_buffers; k++) {
    const hct_buffer_t *b = &op->buffers[k];
    if (b->role == HCT_BUF_OUTPUT || b->rule.set) continue;
    char cause[160];
    snprintf(cause, sizeof cause, "buffer '%s' (%s) has no rule: every buffer the op reads needs one",
             b->name, roles[b->role].name);
    return hct__mf_bad(c, "inputs", cause);
  }
  return 0;
}
/* "reference": the float64 reference template, the rows it computes, its
 * scratch and launches (the same format as a variant's, with NROWS among
 * the names and @rows, @ref.<out> among the pointers).  Every output and
 * inout must be written by some launch. */
static int load_reference(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *jr = json_object_get(root, "reference");
  if (jr == NULL) return 0;
  if (!json_is_object(jr)) return hct__mf_bad(c, "reference", "not an object");
  if (CHECK_KEYS(c, jr, "reference", keys_reference) != 0) return c->err;
  hct_reference_t *r = &op->reference;
  r->present = 1;
  hct_variant_t *v = &r->v;
  hct__strlcpy(v->name, "reference", sizeof v->name);
  hct__mf_copy_str(c, v->template_file, sizeof v->template_file,
           hct__mf_get_str(c, jr, "template", "reference.template", 1), "reference.template", "template");
  if (c->err) return c->err;
  if (v->template_file[0] == '\0') return hct__mf_bad(c, "reference.template", "empty");
  /* It runs wherever a candidate of the op does. */
  v->parity = HCT_PARITY_KL;
  v->hip = 1;
  v->wave64 = 1;
  v->tmin = op->tmin;
  v->tmax = op->tmax;
  json_t *rows = json_object_get(jr, "rows");
  if (rows != NULL) {
    if (!json_is_object(rows)) return hct__mf_bad(c, "reference.rows", "not an object");
    if (CHECK_KEYS(c, rows, "reference.rows", keys_rows) != 0) return c->err;
    json_t *n = json_object_get(rows, "sample");
    if (!json_is_integer(n) || json_integer_value(n) < 2 || json_integer_value(n) > HCT_MAX_TOKENS)
      return hct__mf_bad(c, "reference.rows.sample", "must be an integer of at least 2 (the first and the last row)");
    r->sample = (int)json_integer_value(n);
    const char *why = hct__mf_get_str(c, rows, "why", "reference.rows.why", 1);
    if (c->err) return c->err;
    if (why[0] == '\0') return hct__mf_bad(c, "reference.rows.why", "empty: say which rows are checked and why");
    hct__mf_copy_str(c, r->why, sizeof r->why, why, "reference.rows.why", "why");
  }
  hct_symtab_t names = op->constants;
  static const char *const ref_names[] = {"T", "NROWS", "SMEM_OPTIN", "SM_COUNT", "WARP", "ARCH", "HIP"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(ref_names); i++) hct__symtab_set(&names, ref_names[i], 1);
  hct__mf_load_scratch(c, json_object_get(jr, "scratch"), v, "reference", &names);
  if (c->err) return c->err;
  hct__mf_load_launches(c, op, json_object_get(jr, "launches"), v, "reference", &names, 1);
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
      return hct__mf_bad(c, "reference.launches", cause);
    }
  }
  return 0;
}
/* The op's name, description, token range and constants. */
static int load_header(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  if (!json_is_object(root)) return hct__mf_bad(c, "top level", "not an object");
  if (CHECK_KEYS(c, root, "top level", keys_top) != 0) return c->err;
  /* The folder names the op (hct__manifest_load), so that a copy of an op's
   * folder under another name is another op with nothing else changed; an
   * "op" field, where a manifest still has one, must agree with it. */
  hct__mf_copy_str(c, op->name, sizeof op->name, hct__mf_get_str(c, root, "op", "op", 0), "op", "op");
  hct__mf_copy_str(c, op->description, sizeof op->description,
           hct__mf_get_str(c, root, "description", "description", 0), "description", "description");
  op->selftest = json_is_true(json_object_get(root, "selftest"));
  op->tmin = 1;
  op->tmax = 8;
  hct__mf_get_range(c, root, "tokens", &op->tmin, &op->tmax);
  if (c->err) return c->err;

  json_t *consts = json_object_get(root, "constants");
  if (consts != NULL && !json_is_object(consts)) return hct__mf_bad(c, "constants", "not an object");
  const char *key;
  json_t *jv;
  json_object_foreach(consts, key, jv) {
    if (!json_is_integer(jv)) return hct__mf_bad(c, "constants", "values must be integers");
    /* The rest of the table holds T, the card's names and the params. */
    if (op->constants.n == 40) return hct__mf_bad(c, "constants", "too many (at most 40)");
    /* The symbol table keeps pointers: the names live in the manifest
     * copy we keep for the op's lifetime. */
    hct__symtab_set(&op->constants, key, json_integer_value(jv));
  }
  return 0;
}
/* "buffers": the op's tensors, every expression over the constants and T. */
static int load_buffers(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *bufs = json_object_get(root, "buffers");
  if (!json_is_array(bufs) || json_array_size(bufs) == 0) return hct__mf_bad(c, "buffers", "must be a non-empty array");
  size_t i;
  json_t *jb;
  hct_symtab_t names = op->constants;
  hct__symtab_set(&names, "T", 1);
  json_array_foreach(bufs, i, jb) {
    if (op->n_buffers == HCT_MAX_BUFFERS) return hct__mf_bad(c, "buffers", "too many");
    hct_buffer_t *b = &op->buffers[op->n_buffers++];
    char field[64];
    snprintf(field, sizeof field, "buffers[%zu]", i);
    if (!json_is_object(jb)) return hct__mf_bad(c, field, "not an object");
    if (CHECK_KEYS(c, jb, field, keys_buffer) != 0) return c->err;
    hct__mf_copy_str(c, b->name, sizeof b->name, hct__mf_get_str(c, jb, "name", field, 1), field, "name");
    const char *dt = hct__mf_get_str(c, jb, "dtype", field, 1);
    const char *role = hct__mf_get_str(c, jb, "role", field, 1);
    if (c->err) return c->err;
    size_t k;
    for (k = 0; k < hct__mf_n_dtypes && strcmp(dt, hct__mf_dtypes[k].name) != 0; k++) {}
    if (k == hct__mf_n_dtypes) return hct__mf_bad(c, field, "dtype must be f32, bf16, f16, u32 or i32");
    b->dtype = hct__mf_dtypes[k].dt;
    for (k = 0; k < HCT_ARRAY_SIZE(roles) && strcmp(role, roles[k].name) != 0; k++) {}
    if (k == HCT_ARRAY_SIZE(roles))
      return hct__mf_bad(c, field, "role must be input, weight, output, inout or optional");
    b->role = roles[k].role;
    json_t *el = json_object_get(jb, "elems");
    if (el == NULL) return hct__mf_bad(c, field, "elems missing");
    hct__mf_get_expr(c, el, b->elems, sizeof b->elems, field);
    hct__mf_check_expr(c, &names, b->elems, field);
    json_t *row = json_object_get(jb, "row");
    if (row != NULL) {
      char rf[80];
      snprintf(rf, sizeof rf, "%s row", field);
      hct__mf_get_expr(c, row, b->row, sizeof b->row, rf);
      hct__mf_check_expr(c, &names, b->row, rf);
    }
    if (c->err) return c->err;
  }
  return 0;
}
/* "kl": the factors of kl parity, with their defaults. */
static int load_kl(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *kl = json_object_get(root, "kl");
  op->kl_mean_factor = 1.25;
  op->kl_abs_floor = 1e-9;
  op->maxerr_factor = 4.0;
  op->baseline_max_rel_err = 1e-5;
  if (kl == NULL) return 0;
  if (!json_is_object(kl)) return hct__mf_bad(c, "kl", "not an object");
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
      return hct__mf_bad(c, field, "must be a finite number, not below 0");
    *(double *)((char *)op + factors[k].off) = json_number_value(x);
  }
  if (!(op->baseline_max_rel_err > 0.0) || op->baseline_max_rel_err >= 1.0)
    return hct__mf_bad(c, "kl.baseline_max_rel_err", "must be a number in (0, 1)");
  return 0;
}
/* "timing": the deciding measurement and the batch expression, which must
 * be a launch count the worker takes at every count the op is probed at by
 * default, and at both ends of its range. */
static int load_timing(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *timing = json_object_get(root, "timing");
  op->timing_cold = 1;
  hct__strlcpy(op->batch_expr, "96", sizeof op->batch_expr);
  if (timing != NULL) {
    if (!json_is_object(timing)) return hct__mf_bad(c, "timing", "not an object");
    if (CHECK_KEYS(c, timing, "timing", keys_timing) != 0) return c->err;
    const char *mode = hct__mf_get_str(c, timing, "mode", "timing.mode", 0);
    if (mode != NULL && strcmp(mode, "cold") != 0 && strcmp(mode, "hot") != 0)
      return hct__mf_bad(c, "timing.mode", "must be cold or hot");
    if (mode != NULL) op->timing_cold = strcmp(mode, "cold") == 0;
    json_t *x = json_object_get(timing, "batch");
    if (x != NULL) hct__mf_get_expr(c, x, op->batch_expr, sizeof op->batch_expr, "timing.batch");
    hct_symtab_t names = op->constants;
    hct__symtab_set(&names, "T", 1);
    hct__mf_check_expr(c, &names, op->batch_expr, "timing.batch");
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
      return hct__mf_bad(c, "timing.batch", cause);
    }
    if (k == 0) op->batch = b;
  }
  return 0;
}
static int load_json(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  if (load_header(c, root, op) != 0 || load_buffers(c, root, op) != 0) return c->err;
  if (load_inputs(c, root, op) != 0 || load_reference(c, root, op) != 0) return c->err;
  if (load_kl(c, root, op) != 0) return c->err;
  if (load_probe_tokens(c, root, op) != 0) return c->err;
  if (load_checks(c, root, op) != 0) return c->err;
  hct_symtab_t names = op->constants;
  hct__symtab_set(&names, "T", 1);
  if (load_flops(c, root, op, &names) != 0) return c->err;
  op->search = search_defaults;
  if (hct__mf_load_search(c, json_object_get(root, "search"), "search", &op->search) != 0) return c->err;
  if (load_timing(c, root, op) != 0) return c->err;
  return hct__mf_load_variants(c, root, op);
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
static int check_template(hct_mf_ctx_t *c, const hct_op_t *op, const char *file, const char *field) {
  char cause[PATH_MAX + 200];
  if (file[0] == '\0') return hct__mf_bad(c, field, "empty template path");
  if (file[0] == '/') return hct__mf_bad(c, field, "an absolute template path: templates lie in the op's folder");
  for (const char *p = file; *p != '\0'; p += strcspn(p, "/"), p += *p == '/')
    if (strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0'))
      return hct__mf_bad(c, field, "'..' in the template path: templates lie in the op's folder");
  char path[PATH_MAX], real[PATH_MAX], root[PATH_MAX], common[PATH_MAX], common_real[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", op->dir, file);
  if (realpath(path, real) == NULL) {
    snprintf(cause, sizeof cause, "template '%s': %s", file, strerror(errno));
    return hct__mf_bad(c, field, cause);
  }
  hct__common_include_dir(op, common, sizeof common);
  int inside = realpath(op->dir, root) != NULL && path_under(real, root);
  if (!inside && realpath(common, common_real) != NULL) inside = path_under(real, common_real);
  if (!inside) {
    snprintf(cause, sizeof cause, "template '%s' resolves to '%.1024s', outside the op's folder and "
             "'%.1024s'", file, real, common);
    return hct__mf_bad(c, field, cause);
  }
  if (hct__read_regular(real, HCT_TEMPLATE_MAX, NULL, NULL) != 0) {
    snprintf(cause, sizeof cause, "template '%s': %s", file, hct_last_error());
    hct__error_clear();
    return hct__mf_bad(c, field, cause);
  }
  return 0;
}
/* Every template of the op, checked where the load can see them. */
static int check_files(hct_mf_ctx_t *c, const hct_op_t *op) {
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
static int load_file(hct_mf_ctx_t *c, const char *dir, op_store_t *st) {
  char *text = NULL;
  size_t len = 0;
  int rc = hct__read_regular(c->path, HCT_MANIFEST_MAX, &text, &len);
  if (rc == HCT_ENOENT) return hct__error(HCT_ENOENT, "op '%s': no manifest at '%s'", c->op, c->path);
  if (rc < 0) {
    char cause[PATH_MAX + 200];
    snprintf(cause, sizeof cause, "%s", hct_last_error());
    return hct__mf_bad(c, "manifest.json", cause);
  }
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  if (root == NULL) {
    char cause[256];
    snprintf(cause, sizeof cause, "not JSON: line %d: %s", jerr.line, jerr.text);
    return hct__mf_bad(c, "manifest.json", cause);
  }
  if (strlen(dir) >= sizeof st->op.dir) {
    json_decref(root);
    return hct__mf_bad(c, "folder", "its path is longer than 511 characters");
  }
  hct__strlcpy(st->op.dir, dir, sizeof st->op.dir);
  rc = load_json(c, root, &st->op);
  if (rc == 0 && st->op.name[0] != '\0' && strcmp(st->op.name, c->op) != 0)
    rc = hct__mf_bad(c, "op", "differs from the folder name, which names the op: drop the field");
  if (rc == 0 && strlen(c->op) >= sizeof st->op.name)
    rc = hct__mf_bad(c, "op", "the folder name is longer than 31 characters");
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
  hct_mf_ctx_t c = {opname, path, 0};
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
