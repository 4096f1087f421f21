/*
 * probe_check.c: the checks of one token count: every candidate in play
 * against its reference on one input set (the baseline first, against the
 * float64 reference); above checks.all_points_up_to, tuner/probe_late.c
 * asks for the search's finalists only.
 */
#include <stdio.h>
#include <string.h>

#include "probe_internal.h"

/* What a check call runs for candidate c (worker.h): every candidate the
 * runs of one allocation and the producer run; bitwise classes (the
 * baseline too) and every reference of one the second allocation that must
 * give the same bits (bits cannot equal bits that change run to run). */
static int check_flags(const cand_t *c) {
  return HCT_CHECK_REPEAT | HCT_CHECK_PRODUCER |
         (c->c.v->parity != HCT_PARITY_KL || c->is_ref ? HCT_CHECK_TWIN : 0);
}

/*
 * Candidate i cannot be checked at count T (the k-th probed count, or
 * k < 0: a count a decision serves, hct__probe_check_group): its reference (a
 * variant it must equal bit for bit) did not pass its own class there.  A
 * trial says why ("unsupported": no failure of its own, nothing
 * quarantined), and it is out at that probed count only.
 */
static int reference_missing(probe_t *P, int i, int k, int T, int pending, uint64_t seed) {
  cand_t *c = &P->cands[i];
  const cand_t *r = &P->cands[c->ref];
  char log[512];
  snprintf(log, sizeof log, "T=%d%s: its reference %s did not pass its class here, so its bits "
           "cannot be checked", T, pending ? " pending" : "", r->c.label);
  hct_db_trial_t t;
  hct__probe_trial_init(P, c, &t, "parity", T, pending);
  hct__strlcpy(t.status, "unsupported", sizeof t.status);
  t.seed = seed;
  t.log = log;
  int rc = hct__probe_trial_add(P, &t);
  if (k >= 0) c->failed[k] = 1;
  hct__probe_progress(P, "reject", 0, 0, "%s: %s", c->c.label, log);
  hct__probe_rejected(P, c, T, "parity", log);
  return rc;
}

/* One check call of the k-th count (k < 0: of a count no probe timed,
 * hct__probe_check_group): the input set's seed, the check's
 * deadline, and which candidate's outputs the worker holds as the
 * reference of the next check (holds; -1: none). */
typedef struct check_call_s {
  int k, T, pending;
  uint64_t seed;
  int deadline;
  int holds;
  uint8_t passed_here[MAX_CANDS]; /* passed this check */
  uint8_t judged[MAX_CANDS];      /* checked on this input set already
                                     (hct__probe_check_group) */
} check_call_t;

/* One check call in the worker, counted in the current stage's checks,
 * its input set's time moved to the breakdown's inputs. */
static int worker_check(probe_t *P, int cand, int ref, const check_call_t *K, int flags, int timeout_ms,
                        hct_worker_check_t *out) {
  int rc = hct__worker_check(P->w, cand, ref, K->T, K->pending, K->seed, flags, timeout_ms, out);
  hct__probe_worker_took(P);
  hct__probe_count(P, P->clock.cur, 1);
  return rc;
}

/* The baseline on a fresh input set, judged against the float64
 * reference: the first call on an input set draws it and computes the
 * reference in the worker, so it gets time for that. */
static int check_baseline(probe_t *P, check_call_t *K, hct_worker_check_t *ck) {
  cand_t *base = &P->cands[P->baseline];
  verdict_t vd;
  int rc = worker_check(P, P->baseline, -1, K, check_flags(base), 120000, ck);
  if (rc != 0) {
    int r = hct__probe_cand_failed(P, P->baseline, "parity", rc, K->T, K->pending, K->seed);
    return r != 0 ? r : rc;
  }
  P->fresh_worker = 0; /* the worker holds this input set now */
  if ((rc = hct__probe_judge_baseline(P, ck, K->T, K->pending, K->seed, &vd)) != 0) return rc;
  /* Up to five runs a check (worker.h), each given the watchdog's margin. */
  K->deadline = hct__worker_deadline_ms(ck->run_ms * 4 * 5);
  K->passed_here[P->baseline] = 1;
  K->holds = P->baseline;
  hct_db_trial_t t;
  hct__probe_trial_init(P, base, &t, "parity", K->T, K->pending);
  hct__strlcpy(t.status, "pass", sizeof t.status);
  t.seed = K->seed;
  t.figures_json = vd.figures;
  return hct__probe_trial_add(P, &t);
}

