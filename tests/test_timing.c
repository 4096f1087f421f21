/*
 * test_timing.c: the interleaved measurement loop of tuner/timing.c, driven
 * by fake samplers and a fake SM clock: stopping on noise or budget,
 * pruning, throttled samples, interleaving under drift, errors of one
 * candidate, progress, and bad options.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common.h"
#include "stats.h"

#define MAXC 4

/* A fake GPU: each candidate has a true time and lognormal noise; the time
 * may drift with every call; the clock may be low during some calls. */
typedef struct fake_s {
  double base[MAXC];
  double noise[MAXC];      /* sigma of the lognormal factor */
  double drift;            /* relative increase per sample call */
  int calls;               /* sample calls so far, all candidates */
  int cand_calls[MAXC];
  int fail_cand, fail_at;  /* that candidate fails at that call of its own */
  int low_every;           /* clock low during calls where calls % low_every == 1 */
  int low;                 /* the clock is low now */
  int low_calls;           /* calls made while the clock was low */
  int clock_mode;          /* 0 follows `low`, 1 unreadable, 2 always low */
  int sleep_us[MAXC];      /* time each sample takes */
  int order[4096];         /* candidates in the order sampled */
  uint64_t rng;
  int progress_calls, last_round, last_active, active_grew;
} fake_t;

