/*
 * probe_record.c: the probe's trials and faults in the DB, and what happens
 * to a candidate whose call failed: its trial, its quarantine, a fresh
 * worker when the fault ended this one.
 */
#include <stdio.h>
#include <string.h>

#include "probe_internal.h"

void hct__probe_trial_init(probe_t *P, const cand_t *c, hct_db_trial_t *t, const char *kind, int T,
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
void hct__probe_trial_timed(hct_db_trial_t *t, const hct_timing_res_t *r, const char *status) {
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
int hct__probe_record_failure(probe_t *P, cand_t *c, const char *kind, const char *reason, int T,
                          int pending, uint64_t seed, const char *figures, const char *log) {
  hct_db_trial_t t;
  hct__probe_trial_init(P, c, &t, kind, T, pending);
  hct__strlcpy(t.status, reason, sizeof t.status);
  t.seed = seed;
  t.figures_json = figures;
  t.log = log;
  int rc = hct__probe_trial_add(P, &t);
  return rc != 0 ? rc : hct__probe_quarantine(P, c, T, reason, log);
}

int hct__probe_quarantine(probe_t *P, const cand_t *c, int T, const char *reason, const char *log) {
  hct_qcand_t q = hct__probe_qcand(P, c);
  const int was = hct__probe_stage(P, HCT_PS_RECORD);
  int rc = hct__quarantine_add(P->db, &q, T, reason, log);
  hct__probe_count(P, HCT_PS_RECORD, 1);
  hct__probe_stage(P, was);
  return rc;
}

/* Tells the caller (hctune verify-decisions, bench) that a candidate is
 * out at T: which check caught it and why. */
void hct__probe_rejected(probe_t *P, const cand_t *c, int T, const char *check, const char *why) {
  if (P->o->on_rejected)
    P->o->on_rejected(P->o->on_rejected_arg, T, c->c.v->name, c->c.params, check, why);
}

/* Errors that are no candidate's fault (database, memory, usage): they end
 * the probe instead of quarantining anything. */
static int fatal_error(int rc) { return hct__fault_reason(rc) == NULL; }

hct_qcand_t hct__probe_qcand(probe_t *P, const cand_t *c) {
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
  hct__probe_record_failure(P, c, "parity", reason, 0, 0, 0, NULL, msg);
  hct__log(HCT_LOG_WARN, "%s dropped after a worker restart: %s", c->c.label, msg);
}

/*
 * A candidate's call failed with rc: record the trial and quarantine it
 * (a grid-barrier timeout at T and up, anything else everywhere), and
 * bring a fresh worker up when this one died.  Returns 0 to go on, or the
 * error that ends the probe.
 */
int hct__probe_cand_failed(probe_t *P, int i, const char *kind, int rc, int T, int pending,
                            uint64_t seed) {
  cand_t *c = &P->cands[i];
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", hct_last_error());
  /* A worker that died because the user interrupted us is no fault of the
   * candidate it was running. */
  int stop = hct__probe_check_interrupt(P);
  if (stop != 0) return stop;
  if (fatal_error(rc)) return hct__error(rc, "%s", msg);
  const char *reason = hct__fault_reason(rc);
  char figs[128];
  snprintf(figs, sizeof figs, "{\"error_code\":\"%s\"}", hct_err_name(rc));
  int r = hct__probe_record_failure(P, c, kind, reason, T, pending, seed, figs, msg);
  if (r != 0) return r;
  if (strcmp(reason, "timeout") == 0) {
    for (int k = 0; k < P->tokens.n; k++)
      if (P->tokens.t[k] >= T) c->failed[k] = 1;
  } else {
    c->dead = 1;
  }
  hct__probe_progress(P, "fault", 0, 0, "%s at T=%d: %s: %s", c->c.label, T, reason, msg);
  hct__probe_rejected(P, c, T, kind, msg);
  if (i == P->baseline && strcmp(reason, "timeout") != 0)
    return hct__error(rc, "baseline %s at T=%d: %s (nothing can be checked without it)", c->c.label, T, msg);
  if (!hct__worker_alive(P->w)) {
    /* The fault ended the worker (a sticky error, a hang, a crash): start a
     * fresh one with every candidate still in play loaded again. */
    char key[16];
    snprintf(key, sizeof key, "cand%d", i);
    if (c->dead) hct__worker_forget(P->w, key);
    const int was = hct__probe_stage(P, HCT_PS_WORKER);
    int rr = hct__worker_recover(P->w, dropped_cb, P);
    hct__probe_count(P, HCT_PS_WORKER, 1);
    hct__probe_stage(P, was);
    if (rr != 0) return rr;
    P->fresh_worker = 1;
    if (P->cands[P->baseline].dead)
      return hct__error(HCT_EWORKER, "baseline could not be loaded again after a worker restart");
  } else if (c->dead) {
    hct__worker_unload(P->w, i);
  }
  return 0;
}
