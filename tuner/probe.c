/*
 * probe.c: the probe: for one op on one card, compile every candidate
 * (variant x parameter point), check each one's outputs at every token
 * count with and without the optional inputs, time the ones that pass, and
 * record every trial as it completes and the winners at the end.
 *
 * The path of one probe:
 *   manifest -> candidates -> compile (cache first, thread pool)
 *   -> per T: draw inputs (seeded, by the manifest's rules), the float64
 *      reference (its template, run in the worker), baseline checked
 *      against it, every candidate checked against the baseline's bits
 *      (bitwise) or the reference's error (kl) -> trials
 *   -> per T: the passing candidates timed cold, interleaved -> trials
 *   -> per class: the winner per T, merged into ranges -> decisions.
 *
 * Loop thread only.
 */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "tuner.h"

#define MAX_CANDS 256

/* Per token count arrays are indexed like the probe's token set (k, where
 * T = P->tokens.t[k]), not by T: the set is short, its counts may be large. */
typedef struct cand_s {
  hct_compile_job_t job;
  hct_cand_t c;
  int loaded;            /* loaded in the worker */
  int dead;              /* out for every T: compile, load or fault */
  uint8_t passed[HCT_MAX_TOKEN_LIST];
  uint8_t failed[HCT_MAX_TOKEN_LIST];
  hct_summary_t timing[HCT_MAX_TOKEN_LIST];
  uint8_t timed[HCT_MAX_TOKEN_LIST];
  uint8_t verified[HCT_MAX_TOKEN_LIST]; /* its timed launches' outputs checked */
  uint8_t in_timing[HCT_MAX_TOKEN_LIST]; /* in the deciding timing just made */
  uint8_t searched_out[HCT_MAX_TOKEN_LIST]; /* its family's search left it
                                              out of the deciding timing */
  uint8_t checked[HCT_MAX_TOKEN_LIST]; /* its checks ran at this count (above
                                          checks.all_points_up_to only the
                                          search's finalists are checked) */
  int rank_k;            /* its place in its family's search ranking at the
                            count being probed (search_T), -1: none */
  hct_softkey_t sk;      /* what shaped its binary and figures */
  int ref;               /* the candidate whose outputs it is checked
                            against: the reference variant's default point
                            for a bitwise one, the baseline for kl (whose
                            error is the yardstick); -1 for the baseline */
  int depth;             /* steps from the baseline along ref: checked in
                            this order, so a reference is judged first */
  int is_ref;            /* another candidate's bits must equal its own */
  int ref_only;          /* here only as that reference (--variants or
                            --points left it out): checked and timed, never
                            decided for */
  hct_parity_t competes; /* hct__variant_competes: the decisions it is in */
} cand_t;

typedef struct probe_s {
  const hct_probe_opts_t *o;
  hct_op_t *op;
  hct_compile_job_t ref_job; /* the op's float64 reference, compiled with
                                the candidates, run in the worker */
  hct_device_t dev;
  hct_db_t *db;
  hct_db_keys_t keys;
  char run_id[33];
  hct_worker_t *w;       /* every GPU call goes through it: fault isolation */
  int fresh_worker;      /* restarted: its next check draws the inputs again */
  int producer_warned;   /* the worker said the producer check cannot run */
  char kdir[1024];
  char dbpath[1024];
  cand_t *cands;
  int n;
  int baseline;          /* index of the baseline candidate */
  hct_tokens_t tokens;   /* the token counts probed */
  hct_timing_res_t *pick; /* MAX_CANDS: the timings hct__pick_winner sees */
  int *pick_of;          /* MAX_CANDS: the candidate of each */
  int tty;
  uint64_t t0;
  hct_rng_t rng;
} probe_t;

/*
 * Ctrl-C (or SIGTERM) during a probe: the probe stops at the next
 * candidate, marks its run "interrupted" and keeps every trial recorded so
 * far; a second one ends the process at once (the database stays sound:
 * every trial is its own transaction, and the worker dies with us).
 */
static volatile sig_atomic_t probe_interrupted;

static void on_interrupt(int sig) {
  if (probe_interrupted) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  probe_interrupted = 1;
}

static int check_interrupt(const probe_t *P) {
  if (!probe_interrupted) return 0;
  return hct__error(HCT_EINTERRUPTED, "probe interrupted: the trials recorded so far are kept in '%s'",
                    P->dbpath);
}

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
  hct__strlcpy(t->software_key, c->sk.key, sizeof t->software_key);
  hct__strlcpy(t->software_json, c->sk.json, sizeof t->software_json);
  t->tokens = T;
  t->pending = pending;
}

/* A timing trial from the worker's result for one candidate: the fault's
 * reason and message when it failed, else `status` (pass, pruned) and the
 * summary of its samples.  The figures are the caller's (a search round's
 * or a deciding timing's). */
static void trial_timed(hct_db_trial_t *t, const hct_timing_res_t *r, const char *status) {
  if (r->err != 0) {
    const char *reason = hct__fault_reason(r->err);
    hct__strlcpy(t->status, reason ? reason : "error", sizeof t->status);
    t->log = r->errmsg;
    return;
  }
  hct__strlcpy(t->status, status, sizeof t->status);
  t->samples = r->s.n;
  t->median_us = r->s.median;
  t->min_us = r->s.min;
  t->p10_us = r->s.p10;
  t->p90_us = r->s.p90;
  t->ci_lo_us = r->s.ci_lo;
  t->ci_hi_us = r->s.ci_hi;
  t->converged = r->converged;
  t->throttled = r->throttled;
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
  hct_qcand_t q = {&P->keys, P->op->name, c->c.v->name, c->c.params, c->job.template_hash};
  return hct__quarantine_add(P->db, &q, T, reason, log);
}

/* Tells the caller (hctune verify-decisions, bench) that a candidate is
 * out at T: which check caught it and why. */
static void rejected(probe_t *P, const cand_t *c, int T, const char *check, const char *why) {
  if (P->o->on_rejected)
    P->o->on_rejected(P->o->on_rejected_arg, T, c->c.v->name, c->c.params, check, why);
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

static int point_selected(const hct_probe_opts_t *o, const char *label) {
  if (o->only_points == NULL) return 1;
  size_t n = strlen(label);
  for (const char *p = o->only_points; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, label, n) == 0) return 1;
    p += len + (e != NULL);
  }
  return 0;
}

/* The candidate of variant v at point pt, or -1. */
static int cand_of(const probe_t *P, const hct_variant_t *v, const hct_point_t *pt) {
  for (int i = 0; i < P->n; i++) {
    const cand_t *c = &P->cands[i];
    int same = c->c.v == v;
    for (int p = 0; same && p < v->n_params; p++) same = c->c.point.v[p] == pt->v[p];
    if (same) return i;
  }
  return -1;
}

/* Fills the next candidate slot with variant v at point pt (P->n is not
 * advanced: the caller decides whether it stays). */
static cand_t *cand_fill(probe_t *P, const hct_variant_t *v, const hct_point_t *pt) {
  cand_t *c = &P->cands[P->n];
  memset(c, 0, sizeof *c);
  c->c.op = P->op;
  c->c.v = v;
  c->c.point = *pt;
  hct__point_json(v, pt, c->c.params, sizeof c->c.params);
  snprintf(c->c.label, sizeof c->c.label, "%s %s", v->name, c->c.params);
  c->job.backend = P->dev.backend;
  hct__strlcpy(c->job.arch, P->dev.arch, sizeof c->job.arch);
  c->job.op = P->op;
  c->job.variant = v;
  c->job.point = *pt;
  return c;
}

/*
 * What each candidate is checked against (cand_t.ref) and how deep it sits
 * in the chain from the baseline.  A bitwise variant whose reference is
 * not the baseline is checked against the reference variant's default
 * point (hct__point_first), which joins the candidates (ref_only) when
 * --variants or --points left it out; a variant whose reference cannot run
 * on this card cannot be checked at all, and is skipped saying so.
 */
static int resolve_references(probe_t *P) {
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    c->competes = hct__variant_competes(P->op, c->c.v);
    c->ref = i == P->baseline ? -1 : P->baseline;
    const hct_variant_t *rv = hct__variant_reference(P->op, c->c.v);
    if (i == P->baseline || rv == NULL || rv->parity == HCT_PARITY_BASELINE) continue;
    hct_point_t pt;
    hct__point_first(rv, &pt);
    int r = cand_of(P, rv, &pt);
    char why[256];
    if (r < 0 && !hct__variant_fits(rv, P->dev.backend, P->dev.arch_num, P->dev.warp_size, why, sizeof why)) {
      progress(P, "skip", 0, 0, "%s: its reference %s cannot run here: %s", c->c.label, rv->name, why);
      c->dead = 1;
      continue;
    }
    if (r < 0) {
      if (P->n == MAX_CANDS) return hct__error(HCT_ERANGE, "op '%s': more than %d candidates", P->op->name, MAX_CANDS);
      cand_t *x = cand_fill(P, rv, &pt);
      x->ref_only = 1;
      r = P->n++;
      c = &P->cands[i];
    }
    c->ref = r;
    P->cands[r].is_ref = 1;
  }
  /* Depths: the manifest loader refuses a cycle, so n rounds settle them. */
  for (int round = 0; round < P->n; round++)
    for (int i = 0; i < P->n; i++) {
      cand_t *c = &P->cands[i];
      c->depth = c->ref < 0 ? 0 : P->cands[c->ref].depth + 1;
    }
  return 0;
}

/* Builds the candidate list: every point of every variant that fits the
 * card and supports at least one of the token counts asked for, and the
 * references they are checked against (resolve_references). */