/*
 * Before candidate i's check: a fresh worker draws the inputs and the
 * float64 reference again on the baseline (with time for that, so the
 * candidate's own run keeps the launch deadline), and the reference's own
 * outputs become the worker's reference by a run of it without one
 * (worker.h), so that a fault there is its own.
 */
static int check_ready(probe_t *P, check_call_t *K, const cand_t *c) {
  int rc;
  if (P->fresh_worker) {
    hct_worker_check_t warm;
    rc = worker_check(P, P->baseline, -1, K, check_flags(&P->cands[P->baseline]), 120000, &warm);
    if (rc != 0) {
      int r = hct__probe_cand_failed(P, P->baseline, "parity", rc, K->T, K->pending, K->seed);
      return r != 0 ? r : rc;
    }
    P->fresh_worker = 0;
    K->holds = P->baseline;
  }
  if (K->passed_here[c->ref] && c->ref != K->holds) {
    hct_worker_check_t own;
    rc = worker_check(P, c->ref, -1, K, HCT_CHECK_REPEAT, K->deadline, &own);
    if (rc == 0) {
      K->holds = c->ref;
      return 0;
    }
    if ((rc = hct__probe_cand_failed(P, c->ref, "parity", rc, K->T, K->pending, K->seed)) != 0)
      return rc;
    K->passed_here[c->ref] = 0;
    K->holds = -1;
  }
  return 0;
}

/* Candidate i checked against its reference on the call's inputs, its
 * verdict recorded; a wrong answer at one T disqualifies it everywhere. */
static int check_one(probe_t *P, check_call_t *K, int i) {
  cand_t *c = &P->cands[i];
  int rc = check_ready(P, K, c);
  if (rc != 0) return rc;
  if (!K->passed_here[c->ref])
    /* Not this candidate's fault, and nothing to compare its bits with:
     * out at this T only, unchecked ("unsupported": no failure). */
    return reference_missing(P, i, K->k, K->T, K->pending, K->seed);
  hct_worker_check_t ck;
  rc = worker_check(P, i, c->ref, K, check_flags(c), K->deadline, &ck);
  if (rc != 0) {
    if (K->holds == i) K->holds = -1;
    return hct__probe_cand_failed(P, i, "parity", rc, K->T, K->pending, K->seed);
  }
  K->holds = c->ref; /* a check with a reference leaves the worker holding it */
  if (!P->producer_warned && strncmp(ck.producer_skipped, "the producer kernel", 19) == 0) {
    /* The producer check cannot run on this card: say so once, loudly. */
    P->producer_warned = 1;
    hct__log(HCT_LOG_WARN, "the producer check is skipped: %s", ck.producer_skipped);
  }
  char log[768];
  verdict_t vd;
  hct__probe_judge_all(P, c, &ck, K->T, K->pending, K->seed, &vd, log, sizeof log);
  hct_db_trial_t t;
  hct__probe_trial_init(P, c, &t, vd.check, K->T, K->pending);
  hct__strlcpy(t.status, vd.status, sizeof t.status);
  t.seed = K->seed;
  t.figures_json = vd.figures;
  const int pass = strcmp(vd.status, "pass") == 0;
  if (!pass) t.log = log;
  if ((rc = hct__probe_trial_add(P, &t)) != 0) return rc;
  if (pass) {
    K->passed_here[i] = 1;
    return 0;
  }
  if ((rc = hct__probe_quarantine(P, c, K->T, vd.status, log)) != 0) return rc;
  c->dead = 1;
  hct__worker_unload(P->w, i);
  hct__probe_progress(P, "reject", 0, 0, "%s: %s check: %s: %s", c->c.label, vd.check, vd.status, log);
  hct__probe_rejected(P, c, K->T, vd.check, log);
  return 0;
}

/*
 * Checks every candidate in play at the k-th count (only[i] set, or all
 * with only NULL), on one input set drawn from a fresh seed, with or
 * without pending: the baseline first against the float64 reference, then
 * the others by depth (hct__probe_candidates), so that a reference is
 * judged on these inputs before any candidate whose bits must equal its
 * own.
 */
