/*
 * worker_state.c: what the worker's requests share (tuner/worker_serve.h):
 * request fields, the time each phase of a request took, candidates by
 * id, an op's loaded reference, output buffers, kept copies of outputs on
 * the card (from the pool, tuner/devpool.c), parity figures as JSON, the
 * comparison kernels made ready, and the check's kept input sets torn
 * down.  The request files call down to it; it calls none of them.
 *
 * Loop thread only.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker_serve.h"

/* Errors after which the GPU context cannot be used again. */
int hct__ws_is_sticky(int rc) { return rc == HCT_EFAULT || rc == HCT_EHANG || rc == HCT_EGPU; }

/* Adds the time since t0 to phase k of the request being answered. */
void hct__ws_phase_add(worker_t *W, int k, uint64_t t0) {
  W->phase[k] += (double)(hct__now_ns() - t0) / 1e6;
}

/* ---- request fields ------------------------------------------------------ */

int hct__ws_get_int(json_t *req, const char *key, int required, int64_t dflt, int64_t *out) {
  json_t *v = json_object_get(req, key);
  if (v == NULL && !required) {
    *out = dflt;
    return 0;
  }
  if (!json_is_integer(v))
    return hct__error(HCT_EINVAL, "request '%s': '%s' must be an integer",
                      json_string_value(json_object_get(req, "cmd")), key);
  *out = json_integer_value(v);
  return 0;
}

int hct__ws_get_str(json_t *req, const char *key, int required, const char **out) {
  json_t *v = json_object_get(req, key);
  *out = json_string_value(v);
  if (*out == NULL && (required || v != NULL))
    return hct__error(HCT_EINVAL, "request '%s': '%s' must be a string",
                      json_string_value(json_object_get(req, "cmd")), key);
  return 0;
}

wcand_t *hct__ws_find_cand(worker_t *W, int64_t id) {
  for (int i = 0; i < MAX_CANDS; i++)
    if (W->cands[i].used && W->cands[i].id == id) return &W->cands[i];
  return NULL;
}

int hct__ws_need_cand(worker_t *W, int64_t id, wcand_t **out) {
  *out = hct__ws_find_cand(W, id);
  if (*out == NULL) return hct__error(HCT_ENOENT, "candidate %lld is not loaded", (long long)id);
  return 0;
}

/* The op's reference, loaded by a 'reference' request. */
int hct__ws_op_reference(worker_t *W, const hct_op_t *op, const hct_cand_t **out) {
  for (int i = 0; i < W->n_ops; i++)
    if (W->ops[i].op == op && W->ops[i].ref_loaded) {
      *out = &W->ops[i].ref;
      return 0;
    }
  return hct__error(HCT_ENOENT, "op '%s': its reference is not loaded in this worker ('reference' first)",
                    op->name);
}

/* ---- check --------------------------------------------------------------- */

/* Host buffers for a run's outputs and inouts (NULL for the others). */
int hct__ws_outs_alloc(const hct_hostset_t *hs, void *outs[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) outs[i] = NULL;
  for (int i = 0; i < hs->n; i++) {
    hct_buf_role_t r = hs->bufs[i].spec->role;
    if (r != HCT_BUF_OUTPUT && r != HCT_BUF_INOUT) continue;
    /* Kept for the next run (tuner/hostbuf.c): gigabytes at large T. */
    outs[i] = hct__hostbuf_get(hs->bufs[i].elems * hct__dtype_size(hs->bufs[i].spec->dtype));
    if (outs[i] == NULL) return hct__error(HCT_ENOMEM, "out of memory for outputs");
  }
  return 0;
}

void hct__ws_outs_free(void *outs[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    hct__hostbuf_put(outs[i]);
    outs[i] = NULL;
  }
}

void hct__ws_runset_clear(runset_t *r) {
  if (r->valid) hct__hostset_free(&r->hs);
  hct__ws_outs_free(r->ref_out);
  json_decref(r->ref_figs);
  memset(r, 0, sizeof *r);
}

/* Kept copies of outputs given back to the pool. */
void hct__ws_kept_give(worker_t *W, hct_dptr_t kept[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    hct__devpool_give(&W->pool, W->gpu, kept[i]);
    kept[i] = 0;
  }
}

/* Room for the outputs and inouts of d in kept[] (hct__pcheck_keep fills
 * them), from the pool where empty. */
int hct__ws_kept_take(worker_t *W, const hct_hostset_t *hs, const hct_devset_t *d, hct_dptr_t kept[]) {
  int rc = 0;
  for (int i = 0; rc == 0 && i < hs->n; i++) {
    const hct_buf_role_t r = hs->bufs[i].spec->role;
    if ((r == HCT_BUF_OUTPUT || r == HCT_BUF_INOUT) && d->ptr[i] != 0 && kept[i] == 0)
      rc = hct__devpool_take(&W->pool, W->gpu, d->bytes[i], &kept[i]);
  }
  return rc;
}

