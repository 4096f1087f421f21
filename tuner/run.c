/*
 * run.c: a candidate on a GPU: load its module, size its scratch, enqueue
 * its launch sequence from the manifest, run it once and read the results
 * back.  Its buffers are a device set (tuner/devset.c); a session may run
 * the producer kernel ahead of it (tuner/producer.c).  The probe and the
 * worker process are built on these.
 *
 * Loop thread only: everything here uses the GPU handle of the calling
 * thread.
 */
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

void hct__run_symtab(const hct_cand_t *c, const hct_device_t *dev, int T, hct_symtab_t *syms) {
  hct__point_symtab(c->op, c->v, &c->point, syms);
  hct__symtab_set(syms, "T", T);
  hct__card_symbols(syms, dev->arch_num, dev->sm_count, dev->smem_optin, dev->warp_size,
                    dev->backend == HCT_BACKEND_HIP);
}

int hct__run_supports(const hct_cand_t *c, const hct_device_t *dev, int T, char *why, size_t len) {
  if (T < c->v->tmin || T > c->v->tmax) {
    snprintf(why, len, "supports T=%d..%d", c->v->tmin, c->v->tmax);
    return 0;
  }
  if (!hct__variant_fits(c->v, dev->backend, dev->arch_num, dev->warp_size, why, len)) return 0;
  hct_symtab_t syms;
  hct__run_symtab(c, dev, T, &syms);
  return hct__constraints_hold(c->v, &syms, 0, why, len);
}

int hct__run_load(hct_gpu_t *g, const hct_op_t *op, const hct_variant_t *v, const hct_point_t *pt,
                  const void *image, size_t size, hct_cand_t *out) {
  memset(out, 0, sizeof *out);
  out->op = op;
  out->v = v;
  out->point = *pt;
  hct__point_json(v, pt, out->params, sizeof out->params);
  snprintf(out->label, sizeof out->label, "%s %s", v->name, out->params);
  int rc = hct__gpu_module_load(g, image, size, &out->mod);
  if (rc != 0) return rc;
  for (int i = 0; i < v->n_launches; i++) {
    rc = hct__gpu_function(out->mod, v->launches[i].entry, &out->fn[i]);
    if (rc != 0) {
      hct__run_unload(g, out);
      return rc;
    }
  }
  return 0;
}

void hct__run_unload(hct_gpu_t *g, hct_cand_t *c) {
  if (c->mod != NULL) hct__gpu_module_unload(g, c->mod);
  c->mod = NULL;
}

int hct__scratch_alloc(hct_gpu_t *g, const hct_cand_t *c, int T, hct_scratchset_t *s) {
  hct_symtab_t syms;
  hct__run_symtab(c, hct__gpu_device(g), T, &syms);
  return hct__scratch_alloc_with(g, c, &syms, s);
}

/* The bytes scratch buffer i of c takes at syms (jit/plan.c's rule). */
static int scratch_size(const hct_cand_t *c, int i, const hct_symtab_t *syms, size_t *out) {
  int rc = hct__scratch_size(&c->v->scratch[i], syms, out);
  if (rc < 0) {
    char why[512];
    hct__strlcpy(why, hct_last_error(), sizeof why);
    rc = hct__error(rc, "%s: %s", c->label, why);
  }
  return rc;
}

int hct__scratch_sizes(const hct_cand_t *c, const hct_device_t *dev, int T, size_t bytes[4]) {
  hct_symtab_t syms;
  hct__run_symtab(c, dev, T, &syms);
  for (int i = 0; i < c->v->n_scratch && i < 4; i++) {
    int rc = scratch_size(c, i, &syms, &bytes[i]);
    if (rc != 0) return rc;
  }
  return 0;
}

int hct__scratch_bytes(const hct_cand_t *c, const hct_device_t *dev, int T, size_t *out) {
  hct_symtab_t syms;
  hct__run_symtab(c, dev, T, &syms);
  *out = 0;
  for (int i = 0; i < c->v->n_scratch; i++) {
    size_t b;
    int rc = scratch_size(c, i, &syms, &b);
    if (rc != 0) return rc;
    *out += b;
  }
  return 0;
}

int hct__scratch_alloc_with(hct_gpu_t *g, const hct_cand_t *c, const hct_symtab_t *syms,
                            hct_scratchset_t *s) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < c->v->n_scratch; i++) {
    size_t bytes;
    int rc = scratch_size(c, i, syms, &bytes);
    if (rc == 0) rc = hct__gpu_alloc(g, bytes, &s->ptr[i]);
    if (rc != 0) {
      hct__scratch_free(g, s);
      return rc;
    }
    s->bytes[i] = bytes;
  }
  return hct__scratch_zero_once(g, c, s);
}

int hct__scratch_zero_once(hct_gpu_t *g, const hct_cand_t *c, hct_scratchset_t *s) {
  for (int i = 0; i < c->v->n_scratch; i++) {
    if (c->v->scratch[i].zero != HCT_ZERO_ONCE) continue;
    int rc = hct__gpu_fill32(g, s->ptr[i], 0, s->bytes[i] / 4);
    if (rc != 0) return rc;
  }
  return 0;
}