int hct__probe_check_T(probe_t *P, int k, int pending, const uint8_t *only) {
  check_call_t *K = calloc(1, sizeof *K);
  if (K == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  K->k = k;
  K->T = P->tokens.t[k];
  K->pending = pending;
  K->seed = hct__rng_next(&P->rng);
  const uint64_t t_base = hct__now_ns();
  hct_worker_check_t ck;
  int rc = check_baseline(P, K, &ck);
  /* A check that takes seconds (large T: gigabytes drawn, copied and
   * compared) gets a progress line per candidate, not one per T. */
  const int long_step = P->tty || hct__now_ns() - t_base > 1000000000ull;
  int n_check = 0, done_check = 0, max_depth = 0;
  for (int i = 0; i < P->n; i++) {
    n_check += i != P->baseline && !P->cands[i].dead && !P->cands[i].failed[k] && (only == NULL || only[i]);
    max_depth = HCT_MAX(max_depth, P->cands[i].depth);
  }
  for (int d = 1; rc == 0 && d <= max_depth; d++)
    for (int i = 0; rc == 0 && i < P->n; i++) {
      cand_t *c = &P->cands[i];
      char why[256];
      if (c->depth != d || c->dead || c->failed[k] || (only != NULL && !only[i]) ||
          !hct__run_supports(&c->c, &P->dev, K->T, why, sizeof why))
        continue;
      if ((rc = hct__probe_check_interrupt(P)) != 0) break;
      if (long_step)
        hct__probe_progress(P, "check", ++done_check, n_check, "T=%d%s: %s", K->T,
                            pending ? " pending" : "", c->c.label);
      rc = check_one(P, K, i);
    }
  free(K);
  return rc;
}

/* The chain of candidate i from the top: the references its bits are
 * checked against, the farthest first, then i; the baseline left out. */
static int chain_of(probe_t *P, int i, int *chain) {
  int n = 0;
  for (int r = i; r >= 0 && r != P->baseline && n < MAX_CANDS; r = P->cands[r].ref) chain[n++] = r;
  for (int a = 0, b = n - 1; a < b; a++, b--) {
    const int t = chain[a];
    chain[a] = chain[b];
    chain[b] = t;
  }
  return n;
}

/*
 * One input set at T (with or without pending) for hct__probe_check_group:
 * the baseline, then each member's chain from the top, every candidate
 * judged once on these inputs however many members share it (a bit
 * family's head for its members, the baseline for all); ok[q] cleared for
 * a member that, or whose reference, failed or cannot run at T.
 */
static int check_set(probe_t *P, int T, int pending, const int *who, int n, uint8_t *ok) {
  check_call_t *K = calloc(1, sizeof *K);
  if (K == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  K->k = -1;
  K->T = T;
  K->pending = pending;
  K->seed = hct__rng_next(&P->rng);
  hct_worker_check_t ck;
  int rc = check_baseline(P, K, &ck);
  K->judged[P->baseline] = 1;
  for (int q = 0; rc == 0 && q < n; q++) {
    int chain[MAX_CANDS];
    const int m = chain_of(P, who[q], chain);
    for (int j = 0; rc == 0 && ok[q] && j < m; j++) {
      char why[256];
      const int c = chain[j];
      if (!K->judged[c]) {
        K->judged[c] = 1;
        if (!P->cands[c].dead && hct__run_supports(&P->cands[c].c, &P->dev, T, why, sizeof why))
          rc = check_one(P, K, c);
      }
      ok[q] = K->passed_here[c];
    }
  }
  free(K);
  return rc;
}

int hct__probe_check_group(probe_t *P, int T, const int *who, int n, uint8_t *ok) {
  char why[256], names[512] = "";
  for (int q = 0; q < n; q++) ok[q] = 1;
  /* Nothing to check against where the baseline cannot run. */
  if (!hct__run_supports(&P->cands[P->baseline].c, &P->dev, T, why, sizeof why)) return 0;
  for (int q = 0, o = 0; q < n && o < (int)sizeof names - 1; q++)
    o += snprintf(names + o, sizeof names - (size_t)o, "%s%s", q ? ", " : "", P->cands[who[q]].c.label);
  hct__probe_progress(P, "check", 0, 0, "T=%d: %s, served there by %s, with and without pending", T, names,
                      n == 1 ? "a decision" : "decisions");
  int rc = 0;
  for (int pending = 0; rc == 0 && pending <= 1; pending++) {
    int any = 0;
    for (int q = 0; q < n; q++) any |= ok[q];
    if (!any) break;
    if ((rc = hct__probe_check_interrupt(P)) != 0) break;
    rc = check_set(P, T, pending, who, n, ok);
  }
  return rc;
}