/* The card's copies of a set's reference, reference outputs and inputs. */
void hct__ws_runset_card_free(worker_t *W, hct_gpu_t *g, runset_t *r) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) hct__pcheck_ref_free(g, &r->dref[i]);
  r->dref_ok = 0;
  hct__ws_kept_give(W, r->ref_dev);
  hct__devset_free(g, &r->pristine);
}

void hct__ws_inset_clear(worker_t *W) {
  inset_t *in = &W->in;
  if (in->gpu != NULL)
    for (int k = 0; k < 2; k++) hct__ws_runset_card_free(W, in->gpu, &in->set[k]);
  if (in->staged) hct__producer_unstage(in->gpu, &W->producer);
  if (in->dev_ok) hct__devset_free(in->gpu, &in->dev);
  for (int k = 0; k < 2; k++) hct__ws_runset_clear(&in->set[k]);
  memset(in, 0, sizeof *in);
  in->ref_id = -1;
}

/* Figures of every output and inout into f: against the float64
 * reference, and bit for bit against `ref` when given.  An output whose
 * bits equal the reference's (ref_f: its figures) has the reference's
 * figures: the float64 comparison is the costly part of a check, and a
 * bitwise candidate's runs are bit-equal to the baseline's. */
void hct__ws_figures_of(const hct_hostset_t *hs, void *outs[], void *ref[],
                       const hct_parity_figs_t *ref_f, hct_parity_figs_t f[]) {
  memset(f, 0, sizeof *f * HCT_MAX_BUFFERS);
  for (int i = 0; i < hs->n; i++) {
    if (outs[i] == NULL) continue;
    hct_parity_figs_t fb;
    memset(&fb, 0, sizeof fb);
    if (ref != NULL && ref[i] != NULL) hct__parity_bitwise(&hs->bufs[i], outs[i], ref[i], &fb);
    if (ref != NULL && ref[i] != NULL && ref_f != NULL && fb.mismatches == 0) {
      f[i] = ref_f[i];
      f[i].is_image = 0;
      f[i].image_mismatches = 0;
    } else {
      hct__parity_metrics(&hs->bufs[i], outs[i], &f[i]);
    }
    hct__parity_take_bitwise(&f[i], &fb);
  }
  hct__parity_images(hs, outs, f);
}

json_t *hct__ws_figures_json(const hct_hostset_t *hs, void *outs[], const hct_parity_figs_t f[]) {
  json_t *all = json_object();
  for (int i = 0; i < hs->n; i++)
    if (outs[i] != NULL) json_object_set_new(all, hs->bufs[i].spec->name, hct__figs_to_json(&f[i]));
  return all;
}

json_t *hct__ws_figures(const hct_hostset_t *hs, void *outs[], void *ref[],
                       const hct_parity_figs_t *ref_f) {
  hct_parity_figs_t f[HCT_MAX_BUFFERS];
  hct__ws_figures_of(hs, outs, ref, ref_f, f);
  return hct__ws_figures_json(hs, outs, f);
}

/* Marks (non-NULL) for the outputs and inouts a run leaves on the card, in
 * the shape figures_json reads.  Loop thread only: one static array. */
void **hct__ws_card_outs(const hct_hostset_t *hs, const hct_devset_t *d) {
  static void *marks[HCT_MAX_BUFFERS];
  static char mark;
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    const int out = i < hs->n && (hs->bufs[i].spec->role == HCT_BUF_OUTPUT || hs->bufs[i].spec->role == HCT_BUF_INOUT);
    marks[i] = out && d->ptr[i] ? &mark : NULL;
  }
  return marks;
}

/* The comparison kernels loaded (W->pcheck_state 1), or the reason checks
 * compare on the host (W->pcheck_off): HCTUNE_CHECK_ON_HOST set (the GPU
 * test compares both paths so), or the template does not compile or load
 * here.  Compiled in the worker, once: no cache entry, about a second. */
void hct__ws_pcheck_ready(worker_t *W, const hct_op_t *op) {
  if (W->pcheck_state != 0) return;
  W->pcheck_state = -1;
  const char *env = getenv("HCTUNE_CHECK_ON_HOST");
  if (env != NULL && env[0] != '\0' && strcmp(env, "0") != 0) {
    snprintf(W->pcheck_off, sizeof W->pcheck_off, "HCTUNE_CHECK_ON_HOST is set");
    return;
  }
  hct_op_t *holder = NULL;
  hct_compile_job_t job;
  int rc = hct__pcheck_job(op, W->dev.backend, W->dev.arch, &holder, &job);
  if (rc == 0) {
    hct__compile_one(&job);
    rc = job.status;
    if (rc != 0) hct__error(rc, "%s", job.error);
  }
  if (rc == 0) rc = hct__pcheck_load(W->gpu, job.image, job.image_size, &W->pcheck);
  if (rc == 0) W->pcheck_state = 1;
  else snprintf(W->pcheck_off, sizeof W->pcheck_off, "the parity check kernels: %s", hct_last_error());
  if (rc != 0) hct__log(HCT_LOG_WARN, "worker: checks compare on the host: %s", W->pcheck_off);
  hct__compile_job_clear(&job);
  free(holder);
}