static uint64_t rnd(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double normal(uint64_t *s) {
  double u1 = ((rnd(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  double u2 = ((rnd(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static int fake_sample(void *arg, int cand, double *us) {
  fake_t *f = arg;
  int k = f->calls++;
  if (k < (int)HCT_ARRAY_SIZE(f->order)) f->order[k] = cand;
  f->cand_calls[cand]++;
  if (cand == f->fail_cand && f->cand_calls[cand] == f->fail_at)
    return hct__error(HCT_EGPU, "graph replay of candidate %d: boom", cand);
  if (f->sleep_us[cand] > 0) {
    struct timespec ts = {0, f->sleep_us[cand] * 1000L};
    nanosleep(&ts, NULL);
  }
  f->low = f->low_every > 0 && k % f->low_every == 1;
  f->low_calls += f->low;
  /* A throttled card runs slowly: were such a sample kept, it would show. */
  double slow = f->low ? 3.0 : 1.0;
  *us = f->base[cand] * slow * (1 + f->drift * k) * exp(f->noise[cand] * normal(&f->rng));
  return 0;
}

static int fake_clock(void *arg, int *mhz) {
  fake_t *f = arg;
  if (f->clock_mode == 1) return -1;
  *mhz = (f->clock_mode == 2 || f->low) ? 1200 : 1980;
  return 0;
}

static void fake_progress(void *arg, const hct_timing_progress_t *p) {
  fake_t *f = arg;
  if (p->round != f->last_round + 1) fail_msg("round %d after %d", p->round, f->last_round);
  if (f->progress_calls > 0 && p->active > f->last_active) f->active_grew = 1;
  f->progress_calls++;
  f->last_round = p->round;
  f->last_active = p->active;
}

static void fake_init(fake_t *f, int n, const double *base, const double *noise) {
  memset(f, 0, sizeof *f);
  f->fail_cand = -1;
  f->rng = 42;
  for (int i = 0; i < n; i++) {
    f->base[i] = base[i];
    f->noise[i] = noise[i];
  }
}

static hct_timing_opts_t opts_for(fake_t *f) {
  hct_timing_opts_t o = {0};
  o.sample = fake_sample;
  o.arg = f;
  o.seed = 7;
  o.max_seconds = -1; /* the fakes take no time: rounds are the budget */
  return o;
}

/* ---- stopping rule ---------------------------------------------------------- */

static void test_stop_on_noise_or_budget(void **state) {
  (void)state;
  fake_t f;
  fake_init(&f, 2, (double[]){10, 10}, (double[]){0.001, 0.3});
  hct_timing_opts_t o = opts_for(&f);
  o.max_rounds = 40;
  o.prune_factor = -1;
  hct_timing_res_t r[2];
  assert_int_equal(hct__timing_run(2, &o, r), 0);
  /* Quiet: converged as soon as it had the minimum of samples. */
  assert_int_equal(r[0].converged, 1);
  assert_int_equal(r[0].rounds, 10);
  assert_int_equal(r[0].s.n, 10);
  assert_true(r[0].s.rel_ci <= 0.01);
  assert_true(fabs(r[0].s.median - 10) < 0.05);
  /* Noisy: ran to its budget, not converged, with its figures. */
  assert_int_equal(r[1].converged, 0);
  assert_int_equal(r[1].rounds, 40);
  assert_int_equal(r[1].s.n, 40);
  assert_true(r[1].s.rel_ci > 0.01);
  assert_true(r[1].s.ci_lo < r[1].s.median && r[1].s.median < r[1].s.ci_hi);
  assert_true(r[1].s.min <= r[1].s.p10 && r[1].s.p90 <= r[1].s.max);
  assert_int_equal(r[0].pruned + r[1].pruned, 0);
  /* samples[] holds the kept ones in order, and they give the summary. */
  hct_summary_t s;
  assert_int_equal(hct__summarize(r[1].samples, r[1].s.n, &s), 0);
  assert_true(s.median == r[1].s.median && s.ci_hi == r[1].s.ci_hi);
  /* Warm-up: 2 per candidate by default, not kept. */
  assert_int_equal(f.cand_calls[0], 12);
  assert_int_equal(f.cand_calls[1], 42);
  hct__timing_res_free(r, 2);
}

static void test_time_budget(void **state) {
  (void)state;
  fake_t f;
  fake_init(&f, 1, (double[]){10}, (double[]){0.3});
  f.sleep_us[0] = 2000;
  hct_timing_opts_t o = opts_for(&f);
  o.max_seconds = 0.03;
  o.max_rounds = 1000;
  hct_timing_res_t r[1];
  assert_int_equal(hct__timing_run(1, &o, r), 0);
  assert_int_equal(r[0].converged, 0);
  assert_true(r[0].seconds >= 0.03);
  /* The budget, not the rounds, stopped it.  2 ms a sample at the least,
   * warm-up included: at most 14 rounds fit in 30 ms.  How few is up to
   * the scheduler (one sleep of a loaded machine can take the whole
   * budget), so the floor is one round. */
  if (r[0].rounds < 1 || r[0].rounds > 14) fail_msg("%d rounds in 30 ms", r[0].rounds);
  hct__timing_res_free(r, 1);
}

/* ---- pruning ---------------------------------------------------------------- */

static void test_prune(void **state) {
  (void)state;
  fake_t f;
  fake_init(&f, 3, (double[]){10, 20, 12}, (double[]){0.05, 0.05, 0.05});
  hct_timing_opts_t o = opts_for(&f);
  o.target_rel_ci = 1e-9; /* never converges: only pruning stops early */
  o.max_rounds = 30;
  o.prune_after = 5;
  hct_timing_res_t r[3], r4[4];
  assert_int_equal(hct__timing_run(3, &o, r), 0);
  assert_int_equal(r[1].pruned, 1); /* 2x slower */
  assert_int_equal(r[1].rounds, 5);
  assert_int_equal(r[1].s.n, 5);    /* figures kept */
  assert_true(fabs(r[1].s.median / 20 - 1) < 0.1);
  assert_int_equal(r[2].pruned, 0); /* 1.2x slower */
  assert_int_equal(r[2].rounds, 30);
  assert_int_equal(r[0].pruned, 0);
  assert_int_equal(r[0].rounds, 30);
  hct__timing_res_free(r, 3);

  /* The incumbent is never pruned, however slow. */
  fake_init(&f, 3, (double[]){10, 20, 12}, (double[]){0.05, 0.05, 0.05});
  o.no_prune = (const uint8_t[]){0, 1, 0};
  assert_int_equal(hct__timing_run(3, &o, r), 0);
  assert_int_equal(r[1].pruned, 0);
  assert_int_equal(r[1].rounds, 30);
  hct__timing_res_free(r, 3);
  fake_init(&f, 3, (double[]){20, 10, 12}, (double[]){0.05, 0.05, 0.05});
  assert_int_equal(hct__timing_run(3, &o, r), 0);
  assert_int_equal(r[0].pruned, 1); /* the flags are per candidate */
  hct__timing_res_free(r, 3);
  o.no_prune = NULL;

  /* Ranks: a candidate is pruned only by those of rank at most its own.
   * Candidate 1 (rank 0, 20) is twice as slow as 0 (rank 1, 10), but its
   * own class's best is 2 (rank 0, 19): kept.  Candidate 3 (rank 1, 20)
   * competes with all: pruned. */
  fake_init(&f, 4, (double[]){10, 20, 19, 20}, (double[]){0.05, 0.05, 0.05, 0.05});
  o.rank = (const uint8_t[]){1, 0, 0, 1};
  assert_int_equal(hct__timing_run(4, &o, r4), 0);
  assert_int_equal(r4[1].pruned, 0);
  assert_int_equal(r4[1].rounds, 30);
  assert_int_equal(r4[2].pruned, 0);
  assert_int_equal(r4[3].pruned, 1);
  hct__timing_res_free(r4, 4);
  /* Without ranks, the same run prunes 1 and 2 as well. */
  fake_init(&f, 4, (double[]){10, 20, 19, 20}, (double[]){0.05, 0.05, 0.05, 0.05});
  o.rank = NULL;
  assert_int_equal(hct__timing_run(4, &o, r4), 0);
  assert_int_equal(r4[1].pruned, 1);
  assert_int_equal(r4[2].pruned, 1);
  hct__timing_res_free(r4, 4);

  /* A negative factor turns pruning off. */
  fake_init(&f, 3, (double[]){10, 20, 12}, (double[]){0.05, 0.05, 0.05});
  o.prune_factor = -1;
  assert_int_equal(hct__timing_run(3, &o, r), 0);
  assert_int_equal(r[1].pruned, 0);
  assert_int_equal(r[1].rounds, 30);
  hct__timing_res_free(r, 3);
}

/* ---- throttling ---------------------------------------------------------------- */

static void test_throttle(void **state) {
  (void)state;
  fake_t f;
  fake_init(&f, 2, (double[]){10, 10}, (double[]){0.01, 0.01});
  f.low_every = 5;
  hct_timing_opts_t o = opts_for(&f);
  o.sm_clock = fake_clock;
  o.max_clock_mhz = 1980;
  o.max_rounds = 20;
  o.target_rel_ci = 1e-9;
  o.prune_factor = -1;
  hct_timing_res_t r[2];
  assert_int_equal(hct__timing_run(2, &o, r), 0);
  int kept = 0, discarded = 0;
  for (int i = 0; i < 2; i++) {
    assert_int_equal(r[i].clock_checked, 1);
    assert_int_equal(r[i].rounds, 20);
    assert_int_equal(r[i].s.n, 20); /* discarded samples were retaken */
    assert_true(r[i].throttled > 0);
    assert_true(r[i].s.max < 15);   /* no slow (x3), throttled sample kept */
    kept += r[i].s.n;
    discarded += r[i].throttled;
  }
  /* Every call after warm-up was kept or counted as discarded. */
  assert_int_equal(f.calls, 2 * 2 + kept + discarded);
  /* Every call made at a low clock was discarded (some right after it
   * too, their clock read before having been low). */
  assert_true(discarded >= f.low_calls - 2 * 2);
  hct__timing_res_free(r, 2);

  /* The clock cannot be read: no checks, and the results say so. */
  fake_init(&f, 2, (double[]){10, 10}, (double[]){0.01, 0.01});
  f.low_every = 5;
  f.clock_mode = 1;
  assert_int_equal(hct__timing_run(2, &o, r), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(r[i].clock_checked, 0);
    assert_int_equal(r[i].throttled, 0);
    assert_int_equal(r[i].s.n, 20);
  }
  assert_true(r[0].s.max > 25 || r[1].s.max > 25); /* slow ones kept */
  hct__timing_res_free(r, 2);

  /* Always throttled: the candidates stop with an error, not a hang. */
  fake_init(&f, 2, (double[]){10, 10}, (double[]){0.01, 0.01});
  f.clock_mode = 2;
  o.throttle_retries = 5;
  assert_int_equal(hct__timing_run(2, &o, r), 2);
  assert_int_equal(r[0].err, HCT_EBUSY);
  assert_int_equal(r[0].throttled, 5);
  assert_non_null(strstr(hct_last_error(), "sm clock below 1782 MHz"));
  hct__timing_res_free(r, 2);
}

/* ---- interleaving -------------------------------------------------------------- */

static void test_interleave_drift(void **state) {
  (void)state;
  fake_t f;
  fake_init(&f, 2, (double[]){10, 10}, (double[]){0, 0});
  f.drift = 0.005; /* +0.5% a call: +1% a round of two */
  hct_timing_opts_t o = opts_for(&f);
  o.warmup = -1;
  o.max_rounds = 60;
  o.target_rel_ci = 1e-9;
  hct_timing_res_t r[2];
  assert_int_equal(hct__timing_run(2, &o, r), 0);
  assert_int_equal(f.calls, 120);
  /* Timed side by side, identical candidates look identical, although the
   * card got 60% slower over the run (timed one after the other, the
   * second would look that much slower). */
  double d = fabs(r[0].s.median / r[1].s.median - 1);
  print_message("medians %.4f %.4f (differ by %.3f%%)\n", r[0].s.median, r[1].s.median, d * 100);
  assert_true(d < 0.01);
  /* Each round visits both, in a fresh order: candidate 0 goes first in
   * some rounds and second in others. */
  int first0 = 0;
  for (int k = 0; k < 60; k++) {
    assert_true(f.order[2 * k] != f.order[2 * k + 1]);
    first0 += f.order[2 * k] == 0;
  }
  if (first0 < 15 || first0 > 45) fail_msg("candidate 0 first in %d of 60 rounds", first0);
  hct__timing_res_free(r, 2);

  /* The seed decides the orders: the same one repeats them, another not. */
  int order1[120];
  memcpy(order1, f.order, sizeof order1);
  fake_init(&f, 2, (double[]){10, 10}, (double[]){0, 0});
  f.drift = 0.005;
  assert_int_equal(hct__timing_run(2, &o, r), 0);
  assert_memory_equal(order1, f.order, sizeof order1);
  hct__timing_res_free(r, 2);
  fake_init(&f, 2, (double[]){10, 10}, (double[]){0, 0});
  f.drift = 0.005;
  o.seed = 8;
  assert_int_equal(hct__timing_run(2, &o, r), 0);
  assert_true(memcmp(order1, f.order, sizeof order1) != 0);
  hct__timing_res_free(r, 2);
}

/* ---- after the verification of the timed launches ------------------------------- */

/* The selftest op on the H200 (issue 20): at T=1 firstruns16, which
 * returns at once in its timed launches, timed fastest of all (1.5 us)
 * and pruned good (2.7 us, more than 1.5x slower); the verification then
 * put firstruns16 out, and the baseline (22.5 us, never pruned) was
 * decided for, good being neither timed nor verified.  The pass does not
 * stand: timed again without firstruns16, good is timed and wins. */
static void test_pruned_by_one_put_out(void **state) {
  (void)state;
  fake_t f;
  /* 0 the baseline, 1 good, 2 firstruns16, 3 a kl variant (rank 1) */
  fake_init(&f, 4, (double[]){22.5, 2.7, 1.5, 2.8}, (double[]){0.01, 0.01, 0.01, 0.01});
  hct_timing_opts_t o = opts_for(&f);
  o.no_prune = (const uint8_t[]){1, 0, 0, 0};
  const uint8_t rank[] = {0, 0, 0, 1};
  o.rank = rank;
  hct_timing_res_t r[4];
  assert_int_equal(hct__timing_run(4, &o, r), 0);
  assert_int_equal(r[1].pruned, 1);
  assert_int_equal(r[2].pruned, 0);
  assert_int_equal(r[0].pruned, 0);
  /* Nothing put out: the figures stand. */
  assert_int_equal(hct__timing_stands(r, 4, rank, (const uint8_t[]){0, 0, 0, 0}), 1);
  /* firstruns16 put out: good may have been pruned by it. */
  assert_int_equal(hct__timing_stands(r, 4, rank, (const uint8_t[]){0, 0, 1, 0}), 0);
  assert_int_equal(hct__timing_stands(r, 4, NULL, (const uint8_t[]){0, 0, 1, 0}), 0);
  /* The kl one (2.8 us) was pruned too, by what ranks at most its own:
   * good put out may have done it. */
  assert_int_equal(r[3].pruned, 1);
  assert_int_equal(hct__timing_stands(r, 4, rank, (const uint8_t[]){0, 1, 0, 0}), 0);
  /* The kl one put out: it ranks above good, so it pruned no one still in
   * play (the pruned good and kl one aside). */
  assert_int_equal(hct__timing_stands(r, 4, rank, (const uint8_t[]){0, 0, 0, 1}), 1);
  hct__timing_res_free(r, 4);

  /* A put-out kl candidate (rank 1) cannot have pruned a bitwise one. */
  fake_init(&f, 3, (double[]){22.5, 2.7, 1.5}, (double[]){0.01, 0.01, 0.01});
  const uint8_t rank3[] = {0, 0, 1};
  o.rank = (const uint8_t[]){0, 0, 0};
  hct_timing_res_t q[3];
  assert_int_equal(hct__timing_run(3, &o, q), 0);
  assert_int_equal(q[1].pruned, 1);
  assert_int_equal(hct__timing_stands(q, 3, rank3, (const uint8_t[]){0, 0, 1}), 1);
  hct__timing_res_free(q, 3);

  /* Timed again without firstruns16: good is not pruned and beats the
   * baseline. */
  fake_init(&f, 3, (double[]){22.5, 2.7, 2.8}, (double[]){0.01, 0.01, 0.01});
  o.rank = rank3;
  assert_int_equal(hct__timing_run(3, &o, q), 0);
  assert_int_equal(q[1].pruned, 0);
  assert_int_equal(hct__timing_stands(q, 3, rank3, (const uint8_t[]){0, 0, 0}), 1);
  assert_int_equal(hct__pick_winner(q, 2, 0, HCT_MIN_MARGIN_DEFAULT), 1);
  hct__timing_res_free(q, 3);
}

/* ---- errors ------------------------------------------------------------------------ */

static void test_error_stops_one(void **state) {
  (void)state;
  fake_t f;
  fake_init(&f, 3, (double[]){10, 11, 12}, (double[]){0.001, 0.001, 0.001});
  f.fail_cand = 1;
  f.fail_at = 4; /* after its 2 warm-ups and first kept sample */
  hct_timing_opts_t o = opts_for(&f);
  hct_timing_res_t r[3];
  assert_int_equal(hct__timing_run(3, &o, r), 1);
  assert_int_equal(r[1].err, HCT_EGPU);
  assert_non_null(strstr(r[1].errmsg, "boom"));
  assert_int_equal(f.cand_calls[1], 4); /* never sampled again */
  assert_int_equal(r[1].s.n, 1);
  assert_non_null(strstr(hct_last_error(), "candidate 1: graph replay"));
  assert_int_equal(r[0].err, 0);
  assert_int_equal(r[0].converged, 1);
  assert_int_equal(r[2].converged, 1);
  /* The failed one never wins. */
  assert_int_equal(hct__pick_winner(r, 3, 2, HCT_MIN_MARGIN_DEFAULT), 0);
  hct__timing_res_free(r, 3);
}

static int bad_sample(void *arg, int cand, double *us) {
  (void)arg;
  *us = cand == 0 ? 5.0 : -1.0;
  return 0;
}

static int never_called(void *arg, int cand, double *us) {
  (void)arg, (void)cand, (void)us;
  fail_msg("sample callback called after bad options");
  return 0;
}

static void test_bad_input(void **state) {
  (void)state;
  hct_timing_res_t r[2];
  hct_timing_opts_t o = {.sample = bad_sample, .warmup = -1, .max_seconds = -1};
  assert_int_equal(hct__timing_run(2, &o, r), 1);
  assert_int_equal(r[1].err, HCT_EINVAL);
  assert_non_null(strstr(r[1].errmsg, "not a positive time"));
  assert_int_equal(r[0].err, 0);
  hct__timing_res_free(r, 2);

  static const struct {
    const char *why;
    hct_timing_opts_t o;
    int n;
  } bad[] = {
      {"no sample callback", {.sample = NULL}, 1},
      {"candidates", {.sample = never_called}, 0},
      {"max clock", {.sample = never_called, .sm_clock = fake_clock}, 1},
      {"throttle fraction", {.sample = never_called, .throttle_frac = 1.5}, 1},
      {"target", {.sample = never_called, .target_rel_ci = -0.01}, 1},
      {"prune factor", {.sample = never_called, .prune_factor = 0.5}, 1},
      {"negative", {.sample = never_called, .max_rounds = -3}, 1},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    int rc = hct__timing_run(bad[i].n, &bad[i].o, r);
    if (rc != HCT_EINVAL) fail_msg("%s: rc %d", bad[i].why, rc);
    if (strstr(hct_last_error(), bad[i].why) == NULL)
      fail_msg("%s: message '%s'", bad[i].why, hct_last_error());
  }
}

/* ---- progress ---------------------------------------------------------------------- */

static void test_progress(void **state) {
  (void)state;
  fake_t f;
  fake_init(&f, 3, (double[]){10, 10, 10}, (double[]){0.001, 0.02, 0.3});
  hct_timing_opts_t o = opts_for(&f);
  o.progress = fake_progress;
  o.max_rounds = 50;
  o.prune_factor = -1;
  hct_timing_res_t r[3];
  assert_int_equal(hct__timing_run(3, &o, r), 0);
  int most = 0;
  for (int i = 0; i < 3; i++) most = HCT_MAX(most, r[i].rounds);
  assert_int_equal(f.progress_calls, most);
  assert_int_equal(f.last_round, 50);
  assert_int_equal(f.last_active, 0);
  assert_int_equal(f.active_grew, 0);
  assert_true(r[0].rounds < r[1].rounds && r[1].rounds <= 50);
  hct__timing_res_free(r, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stop_on_noise_or_budget), cmocka_unit_test(test_time_budget),
      cmocka_unit_test(test_prune),                   cmocka_unit_test(test_throttle),
      cmocka_unit_test(test_interleave_drift),        cmocka_unit_test(test_error_stops_one),
      cmocka_unit_test(test_bad_input),               cmocka_unit_test(test_progress),
      cmocka_unit_test(test_pruned_by_one_put_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