static int build_candidates(probe_t *P) {
  P->cands = calloc(MAX_CANDS, sizeof *P->cands);
  if (P->cands == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  P->baseline = -1;
  for (int vi = 0; vi < P->op->n_variants; vi++) {
    const hct_variant_t *v = &P->op->variants[vi];
    char why[256];
    int is_base = v->parity == HCT_PARITY_BASELINE;
    if (!is_base && !variant_selected(P->o, v->name)) continue;
    if (!hct__variant_fits(v, P->dev.backend, P->dev.arch_num, P->dev.warp_size, why, sizeof why)) {
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
      cand_t *c = cand_fill(P, v, &pts[p]);
      if (!is_base && !point_selected(P->o, c->c.label)) continue;
      int any = 0;
      for (int k = 0; k < P->tokens.n; k++)
        if (hct__run_supports(&c->c, &P->dev, P->tokens.t[k], why, sizeof why)) any = 1;
      if (!any) continue;
      /* The baseline is one candidate: its first point that fits. */
      if (is_base && P->baseline >= 0) continue;
      if (is_base) P->baseline = P->n;
      P->n++;
    }
  }
  if (P->baseline < 0)
    return hct__error(HCT_EUNSUPPORTED, "op '%s': its baseline supports none of the token counts asked for",
                      P->op->name);
  return resolve_references(P);
}

static void compile_progress(void *arg, const hct_compile_job_t *job, int done, int total) {
  probe_t *P = arg;
  progress(P, "compile", done, total, "%s %s%s", job->variant->name,
           job->cache_hit ? "(cached)" : "", job->status ? " FAILED" : "");
}

static int compile_candidates(probe_t *P) {
  /* One more job: the reference, compiled with them on the thread pool. */
  hct_compile_job_t *jobs = calloc(MAX_CANDS + 1, sizeof *jobs);
  int *which = calloc(MAX_CANDS, sizeof *which);
  int nj = 0;
  if (jobs == NULL || which == NULL) {
    free(jobs);
    free(which);
    return hct__error(HCT_ENOMEM, "out of memory");
  }
  for (int i = 0; i < P->n; i++)
    if (!P->cands[i].dead) {
      which[nj] = i;
      jobs[nj++] = P->cands[i].job;
    }
  jobs[nj] = P->ref_job;
  hct_binary_store_t store;
  hct__db_binary_store(P->db, &store);
  uint64_t t0 = hct__now_ns();
  int rc = hct__compile_all(jobs, nj + 1, &store, compile_progress, P);
  double wall = (double)(hct__now_ns() - t0) / 1e6;
  int hits = jobs[nj].cache_hit, failed = 0;
  double cpu_ms = jobs[nj].cache_hit ? 0 : jobs[nj].compile_ms;
  P->ref_job = jobs[nj];
  for (int k = 0; k < nj; k++) {
    P->cands[which[k]].job = jobs[k];
    hits += jobs[k].cache_hit;
    cpu_ms += jobs[k].cache_hit ? 0 : jobs[k].compile_ms;
  }
  free(jobs);
  free(which);
  if (rc != 0) return rc;
  progress_end(P);
  /* Nothing can be checked without the reference. */
  if (P->ref_job.status != 0)
    return hct__error(P->ref_job.status, "op '%s': reference '%s': %s", P->op->name,
                      P->op->reference.v.template_file, P->ref_job.error);
  /* The software key of each binary, before any trial is recorded. */
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (c->job.template_hash[0] && hct__softkey_now(&c->job, P->dev.driver_version, &c->sk) != 0)
      return hct__error(HCT_ENOMEM, "%s: software key: %s", c->c.label, hct_last_error());
  }
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (c->dead || c->job.status == 0) continue;
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
           "\"wall_ms\":%.1f,\"compile_ms\":%.1f}\n", nj + 1, hits, failed, wall, cpu_ms);
    fflush(stdout);
  } else if (!P->o->quiet) {
    fprintf(stderr, "hctune: compiled %d binaries in %.2f s (%d from the cache, %d failed; the op's reference among them)\n",
            nj + 1, wall / 1e3, hits, failed);
  }
  return 0;
}

/* ---- checking ------------------------------------------------------------ */

/* Errors that are no candidate's fault (database, memory, usage): they end
 * the probe instead of quarantining anything. */
static int fatal_error(int rc) { return hct__fault_reason(rc) == NULL; }

static hct_qcand_t qcand(probe_t *P, const cand_t *c) {
  hct_qcand_t q = {&P->keys, P->op->name, c->c.v->name, c->c.params, c->job.template_hash};
  return q;
}

/* Called for each setup request that a restarted worker could not replay:
 * that candidate cannot be loaded any more. */
static void dropped_cb(void *arg, const char *key, int code, const char *msg) {
  probe_t *P = arg;
  int id;
  /* Without its reference nothing more can be checked: the next check
   * says so and ends the probe. */
  if (strncmp(key, "reference:", 10) == 0)
    hct__log(HCT_LOG_WARN, "the op's reference could not be loaded again after a worker restart: %s", msg);
  if (sscanf(key, "cand%d", &id) != 1 || id < 0 || id >= P->n) return;
  cand_t *c = &P->cands[id];
  c->dead = 1;
  c->loaded = 0;
  const char *reason = hct__fault_reason(code);
  if (reason == NULL) return;
  record_failure(P, c, "parity", reason, 0, 0, 0, NULL, msg);
  hct__log(HCT_LOG_WARN, "%s dropped after a worker restart: %s", c->c.label, msg);
}

/*
 * A candidate's call failed with rc: record the trial and quarantine it
 * (a grid-barrier timeout at T and up, anything else everywhere), and
 * bring a fresh worker up when this one died.  Returns 0 to go on, or the
 * error that ends the probe.
 */
static int candidate_failed(probe_t *P, int i, const char *kind, int rc, int T, int pending,
                            uint64_t seed) {
  cand_t *c = &P->cands[i];
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", hct_last_error());
  /* A worker that died because the user interrupted us is no fault of the
   * candidate it was running. */
  if (probe_interrupted) return check_interrupt(P);
  if (fatal_error(rc)) return hct__error(rc, "%s", msg);
  const char *reason = hct__fault_reason(rc);
  char figs[128];
  snprintf(figs, sizeof figs, "{\"error_code\":\"%s\"}", hct_err_name(rc));
  int r = record_failure(P, c, kind, reason, T, pending, seed, figs, msg);
  if (r != 0) return r;
  if (strcmp(reason, "timeout") == 0) {
    for (int k = 0; k < P->tokens.n; k++)
      if (P->tokens.t[k] >= T) c->failed[k] = 1;
  } else {
    c->dead = 1;
  }
  progress(P, "fault", 0, 0, "%s at T=%d: %s: %s", c->c.label, T, reason, msg);
  rejected(P, c, T, kind, msg);
  if (i == P->baseline && strcmp(reason, "timeout") != 0)
    return hct__error(rc, "baseline %s at T=%d: %s (nothing can be checked without it)", c->c.label, T, msg);
  if (!hct__worker_alive(P->w)) {
    /* The fault ended the worker (a sticky error, a hang, a crash): start a
     * fresh one with every candidate still in play loaded again. */
    char key[16];
    snprintf(key, sizeof key, "cand%d", i);
    if (c->dead) hct__worker_forget(P->w, key);
    int rr = hct__worker_recover(P->w, dropped_cb, P);
    if (rr != 0) return rr;
    P->fresh_worker = 1;
    if (P->cands[P->baseline].dead)
      return hct__error(HCT_EWORKER, "baseline could not be loaded again after a worker restart");
  } else if (c->dead) {
    hct__worker_unload(P->w, i);
  }
  return 0;
}

/* The worst figures of a candidate over the outputs of one run. */
typedef struct verdict_s {
  const char *status;    /* "pass", or the reason: "parity", "unwritten",
                            "repeat", "producer", "nondeterminism", "timed" */
  const char *check;     /* the check that caught it (the trial's kind):
                            "parity", "repeat", "producer", "determinism",
                            "timed" */
  hct_parity_figs_t worst;
  char worst_buf[32];
  char figures[2048];
} verdict_t;

/* The figures of one run of a check, as judge reads them. */
typedef struct figview_s {
  int n;
  const char (*name)[32];
  const hct_parity_figs_t *figs, *ref_figs;
  int has_ref;
  int run;               /* its place in the check's allocation (worker.h) */
  double run_ms;
} figview_t;

static figview_t view_first(const hct_worker_check_t *ck) {
  figview_t v = {ck->n, (const char (*)[32])ck->name, ck->figs, ck->ref_figs, ck->has_ref, 0, ck->run_ms};
  return v;
}

static figview_t view_more(const hct_worker_check_t *ck, int j) {
  figview_t v = {ck->n, (const char (*)[32])ck->name, ck->more[j].figs, ck->more[j].ref_figs,
                 ck->has_ref, ck->more[j].run, 0};
  return v;
}

/*
 * Judges one check's figures: every output element written and finite,
 * 16-bit images exact, and bit for bit equal to the reference (class
 * bitwise) or within the op's kl bounds relative to the baseline's figures
 * on the same inputs (class kl).  The baseline itself is judged against the
 * float64 reference (judge_baseline).
 */
static void judge(probe_t *P, const cand_t *c, const figview_t *ck, verdict_t *vd) {
  memset(vd, 0, sizeof *vd);
  vd->status = "pass";
  vd->check = "parity";
  size_t off = (size_t)snprintf(vd->figures, sizeof vd->figures, "{");
  for (int j = 0; j < ck->n; j++) {
    const hct_parity_figs_t *f = &ck->figs[j];
    const hct_buffer_t *b = hct__buffer_find(P->op, ck->name[j]);
    const char *st = "pass";
    if (f->unwritten > 0) st = "unwritten";
    else if (f->nonfinite > 0 || f->image_mismatches > 0) st = "parity";
    else if (c->c.v->parity == HCT_PARITY_BITWISE && f->mismatches > 0) st = "parity";
    else if (c->c.v->parity == HCT_PARITY_KL && ck->has_ref && b != NULL) {
      const hct_parity_figs_t *bf = &ck->ref_figs[j];
      double kl_limit = fmax(P->op->kl_mean_factor * bf->kl_mean, P->op->kl_abs_floor);
      double err_limit = P->op->maxerr_factor * bf->max_err_ratio;
      /* An inout (resid holding R') must be exact in every class. */
      if (b->role == HCT_BUF_INOUT ? f->rel_err != 0.0
                                   : !f->is_image && (f->kl_mean > kl_limit || f->max_err_ratio > err_limit))
        st = "parity";
    }
    if (strcmp(st, "pass") != 0 && strcmp(vd->status, "pass") == 0) {
      vd->status = st;
      vd->worst = *f;
      hct__strlcpy(vd->worst_buf, ck->name[j], sizeof vd->worst_buf);
    }
    if (off < sizeof vd->figures - 240)
      off += (size_t)snprintf(vd->figures + off, sizeof vd->figures - off,
                              "%s\"%s\":{\"rel_err\":%.3g,\"max_err_ratio\":%.3g,\"kl_mean\":%.3g,"
                              "\"kl_max\":%.3g,\"argmax\":%.4f,\"mismatches\":%zu,\"unwritten\":%zu,"
                              "\"image_mismatches\":%zu}",
                              j ? "," : "", ck->name[j], f->rel_err, f->max_err_ratio, f->kl_mean,
                              f->kl_max, f->argmax_agree, f->mismatches, f->unwritten,
                              f->image_mismatches);
  }
  snprintf(vd->figures + off, sizeof vd->figures - off, "%s\"run\":%d,\"run_ms\":%.3f}",
           off > 1 ? "," : "", ck->run, ck->run_ms);
}

