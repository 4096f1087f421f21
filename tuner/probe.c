/*
 * probe.c: the probe: for one op on one card, compile every candidate
 * (variant x parameter point), check each one's outputs at every token
 * count with and without the optional inputs, time the ones that pass, and
 * record every trial as it completes and the winners at the end.
 *
 * The path of one probe:
 *   manifest -> candidates -> compile (cache first, thread pool)
 *   -> per T: draw inputs (seeded), float64 reference, baseline checked
 *      against it, every candidate checked against the baseline's bits
 *      (bitwise) or the reference's error (kl) -> trials
 *   -> per T: the passing candidates timed cold, interleaved -> trials
 *   -> per class: the winner per T, merged into ranges -> decisions.
 *
 * Loop thread only.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "tuner.h"

#define MAX_CANDS 256
#define MAX_T 64

typedef struct cand_s {
  hct_compile_job_t job;
  hct_cand_t c;
  int loaded;
  int dead;              /* out for every T: compile, load or fault */
  uint8_t passed[MAX_T + 1];
  uint8_t failed[MAX_T + 1];
  hct_summary_t timing[MAX_T + 1];
  uint8_t timed[MAX_T + 1];
} cand_t;

typedef struct probe_s {
  const hct_probe_opts_t *o;
  hct_op_t *op;
  const hct_op_impl_t *impl;
  hct_device_t dev;
  hct_db_t *db;
  hct_db_keys_t keys;
  char run_id[33];
  hct_gpu_t *gpu;
  cand_t *cands;
  int n;
  int baseline;          /* index of the baseline candidate */
  uint8_t tokens[MAX_T + 1];
  int tty;
  uint64_t t0;
  hct_rng_t rng;
} probe_t;

/* ---- progress --------------------------------------------------------- */

/* One progress event: a JSON line in --json mode, a rewritten status line
 * on a terminal, a plain log line otherwise. */
static void progress(probe_t *P, const char *stage, int done, int total, const char *fmt, ...)
    HCT_PRINTF(5, 6);
static void progress(probe_t *P, const char *stage, int done, int total, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (P->o->json) {
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:s, s:f}", "event", "progress", "stage", stage,
                          "done", done, "total", total, "what", what, "elapsed_s",
                          (double)(hct__now_ns() - P->t0) / 1e9);
    char *s = json_dumps(j, JSON_COMPACT);
    if (s) printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(j);
    return;
  }
  if (P->o->quiet) return;
  if (P->tty)
    fprintf(stderr, "\r\033[K%s [%d/%d] %s", stage, done, total, what);
  else
    fprintf(stderr, "hctune: %s [%d/%d] %s\n", stage, done, total, what);
  fflush(stderr);
}

static void progress_end(probe_t *P) {
  if (P->tty && !P->o->json && !P->o->quiet) fprintf(stderr, "\r\033[K");
}

/* ---- records ---------------------------------------------------------- */

static void trial_init(probe_t *P, const cand_t *c, hct_db_trial_t *t, const char *kind, int T,
                       int pending) {
  memset(t, 0, sizeof *t);
  t->keys = P->keys;
  hct__strlcpy(t->run_id, P->run_id, sizeof t->run_id);
  hct__strlcpy(t->op, P->op->name, sizeof t->op);
  hct__strlcpy(t->variant, c->c.v->name, sizeof t->variant);
  hct__strlcpy(t->params, c->c.params, sizeof t->params);
  hct__strlcpy(t->template_hash, c->job.template_hash, sizeof t->template_hash);
  hct__strlcpy(t->binary_key, c->job.key, sizeof t->binary_key);
  hct__strlcpy(t->kind, kind, sizeof t->kind);
  t->tokens = T;
  t->pending = pending;
}

/* Records a failure: the trial, and a fault that quarantines the candidate
 * (at token count T and up for a timeout, at every T otherwise). */
static int record_failure(probe_t *P, cand_t *c, const char *kind, const char *reason, int T,
                          int pending, uint64_t seed, const char *figures, const char *log) {
  hct_db_trial_t t;
  trial_init(P, c, &t, kind, T, pending);
  hct__strlcpy(t.status, reason, sizeof t.status);
  t.seed = seed;
  t.figures_json = figures;
  t.log = log;
  int rc = hct__db_trial_add(P->db, &t, NULL);
  if (rc != 0) return rc;
  hct_db_fault_t f;
  memset(&f, 0, sizeof f);
  f.keys = P->keys;
  hct__strlcpy(f.op, P->op->name, sizeof f.op);
  hct__strlcpy(f.variant, c->c.v->name, sizeof f.variant);
  hct__strlcpy(f.params, c->c.params, sizeof f.params);
  hct__strlcpy(f.template_hash, c->job.template_hash, sizeof f.template_hash);
  f.tokens = strcmp(reason, "timeout") == 0 ? T : 0;
  hct__strlcpy(f.reason, reason, sizeof f.reason);
  f.log = (char *)log;
  return hct__db_fault_add(P->db, &f);
}

/* ---- candidates and compiling ------------------------------------------ */

static int variant_selected(const hct_probe_opts_t *o, const char *name) {
  if (o->only_variants == NULL) return 1;
  size_t n = strlen(name);
  for (const char *p = o->only_variants; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return 1;
    p += len + (e != NULL);
  }
  return 0;
}

/* Builds the candidate list: every point of every variant that fits the
 * card and supports at least one of the token counts asked for. */
