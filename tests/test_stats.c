/*
 * test_stats.c: the statistics of tuner/stats.c on synthetic samples: ranks
 * of the median's confidence interval, its coverage, summaries; and the
 * rules of db/decide.c: significance, the choice of a winner and range
 * merging.
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

#include "common.h"
#include "stats.h"

/* ---- a seeded generator for synthetic noise ------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double uniform01(void) { return ((rnd() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static double normal(void) {
  return sqrt(-2 * log(uniform01())) * cos(2 * M_PI * uniform01());
}

/* ---- ranks and summaries -------------------------------------------------- */

static void test_ranks_exact(void **state) {
  (void)state;
  /* Lower 0-based rank k-1 where k-1 is the largest count with
   * P(B <= k-1) <= 2.5% for B ~ binomial(n, 1/2), from tables. */
  static const struct {
    int n, reached, lo, hi;
  } cases[] = {
      {1, 0, 0, 0},   {5, 0, 0, 4},    {6, 1, 0, 5},     {10, 1, 1, 8},
      {11, 1, 1, 9},  {20, 1, 5, 14},  {100, 1, 39, 60},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    int lo, hi;
    int reached = hct__median_ci_ranks(cases[i].n, &lo, &hi);
    if (reached != cases[i].reached || lo != cases[i].lo || hi != cases[i].hi)
      fail_msg("n=%d: got %d [%d,%d], want %d [%d,%d]", cases[i].n, reached, lo, hi,
               cases[i].reached, cases[i].lo, cases[i].hi);
  }
  int lo, hi;
  assert_int_equal(hct__median_ci_ranks(0, &lo, &hi), 0);
  assert_int_equal(lo, -1);
}

/* The exact ranks stop at n = 1000 and the normal approximation takes over:
 * the switch must not jump. */
static void test_ranks_approx_continuous(void **state) {
  (void)state;
  int prev_lo = -1;
  for (int n = 990; n <= 1010; n++) {
    int lo, hi;
    assert_int_equal(hct__median_ci_ranks(n, &lo, &hi), 1);
    assert_int_equal(lo + hi, n - 1); /* symmetric */
    if (prev_lo >= 0 && (lo < prev_lo || lo > prev_lo + 1))
      fail_msg("n=%d: lower rank %d after %d", n, lo, prev_lo);
    prev_lo = lo;
  }
  /* n = 10000: k = floor(5000.5 - 1.96 * 50) = 4902. */
  int lo, hi;
  hct__median_ci_ranks(10000, &lo, &hi);
  assert_int_equal(lo, 4901);
  assert_int_equal(hi, 10000 - 4902);
}

static void test_summary_values(void **state) {
  (void)state;
  double x[] = {7, 3, 11, 1, 9, 5, 2, 10, 4, 8, 6};
  double orig[HCT_ARRAY_SIZE(x)];
  memcpy(orig, x, sizeof x);
  hct_summary_t s;
  assert_int_equal(hct__summarize(x, 11, &s), 0);
  assert_memory_equal(x, orig, sizeof x); /* input untouched */
  assert_int_equal(s.n, 11);
  assert_true(s.median == 6 && s.min == 1 && s.max == 11);
  assert_true(s.p10 == 2 && s.p90 == 10);
  assert_true(s.ci_lo == 2 && s.ci_hi == 10);
  assert_true(fabs(s.rel_ci - 4.0 / 6.0) < 1e-12);

  double e[] = {4, 1, 3, 2, 6, 5}; /* even n: mean of the middle two */
  assert_int_equal(hct__summarize(e, 6, &s), 0);
  assert_true(s.median == 3.5);
  assert_true(fabs(s.p10 - 1.5) < 1e-12); /* h = 0.5 between 1 and 2 */
  assert_true(s.ci_lo == 1 && s.ci_hi == 6 && isfinite(s.rel_ci));

  assert_int_equal(hct__summarize(e, 5, &s), 0); /* 95% unreachable */
  assert_true(isinf(s.rel_ci));
  assert_true(s.ci_lo == 1 && s.ci_hi == 6);

  assert_int_equal(hct__summarize(e, 0, &s), 0);
  assert_int_equal(s.n, 0);
  assert_true(isnan(s.median) && isinf(s.rel_ci));
}

/*
 * Coverage: over many draws of lognormal noise, the interval holds the true
 * median (exp(mu)) about 95% of the time.  An interval that were too wide
 * ([min, max]) would cover nearly always and fail the upper bound; one
 * that were too narrow would fail the lower one.
 */
