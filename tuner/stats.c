/*
 * stats.c: summaries of timing samples (median, p10, p90, the 95%
 * confidence interval of the median from order statistics), the
 * significance rule a challenger must pass to replace an incumbent, the
 * choice of a winner, and the merging of per-T winners into ranges.
 *
 * Why order statistics rather than a bootstrap: see hct_summary_t in
 * stats.h.  Any thread.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "stats.h"

/* Above this many samples the binomial ranks come from the normal
 * approximation; at and below it they are exact.  At 1000 the two differ
 * by at most one rank (tests/test_stats.c checks it). */
#define EXACT_RANKS_MAX 1000
#define Z_975 1.959963984540054
#define TAIL 0.025 /* each side of a 95% interval */

/* P(B <= k) for B ~ binomial(n, 1/2) stays under TAIL for the k returned:
 * the largest k (0-based count) with P(B <= k) <= TAIL, or -1 if none. */
static int exact_tail_rank(int n) {
  double logc = -n * log(2.0); /* log of C(n,0) / 2^n */
  double cdf = 0.0;
  int k = -1;
  for (int i = 0; i <= n / 2; i++) {
    cdf += exp(logc);
    if (cdf > TAIL * (1 + 1e-12)) break;
    k = i;
    logc += log((double)(n - i)) - log((double)(i + 1)); /* C(n,i+1)/C(n,i) */
  }
  return k;
}

int hct__median_ci_ranks(int n, int *lo, int *hi) {
  if (n < 1) {
    *lo = *hi = -1;
    return 0;
  }
  int k; /* 1-based lower rank: interval [x(k), x(n+1-k)] */
  if (n <= EXACT_RANKS_MAX) {
    /* The interval misses the median when at most k-1 samples fall below
     * it, or at most k-1 above: 2 P(B <= k-1) <= 5%. */
    k = exact_tail_rank(n) + 1;
  } else {
    /* P(B <= k-1) ~ Phi((k - 1/2 - n/2) / (sqrt(n)/2)) <= TAIL. */
    k = (int)floor(n / 2.0 + 0.5 - Z_975 * sqrt((double)n) / 2.0);
  }
  if (k < 1) {
    *lo = 0;
    *hi = n - 1;
    return 0;
  }
  *lo = k - 1;
  *hi = n - k;
  return 1;
}

double hct__quantile_sorted(const double *sorted, int n, double q) {
  if (n < 1) return NAN;
  if (q <= 0) return sorted[0];
  if (q >= 1) return sorted[n - 1];
  double h = (n - 1) * q;
  int i = (int)floor(h);
  if (i >= n - 1) return sorted[n - 1];
  return sorted[i] + (h - i) * (sorted[i + 1] - sorted[i]);
}

void hct__summarize_sorted(const double *sorted, int n, hct_summary_t *s) {
  memset(s, 0, sizeof *s);
  s->n = n > 0 ? n : 0;
  if (n < 1) {
    s->median = s->min = s->max = s->p10 = s->p90 = s->ci_lo = s->ci_hi = NAN;
    s->rel_ci = INFINITY;
    return;
  }
  s->min = sorted[0];
  s->max = sorted[n - 1];
  s->median = (n % 2) ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  s->p10 = hct__quantile_sorted(sorted, n, 0.10);
  s->p90 = hct__quantile_sorted(sorted, n, 0.90);
  int lo, hi;
  int reached = hct__median_ci_ranks(n, &lo, &hi);
  s->ci_lo = sorted[lo];
  s->ci_hi = sorted[hi];
  if (!reached || !(s->median > 0)) {
    s->rel_ci = INFINITY;
    return;
  }
  /* The interval is not symmetric around the median; the wider side is the
   * one that bounds how wrong the median may be. */
  s->rel_ci = HCT_MAX(s->median - s->ci_lo, s->ci_hi - s->median) / s->median;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int hct__summarize(const double *x, int n, hct_summary_t *s) {
  if (n < 1) {
    hct__summarize_sorted(x, 0, s);
    return 0;
  }
  double *c = malloc((size_t)n * sizeof *c);
  if (c == NULL) return hct__error(HCT_ENOMEM, "cannot summarize %d samples: out of memory", n);
  memcpy(c, x, (size_t)n * sizeof *c);
  qsort(c, (size_t)n, sizeof *c, cmp_double);
  hct__summarize_sorted(c, n, s);
  free(c);
  return 0;
}

/* ---- decisions ---------------------------------------------------------- */

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

int hct__timing_stands(const hct_timing_res_t *res, int n, const uint8_t *rank, const uint8_t *out) {
  for (int j = 0; j < n; j++) {
    if (!out[j]) continue;
    for (int i = 0; i < n; i++)
      if (!out[i] && res[i].pruned && (rank == NULL || rank[j] <= rank[i])) return 0;
  }
  return 1;
}

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