static int build_candidates(probe_t *P) {
  P->cands = calloc(MAX_CANDS, sizeof *P->cands);
  if (P->cands == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  P->baseline = -1;
  for (int vi = 0; vi < P->op->n_variants; vi++) {
    const hct_variant_t *v = &P->op->variants[vi];
    char why[256];
    int is_base = v->parity == HCT_PARITY_BASELINE;
    if (!is_base && !variant_selected(P->o, v->name)) continue;
    if (!hct__run_variant_fits(v, &P->dev, why, sizeof why)) {
      if (is_base)
        return hct__error(HCT_EUNSUPPORTED, "op '%s': baseline '%s' cannot run on %s: %s",
                          P->op->name, v->name, P->dev.name, why);
      progress(P, "skip", 0, 0, "%s: %s", v->name, why);
      continue;
    }
    hct_point_t pts[64];
    int np = hct__param_points(v, pts, 64);
    for (int p = 0; p < np; p++) {
      if (P->n == MAX_CANDS) return hct__error(HCT_ERANGE, "op '%s': more than %d candidates", P->op->name, MAX_CANDS);
      cand_t *c = &P->cands[P->n];
      c->c.op = P->op;
      c->c.v = v;
      c->c.point = pts[p];
      hct__point_json(v, &pts[p], c->c.params, sizeof c->c.params);
      snprintf(c->c.label, sizeof c->c.label, "%s %s", v->name, c->c.params);
      int any = 0;
      for (int T = 1; T <= MAX_T; T++)
        if (P->tokens[T] && hct__run_supports(&c->c, &P->dev, T, why, sizeof why)) any = 1;
      if (!any) continue;
      /* The baseline is one candidate: its first point that fits. */
      if (is_base && P->baseline >= 0) continue;
      if (is_base) P->baseline = P->n;
      c->job.backend = P->dev.backend;
      hct__strlcpy(c->job.arch, P->dev.arch, sizeof c->job.arch);
      c->job.op = P->op;
      c->job.variant = v;
      c->job.point = pts[p];
      P->n++;
    }
  }
  if (P->baseline < 0)
    return hct__error(HCT_EUNSUPPORTED, "op '%s': its baseline supports none of the token counts asked for",
                      P->op->name);
  return 0;
}

static void compile_progress(void *arg, const hct_compile_job_t *job, int done, int total) {
  probe_t *P = arg;
  progress(P, "compile", done, total, "%s %s%s", job->variant->name,
           job->cache_hit ? "(cached)" : "", job->status ? " FAILED" : "");
}

static int compile_candidates(probe_t *P) {
  hct_compile_job_t *jobs = calloc((size_t)P->n, sizeof *jobs);
  if (jobs == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  for (int i = 0; i < P->n; i++) jobs[i] = P->cands[i].job;
  hct_binary_store_t store;
  hct__db_binary_store(P->db, &store);
  uint64_t t0 = hct__now_ns();
  int rc = hct__compile_all(jobs, P->n, &store, compile_progress, P);
  double wall = (double)(hct__now_ns() - t0) / 1e6;
  int hits = 0, failed = 0;
  double cpu_ms = 0;
  for (int i = 0; i < P->n; i++) {
    P->cands[i].job = jobs[i];
    hits += jobs[i].cache_hit;
    cpu_ms += jobs[i].cache_hit ? 0 : jobs[i].compile_ms;
  }
  free(jobs);
  if (rc != 0) return rc;
  progress_end(P);
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (c->job.status == 0) continue;
    failed++;
    c->dead = 1;
    char figs[128];
    snprintf(figs, sizeof figs, "{\"error_code\":\"%s\"}", hct_err_name(c->job.status));
    int r = record_failure(P, c, "compile", "compile", 0, 0, 0, figs,
                           c->job.log ? c->job.log : c->job.error);
    if (r != 0) return r;
    hct__log(HCT_LOG_WARN, "%s: %s", c->c.label, c->job.error);
    if (i == P->baseline)
      return hct__error(HCT_ECOMPILE, "baseline %s: %s", c->c.label, c->job.error);
  }
  if (P->o->json) {
    printf("{\"event\":\"compiled\",\"binaries\":%d,\"cache_hits\":%d,\"failed\":%d,"
           "\"wall_ms\":%.1f,\"compile_ms\":%.1f}\n", P->n, hits, failed, wall, cpu_ms);
    fflush(stdout);
  } else if (!P->o->quiet) {
    fprintf(stderr, "hctune: compiled %d binaries in %.2f s (%d from the cache, %d failed)\n", P->n,
            wall / 1e3, hits, failed);
  }
  return 0;
}

/* ---- checking ----------------------------------------------------------- */

/* Host buffers to receive a run's outputs. */
typedef struct outs_s {
  void *p[HCT_MAX_BUFFERS];
} outs_t;

static int outs_alloc(const hct_hostset_t *hs, outs_t *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < hs->n; i++) {
    hct_buf_role_t r = hs->bufs[i].spec->role;
    if (r != HCT_BUF_OUTPUT && r != HCT_BUF_INOUT) continue;
    o->p[i] = malloc(hs->bufs[i].elems * hct__dtype_size(hs->bufs[i].spec->dtype));
    if (o->p[i] == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  }
  return 0;
}

static void outs_free(outs_t *o) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) free(o->p[i]);
  memset(o, 0, sizeof *o);
}

/* Errors that leave the GPU context unusable: the probe cannot go on in
 * this process. */
static int is_sticky(int rc) { return rc == HCT_EFAULT || rc == HCT_EHANG || rc == HCT_EGPU; }


/*
 * A 16-bit output named "<x>_bf16" or "<x>_f16" next to an f32 output "<x>"
 * is an image: it must hold exactly the round-to-nearest-even conversion of
 * the same run's "<x>".  Its error against the float64 reference is the
 * format's own rounding (a 1-ulp flip near a rounding boundary is correct),
 * so images are judged by this rule and not by error bounds.  Returns the
 * index of "<x>", or -1 when buffer i is no image.
 */
