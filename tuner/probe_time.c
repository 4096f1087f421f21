/*
 * probe_time.c: the timing of one token count: the deciding pass (in
 * groups when the card's memory asks for it), the other mode beside it,
 * and the verification of the timed launches' outputs before anything is
 * decided from them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_internal.h"

static int verify_T(probe_t *P, int k, uint8_t *out, int *incomplete);
static int time_other(probe_t *P, int k, int cold);

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
    hct__probe_trial_init(P, c, &t, "timing", T, 0);
    t.cold = cold;
    if (r->err != 0) {
      char figs[64];
      snprintf(figs, sizeof figs, "{\"error_code\":\"%s\"}", hct_err_name(r->err));
      hct__probe_trial_timed(&t, r, NULL);
      t.figures_json = figs;
      if ((rc = hct__probe_trial_add(P, &t)) != 0) break;
      if (decides) c->timed[kT] = 0;
      continue;
    }
    if (decides) {
      c->timing[kT] = r->s;
      c->timed[kT] = !r->pruned;
    }
    hct__probe_trial_timed(&t, r, r->pruned ? "pruned" : "pass");
    char figs[352];
    snprintf(figs, sizeof figs, "{\"batch\":%d,\"rounds\":%d,\"clock_checked\":%d,\"rel_ci\":%.4g,"
             "\"seconds\":%.3f,\"max\":%.3f,\"decides\":%d%s%s%s}", batch, r->rounds,
             r->clock_checked, isfinite(r->s.rel_ci) ? r->s.rel_ci : -1.0, r->seconds, r->s.max,
             decides, extra ? ",\"" : "", extra ? extra : "", extra ? "\":1" : "");
    t.figures_json = figs;
    if ((rc = hct__probe_trial_add(P, &t)) != 0) break;
  }
  return rc;
}

/* A candidate's rank in the timing's pruning (a candidate is pruned only
 * by a faster one of at most its rank): 1 for what competes in kl alone,
 * 0 for the rest, bit families' members included (issue 29: upmix, kl by
 * its class, must not be pruned out of pair_mma's family by a faster
 * kl-only variant such as wgmma_pu). */
static int prune_rank(const probe_t *P, const cand_t *c) {
  if (c->competes != HCT_PARITY_KL) return 0;
  for (int f = 0; f < P->op->n_families; f++)
    if (hct__variant_in_family(P->op, c->c.v, hct__op_family(P->op, P->op->families[f]))) return 0;
  return 1;
}

/*
 * After a deciding timing in groups (hct__probe_time_grouped): the baseline, the
 * winners of both classes and of the bit families, and the references their bits are verified
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
  for (int dk = 0; dk < hct__probe_n_decisions(P); dk++) {
    int w = hct__probe_winner_at(P, kT, dk, 0);
    for (int r = w; r >= 0; r = P->cands[r].ref) want[r] = 1;
  }
  int ids[MAX_CANDS], n = 0, failed = -1, groups = 0;
  json_t *ranks = json_array();
  for (int i = 0; i < P->n; i++) {
    P->cands[i].in_timing[kT] = 0;
    if (!want[i] || P->cands[i].dead) continue;
    ids[n++] = i;
    json_array_append_new(ranks, json_integer(prune_rank(P, &P->cands[i])));
  }
  json_object_set_new(opts, "ranks", ranks);
  json_object_set_new(opts, "prune_factor", json_real(-1.0));
  hct_timing_res_t *res = calloc((size_t)n, sizeof *res);
  if (res == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  hct__probe_progress(P, "time", 0, n, "T=%d: the %d contenders again, in one request", T, n);
  int rc = hct__probe_time_grouped(P, ids, n, T, opts, deadline, res, &failed, &groups);
  if (rc == 0 && groups > 1)
    rc = hct__error(HCT_ENOMEM, "T=%d: the %d contenders (the baseline, the winners and their references) "
                    "do not fit the card's memory at once, so their timed outputs cannot be verified", T, n);
  if (rc != 0 && failed >= 0) {
    free(res);
    /* A fault of one: it is out, and the deciding timing runs again. */
    int r = hct__probe_cand_failed(P, failed, "timing", rc, T, 0, 0);
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
      rank[k] = (uint8_t)prune_rank(P, &P->cands[ids[k]]);
      json_array_append_new(ranks, json_integer(rank[k]));
    }
    json_object_set_new(opts, "ranks", ranks);
    hct_timing_res_t *res = calloc((size_t)n, sizeof *res);
    if (opts == NULL || res == NULL) {
      json_decref(opts);
      free(res);
      return hct__error(HCT_ENOMEM, "out of memory");
    }
    hct__probe_progress(P, "time", 0, n, "T=%d: %d candidates, %s, %d launches per graph", T, n,
             cold ? "cold" : "hot", batch);
    int failed = -1, groups = 0;
    int deadline = 60000 + (int)(n * 2000 * HCT_MAX(1, P->o->sample_factor));
    rc = hct__probe_time_grouped(P, ids, n, T, opts, deadline, res, &failed, &groups);
    if (rc != 0) {
      json_decref(opts);
      free(res);
      if (failed < 0) return rc; /* not one candidate's doing */
      if ((rc = hct__probe_cand_failed(P, failed, "timing", rc, T, 0, 0)) != 0) return rc;
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
    hct__probe_progress_end(P);
    /* Before anything is decided from these figures: the outputs of the
     * launches the winners made while being timed. */
    uint8_t out[MAX_CANDS] = {0}, out_k[MAX_CANDS] = {0};
    int incomplete = 0;
    if (rc == 0 && decides) {
      const int was = hct__probe_stage(P, HCT_PS_VERIFY);
      rc = verify_T(P, kT, out, &incomplete);
      hct__probe_stage(P, was);
    }
    /* Then, the winners where their decisions reach (issue 29); a check
     * request ends the timing's allocation, so after the verification. */
    if (rc == 0 && decides && !incomplete) rc = hct__probe_serve_T(P, kT, out, &incomplete);
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
      hct__probe_progress(P, "time", 0, 0, "T=%d: timed again without the candidates the verification put out", T);
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
      hct__probe_progress(P, "verify", 0, 0, "T=%d: %s cannot be verified: its reference %s is out or was not timed",
               P->tokens.t[k], x->c.label, r->c.label);
      return 0;
    }
    want[c->ref] = 1;
  }
  return 0;
}

