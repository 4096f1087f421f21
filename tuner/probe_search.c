/*
 * probe_search.c: a family's points searched by successive halving before
 * the deciding timing (tuner/search.c has the rule): each round timed in
 * the worker and recorded as trials that do not decide.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_internal.h"

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
 * any other (hct__probe_cand_failed), gets an infinite median, and the others
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
  hct__probe_progress(P, "search", round, 0, "T=%d: %s: %d points, %d samples each", T, S->v->name, nl, samples);
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
    int rc = hct__probe_time_grouped(P, live, nl, T, opts, deadline, res, &failed, &groups);
    json_decref(opts);
    if (rc != 0) {
      free(res);
      if (failed < 0) return rc;
      if ((rc = hct__probe_cand_failed(P, failed, "timing", rc, T, 0, 0)) != 0) return rc;
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
      hct__probe_trial_init(P, c, &t, "timing", T, 0);
      t.cold = P->op->timing_cold;
      char figs[320];
      if (r->err != 0) {
        snprintf(figs, sizeof figs, "{\"error_code\":\"%s\",\"search\":{\"round\":%d,\"samples\":%d},\"decides\":0}",
                 hct_err_name(r->err), round, samples);
        hct__probe_trial_timed(&t, r, NULL);
        t.figures_json = figs;
        rc = hct__probe_trial_add(P, &t);
        continue;
      }
      out[where[q]] = r->s;
      hct__probe_trial_timed(&t, r, "pass");
      snprintf(figs, sizeof figs, "{\"batch\":%d,\"search\":{\"strategy\":\"halving\",\"round\":%d,"
               "\"samples\":%d},\"seconds\":%.3f,\"decides\":0}", batch, round, samples, r->seconds);
      t.figures_json = figs;
      rc = hct__probe_trial_add(P, &t);
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
static int search_T(probe_t *P, int k);

int hct__probe_search_T(probe_t *P, int k) {
  const int was = hct__probe_stage(P, HCT_PS_SEARCH);
  int rc = search_T(P, k);
  hct__probe_stage(P, was);
  return rc;
}

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
    hct__probe_progress(P, "search", 0, 0, "T=%d: %s: %d of %d points go on to the deciding timing (%d samples spent, "
             "%d carried from T=%d)", P->tokens.t[k], v->name, ns, n, timings, nc, k > 0 ? P->tokens.t[k - 1] : 0);
  }
  return 0;
}