static int image_source(const hct_hostset_t *hs, int i) {
  const hct_buffer_t *b = hs->bufs[i].spec;
  if (b->dtype != HCT_DT_BF16 && b->dtype != HCT_DT_F16) return -1;
  const char *suffix = b->dtype == HCT_DT_BF16 ? "_bf16" : "_f16";
  size_t n = strlen(b->name), k = strlen(suffix);
  if (n <= k || strcmp(b->name + n - k, suffix) != 0) return -1;
  for (int j = 0; j < hs->n; j++) {
    const hct_buffer_t *src = hs->bufs[j].spec;
    if (src->dtype == HCT_DT_F32 && strlen(src->name) == n - k && strncmp(src->name, b->name, n - k) == 0)
      return j;
  }
  return -1;
}

/* Elements of image buffer i that are not the exact image of their source;
 * *first gets the first such index. */
static size_t image_mismatches(const hct_hostset_t *hs, int i, int src, const outs_t *out,
                               size_t *first) {
  const uint16_t *img = out->p[i];
  const float *x = out->p[src];
  int bf = hs->bufs[i].spec->dtype == HCT_DT_BF16;
  size_t bad = 0;
  for (size_t e = 0; e < hs->bufs[i].elems; e++) {
    uint16_t want = bf ? hct__f32_to_bf16(x[e]) : hct__f32_to_f16(x[e]);
    if (img[e] != want && bad++ == 0) *first = e;
  }
  return bad;
}

/* The worst figures of a candidate over the outputs of one run. */
typedef struct verdict_s {
  const char *status;    /* "pass", "parity", "unwritten" */
  hct_parity_figs_t worst;
  char worst_buf[32];
  char figures[1024];
} verdict_t;

/* Checks one run's outputs: every output element written and finite, and
 * bitwise equal to `ref_outs` (class bitwise) or within the kl bounds
 * relative to `base` (the baseline's figures on the same inputs). */
static void judge(probe_t *P, const cand_t *c, const hct_hostset_t *hs, const outs_t *out,
                  const outs_t *ref_outs, const hct_parity_figs_t *base, verdict_t *vd) {
  memset(vd, 0, sizeof *vd);
  vd->status = "pass";
  size_t off = 0;
  off += (size_t)snprintf(vd->figures + off, sizeof vd->figures - off, "{");
  for (int i = 0; i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (out->p[i] == NULL) continue;
    hct_parity_figs_t f;
    memset(&f, 0, sizeof f);
    hct__parity_metrics(b, out->p[i], &f);
    if (c->c.v->parity == HCT_PARITY_BITWISE && ref_outs != NULL) {
      hct_parity_figs_t fb;
      memset(&fb, 0, sizeof fb);
      hct__parity_bitwise(b, out->p[i], ref_outs->p[i], &fb);
      f.mismatches = fb.mismatches;
      f.first_mismatch = fb.first_mismatch;
    }
    const char *st = "pass";
    int src = image_source(hs, i);
    size_t img_bad = 0, img_first = 0;
    if (src >= 0 && f.unwritten == 0) img_bad = image_mismatches(hs, i, src, out, &img_first);
    if (f.unwritten > 0) st = "unwritten";
    else if (f.nonfinite > 0) st = "parity";
    else if (img_bad > 0) {
      st = "parity";
      f.mismatches = img_bad;
      f.first_mismatch = img_first;
    }
    else if (c->c.v->parity == HCT_PARITY_BITWISE && f.mismatches > 0) st = "parity";
    else if (c->c.v->parity == HCT_PARITY_KL && base != NULL) {
      const hct_parity_figs_t *bf = &base[i];
      double kl_limit = fmax(P->op->kl_mean_factor * bf->kl_mean, P->op->kl_abs_floor);
      double err_limit = P->op->maxerr_factor * bf->max_err_ratio;
      /* resid (an inout) must hold R' exactly in every class. */
      if (b->spec->role == HCT_BUF_INOUT ? f.rel_err != 0.0
                                         : src < 0 && (f.kl_mean > kl_limit || f.max_err_ratio > err_limit))
        st = "parity";
    }
    if (strcmp(st, "pass") != 0 && strcmp(vd->status, "pass") == 0) {
      vd->status = st;
      vd->worst = f;
      hct__strlcpy(vd->worst_buf, b->spec->name, sizeof vd->worst_buf);
    }
    if (off < sizeof vd->figures - 200)
      off += (size_t)snprintf(vd->figures + off, sizeof vd->figures - off,
                              "%s\"%s\":{\"rel_err\":%.3g,\"max_err_ratio\":%.3g,\"kl_mean\":%.3g,"
                              "\"kl_max\":%.3g,\"argmax\":%.4f,\"mismatches\":%zu,\"unwritten\":%zu}",
                              off > 1 ? "," : "", b->spec->name, f.rel_err, f.max_err_ratio,
                              f.kl_mean, f.kl_max, f.argmax_agree, f.mismatches, f.unwritten);
  }
  snprintf(vd->figures + off, sizeof vd->figures - off, "}");
}

/* Runs candidate i on hs into out; a sticky GPU error ends the probe, any
 * other error fails the candidate at every T. */
static int run_cand(probe_t *P, int i, const hct_hostset_t *hs, hct_devset_t *d, outs_t *out,
                    int *cand_failed) {
  cand_t *c = &P->cands[i];
  *cand_failed = 0;
  int rc = hct__run_on(P->gpu, &c->c, hs, d, out->p);
  if (rc == 0) return 0;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", hct_last_error());
  const char *reason = rc == HCT_EHANG ? "hang" : is_sticky(rc) ? "fault" : "launch";
  char figs[128];
  snprintf(figs, sizeof figs, "{\"error_code\":\"%s\"}", hct_err_name(rc));
  int r = record_failure(P, c, "parity", reason, hs->T, hs->pending, hs->seed, figs, msg);
  if (r != 0) return r;
  c->dead = 1;
  *cand_failed = 1;
  if (is_sticky(rc) || i == P->baseline)
    return hct__error(rc, "%s at T=%d: %s (recorded as '%s'; it is skipped from now on)",
                      c->c.label, hs->T, msg, reason);
  hct__log(HCT_LOG_WARN, "%s at T=%d: %s", c->c.label, hs->T, msg);
  return 0;
}

