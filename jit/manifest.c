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
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

typedef struct {
  const char *path;
  int err;
} ctx_t;

static int bad(ctx_t *c, const char *field, const char *cause) {
  if (!c->err) c->err = hct__error(HCT_EMANIFEST, "manifest '%s': %s: %s", c->path, field, cause);
  return c->err;
}

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

  /* Names an expression of this variant may use. */
  hct_symtab_t names = op->constants;
  static const char *const device_names[] = {"T", "SMEM_OPTIN", "SM_COUNT", "WARP", "ARCH", "HIP"};
  for (i = 0; i < HCT_ARRAY_SIZE(device_names); i++) hct__symtab_set(&names, device_names[i], 1);

  json_t *params = json_object_get(jv, "params");
  if (params != NULL && !json_is_array(params)) bad(c, field, "params must be an array");
  json_t *jp;
  json_array_foreach(params, i, jp) {
    if (c->err) return;
    if (v->n_params == HCT_MAX_PARAMS) {
      bad(c, field, "too many params");
      return;
    }
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
    hct__symtab_set(&names, p->name, 1);
  }

  json_t *cons = json_object_get(jv, "constraints");
  json_t *jc;
  json_array_foreach(cons, i, jc) {
    if (v->n_constraints == HCT_MAX_CONSTRAINTS) {
      bad(c, field, "too many constraints");
      return;
    }
    get_expr(c, jc, v->constraints[v->n_constraints], sizeof v->constraints[0], field);
    check_expr(c, &names, v->constraints[v->n_constraints], field);
    v->n_constraints++;
  }

  json_t *scr = json_object_get(jv, "scratch");
  json_t *js;
  json_array_foreach(scr, i, js) {
    if (c->err) return;
    if (v->n_scratch == (int)HCT_ARRAY_SIZE(v->scratch)) {
      bad(c, field, "too many scratch buffers");
      return;
    }
    hct_scratch_t *s = &v->scratch[v->n_scratch++];
    copy_str(c, s->name, sizeof s->name, get_str(c, js, "name", field, 1), field, "name");
    json_t *b = json_object_get(js, "bytes");
    if (b == NULL) {
      bad(c, field, "scratch needs bytes");
      return;
    }
    get_expr(c, b, s->bytes, sizeof s->bytes, field);
    check_expr(c, &names, s->bytes, field);
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

  load_tmaps(c, op, jv, v, &names, field);
  if (c->err) return;
  if (v->n_tmaps > 0 && v->hip) {
    bad(c, field, "tensor_maps are CUDA only: hip must be false");
    return;
  }

  json_t *launches = json_object_get(jv, "launches");
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
        check_expr(c, &names, dst[k], lf);
      }
    }
    json_t *sm = json_object_get(jl, "smem");
    if (sm != NULL) get_expr(c, sm, l->smem, sizeof l->smem, lf);
    else hct__strlcpy(l->smem, "0", sizeof l->smem);
    check_expr(c, &names, l->smem, lf);
    json_t *pdl = json_object_get(jl, "pdl");
    if (pdl != NULL) get_expr(c, pdl, l->pdl, sizeof l->pdl, lf);
    else hct__strlcpy(l->pdl, "0", sizeof l->pdl);
    check_expr(c, &names, l->pdl, lf);
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
        const char *ref = a->text + 1;
        int found = 0;
        for (int b = 0; b < op->n_buffers; b++) found |= strcmp(op->buffers[b].name, ref) == 0;
        for (int s = 0; s < v->n_scratch; s++) found |= strcmp(v->scratch[s].name, ref) == 0;
        if (!found) {
          char cause[128];
          snprintf(cause, sizeof cause, "argument '%s' names no buffer or scratch", a->text);
          bad(c, lf, cause);
          return;
        }
      } else {
        check_expr(c, &names, a->text, lf);
      }
    }
  }
}