static double coverage(int n, int trials, uint64_t seed) {
  const double mu = log(25.0), sigma = 0.3, truth = 25.0;
  double *x = malloc((size_t)n * sizeof *x);
  assert_non_null(x);
  rng_state = seed;
  int hit = 0;
  for (int t = 0; t < trials; t++) {
    for (int i = 0; i < n; i++) x[i] = exp(mu + sigma * normal());
    hct_summary_t s;
    assert_int_equal(hct__summarize(x, n, &s), 0);
    hit += s.ci_lo <= truth && truth <= s.ci_hi;
  }
  free(x);
  return (double)hit / trials;
}

static void test_ci_coverage(void **state) {
  (void)state;
  static const struct {
    int n, trials;
  } cases[] = {{10, 1000}, {25, 1000}, {60, 1000}, {2000, 300}};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    double c = coverage(cases[i].n, cases[i].trials, 1234 + i);
    print_message("coverage n=%d over %d trials: %.3f\n", cases[i].n, cases[i].trials, c);
    if (c < 0.90 || c > 0.99)
      fail_msg("n=%d: coverage %.3f outside [0.90, 0.99]", cases[i].n, c);
  }
}

/* ---- significance and winners -------------------------------------------- */

/* A summary of 21 samples spread +-spread around m. */
static hct_summary_t around(double m, double spread) {
  double x[21];
  for (int i = 0; i < 21; i++) x[i] = m * (1 + spread * (i - 10) / 10.0);
  hct_summary_t s;
  hct__summarize(x, 21, &s);
  return s;
}

static void test_significance(void **state) {
  (void)state;
  hct_summary_t inc = around(100, 0.002);
  hct_summary_t faster5 = around(95, 0.002), faster15 = around(98.5, 0.002);
  hct_summary_t wide5 = around(95, 0.2); /* 5% faster, overlapping CIs */
  hct_summary_t slower = around(110, 0.002), none;
  hct__summarize(NULL, 0, &none);

  assert_int_equal(hct__significantly_faster(&faster5, &inc, 0.02), 1);
  assert_int_equal(hct__significantly_faster(&faster15, &inc, 0.02), 0); /* below margin */
  assert_int_equal(hct__significantly_faster(&faster15, &inc, 0.01), 1);
  assert_int_equal(hct__significantly_faster(&wide5, &inc, 0.02), 0);    /* overlap */
  assert_int_equal(hct__significantly_faster(&inc, &wide5, 0.0), 0);
  assert_int_equal(hct__significantly_faster(&slower, &inc, 0.02), 0);
  assert_int_equal(hct__significantly_faster(&inc, &inc, 0.0), 0);
  assert_int_equal(hct__significantly_faster(&none, &inc, 0.02), 0);
  assert_int_equal(hct__significantly_faster(&faster5, &none, 0.02), 0);
}

static void test_pick_winner(void **state) {
  (void)state;
  hct_timing_res_t r[5];
  memset(r, 0, sizeof r);
  r[0].s = around(100, 0.002);  /* incumbent */
  r[1].s = around(95, 0.002);   /* significantly faster */
  r[2].s = around(90, 0.002);   /* faster still: the winner */
  r[3].s = around(80, 0.002);   /* fastest, but stopped by an error */
  r[3].err = HCT_EGPU;
  r[4].s = around(85, 0.5);     /* faster median, CI overlaps */
  assert_int_equal(hct__pick_winner(r, 5, 0, 0.02), 2);
  /* Only noisy or marginal challengers: the incumbent stays. */
  r[1].s = around(99, 0.002);
  r[2].s = around(98.6, 0.002);
  assert_int_equal(hct__pick_winner(r, 5, 0, 0.02), 0);
  /* No incumbent: the fastest usable candidate, noisy or not. */
  assert_int_equal(hct__pick_winner(r, 5, -1, 0.02), 4);
  /* An incumbent that failed cannot be defended. */
  r[0].err = HCT_EFAULT;
  assert_int_equal(hct__pick_winner(r, 5, 0, 0.02), 4);
  r[0].err = 0;
  /* A slower incumbent loses to the challenger that beats it most. */
  r[0].s = around(200, 0.002);
  assert_int_equal(hct__pick_winner(r, 5, 0, 0.02), 4);
  /* Nothing usable. */
  for (int i = 0; i < 5; i++) r[i].err = HCT_EGPU;
  assert_int_equal(hct__pick_winner(r, 5, 0, 0.02), -1);
}