/* Adds `"checks":[...]` (the checks a passing check call went through) to
 * a verdict's figures. */
static void list_checks(verdict_t *vd, const hct_worker_check_t *ck) {
  size_t off = strlen(vd->figures);
  if (off < 2 || off > sizeof vd->figures - 80) return;
  int repeat = 0, producer = 0;
  for (int j = 0; j < ck->n_more; j++) {
    repeat |= strcmp(ck->more[j].check, "repeat") == 0;
    producer |= strcmp(ck->more[j].check, "producer") == 0;
  }
  snprintf(vd->figures + off - 1, sizeof vd->figures - off + 1, ",\"checks\":[\"parity\"%s%s%s]}",
           repeat ? ",\"repeat\"" : "", ck->deterministic == 1 ? ",\"determinism\"" : "",
           producer ? ",\"producer\"" : "");
}

/*
 * Judges every run of one check call, in the order that explains a failure
 * best: two allocations that disagree on identical inputs (a race: every
 * other difference would follow from it; bitwise classes only), then the
 * first run (the classic check), then the later runs in the same
 * allocation (fresh inputs, the first again: state kept between runs) and
 * the run after the producer.  vd->check names the check that caught it;
 * log gets one line of detail.
 */
static void judge_all(probe_t *P, const cand_t *c, const hct_worker_check_t *ck, int T,
                      int pending, uint64_t seed, verdict_t *vd, char *log, size_t len) {
  static const char *const run_text[] = {"first run", "fresh inputs in the same allocation",
                                         "the first inputs again in the same allocation",
                                         "right after a producer that lets it launch early",
                                         "a second allocation"};
  figview_t v0 = view_first(ck);
  judge(P, c, &v0, vd);
  log[0] = '\0';
  if (ck->deterministic == 0 && (c->c.v->parity != HCT_PARITY_KL || c->is_ref)) {
    vd->status = "nondeterminism";
    vd->check = "determinism";
    snprintf(log, len, "T=%d%s seed %llu: two allocations on identical inputs gave different bits: "
             "'%s' %zu elements (first at %zu)", T, pending ? " pending" : "",
             (unsigned long long)seed, ck->nondet_buf, ck->nondet_mismatches, ck->nondet_first);
    return;
  }
  for (int j = -1; j < ck->n_more && strcmp(vd->status, "pass") == 0; j++) {
    if (j >= 0) {
      figview_t v = view_more(ck, j);
      judge(P, c, &v, vd);
      if (strcmp(vd->status, "pass") == 0) continue;
      vd->check = strcmp(ck->more[j].check, "producer") == 0 ? "producer" : "repeat";
      vd->status = vd->check;
    }
    int run = j < 0 ? 0 : ck->more[j].run;
    if (strcmp(vd->status, "pass") != 0)
      snprintf(log, len, "T=%d%s seed %llu, run %d (%s): '%s' %zu mismatches (first at %zu), %zu "
               "unwritten, %zu not finite, %zu image mismatches, rel err %.3g, kl %.3g", T,
               pending ? " pending" : "", (unsigned long long)seed, run,
               run_text[run < 5 ? run : 0], vd->worst_buf, vd->worst.mismatches,
               vd->worst.first_mismatch, vd->worst.unwritten, vd->worst.nonfinite,
               vd->worst.image_mismatches, vd->worst.rel_err, vd->worst.kl_mean);
  }
  if (strcmp(vd->status, "pass") == 0) {
    judge(P, c, &v0, vd); /* the first run's figures stand for the check */
    list_checks(vd, ck);
  }
}

/* The baseline against the float64 reference: normwise relative error
 * under the op's kl.baseline_max_rel_err (1e-5 by default) for every f32
 * output, images exact, so a wrong baseline cannot make every bitwise copy
 * of it pass. */

static int judge_baseline(probe_t *P, const hct_worker_check_t *ck, int T, int pending,
                          uint64_t seed, verdict_t *vd) {
  cand_t *base = &P->cands[P->baseline];
  if (ck->deterministic == 0) {
    record_failure(P, base, "determinism", "nondeterminism", T, pending, seed, NULL, NULL);
    return hct__error(HCT_EPARITY, "baseline %s at T=%d%s: two allocations on identical inputs gave "
                      "different bits ('%s', %zu elements): nothing can be checked against it",
                      base->c.label, T, pending ? " with pending" : "", ck->nondet_buf,
                      ck->nondet_mismatches);
  }
  /* Every run: the first, then the later ones of the same allocation. */
  for (int r = -1; r < ck->n_more; r++) {
    figview_t v = r < 0 ? view_first(ck) : view_more(ck, r);
    judge(P, base, &v, vd);
    for (int j = 0; j < ck->n; j++) {
      const hct_parity_figs_t *f = &v.figs[j];
      if (f->unwritten || f->nonfinite || f->image_mismatches ||
          (!f->is_image && f->rel_err > P->op->baseline_max_rel_err)) {
        const char *check = r < 0 ? "parity" : ck->more[r].check;
        record_failure(P, base, check, r >= 0 ? check : f->unwritten ? "unwritten" : "parity", T,
                       pending, seed, vd->figures, NULL);
        return hct__error(HCT_EPARITY,
                          "baseline %s at T=%d%s, run %d: '%s' is off the float64 reference "
                          "(relative error %.3g, %zu unwritten, %zu not finite, %zu not the exact "
                          "image of its f32 output; limit %.0e): nothing can be checked against it",
                          base->c.label, T, pending ? " with pending" : "", v.run, ck->name[j],
                          f->rel_err, f->unwritten, f->nonfinite, f->image_mismatches,
                          P->op->baseline_max_rel_err);
      }
    }
  }
  figview_t v0 = view_first(ck);
  judge(P, base, &v0, vd);
  list_checks(vd, ck);
  return 0;
}

/* What a check call runs for candidate c (worker.h): every candidate the
 * runs of one allocation and the producer run; bitwise classes (the
 * baseline too) and every reference of one the second allocation that must
 * give the same bits (bits cannot equal bits that change run to run). */
static int check_flags(const cand_t *c) {
  return HCT_CHECK_REPEAT | HCT_CHECK_PRODUCER |
         (c->c.v->parity != HCT_PARITY_KL || c->is_ref ? HCT_CHECK_TWIN : 0);
}

/*
 * Candidate i cannot be checked at the k-th count: its reference (a
 * variant it must equal bit for bit) did not pass its own class there.  A
 * trial says why ("unsupported": no failure of its own, nothing
 * quarantined), and it is out at that count only.
 */
static int reference_missing(probe_t *P, int i, int k, int pending, uint64_t seed) {
  cand_t *c = &P->cands[i];
  const cand_t *r = &P->cands[c->ref];
  const int T = P->tokens.t[k];
  char log[512];
  snprintf(log, sizeof log, "T=%d%s: its reference %s did not pass its class here, so its bits "
           "cannot be checked", T, pending ? " pending" : "", r->c.label);
  hct_db_trial_t t;
  trial_init(P, c, &t, "parity", T, pending);
  hct__strlcpy(t.status, "unsupported", sizeof t.status);
  t.seed = seed;
  t.log = log;
  int rc = hct__db_trial_add(P->db, &t, NULL);
  c->failed[k] = 1;
  progress(P, "reject", 0, 0, "%s: %s", c->c.label, log);
  rejected(P, c, T, "parity", log);
  return rc;
}

/*
 * Checks every candidate in play at the k-th count (only[i] set, or all
 * with only NULL), on one input set drawn from a fresh seed, with or
 * without pending: the baseline first against the float64 reference, then
 * the others by depth.
 */
