/*
 * probe_decide.c: deciding and recording: the winner per probed count by
 * the one winner rule (hct__pick_winner), ranges by the one range rule
 * (hct__cover_ranges, tuner/stats.c), and the decisions into the DB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_internal.h"

/* The winner at the k-th token count among candidates whose class is
 * allowed, by the one rule the tests check (hct__pick_winner): the fastest
 * one that beats the baseline significantly, else the baseline; -1 when
 * the baseline was not timed there.  With verified_only, only candidates
 * whose timed launches' outputs were verified at k (and the baseline, the
 * reference they are verified against) take part: what is decided for. */
int hct__probe_winner_at(probe_t *P, int k, int allow_kl, int verified_only) {
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

int hct__probe_decide(probe_t *P, json_t *result) {
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
      win[kT] = hct__probe_winner_at(P, kT, classes[k] == HCT_PARITY_KL, 1);
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
