/*
 * plan.c: a variant's launch plan for one T on one card, the one
 * evaluation of the manifest's launch expressions that the tuner
 * (tuner/run.c) and the client library (client/kernel.c) both use: the
 * names the expressions see (constants, the point, the card's figures, T)
 * and the first point whose constraints hold (the daemon's baseline answer
 * and the library's own fallback).
 */
#include <string.h>

#include "jit.h"

void hct__card_symbols(hct_symtab_t *syms, int arch_num, int sm_count, int64_t smem_optin,
                       int warp, int hip) {
  hct__symtab_set(syms, "SMEM_OPTIN", smem_optin);
  hct__symtab_set(syms, "SM_COUNT", sm_count);
  hct__symtab_set(syms, "WARP", warp);
  hct__symtab_set(syms, "ARCH", arch_num);
  hct__symtab_set(syms, "HIP", hip);
}

int hct__point_default(const hct_op_t *op, const hct_variant_t *v, const hct_symtab_t *card,
                       int tokens, hct_point_t *pt) {
  hct_point_t pts[64];
  int n = hct__param_points(v, pts, (int)HCT_ARRAY_SIZE(pts));
  for (int i = 0; i < n; i++) {
    hct_symtab_t syms;
    hct__point_symtab(op, v, &pts[i], &syms);
    for (int k = 0; card != NULL && k < card->n; k++)
      hct__symtab_set(&syms, card->syms[k].name, card->syms[k].value);
    hct__symtab_set(&syms, "T", tokens);
    /* The one constraint rule, partial: a figure not given (no card) leaves
     * its constraint undecided, which does not refuse; an evaluation error
     * fails the point. */
    char why[256];
    if (hct__constraints_hold(v, &syms, 1, why, sizeof why)) {
      *pt = pts[i];
      hct__error_clear();
      return 0;
    }
  }
  return hct__error(HCT_ENOENT, "variant '%s' of '%s': no parameter point fits T=%d here",
                    v->name, op->name, tokens);
}

void hct__plan_spec(const hct_op_t *op, const hct_variant_t *v, int64_t smem_max,
                    hct_plan_spec_t *spec) {
  *spec = (hct_plan_spec_t){.label = v->name,
                            .buffers = op->buffers,
                            .n_buffers = op->n_buffers,
                            .scratch = v->scratch,
                            .n_scratch = v->n_scratch,
                            .launches = v->launches,
                            .n_launches = v->n_launches,
                            .tmaps = v->tmaps,
                            .n_tmaps = v->n_tmaps,
                            .smem_max = smem_max};
}

/* expr at syms, within lo..hi, or an error naming what it sizes. */
static int eval(const hct_plan_spec_t *spec, const char *entry, const char *what, const char *expr,
                const hct_symtab_t *syms, int64_t lo, int64_t hi, int64_t *out) {
  int rc = hct__expr_eval(expr, syms, out);
  if (rc < 0) return rc;
  if (*out < lo || *out > hi)
    return hct__error(HCT_ERANGE, "%s: kernel '%s': %s '%s' = %lld, outside %lld..%lld", spec->label,
                      entry, what, expr, (long long)*out, (long long)lo, (long long)hi);
  return 0;
}

int hct__scratch_size(const hct_scratch_t *s, const hct_symtab_t *syms, size_t *out) {
  int64_t b = 0;
  *out = 0;
  int rc = hct__expr_eval(s->bytes, syms, &b);
  if (rc < 0) return rc;
  if (b < 0 || b > ((int64_t)1 << 34))
    return hct__error(HCT_ERANGE, "scratch '%s': '%s' = %lld bytes, outside 0..%lld", s->name,
                      s->bytes, (long long)b, (long long)1 << 34);
  *out = (size_t)((b + 3) & ~3LL) + 4;
  return 0;
}

static int buffer_index(const hct_plan_spec_t *spec, const char *name) {
  for (int i = 0; i < spec->n_buffers; i++)
    if (strcmp(spec->buffers[i].name, name) == 0) return i;
  return -1;
}

static int scratch_index(const hct_plan_spec_t *spec, const char *name) {
  for (int i = 0; i < spec->n_scratch; i++)
    if (strcmp(spec->scratch[i].name, name) == 0) return i;
  return -1;
}

/* Tensor map t of launch `entry` into P->tmaps, checked against the bytes
 * of the memory it spans. */
static int plan_tmap(const hct_plan_spec_t *spec, const hct_plan_t *plan, const char *entry,
                     const hct_tmap_spec_t *t, const hct_symtab_t *syms, const size_t *buffer_bytes,
                     const size_t *scratch_bytes, hct_plan_launch_t *P) {
  if (P->n_tmaps == HCT_MAX_TMAPS)
    return hct__error(HCT_ERANGE, "%s: kernel '%s': more than %d tensor map arguments", spec->label,
                      entry, HCT_MAX_TMAPS);
  hct_plan_tmap_t *m = &P->tmaps[P->n_tmaps];
  const int b = buffer_index(spec, t->target), sc = scratch_index(spec, t->target);
  size_t bytes = 0;
  if (b >= 0 && buffer_bytes != NULL) {
    bytes = buffer_bytes[b];
  } else if (b >= 0) {
    int64_t n = 0;
    int rc = eval(spec, entry, "elements", spec->buffers[b].elems, syms, 0, INT64_MAX / 16, &n);
    if (rc < 0) return rc;
    bytes = (size_t)n * hct__dtype_size(spec->buffers[b].dtype);
  } else if (sc >= 0) {
    bytes = scratch_bytes != NULL ? scratch_bytes[sc] : plan->scratch_bytes[sc];
  } else {
    return hct__error(HCT_EMANIFEST, "%s: kernel '%s': tensor map '%s' over '%s', no buffer or scratch",
                      spec->label, entry, t->name, t->target);
  }
  if (bytes == 0)
    return hct__error(HCT_EINVAL, "%s: tensor map '%s' over '%s', which is absent", spec->label,
                      t->name, t->target);
  int rc = hct__tmap_eval(t, syms, bytes, &m->dims);
  if (rc < 0) {
    char why[512];
    hct__strlcpy(why, hct_last_error(), sizeof why);
    return hct__error(rc, "%s: %s", spec->label, why);
  }
  m->over = b >= 0 ? HCT_PLAN_BUFFER : HCT_PLAN_SCRATCH;
  m->index = b >= 0 ? b : sc;
  P->n_tmaps++;
  return 0;
}