/* ---- ranges ----------------------------------------------------------------- */

/*
 * Issue 27: the probe and a fleet merge turn winners into ranges by one
 * function.  Sparse counts probed 16, 128, 2048 (the prefill op's kind)
 * with winners A, A, B: A covers 16 up to the geometric midpoint of 128
 * and 2048 (512: 512 * 512 = 128 * 2048), B the rest of the range; the
 * old merge rule (adjacent T only) gave three ranges of one count each.
 */
static void test_cover_sparse(void **state) {
  (void)state;
  const int probed[] = {16, 128, 2048};
  /* Identities are compared by content, not by pointer. */
  char a1[] = "A {\"X\":1}", a2[] = "A {\"X\":1}";
  const char *w[] = {a1, a2, "B {}"};
  hct_cover_t r[4];
  assert_int_equal(hct__cover_ranges(probed, w, 3, probed, 3, 16, 32768, r, 4), 2);
  assert_true(r[0].tmin == 16 && r[0].tmax == 512 && r[0].first == 0 && r[0].last == 1);
  assert_true(r[1].tmin == 513 && r[1].tmax == 32768 && r[1].first == 2 && r[1].last == 2);
  assert_string_equal(r[1].winner, "B {}");
  /* The midpoints: 16..45 go to 16 (45 * 45 <= 16 * 128 < 46 * 46). */
  const char *abc[] = {"A", "C", "B"};
  assert_int_equal(hct__cover_ranges(probed, abc, 3, probed, 3, 16, 32768, r, 4), 3);
  assert_true(r[0].tmax == 45 && r[1].tmin == 46 && r[1].tmax == 512 && r[2].tmin == 513);
  /* The op's representatives between them (probe_tokens 512 not probed
   * this time) keep their own covers out of the probed counts' ranges. */
  const int rep[] = {16, 128, 512, 2048, 8192, 32768};
  assert_int_equal(hct__cover_ranges(probed, w, 3, rep, 6, 16, 32768, r, 4), 2);
  assert_true(r[0].tmin == 16 && r[0].tmax == 256 && r[1].tmin == 1025 && r[1].tmax == 4096);
  assert_int_equal(hct__cover_ranges(probed, w, 3, probed, 3, 5, 4, r, 4), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "5..4"));
}

/* Sparse counts: each covers up to the geometric midpoints to its
 * neighbours, the ends reach the op's range, equal winners merge. */
