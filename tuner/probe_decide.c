/*
 * probe_decide.c: deciding and recording: the winner per probed count of
 * each decision (the classes bitwise and kl, and the op's bit families,
 * issue 29) by
 * the one winner rule (hct__pick_winner), ranges by the one range rule
 * (hct__cover_ranges, db/decide.c), and the decisions into the DB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_internal.h"

int hct__probe_n_decisions(const probe_t *P) { return 2 + P->op->n_families; }

const char *hct__probe_decision_parity(const probe_t *P, int dk, char *buf, size_t len) {
  if (dk < 2) hct__strlcpy(buf, hct__parity_name(dk == 0 ? HCT_PARITY_BITWISE : HCT_PARITY_KL), len);
  else snprintf(buf, len, HCT_FAMILY_PREFIX "%s", P->op->families[dk - 2]);
  return buf;
}

/* The candidate of a bit family's head at its default point (the one the
 * family's members are checked against, and what an engine asking for the
 * family gets without a decision), or -1 when the probe has none. */
static int head_cand(const probe_t *P, const hct_variant_t *head) {
  hct_point_t first;
  hct__point_first(head, &first);
  for (int i = 0; i < P->n; i++)
    if (P->cands[i].c.v == head && memcmp(&P->cands[i].job.point, &first, sizeof first) == 0)
      return i;
  return -1;
}

/* Whether candidate c takes part in decision dk: its class's rule for
 * bitwise and kl; for a bit family, the head or a variant whose bits are
 * the head's, and none that failed a check at any count (its bits against
 * the head's at every checked count are its admission). */
static int in_decision(const probe_t *P, const cand_t *c, int dk) {
  char parity[HCT_PARITY_LEN];
  hct__probe_decision_parity(P, dk, parity, sizeof parity);
  if (!hct__variant_in_parity(P->op, c->c.v, parity)) return 0;
  if (dk < 2) return 1;
  for (int k = 0; k < P->tokens.n; k++)
    if (c->failed[k]) return 0;
  return 1;
}

/* The winner at the k-th token count of decision dk (0 bitwise, 1 kl,
 * 2 + f the op's bit family f), by the one rule the tests check
 * (hct__pick_winner): the fastest one that beats the incumbent
 * significantly, else the incumbent: the baseline for the classes, the
 * family head's default point for a family; -1 when the baseline was not
 * timed there.  With verified_only, only candidates whose timed launches'
 * outputs were verified at k (and the baseline, the reference they are
 * verified against) take part: what is decided for. */
