/*
 * probe.c: the probe: for one op on one card, compile every candidate
 * (variant x parameter point), check each one's outputs at every token
 * count with and without the optional inputs, time the ones that pass, and
 * record every trial as it completes and the winners at the end.
 *
 * The path of one probe, a stage a file (probe_internal.h lists them):
 *   manifest -> candidates -> compile (cache first, thread pool)
 *      (probe_cands.c)
 *   -> per T: draw inputs (seeded, by the manifest's rules), the float64
 *      reference (its template, run in the worker), baseline checked
 *      against it, every candidate checked against the baseline's bits
 *      (bitwise) or the reference's error (kl) -> trials
 *      (probe_check.c, judged by probe_judge.c)
 *   -> per T: the passing candidates timed cold, interleaved, their timed
 *      outputs verified -> trials (probe_search.c, probe_time.c)
 *   -> per class: the winner per T, merged into ranges -> decisions
 *      (probe_decide.c).
 * Trials and faults go to the DB as they happen (probe_record.c); what
 * the user sees is probe_output.c's.
 *
 * Loop thread only.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_internal.h"

static int device_fingerprint_json(const hct_device_t *d, char **out) {
  json_t *j = hct__device_json(d);
  *out = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(j);
  return *out ? 0 : hct__error(HCT_ENOMEM, "out of memory");
}

/* The op, its token counts, the card, the DB and this probe's keys; the
 * card's fingerprint recorded.  Nothing is probed yet. */
static int probe_open(probe_t *P) {
  const hct_probe_opts_t *o = P->o;
  int rc;
  if (o->kernels_dir) hct__strlcpy(P->kdir, o->kernels_dir, sizeof P->kdir);
  else if ((rc = hct__kernels_dir(P->kdir, sizeof P->kdir)) != 0) return rc;
  if ((rc = hct__manifest_load(P->kdir, o->op ? o->op : "hc_read", &P->op)) != 0) return rc;
  /* An op is checked by its manifest's inputs and reference. */
  if ((rc = hct__reference_ready(P->op)) != 0) return rc;
  /* No token list: the op's representative counts (probe_tokens), else
   * its range when it fits in one list. */
  P->tokens = o->tokens;
  if (P->tokens.n == 0 && (rc = hct__op_probe_tokens(P->op, &P->tokens)) != 0) return rc;
  for (int k = 0; k < P->tokens.n; k++) {
    const int T = P->tokens.t[k];
    if (T < P->op->tmin || T > P->op->tmax)
      return hct__error(HCT_ERANGE, "token count %d: op '%s' supports %d..%d", T, P->op->name,
                        P->op->tmin, P->op->tmax);
  }
  P->pick = calloc(MAX_CANDS, sizeof *P->pick);
  P->pick_of = calloc(MAX_CANDS, sizeof *P->pick_of);
  if (P->pick == NULL || P->pick_of == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  if ((rc = hct__device_find(o->device ? o->device : "0", &P->dev)) != 0) return rc;
  if ((rc = hct__reference_job(P->op, P->dev.backend, P->dev.arch, &P->ref_job)) != 0) return rc;

  if (o->db_path) hct__strlcpy(P->dbpath, o->db_path, sizeof P->dbpath);
  else if ((rc = hct__default_db_path(P->dbpath, sizeof P->dbpath, 1)) != 0) return rc;
  if ((rc = hct__db_open(P->dbpath, 0, &P->db)) != 0) return rc;

  hct_db_keys_t *K = &P->keys;
  hct__hostname(K->host, sizeof K->host);
  hct__strlcpy(K->uuid, P->dev.uuid, sizeof K->uuid);
  hct__device_model_key(&P->dev, K->model_key, sizeof K->model_key);
  hct__strlcpy(K->driver_version, P->dev.driver_version, sizeof K->driver_version);
  hct__strlcpy(K->compiler_version, P->dev.compiler_version, sizeof K->compiler_version);
  hct__strlcpy(K->hctune_version, HCT_VERSION_STRING, sizeof K->hctune_version);
  char *fp = NULL;
  if ((rc = device_fingerprint_json(&P->dev, &fp)) != 0) return rc;
  rc = hct__db_device_upsert(P->db, K, P->dev.name, P->dev.arch, fp);
  free(fp);
  /* HCTUNE_PROBE_SEED fixes the checks' inputs, so that two probes can be
   * compared trial by trial (tests/gpu-check.sh: figures on the card and
   * on the host); each trial stores its seed either way. */
  const char *fixed = getenv("HCTUNE_PROBE_SEED");
  hct__rng_seed(&P->rng, fixed != NULL && fixed[0] != '\0' ? strtoull(fixed, NULL, 0)
                                                           : hct__now_ns() ^ ((uint64_t)getpid() << 32));
  return rc;
}

/* probe --stale: only the counts whose decision is missing or stale on
 * this card.  *nothing set (and said) when every decision is current. */
static int probe_stale(probe_t *P, int *nothing) {
  const hct_probe_opts_t *o = P->o;
  hct_tokens_t keep;
  char report[4096];
  *nothing = 0;
  int rc = hct__stale_tokens(P->db, P->op, &P->dev, &P->tokens, &keep, report, sizeof report);
  if (rc != 0) return rc;
  if (!o->quiet && !o->json && report[0]) fprintf(stderr, "%s", report);
  if (keep.n > 0) {
    P->tokens = keep;
    return 0;
  }
  *nothing = 1;
  if (o->json)
    printf("{\"event\":\"result\",\"op\":\"%s\",\"device\":\"%s\",\"stale\":0,\"decisions\":[]}\n",
           P->op->name, P->dev.uuid);
  else if (!o->quiet)
    printf("%s on %s: every decision is current; nothing to probe\n", P->op->name, P->dev.name);
  return 0;
}

/* Quarantined candidates are not tried again unless asked to; the check
 * needs the template hash only, so it comes before compiling (a template
 * that failed to compile is not compiled again). */
static int skip_quarantined(probe_t *P) {
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (i == P->baseline) continue;
    int rc = hct__compile_key(&c->job);
    if (rc != 0) return rc;
    hct_qcand_t q = hct__probe_qcand(P, c);
    int skip = hct__quarantine_skip(P->db, &q, 1, P->o->retry_quarantined);
    if (skip < 0) return skip;
    if (skip) {
      c->dead = 1;
      hct__probe_progress(P, "skip", 0, 0, "%s is quarantined on this card (--retry-quarantined tries it)",
                          c->c.label);
    }
  }
  return 0;
}

