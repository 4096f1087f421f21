/*
 * timing.c: the interleaved measurement loop.  The caller's callback takes
 * one sample of one candidate (on a GPU, a replay of a captured batch);
 * this file decides which candidate to sample next, which samples to keep,
 * and when each candidate has been timed enough.  The contract is in
 * stats.h, above hct__timing_run.
 *
 * Any thread; the callbacks are called on the calling thread only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "stats.h"

#define DEF_THROTTLE_FRAC 0.90
#define DEF_THROTTLE_RETRIES 20
#define DEF_WARMUP 2
#define DEF_MIN_SAMPLES 10
#define DEF_TARGET 0.01
#define DEF_MAX_ROUNDS 100
#define DEF_MAX_SECONDS 2.0
#define DEF_PRUNE_FACTOR 1.5
#define DEF_PRUNE_AFTER 5

/* Sample arrays start with room for this many rounds and grow past it, so
 * a huge max_rounds does not allocate up front. */
#define PREALLOC_ROUNDS 1024

typedef struct cand_s {
  double *sorted;   /* kept samples, ascending (res->samples keeps order) */
  int cap;
  int active;
} cand_t;

typedef struct run_s {
  hct_timing_opts_t o;   /* with defaults filled in */
  int ncand;
  hct_timing_res_t *res;
  cand_t *c;
  int clock_on;          /* the SM clock is readable (so far) */
  int clock_floor;       /* MHz below which a sample is discarded */
  uint64_t rng;
} run_t;

/* splitmix64: small, fast and good enough to shuffle a visit order; kept
 * here so that the loop depends on nothing else in tuner/. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Fisher-Yates.  The modulo bias is below n / 2^64: irrelevant here. */
static void shuffle(int *a, int n, uint64_t *rng) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(rng_next(rng) % (uint64_t)(i + 1));
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

static int fill_defaults(const hct_timing_opts_t *in, hct_timing_opts_t *o) {
  *o = *in;
  if (o->sample == NULL) return hct__error(HCT_EINVAL, "timing run: no sample callback");
  if (o->throttle_frac == 0) o->throttle_frac = DEF_THROTTLE_FRAC;
  if (o->throttle_retries == 0) o->throttle_retries = DEF_THROTTLE_RETRIES;
  if (o->warmup == 0) o->warmup = DEF_WARMUP;
  if (o->warmup < 0) o->warmup = 0;
  if (o->min_samples == 0) o->min_samples = DEF_MIN_SAMPLES;
  if (o->target_rel_ci == 0) o->target_rel_ci = DEF_TARGET;
  if (o->max_rounds == 0) o->max_rounds = DEF_MAX_ROUNDS;
  if (o->max_seconds == 0) o->max_seconds = DEF_MAX_SECONDS;
  if (o->prune_factor == 0) o->prune_factor = DEF_PRUNE_FACTOR;
  if (o->prune_after == 0) o->prune_after = DEF_PRUNE_AFTER;
  if (o->sm_clock != NULL && o->max_clock_mhz <= 0)
    return hct__error(HCT_EINVAL, "timing run: max clock %d MHz: must be positive with a clock",
                      o->max_clock_mhz);
  if (!(o->throttle_frac > 0 && o->throttle_frac <= 1))
    return hct__error(HCT_EINVAL, "timing run: throttle fraction %g: must be in (0, 1]",
                      o->throttle_frac);
  if (o->throttle_retries < 0 || o->min_samples < 0 || o->max_rounds < 0 || o->prune_after < 0)
    return hct__error(HCT_EINVAL, "timing run: negative sample or round count");
  if (!(o->target_rel_ci > 0))
    return hct__error(HCT_EINVAL, "timing run: target %g: must be positive", o->target_rel_ci);
  if (o->prune_factor > 0 && o->prune_factor < 1)
    return hct__error(HCT_EINVAL, "timing run: prune factor %g: must be at least 1",
                      o->prune_factor);
  return 0;
}

/* Stops candidate i on an error, keeping the message that came with it. */
static void stop_err(run_t *r, int i, int code, const char *msg) {
  hct_timing_res_t *res = &r->res[i];
  res->err = code;
  hct__strlcpy(res->errmsg, msg && *msg ? msg : hct_strerror(code), sizeof res->errmsg);
  r->c[i].active = 0;
}

