/*
 * probe_serve.c: checks cover what is served (issue 29).  A decision made
 * at a probed count serves the counts up to the geometric midpoints to its
 * neighbours (hct__cover_ranges); a variant wrong only off its tiles (T
 * not a multiple of its rows per block, a tail it mishandles) passes at
 * every probed count of a sparse op and would be served where it is
 * wrong.  So before a count's winners are decided for, each is checked at
 * the ends of what its count covers and at a partial tile after and before
 * a whole one there; one that fails is out everywhere, and the count is
 * timed again for the next.  Where every count is probed (decode) these
 * are all probed counts, checked already: nothing more runs.
 */
#include <stdio.h>
#include <string.h>

#include "probe_internal.h"

static int gcd(int a, int b) {
  while (b != 0) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The op's representative counts (its probe_tokens; without them, for an
 * op whose range is too large for a list, the counts probed). */
static hct_tokens_t representatives(probe_t *P) {
  hct_tokens_t rep;
  if (hct__op_probe_tokens(P->op, &rep) != 0) rep = P->tokens;
  hct__error_clear();
  return rep;
}

/* The op's tile: the spacing of its representative counts (their greatest
 * common divisor: 16 for the prefill op's 16, 128, ..., 32768; 1 where
 * every count is one). */
static int op_tile(const hct_tokens_t *rep) {
  int g = 0;
  for (int k = 0; k < rep->n; k++) g = gcd(rep->t[k], g);
  return g > 0 ? g : 1;
}

/*
 * The counts of lo..hi a winner is checked at: its two ends, a tile plus
 * one (the first partial tile after a whole one) and a tile minus one (the
 * last partial tile before one): at most 4, distinct.
 */
static int serve_counts(int tile, int lo, int hi, int *out) {
  const int want[4] = {lo, hi, (lo + tile - 1) / tile * tile + 1, (hi + 1) / tile * tile - 1};
  int n = 0;
  for (int q = 0; q < 4; q++) {
    int dup = want[q] < lo || want[q] > hi;
    for (int j = 0; j < n && !dup; j++) dup = out[j] == want[q];
    if (!dup) out[n++] = want[q];
  }
  return n;
}

/* 1 when candidate c passed every check at T already: a probed count it
 * was checked at, or one it was checked at as a winner before. */
static int checked_at(const probe_t *P, const cand_t *c, int T) {
  for (int k = 0; k < P->tokens.n; k++)
    if (P->tokens.t[k] == T) return c->checked[k] && c->passed[k] && !c->failed[k];
  for (int j = 0; j < c->n_served_ok; j++)
    if (c->served_ok[j] == T) return 1;
  return 0;
}

/* What the k-th count covers (hct__cover_ranges over it alone: its
 * neighbours among the probed and representative counts bound it),
 * trimmed to candidate c's support. */
static int cover_of(probe_t *P, const hct_tokens_t *rep, int k, const cand_t *c, int *lo, int *hi) {
  const char *label[HCT_MAX_TOKEN_LIST] = {0};
  label[k] = c->c.label;
  hct_cover_t r;
  int nr = hct__cover_ranges(P->tokens.t, label, P->tokens.n, rep->t, rep->n, P->op->tmin,
                             P->op->tmax, &r, 1);
  if (nr < 0) return nr;
  *lo = r.tmin;
  *hi = r.tmax;
  hct__probe_trim(P, c, k, k, lo, hi);
  return 0;
}

/* Candidate i checked at the counts the k-th count's decision would serve
 * it for; *ok 0 when it failed one (it is out). */
static int serve_one(probe_t *P, const hct_tokens_t *rep, int k, int i, int *ok) {
  cand_t *c = &P->cands[i];
  int lo, hi, counts[4];
  int rc = cover_of(P, rep, k, c, &lo, &hi);
  const int n = rc == 0 ? serve_counts(op_tile(rep), lo, hi, counts) : 0;
  *ok = 1;
  for (int j = 0; rc == 0 && *ok && j < n; j++) {
    if (checked_at(P, c, counts[j])) continue;
    if ((rc = hct__probe_check_at(P, counts[j], i, ok)) != 0) break;
    if (*ok && c->n_served_ok < (int)HCT_ARRAY_SIZE(c->served_ok)) c->served_ok[c->n_served_ok++] = counts[j];
    if (*ok) continue;
    hct__probe_progress(P, "reject", 0, 0, "%s is not decided for at T=%d (it would serve %d..%d): a "
                        "check at T=%d failed; the count is timed again for the next", c->c.label,
                        P->tokens.t[k], lo, hi, counts[j]);
    if (!c->dead) {
      /* Its reference failed there: nothing could check its bits. */
      c->dead = 1;
      hct__worker_unload(P->w, i);
    }
  }
  return rc;
}

static int serve_T(probe_t *P, int k, uint8_t *out, int *again);

int hct__probe_serve_T(probe_t *P, int k, uint8_t *out, int *again) {
  const int was = hct__probe_stage(P, HCT_PS_CHECK_SERVE);
  int rc = serve_T(P, k, out, again);
  hct__probe_stage(P, was);
  return rc;
}

static int serve_T(probe_t *P, int k, uint8_t *out, int *again) {
  const hct_tokens_t rep = representatives(P);
  for (int dk = 0; dk < hct__probe_n_decisions(P); dk++) {
    const int w = hct__probe_winner_at(P, k, dk, 1);
    int ok = 1;
    if (w < 0) continue;
    int rc = serve_one(P, &rep, k, w, &ok);
    if (rc != 0) return rc;
    if (!ok) {
      out[w] = 1;
      *again = 1;
      return 0;
    }
  }
  return 0;
}