void hct__scratch_free(hct_gpu_t *g, hct_scratchset_t *s) {
  for (int i = 0; i < 4; i++)
    if (s->ptr[i]) hct__gpu_free(g, s->ptr[i]);
  memset(s, 0, sizeof *s);
}

/* The device pointer of a pointer argument of the plan: a buffer of the
 * set, scratch, or one of `extra` (the reference's rows and outputs). */
static hct_dptr_t bind_pointer(const hct_plan_arg_t *pa, const hct_devset_t *d,
                               const hct_scratchset_t *s, const hct_argptr_t *extra) {
  switch (pa->kind) {
    case HCT_PLAN_BUFFER: return d->ptr[pa->index];
    case HCT_PLAN_SCRATCH: return s->ptr[pa->index];
    default: return extra[pa->index].ptr;
  }
}

/* Tensor map m over the memory of the set being run: encoded for every
 * launch, from the addresses of that set, so that rotating weight sets
 * (cold timing) each get maps of their own. */
static int bind_tmap(hct_gpu_t *g, const hct_cand_t *c, const hct_plan_tmap_t *m,
                     const hct_devset_t *d, const hct_scratchset_t *s, hct_tmap_bytes_t *out) {
  hct_dptr_t base = m->over == HCT_PLAN_BUFFER ? d->ptr[m->index] : s->ptr[m->index];
  int rc = hct__gpu_tensor_map(g, &m->dims, base, out);
  if (rc != 0) {
    char why[512];
    hct__strlcpy(why, hct_last_error(), sizeof why);
    return hct__error(rc, "%s: %s", c->label, why);
  }
  return 0;
}

int hct__run_zero_each(hct_gpu_t *g, const hct_cand_t *c, const hct_scratchset_t *s) {
  int rc;
  for (int i = 0; i < c->v->n_scratch; i++)
    if (c->v->scratch[i].zero == HCT_ZERO_EACH_RUN &&
        (rc = hct__gpu_fill32(g, s->ptr[i], 0, s->bytes[i] / 4)) != 0)
      return rc;
  return 0;
}

int hct__run_first_pdl(const hct_cand_t *c, const hct_device_t *dev, int T) {
  if (c->v->n_launches == 0) return 0;
  hct_symtab_t syms;
  hct__run_symtab(c, dev, T, &syms);
  int64_t pdl = 0;
  if (hct__expr_eval(c->v->launches[0].pdl, &syms, &pdl) != 0) {
    hct__error_clear();
    return 0;
  }
  return pdl != 0;
}

int hct__run_enqueue(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs,
                     const hct_devset_t *d, const hct_scratchset_t *s) {
  int rc = hct__run_zero_each(g, c, s);
  return rc != 0 ? rc : hct__run_launches(g, c, hs, d, s);
}

int hct__run_launches(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs,
                      const hct_devset_t *d, const hct_scratchset_t *s) {
  hct_symtab_t syms;
  hct__run_symtab(c, hct__gpu_device(g), hs->T, &syms);
  return hct__run_launches_with(g, c, &syms, d, s, NULL, 0);
}

int hct__run_launches_with(hct_gpu_t *g, const hct_cand_t *c, const hct_symtab_t *symtab,
                           const hct_devset_t *d, const hct_scratchset_t *s,
                           const hct_argptr_t *extra, int n_extra) {
  const hct_variant_t *v = c->v;
  hct_plan_spec_t spec;
  hct__plan_spec(c->op, v, hct__gpu_device(g)->smem_optin, &spec);
  spec.label = c->label;
  const char *extra_names[HCT_MAX_BUFFERS + 1];
  if (n_extra > (int)(sizeof extra_names / sizeof extra_names[0]))
    return hct__error(HCT_EINVAL, "%s: %d extra pointers, more than %d", c->label, n_extra,
                      (int)(sizeof extra_names / sizeof extra_names[0]));
  for (int i = 0; i < n_extra; i++) extra_names[i] = extra[i].name;
  spec.extra = extra_names;
  spec.n_extra = n_extra;
  hct_plan_t *plan = malloc(sizeof *plan);
  if (plan == NULL) return hct__error(HCT_ENOMEM, "%s: out of memory", c->label);
  int rc = hct__plan_eval(&spec, symtab, d->bytes, s->bytes, plan);
  for (int l = 0; rc == 0 && l < v->n_launches; l++) {
    const hct_plan_launch_t *P = &plan->launches[l];
    if (P->smem > 48 * 1024 && (rc = hct__gpu_function_smem(c->fn[l], (int)P->smem)) != 0) break;
    /* Argument storage: pointers and ints, each kept alive until the
     * launch call returns (the driver copies them then). */
    hct_dptr_t ptrs[HCT_MAX_ARGS];
    int ints[HCT_MAX_ARGS];
    hct_tmap_bytes_t maps[HCT_MAX_ARGS];
    void *args[HCT_MAX_ARGS];
    for (int a = 0; rc == 0 && a < P->n_args; a++) {
      const hct_plan_arg_t *pa = &P->args[a];
      if (pa->kind == HCT_PLAN_TMAP) {
        rc = bind_tmap(g, c, &P->tmaps[pa->index], d, s, &maps[a]);
        args[a] = &maps[a];
      } else if (pa->kind == HCT_PLAN_INT) {
        ints[a] = pa->value;
        args[a] = &ints[a];
      } else {
        ptrs[a] = bind_pointer(pa, d, s, extra);
        args[a] = &ptrs[a];
      }
    }
    if (rc == 0)
      rc = P->pdl ? hct__gpu_launch_pdl(g, c->fn[l], P->grid, P->block, P->smem, args)
                  : hct__gpu_launch(g, c->fn[l], P->grid, P->block, P->smem, args);
  }
  free(plan);
  return rc;
}