/* The baseline against the float64 reference: normwise relative error
 * under 1e-5 for every output, so a wrong baseline cannot make every
 * bitwise copy of it pass. */
#define BASELINE_MAX_REL_ERR 1e-5

static int check_T(probe_t *P, int T, int pending, int set) {
  hct_hostset_t hs;
  int rc = hct__hostset_init(&hs, P->op, T, pending);
  if (rc != 0) return rc;
  uint64_t seed = hct__rng_next(&P->rng);
  outs_t base_out, out;
  hct_devset_t dset;
  memset(&dset, 0, sizeof dset);
  memset(&base_out, 0, sizeof base_out);
  memset(&out, 0, sizeof out);
  hct_parity_figs_t base_figs[HCT_MAX_BUFFERS];
  memset(base_figs, 0, sizeof base_figs);
  if ((rc = P->impl->fill_inputs(&hs, seed)) != 0) goto done;
  hs.seed = seed;
  if ((rc = P->impl->reference(&hs)) != 0) goto done;
  if ((rc = outs_alloc(&hs, &base_out)) != 0 || (rc = outs_alloc(&hs, &out)) != 0) goto done;
  if ((rc = hct__devset_alloc(P->gpu, &hs, &dset)) != 0 || (rc = hct__devset_upload(P->gpu, &hs, &dset)) != 0)
    goto done;

  int failed;
  cand_t *base = &P->cands[P->baseline];
  if ((rc = run_cand(P, P->baseline, &hs, &dset, &base_out, &failed)) != 0) goto done;
  for (int i = 0; i < hs.n; i++) {
    if (base_out.p[i] == NULL) continue;
    hct__parity_metrics(&hs.bufs[i], base_out.p[i], &base_figs[i]);
    const hct_parity_figs_t *f = &base_figs[i];
    int src = image_source(&hs, i);
    size_t first = 0;
    size_t img_bad = src >= 0 && !f->unwritten ? image_mismatches(&hs, i, src, &base_out, &first) : 0;
    if (f->unwritten || f->nonfinite || img_bad || (src < 0 && f->rel_err > BASELINE_MAX_REL_ERR)) {
      char figs[256];
      snprintf(figs, sizeof figs, "{\"buffer\":\"%s\",\"rel_err\":%.3g,\"unwritten\":%zu,\"nonfinite\":%zu,"
               "\"image_mismatches\":%zu}", hs.bufs[i].spec->name, f->rel_err, f->unwritten, f->nonfinite, img_bad);
      record_failure(P, base, "parity", f->unwritten ? "unwritten" : "parity", T, pending, seed, figs, NULL);
      rc = hct__error(HCT_EPARITY,
                      "baseline %s at T=%d%s: '%s' is off the float64 reference (relative error "
                      "%.3g, %zu unwritten, %zu not finite, %zu not the exact image of its f32 "
                      "output; limit %.0e): nothing can be checked against it",
                      base->c.label, T, pending ? " with pending" : "", hs.bufs[i].spec->name,
                      f->rel_err, f->unwritten, f->nonfinite, img_bad, BASELINE_MAX_REL_ERR);
      goto done;
    }
  }

  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    char why[256];
    if (c->dead || c->failed[T] || !hct__run_supports(&c->c, &P->dev, T, why, sizeof why)) continue;
    verdict_t vd;
    if (i == P->baseline) {
      judge(P, c, &hs, &base_out, NULL, NULL, &vd);
    } else {
      /* Bitwise variants are compared with their reference variant; only
       * the baseline is supported as that reference for now (every decode
       * variant's reference is v1), others are an error. */
      if (c->c.v->parity == HCT_PARITY_BITWISE &&
          strcmp(c->c.v->reference, base->c.v->name) != 0) {
        rc = hct__error(HCT_EUNSUPPORTED, "%s: reference '%s' is not the baseline '%s'",
                        c->c.label, c->c.v->reference, base->c.v->name);
        goto done;
      }
      if ((rc = run_cand(P, i, &hs, &dset, &out, &failed)) != 0) goto done;
      if (failed) continue;
      judge(P, c, &hs, &out, &base_out, base_figs, &vd);
    }
    hct_db_trial_t t;
    trial_init(P, c, &t, "parity", T, pending);
    hct__strlcpy(t.status, vd.status, sizeof t.status);
    t.seed = seed;
    t.figures_json = vd.figures;
    if ((rc = hct__db_trial_add(P->db, &t, NULL)) != 0) goto done;
    if (strcmp(vd.status, "pass") != 0) {
      c->failed[T] = 1;
      char log[512];
      snprintf(log, sizeof log, "T=%d%s seed %llu: '%s' %zu mismatches (first at %zu), %zu unwritten, "
               "rel err %.3g, kl %.3g", T, pending ? " pending" : "", (unsigned long long)seed,
               vd.worst_buf, vd.worst.mismatches, vd.worst.first_mismatch, vd.worst.unwritten,
               vd.worst.rel_err, vd.worst.kl_mean);
      hct_db_fault_t f;
      memset(&f, 0, sizeof f);
      f.keys = P->keys;
      hct__strlcpy(f.op, P->op->name, sizeof f.op);
      hct__strlcpy(f.variant, c->c.v->name, sizeof f.variant);
      hct__strlcpy(f.params, c->c.params, sizeof f.params);
      hct__strlcpy(f.template_hash, c->job.template_hash, sizeof f.template_hash);
      f.tokens = 0;
      hct__strlcpy(f.reason, vd.status, sizeof f.reason);
      f.log = log;
      if ((rc = hct__db_fault_add(P->db, &f)) != 0) goto done;
      /* A wrong answer at one T disqualifies the candidate everywhere. */
      c->dead = 1;
      hct__log(HCT_LOG_WARN, "%s rejected: %s %s", c->c.label, vd.status, log);
    }
  }
  (void)set;
