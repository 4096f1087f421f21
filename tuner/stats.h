/*
 * stats.h: a private sub-header of tuner/ (included from tuner.h): the
 * measurement engine.  Nothing here touches a GPU: the caller hands in a
 * callback that takes one sample of one candidate, and gets back medians,
 * confidence intervals, and whether a pass's figures stand.  The figures'
 * types (hct_summary_t, hct_timing_res_t) and the rules that decide from
 * them (hct__pick_winner, hct__cover_ranges) are db/'s (db/decide.h): a
 * fleet merge decides by them too, and db/ sits below the tuner.
 *
 * Files:
 *   tuner/stats.c   summaries (median, p10, p90, min, the 95% confidence
 *                   interval of the median), whether a pass stands
 *   tuner/timing.c  the interleaved measurement loop: warm-up, rounds in a
 *                   fresh random order, stopping on noise or budget,
 *                   pruning, throttled samples discarded and retaken
 *
 * Every function here may be called from any thread; none keeps state
 * between calls.
 */
#ifndef HCT_STATS_H
#define HCT_STATS_H

#include <stdint.h>

#include "decide.h"

/* ---- summaries (tuner/stats.c) ------------------------------------------- */

/*
 * Fills s from n samples already sorted ascending.  n == 0 gives n = 0 and
 * every figure NAN (rel_ci INFINITY).
 */
void hct__summarize_sorted(const double *sorted, int n, hct_summary_t *s);

/*
 * Fills s from n samples in any order (they are copied and sorted; x is
 * left as it was).  Returns 0, or HCT_ENOMEM.
 */
int hct__summarize(const double *x, int n, hct_summary_t *s);

/*
 * The 0-based indexes into n sorted samples of the 95% interval of the
 * median: *lo = k-1, *hi = n-k.  Returns 1 when the interval reaches 95%,
 * 0 when n < 6 (then *lo = 0, *hi = n-1) or n < 1 (then both are -1).
 */
int hct__median_ci_ranks(int n, int *lo, int *hi);

/* The q-quantile (0 <= q <= 1) of n >= 1 sorted samples, interpolated
 * linearly between order statistics (R's type 7). */
double hct__quantile_sorted(const double *sorted, int n, double q);

/* ---- the measurement loop (tuner/timing.c) --------------------------------- */

/*
 * Takes one sample of candidate `cand`: replays one batch of its launches
 * and stores the time per launch in *us.  Returns 0, or a negative code
 * with the message set (hct__error); an error stops that candidate only.
 */
typedef int (*hct_sample_cb)(void *arg, int cand, double *us);

/*
 * Reads the current SM clock in MHz.  Returns 0, or a negative value when
 * the clock cannot be read (no NVML, say): the run then makes no throttling
 * checks from that point, and its results say so (clock_checked = 0).
 */
typedef int (*hct_clock_cb)(void *arg, int *mhz);


/* What the progress callback sees after each round. */
typedef struct hct_timing_progress_s {
  int round;           /* 1, 2, ... */
  int ncand;
  int active;          /* candidates still being timed */
  const hct_timing_res_t *res;  /* every candidate's figures so far */
} hct_timing_progress_t;

typedef void (*hct_progress_cb)(void *arg, const hct_timing_progress_t *p);

/*
 * Options of a timing run.  A zeroed struct plus a sample callback is a
 * valid run with the defaults shown; fields that need a way to say "none"
 * take a negative value for it.
 */
typedef struct hct_timing_opts_s {
  hct_sample_cb sample;     /* required */
  hct_clock_cb sm_clock;    /* NULL: no throttling checks */
  hct_progress_cb progress; /* NULL: none; called after every round */
  void *arg;                /* passed to the three callbacks */
  int max_clock_mhz;        /* the card's max SM clock; required (> 0)
                               with sm_clock */
  double throttle_frac;     /* 0: 0.90; a sample is discarded when the
                               clock before or after it is below
                               throttle_frac * max_clock_mhz */
  int throttle_retries;     /* 0: 20; discards in a row before the
                               candidate stops with HCT_EBUSY */
  int warmup;               /* 0: 2 samples per candidate, not kept;
                               negative: none */
  int min_samples;          /* 0: 10; fewer never count as converged */
  double target_rel_ci;     /* 0: 0.01 (+-1% of the median) */
  int max_rounds;           /* 0: 100 per candidate */
  double max_seconds;       /* 0: 2.0 per candidate; negative: no limit */
  double prune_factor;      /* 0: 1.5; negative: never prune */
  int prune_after;          /* 0: 5 rounds before a candidate may be pruned */
  const uint8_t *no_prune;  /* NULL, or ncand flags: 1 = never pruned.  Set
                               it for the incumbent: every challenger is
                               compared with it, so it must stay timed to
                               a tight interval even when it is slow */
  const uint8_t *rank;      /* NULL, or ncand ranks: a candidate is pruned
                               only against those of rank at most its own
                               (the probe: bitwise 0, kl 1, so a bitwise
                               candidate competes with bitwise ones only,
                               a kl one with all) */
  uint64_t seed;            /* visit orders; the same seed, the same orders */
} hct_timing_opts_t;

/*
 * Times ncand candidates, interleaved.  Warm-up: `warmup` rounds whose
 * samples are dropped.  Then rounds: each visits every still-active
 * candidate once, in a fresh random order (Fisher-Yates from `seed`), so
 * clock and thermal drift hit all candidates alike.  After each round a
 * candidate stops when, in this order:
 *   - it has min_samples and rel_ci <= target_rel_ci (converged);
 *   - it has spent max_rounds or max_seconds (not converged);
 *   - it has done prune_after rounds and its median exceeds prune_factor
 *     times the best median among candidates with at least prune_after
 *     samples and a rank no higher than its own (pruned; its figures are
 *     kept).
 * With sm_clock, the clock is read before and after every kept-to-be
 * sample; when either read is below the threshold the sample is discarded,
 * counted in `throttled` and taken again.
 *
 * res must hold ncand entries; each is filled in (free the samples with
 * hct__timing_res_free, whatever the return value, once it is >= 0).
 * Returns the number of candidates stopped by an error (0: none); then the
 * thread's message is that of the first of them ("candidate N: ...").
 * Returns a negative code for bad options or out of memory, before any
 * callback is called; res then holds no samples (zeroed when ncand >= 1,
 * so freeing it is harmless).
 */
int hct__timing_run(int ncand, const hct_timing_opts_t *opts, hct_timing_res_t *res);

/* Frees the samples of n results (NULL-safe). */
void hct__timing_res_free(hct_timing_res_t *res, int n);

/* ---- after verification (tuner/stats.c) ------------------------------------ */

/*
 * Whether a timing pass's figures stand after the verification of its
 * timed launches put out the candidates flagged in `out` (n flags, like
 * res): 0 when one of them may have pruned a candidate still in play (a
 * pruned one of rank at least the put-out one's; rank NULL: all equal),
 * which must then be timed again without it: a variant that skips its work
 * times fastest of all, and an honest one pruned for being slower than it
 * would otherwise never be decided for.  1 otherwise.
 */
int hct__timing_stands(const hct_timing_res_t *res, int n, const uint8_t *rank, const uint8_t *out);

#endif /* HCT_STATS_H */
