/*
 * devpool.c: device buffers a worker's checks take and give back (issue
 * 34).  A check of one candidate is two allocations of its scratch (the
 * session and the twin) and up to four kept copies of its outputs, each a
 * cuMemAlloc and a cuMemFree, and a free waits for the whole card: some
 * thirty driver calls that wait per check, thousands in a probe.  The
 * sizes repeat from check to check (the same candidate, the same count,
 * the same outputs), so a buffer given back is kept and handed out again
 * for the same size.  What a buffer held does not matter: every user
 * writes it first (a session poisons its scratch and zeroes its "once"
 * buffers, a kept copy is copied over whole), as with fresh memory, whose
 * contents are undefined too.
 *
 * Idle buffers are kept up to HCT_DEVPOOL_IDLE_MAX bytes (the oldest go
 * first), and all of them are given back to the driver by
 * hct__devpool_flush: before a 'time' request, which needs the card's
 * memory, and when the worker ends.  Loop thread only (the worker's).
 */
#include <string.h>

#include "tuner.h"

/* The slot of p, or -1. */
static int slot_of(const hct_devpool_t *pool, hct_dptr_t p) {
  for (int i = 0; i < HCT_DEVPOOL_SLOTS; i++)
    if (pool->slot[i].ptr == p && p != 0) return i;
  return -1;
}

static void slot_free(hct_devpool_t *pool, hct_gpu_t *g, int i) {
  hct__gpu_free(g, pool->slot[i].ptr);
  pool->idle -= pool->slot[i].in_use ? 0 : pool->slot[i].bytes;
  memset(&pool->slot[i], 0, sizeof pool->slot[i]);
}

int hct__devpool_take(hct_devpool_t *pool, hct_gpu_t *g, size_t bytes, hct_dptr_t *out) {
  for (int i = 0; i < HCT_DEVPOOL_SLOTS; i++) {
    if (pool->slot[i].ptr == 0 || pool->slot[i].in_use || pool->slot[i].bytes != bytes) continue;
    pool->slot[i].in_use = 1;
    pool->idle -= bytes;
    pool->reused++;
    *out = pool->slot[i].ptr;
    return 0;
  }
  int rc = hct__gpu_alloc(g, bytes, out);
  if (rc != 0) {
    /* The card may be full of idle buffers: give them back, once. */
    if (pool->idle == 0) return rc;
    hct__error_clear();
    hct__devpool_flush(pool, g);
    if ((rc = hct__gpu_alloc(g, bytes, out)) != 0) return rc;
  }
  pool->allocated++;
  for (int i = 0; i < HCT_DEVPOOL_SLOTS; i++)
    if (pool->slot[i].ptr == 0) {
      pool->slot[i].ptr = *out;
      pool->slot[i].bytes = bytes;
      pool->slot[i].in_use = 1;
      return 0;
    }
  return 0; /* every slot taken: an ordinary buffer, freed when given back */
}

void hct__devpool_give(hct_devpool_t *pool, hct_gpu_t *g, hct_dptr_t p) {
  if (p == 0) return;
  const int i = slot_of(pool, p);
  if (i < 0) {
    hct__gpu_free(g, p);
    return;
  }
  pool->slot[i].in_use = 0;
  pool->slot[i].stamp = ++pool->clock;
  pool->idle += pool->slot[i].bytes;
  /* Over the cap: the least recently given back go first. */
  while (pool->idle > HCT_DEVPOOL_IDLE_MAX) {
    int oldest = -1;
    for (int j = 0; j < HCT_DEVPOOL_SLOTS; j++)
      if (pool->slot[j].ptr != 0 && !pool->slot[j].in_use &&
          (oldest < 0 || pool->slot[j].stamp < pool->slot[oldest].stamp))
        oldest = j;
    if (oldest < 0) break;
    slot_free(pool, g, oldest);
  }
}

void hct__devpool_flush(hct_devpool_t *pool, hct_gpu_t *g) {
  for (int i = 0; i < HCT_DEVPOOL_SLOTS; i++)
    if (pool->slot[i].ptr != 0 && !pool->slot[i].in_use) slot_free(pool, g, i);
}