done:
  hct__devset_free(P->gpu, &dset);
  outs_free(&base_out);
  outs_free(&out);
  hct__hostset_free(&hs);
  return rc;
}

/* ---- timing ------------------------------------------------------------- */

typedef struct timer_s {
  probe_t *P;
  int *idx;              /* candidate index per timing slot */
  hct_graph_t **graph;
  hct_event_t *start, *stop;
  int batch;
} timer_t_;

static int sample_cb(void *arg, int slot, double *us) {
  timer_t_ *tm = arg;
  hct_gpu_t *g = tm->P->gpu;
  float ms;
  int rc;
  if ((rc = hct__gpu_event_record(g, tm->start)) != 0) return rc;
  if ((rc = hct__gpu_graph_launch(g, tm->graph[slot])) != 0) return rc;
  if ((rc = hct__gpu_event_record(g, tm->stop)) != 0) return rc;
  if ((rc = hct__gpu_event_elapsed(g, tm->start, tm->stop, &ms)) != 0) return rc;
  *us = (double)ms * 1e3 / tm->batch;
  return 0;
}

static int clock_cb(void *arg, int *mhz) {
  timer_t_ *tm = arg;
  return hct__gpu_sm_clock(tm->P->gpu, mhz);
}

static void timing_progress(void *arg, const hct_timing_progress_t *p) {
  timer_t_ *tm = arg;
  progress(tm->P, "time", p->ncand - p->active, p->ncand, "round %d, %d candidates still timed",
           p->round, p->active);
}

/* Times every candidate that passed at T: each one's batch of launches is
 * captured into a graph over rotating sets of buffers (cold: their total
 * exceeds 4x the L2), and the graphs are replayed in interleaved rounds. */