static int keep(run_t *r, int i, double us, int checked) {
  hct_timing_res_t *res = &r->res[i];
  cand_t *c = &r->c[i];
  int n = res->s.n;
  if (n == c->cap) {
    int cap = c->cap * 2;
    double *s = realloc(res->samples, (size_t)cap * sizeof *s);
    if (s == NULL) return HCT_ENOMEM;
    res->samples = s;
    double *o = realloc(c->sorted, (size_t)cap * sizeof *o);
    if (o == NULL) return HCT_ENOMEM;
    c->sorted = o;
    c->cap = cap;
  }
  res->samples[n] = us;
  int j = n;
  while (j > 0 && c->sorted[j - 1] > us) {
    c->sorted[j] = c->sorted[j - 1];
    j--;
  }
  c->sorted[j] = us;
  hct__summarize_sorted(c->sorted, n + 1, &res->s);
  if (!checked) res->clock_checked = 0;
  return 0;
}

/* Reads the clock; returns 1 when it is below the floor.  A failed read
 * turns the checks off for the rest of the run. */
static int clock_low(run_t *r) {
  if (!r->clock_on) return 0;
  int mhz = 0;
  if (r->o.sm_clock(r->o.arg, &mhz) < 0) {
    r->clock_on = 0;
    hct__log(HCT_LOG_DEBUG, "sm clock became unreadable: no more throttling checks");
    return 0;
  }
  return mhz < r->clock_floor;
}

/*
 * Takes one sample of candidate i: retaken while the clock is low, kept
 * when `keep_it`.  On an error the candidate is stopped.
 */
static void take(run_t *r, int i, int keep_it) {
  hct_timing_res_t *res = &r->res[i];
  for (int discards = 0;;) {
    int checked = keep_it && r->clock_on;
    int low = keep_it && clock_low(r);
    double us = NAN;
    uint64_t t0 = hct__now_ns();
    hct__error_clear();
    int rc = r->o.sample(r->o.arg, i, &us);
    res->seconds += (double)(hct__now_ns() - t0) * 1e-9;
    if (rc != 0) {
      stop_err(r, i, rc < 0 ? rc : HCT_EINVAL, hct_last_error());
      return;
    }
    if (!(us > 0) || !isfinite(us)) {
      char msg[96];
      snprintf(msg, sizeof msg, "sample %g us is not a positive time", us);
      stop_err(r, i, HCT_EINVAL, msg);
      return;
    }
    if (!keep_it) return;
    low |= clock_low(r);
    checked = checked && r->clock_on;
    if (checked && low) {
      res->throttled++;
      if (++discards >= r->o.throttle_retries) {
        char msg[128];
        snprintf(msg, sizeof msg, "sm clock below %d MHz for %d samples in a row",
                 r->clock_floor, discards);
        stop_err(r, i, HCT_EBUSY, msg);
        return;
      }
      continue;
    }
    if (keep(r, i, us, checked) != 0) stop_err(r, i, HCT_ENOMEM, "out of memory for samples");
    return;
  }
}

static int budget_spent(const run_t *r, const hct_timing_res_t *res) {
  return res->rounds >= r->o.max_rounds ||
         (r->o.max_seconds > 0 && res->seconds >= r->o.max_seconds);
}

/* Stops what has converged or spent its budget, then prunes the slow. */
static void after_round(run_t *r) {
  for (int i = 0; i < r->ncand; i++) {
    hct_timing_res_t *res = &r->res[i];
    if (!r->c[i].active) continue;
    if (res->s.n >= r->o.min_samples && res->s.rel_ci <= r->o.target_rel_ci) {
      res->converged = 1;
      r->c[i].active = 0;
    } else if (budget_spent(r, res)) {
      r->c[i].active = 0;
    }
  }
  if (!(r->o.prune_factor > 0)) return;
  for (int i = 0; i < r->ncand; i++) {
    hct_timing_res_t *res = &r->res[i];
    if (!r->c[i].active || res->rounds < r->o.prune_after) continue;
    if (r->o.no_prune != NULL && r->o.no_prune[i]) continue;
    /* The best of those it competes with: rank at most its own. */
    double best = INFINITY;
    for (int j = 0; j < r->ncand; j++) {
      const hct_timing_res_t *o = &r->res[j];
      if (r->o.rank != NULL && r->o.rank[j] > r->o.rank[i]) continue;
      if (o->err == 0 && o->s.n >= r->o.prune_after && o->s.median < best) best = o->s.median;
    }
    if (isfinite(best) && res->s.median > r->o.prune_factor * best) {
      res->pruned = 1;
      r->c[i].active = 0;
    }
  }
}

