/*
 * search.c: how the points of one variant (a family) are chosen for the
 * deciding timing at one token count, when there are too many to time
 * every one to a tight interval within the probe's budget.
 *
 * "exhaustive" (the default) times them all.  "halving" is successive
 * halving: every point is timed with few samples, the best fraction kept,
 * the survivors timed again with more samples, and so on until a few are
 * left; those go on to the probe's deciding timing with everyone else.  A
 * point is dropped only when it is clearly slower than the cut (rule
 * "ci": its interval lies wholly above the interval of the point at the
 * cut), so noise in a round of three samples cannot drop the best point;
 * rule "median" is the textbook version that ranks by median alone (the
 * tests show where it misses).  The best few points of the neighbouring
 * token count (carry) survive the first round: the best point moves little
 * from one T to the next.
 *
 * The timing itself is the caller's (a callback): the probe's worker on a
 * GPU, a cost function in the tests.  Loop thread only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

typedef struct spoint_s {
  int id;
  int carried;
  hct_summary_t s;
} spoint_t;

static int by_median(const void *a, const void *b) {
  const spoint_t *x = a, *y = b;
  double mx = isnan(x->s.median) ? INFINITY : x->s.median, my = isnan(y->s.median) ? INFINITY : y->s.median;
  return (mx > my) - (mx < my);
}

int hct__search_samples(const hct_search_t *cfg, int round) {
  double s = cfg->first_samples;
  for (int r = 0; r < round; r++) s *= cfg->growth;
  return (int)HCT_MIN(s, (double)cfg->max_samples);
}

int hct__search_halving(const hct_search_t *cfg, const int *ids, int n, const int *carry,
                        int n_carry, hct_search_time_fn time_fn, void *arg, int *survivors,
                        int *n_survivors, int *timings, int *ranked) {
  *n_survivors = 0;
  if (timings) *timings = 0;
  if (n <= 0) return 0;
  spoint_t *pts = calloc((size_t)n, sizeof *pts);
  int *round_ids = calloc((size_t)n, sizeof *round_ids);
  hct_summary_t *res = calloc((size_t)n, sizeof *res);
  int *dropped = calloc((size_t)n, sizeof *dropped);
  if (pts == NULL || round_ids == NULL || res == NULL || dropped == NULL) {
    free(pts);
    free(round_ids);
    free(res);
    free(dropped);
    return hct__error(HCT_ENOMEM, "out of memory for the search");
  }
  int m = n, rc = 0;
  /* ranked is filled from the back: a round's dropped points go before
   * those of the rounds before it, so the later a point was dropped the
   * better it ranks. */
  int rank_end = n;
  for (int k = 0; k < n; k++) {
    pts[k].id = ids[k];
    for (int c = 0; c < n_carry; c++) pts[k].carried |= carry[c] == ids[k];
  }
  for (int round = 0; m > cfg->final_points; round++) {
    const int samples = hct__search_samples(cfg, round);
    for (int k = 0; k < m; k++) round_ids[k] = pts[k].id;
    if ((rc = time_fn(arg, round, round_ids, m, samples, res)) != 0) break;
    if (timings) *timings += m * samples;
    for (int k = 0; k < m; k++) pts[k].s = res[k];
    qsort(pts, (size_t)m, sizeof *pts, by_median);
    /* The cut: the best `keep` of them, never fewer than final_points. */
    int cut = (int)ceil(cfg->keep * m);
    cut = HCT_MAX(cut, cfg->final_points);
    const int last = samples >= cfg->max_samples;
    if (cut >= m && !last) continue; /* nothing to drop yet: more samples */
    const hct_summary_t *at = &pts[HCT_MIN(cut, m) - 1].s;
    int kept = 0, nd = 0;
    for (int k = 0; k < m; k++) {
      const hct_summary_t *s = &pts[k].s;
      int keep = k < cut && isfinite(s->median);
      /* Not clearly slower than the cut point: its interval (with under
       * six samples, its fastest sample: noise on a GPU makes samples
       * slower, rarely faster) reaches the cut's median.  The last round
       * (samples at their cap) keeps the cut only. */
      if (!keep && !last && cfg->ci_rule && isfinite(s->median) && s->ci_lo <= at->median) keep = 1;
      if (!keep && round == 0 && pts[k].carried && isfinite(s->median)) keep = 1;
      if (keep) pts[kept++] = pts[k];
      else dropped[nd++] = pts[k].id;
    }
    rank_end -= nd;
    if (ranked) memcpy(ranked + rank_end, dropped, (size_t)nd * sizeof *dropped);
    m = kept;
    if (last) break;
  }
  if (rc == 0) {
    /* Fastest first: the caller may time only the first few. */
    qsort(pts, (size_t)m, sizeof *pts, by_median);
    for (int k = 0; k < m; k++) survivors[k] = pts[k].id;
    *n_survivors = m;
    if (ranked) memcpy(ranked, survivors, (size_t)m * sizeof *survivors);
  }
  free(dropped);
  free(pts);
  free(round_ids);
  free(res);
  return rc;
}