static int time_T(probe_t *P, int T) {
  int idx[MAX_CANDS], n = 0, rc;
  for (int i = 0; i < P->n; i++)
    if (!P->cands[i].dead && P->cands[i].passed[T]) idx[n++] = i;
  if (n == 0) return 0;

  hct_hostset_t hs;
  if ((rc = hct__hostset_init(&hs, P->op, T, 0)) != 0) return rc;
  if ((rc = P->impl->fill_inputs(&hs, hct__rng_next(&P->rng))) != 0) {
    hct__hostset_free(&hs);
    return rc;
  }
  size_t set_bytes = 0;
  for (int i = 0; i < hs.n; i++)
    if (hs.bufs[i].data) set_bytes += hs.bufs[i].elems * hct__dtype_size(hs.bufs[i].spec->dtype);
  int nsets = 1;
  if (P->op->timing_cold)
    nsets = (int)HCT_MIN(64, HCT_MAX(2, (4 * P->dev.l2_bytes + (int64_t)set_bytes - 1) / (int64_t)set_bytes + 1));
  int batch = P->op->batch;

  hct_devset_t *sets = calloc((size_t)nsets, sizeof *sets);
  hct_scratchset_t *scr = calloc((size_t)n, sizeof *scr);
  hct_graph_t **graphs = calloc((size_t)n, sizeof *graphs);
  hct_timing_res_t *res = calloc((size_t)n, sizeof *res);
  int have_res = 0;
  timer_t_ tm = {P, idx, graphs, NULL, NULL, batch};
  if (!sets || !scr || !graphs || !res) {
    rc = hct__error(HCT_ENOMEM, "out of memory");
    goto done;
  }
  for (int s = 0; s < nsets; s++)
    if ((rc = hct__devset_alloc(P->gpu, &hs, &sets[s])) != 0 ||
        (rc = hct__devset_upload(P->gpu, &hs, &sets[s])) != 0)
      goto done;
  for (int k = 0; k < n; k++) {
    const hct_cand_t *c = &P->cands[idx[k]].c;
    if ((rc = hct__scratch_alloc(P->gpu, c, T, &scr[k])) != 0) goto done;
    if ((rc = hct__gpu_capture_begin(P->gpu)) != 0) goto done;
    for (int b = 0; b < batch && rc == 0; b++)
      rc = hct__run_enqueue(P->gpu, c, &hs, &sets[b % nsets], &scr[k]);
    hct_graph_t *gr = NULL;
    int rc2 = hct__gpu_capture_end(P->gpu, &gr);
    if (rc == 0) rc = rc2;
    if (rc != 0) goto done;
    graphs[k] = gr;
  }
  if ((rc = hct__gpu_event_create(P->gpu, &tm.start)) != 0 ||
      (rc = hct__gpu_event_create(P->gpu, &tm.stop)) != 0)
    goto done;

  hct_timing_opts_t to;
  memset(&to, 0, sizeof to);
  to.sample = sample_cb;
  to.progress = timing_progress;
  to.arg = &tm;
  to.seed = hct__rng_next(&P->rng);
  /* The baseline is the incumbent every challenger is compared with: it
   * stays timed to a tight interval however slow it is. */
  uint8_t no_prune[MAX_CANDS] = {0};
  for (int k = 0; k < n; k++) no_prune[k] = idx[k] == P->baseline;
  to.no_prune = no_prune;
  to.max_seconds = 0.5;
  to.max_rounds = 60;
  if (P->o->sample_factor > 1) {
    to.min_samples = 10 * P->o->sample_factor;
    to.max_rounds *= P->o->sample_factor;
    to.max_seconds *= P->o->sample_factor;
  }
  to.max_clock_mhz = P->dev.clock_khz / 1000;
  /* Throttling checks need the SM clock: without NVML they are off, and
   * each trial records clock_checked = 0. */
  int mhz;
  if (to.max_clock_mhz > 0 && hct__gpu_sm_clock(P->gpu, &mhz) == 0) to.sm_clock = clock_cb;
  else progress(P, "time", 0, n, "SM clock unreadable (no NVML): throttled samples cannot be discarded");
  progress(P, "time", 0, n, "T=%d: %d candidates, %d launches per graph over %d buffer sets (%.0f MB)",
           T, n, batch, nsets, (double)set_bytes * nsets / 1e6);
  rc = hct__timing_run(n, &to, res);
  if (rc < 0) goto done;
  have_res = 1;
  rc = 0;
  progress_end(P);

  for (int k = 0; k < n; k++) {
    cand_t *c = &P->cands[idx[k]];
    const hct_timing_res_t *r = &res[k];
    hct_db_trial_t t;
    trial_init(P, c, &t, "timing", T, 0);
    if (r->err != 0) {
      char figs[64];
      snprintf(figs, sizeof figs, "{\"error_code\":\"%s\"}", hct_err_name(r->err));
      hct__strlcpy(t.status, is_sticky(r->err) ? "fault" : "launch", sizeof t.status);
      t.figures_json = figs;
      t.log = r->errmsg;
      if ((rc = hct__db_trial_add(P->db, &t, NULL)) != 0) goto done;
      if (is_sticky(r->err)) {
        rc = hct__error(r->err, "%s: timing at T=%d failed: %s", c->c.label, T, r->errmsg);
        goto done;
      }
      continue;
    }
    c->timing[T] = r->s;
    if (P->o->on_timed) P->o->on_timed(P->o->on_timed_arg, T, c->c.v->name, c->c.params, &r->s, r->pruned);
    c->timed[T] = !r->pruned;
    hct__strlcpy(t.status, r->pruned ? "pruned" : "pass", sizeof t.status);
    t.samples = r->s.n;
    t.median_us = r->s.median;
    t.min_us = r->s.min;
    t.p10_us = r->s.p10;
    t.p90_us = r->s.p90;
    t.ci_lo_us = r->s.ci_lo;
    t.ci_hi_us = r->s.ci_hi;
    t.converged = r->converged;
    t.throttled = r->throttled;
    t.cold = P->op->timing_cold;
    char figs[320];
    snprintf(figs, sizeof figs, "{\"batch\":%d,\"sets\":%d,\"set_bytes\":%zu,\"rounds\":%d,"
             "\"clock_checked\":%d,\"rel_ci\":%.4f,\"seconds\":%.3f,\"max\":%.3f}",
             batch, nsets, set_bytes, r->rounds, r->clock_checked, r->s.rel_ci, r->seconds, r->s.max);
    t.figures_json = figs;
    if ((rc = hct__db_trial_add(P->db, &t, NULL)) != 0) goto done;
  }
done:
  if (tm.start) hct__gpu_event_destroy(P->gpu, tm.start);
  if (tm.stop) hct__gpu_event_destroy(P->gpu, tm.stop);
  for (int k = 0; graphs && k < n; k++)
    if (graphs[k]) hct__gpu_graph_destroy(P->gpu, graphs[k]);
  for (int k = 0; scr && k < n; k++) hct__scratch_free(P->gpu, &scr[k]);
  for (int s = 0; sets && s < nsets; s++) hct__devset_free(P->gpu, &sets[s]);
  if (have_res) hct__timing_res_free(res, n);
  free(sets);
  free(scr);
  free(graphs);
  free(res);
  hct__hostset_free(&hs);
  return rc;
}

/* ---- deciding ------------------------------------------------------------ */

/* The winner at T among candidates whose class is allowed: the fastest one
 * that beats the baseline significantly, else the baseline. */
static int winner_at(probe_t *P, int T, int allow_kl) {
  const cand_t *base = &P->cands[P->baseline];
  if (!base->timed[T]) return -1;
  int best = P->baseline;
  for (int i = 0; i < P->n; i++) {
    const cand_t *c = &P->cands[i];
    if (i == P->baseline || c->dead || !c->timed[T]) continue;
    if (c->c.v->parity == HCT_PARITY_KL && !allow_kl) continue;
    double margin = P->o->min_margin > 0 ? P->o->min_margin : 0.02;
    if (!hct__significantly_faster(&c->timing[T], &base->timing[T], margin)) continue;
    if (c->timing[T].median < P->cands[best].timing[T].median) best = i;
  }
  return best;
}

