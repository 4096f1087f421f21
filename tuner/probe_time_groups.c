/*
 * probe_time_groups.c: hct__worker_time for the probe's stages, in as many
 * requests as the card's memory needs.  The timing (tuner/probe_time.c)
 * and the search (tuner/probe_search.c) both time through it; it calls
 * neither.
 *
 * Loop thread only.
 */
#include <jansson.h>

#include "probe_internal.h"

/*
 * hct__worker_time over as many requests as the card's memory needs: one
 * the worker refuses for memory (HCT_ENOMEM, saying how many of its first
 * candidates fit: hct__worker_time_fits) is sent again as groups of what
 * fits, in order, each with its slice of opts' "ranks", all on the same
 * seed (the same input data).  Grouped, nothing is pruned: a group's
 * fastest is no yardstick for the others.  *groups gets the number of
 * requests that timed (1: all interleaved in one).  Not even one fitting
 * is the worker's error naming the candidate, with *failed -1: it ends
 * the probe, as no candidate's fault.
 */
int hct__probe_time_grouped(probe_t *P, const int *ids, int n, int T, json_t *opts, int deadline,
                        hct_timing_res_t *res, int *failed, int *groups) {
  /* Every timing of a count on the same inputs (the search's rounds, the
   * deciding pass, the contenders, the other mode): the worker draws them
   * once and keeps them from one request to the next. */
  if (P->time_T != T) {
    P->time_T = T;
    P->time_seed = hct__rng_next(&P->rng);
  }
  const uint64_t seed = P->time_seed;
  json_t *ranks = json_incref(json_object_get(opts, "ranks"));
  int done = 0, size = n, rc = 0;
  *groups = 0;
  while (rc == 0 && done < n) {
    const int m = HCT_MIN(size, n - done);
    if (ranks != NULL) {
      json_t *slice = json_array();
      for (int q = done; q < done + m; q++) json_array_append(slice, json_array_get(ranks, (size_t)q));
      json_object_set_new(opts, "ranks", slice);
    }
    rc = hct__worker_time(P->w, ids + done, m, T, seed, opts, deadline, res + done, failed);
    hct__probe_worker_took(P);
    hct__probe_count(P, P->clock.cur, 1);
    const int fits = rc == HCT_ENOMEM ? hct__worker_time_fits(P->w) : -1;
    if (fits > 0 && fits < m) {
      hct__probe_progress(P, "time", done, n, "T=%d: %d of %d candidates fit the card's memory at once: timed in groups",
               T, fits, m);
      hct__error_clear();
      json_object_set_new(opts, "prune_factor", json_real(-1.0));
      size = fits;
      rc = 0;
      continue;
    }
    if (rc == 0) {
      done += m;
      (*groups)++;
    }
  }
  if (ranks != NULL) json_object_set_new(opts, "ranks", ranks);
  return rc;
}
