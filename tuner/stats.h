/*
 * stats.h: a private sub-header of tuner/ (included from tuner.h): the
 * measurement engine.  Nothing here touches a GPU: the caller hands in a
 * callback that takes one sample of one candidate, and gets back medians,
 * confidence intervals and decisions.
 *
 * Files:
 *   tuner/stats.c   summaries (median, p10, p90, min, the 95% confidence
 *                   interval of the median), the significance rule, the
 *                   choice of a winner, winners -> ranges
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

/* The default margin a challenger must beat the incumbent by (2%). */
#define HCT_MIN_MARGIN_DEFAULT 0.02

/* ---- summaries (tuner/stats.c) ------------------------------------------- */

/*
 * The figures of one candidate's kept samples, in microseconds per launch.
 *
 * The confidence interval is that of the median, from order statistics:
 * [x(k), x(n+1-k)] of the sorted samples, with k the largest rank whose
 * binomial(n, 1/2) tail P(B <= k-1) is at most 2.5%.  It assumes nothing
 * about the shape of the noise (GPU timings are skewed, with a long tail of
 * slow samples), needs no random numbers, so the same samples always give
 * the same interval, and costs nothing beyond the sort.  Ranks are exact
 * (from the binomial distribution) up to n = 1000 and from the normal
 * approximation with continuity correction above.  A bootstrap was not
 * chosen: the bootstrap of a median is known to be poor for small n (the
 * resampled medians take only a few distinct values), and it would make a
 * decision depend on a seed.  The interval covers at least 95% (slightly
 * more, the ranks being discrete); below 6 samples no pair of ranks reaches
 * 95%, and the interval is then [min, max] with rel_ci infinite.
 */
typedef struct hct_summary_s {
  int n;                 /* samples */
  double median;         /* mean of the two middle ones when n is even */
  double min, max;
  double p10, p90;       /* linear interpolation between order statistics */
  double ci_lo, ci_hi;   /* 95% confidence interval of the median */
  double rel_ci;         /* max(median - ci_lo, ci_hi - median) / median;
                            INFINITY when n < 6 or the median is not > 0 */
} hct_summary_t;

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

/* One candidate's outcome of hct__timing_run. */
typedef struct hct_timing_res_s {
  hct_summary_t s;     /* figures of the kept samples */
  double *samples;     /* the kept samples in the order taken (malloc'd;
                          hct__timing_res_free releases them) */
  int rounds;          /* rounds it took part in (warm-up not counted) */
  int converged;       /* stopped because rel_ci <= target */
  int pruned;          /* stopped for being slower than factor x best */
  int throttled;       /* samples discarded for a low SM clock */
  int clock_checked;   /* every kept sample had the clock read around it */
  double seconds;      /* wall time spent in its callbacks, warm-up too */
  int err;             /* 0, or the code that stopped it */
  char errmsg[256];    /* the message of err */
} hct_timing_res_t;

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

/* ---- decisions (tuner/stats.c) ---------------------------------------------- */

/*
 * 1 when the challenger beats the incumbent beyond noise: its confidence
 * interval lies wholly below the incumbent's (ci_hi < incumbent's ci_lo)
 * and its median is lower by at least min_margin of the incumbent's median
 * (0.02: 2%; pass HCT_MIN_MARGIN_DEFAULT for the default).  0 otherwise,
 * and when either has no samples.
 */
int hct__significantly_faster(const hct_summary_t *challenger, const hct_summary_t *incumbent,
                              double min_margin);

/*
 * The winner among n candidates, given the index of the incumbent (the
 * baseline, or this card's current decision): the fastest candidate (by
 * median) that is significantly faster than the incumbent, else the
 * incumbent.  Candidates stopped by an error or without samples never win.
 * When the incumbent is -1 or itself unusable, there is nothing to beat and
 * the fastest usable candidate wins.  Returns an index, or -1 when no
 * candidate is usable.
 */
int hct__pick_winner(const hct_timing_res_t *res, int n, int incumbent, double min_margin);

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

/* One run of adjacent token counts with the same winner. */
/* One decision range over sparse token counts: [tmin, tmax] with its
 * winner, made of the probed counts probed[first..last]. */
typedef struct hct_cover_s {
  int tmin, tmax;
  int first, last;       /* indices into the caller's probed[] */
  const char *winner;    /* points into the caller's winners[] */
} hct_cover_t;

/*
 * The ranges of T that decisions made at sparse token counts cover.
 * probed[0..n) ascending, winners[k] the identity of the winner at
 * probed[k] (compared with strcmp; NULL: none, which covers nothing).
 * rep[0..nrep) are the op's representative counts (its probe_tokens, or
 * every count of a range probed densely), tmin..tmax the op's range.
 *
 * Each probed count covers the counts up to the geometric midpoint to its
 * neighbours among rep and probed together: T goes to the lower neighbour
 * a of a pair (a, b) when T*T <= a*b, else to b (T = 16..45 to 16, 46.. to
 * 128).  The lowest of them reaches tmin, the highest tmax.  The
 * neighbours are the representative counts even when they were not probed
 * this time (probe --stale re-probes a few), so a count never claims what
 * another one's decision covers.  Adjacent probed counts with the same
 * winner whose covers touch merge into one range.  Dense probes
 * (rep = every count) give a range per run of equal winners.
 *
 * The one rule from winners to ranges: the probe (tuner/probe_decide.c)
 * calls it with the op's probe_tokens as rep, and a fleet merge
 * (db/merge.c) with the counts its cards timed as both lists and the
 * ends of the inputs' decisions as tmin..tmax, so a merge of hosts that
 * probed the same counts decides the ranges one probe would.  Writes at most max_out ranges into out; returns
 * how many there are, or HCT_EINVAL naming the first count out of order or
 * out of tmin..tmax.  O(n + nrep).
 */
int hct__cover_ranges(const int *probed, const char *const *winners, int n, const int *rep,
                      int nrep, int tmin, int tmax, hct_cover_t *out, int max_out);

#endif /* HCT_STATS_H */
