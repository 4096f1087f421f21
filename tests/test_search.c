/*
 * test_search.c: the search of a family's points (tuner/search.c) against
 * a cost function standing in for the GPU: a landscape over a grid of
 * parameter points, each sample of a point its cost times log-normal
 * noise (and, in the hard landscape, rare slow outliers as a shared card
 * gives them).  Successive halving with the interval rule must find a
 * point within 3% of the best in fewer samples than timing every point;
 * the textbook rule (by median alone) must miss on the hard landscape,
 * which is what the interval rule is for (on a crowd of points within the
 * noise of each other it then keeps most of them: the price of not
 * missing).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tuner.h"

#define GRID 8
#define NPTS (GRID * GRID)

typedef struct land_s {
  double cost[NPTS];   /* true median per point, us */
  double noise;        /* log-normal sd of one sample */
  double outlier_p;    /* chance of a sample 1.5x slow */
  hct_rng_t rng;
  int calls, samples;
  int fail_id;         /* a point whose timing fails (-1: none) */
  int error_at_round;  /* time_fn returns an error in this round (-1) */
  int seen_round0[NPTS];
} land_t;

/* A smooth bowl with its best at (5, 2), and a ridge of near-best points. */
static void land_smooth(land_t *L, double noise) {
  memset(L, 0, sizeof *L);
  for (int a = 0; a < GRID; a++)
    for (int b = 0; b < GRID; b++) {
      double da = (a - 5) / 8.0, db = (b - 2) / 8.0;
      L->cost[a * GRID + b] = 100.0 * (1 + 0.8 * da * da + 0.5 * db * db + 0.02 * ((a * 7 + b * 3) % 5) / 4.0);
    }
  L->noise = noise;
  L->fail_id = -1;
  L->error_at_round = -1;
}

/* Hard: every point within 6% of 100, one at 94 (id 41); outliers. */
static void land_hard(land_t *L) {
  memset(L, 0, sizeof *L);
  for (int k = 0; k < NPTS; k++) L->cost[k] = 100.0 + (k * 37 % 11) * 0.5;
  L->cost[41] = 94.0;
  L->noise = 0.04;
  L->outlier_p = 0.10;
  L->fail_id = -1;
  L->error_at_round = -1;
}

static double sample(land_t *L, int id) {
  double x = L->cost[id] * exp(L->noise * hct__rng_normal(&L->rng));
  if (L->outlier_p > 0 && (double)(hct__rng_next(&L->rng) >> 11) / 9007199254740992.0 < L->outlier_p) x *= 1.5;
  return x;
}

static int time_fn(void *arg, int round, const int *ids, int n, int samples, hct_summary_t *out) {
  land_t *L = arg;
  if (round == L->error_at_round) return hct__error(HCT_EGPU, "the card went away in round %d", round);
  L->calls++;
  double *x = malloc((size_t)samples * sizeof *x);
  for (int k = 0; k < n; k++) {
    if (round == 0) L->seen_round0[ids[k]]++;
    if (ids[k] == L->fail_id) { /* its time is spent all the same */
      memset(&out[k], 0, sizeof out[k]);
      out[k].median = INFINITY;
      L->samples += samples;
      continue;
    }
    for (int s = 0; s < samples; s++) x[s] = sample(L, ids[k]);
    hct__summarize(x, samples, &out[k]);
    L->samples += samples;
  }
  free(x);
  return 0;
}

static double best_cost(const land_t *L) {
  double b = INFINITY;
  for (int k = 0; k < NPTS; k++) b = fmin(b, L->cost[k]);
  return b;
}

/* What the probe does after the search: the survivors timed to a tight
 * interval (here: their true cost, as a converged timing reads it), the
 * fastest taken. */
static double chosen_cost(const land_t *L, const int *surv, int n) {
  double c = INFINITY;
  for (int k = 0; k < n; k++) c = fmin(c, L->cost[surv[k]]);
  return c;
}

static hct_search_t halving(int ci_rule) {
  hct_search_t s = {HCT_SEARCH_HALVING, 0.25, ci_rule, 3, 2, 24, 2, 2, 8};
  return s;
}

static int ranked_last[NPTS]; /* the last run's ranking of every point */

static int run(land_t *L, const hct_search_t *cfg, uint64_t seed, const int *carry, int n_carry,
               int *surv, int *ns) {
  int ids[NPTS];
  for (int k = 0; k < NPTS; k++) ids[k] = k;
  hct__rng_seed(&L->rng, seed);
  int timings = 0;
  for (int k = 0; k < NPTS; k++) ranked_last[k] = -1;
  int rc = hct__search_halving(cfg, ids, NPTS, carry, n_carry, time_fn, L, surv, ns, &timings, ranked_last);
  assert_int_equal(rc, 0);
  assert_int_equal(timings, L->samples);
  /* The ranking: every point once, the survivors first in their order. */
  int seen[NPTS] = {0};
  for (int k = 0; k < NPTS; k++) {
    assert_true(ranked_last[k] >= 0 && ranked_last[k] < NPTS);
    assert_int_equal(seen[ranked_last[k]]++, 0);
  }
  for (int k = 0; k < *ns; k++) assert_int_equal(ranked_last[k], surv[k]);
  return timings;
}

