/*
 * par.c: a small parallel for over the host's cores, for the CPU work
 * whose size grows with T (drawing inputs, refilling host buffers, bit
 * compares of outputs): at T = 32768 one output set is 1.7 GB, which one
 * core compares in seconds and sixteen in a fraction of one.
 *
 * Threads are started per call and joined before it returns: callers are
 * the probe's worker and tests, one call at a time, and a call is only
 * worth making for work of milliseconds or more (hct__par_chunks says how
 * to cut it).  Any thread may call it; fn must be safe to run on disjoint
 * ranges at once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "tuner.h"

#define PAR_MAX_THREADS 64

typedef struct par_job_s {
  hct_range_fn fn;
  void *ctx;
  int begin, end;
} par_job_t;

static void *par_main(void *arg) {
  par_job_t *j = arg;
  j->fn(j->ctx, j->begin, j->end);
  return NULL;
}

int hct__par_threads(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  /* A probe of several cards at once gives each its share (multiprobe.c). */
  const char *share = getenv("HCTUNE_THREADS");
  if (share != NULL && atol(share) > 0) cores = atol(share);
  return cores < 1 ? 1 : cores > PAR_MAX_THREADS ? PAR_MAX_THREADS : (int)cores;
}

void hct__par_for(int n, hct_range_fn fn, void *ctx) {
  int nt = hct__par_threads();
  if (nt > n) nt = n < 1 ? 1 : n;
  pthread_t th[PAR_MAX_THREADS];
  par_job_t jobs[PAR_MAX_THREADS];
  int started[PAR_MAX_THREADS] = {0};
  for (int i = 0; i < nt; i++) {
    jobs[i] = (par_job_t){fn, ctx, (int)((int64_t)n * i / nt), (int)((int64_t)n * (i + 1) / nt)};
    /* A thread that cannot be started runs its range on this one. */
    if (i > 0) started[i] = pthread_create(&th[i], NULL, par_main, &jobs[i]) == 0;
  }
  for (int i = 0; i < nt; i++)
    if (i == 0 || !started[i]) par_main(&jobs[i]);
  for (int i = 1; i < nt; i++)
    if (started[i]) pthread_join(th[i], NULL);
}