/* Argument a of launch L into P->args[a]. */
static int plan_arg(const hct_plan_spec_t *spec, const hct_plan_t *plan, const hct_launch_t *L,
                    int a, const hct_symtab_t *syms, const size_t *buffer_bytes,
                    const size_t *scratch_bytes, hct_plan_launch_t *P) {
  const hct_arg_t *A = &L->args[a];
  hct_plan_arg_t *out = &P->args[a];
  if (A->tmap > 0) {
    if (A->tmap > spec->n_tmaps)
      return hct__error(HCT_EMANIFEST, "%s: kernel '%s': argument '%s' names no tensor map",
                        spec->label, L->entry, A->text);
    int rc = plan_tmap(spec, plan, L->entry, &spec->tmaps[A->tmap - 1], syms, buffer_bytes,
                       scratch_bytes, P);
    *out = (hct_plan_arg_t){HCT_PLAN_TMAP, P->n_tmaps - 1, 0};
    return rc;
  }
  if (A->is_pointer) {
    for (int i = 0; i < spec->n_extra; i++)
      if (strcmp(spec->extra[i], A->text + 1) == 0) {
        *out = (hct_plan_arg_t){HCT_PLAN_EXTRA, i, 0};
        return 0;
      }
    const int b = buffer_index(spec, A->text + 1), sc = scratch_index(spec, A->text + 1);
    if (b < 0 && sc < 0)
      return hct__error(HCT_EMANIFEST, "%s: kernel '%s': argument '%s' is no buffer or scratch",
                        spec->label, L->entry, A->text);
    *out = (hct_plan_arg_t){b >= 0 ? HCT_PLAN_BUFFER : HCT_PLAN_SCRATCH, b >= 0 ? b : sc, 0};
    return 0;
  }
  int64_t v;
  int rc = eval(spec, L->entry, "argument", A->text, syms, INT32_MIN + 1, INT32_MAX, &v);
  *out = (hct_plan_arg_t){HCT_PLAN_INT, -1, (int)v};
  return rc;
}

static int plan_launch(const hct_plan_spec_t *spec, const hct_plan_t *plan, const hct_launch_t *L,
                       const hct_symtab_t *syms, const size_t *buffer_bytes,
                       const size_t *scratch_bytes, hct_plan_launch_t *P) {
  int64_t v;
  int rc = 0;
  for (int d = 0; rc == 0 && d < 3; d++) {
    if ((rc = eval(spec, L->entry, "grid", L->grid[d], syms, 1, 0x7fffffff, &v)) == 0)
      P->grid[d] = (unsigned)v;
    if (rc == 0 && (rc = eval(spec, L->entry, "block", L->block[d], syms, 1, 1024, &v)) == 0)
      P->block[d] = (unsigned)v;
  }
  if (rc == 0 && (rc = eval(spec, L->entry, "shared memory", L->smem, syms, 0, spec->smem_max, &v)) == 0)
    P->smem = (unsigned)v;
  /* A first launch with pdl overlaps whatever ran before it on the stream
   * (the previous read in a timed graph, or an engine's previous kernel):
   * such a kernel may read only weights before its wait. */
  if (rc == 0 && (rc = eval(spec, L->entry, "pdl", L->pdl[0] ? L->pdl : "0", syms, INT32_MIN,
                            INT32_MAX, &v)) == 0)
    P->pdl = v != 0;
  P->n_args = L->n_args;
  P->n_tmaps = 0;
  for (int a = 0; rc == 0 && a < L->n_args; a++)
    rc = plan_arg(spec, plan, L, a, syms, buffer_bytes, scratch_bytes, P);
  return rc;
}

int hct__plan_eval(const hct_plan_spec_t *spec, const hct_symtab_t *syms,
                   const size_t *buffer_bytes, const size_t *scratch_bytes, hct_plan_t *out) {
  if (spec->n_scratch > HCT_MAX_SCRATCH || spec->n_launches > HCT_MAX_LAUNCHES)
    return hct__error(HCT_ERANGE, "%s: more than %d scratch buffers or %d launches", spec->label,
                      HCT_MAX_SCRATCH, HCT_MAX_LAUNCHES);
  int rc = 0;
  out->n_scratch = spec->n_scratch;
  for (int i = 0; rc == 0 && i < spec->n_scratch; i++) {
    out->scratch_zero[i] = spec->scratch[i].zero;
    if ((rc = hct__scratch_size(&spec->scratch[i], syms, &out->scratch_bytes[i])) < 0) {
      char why[512];
      hct__strlcpy(why, hct_last_error(), sizeof why);
      rc = hct__error(rc, "%s: %s", spec->label, why);
    }
  }
  out->n_launches = spec->n_launches;
  for (int l = 0; rc == 0 && l < spec->n_launches; l++)
    rc = plan_launch(spec, out, &spec->launches[l], syms, buffer_bytes, scratch_bytes,
                     &out->launches[l]);
  return rc;
}