static int decide(probe_t *P, json_t *result) {
  static const char *const classes[] = {"bitwise", "kl"};
  int rc = 0;
  json_t *jdec = json_array();
  for (int k = 0; k < 2; k++) {
    int win[MAX_T + 1];
    for (int T = 0; T <= MAX_T; T++) win[T] = P->tokens[T] ? winner_at(P, T, k == 1) : -1;
    hct_db_decision_t *d = calloc(MAX_T, sizeof *d);
    int nd = 0;
    for (int T = 1; T <= MAX_T; T++) {
      if (win[T] < 0) continue;
      int end = T;
      while (end + 1 <= MAX_T && win[end + 1] == win[T]) end++;
      const cand_t *c = &P->cands[win[T]];
      const cand_t *b = &P->cands[P->baseline];
      hct_db_decision_t *x = &d[nd++];
      x->keys = P->keys;
      hct__strlcpy(x->op, P->op->name, sizeof x->op);
      hct__strlcpy(x->parity, classes[k], sizeof x->parity);
      x->tmin = T;
      x->tmax = end;
      hct__strlcpy(x->variant, c->c.v->name, sizeof x->variant);
      hct__strlcpy(x->params, c->c.params, sizeof x->params);
      hct__strlcpy(x->variant_class, hct__parity_name(c->c.v->parity), sizeof x->variant_class);
      hct__strlcpy(x->template_hash, c->job.template_hash, sizeof x->template_hash);
      hct__strlcpy(x->binary_key, c->job.key, sizeof x->binary_key);
      hct__strlcpy(x->source, "probe", sizeof x->source);
      x->median_us = c->timing[T].median;
      x->baseline_us = b->timing[T].median;
      x->ci_lo_us = c->timing[T].ci_lo;
      x->ci_hi_us = c->timing[T].ci_hi;
      x->samples = c->timing[T].n;
      x->decided_at = hct__unix_time();
      hct__strlcpy(x->run_id, P->run_id, sizeof x->run_id);
      size_t off = (size_t)snprintf(x->evidence_json, sizeof x->evidence_json, "{\"per_T\":[");
      for (int t = T; t <= end && off < sizeof x->evidence_json - 80; t++)
        off += (size_t)snprintf(x->evidence_json + off, sizeof x->evidence_json - off,
                                "%s{\"T\":%d,\"us\":%.3f,\"baseline_us\":%.3f,\"ci\":[%.3f,%.3f]}",
                                t > T ? "," : "", t, c->timing[t].median, b->timing[t].median,
                                c->timing[t].ci_lo, c->timing[t].ci_hi);
      snprintf(x->evidence_json + off, sizeof x->evidence_json - off, "]}");
      json_array_append_new(jdec, json_pack("{s:s, s:i, s:i, s:s, s:s, s:s, s:f, s:f}", "parity",
                                            classes[k], "tmin", T, "tmax", end, "variant",
                                            x->variant, "params", x->params, "class",
                                            x->variant_class, "median_us", x->median_us,
                                            "baseline_us", x->baseline_us));
      T = end;
    }
    if (nd > 0 && !P->o->no_decide) rc = hct__db_decisions_replace(P->db, d, nd);
    free(d);
    if (rc != 0) break;
  }
  json_object_set_new(result, "decisions", jdec);
  return rc;
}

/* ---- output ---------------------------------------------------------------- */

static void print_table(probe_t *P) {
  const cand_t *b = &P->cands[P->baseline];
  printf("%s on %s (%s, %s), cold, %d launches per graph\n", P->op->name, P->dev.name,
         P->dev.uuid, P->dev.arch, P->op->batch);
  printf("%4s  %-34s %10s %10s %8s  %-34s %10s %8s\n", "T", "bitwise winner", "us", "baseline",
         "speedup", "kl winner", "us", "speedup");
  for (int T = 1; T <= MAX_T; T++) {
    if (!P->tokens[T]) continue;
    int wb = winner_at(P, T, 0), wk = winner_at(P, T, 1);
    if (wb < 0) {
      printf("%4d  %-34s\n", T, "(baseline not timed)");
      continue;
    }
    const cand_t *cb = &P->cands[wb], *ck = &P->cands[wk];
    double base = b->timing[T].median;
    printf("%4d  %-34.34s %10.2f %10.2f %7.2fx  %-34.34s %10.2f %7.2fx\n", T, cb->c.label,
           cb->timing[T].median, base, base / cb->timing[T].median, ck->c.label,
           ck->timing[T].median, base / ck->timing[T].median);
  }
}

/* ---- the probe ------------------------------------------------------------- */

static int device_fingerprint_json(const hct_device_t *d, char **out) {
  json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:i, s:s, s:s}",
                        "vendor", d->vendor, "name", d->name, "uuid", d->uuid, "pci_bus_id",
                        d->pci_bus_id, "arch", d->arch, "sm_count", d->sm_count, "warp_size",
                        d->warp_size, "l2_bytes", (json_int_t)d->l2_bytes, "smem_optin",
                        (json_int_t)d->smem_optin, "mem_bytes", (json_int_t)d->mem_bytes,
                        "clock_khz", d->clock_khz, "driver_version", d->driver_version,
                        "compiler_version", d->compiler_version);
  *out = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(j);
  return *out ? 0 : hct__error(HCT_ENOMEM, "out of memory");
}