/*
 * Verifies after timing at the k-th count, before any decision: the
 * winners of every decision (every timed candidate with verify_all), whose
 * timed launches' outputs must pass hct__probe_timed_ok.  One that fails is recorded
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
      for (int dk = 0; dk < hct__probe_n_decisions(P) && !want[i]; dk++)
        want[i] = hct__probe_winner_at(P, k, dk, 0) == i;
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
      hct__probe_progress(P, "verify", 0, 0, "T=%d: %s cannot be verified: it was not among the contenders timed "
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
    hct__probe_progress(P, "verify", 0, n, "T=%d: the timed launches' outputs of %d candidates against %s", T, n,
             P->cands[vref].c.label);
    int failed = -1;
    rc = hct__worker_verify(P->w, ids, n, vref, 60000 + 2000 * n, vr, &failed);
    hct__probe_worker_took(P);
    hct__probe_count(P, HCT_PS_VERIFY, n);
    if (rc != 0) {
      /* One candidate's replay failed: it is out (and a dead worker
       * restarted, the timing's allocation with it: the others stay
       * unverified, and time_pass times them again). */
      free(vr);
      if (failed >= 0 && failed != P->baseline) {
        /* A reference's replay failing is that reference's fault. */
        rc = hct__probe_cand_failed(P, failed, "timed", rc, T, 0, 0);
        out[failed] = 1;
        *incomplete = 1;
      }
      break;
    }
    for (int q = 0; q < n && rc == 0; q++) {
      cand_t *c = &P->cands[ids[q]];
      char log[768];
      int ok = hct__probe_timed_ok(P, c, &vr[q], log, sizeof log);
      char figs[256];
      snprintf(figs, sizeof figs, "{\"sets\":%d,\"worst_set\":%d,\"mismatches\":%zu,\"unwritten\":%zu,"
               "\"nonfinite\":%zu,\"image_mismatches\":%zu,\"max_dist\":%.3g}", vr[q].sets,
               vr[q].worst_set, vr[q].mismatches, vr[q].unwritten, vr[q].nonfinite,
               vr[q].image_mismatches, isfinite(vr[q].max_dist) ? vr[q].max_dist : -1.0);
      if (ok) {
        /* The record that what is decided for was verified. */
        hct_db_trial_t t;
        hct__probe_trial_init(P, c, &t, "timed", T, 0);
        hct__strlcpy(t.status, "pass", sizeof t.status);
        t.cold = P->op->timing_cold;
        t.figures_json = figs;
        rc = hct__probe_trial_add(P, &t);
        c->verified[k] = 1;
        continue;
      }
      char line[800];
      snprintf(line, sizeof line, "T=%d: %s", T, log);
      rc = hct__probe_record_failure(P, c, "timed", "timed", T, 0, 0, figs, line);
      c->dead = 1;
      out[ids[q]] = 1;
      dead[ndead++] = ids[q];
      hct__probe_progress(P, "reject", 0, 0, "%s: timed check: %s", c->c.label, line);
      hct__probe_rejected(P, c, T, "timed", line);
    }
    free(vr);
    if (rc != 0) break; /* else the winners may have changed: choose again */
  }
  hct__probe_progress_end(P);
  for (int q = 0; q < ndead; q++) hct__worker_unload(P->w, dead[q]);
  return rc;
}

/* Times every candidate that passed at T in the mode the manifest decides
 * by (after the search, with `search`: hct__probe_check_late has run it already);
 * then the baseline and the winners of every decision in the other mode,
 * recorded beside them, so a winner that only wins with cold (or warm)
 * caches shows.  The second pass times at most three candidates. */
int hct__probe_time_T(probe_t *P, int k, int search) {
  int cold = P->op->timing_cold;
  int rc = search ? hct__probe_search_T(P, k) : 0;
  const int was = hct__probe_stage(P, HCT_PS_TIMING);
  if (rc == 0) rc = time_pass(P, k, cold, 1, NULL);
  if (rc == 0 && !P->o->one_mode) rc = time_other(P, k, !cold);
  hct__probe_stage(P, was);
  return rc;
}

/* The baseline and the winners of every decision timed in the other mode
 * (not deciding), recorded beside the deciding figures. */
static int time_other(probe_t *P, int k, int cold) {
  uint8_t only[MAX_CANDS] = {0};
  only[P->baseline] = 1;
  for (int dk = 0; dk < hct__probe_n_decisions(P); dk++) {
    int w = hct__probe_winner_at(P, k, dk, 1);
    if (w >= 0) only[w] = 1;
  }
  return time_pass(P, k, cold, 0, only);
}