/* Every GPU call from here on runs in a worker process: a candidate that
 * faults, hangs or poisons its context costs a worker, not the probe.
 * The worker opens the card and loads the reference and every candidate
 * still in play. */
static int start_worker(probe_t *P) {
  int rc;
  hct__probe_count(P, HCT_PS_WORKER, 1);
  if ((rc = hct__worker_start(NULL, &P->w)) != 0) return rc;
  if ((rc = hct__worker_open(P->w, P->dev.uuid)) != 0) return rc;
  if ((rc = hct__worker_reference_with(P->w, P->kdir, P->op->name, P->ref_job.key, P->dbpath,
                                       P->pcheck_job.status == 0 ? P->pcheck_job.key : NULL)) != 0)
    return hct__error(rc, "op '%s': reference: %s", P->op->name, hct_last_error());
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (c->dead) continue;
    rc = hct__worker_load(P->w, i, P->kdir, P->op->name, c->c.v->name, c->c.params, c->job.key,
                          P->dbpath);
    if (rc != 0) {
      if (i == P->baseline) return hct__error(rc, "baseline %s: %s", c->c.label, hct_last_error());
      if ((rc = hct__probe_cand_failed(P, i, "parity", rc, 0, 0, 0)) != 0) return rc;
      continue;
    }
    c->loaded = 1;
  }
  return 0;
}

/* The k-th count: faults of earlier probes there, then every check and
 * the timing (above checks.all_points_up_to: the timing first, and the
 * checks of what the search keeps, hct__probe_check_late). */
