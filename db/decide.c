/*
 * decide.c: the rules that turn figures into decisions (db/decide.h): the
 * significance rule a challenger must pass to replace an incumbent, the
 * choice of a winner, and the merging of per-T winners into ranges.  The
 * probe (tuner/probe_decide.c) and a fleet merge (db/merge.c) both call
 * them, so a fleet decides by the probe's own rules.  Any thread.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "decide.h"

/* ---- the winner rule ---------------------------------------------------- */

int hct__significantly_faster(const hct_summary_t *ch, const hct_summary_t *inc,
                              double min_margin) {
  if (ch->n < 1 || inc->n < 1) return 0;
  if (!(ch->median > 0) || !(inc->median > 0)) return 0;
  if (!(ch->ci_hi < inc->ci_lo)) return 0;
  return (inc->median - ch->median) >= min_margin * inc->median;
}

static int usable(const hct_timing_res_t *r) {
  return r->err == 0 && r->s.n > 0 && r->s.median > 0;
}

int hct__pick_winner(const hct_timing_res_t *res, int n, int incumbent, double min_margin) {
  int have_inc = incumbent >= 0 && incumbent < n && usable(&res[incumbent]);
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (!usable(&res[i]) || i == incumbent) continue;
    if (have_inc && !hct__significantly_faster(&res[i].s, &res[incumbent].s, min_margin))
      continue;
    if (best < 0 || res[i].s.median < res[best].s.median) best = i;
  }
  if (have_inc) return best >= 0 ? best : incumbent;
  return best;
}

/* ---- the range rule ----------------------------------------------------- */

/* The largest T with T*T <= a*b: where a's cover ends, between a and b. */
static int geo_mid(int a, int b) {
  int64_t p = (int64_t)a * b;
  int64_t t = (int64_t)sqrt((double)p);
  while (t * t > p) t--;
  while ((t + 1) * (t + 1) <= p) t++;
  return (int)t;
}

static int ascending_within(const int *t, int n, int tmin, int tmax, const char *what) {
  for (int k = 0; k < n; k++)
    if (t[k] < tmin || t[k] > tmax || (k > 0 && t[k] <= t[k - 1]))
      return hct__error(HCT_EINVAL, "%s count %d (index %d): not ascending within %d..%d", what,
                        t[k], k, tmin, tmax);
  return 0;
}

int hct__cover_ranges(const int *probed, const char *const *winners, int n, const int *rep,
                      int nrep, int tmin, int tmax, hct_cover_t *out, int max_out) {
  if (tmax < tmin)
    return hct__error(HCT_EINVAL, "token range %d..%d: the end is below the start", tmin, tmax);
  int rc = ascending_within(probed, n, tmin, tmax, "probed");
  if (rc == 0) rc = ascending_within(rep, nrep, tmin, tmax, "representative");
  if (rc != 0) return rc;
  int count = 0, r = 0, have = 0;
  hct_cover_t cur = {0, 0, 0, 0, NULL};
  /* Walk probed and rep together: for probed[k], the largest count of
   * either list below it and the smallest above it. */
  for (int k = 0; k < n; k++) {
    const int T = probed[k];
    while (r < nrep && rep[r] < T) r++;
    int below = r > 0 ? rep[r - 1] : 0;
    if (k > 0 && probed[k - 1] > below) below = probed[k - 1];
    int r_above = r < nrep && rep[r] == T ? r + 1 : r;
    int above = r_above < nrep ? rep[r_above] : 0;
    if (k + 1 < n && (above == 0 || probed[k + 1] < above)) above = probed[k + 1];
    if (winners[k] == NULL) continue;
    const int lo = below > 0 ? geo_mid(below, T) + 1 : tmin;
    const int hi = above > 0 ? geo_mid(T, above) : tmax;
    if (have && cur.last == k - 1 && cur.tmax + 1 == lo && strcmp(cur.winner, winners[k]) == 0) {
      cur.tmax = hi;
      cur.last = k;
      continue;
    }
    if (have && count++ < max_out) out[count - 1] = cur;
    cur = (hct_cover_t){lo, hi, k, k, winners[k]};
    have = 1;
  }
  if (have && count++ < max_out) out[count - 1] = cur;
  return count;
}