int hct__session_prepare(hct_gpu_t *g, const hct_cand_t *c, hct_scratchset_t *s) {
  int rc = 0;
  /* Scratch is poisoned: a variant must not depend on what a previous
   * allocation left there, only on what it zeroes itself. */
  for (int i = 0; rc == 0 && i < c->v->n_scratch; i++)
    rc = hct__gpu_fill32(g, s->ptr[i], HCT_POISON_F32, s->bytes[i] / 4);
  return rc == 0 ? hct__scratch_zero_once(g, c, s) : rc;
}

int hct__session_begin(hct_gpu_t *g, const hct_cand_t *c, int T, hct_scratchset_t *s) {
  int rc = hct__scratch_alloc(g, c, T, s);
  if (rc != 0) return rc;
  rc = hct__session_prepare(g, c, s);
  if (rc != 0) hct__scratch_free(g, s);
  return rc;
}

int hct__session_enqueue(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs, hct_devset_t *d,
                         hct_scratchset_t *s, const hct_producer_t *pre, const hct_devset_t *from) {
  int rc = 0;
  for (int i = 0; rc == 0 && i < hs->n; i++)
    if (d->ptr[i] && hs->bufs[i].spec->role == HCT_BUF_OUTPUT) rc = hct__buf_poison(g, &hs->bufs[i], d->ptr[i]);
  if (rc == 0) rc = hct__run_zero_each(g, c, s);
  if (rc == 0 && pre != NULL) {
    /* The inputs hold poison until the producer writes them: a candidate
     * that reads them before its griddepcontrol.wait reads poison. */
    for (int i = 0; rc == 0 && i < hs->n; i++)
      if (d->ptr[i] && hct__buf_is_input(hs->bufs[i].spec->role)) rc = hct__buf_poison(g, &hs->bufs[i], d->ptr[i]);
    if (rc == 0) rc = hct__producer_enqueue(g, pre);
  } else if (rc == 0) {
    rc = from != NULL ? hct__devset_copy_inputs(g, hs, from, d) : HCT_EUNSUPPORTED;
    /* A driver without device copies: from the host, as before. */
    if (rc == HCT_EUNSUPPORTED) {
      hct__error_clear();
      rc = hct__devset_upload_inputs(g, hs, d);
    }
  }
  return rc == 0 ? hct__run_launches(g, c, hs, d, s) : rc;
}

int hct__session_barrier_word(const hct_cand_t *c, const hct_scratchset_t *s, hct_dptr_t *out) {
  *out = 0;
  for (int i = 0; i < c->v->n_scratch && i < 4; i++)
    if (strcmp(c->v->scratch[i].name, "ws") == 0) *out = s->ptr[i];
  return *out != 0;
}

int hct__session_run(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs, hct_devset_t *d,
                     hct_scratchset_t *s, const hct_producer_t *pre, const hct_devset_t *from,
                     void *outs[], uint32_t *barrier_flag) {
  int rc = hct__session_enqueue(g, c, hs, d, s, pre, from);
  if (rc == 0) rc = hct__gpu_sync(g);
  for (int i = 0; rc == 0 && i < hs->n; i++) {
    hct_buf_role_t role = hs->bufs[i].spec->role;
    if (outs[i] != NULL && (role == HCT_BUF_OUTPUT || role == HCT_BUF_INOUT) && d->ptr[i])
      rc = hct__gpu_download(g, outs[i], d->ptr[i], d->bytes[i]);
  }
  /* The grid barrier's timeout flag is word 0 of scratch "ws"
   * (kernels-src/common/hct_grid.h). */
  if (barrier_flag != NULL) {
    *barrier_flag = 0;
    for (int i = 0; rc == 0 && i < c->v->n_scratch; i++)
      if (strcmp(c->v->scratch[i].name, "ws") == 0)
        rc = hct__gpu_download(g, barrier_flag, s->ptr[i], sizeof *barrier_flag);
  }
  return rc;
}

int hct__run_on(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs, hct_devset_t *d,
                void *outs[], uint32_t *barrier_flag) {
  hct_scratchset_t s;
  int rc = hct__session_begin(g, c, hs->T, &s);
  if (rc != 0) return rc;
  rc = hct__session_run(g, c, hs, d, &s, NULL, NULL, outs, barrier_flag);
  hct__scratch_free(g, &s);
  return rc;
}