static int probe_count(probe_t *P, int k, int sets) {
  const hct_probe_opts_t *o = P->o;
  const int T = P->tokens.t[k], nT = P->tokens.n;
  int rc;
  if ((rc = hct__probe_check_interrupt(P)) != 0) return rc;
  /* Faults of earlier probes at this T (a grid barrier that timed out
   * at T or below holds here too). */
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (c->dead || i == P->baseline || c->failed[k]) continue;
    hct_qcand_t q = hct__probe_qcand(P, c);
    int skip = hct__quarantine_skip(P->db, &q, T, o->retry_quarantined);
    if (skip < 0) return skip;
    c->failed[k] = skip != 0;
  }
  /* --check-only has no search to keep anything. */
  if (T > P->op->checks_all_up_to && !o->check_only) return hct__probe_check_late(P, k, sets);
  hct__probe_progress(P, "check", k, nT, "T=%d: parity of every candidate, %d input sets with and without pending",
                      T, sets);
  const int was = hct__probe_stage(P, HCT_PS_CHECK_ALL);
  for (int pending = 0; rc == 0 && pending <= 1; pending++)
    for (int s = 0; rc == 0 && s < sets; s++) rc = hct__probe_check_T(P, k, pending, NULL);
  hct__probe_stage(P, was);
  if (rc != 0) return rc;
  for (int i = 0; i < P->n; i++) {
    char why[256];
    cand_t *c = &P->cands[i];
    c->checked[k] = 1;
    c->passed[k] = !c->dead && !c->failed[k] && hct__run_supports(&c->c, &P->dev, T, why, sizeof why);
  }
  return o->check_only ? 0 : hct__probe_time_T(P, k, 1);
}

/*
 * The card's copy bandwidth, recorded with it (hct__db_device_copy_bw_set):
 * the rate `hctune report` measures winners' floors against.  Measured in
 * the worker, whose context is open and whose card is idle now (issue 34:
 * no second context after the worker exits); where the worker cannot (an
 * older one, a fake), on a card of the probe's own.  A failure only says
 * so: the probe's results stand, and the report falls back to the model's
 * nominal rate.
 */
static void copy_bw(probe_t *P) {
  const int was = hct__probe_stage(P, HCT_PS_COPYBW);
  double bw = 0;
  int rc = hct__worker_copy_bw(P->w, &bw);
  if (rc != 0) {
    hct__error_clear();
    rc = hct__copy_bw_measure(&P->dev, &bw);
  }
  char host[256];
  hct__hostname(host, sizeof host);
  if (rc == 0) rc = hct__db_device_copy_bw_set(P->db, P->dev.uuid, host, bw);
  if (rc != 0) fprintf(stderr, "hctune probe: copy bandwidth not recorded: %s\n", hct_last_error());
  hct__error_clear();
  P->copy_bw = rc == 0 ? bw : 0;
  hct__probe_stage(P, was);
}

/* The candidates through every stage up to the decisions: compiled,
 * loaded, every count checked and timed.  An error here ends the run as
 * "failed" (probe_fail). */
static int probe_run(probe_t *P) {
  const hct_probe_opts_t *o = P->o;
  int rc;
  if ((rc = skip_quarantined(P)) != 0) return rc;
  int was = hct__probe_stage(P, HCT_PS_COMPILE);
  rc = hct__probe_compile(P);
  hct__probe_stage(P, HCT_PS_WORKER);
  if (rc == 0) rc = start_worker(P);
  hct__probe_stage(P, was);
  if (rc != 0) return rc;
  const int sets = o->check_sets > 0 ? o->check_sets : 1;
  for (int k = 0; k < P->tokens.n; k++)
    if ((rc = probe_count(P, k, sets)) != 0) return rc;
  hct__probe_progress_end(P);
  if (o->copy_bw) copy_bw(P);
  return 0;
}

/* The breakdown into the run's row. */
static int record_breakdown(probe_t *P, const json_t *b) {
  char *text = b ? json_dumps(b, JSON_COMPACT) : NULL;
  int rc = text ? hct__db_run_set_breakdown(P->db, P->run_id, text) : hct__error(HCT_ENOMEM, "out of memory");
  free(text);
  return rc;
}

/* Decided, the run ended "done" and the result shown.  An error of the
 * decisions or of the run's end leaves the run as it is. */
