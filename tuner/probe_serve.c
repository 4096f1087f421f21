/*
 * probe_serve.c: checks cover what is served (issue 29).  A decision made
 * at a probed count serves the counts up to the geometric midpoints to its
 * neighbours (hct__cover_ranges); a variant wrong only off its tiles (T
 * not a multiple of its rows per block, a tail it mishandles) passes at
 * every probed count of a sparse op and would be served where it is
 * wrong.  So before a count's winners are decided for, each is checked at
 * the counts where what it computes can differ from what was checked
 * (serve_counts: the range's ends, the smallest and the largest tail of a
 * partial tile; docs/architecture.md has the argument); one that fails is
 * out everywhere, and the count is timed again for the next.  The winners
 * of every decision are checked together, a count at a time, smallest
 * first, on one input set per (count, pending) (issue 34: at T = 32767 an
 * input set is 2.7 GB drawn on the host, and three decisions drew three).
 * Where every count is probed (decode) these are all probed counts,
 * checked already: nothing more runs.
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
 * The counts of lo..hi a winner is checked at (the argument is
 * docs/architecture.md's, "Checks cover what is served"):
 *   lo and hi, the smallest and the largest count it serves (what grows
 *   with T: grids, waves, index arithmetic, memory, is largest at hi);
 *   the smallest tail after a whole tile: lo itself when lo is one past a
 *   multiple of the tile (every range above the first starts one past a
 *   geometric midpoint of two whole tiles: 257, 1025, 4097, 16385), else
 *   the first such count after lo (with a tile of 1, where every count is
 *   whole, lo + 1: a neighbour of the probed count);
 *   the largest tail, a tile minus one: the last such count before hi,
 *   at the largest magnitude the range serves.
 * At most 4, distinct.  Before issue 34 the smallest tail was always the
 * one after lo's tile (4113 beside 4097): the same tail at a larger count.
 */
static int serve_counts(int tile, int lo, int hi, int *out) {
  const int first_tail = tile > 1 && lo % tile == 1 ? lo : (lo + tile - 1) / tile * tile + 1;
  const int want[4] = {lo, hi, first_tail, (hi + 1) / tile * tile - 1};
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

/* The winners of the k-th count to check, one per candidate however many
 * decisions it wins, each with the counts its decision would serve it at
 * that it was not checked at yet. */
typedef struct serve_plan_s {
  int n;
  int who[HCT_MAX_FAMILIES + 2];
  int lo[HCT_MAX_FAMILIES + 2], hi[HCT_MAX_FAMILIES + 2];
  int counts[HCT_MAX_FAMILIES + 2][4], nc[HCT_MAX_FAMILIES + 2];
} serve_plan_t;

static int plan_of(probe_t *P, int k, serve_plan_t *S) {
  const hct_tokens_t rep = representatives(P);
  const int tile = op_tile(&rep);
  memset(S, 0, sizeof *S);
  for (int dk = 0; dk < hct__probe_n_decisions(P) && S->n < (int)HCT_ARRAY_SIZE(S->who); dk++) {
    const int w = hct__probe_winner_at(P, k, dk, 1);
    int seen = w < 0;
    for (int q = 0; q < S->n && !seen; q++) seen = S->who[q] == w;
    if (seen) continue;
    const cand_t *c = &P->cands[w];
    int lo, hi, counts[4];
    int rc = cover_of(P, &rep, k, c, &lo, &hi);
    if (rc != 0) return rc;
    const int q = S->n++;
    S->who[q] = w;
    S->lo[q] = lo;
    S->hi[q] = hi;
    const int m = serve_counts(tile, lo, hi, counts);
    for (int j = 0; j < m; j++)
      if (!checked_at(P, c, counts[j])) S->counts[q][S->nc[q]++] = counts[j];
  }
  return 0;
}

/* The smallest count of the plan above `after`, or -1. */
static int next_count(const serve_plan_t *S, int after) {
  int best = -1;
  for (int q = 0; q < S->n; q++)
    for (int j = 0; j < S->nc[q]; j++)
      if (S->counts[q][j] > after && (best < 0 || S->counts[q][j] < best)) best = S->counts[q][j];
  return best;
}

/* The plan's winners checked count by count, smallest first (a failure at
 * a small count spares the large ones: the count is timed again and the
 * next winners planned anew). */
static int serve_T(probe_t *P, int k, uint8_t *out, int *again) {
  serve_plan_t S;
  int rc = plan_of(P, k, &S);
  for (int T = next_count(&S, 0); rc == 0 && T > 0; T = next_count(&S, T)) {
    int who[HCT_MAX_FAMILIES + 2], qs[HCT_MAX_FAMILIES + 2], n = 0;
    /* The count's members, shallowest first: a reference other members'
     * bits are checked against is then held once (check_ready). */
    for (int d = 0; d < MAX_CANDS && n < S.n; d++)
      for (int q = 0; q < S.n; q++) {
        int at = 0;
        for (int j = 0; j < S.nc[q]; j++) at |= S.counts[q][j] == T;
        if (at && P->cands[S.who[q]].depth == d) {
          qs[n] = q;
          who[n++] = S.who[q];
        }
      }
    uint8_t ok[HCT_MAX_FAMILIES + 2];
    if ((rc = hct__probe_check_group(P, T, who, n, ok)) != 0) break;
    for (int j = 0; j < n; j++) {
      cand_t *c = &P->cands[who[j]];
      if (ok[j]) {
        if (c->n_served_ok < (int)HCT_ARRAY_SIZE(c->served_ok)) c->served_ok[c->n_served_ok++] = T;
        continue;
      }
      hct__probe_progress(P, "reject", 0, 0, "%s is not decided for at T=%d (it would serve %d..%d): a "
                          "check at T=%d failed; the count is timed again for the next", c->c.label,
                          P->tokens.t[k], S.lo[qs[j]], S.hi[qs[j]], T);
      if (!c->dead) {
        /* Its reference failed there: nothing could check its bits. */
        c->dead = 1;
        hct__worker_unload(P->w, who[j]);
      }
      out[who[j]] = 1;
      *again = 1;
    }
    if (*again) break;
  }
  return rc;
}

int hct__probe_serve_T(probe_t *P, int k, uint8_t *out, int *again) {
  const int was = hct__probe_stage(P, HCT_PS_CHECK_SERVE);
  int rc = serve_T(P, k, out, again);
  hct__probe_stage(P, was);
  return rc;
}