/* How many of the points cost less than point p. */
static int better_than(const land_t *L, int p) {
  int n = 0;
  for (int k = 0; k < NPTS; k++) n += L->cost[k] < L->cost[p];
  return n;
}

/* Within 3% of the best in every one of 100 runs, in fewer samples than
 * timing every point to the last round's count (the precision the search
 * ends with), by 40% on average. */
static void test_halving_finds_near_best(void **state) {
  (void)state;
  const hct_search_t cfg = halving(1);
  const int exhaustive = NPTS * cfg.max_samples;
  long total = 0;
  for (int trial = 0; trial < 100; trial++) {
    land_t L;
    land_smooth(&L, 0.03);
    int surv[NPTS], ns;
    int t = run(&L, &cfg, 1000 + (uint64_t)trial, NULL, 0, surv, &ns);
    total += t;
    assert_true(ns >= 1 && ns <= NPTS);
    double gap = chosen_cost(&L, surv, ns) / best_cost(&L) - 1;
    if (gap > 0.03) fail_msg("trial %d: %d survivors, the best of them %.1f%% off the best", trial, ns, 100 * gap);
    if (t >= exhaustive) fail_msg("trial %d: %d samples, timing every point takes %d", trial, t, exhaustive);
    /* The next in the ranking after the survivors (what the probe checks
     * when a survivor fails) reached a late round: among the best quarter
     * of the points, not a round-0 loser. */
    if (ns < NPTS && better_than(&L, ranked_last[ns]) > NPTS / 4)
      fail_msg("trial %d: the first point after the survivors has %d better ones of %d", trial,
               better_than(&L, ranked_last[ns]), NPTS);
  }
  printf("halving: %.0f samples a search on average, exhaustive %d\n", total / 100.0, exhaustive);
  assert_true(total / 100.0 < 0.6 * exhaustive);
}

/* The hard landscape: one point 6% ahead of a crowd, noisy samples and
 * outliers.  By median alone, a best point that drew an outlier among its
 * three samples is cut in round 0; the interval rule keeps it, because
 * its interval still reaches the cut's. */
static void test_median_rule_misses(void **state) {
  (void)state;
  int miss_median = 0, miss_ci = 0;
  long t_ci = 0;
  for (int trial = 0; trial < 200; trial++) {
    for (int rule = 0; rule <= 1; rule++) {
      hct_search_t cfg = halving(rule);
      cfg.keep = 0.25;
      land_t L;
      land_hard(&L);
      int surv[NPTS], ns;
      int t = run(&L, &cfg, 77 + (uint64_t)trial, NULL, 0, surv, &ns);
      double gap = chosen_cost(&L, surv, ns) / best_cost(&L) - 1;
      if (rule) t_ci += t;
      if (gap > 0.03 && rule) miss_ci++;
      if (gap > 0.03 && !rule) miss_median++;
    }
  }
  printf("hard landscape, 200 runs: the median rule missed %d, the interval rule %d (%.0f samples a search, "
         "exhaustive %d)\n", miss_median, miss_ci, t_ci / 200.0, NPTS * 24);
  assert_int_equal(miss_ci, 0);
  assert_true(miss_median >= 10);
}

/* Points carried from the previous T survive round 0 whatever it says;
 * a point whose timing failed is dropped; an error ends the search. */
static void test_carry_failure_error(void **state) {
  (void)state;
  hct_search_t cfg = halving(0);
  cfg.keep = 0.1;
  land_t L;
  land_smooth(&L, 0.03);
  /* The two worst points of the bowl, carried: round 1 times them. */
  const int carry[] = {0 * GRID + 7, 0 * GRID + 6};
  L.fail_id = 5 * GRID + 2; /* the best one fails */
  int surv[NPTS], ns;
  run(&L, &cfg, 5, carry, 2, surv, &ns);
  for (int k = 0; k < ns; k++) assert_int_not_equal(surv[k], L.fail_id);
  for (int k = 0; k < NPTS; k++) assert_int_equal(L.seen_round0[k], 1);
  /* Round 1 timed the carried ones: 7 kept by the cut plus 2 carried. */
  assert_true(L.calls >= 2);
  land_t E;
  land_smooth(&E, 0.03);
  E.error_at_round = 1;
  int ids[NPTS];
  for (int k = 0; k < NPTS; k++) ids[k] = k;
  hct__rng_seed(&E.rng, 9);
  assert_int_equal(hct__search_halving(&cfg, ids, NPTS, NULL, 0, time_fn, &E, surv, &ns, NULL, NULL), HCT_EGPU);
  assert_int_equal(ns, 0);
  assert_non_null(strstr(hct_last_error(), "round 1"));
  /* The samples per round: 3, 6, 12, 24, 24. */
  const hct_search_t d = halving(1);
  assert_int_equal(hct__search_samples(&d, 0), 3);
  assert_int_equal(hct__search_samples(&d, 2), 12);
  assert_int_equal(hct__search_samples(&d, 5), 24);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_halving_finds_near_best),
      cmocka_unit_test(test_median_rule_misses),
      cmocka_unit_test(test_carry_failure_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