static int probe_finish(probe_t *P) {
  const hct_probe_opts_t *o = P->o;
  json_t *result = json_pack("{s:s, s:s, s:s, s:s, s:s}", "event", "result", "op", P->op->name,
                             "device", P->dev.uuid, "name", P->dev.name, "run_id", P->run_id);
  int was = hct__probe_stage(P, HCT_PS_DECIDE);
  int rc = o->check_only ? 0 : hct__probe_decide(P, result);
  hct__probe_stage(P, HCT_PS_RECORD);
  /* The breakdown closes here: the run's record is its last write. */
  json_decref(P->breakdown);
  P->breakdown = hct__probe_breakdown_json(P);
  if (rc == 0) rc = record_breakdown(P, P->breakdown);
  if (rc == 0) rc = hct__db_run_end(P->db, P->run_id, "done");
  hct__probe_stage(P, was);
  json_object_set_new(result, "wall_s", json_real((double)(hct__now_ns() - P->t0) / 1e9));
  json_object_set(result, "breakdown", P->breakdown);
  if (o->json) {
    hct__probe_result_json(result);
  } else if (rc == 0 && !o->no_table && !o->check_only) {
    hct__probe_table(P);
    if (P->copy_bw > 0)
      printf("copy bandwidth of %s: %.2f TB/s (device to device, read + write), recorded\n", P->dev.name,
             P->copy_bw / 1e12);
    hct__probe_breakdown_print(P->breakdown, stdout, "");
    printf("probe took %.1f s; results in %s\n", (double)(hct__now_ns() - P->t0) / 1e9, P->dbpath);
  }
  json_decref(result);
  return rc;
}

/* A run that failed (or was interrupted) says so in the DB, keeping the
 * error's message. */
static void probe_fail(probe_t *P, int rc) {
  hct__probe_progress_end(P);
  if (P->db == NULL || !P->run_id[0]) return;
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", hct_last_error());
  /* Where the time went up to the failure: kept with the run too. */
  json_t *b = hct__probe_breakdown_json(P);
  record_breakdown(P, b);
  /* Where the time went up to here, on stderr: a probe stopped because it
   * took too long says where it was taking it. */
  if (!P->o->json && !P->o->quiet) hct__probe_breakdown_print(b, stderr, "");
  json_decref(b);
  hct__db_run_end(P->db, P->run_id, rc == HCT_EINTERRUPTED ? "interrupted" : "failed");
  hct__error(rc, "%s", saved);
}

static void probe_close(probe_t *P) {
  for (int i = 0; i < P->n; i++) hct__compile_job_clear(&P->cands[i].job);
  hct__compile_job_clear(&P->ref_job);
  hct__compile_job_clear(&P->pcheck_job);
  free(P->pcheck_holder);
  free(P->cands);
  free(P->pick);
  free(P->pick_of);
  hct__worker_stop(P->w);
  if (P->db) hct__db_close(P->db);
  if (P->op) hct__manifest_free(P->op);
  json_decref(P->breakdown);
}

/* The probe's stages, in order; see the top of this file. */
static int probe_stages(probe_t *P) {
  int rc = probe_open(P), nothing = 0;
  if (rc == 0 && P->o->stale) rc = probe_stale(P, &nothing);
  if (rc != 0 || nothing) return rc;
  if ((rc = hct__probe_candidates(P)) != 0) return rc;
  char args[128];
  snprintf(args, sizeof args, "{\"candidates\":%d}", P->n);
  if ((rc = hct__db_run_begin(P->db, &P->keys, P->op->name, args, P->run_id)) != 0) return rc;
  if (P->o->parent_run) rc = hct__db_run_set_parent(P->db, P->run_id, P->o->parent_run);
  if (rc == 0) rc = probe_run(P);
  if (rc != 0) {
    probe_fail(P, rc);
    return rc;
  }
  return probe_finish(P);
}

int hct__probe(const hct_probe_opts_t *o) {
  probe_t P;
  memset(&P, 0, sizeof P);
  P.o = o;
  P.tty = isatty(2);
  P.t0 = hct__now_ns();
  hct__probe_clock_start(&P);
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = hct__probe_on_interrupt;
  sigemptyset(&sa.sa_mask);
  hct__probe_interrupt_clear();
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  int rc = probe_stages(&P);
  probe_close(&P);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  return rc;
}