int hct__probe(const hct_probe_opts_t *o) {
  probe_t P;
  memset(&P, 0, sizeof P);
  P.o = o;
  P.tty = isatty(2);
  P.t0 = hct__now_ns();
  int rc;
  char kdir[1024], dbpath[1024];
  const char *opname = o->op ? o->op : "hc_read";

  if (o->kernels_dir) hct__strlcpy(kdir, o->kernels_dir, sizeof kdir);
  else if ((rc = hct__kernels_dir(kdir, sizeof kdir)) != 0) return rc;
  if ((rc = hct__manifest_load(kdir, opname, &P.op)) != 0) return rc;
  if ((P.impl = hct__op_impl(P.op->name)) == NULL) {
    rc = hct__error(HCT_ENOENT, "op '%s': hctune has no host implementation for it", P.op->name);
    goto out;
  }
  int any = 0;
  for (int T = 1; T <= MAX_T; T++) any |= o->tokens[T];
  for (int T = 1; T <= MAX_T; T++) {
    P.tokens[T] = any ? o->tokens[T] : (T >= P.op->tmin && T <= P.op->tmax);
    if (P.tokens[T] && (T < P.op->tmin || T > P.op->tmax)) {
      rc = hct__error(HCT_ERANGE, "token count %d: op '%s' supports %d..%d", T, P.op->name,
                      P.op->tmin, P.op->tmax);
      goto out;
    }
  }
  if ((rc = hct__device_find(o->device ? o->device : "0", &P.dev)) != 0) goto out;

  if (o->db_path) hct__strlcpy(dbpath, o->db_path, sizeof dbpath);
  else if ((rc = hct__default_db_path(dbpath, sizeof dbpath, 1)) != 0) goto out;
  if ((rc = hct__db_open(dbpath, 0, &P.db)) != 0) goto out;

  hct__hostname(P.keys.host, sizeof P.keys.host);
  hct__strlcpy(P.keys.uuid, P.dev.uuid, sizeof P.keys.uuid);
  hct__device_model_key(&P.dev, P.keys.model_key, sizeof P.keys.model_key);
  hct__strlcpy(P.keys.driver_version, P.dev.driver_version, sizeof P.keys.driver_version);
  hct__strlcpy(P.keys.compiler_version, P.dev.compiler_version, sizeof P.keys.compiler_version);
  hct__strlcpy(P.keys.hctune_version, HCT_VERSION_STRING, sizeof P.keys.hctune_version);
  char *fp = NULL;
  if ((rc = device_fingerprint_json(&P.dev, &fp)) != 0) goto out;
  rc = hct__db_device_upsert(P.db, &P.keys, P.dev.name, P.dev.arch, fp);
  free(fp);
  if (rc != 0) goto out;
  hct__rng_seed(&P.rng, hct__now_ns() ^ ((uint64_t)getpid() << 32));

  if ((rc = build_candidates(&P)) != 0) goto out;
  char args[128];
  snprintf(args, sizeof args, "{\"candidates\":%d}", P.n);
  if ((rc = hct__db_run_begin(P.db, &P.keys, P.op->name, args, P.run_id)) != 0) goto out;

  /* Quarantined candidates are not tried again unless asked to. */
  if ((rc = compile_candidates(&P)) != 0) goto fail;
  if (!o->retry_quarantined) {
    for (int i = 0; i < P.n; i++) {
      cand_t *c = &P.cands[i];
      if (c->dead || i == P.baseline) continue;
      int q = hct__db_fault_check(P.db, &P.keys, P.op->name, c->c.v->name, c->c.params,
                                  c->job.template_hash, 1);
      if (q < 0) { rc = q; goto fail; }
      if (q) {
        c->dead = 1;
        progress(&P, "skip", 0, 0, "%s is quarantined on this card (--retry-quarantined tries it)", c->c.label);
      }
    }
  }

  if ((rc = hct__gpu_open(&P.dev, &P.gpu)) != 0) goto fail;
  for (int i = 0; i < P.n; i++) {
    cand_t *c = &P.cands[i];
    if (c->dead) continue;
    hct_cand_t loaded;
    rc = hct__run_load(P.gpu, P.op, c->c.v, &c->c.point, c->job.image, c->job.image_size, &loaded);
    if (rc != 0) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", hct_last_error());
      if ((rc = record_failure(&P, c, "parity", "launch", 0, 0, 0, NULL, msg)) != 0) goto fail;
      c->dead = 1;
      if (i == P.baseline) { rc = hct__error(HCT_ELAUNCH, "baseline %s: %s", c->c.label, msg); goto fail; }
      continue;
    }
    c->c = loaded;
    c->loaded = 1;
  }

  int sets = o->check_sets > 0 ? o->check_sets : 2;
  int nT = 0, doneT = 0;
  for (int T = 1; T <= MAX_T; T++) nT += P.tokens[T];
  for (int T = 1; T <= MAX_T; T++) {
    if (!P.tokens[T]) continue;
    progress(&P, "check", doneT, nT, "T=%d: parity of every candidate, %d input sets with and without pending", T, sets);
    for (int pending = 0; pending <= 1; pending++)
      for (int s = 0; s < sets; s++)
        if ((rc = check_T(&P, T, pending, s)) != 0) goto fail;
    for (int i = 0; i < P.n; i++) {
      char why[256];
      cand_t *c = &P.cands[i];
      c->passed[T] = !c->dead && !c->failed[T] && hct__run_supports(&c->c, &P.dev, T, why, sizeof why);
    }
    if ((rc = time_T(&P, T)) != 0) goto fail;
    doneT++;
  }
  progress_end(&P);

  json_t *result = json_pack("{s:s, s:s, s:s, s:s, s:s, s:f}", "event", "result", "op", P.op->name,
                             "device", P.dev.uuid, "name", P.dev.name, "run_id", P.run_id,
                             "wall_s", (double)(hct__now_ns() - P.t0) / 1e9);
  rc = decide(&P, result);
  if (rc == 0) rc = hct__db_run_end(P.db, P.run_id, "done");
  if (o->json) {
    char *s = json_dumps(result, JSON_COMPACT);
    if (s) printf("%s\n", s);
    free(s);
  } else if (rc == 0 && !o->no_table) {
    print_table(&P);
    printf("probe took %.1f s; results in %s\n", (double)(hct__now_ns() - P.t0) / 1e9, dbpath);
  }
  json_decref(result);
  goto out;

fail:
  progress_end(&P);
  if (P.db && P.run_id[0]) {
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", hct_last_error());
    hct__db_run_end(P.db, P.run_id, "failed");
    hct__error(rc, "%s", saved);
  }
out:
  for (int i = 0; i < P.n; i++) {
    if (P.cands[i].loaded) hct__run_unload(P.gpu, &P.cands[i].c);
    hct__compile_job_clear(&P.cands[i].job);
  }
  free(P.cands);
  if (P.gpu) hct__gpu_close(P.gpu);
  if (P.db) hct__db_close(P.db);
  if (P.op) hct__manifest_free(P.op);
  return rc;
}
