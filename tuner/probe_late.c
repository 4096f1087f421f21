/*
 * probe_late.c: a count above the manifest's checks.all_points_up_to, the
 * stage that stands in for the checks there: the search first, then its
 * finalists through every check (tuner/probe_check.c), then the timing
 * (tuner/probe_time.c).  The driver (tuner/probe.c) calls it; it calls
 * those stages down, and none calls it back.
 *
 * Loop thread only.
 */
#include <stdio.h>
#include <string.h>

#include "probe_internal.h"

/* Every check of hct__probe_check_T, with and without pending, `sets` input sets
 * each, on the candidates of only[]; each is then checked at k. */
static int check_all_runs(probe_t *P, int k, int sets, const uint8_t *only) {
  for (int pending = 0; pending <= 1; pending++)
    for (int s = 0; s < sets; s++) {
      int rc = hct__probe_check_T(P, k, pending, only);
      if (rc != 0) return rc;
    }
  for (int i = 0; i < P->n; i++)
    if (only[i]) P->cands[i].checked[k] = 1;
  return 0;
}

/* Adds to only[] the references candidate i's bits are checked against,
 * up the chain: hct__probe_check_T judges a reference on the same inputs first. */
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
 * the baseline go through every check of hct__probe_check_T; a finalist that fails
 * is out, and the next point of its family's ranking is checked in its
 * place, until the family has as many passing finalists as the search
 * kept or none is left.  A point never checked here is recorded as
 * "unchecked" and not timed to decide: it is never decided for at this
 * count.  Then the deciding timing and the verification of the timed
 * outputs, as at every count.
 */
int hct__probe_check_late(probe_t *P, int k, int sets) {
  const int T = P->tokens.t[k];
  char why[256];
  int in_play = 0, rc;
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    c->passed[k] = !c->dead && !c->failed[k] && hct__run_supports(&c->c, &P->dev, T, why, sizeof why);
    in_play += c->passed[k];
  }
  hct__probe_progress(P, "search", 0, 0, "T=%d: %d points in play timed first, the finalists checked after "
           "(checks.all_points_up_to %d: %s)", T, in_play, P->op->checks_all_up_to, P->op->checks_why);
  if ((rc = hct__probe_search_T(P, k)) != 0) return rc;
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
    hct__probe_progress(P, "check", round, 0, "T=%d: %d finalists and references (of %d points in play), every check "
             "with and without pending", T, n_only, in_play);
    const int was = hct__probe_stage(P, HCT_PS_CHECK_LATE);
    rc = check_all_runs(P, k, sets, only);
    hct__probe_stage(P, was);
    if (rc != 0) return rc;
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
          hct__probe_progress(P, "check", 0, 0, "T=%d: %s (%d. of its family's ranking) checked in place of a finalist "
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
    hct__probe_trial_init(P, c, &t, "parity", T, 0);
    hct__strlcpy(t.status, "unchecked", sizeof t.status);
    t.log = log;
    if ((rc = hct__probe_trial_add(P, &t)) != 0) return rc;
  }
  hct__probe_progress(P, "check", 0, 0, "T=%d: %d points left unchecked (not decided for here)", T, unchecked);
  return P->o->check_only ? 0 : hct__probe_time_T(P, k, 0);
}