static int count_active(const run_t *r, int *order) {
  int n = 0;
  for (int i = 0; i < r->ncand; i++)
    if (r->c[i].active) order[n++] = i;
  return n;
}

void hct__timing_res_free(hct_timing_res_t *res, int n) {
  if (res == NULL) return;
  for (int i = 0; i < n; i++) {
    free(res[i].samples);
    res[i].samples = NULL;
  }
}

int hct__timing_run(int ncand, const hct_timing_opts_t *opts, hct_timing_res_t *res) {
  run_t r = {.ncand = ncand, .res = res};
  if (ncand < 1) return hct__error(HCT_EINVAL, "timing run: %d candidates", ncand);
  memset(res, 0, (size_t)ncand * sizeof *res);
  int rc = fill_defaults(opts, &r.o);
  if (rc != 0) return rc;
  r.rng = r.o.seed;
  r.clock_floor = (int)ceil(r.o.throttle_frac * r.o.max_clock_mhz);

  int cap = HCT_MIN(r.o.max_rounds, PREALLOC_ROUNDS);
  cap = HCT_MAX(cap, 1);
  r.c = calloc((size_t)ncand, sizeof *r.c);
  int *order = calloc((size_t)ncand, sizeof *order);
  int ok = r.c != NULL && order != NULL;
  for (int i = 0; ok && i < ncand; i++) {
    r.c[i].cap = cap;
    r.c[i].sorted = malloc((size_t)cap * sizeof(double));
    res[i].samples = malloc((size_t)cap * sizeof(double));
    ok = r.c[i].sorted != NULL && res[i].samples != NULL;
  }
  if (!ok) {
    for (int i = 0; r.c != NULL && i < ncand; i++) free(r.c[i].sorted);
    hct__timing_res_free(res, ncand);
    free(r.c);
    free(order);
    return hct__error(HCT_ENOMEM, "timing run: out of memory for %d candidates", ncand);
  }

  /* One read up front, so that a card without a readable clock is known
   * before any sample, and every result says the same. */
  r.clock_on = r.o.sm_clock != NULL;
  if (r.clock_on) {
    int mhz;
    if (r.o.sm_clock(r.o.arg, &mhz) < 0) {
      r.clock_on = 0;
      hct__log(HCT_LOG_DEBUG, "sm clock unreadable: no throttling checks in this run");
    }
  }
  for (int i = 0; i < ncand; i++) {
    r.c[i].active = 1;
    res[i].clock_checked = r.clock_on;
    hct__summarize_sorted(NULL, 0, &res[i].s);
  }

  for (int w = 0; w < r.o.warmup; w++) {
    int n = count_active(&r, order);
    shuffle(order, n, &r.rng);
    for (int k = 0; k < n; k++) take(&r, order[k], 0);
  }

  for (int round = 1;; round++) {
    int n = count_active(&r, order);
    if (n == 0) break;
    shuffle(order, n, &r.rng);
    for (int k = 0; k < n; k++) {
      res[order[k]].rounds++;
      take(&r, order[k], 1);
    }
    after_round(&r);
    if (r.o.progress != NULL) {
      hct_timing_progress_t p = {round, ncand, count_active(&r, order), res};
      r.o.progress(r.o.arg, &p);
    }
  }

  int failed = 0, first = -1;
  for (int i = 0; i < ncand; i++) {
    free(r.c[i].sorted);
    if (res[i].err != 0 && failed++ == 0) first = i;
  }
  free(r.c);
  free(order);
  if (failed > 0) hct__error(res[first].err, "candidate %d: %s", first, res[first].errmsg);
  else hct__error_clear();
  return failed;
}