static int check_T(probe_t *P, int k, int pending, const uint8_t *only) {
  const int T = P->tokens.t[k];
  uint64_t seed = hct__rng_next(&P->rng);
  cand_t *base = &P->cands[P->baseline];
  hct_worker_check_t ck;
  verdict_t vd;
  int rc;
  /* The first call on an input set draws it and computes the float64
   * reference in the worker: give it time. */
  const uint64_t t_base = hct__now_ns();
  rc = hct__worker_check(P->w, P->baseline, -1, T, pending, seed, check_flags(base), 120000, &ck);
  /* A check that takes seconds (large T: gigabytes drawn, copied and
   * compared) gets a progress line per candidate, not one per T. */
  const int long_step = P->tty || hct__now_ns() - t_base > 1000000000ull;
  int n_check = 0, done_check = 0;
  for (int i = 0; i < P->n; i++)
    n_check += i != P->baseline && !P->cands[i].dead && !P->cands[i].failed[k] && (only == NULL || only[i]);
  if (rc != 0) {
    int r = candidate_failed(P, P->baseline, "parity", rc, T, pending, seed);
    return r != 0 ? r : rc;
  }
  P->fresh_worker = 0; /* the worker holds this input set now */
  if ((rc = judge_baseline(P, &ck, T, pending, seed, &vd)) != 0) return rc;
  /* Up to five runs a check (worker.h), each given the watchdog's margin. */
  int deadline = hct__worker_deadline_ms(ck.run_ms * 4 * 5);
  hct_db_trial_t t;
  trial_init(P, base, &t, "parity", T, pending);
  hct__strlcpy(t.status, "pass", sizeof t.status);
  t.seed = seed;
  t.figures_json = vd.figures;
  if ((rc = hct__db_trial_add(P->db, &t, NULL)) != 0) return rc;

  /* Candidates by depth (resolve_references): a reference is judged on
   * these inputs before any candidate whose bits must equal its own.
   * passed_here: passed this check; holds: whose outputs the worker keeps
   * as the reference of the next check. */
  uint8_t passed_here[MAX_CANDS] = {0};
  passed_here[P->baseline] = 1;
  int holds = P->baseline, max_depth = 0;
  for (int i = 0; i < P->n; i++) max_depth = HCT_MAX(max_depth, P->cands[i].depth);
  for (int d = 1; d <= max_depth; d++)
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    char why[256];
    if (c->depth != d || c->dead || c->failed[k] || (only != NULL && !only[i]) ||
        !hct__run_supports(&c->c, &P->dev, T, why, sizeof why))
      continue;
    if ((rc = check_interrupt(P)) != 0) return rc;
    if (long_step)
      progress(P, "check", ++done_check, n_check, "T=%d%s: %s", T, pending ? " pending" : "", c->c.label);
    /* A fresh worker draws the inputs and the float64 reference again
     * before it runs anything: let it do so on the baseline, with time for
     * that, so that the candidate's own run keeps the launch deadline. */
    if (P->fresh_worker) {
      hct_worker_check_t warm;
      rc = hct__worker_check(P->w, P->baseline, -1, T, pending, seed, check_flags(base), 120000,
                             &warm);
      if (rc != 0) {
        int r = candidate_failed(P, P->baseline, "parity", rc, T, pending, seed);
        return r != 0 ? r : rc;
      }
      P->fresh_worker = 0;
      holds = P->baseline;
    }
    if (passed_here[c->ref] && c->ref != holds) {
      /* The reference's own outputs become the worker's reference: a run
       * of it without one (worker.h), so that a fault there is its own. */
      hct_worker_check_t own;
      rc = hct__worker_check(P->w, c->ref, -1, T, pending, seed, HCT_CHECK_REPEAT, deadline, &own);
      if (rc != 0) {
        if ((rc = candidate_failed(P, c->ref, "parity", rc, T, pending, seed)) != 0) return rc;
        passed_here[c->ref] = 0;
        holds = -1;
      } else {
        holds = c->ref;
      }
    }
    if (!passed_here[c->ref]) {
      /* Not this candidate's fault, and nothing to compare its bits with:
       * out at this T only, unchecked ("unsupported": no failure). */
      if ((rc = reference_missing(P, i, k, pending, seed)) != 0) return rc;
      continue;
    }
    rc = hct__worker_check(P->w, i, c->ref, T, pending, seed, check_flags(c), deadline, &ck);
    if (rc != 0) {
      if ((rc = candidate_failed(P, i, "parity", rc, T, pending, seed)) != 0) return rc;
      if (holds == i) holds = -1;
      continue;
    }
    holds = c->ref; /* a check with a reference leaves the worker holding it */
    if (!P->producer_warned && strncmp(ck.producer_skipped, "the producer kernel", 19) == 0) {
      /* The producer check cannot run on this card: say so once, loudly. */
      P->producer_warned = 1;
      hct__log(HCT_LOG_WARN, "the producer check is skipped: %s", ck.producer_skipped);
    }
    char log[768];
    judge_all(P, c, &ck, T, pending, seed, &vd, log, sizeof log);
    trial_init(P, c, &t, vd.check, T, pending);
    hct__strlcpy(t.status, vd.status, sizeof t.status);
    t.seed = seed;
    t.figures_json = vd.figures;
    if (strcmp(vd.status, "pass") != 0) t.log = log;
    if ((rc = hct__db_trial_add(P->db, &t, NULL)) != 0) return rc;
    if (strcmp(vd.status, "pass") != 0) {
      hct_qcand_t q = qcand(P, c);
      if ((rc = hct__quarantine_add(P->db, &q, T, vd.status, log)) != 0) return rc;
      /* A wrong answer at one T disqualifies the candidate everywhere. */
      c->dead = 1;
      hct__worker_unload(P->w, i);
      progress(P, "reject", 0, 0, "%s: %s check: %s: %s", c->c.label, vd.check, vd.status, log);
      rejected(P, c, T, vd.check, log);
    } else {
      passed_here[i] = 1;
    }
  }
  return 0;
}

/* ---- timing -------------------------------------------------------------- */

static int verify_T(probe_t *P, int k, uint8_t *out, int *incomplete);
static int winner_at(probe_t *P, int k, int allow_kl, int verified_only);

/* Records the timing trials of ids[0..n) from res, and with `decides`
 * their figures for the decisions (pruned: not decided for).  `extra`
 * (may be NULL) is a key set to 1 in the figures: how they were timed. */
static int record_times(probe_t *P, int kT, const int *ids, int n, const hct_timing_res_t *res,
                        int cold, int decides, int batch, const char *extra) {
  const int T = P->tokens.t[kT];
  int rc = 0;
  for (int k = 0; k < n; k++) {
    cand_t *c = &P->cands[ids[k]];
    const hct_timing_res_t *r = &res[k];
    hct_db_trial_t t;
    trial_init(P, c, &t, "timing", T, 0);
    t.cold = cold;
    if (r->err != 0) {
      char figs[64];
      snprintf(figs, sizeof figs, "{\"error_code\":\"%s\"}", hct_err_name(r->err));
      trial_timed(&t, r, NULL);
      t.figures_json = figs;
      if ((rc = hct__db_trial_add(P->db, &t, NULL)) != 0) break;
      if (decides) c->timed[kT] = 0;
      continue;
    }
    if (decides) {
      c->timing[kT] = r->s;
      c->timed[kT] = !r->pruned;
    }
    trial_timed(&t, r, r->pruned ? "pruned" : "pass");
    char figs[352];
    snprintf(figs, sizeof figs, "{\"batch\":%d,\"rounds\":%d,\"clock_checked\":%d,\"rel_ci\":%.4g,"
             "\"seconds\":%.3f,\"max\":%.3f,\"decides\":%d%s%s%s}", batch, r->rounds,
             r->clock_checked, isfinite(r->s.rel_ci) ? r->s.rel_ci : -1.0, r->seconds, r->s.max,
             decides, extra ? ",\"" : "", extra ? extra : "", extra ? "\":1" : "");
    t.figures_json = figs;
    if ((rc = hct__db_trial_add(P->db, &t, NULL)) != 0) break;
  }
  return rc;
}

/*
 * hct__worker_time over as many requests as the card's memory needs: one
 * the worker refuses for memory (HCT_ENOMEM, saying how many of its first
 * candidates fit: hct__worker_time_fits) is sent again as groups of what
 * fits, in order, each with its slice of opts' "ranks", all on the same
 * seed (the same input data).  Grouped, nothing is pruned: a group's
 * fastest is no yardstick for the others.  *groups gets the number of
 * requests that timed (1: all interleaved in one).  Not even one fitting
 * is the worker's error naming the candidate, with *failed -1: it ends
 * the probe, as no candidate's fault.
 */
static int time_grouped(probe_t *P, const int *ids, int n, int T, json_t *opts, int deadline,
                        hct_timing_res_t *res, int *failed, int *groups) {
  const uint64_t seed = hct__rng_next(&P->rng);
  json_t *ranks = json_incref(json_object_get(opts, "ranks"));
  int done = 0, size = n, rc = 0;
  *groups = 0;
  while (rc == 0 && done < n) {
    const int m = HCT_MIN(size, n - done);
    if (ranks != NULL) {
      json_t *slice = json_array();
      for (int q = done; q < done + m; q++) json_array_append(slice, json_array_get(ranks, (size_t)q));
      json_object_set_new(opts, "ranks", slice);
    }
    rc = hct__worker_time(P->w, ids + done, m, T, seed, opts, deadline, res + done, failed);
    const int fits = rc == HCT_ENOMEM ? hct__worker_time_fits(P->w) : -1;
    if (fits > 0 && fits < m) {
      progress(P, "time", done, n, "T=%d: %d of %d candidates fit the card's memory at once: timed in groups",
               T, fits, m);
      hct__error_clear();
      json_object_set_new(opts, "prune_factor", json_real(-1.0));
      size = fits;
      rc = 0;
      continue;
    }
    if (rc == 0) {
      done += m;
      (*groups)++;
    }
  }
  if (ranks != NULL) json_object_set_new(opts, "ranks", ranks);
  return rc;
}

/*
 * After a deciding timing in groups (time_grouped): the baseline, the
 * winners of both classes and the references their bits are verified
 * against, timed again together in one request: their figures replace the
 * groups' (interleaved, so comparable), and theirs is the allocation
 * verify_T replays.  Only they are in_timing: a candidate outside them
 * that wins later cannot be verified, and is not decided for (verify_T).
 * Returns 0, 1 when one of them faulted (it is out: time_pass times
 * again), or the error that ends the probe.
 */