static int load_json(ctx_t *c, json_t *root, hct_op_t *op) {
  if (!json_is_object(root)) return bad(c, "top level", "not an object");
  copy_str(c, op->name, sizeof op->name, get_str(c, root, "op", "op", 1), "op", "op");
  copy_str(c, op->description, sizeof op->description,
           get_str(c, root, "description", "description", 0), "description", "description");
  op->selftest = json_is_true(json_object_get(root, "selftest"));
  op->tmin = 1;
  op->tmax = 8;
  get_range(c, root, "tokens", &op->tmin, &op->tmax);

  json_t *consts = json_object_get(root, "constants");
  if (consts != NULL && !json_is_object(consts)) return bad(c, "constants", "not an object");
  const char *key;
  json_t *jv;
  json_object_foreach(consts, key, jv) {
    if (!json_is_integer(jv)) return bad(c, "constants", "values must be integers");
    /* The symbol table keeps pointers: the names live in the manifest
     * copy we keep for the op's lifetime. */
    hct__symtab_set(&op->constants, key, json_integer_value(jv));
  }

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
  }

  json_t *kl = json_object_get(root, "kl");
  op->kl_mean_factor = 1.25;
  op->kl_abs_floor = 1e-9;
  op->maxerr_factor = 4.0;
  if (kl != NULL) {
    json_t *x;
    if ((x = json_object_get(kl, "mean_factor"))) op->kl_mean_factor = json_number_value(x);
    if ((x = json_object_get(kl, "abs_floor"))) op->kl_abs_floor = json_number_value(x);
    if ((x = json_object_get(kl, "maxerr_factor"))) op->maxerr_factor = json_number_value(x);
  }
  json_t *timing = json_object_get(root, "timing");
  op->timing_cold = 1;
  op->batch = 96;
  if (timing != NULL) {
    const char *mode = get_str(c, timing, "mode", "timing.mode", 0);
    if (mode != NULL && strcmp(mode, "cold") != 0 && strcmp(mode, "hot") != 0)
      return bad(c, "timing.mode", "must be cold or hot");
    if (mode != NULL) op->timing_cold = strcmp(mode, "cold") == 0;
    json_t *x = json_object_get(timing, "batch");
    if (x != NULL) {
      if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 10000)
        return bad(c, "timing.batch", "must be an integer in 1..10000");
      op->batch = (int)json_integer_value(x);
    }
  }

  json_t *vars = json_object_get(root, "variants");
  if (!json_is_array(vars) || json_array_size(vars) == 0) return bad(c, "variants", "must be a non-empty array");
  json_array_foreach(vars, i, jv) {
    if (op->n_variants == HCT_MAX_VARIANTS) return bad(c, "variants", "too many");
    load_variant(c, op, jv, &op->variants[op->n_variants++], (int)i);
    if (c->err) return c->err;
  }
  /* Cross-checks: unique names, references exist, exactly one baseline. */
  int baselines = 0;
  for (int a = 0; a < op->n_variants; a++) {
    const hct_variant_t *v = &op->variants[a];
    baselines += v->parity == HCT_PARITY_BASELINE;
    for (int b = a + 1; b < op->n_variants; b++)
      if (strcmp(v->name, op->variants[b].name) == 0) return bad(c, v->name, "variant name used twice");
    if (v->reference[0] != '\0' && hct__variant_find(op, v->reference) == NULL)
      return bad(c, v->name, "reference names no variant of this op");
  }
  if (baselines != 1) return bad(c, "variants", "need exactly one variant of class baseline");
  return c->err;
}

/* Symbol names must outlive the JSON document: keep them in the op. */
typedef struct {
  hct_op_t op;
  char names[64][32];
} op_store_t;

int hct__manifest_load(const char *kernels_dir, const char *opname, hct_op_t **out) {
  char path[1024];
  if (opname == NULL || opname[0] == '\0' || strchr(opname, '/') != NULL || opname[0] == '.')
    return hct__error(HCT_EINVAL, "op '%s': not a valid op name", opname ? opname : "");
  snprintf(path, sizeof path, "%s/%s/manifest.json", kernels_dir, opname);
  json_error_t jerr;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return hct__error(HCT_ENOENT, "op '%s': no manifest at '%s'", opname, path);
    fclose(f);
    return hct__error(HCT_EMANIFEST, "manifest '%s': line %d: %s", path, jerr.line, jerr.text);
  }
  op_store_t *st = calloc(1, sizeof *st);
  if (st == NULL) {
    json_decref(root);
    return hct__error(HCT_ENOMEM, "out of memory loading '%s'", path);
  }
  ctx_t c = {path, 0};
  snprintf(st->op.dir, sizeof st->op.dir, "%s/%s", kernels_dir, opname);
  int rc = load_json(&c, root, &st->op);
  if (rc == 0 && strcmp(st->op.name, opname) != 0)
    rc = bad(&c, "op", "does not match the folder name");
  /* Re-point constant names into our own storage. */
  for (int i = 0; rc == 0 && i < st->op.constants.n; i++) {
    hct__strlcpy(st->names[i], st->op.constants.syms[i].name, sizeof st->names[i]);
    st->op.constants.syms[i].name = st->names[i];
  }
  json_decref(root);
  if (rc != 0) {
    free(st);
    return rc;
  }
  *out = &st->op;
  return 0;
}

void hct__manifest_free(hct_op_t *op) { free(op); /* op is the first member of op_store_t */ }

static int cmp_names(const void *a, const void *b) { return strcmp(a, b); }

int hct__manifest_list(const char *kernels_dir, char names[][32], int max) {
  DIR *d = opendir(kernels_dir);
  if (d == NULL) return hct__error(HCT_ENOENT, "kernel templates '%s': cannot open folder", kernels_dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= 32) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/manifest.json", kernels_dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    fclose(f);
    hct__strlcpy(names[n++], e->d_name, 32);
  }
  closedir(d);
  qsort(names, (size_t)n, 32, cmp_names);
  return n;
}

const hct_variant_t *hct__variant_find(const hct_op_t *op, const char *name) {
  for (int i = 0; i < op->n_variants; i++)
    if (strcmp(op->variants[i].name, name) == 0) return &op->variants[i];
  return NULL;
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