static void test_cover_ranges(void **state) {
  (void)state;
  const int rep[] = {16, 128, 512, 2048, 8192, 32768};
  const char *w[] = {"A", "A", "B", "B", "C", "A"};
  hct_cover_t r[8];
  assert_int_equal(hct__cover_ranges(rep, w, 6, rep, 6, 16, 32768, r, 8), 4);
  /* 16*128 = 2048: 45*45 = 2025 <= 2048 < 46*46; 128*512 = 256^2 exactly. */
  assert_true(r[0].tmin == 16 && r[0].tmax == 256 && r[0].first == 0 && r[0].last == 1);
  assert_true(r[1].tmin == 257 && r[1].tmax == 4096 && strcmp(r[1].winner, "B") == 0);
  assert_true(r[2].tmin == 4097 && r[2].tmax == 16384 && r[2].first == 4 && r[2].last == 4);
  assert_true(r[3].tmin == 16385 && r[3].tmax == 32768 && strcmp(r[3].winner, "A") == 0);

  /* Without merging: every boundary, and the first reaching tmin below it. */
  const char *all[] = {"A", "B", "A", "B", "A", "B"};
  assert_int_equal(hct__cover_ranges(rep, all, 6, rep, 6, 1, 40000, r, 8), 6);
  assert_true(r[0].tmin == 1 && r[0].tmax == 45);
  assert_true(r[1].tmin == 46 && r[1].tmax == 256);
  assert_true(r[5].tmin == 16385 && r[5].tmax == 40000);
  for (int k = 1; k < 6; k++) assert_int_equal(r[k].tmin, r[k - 1].tmax + 1);

  /* A re-probe of one count (probe --stale) claims only its own cover:
   * its neighbours are the representative counts it did not probe. */
  const int one[] = {2048};
  const char *wone[] = {"Z"};
  assert_int_equal(hct__cover_ranges(one, wone, 1, rep, 6, 16, 32768, r, 8), 1);
  assert_true(r[0].tmin == 1025 && r[0].tmax == 4096);
  /* Two of them, not adjacent among the representatives: no merge. */
  const int two[] = {128, 2048};
  const char *wtwo[] = {"Z", "Z"};
  assert_int_equal(hct__cover_ranges(two, wtwo, 2, rep, 6, 16, 32768, r, 8), 2);
  assert_true(r[0].tmin == 46 && r[0].tmax == 256 && r[1].tmin == 1025);

  /* A count that is not representative sits between them. */
  const int odd[] = {1000};
  assert_int_equal(hct__cover_ranges(odd, wone, 1, rep, 6, 16, 32768, r, 8), 1);
  assert_true(r[0].tmin == 716 && r[0].tmax == 1431); /* 715^2 < 512000 < 716^2 */

  /* Dense (every count representative): a range per run of equal winners. */
  const int dense[] = {1, 2, 3, 4, 5, 6, 7, 8};
  const char *dw[] = {"A", "A", "B", "B", "B", "A", "A", "A"};
  assert_int_equal(hct__cover_ranges(dense, dw, 8, dense, 8, 1, 8, r, 8), 3);
  assert_true(r[0].tmin == 1 && r[0].tmax == 2 && r[1].tmin == 3 && r[1].tmax == 5);
  assert_true(r[2].tmin == 6 && r[2].tmax == 8);

  /* No winner covers nothing and ends a range; its neighbours stop at
   * their midpoints to it. */
  const char *gap[] = {"A", NULL, "A", "A", "A", "A"};
  assert_int_equal(hct__cover_ranges(rep, gap, 6, rep, 6, 16, 32768, r, 8), 2);
  assert_true(r[0].tmin == 16 && r[0].tmax == 45 && r[1].tmin == 257 && r[1].tmax == 32768);

  /* Little room: the count is still right. */
  assert_int_equal(hct__cover_ranges(rep, all, 6, rep, 6, 16, 32768, r, 2), 6);
  assert_true(r[1].tmin == 46 && r[1].tmax == 256);
  assert_int_equal(hct__cover_ranges(rep, all, 6, rep, 6, 16, 32768, NULL, 0), 6);

  /* Bad input: one line naming it. */
  const int back[] = {128, 16};
  assert_int_equal(hct__cover_ranges(back, w, 2, rep, 6, 16, 32768, r, 8), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "probed count 16"));
  assert_int_equal(hct__cover_ranges(rep, w, 6, rep, 6, 16, 8192, r, 8), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "32768"));
}

/* Every T of a range in exactly one cover, across random sparse lists: no
 * gap, no overlap, and each cover holds the probed counts it names. */
static void test_cover_ranges_partition(void **state) {
  (void)state;
  uint64_t x = 88172645463325252ull;
  for (int trial = 0; trial < 200; trial++) {
    int rep[64], probed[64], nrep = 0, n = 0;
    const char *w[64];
    for (int T = 1; T <= 32768 && nrep < 64; T += 1 + (int)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 52)) {
      rep[nrep++] = T;
      if ((x >> 33) % 3 != 0) {
        probed[n] = T;
        w[n++] = (x >> 40) % 2 ? "A" : "B";
      }
    }
    hct_cover_t r[64];
    int nr = hct__cover_ranges(probed, w, n, rep, nrep, 1, 32768, r, 64);
    assert_true(nr >= 0 && nr <= n);
    for (int k = 0; k < nr; k++) {
      assert_true(r[k].tmin <= probed[r[k].first] && probed[r[k].last] <= r[k].tmax);
      if (k > 0) assert_true(r[k].tmin > r[k - 1].tmax);
      /* Neighbours among all the counts (no representative between
       * them) touch; others leave that representative's cover free. */
      int between = 0;
      for (int q = 0; k > 0 && q < nrep; q++)
        between |= rep[q] > probed[r[k - 1].last] && rep[q] < probed[r[k].first];
      if (k > 0 && r[k].first == r[k - 1].last + 1)
        assert_int_equal(r[k].tmin == r[k - 1].tmax + 1, !between);
    }
    if (n == nrep && nr > 0) assert_true(r[0].tmin == 1 && r[nr - 1].tmax == 32768);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ranks_exact),   cmocka_unit_test(test_ranks_approx_continuous),
      cmocka_unit_test(test_summary_values), cmocka_unit_test(test_ci_coverage),
      cmocka_unit_test(test_significance),  cmocka_unit_test(test_pick_winner),
      cmocka_unit_test(test_cover_sparse),  cmocka_unit_test(test_cover_ranges),
      cmocka_unit_test(test_cover_ranges_partition),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