static int time_contenders(probe_t *P, int kT, json_t *opts, int batch, int deadline) {
  const int T = P->tokens.t[kT];
  uint8_t want[MAX_CANDS] = {0};
  want[P->baseline] = 1;
  for (int kl = 0; kl <= 1; kl++) {
    int w = winner_at(P, kT, kl, 0);
    for (int r = w; r >= 0; r = P->cands[r].ref) want[r] = 1;
  }
  int ids[MAX_CANDS], n = 0, failed = -1, groups = 0;
  json_t *ranks = json_array();
  for (int i = 0; i < P->n; i++) {
    P->cands[i].in_timing[kT] = 0;
    if (!want[i] || P->cands[i].dead) continue;
    ids[n++] = i;
    json_array_append_new(ranks, json_integer(P->cands[i].competes == HCT_PARITY_KL));
  }
  json_object_set_new(opts, "ranks", ranks);
  json_object_set_new(opts, "prune_factor", json_real(-1.0));
  hct_timing_res_t *res = calloc((size_t)n, sizeof *res);
  if (res == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  progress(P, "time", 0, n, "T=%d: the %d contenders again, in one request", T, n);
  int rc = time_grouped(P, ids, n, T, opts, deadline, res, &failed, &groups);
  if (rc == 0 && groups > 1)
    rc = hct__error(HCT_ENOMEM, "T=%d: the %d contenders (the baseline, the winners and their references) "
                    "do not fit the card's memory at once, so their timed outputs cannot be verified", T, n);
  if (rc != 0 && failed >= 0) {
    free(res);
    /* A fault of one: it is out, and the deciding timing runs again. */
    int r = candidate_failed(P, failed, "timing", rc, T, 0, 0);
    return r != 0 ? r : 1;
  }
  if (rc == 0) rc = record_times(P, kT, ids, n, res, P->op->timing_cold, 1, batch, "contenders");
  for (int q = 0; rc == 0 && q < n; q++) P->cands[ids[q]].in_timing[kT] = 1;
  free(res);
  return rc;
}

/* Times every candidate that passed at T, in the worker: each one's batch
 * of launches captured into a graph over rotating buffer sets (cold: their
 * total exceeds 4x the L2), graphs replayed in interleaved rounds. */
/*
 * One timing pass at T over the candidates still in play: cold (buffers
 * rotated through sets that exceed 4x the L2, as an engine's 96 reads per
 * window see them) or hot (one set, cache-warm).  Only the pass of the
 * manifest's mode (`decides`) sets the figures decisions are made from;
 * the other is recorded beside it.  A fault that ends the worker in the
 * deciding pass quarantines that candidate and times the others again; so
 * does a candidate that the verification of the timed launches puts out
 * when it may have pruned another (hct__timing_stands) or its replay left
 * the others unverified.  Only the figures of the pass that stands reach
 * on_timed.
 */
static int time_pass(probe_t *P, int kT, int cold, int decides, const uint8_t *only) {
  const int T = P->tokens.t[kT];
  for (;;) {
    int ids[MAX_CANDS], n = 0, rc;
    for (int i = 0; i < P->n; i++) {
      const cand_t *c = &P->cands[i];
      if (!c->dead && c->passed[kT] && !c->failed[kT] && !c->searched_out[kT] && (only == NULL || only[i]))
        ids[n++] = i;
    }
    if (n == 0) return 0;
    if (decides) {
      for (int i = 0; i < P->n; i++) P->cands[i].in_timing[kT] = 0;
      for (int q = 0; q < n; q++) P->cands[ids[q]].in_timing[kT] = 1;
    }
    const int batch = hct__op_batch(P->op, T);
    if (batch < 0) return batch;
    json_t *opts = json_pack("{s:i, s:i, s:[i], s:f, s:i}", "batch", batch, "cold", cold,
                             "no_prune", P->baseline, "max_seconds",
                             0.5 * HCT_MAX(1, P->o->sample_factor), "max_rounds",
                             60 * HCT_MAX(1, P->o->sample_factor));
    /* Six samples are the fewest whose extremes bound the median at 95%
     * (order statistics, tuner/stats.h); graph replays on a quiet card
     * agree to well under 1%, so most candidates stop there. */
    json_object_set_new(opts, "min_samples", json_integer(P->o->sample_factor > 1 ? 10 * P->o->sample_factor : 6));
    json_object_set_new(opts, "warmup", json_integer(1));
    if (P->o->no_prune) json_object_set_new(opts, "prune_factor", json_real(-1.0));
    /* A bitwise candidate competes with bitwise ones only: a much faster
     * kl variant must not prune it out of its own class's decision. */
    json_t *ranks = json_array();
    uint8_t rank[MAX_CANDS];
    for (int k = 0; k < n; k++) {
      rank[k] = P->cands[ids[k]].competes == HCT_PARITY_KL;
      json_array_append_new(ranks, json_integer(rank[k]));
    }
    json_object_set_new(opts, "ranks", ranks);
    hct_timing_res_t *res = calloc((size_t)n, sizeof *res);
    if (opts == NULL || res == NULL) {
      json_decref(opts);
      free(res);
      return hct__error(HCT_ENOMEM, "out of memory");
    }
    progress(P, "time", 0, n, "T=%d: %d candidates, %s, %d launches per graph", T, n,
             cold ? "cold" : "hot", batch);
    int failed = -1, groups = 0;
    int deadline = 60000 + (int)(n * 2000 * HCT_MAX(1, P->o->sample_factor));
    rc = time_grouped(P, ids, n, T, opts, deadline, res, &failed, &groups);
    if (rc != 0) {
      json_decref(opts);
      free(res);
      if (failed < 0) return rc; /* not one candidate's doing */
      if ((rc = candidate_failed(P, failed, "timing", rc, T, 0, 0)) != 0) return rc;
      continue; /* time the others again, without it */
    }
    if ((rc = record_times(P, kT, ids, n, res, cold, decides, batch, groups > 1 ? "groups" : NULL)) == 0 &&
        decides && groups > 1) {
      /* Timed in groups: the contenders again, interleaved in one
       * request, whose allocation the verification replays. */
      rc = time_contenders(P, kT, opts, batch, deadline);
      if (rc == 1) {
        json_decref(opts);
        free(res);
        continue;
      }
    }
    json_decref(opts);
    progress_end(P);
    /* Before anything is decided from these figures: the outputs of the
     * launches the winners made while being timed. */
    uint8_t out[MAX_CANDS] = {0}, out_k[MAX_CANDS] = {0};
    int incomplete = 0;
    if (rc == 0 && decides) rc = verify_T(P, kT, out, &incomplete);
    for (int k = 0; k < n; k++) out_k[k] = out[ids[k]];
    if (rc == 0 && decides && (incomplete || !hct__timing_stands(res, n, rank, out_k))) {
      /* A candidate put out may have pruned an honest one (or left it
       * unverified): time again the ones still in play, and verify them
       * again on the launches of that timing. */
      for (int k = 0; k < n; k++) {
        P->cands[ids[k]].timed[kT] = 0;
        P->cands[ids[k]].verified[kT] = 0;
      }
      free(res);
      progress(P, "time", 0, 0, "T=%d: timed again without the candidates the verification put out", T);
      continue;
    }
    for (int k = 0; rc == 0 && decides && P->o->on_timed && k < n; k++) {
      const cand_t *c = &P->cands[ids[k]];
      if (res[k].err == 0)
        P->o->on_timed(P->o->on_timed_arg, T, c->c.v->name, c->c.params, &res[k].s, res[k].pruned);
    }
    free(res);
    return rc;
  }
}


/*
 * Judges one candidate's timed outputs (hct__worker_verify) against the
 * baseline's timed outputs on the same rotating sets: a bitwise class must
 * match every bit on every set; a kl one must have every element written,
 * finite, its images exact, be within the kl bounds against the float64
 * reference on set 0, and on every set within 4 (maxerr_factor + 1) times
 * the baseline's own error (on set 0) of the baseline's outputs (an honest kl
 * candidate is within maxerr_factor + 1 of it by the triangle inequality;
 * one right only on some sets is far off on the others).
 */
static int timed_ok(probe_t *P, const cand_t *c, const hct_worker_verify_t *v, char *log,
                    size_t len) {
  int kl = c->c.v->parity == HCT_PARITY_KL;
  double base_err = 0;
  for (int j = 0; j < v->n; j++)
    if (!v->ref_first[j].is_image) base_err = fmax(base_err, v->ref_first[j].max_err_ratio);
  /* 4: room for the baseline's own error to differ from set to set. */
  double dist_limit = 4 * (P->op->maxerr_factor + 1) * fmax(base_err, 1e-9);
  const char *what = NULL;
  if (v->unwritten > 0) what = "elements left unwritten";
  else if (v->nonfinite > 0) what = "elements not finite";
  else if (v->image_mismatches > 0) what = "16-bit images not the rounding of their f32 output";
  else if (!kl && v->mismatches > 0) what = "bits differ from its reference's";
  else if (kl && !(v->max_dist <= dist_limit)) what = "far from the baseline's outputs";
  for (int j = 0; kl && what == NULL && j < v->n; j++) {
    const hct_parity_figs_t *f = &v->first[j], *bf = &v->ref_first[j];
    const hct_buffer_t *b = hct__buffer_find(P->op, v->name[j]);
    if (f->is_image || b == NULL || b->role == HCT_BUF_INOUT) continue;
    if (f->kl_mean > fmax(P->op->kl_mean_factor * bf->kl_mean, P->op->kl_abs_floor) ||
        f->max_err_ratio > P->op->maxerr_factor * bf->max_err_ratio)
      what = "outside the kl bounds against the float64 reference";
  }
  if (what == NULL) return 1;
  snprintf(log, len, "the outputs of its timed launches (%d rotating sets) are wrong: %s (set %d, "
           "'%s': %zu mismatches, %zu unwritten, %zu not finite, %zu image mismatches, distance "
           "%.3g against a limit of %.3g)", v->sets, what, v->worst_set, v->worst_buf, v->mismatches,
           v->unwritten, v->nonfinite, v->image_mismatches, v->max_dist, dist_limit);
  return 0;
}

/*
 * For a wanted candidate i of verify_T whose reference is not the
 * baseline: the reference, unless verified already, is wanted too (and its
 * own reference, up the chain).  A reference that is out, or was not in
 * the timing just made (the worker replays only those), leaves nothing to
 * verify i's bits against: i is not timed at k then (it cannot be decided
 * for) and *changed is set.
 */
static int verify_ref(probe_t *P, int k, int i, uint8_t *want, int *changed) {
  for (cand_t *c = &P->cands[i]; c->ref >= 0 && c->ref != P->baseline; c = &P->cands[c->ref]) {
    cand_t *r = &P->cands[c->ref];
    if (r->verified[k]) return 0;
    if (r->dead || !r->in_timing[k]) {
      cand_t *x = &P->cands[i];
      x->timed[k] = 0;
      *changed = 1;
      progress(P, "verify", 0, 0, "T=%d: %s cannot be verified: its reference %s is out or was not timed",
               P->tokens.t[k], x->c.label, r->c.label);
      return 0;
    }
    want[c->ref] = 1;
  }
  return 0;
}

/*
 * Verifies after timing at the k-th count, before any decision: the
 * winners of both classes (every timed candidate with verify_all), whose
 * timed launches' outputs must pass timed_ok.  One that fails is recorded
 * ("timed"), quarantined and out everywhere, and the winners are chosen
 * again, until every winner is verified.  A bitwise candidate is verified
 * against its reference's timed outputs once the reference's own are
 * (verify_ref), one reference per worker call.  Each one put out is flagged in
 * out[] (indexed like P->cands), and *incomplete set when a replay failed
 * and left the others unverified: time_pass then times again.  The worker
 * keeps the timing's allocation only until its next request of another
 * kind, so candidates are unloaded after the loop.
 */
static int verify_T(probe_t *P, int k, uint8_t *out, int *incomplete) {
  const int T = P->tokens.t[k];
  int dead[MAX_CANDS], ndead = 0, rc = 0;
  for (;;) {
    int ids[MAX_CANDS], n = 0, vref = -1;
    uint8_t want[MAX_CANDS] = {0};
    for (int i = 0; i < P->n; i++) {
      cand_t *c = &P->cands[i];
      if (i == P->baseline || c->dead || !c->timed[k] || c->verified[k]) continue;
      want[i] = P->o->verify_all;
      for (int kl = 0; kl <= 1 && !want[i]; kl++) want[i] = winner_at(P, k, kl, 0) == i;
    }
    /* Bits equal to a reference's are verified only once the reference's
     * own timed outputs are: its reference is wanted first (verify_ref). */
    int changed = 0;
    /* Timed in groups, only the contenders' allocation is left to replay
     * (time_contenders): a winner outside it cannot be verified. */
    for (int i = 0; i < P->n; i++) {
      cand_t *c = &P->cands[i];
      if (!want[i] || c->in_timing[k]) continue;
      c->timed[k] = 0;
      changed = 1;
      progress(P, "verify", 0, 0, "T=%d: %s cannot be verified: it was not among the contenders timed "
               "together (the others were timed in groups)", T, c->c.label);
    }
    for (int i = 0; i < P->n; i++)
      if (want[i] && (rc = verify_ref(P, k, i, want, &changed)) != 0) return rc;
    if (changed) continue; /* a winner could not be verified: choose again */
    /* One reference per call: the first wanted candidate whose reference
     * is verified (or the baseline) names it, the others of that
     * reference join it. */
    for (int i = 0; i < P->n; i++) {
      const cand_t *c = &P->cands[i];
      if (!want[i] || (c->ref != P->baseline && !P->cands[c->ref].verified[k])) continue;
      if (vref < 0) vref = c->ref;
      if (c->ref == vref) ids[n++] = i;
    }
    if (n == 0) break;
    hct_worker_verify_t *vr = calloc((size_t)n, sizeof *vr);
    if (vr == NULL) return hct__error(HCT_ENOMEM, "out of memory");
    progress(P, "verify", 0, n, "T=%d: the timed launches' outputs of %d candidates against %s", T, n,
             P->cands[vref].c.label);
    int failed = -1;
    rc = hct__worker_verify(P->w, ids, n, vref, 60000 + 2000 * n, vr, &failed);
    if (rc != 0) {
      /* One candidate's replay failed: it is out (and a dead worker
       * restarted, the timing's allocation with it: the others stay
       * unverified, and time_pass times them again). */
      free(vr);
      if (failed >= 0 && failed != P->baseline) {
        /* A reference's replay failing is that reference's fault. */
        rc = candidate_failed(P, failed, "timed", rc, T, 0, 0);
        out[failed] = 1;
        *incomplete = 1;
      }
      break;
    }
    for (int q = 0; q < n && rc == 0; q++) {
      cand_t *c = &P->cands[ids[q]];
      char log[768];
      int ok = timed_ok(P, c, &vr[q], log, sizeof log);
      char figs[256];
      snprintf(figs, sizeof figs, "{\"sets\":%d,\"worst_set\":%d,\"mismatches\":%zu,\"unwritten\":%zu,"
               "\"nonfinite\":%zu,\"image_mismatches\":%zu,\"max_dist\":%.3g}", vr[q].sets,
               vr[q].worst_set, vr[q].mismatches, vr[q].unwritten, vr[q].nonfinite,
               vr[q].image_mismatches, isfinite(vr[q].max_dist) ? vr[q].max_dist : -1.0);
      if (ok) {
        /* The record that what is decided for was verified. */
        hct_db_trial_t t;
        trial_init(P, c, &t, "timed", T, 0);
        hct__strlcpy(t.status, "pass", sizeof t.status);
        t.cold = P->op->timing_cold;
        t.figures_json = figs;
        rc = hct__db_trial_add(P->db, &t, NULL);
        c->verified[k] = 1;
        continue;
      }
      char line[800];
      snprintf(line, sizeof line, "T=%d: %s", T, log);
      rc = record_failure(P, c, "timed", "timed", T, 0, 0, figs, line);
      c->dead = 1;
      out[ids[q]] = 1;
      dead[ndead++] = ids[q];
      progress(P, "reject", 0, 0, "%s: timed check: %s", c->c.label, line);
      rejected(P, c, T, "timed", line);
    }
    free(vr);
    if (rc != 0) break; /* else the winners may have changed: choose again */
  }
  progress_end(P);
  for (int q = 0; q < ndead; q++) hct__worker_unload(P->w, dead[q]);
  return rc;
}

/* ---- the search ------------------------------------------------------------ */

typedef struct search_ctx_s {
  probe_t *P;
  int k;
  const hct_variant_t *v;
} search_ctx_t;

/*
 * One round of a family's search (hct_search_time_fn): the points timed in
 * the manifest's mode with exactly `samples` samples each, nothing pruned,
 * each recorded as a timing trial that does not decide ("decides":0) and
 * says its round and samples, so the trials show which points were timed
 * how much.  A point whose timing faults is recorded and quarantined like
 * any other (candidate_failed), gets an infinite median, and the others
 * are timed again without it.
 */
static int search_time(void *arg, int round, const int *ids, int n, int samples, hct_summary_t *out) {
  search_ctx_t *S = arg;
  probe_t *P = S->P;
  const int T = P->tokens.t[S->k];
  const int batch = hct__op_batch(P->op, T);
  if (batch < 0) return batch;
  int live[MAX_CANDS], where[MAX_CANDS], nl = 0;
  for (int q = 0; q < n; q++) {
    memset(&out[q], 0, sizeof out[q]);
    out[q].median = INFINITY;
    if (!P->cands[ids[q]].dead) {
      where[nl] = q;
      live[nl++] = ids[q];
    }
  }
  progress(P, "search", round, 0, "T=%d: %s: %d points, %d samples each", T, S->v->name, nl, samples);
  while (nl > 0) {
    json_t *opts = json_pack("{s:i, s:i, s:i, s:i, s:f, s:f, s:i}", "batch", batch, "cold",
                             P->op->timing_cold, "min_samples", samples, "max_rounds", samples,
                             "max_seconds", 600.0, "prune_factor", -1.0, "warmup", 1);
    hct_timing_res_t *res = calloc((size_t)nl, sizeof *res);
    if (opts == NULL || res == NULL) {
      json_decref(opts);
      free(res);
      return hct__error(HCT_ENOMEM, "out of memory");
    }
    int failed = -1, groups = 0;
    int deadline = 60000 + (int)(nl * samples * 200);
    int rc = time_grouped(P, live, nl, T, opts, deadline, res, &failed, &groups);
    json_decref(opts);
    if (rc != 0) {
      free(res);
      if (failed < 0) return rc;
      if ((rc = candidate_failed(P, failed, "timing", rc, T, 0, 0)) != 0) return rc;
      int m = 0;
      for (int q = 0; q < nl; q++)
        if (live[q] != failed) {
          where[m] = where[q];
          live[m++] = live[q];
        }
      nl = m;
      continue;
    }
    for (int q = 0; rc == 0 && q < nl; q++) {
      cand_t *c = &P->cands[live[q]];
      const hct_timing_res_t *r = &res[q];
      hct_db_trial_t t;
      trial_init(P, c, &t, "timing", T, 0);
      t.cold = P->op->timing_cold;
      char figs[320];
      if (r->err != 0) {
        snprintf(figs, sizeof figs, "{\"error_code\":\"%s\",\"search\":{\"round\":%d,\"samples\":%d},\"decides\":0}",
                 hct_err_name(r->err), round, samples);
        trial_timed(&t, r, NULL);
        t.figures_json = figs;
        rc = hct__db_trial_add(P->db, &t, NULL);
        continue;
      }
      out[where[q]] = r->s;
      trial_timed(&t, r, "pass");
      snprintf(figs, sizeof figs, "{\"batch\":%d,\"search\":{\"strategy\":\"halving\",\"round\":%d,"
               "\"samples\":%d},\"seconds\":%.3f,\"decides\":0}", batch, round, samples, r->seconds);
      t.figures_json = figs;
      rc = hct__db_trial_add(P->db, &t, NULL);
    }
    free(res);
    return rc;
  }
  return 0;
}

/*
 * Before the deciding timing at the k-th count: every family whose
 * manifest asks for a search ("search": {"strategy": "halving"}) and has
 * more than min_points candidates in play there is searched
 * (hct__search_halving), and the points it leaves out are not timed to
 * decide (searched_out).  The best points of the family at the count
 * before (its deciding timing) are carried through the first round.  The
 * baseline, and a reference some bitwise candidate is verified against,
 * are never searched out.  --exhaustive (verify-decisions) skips it all.
 */
static int search_T(probe_t *P, int k) {
  for (int i = 0; i < P->n; i++) P->cands[i].rank_k = -1;
  if (P->o->exhaustive) return 0;
  for (int vi = 0; vi < P->op->n_variants; vi++) {
    const hct_variant_t *v = &P->op->variants[vi];
    if (v->search.strategy != HCT_SEARCH_HALVING) continue;
    int ids[MAX_CANDS], n = 0, carry[MAX_CANDS], nc = 0;
    for (int i = 0; i < P->n; i++) {
      const cand_t *c = &P->cands[i];
      if (c->c.v == v && i != P->baseline && !c->is_ref && !c->ref_only && !c->dead && c->passed[k] &&
          !c->failed[k])
        ids[n++] = i;
    }
    if (n <= v->search.min_points) continue;
    /* Carried: the fastest of the family at the count before, in order. */
    for (int round = 0; k > 0 && round < v->search.carry; round++) {
      int best = -1;
      for (int q = 0; q < n; q++) {
        const cand_t *c = &P->cands[ids[q]];
        int taken = 0;
        for (int j = 0; j < nc; j++) taken |= carry[j] == ids[q];
        if (!taken && c->timed[k - 1] && (best < 0 || c->timing[k - 1].median < P->cands[best].timing[k - 1].median))
          best = ids[q];
      }
      if (best >= 0) carry[nc++] = best;
    }
    search_ctx_t S = {P, k, v};
    int surv[MAX_CANDS], ns = 0, timings = 0, ranked[MAX_CANDS];
    int rc = hct__search_halving(&v->search, ids, n, carry, nc, search_time, &S, surv, &ns, &timings, ranked);
    if (rc != 0) return rc;
    for (int r = 0; r < n; r++) P->cands[ranked[r]].rank_k = r;
    for (int q = 0; q < n; q++) {
      int kept = 0;
      for (int j = 0; j < ns; j++) kept |= surv[j] == ids[q];
      P->cands[ids[q]].searched_out[k] = !kept;
    }
    progress(P, "search", 0, 0, "T=%d: %s: %d of %d points go on to the deciding timing (%d samples spent, "
             "%d carried from T=%d)", P->tokens.t[k], v->name, ns, n, timings, nc, k > 0 ? P->tokens.t[k - 1] : 0);
  }
  return 0;
}

/* Times every candidate that passed at T in the mode the manifest decides
 * by (after the search, with `search`: check_late has run it already);
 * then the baseline and the winners of both classes in the other mode,
 * recorded beside them, so a winner that only wins with cold (or warm)
 * caches shows.  The second pass times at most three candidates. */
static int time_T(probe_t *P, int k, int search) {
  int cold = P->op->timing_cold;
  int rc = search ? search_T(P, k) : 0;
  if (rc == 0) rc = time_pass(P, k, cold, 1, NULL);
  if (rc != 0 || P->o->one_mode) return rc;
  uint8_t only[MAX_CANDS] = {0};
  only[P->baseline] = 1;
  for (int kl = 0; kl <= 1; kl++) {
    int w = winner_at(P, k, kl, 1);
    if (w >= 0) only[w] = 1;
  }
  return time_pass(P, k, !cold, 0, only);
}

/* Every check of check_T, with and without pending, `sets` input sets
 * each, on the candidates of only[]; each is then checked at k. */
static int check_all_runs(probe_t *P, int k, int sets, const uint8_t *only) {
  for (int pending = 0; pending <= 1; pending++)
    for (int s = 0; s < sets; s++) {
      int rc = check_T(P, k, pending, only);
      if (rc != 0) return rc;
    }
  for (int i = 0; i < P->n; i++)
    if (only[i]) P->cands[i].checked[k] = 1;
  return 0;
}

/* Adds to only[] the references candidate i's bits are checked against,
 * up the chain: check_T judges a reference on the same inputs first. */
static void with_references(probe_t *P, int i, uint8_t *only) {
  for (int r = P->cands[i].ref; r >= 0; r = P->cands[r].ref) only[r] = 1;
}

/*
 * The k-th count above the manifest's checks.all_points_up_to: a check
 * there draws and copies back gigabytes per run (T = 32768: 2.7 GB of
 * inputs, 1.7 GB of outputs five times a check), so only what can be
 * decided is checked.  Every point in play is timed first by its family's
 * search (a point that faults while timed is recorded as a fault, as
 * always); then the finalists (what the search keeps, every point of a
 * family without one), the references their bits are checked against and
 * the baseline go through every check of check_T; a finalist that fails
 * is out, and the next point of its family's ranking is checked in its
 * place, until the family has as many passing finalists as the search
 * kept or none is left.  A point never checked here is recorded as
 * "unchecked" and not timed to decide: it is never decided for at this
 * count.  Then the deciding timing and the verification of the timed
 * outputs, as at every count.
 */
static int check_late(probe_t *P, int k, int sets) {
  const int T = P->tokens.t[k];
  char why[256];
  int in_play = 0, rc;
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    c->passed[k] = !c->dead && !c->failed[k] && hct__run_supports(&c->c, &P->dev, T, why, sizeof why);
    in_play += c->passed[k];
  }
  progress(P, "search", 0, 0, "T=%d: %d points in play timed first, the finalists checked after "
           "(checks.all_points_up_to %d: %s)", T, in_play, P->op->checks_all_up_to, P->op->checks_why);
  if ((rc = search_T(P, k)) != 0) return rc;
  /* The finalists, and how many of each family's must pass. */
  uint8_t only[MAX_CANDS] = {0};
  int want[HCT_MAX_VARIANTS] = {0}, n_only = 0;
  only[P->baseline] = 1;
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (!c->passed[k] || c->dead || c->failed[k] || c->searched_out[k]) continue;
    only[i] = 1;
    with_references(P, i, only);
    if (c->rank_k >= 0) want[c->c.v - P->op->variants]++;
  }
  for (int i = 0; i < P->n; i++) n_only += only[i];
  for (int round = 0; n_only > 0; round++) {
    progress(P, "check", round, 0, "T=%d: %d finalists and references (of %d points in play), every check "
             "with and without pending", T, n_only, in_play);
    if ((rc = check_all_runs(P, k, sets, only)) != 0) return rc;
    /* A family short of passing finalists: the next of its ranking. */
    memset(only, 0, sizeof only);
    n_only = 0;
    for (int vi = 0; vi < P->op->n_variants; vi++) {
      const hct_variant_t *v = &P->op->variants[vi];
      int ok = 0;
      for (int i = 0; i < P->n; i++) {
        const cand_t *c = &P->cands[i];
        ok += c->c.v == v && c->rank_k >= 0 && c->checked[k] && !c->dead && !c->failed[k];
      }
      for (int r = 0, need = want[vi] - ok; need > 0 && r < P->n; r++)
        for (int i = 0; need > 0 && i < P->n; i++) {
          cand_t *c = &P->cands[i];
          if (c->c.v != v || c->rank_k != r || c->checked[k] || c->dead || c->failed[k] || !c->passed[k])
            continue;
          c->searched_out[k] = 0;
          only[i] = 1;
          with_references(P, i, only);
          need--;
          progress(P, "check", 0, 0, "T=%d: %s (%d. of its family's ranking) checked in place of a finalist "
                   "that failed", T, c->c.label, r + 1);
        }
    }
    for (int i = 0; i < P->n; i++) n_only += only[i];
  }
  /* What was never checked here is not decided here, and says so. */
  int unchecked = 0;
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (!c->passed[k]) continue;
    if (c->checked[k]) {
      c->passed[k] = !c->dead && !c->failed[k];
      continue;
    }
    c->passed[k] = 0;
    if (c->dead || c->failed[k]) continue; /* its fault in the search is its record */
    unchecked++;
    char log[400];
    snprintf(log, sizeof log, "T=%d: not checked here: above checks.all_points_up_to (%d) only the "
             "search's finalists are, and its timing in the search left it out (rank %d)", T,
             P->op->checks_all_up_to, c->rank_k + 1);
    hct_db_trial_t t;
    trial_init(P, c, &t, "parity", T, 0);
    hct__strlcpy(t.status, "unchecked", sizeof t.status);
    t.log = log;
    if ((rc = hct__db_trial_add(P->db, &t, NULL)) != 0) return rc;
  }
  progress(P, "check", 0, 0, "T=%d: %d points left unchecked (not decided for here)", T, unchecked);
  return P->o->check_only ? 0 : time_T(P, k, 0);
}

