/*
 * manifest_variant.c: a manifest's variants (docs/manifest.md): each
 * variant's fields (parameters, scratch, launches, tensor maps, search),
 * the checks across them (names, references, bit families), and the
 * load-time check of each one's parameter points.  The reference's
 * launches and scratch are read by the same code (hct__mf_load_launches,
 * hct__mf_load_scratch).  Called by jit/manifest.c; calls down to the
 * field readers (jit/manifest_fields.c) and the loaded op's queries.
 */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "manifest_load.h"

static const char *const keys_scratch[] = {"name", "bytes", "zero"};
static const char *const keys_variant[] = {
    "name",     "template",    "class",  "reference",   "min_arch",  "hip",
    "wave64",   "arch_specific", "tokens", "grid_barrier", "description", "params",
    "constraints", "scratch",  "launches", "tensor_maps", "search"};
static const char *const keys_param[] = {"name", "values"};
static const char *const keys_launch[] = {"entry", "grid", "block", "smem", "pdl", "args"};
static const char *const keys_tmap[] = {"name", "buffer", "dtype", "dims", "box", "swizzle"};
/* The "scratch" array of a variant or of the reference into v. */
void hct__mf_load_scratch(hct_mf_ctx_t *c, json_t *scr, hct_variant_t *v, const char *field,
                         const hct_symtab_t *names) {
  size_t i;
  json_t *js;
  if (scr != NULL && !json_is_array(scr)) {
    hct__mf_bad(c, field, "scratch must be an array");
    return;
  }
  json_array_foreach(scr, i, js) {
    if (c->err) return;
    if (v->n_scratch == (int)HCT_ARRAY_SIZE(v->scratch)) {
      hct__mf_bad(c, field, "too many scratch buffers");
      return;
    }
    if (!json_is_object(js)) {
      hct__mf_bad(c, field, "a scratch entry must be an object");
      return;
    }
    if (CHECK_KEYS(c, js, field, keys_scratch) != 0) return;
    hct_scratch_t *s = &v->scratch[v->n_scratch++];
    hct__mf_copy_str(c, s->name, sizeof s->name, hct__mf_get_str(c, js, "name", field, 1), field, "name");
    json_t *b = json_object_get(js, "bytes");
    if (b == NULL) {
      hct__mf_bad(c, field, "scratch needs bytes");
      return;
    }
    hct__mf_get_expr(c, b, s->bytes, sizeof s->bytes, field);
    hct__mf_check_expr(c, names, s->bytes, field);
    json_t *z = json_object_get(js, "zero");
    if (z == NULL || json_is_false(z))
      s->zero = HCT_ZERO_NEVER;
    else if (json_is_true(z))
      s->zero = HCT_ZERO_EACH_RUN;
    else if (json_is_string(z) && strcmp(json_string_value(z), "once") == 0)
      s->zero = HCT_ZERO_ONCE;
    else {
      hct__mf_bad(c, field, "scratch zero must be true, false or \"once\"");
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
/* Reads a "search" object (op or variant level: `field` names it) over
 * *out, which holds the defaults it inherits. */
int hct__mf_load_search(hct_mf_ctx_t *c, json_t *js, const char *field, hct_search_t *out) {
  if (js == NULL) return 0;
  if (!json_is_object(js)) return hct__mf_bad(c, field, "must be an object");
  static const char *const known[] = {"strategy", "keep", "rule", "first_samples", "growth",
                                      "max_samples", "final_points", "carry", "min_points", "why"};
  if (CHECK_KEYS(c, js, field, known) != 0) return c->err;
  json_t *x;
  const char *st = json_string_value(json_object_get(js, "strategy"));
  if (json_object_get(js, "strategy") != NULL) {
    if (st != NULL && strcmp(st, "exhaustive") == 0) out->strategy = HCT_SEARCH_EXHAUSTIVE;
    else if (st != NULL && strcmp(st, "halving") == 0) out->strategy = HCT_SEARCH_HALVING;
    else return hct__mf_bad(c, field, "strategy must be exhaustive or halving");
  }
  const char *rule = json_string_value(json_object_get(js, "rule"));
  if (json_object_get(js, "rule") != NULL) {
    if (rule != NULL && strcmp(rule, "ci") == 0) out->ci_rule = 1;
    else if (rule != NULL && strcmp(rule, "median") == 0) out->ci_rule = 0;
    else return hct__mf_bad(c, field, "rule must be ci or median");
  }
  if ((x = json_object_get(js, "keep")) != NULL) {
    if (!json_is_number(x) || !(json_number_value(x) > 0 && json_number_value(x) < 1))
      return hct__mf_bad(c, field, "keep must be a number between 0 and 1, both excluded");
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
      return hct__mf_bad(c, field, cause);
    }
    *(int *)((char *)out + ints[k].off) = (int)json_integer_value(x);
  }
  if (out->max_samples < out->first_samples) return hct__mf_bad(c, field, "max_samples is below first_samples");
  return 0;
}
/* The "launches" array of a variant or (reference) of the op's reference
 * into v: non-empty, every expression valid over names, every pointer
 * argument one pointer_ok allows. */
void hct__mf_load_launches(hct_mf_ctx_t *c, const hct_op_t *op, json_t *launches, hct_variant_t *v,
                          const char *field, const hct_symtab_t *names, int reference) {
  size_t i;
  if (!json_is_array(launches) || json_array_size(launches) == 0) {
    hct__mf_bad(c, field, "launches must be a non-empty array");
    return;
  }
  json_t *jl;
  json_array_foreach(launches, i, jl) {
    if (c->err) return;
    if (v->n_launches == HCT_MAX_LAUNCHES) {
      hct__mf_bad(c, field, "too many launches");
      return;
    }
    hct_launch_t *l = &v->launches[v->n_launches++];
    char lf[200];
    snprintf(lf, sizeof lf, "%s launches[%zu]", field, i);
    if (!json_is_object(jl)) {
      hct__mf_bad(c, lf, "not an object");
      return;
    }
    if (CHECK_KEYS(c, jl, lf, keys_launch) != 0) return;
    hct__mf_copy_str(c, l->entry, sizeof l->entry, hct__mf_get_str(c, jl, "entry", lf, 1), lf, "entry");
    static const char *const dims[] = {"grid", "block"};
    for (int d = 0; d < 2; d++) {
      json_t *arr = json_object_get(jl, dims[d]);
      char(*dst)[96] = d == 0 ? l->grid : l->block;
      if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > 3) {
        hct__mf_bad(c, lf, d == 0 ? "grid must be an array of 1 to 3 items" : "block must be an array of 1 to 3 items");
        return;
      }
      for (size_t k = 0; k < 3; k++) {
        if (k < json_array_size(arr)) hct__mf_get_expr(c, json_array_get(arr, k), dst[k], 96, lf);
        else hct__strlcpy(dst[k], "1", 96);
        hct__mf_check_expr(c, names, dst[k], lf);
      }
    }
    json_t *sm = json_object_get(jl, "smem");
    if (sm != NULL) hct__mf_get_expr(c, sm, l->smem, sizeof l->smem, lf);
    else hct__strlcpy(l->smem, "0", sizeof l->smem);
    hct__mf_check_expr(c, names, l->smem, lf);
    json_t *pdl = json_object_get(jl, "pdl");
    if (pdl != NULL) hct__mf_get_expr(c, pdl, l->pdl, sizeof l->pdl, lf);
    else hct__strlcpy(l->pdl, "0", sizeof l->pdl);
    hct__mf_check_expr(c, names, l->pdl, lf);
    json_t *args = json_object_get(jl, "args");
    if (!json_is_array(args)) {
      hct__mf_bad(c, lf, "args must be an array");
      return;
    }
    size_t k;
    json_t *ja;
    json_array_foreach(args, k, ja) {
      if (l->n_args == HCT_MAX_ARGS) {
        hct__mf_bad(c, lf, "too many args");
        return;
      }
      hct_arg_t *a = &l->args[l->n_args++];
      hct__mf_get_expr(c, ja, a->text, sizeof a->text, lf);
      if (c->err) return;
      int tm = hct__tmap_arg(v->tmaps, v->n_tmaps, a->text);
      if (tm < 0) {
        char cause[160];
        snprintf(cause, sizeof cause, "argument '%.63s' names no entry of tensor_maps", a->text);
        hct__mf_bad(c, lf, cause);
        return;
      }
      if (tm > 0) {
        a->tmap = tm;
      } else if (a->text[0] == '@') {
        a->is_pointer = 1;
        char cause[160];
        if (pointer_ok(op, v, a->text + 1, reference, cause, sizeof cause) != 0) {
          hct__mf_bad(c, lf, cause);
          return;
        }
      } else {
        hct__mf_check_expr(c, names, a->text, lf);
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
static void load_tmaps(hct_mf_ctx_t *c, const hct_op_t *op, json_t *jv, hct_variant_t *v,
                       const hct_symtab_t *names, const char *vfield) {
  json_t *arr = json_object_get(jv, "tensor_maps");
  if (arr == NULL) return;
  char field[200];
  snprintf(field, sizeof field, "%s tensor_maps", vfield);
  if (!json_is_array(arr)) {
    hct__mf_bad(c, field, "must be an array");
    return;
  }
  size_t i;
  json_t *jt;
  json_array_foreach(arr, i, jt) {
    if (c->err) return;
    snprintf(field, sizeof field, "%s tensor_maps[%zu]", vfield, i);
    if (v->n_tmaps == HCT_MAX_TMAPS) {
      hct__mf_bad(c, field, "too many tensor maps (at most 8)");
      return;
    }
    if (!json_is_object(jt)) {
      hct__mf_bad(c, field, "not an object");
      return;
    }
    if (CHECK_KEYS(c, jt, field, keys_tmap) != 0) return;
    hct_tmap_spec_t *t = &v->tmaps[v->n_tmaps++];
    hct__mf_copy_str(c, t->name, sizeof t->name, hct__mf_get_str(c, jt, "name", field, 1), field, "name");
    hct__mf_copy_str(c, t->target, sizeof t->target, hct__mf_get_str(c, jt, "buffer", field, 1), field, "buffer");
    const char *dt = hct__mf_get_str(c, jt, "dtype", field, 1);
    const char *sw = hct__mf_get_str(c, jt, "swizzle", field, 0);
    if (c->err) return;
    for (int k = 0; k + 1 < v->n_tmaps; k++)
      if (strcmp(v->tmaps[k].name, t->name) == 0) {
        hct__mf_bad(c, field, "name used twice");
        return;
      }
    const hct_buffer_t *buf;
    if (!names_memory(op, v, t->target, &buf)) {
      hct__mf_bad(c, field, "buffer names no buffer or scratch");
      return;
    }
    size_t k;
    for (k = 0; k < hct__mf_n_dtypes && strcmp(dt, hct__mf_dtypes[k].name) != 0; k++) {}
    if (k == hct__mf_n_dtypes) {
      hct__mf_bad(c, field, "dtype must be f32, bf16, f16, u32 or i32");
      return;
    }
    t->dtype = hct__mf_dtypes[k].dt;
    if (buf != NULL && buf->dtype != t->dtype) {
      hct__mf_bad(c, field, "dtype differs from the buffer's");
      return;
    }
    t->swizzle = -1;
    for (k = 0; k < HCT_ARRAY_SIZE(swizzles); k++)
      if (strcmp(sw ? sw : "none", swizzles[k].name) == 0) t->swizzle = swizzles[k].bytes;
    if (t->swizzle < 0) {
      hct__mf_bad(c, field, "swizzle must be none, 32B, 64B or 128B");
      return;
    }
    json_t *dims = json_object_get(jt, "dims"), *box = json_object_get(jt, "box");
    if (!json_is_array(dims) || json_array_size(dims) < 1 ||
        json_array_size(dims) > HCT_TMAP_MAX_RANK) {
      hct__mf_bad(c, field, "dims must be an array of 1 to 5 expressions, innermost first");
      return;
    }
    if (!json_is_array(box) || json_array_size(box) != json_array_size(dims)) {
      hct__mf_bad(c, field, "box must be an array of as many expressions as dims");
      return;
    }
    t->rank = (int)json_array_size(dims);
    for (int d = 0; d < t->rank; d++) {
      hct__mf_get_expr(c, json_array_get(dims, (size_t)d), t->dims[d], sizeof t->dims[d], field);
      hct__mf_check_expr(c, names, t->dims[d], field);
      hct__mf_get_expr(c, json_array_get(box, (size_t)d), t->box[d], sizeof t->box[d], field);
      hct__mf_check_expr(c, names, t->box[d], field);
    }
  }
}
/* A variant's "params" (each a name and its values, added to `names`)
 * and "constraints" (expressions over names). */
static void load_params(hct_mf_ctx_t *c, json_t *jv, hct_variant_t *v, const char *field,
                        hct_symtab_t *names) {
  size_t i;
  json_t *params = json_object_get(jv, "params");
  if (params != NULL && !json_is_array(params)) hct__mf_bad(c, field, "params must be an array");
  json_t *jp;
  json_array_foreach(params, i, jp) {
    if (c->err) return;
    if (v->n_params == HCT_MAX_PARAMS) {
      hct__mf_bad(c, field, "too many params");
      return;
    }
    if (!json_is_object(jp)) {
      hct__mf_bad(c, field, "a param must be an object");
      return;
    }
    if (CHECK_KEYS(c, jp, field, keys_param) != 0) return;
    hct_param_t *p = &v->params[v->n_params++];
    hct__mf_copy_str(c, p->name, sizeof p->name, hct__mf_get_str(c, jp, "name", field, 1), field, "name");
    json_t *vals = json_object_get(jp, "values");
    if (!json_is_array(vals) || json_array_size(vals) == 0 ||
        json_array_size(vals) > HCT_MAX_PARAM_VALUES) {
      hct__mf_bad(c, field, "param values must be a non-empty array of at most 16 integers");
      return;
    }
    size_t k;
    json_t *jval;
    json_array_foreach(vals, k, jval) {
      if (!json_is_integer(jval)) {
        hct__mf_bad(c, field, "param values must be integers");
        return;
      }
      p->values[p->n_values++] = json_integer_value(jval);
    }
    hct__symtab_set(names, p->name, 1);
  }

  json_t *cons = json_object_get(jv, "constraints");
  if (cons != NULL && !json_is_array(cons)) {
    hct__mf_bad(c, field, "constraints must be an array of expressions");
    return;
  }
  json_t *jc;
  json_array_foreach(cons, i, jc) {
    if (v->n_constraints == HCT_MAX_CONSTRAINTS) {
      hct__mf_bad(c, field, "too many constraints");
      return;
    }
    hct__mf_get_expr(c, jc, v->constraints[v->n_constraints], sizeof v->constraints[0], field);
    hct__mf_check_expr(c, names, v->constraints[v->n_constraints], field);
    v->n_constraints++;
  }
}
static void load_variant(hct_mf_ctx_t *c, hct_op_t *op, json_t *jv, hct_variant_t *v, int idx) {
  char field[160];
  snprintf(field, sizeof field, "variants[%d]", idx);
  if (!json_is_object(jv)) {
    hct__mf_bad(c, field, "not an object");
    return;
  }
  hct__mf_copy_str(c, v->name, sizeof v->name, hct__mf_get_str(c, jv, "name", field, 1), field, "name");
  if (c->err) return;
  snprintf(field, sizeof field, "variant '%s'", v->name);
  if (CHECK_KEYS(c, jv, field, keys_variant) != 0) return;
  hct__mf_copy_str(c, v->template_file, sizeof v->template_file, hct__mf_get_str(c, jv, "template", field, 1),
           field, "template");
  hct__mf_copy_str(c, v->description, sizeof v->description, hct__mf_get_str(c, jv, "description", field, 0),
           field, "description");
  const char *cls = hct__mf_get_str(c, jv, "class", field, 1);
  if (c->err) return;
  size_t i;
  if (hct__parity_from_name(cls, &v->parity) < 0) {
    hct__error_clear();
    hct__mf_bad(c, field, "class must be baseline, bitwise or kl");
    return;
  }
  hct__mf_copy_str(c, v->reference, sizeof v->reference, hct__mf_get_str(c, jv, "reference", field, 0), field,
           "reference");
  if (v->parity == HCT_PARITY_BITWISE && v->reference[0] == '\0') {
    hct__mf_bad(c, field, "a bitwise variant needs a reference");
    return;
  }
  json_t *x;
  v->min_arch = (x = json_object_get(jv, "min_arch")) ? (int)json_integer_value(x) : 0;
  v->hip = json_is_true(json_object_get(jv, "hip"));
  v->wave64 = json_is_true(json_object_get(jv, "wave64"));
  v->grid_barrier = json_is_true(json_object_get(jv, "grid_barrier"));
  x = json_object_get(jv, "arch_specific");
  if (x != NULL && !json_is_boolean(x)) {
    hct__mf_bad(c, field, "arch_specific must be true or false");
    return;
  }
  v->arch_specific = json_is_true(x);
  if (v->arch_specific && v->min_arch < 90) {
    hct__mf_bad(c, field, "arch_specific needs a min_arch of 90 or more (sm_90a is the first such target)");
    return;
  }
  if (v->arch_specific && v->hip) {
    hct__mf_bad(c, field, "an arch_specific variant is CUDA only: hip must be false");
    return;
  }
  v->tmin = op->tmin;
  v->tmax = op->tmax;
  hct__mf_get_range(c, jv, field, &v->tmin, &v->tmax);
  v->search = op->search;
  {
    char sfield[200];
    snprintf(sfield, sizeof sfield, "%s: search", field);
    if (hct__mf_load_search(c, json_object_get(jv, "search"), sfield, &v->search) != 0) return;
  }

  /* Names an expression of this variant may use. */
  hct_symtab_t names = op->constants;
  static const char *const device_names[] = {"T", "SMEM_OPTIN", "SM_COUNT", "WARP", "ARCH", "HIP"};
  for (i = 0; i < HCT_ARRAY_SIZE(device_names); i++) hct__symtab_set(&names, device_names[i], 1);

  load_params(c, jv, v, field, &names);
  if (c->err) return;
  hct__mf_load_scratch(c, json_object_get(jv, "scratch"), v, field, &names);
  if (c->err) return;
  load_tmaps(c, op, jv, v, &names, field);
  if (c->err) return;
  if (v->n_tmaps > 0 && v->hip) {
    hct__mf_bad(c, field, "tensor_maps are CUDA only: hip must be false");
    return;
  }
  hct__mf_load_launches(c, op, json_object_get(jv, "launches"), v, field, &names, 0);
}
/* Cross-checks of the variants: unique names, references that exist and
 * end at the baseline or a kl variant, exactly one baseline. */
static int check_variants(hct_mf_ctx_t *c, const hct_op_t *op) {
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
        return hct__mf_bad(c, field, cause);
      }
    if (v->reference[0] != '\0' && hct__variant_find(op, v->reference) == NULL)
      return hct__mf_bad(c, field, "reference names no variant of this op");
    /* Only bits have a reference: a kl variant is judged against the
     * float64 reference with the baseline's error as its yardstick. */
    if (v->reference[0] != '\0' && v->parity != HCT_PARITY_BITWISE)
      return hct__mf_bad(c, field, "only a bitwise variant names a reference");
    if (strcmp(v->reference, v->name) == 0) return hct__mf_bad(c, field, "reference names the variant itself");
  }
  if (baselines != 1) return hct__mf_bad(c, "variants", "need exactly one variant of class baseline");
  /* A chain of references must end at a variant that is not bitwise (the
   * baseline, or a kl one): a cycle would leave bits with no origin.  A
   * chain longer than the variants there are has come back on itself. */
  for (int a = 0; a < op->n_variants; a++) {
    const hct_variant_t *v = &op->variants[a];
    for (int steps = 0; v != NULL && v->parity == HCT_PARITY_BITWISE; steps++) {
      if (steps == op->n_variants) {
        char field[64];
        snprintf(field, sizeof field, "variant '%s'", op->variants[a].name);
        return hct__mf_bad(c, field, "its references go round in a cycle");
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
static int check_points(hct_mf_ctx_t *c, const hct_op_t *op, const hct_variant_t *v, const char *field,
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
        return hct__mf_bad(c, field, cause);
      }
    }
    int p = v->n_params - 1;
    while (p >= 0 && ++idx[p] == v->params[p].n_values) idx[p--] = 0;
    complete = p < 0;
  }
  /* Empty only when every point was looked at. */
  if (!alive && complete && v->n_constraints > 0)
    return hct__mf_bad(c, field, "empty parameter space: no point satisfies the constraints");
  return 0;
}
/* "variants": each one, then their cross-checks and their points. */
/* "families" (issue 29): the variants whose bits define a family an
 * engine may ask for ("bits:<head>").  Each must be a variant of the op
 * other than the baseline (whose bits are "bitwise" already), named once.
 * Read after the variants, whose names it checks. */
static int load_families(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *jf = json_object_get(root, "families"), *x;
  size_t i;
  if (jf == NULL) return 0;
  if (!json_is_array(jf)) return hct__mf_bad(c, "families", "not an array of variant names");
  json_array_foreach(jf, i, x) {
    char field[64], cause[160];
    snprintf(field, sizeof field, "families[%zu]", i);
    if (!json_is_string(x)) return hct__mf_bad(c, field, "not a string");
    const char *name = json_string_value(x);
    const hct_variant_t *v = hct__variant_find(op, name);
    if (op->n_families == HCT_MAX_FAMILIES) return hct__mf_bad(c, "families", "too many");
    snprintf(cause, sizeof cause, "'%.40s' names no variant of this op", name);
    if (v == NULL) return hct__mf_bad(c, field, cause);
    snprintf(cause, sizeof cause, "'%.40s' is the baseline: its bits are parity 'bitwise'", name);
    if (v->parity == HCT_PARITY_BASELINE) return hct__mf_bad(c, field, cause);
    snprintf(cause, sizeof cause, "'%.40s' named twice", name);
    if (hct__op_family(op, name) != NULL) return hct__mf_bad(c, field, cause);
    hct__strlcpy(op->families[op->n_families++], v->name, sizeof op->families[0]);
  }
  return 0;
}
int hct__mf_load_variants(hct_mf_ctx_t *c, json_t *root, hct_op_t *op) {
  json_t *vars = json_object_get(root, "variants");
  size_t i;
  json_t *jv;
  if (!json_is_array(vars) || json_array_size(vars) == 0) return hct__mf_bad(c, "variants", "must be a non-empty array");
  json_array_foreach(vars, i, jv) {
    if (op->n_variants == HCT_MAX_VARIANTS) return hct__mf_bad(c, "variants", "too many");
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
