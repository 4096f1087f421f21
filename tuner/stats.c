/*
 * stats.c: summaries of timing samples (median, p10, p90, the 95%
 * confidence interval of the median from order statistics), and whether
 * a timing pass stands once its verification put candidates out.  The
 * winner and range rules are db/decide.c's.
 *
 * Why order statistics rather than a bootstrap: see hct_summary_t in
 * db/decide.h.  Any thread.
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

/* ---- after verification ------------------------------------------------- */

int hct__timing_stands(const hct_timing_res_t *res, int n, const uint8_t *rank, const uint8_t *out) {
  for (int j = 0; j < n; j++) {
    if (!out[j]) continue;
    for (int i = 0; i < n; i++)
      if (!out[i] && res[i].pruned && (rank == NULL || rank[j] <= rank[i])) return 0;
  }
  return 1;
}