/* ---- deciding ------------------------------------------------------------ */

/* The winner at the k-th token count among candidates whose class is
 * allowed, by the one rule the tests check (hct__pick_winner): the fastest
 * one that beats the baseline significantly, else the baseline; -1 when
 * the baseline was not timed there.  With verified_only, only candidates
 * whose timed launches' outputs were verified at k (and the baseline, the
 * reference they are verified against) take part: what is decided for. */
static int winner_at(probe_t *P, int k, int allow_kl, int verified_only) {
  if (!P->cands[P->baseline].timed[k]) return -1;
  int m = 0, incumbent = -1;
  for (int i = 0; i < P->n; i++) {
    const cand_t *c = &P->cands[i];
    if (c->dead || !c->timed[k]) continue;
    if (verified_only && !c->verified[k] && i != P->baseline) continue;
    if (c->ref_only || !hct__variant_in_decision(P->op, c->c.v, allow_kl ? HCT_PARITY_KL : HCT_PARITY_BITWISE))
      continue;
    if (i == P->baseline) incumbent = m;
    memset(&P->pick[m], 0, sizeof P->pick[m]);
    P->pick[m].s = c->timing[k];
    P->pick_of[m++] = i;
  }
  double margin = P->o->min_margin > 0 ? P->o->min_margin : HCT_MIN_MARGIN_DEFAULT;
  int w = hct__pick_winner(P->pick, m, incumbent, margin);
  return w >= 0 ? P->pick_of[w] : -1;
}

