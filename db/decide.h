/*
 * decide.h: a private sub-header of db/: the rules that turn figures into
 * decisions, the one winner rule and the one range rule.  Decisions are
 * what db/ keeps, and two layers make them: the probe (tuner/probe_decide.c)
 * from its own timings, and a fleet merge (db/merge.c) from pooled trials.
 * The rules live here, below both, so that each calls down to the same
 * functions (tuner/stats.h, the tuner's measurement engine, includes this
 * header).  Pure functions over figures: no SQLite, no GPU, no state; any
 * thread.
 *
 * Files:
 *   db/decide.c   the significance rule, the choice of a winner, winners
 *                 at sparse token counts -> ranges of T
 */
#ifndef HCT_DECIDE_H
#define HCT_DECIDE_H

#include <stdint.h>

/* The default margin a challenger must beat the incumbent by (2%). */
#define HCT_MIN_MARGIN_DEFAULT 0.02

/* ---- figures -------------------------------------------------------------- */

/*
 * The figures of one candidate's kept samples, in microseconds per launch
 * (hct__summarize, tuner/stats.c, computes them from samples).
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

/* One candidate's figures: the outcome of the tuner's timing loop
 * (hct__timing_run, tuner/timing.c), or a fleet merge's pooled figures
 * (db/merge.c, which fills s and leaves the rest zero). */
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

/* ---- the winner rule (db/decide.c) ------------------------------------------ */

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

/* ---- the range rule (db/decide.c) ------------------------------------------- */

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

#endif /* HCT_DECIDE_H */