int hct__probe_winner_at(probe_t *P, int k, int dk, int verified_only) {
  if (!P->cands[P->baseline].timed[k]) return -1;
  const int inc = dk < 2 ? P->baseline
                         : head_cand(P, hct__op_family(P->op, P->op->families[dk - 2]));
  int m = 0, incumbent = -1;
  for (int i = 0; i < P->n; i++) {
    const cand_t *c = &P->cands[i];
    if (c->dead || !c->timed[k]) continue;
    if (verified_only && !c->verified[k] && i != P->baseline) continue;
    if (c->ref_only || !in_decision(P, c, dk)) continue;
    if (i == inc) incumbent = m;
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
void hct__probe_trim(probe_t *P, const cand_t *c, int first, int last, int *lo, int *hi) {
  char why[256];
  int a = P->tokens.t[first], b = P->tokens.t[last];
  while (a > *lo && hct__run_supports(&c->c, &P->dev, a - 1, why, sizeof why)) a--;
  while (b < *hi && hct__run_supports(&c->c, &P->dev, b + 1, why, sizeof why)) b++;
  *lo = a;
  *hi = b;
}

/* The decision ranges of one class: the winner per probed count (win[],
 * indexed like P->tokens), each count covering the counts up to the
 * geometric midpoints to its neighbours among the op's representative
 * counts, equal neighbours merged (hct__cover_ranges, db/decide.c), and
 * each range trimmed to its winner's support (lo[], hi[]).  Returns the
 * count of ranges or an error. */
typedef struct class_ranges_s {
  int win[HCT_MAX_TOKEN_LIST];
  hct_cover_t r[HCT_MAX_TOKEN_LIST];
  int lo[HCT_MAX_TOKEN_LIST], hi[HCT_MAX_TOKEN_LIST];
  int n;
} class_ranges_t;

static int class_ranges(probe_t *P, int dk, class_ranges_t *R) {
  const char *label[HCT_MAX_TOKEN_LIST];
  hct_tokens_t rep;
  /* An op without probe_tokens whose range is too large for a list: the
   * counts probed are its representatives. */
  if (hct__op_probe_tokens(P->op, &rep) != 0) rep = P->tokens;
  hct__error_clear();
  for (int kT = 0; kT < P->tokens.n; kT++) {
    R->win[kT] = hct__probe_winner_at(P, kT, dk, 1);
    label[kT] = R->win[kT] >= 0 ? P->cands[R->win[kT]].c.label : NULL;
  }
  int nr = hct__cover_ranges(P->tokens.t, label, P->tokens.n, rep.t, rep.n, P->op->tmin,
                             P->op->tmax, R->r, HCT_MAX_TOKEN_LIST);
  if (nr < 0) return nr;
  R->n = HCT_MIN(nr, HCT_MAX_TOKEN_LIST);
  for (int q = 0; q < R->n; q++) {
    R->lo[q] = R->r[q].tmin;
    R->hi[q] = R->r[q].tmax;
    hct__probe_trim(P, &P->cands[R->win[R->r[q].first]], R->r[q].first, R->r[q].last, &R->lo[q],
                    &R->hi[q]);
  }
  return R->n;
}

/* ---- the decisions ------------------------------------------------------- */

/* The decision row of range q of decision dk, and its line in result's
 * "decisions" (jdec). */
static void decision_of(probe_t *P, int dk, const class_ranges_t *R, int q,
                        hct_db_decision_t *x, json_t *jdec) {
  const int kT = R->r[q].first, kend = R->r[q].last;
  const cand_t *c = &P->cands[R->win[kT]], *b = &P->cands[P->baseline];
  x->keys = P->keys;
  hct__strlcpy(x->op, P->op->name, sizeof x->op);
  hct__probe_decision_parity(P, dk, x->parity, sizeof x->parity);
  x->tmin = R->lo[q];
  x->tmax = R->hi[q];
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
                                        x->parity, "tmin", R->lo[q], "tmax", R->hi[q], "variant",
                                        x->variant, "params", x->params, "class",
                                        x->variant_class, "median_us", x->median_us,
                                        "baseline_us", x->baseline_us));
}

int hct__probe_decide(probe_t *P, json_t *result) {
  int rc = 0;
  json_t *jdec = json_array();
  class_ranges_t *R = calloc(1, sizeof *R);
  hct_db_decision_t *d = calloc(HCT_MAX_TOKEN_LIST, sizeof *d);
  if (R == NULL || d == NULL) rc = hct__error(HCT_ENOMEM, "out of memory");
  for (int k = 0; rc == 0 && k < hct__probe_n_decisions(P); k++) {
    int nr = class_ranges(P, k, R);
    if (nr < 0) {
      rc = nr;
      break;
    }
    memset(d, 0, HCT_MAX_TOKEN_LIST * sizeof *d);
    for (int q = 0; q < nr; q++) decision_of(P, k, R, q, &d[q], jdec);
    hct__probe_count(P, HCT_PS_DECIDE, nr);
    if (nr > 0 && !P->o->no_decide) {
      const int was = hct__probe_stage(P, HCT_PS_RECORD);
      rc = hct__db_decisions_replace(P->db, d, nr);
      hct__probe_count(P, HCT_PS_RECORD, nr);
      hct__probe_stage(P, was);
    }
  }
  free(R);
  free(d);
  json_object_set_new(result, "decisions", jdec);
  return rc;
}