/*
 * A range covers counts that were not probed: it ends, on either side,
 * before the first count its winner does not support there (its variant's
 * tokens, a constraint over T), counted from the probed counts it was made
 * of outward.  Those counts are left to the baseline.
 */
static void trim_to_support(probe_t *P, const cand_t *c, int first, int last, int *lo, int *hi) {
  char why[256];
  int a = P->tokens.t[first], b = P->tokens.t[last];
  while (a > *lo && hct__run_supports(&c->c, &P->dev, a - 1, why, sizeof why)) a--;
  while (b < *hi && hct__run_supports(&c->c, &P->dev, b + 1, why, sizeof why)) b++;
  *lo = a;
  *hi = b;
}

static int decide(probe_t *P, json_t *result) {
  /* The classes a decision is made for, the second also taking the
   * first's variants. */
  static const hct_parity_t classes[] = {HCT_PARITY_BITWISE, HCT_PARITY_KL};
  int rc = 0;
  json_t *jdec = json_array();
  for (int k = 0; k < 2; k++) {
    /* The winner per probed T, as its label; each count covers the
     * counts up to the geometric midpoints to its neighbours among the
     * op's representative counts, and equal neighbours merge
     * (hct__cover_ranges, tuner/stats.c). */
    int win[HCT_MAX_TOKEN_LIST];
    const char *label[HCT_MAX_TOKEN_LIST];
    hct_cover_t ranges[HCT_MAX_TOKEN_LIST];
    hct_tokens_t rep;
    /* An op without probe_tokens whose range is too large for a list: the
     * counts probed are its representatives. */
    if (hct__op_probe_tokens(P->op, &rep) != 0) rep = P->tokens;
    hct__error_clear();
    for (int kT = 0; kT < P->tokens.n; kT++) {
      win[kT] = winner_at(P, kT, classes[k] == HCT_PARITY_KL, 1);
      label[kT] = win[kT] >= 0 ? P->cands[win[kT]].c.label : NULL;
    }
    int nr = hct__cover_ranges(P->tokens.t, label, P->tokens.n, rep.t, rep.n, P->op->tmin,
                               P->op->tmax, ranges, HCT_MAX_TOKEN_LIST);
    hct_db_decision_t *d = calloc(HCT_MAX_TOKEN_LIST, sizeof *d);
    if (d == NULL || nr < 0) {
      free(d);
      json_decref(jdec);
      return nr < 0 ? nr : hct__error(HCT_ENOMEM, "out of memory");
    }
    int nd = 0;
    for (int r = 0; r < nr && r < HCT_MAX_TOKEN_LIST; r++) {
      const int kT = ranges[r].first, kend = ranges[r].last;
      const cand_t *c = &P->cands[win[kT]];
      int T = ranges[r].tmin, end = ranges[r].tmax;
      trim_to_support(P, c, kT, kend, &T, &end);
      const cand_t *b = &P->cands[P->baseline];
      hct_db_decision_t *x = &d[nd++];
      x->keys = P->keys;
      hct__strlcpy(x->op, P->op->name, sizeof x->op);
      hct__strlcpy(x->parity, hct__parity_name(classes[k]), sizeof x->parity);
      x->tmin = T;
      x->tmax = end;
      hct__strlcpy(x->variant, c->c.v->name, sizeof x->variant);
      hct__strlcpy(x->params, c->c.params, sizeof x->params);
      /* The class it competes in: what its bits promise an engine. */
      hct__strlcpy(x->variant_class, hct__parity_name(c->competes), sizeof x->variant_class);
      hct__strlcpy(x->template_hash, c->job.template_hash, sizeof x->template_hash);
      hct__strlcpy(x->binary_key, c->job.key, sizeof x->binary_key);
      hct__strlcpy(x->source, "probe", sizeof x->source);
      x->median_us = c->timing[kT].median;
      x->baseline_us = b->timing[kT].median;
      x->ci_lo_us = c->timing[kT].ci_lo;
      x->ci_hi_us = c->timing[kT].ci_hi;
      x->samples = c->timing[kT].n;
      x->decided_at = hct__unix_time();
      hct__strlcpy(x->run_id, P->run_id, sizeof x->run_id);
      hct__strlcpy(x->software_key, c->sk.key, sizeof x->software_key);
      hct__strlcpy(x->software_json, c->sk.json, sizeof x->software_json);
      size_t off = (size_t)snprintf(x->evidence_json, sizeof x->evidence_json, "{\"per_T\":[");
      for (int t = kT; t <= kend && off < sizeof x->evidence_json - 80; t++)
        off += (size_t)snprintf(x->evidence_json + off, sizeof x->evidence_json - off,
                                "%s{\"T\":%d,\"us\":%.3f,\"baseline_us\":%.3f,\"ci\":[%.3f,%.3f]}",
                                t > kT ? "," : "", P->tokens.t[t], c->timing[t].median,
                                b->timing[t].median, c->timing[t].ci_lo, c->timing[t].ci_hi);
      snprintf(x->evidence_json + off, sizeof x->evidence_json - off, "]}");
      json_array_append_new(jdec, json_pack("{s:s, s:i, s:i, s:s, s:s, s:s, s:f, s:f}", "parity",
                                            x->parity, "tmin", T, "tmax", end, "variant",
                                            x->variant, "params", x->params, "class",
                                            x->variant_class, "median_us", x->median_us,
                                            "baseline_us", x->baseline_us));
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
  printf("%s on %s (%s, %s), %s, %s launches per graph\n", P->op->name, P->dev.name,
         P->dev.uuid, P->dev.arch, P->op->timing_cold ? "cold" : "hot", P->op->batch_expr);
  printf("%6s  %-34s %10s %10s %8s  %-34s %10s %8s\n", "T", "bitwise winner", "us", "baseline",
         "speedup", "kl winner", "us", "speedup");
  for (int k = 0; k < P->tokens.n; k++) {
    const int T = P->tokens.t[k];
    int wb = winner_at(P, k, 0, 1), wk = winner_at(P, k, 1, 1);
    if (wb < 0) {
      printf("%6d  %-34s\n", T, "(baseline not timed)");
      continue;
    }
    const cand_t *cb = &P->cands[wb], *ck = &P->cands[wk];
    double base = b->timing[k].median;
    printf("%6d  %-34.34s %10.2f %10.2f %7.2fx  %-34.34s %10.2f %7.2fx\n", T, cb->c.label,
           cb->timing[k].median, base, base / cb->timing[k].median, ck->c.label,
           ck->timing[k].median, base / ck->timing[k].median);
  }
}

/* ---- the probe ------------------------------------------------------------- */

static int device_fingerprint_json(const hct_device_t *d, char **out) {
  json_t *j = hct__device_json(d);
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
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  probe_interrupted = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  char *kdir = P.kdir, *dbpath = P.dbpath;
  const size_t pathlen = sizeof P.kdir;
  const char *opname = o->op ? o->op : "hc_read";

  if (o->kernels_dir) hct__strlcpy(kdir, o->kernels_dir, pathlen);
  else if ((rc = hct__kernels_dir(kdir, pathlen)) != 0) goto out;
  if ((rc = hct__manifest_load(kdir, opname, &P.op)) != 0) goto out;
  /* An op is checked by its manifest's inputs and reference. */
  if ((rc = hct__reference_ready(P.op)) != 0) goto out;
  /* No token list: the op's representative counts (probe_tokens), else
   * its range when it fits in one list. */
  P.tokens = o->tokens;
  if (P.tokens.n == 0 && (rc = hct__op_probe_tokens(P.op, &P.tokens)) != 0) goto out;
  for (int k = 0; k < P.tokens.n; k++) {
    const int T = P.tokens.t[k];
    if (T < P.op->tmin || T > P.op->tmax) {
      rc = hct__error(HCT_ERANGE, "token count %d: op '%s' supports %d..%d", T, P.op->name,
                      P.op->tmin, P.op->tmax);
      goto out;
    }
  }
  P.pick = calloc(MAX_CANDS, sizeof *P.pick);
  P.pick_of = calloc(MAX_CANDS, sizeof *P.pick_of);
  if (P.pick == NULL || P.pick_of == NULL) {
    rc = hct__error(HCT_ENOMEM, "out of memory");
    goto out;
  }
  if ((rc = hct__device_find(o->device ? o->device : "0", &P.dev)) != 0) goto out;
  if ((rc = hct__reference_job(P.op, P.dev.backend, P.dev.arch, &P.ref_job)) != 0) goto out;

  if (o->db_path) hct__strlcpy(dbpath, o->db_path, pathlen);
  else if ((rc = hct__default_db_path(dbpath, pathlen, 1)) != 0) goto out;
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

  if (o->stale) {
    /* Only the counts whose decision is missing or stale on this card. */
    hct_tokens_t keep;
    char report[4096];
    if ((rc = hct__stale_tokens(P.db, P.op, &P.dev, &P.tokens, &keep, report, sizeof report)) != 0)
      goto out;
    if (!o->quiet && !o->json && report[0]) fprintf(stderr, "%s", report);
    if (keep.n == 0) {
      if (o->json)
        printf("{\"event\":\"result\",\"op\":\"%s\",\"device\":\"%s\",\"stale\":0,\"decisions\":[]}\n",
               P.op->name, P.dev.uuid);
      else if (!o->quiet)
        printf("%s on %s: every decision is current; nothing to probe\n", P.op->name, P.dev.name);
      goto out;
    }
    P.tokens = keep;
  }

  if ((rc = build_candidates(&P)) != 0) goto out;
  char args[128];
  snprintf(args, sizeof args, "{\"candidates\":%d}", P.n);
  if ((rc = hct__db_run_begin(P.db, &P.keys, P.op->name, args, P.run_id)) != 0) goto out;
  if (o->parent_run && (rc = hct__db_run_set_parent(P.db, P.run_id, o->parent_run)) != 0) goto fail;

  /* Quarantined candidates are not tried again unless asked to; the
   * check needs the template hash only, so it comes before compiling (a
   * template that failed to compile is not compiled again). */
  for (int i = 0; i < P.n; i++) {
    cand_t *c = &P.cands[i];
    if (i == P.baseline) continue;
    if ((rc = hct__compile_key(&c->job)) != 0) goto fail;
    hct_qcand_t q = qcand(&P, c);
    int skip = hct__quarantine_skip(P.db, &q, 1, o->retry_quarantined);
    if (skip < 0) { rc = skip; goto fail; }
    if (skip) {
      c->dead = 1;
      progress(&P, "skip", 0, 0, "%s is quarantined on this card (--retry-quarantined tries it)", c->c.label);
    }
  }
  if ((rc = compile_candidates(&P)) != 0) goto fail;

  /* Every GPU call from here on runs in a worker process: a candidate that
   * faults, hangs or poisons its context costs a worker, not the probe. */
  if ((rc = hct__worker_start(NULL, &P.w)) != 0) goto fail;
  if ((rc = hct__worker_open(P.w, P.dev.uuid)) != 0) goto fail;
  if ((rc = hct__worker_reference(P.w, kdir, P.op->name, P.ref_job.key, dbpath)) != 0) {
    rc = hct__error(rc, "op '%s': reference: %s", P.op->name, hct_last_error());
    goto fail;
  }
  for (int i = 0; i < P.n; i++) {
    cand_t *c = &P.cands[i];
    if (c->dead) continue;
    rc = hct__worker_load(P.w, i, kdir, P.op->name, c->c.v->name, c->c.params, c->job.key, dbpath);
    if (rc != 0) {
      if (i == P.baseline) {
        rc = hct__error(rc, "baseline %s: %s", c->c.label, hct_last_error());
        goto fail;
      }
      if ((rc = candidate_failed(&P, i, "parity", rc, 0, 0, 0)) != 0) goto fail;
      continue;
    }
    c->loaded = 1;
  }

  int sets = o->check_sets > 0 ? o->check_sets : 1;
  const int nT = P.tokens.n;
  for (int k = 0; k < nT; k++) {
    const int T = P.tokens.t[k];
    if ((rc = check_interrupt(&P)) != 0) goto fail;
    /* Faults of earlier probes at this T (a grid barrier that timed out
     * at T or below holds here too). */
    for (int i = 0; i < P.n; i++) {
      cand_t *c = &P.cands[i];
      if (c->dead || i == P.baseline || c->failed[k]) continue;
      hct_qcand_t q = qcand(&P, c);
      int skip = hct__quarantine_skip(P.db, &q, T, o->retry_quarantined);
      if (skip < 0) { rc = skip; goto fail; }
      c->failed[k] = skip != 0;
    }
    /* Above checks.all_points_up_to: time first, check what the search
     * keeps (check_late).  --check-only has no search to keep anything. */
    if (T > P.op->checks_all_up_to && !o->check_only) {
      if ((rc = check_late(&P, k, sets)) != 0) goto fail;
      continue;
    }
    progress(&P, "check", k, nT, "T=%d: parity of every candidate, %d input sets with and without pending", T, sets);
    for (int pending = 0; pending <= 1; pending++)
      for (int s = 0; s < sets; s++)
        if ((rc = check_T(&P, k, pending, NULL)) != 0) goto fail;
    for (int i = 0; i < P.n; i++) {
      char why[256];
      cand_t *c = &P.cands[i];
      c->checked[k] = 1;
      c->passed[k] = !c->dead && !c->failed[k] && hct__run_supports(&c->c, &P.dev, T, why, sizeof why);
    }
    if (!o->check_only && (rc = time_T(&P, k, 1)) != 0) goto fail;
  }
  progress_end(&P);

  json_t *result = json_pack("{s:s, s:s, s:s, s:s, s:s, s:f}", "event", "result", "op", P.op->name,
                             "device", P.dev.uuid, "name", P.dev.name, "run_id", P.run_id,
                             "wall_s", (double)(hct__now_ns() - P.t0) / 1e9);
  rc = o->check_only ? 0 : decide(&P, result);
  if (rc == 0) rc = hct__db_run_end(P.db, P.run_id, "done");
  if (o->json) {
    char *s = json_dumps(result, JSON_COMPACT);
    if (s) printf("%s\n", s);
    free(s);
  } else if (rc == 0 && !o->no_table && !o->check_only) {
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
    hct__db_run_end(P.db, P.run_id, rc == HCT_EINTERRUPTED ? "interrupted" : "failed");
    hct__error(rc, "%s", saved);
  }
out:
  for (int i = 0; i < P.n; i++) hct__compile_job_clear(&P.cands[i].job);
  hct__compile_job_clear(&P.ref_job);
  free(P.cands);
  free(P.pick);
  free(P.pick_of);
  hct__worker_stop(P.w);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (P.db) hct__db_close(P.db);
  if (P.op) hct__manifest_free(P.op);
  return rc;
}
