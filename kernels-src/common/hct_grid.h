/*
 * hct_grid.h: a grid-wide barrier that gives up instead of hanging, for
 * kernels whose blocks synchronise with each other (manifest
 * "grid_barrier": true, such as hc_read's `persist`).
 *
 * A grid barrier is only correct when every block of the grid is resident
 * at once.  When they are not (a card with fewer SMs, a co-tenant, a grid
 * too large at some T), the waiting blocks would spin forever and only the
 * watchdog could end the run, killing the worker.  So the wait reads the
 * global timer and gives up after `timeout_ns`, raising a flag that every
 * other waiter sees; the kernel then returns early, its outputs wrong, and
 * the host reads the flag after the run: that token count (and every
 * larger one: the grid only grows with T) is disqualified with reason
 * "timeout" rather than "hang".
 *
 * The barrier's state is in the variant's scratch buffer "ws" (manifest:
 * {"name": "ws", "bytes": "2048", "zero": "once"}), zeroed once when it
 * is allocated, never between runs (so a timed CUDA graph needs no memset
 * node per launch):
 *   ws[0]         the timeout flag: non-zero when a wait gave up (the host
 *                 reads it after a check run)
 *   ws[32 + 32g]  the arrival count of group g (block b is in group b % 8),
 *                 each on a 128-byte line of its own
 *   ws[288]       how many groups have completed
 *   ws[320]       the generation: raised by one when all blocks arrived.
 * A block reads the generation, adds one to its group's count; the last of
 * a group (the count reaches a multiple of the group's size) adds one to
 * the group count, and the last group raises the generation, which every
 * block watches.  Counts only grow, by the same amount each barrier, so
 * nothing is ever reset.  Two levels because 128 atomic adds on one word
 * serialise on one L2 slice: 1.3 to 1.5 us a barrier on the H200, where a
 * round trip to L2 is 0.15 us (tools/lab; docs/perf/h200.md has the
 * figures of both).
 *
 * Every thread of every block must call hct_grid_sync() the same number of
 * times; it returns 1 when the barrier completed, 0 when it timed out (the
 * same value in every thread of a block), and the caller must then return.
 * Each block calls hct_grid_begin() once first, before any barrier.
 */
#ifndef HCT_GRID_H
#define HCT_GRID_H

#include "hct_kernel.h"

/* The default wait before giving up: far above any legitimate barrier
 * wait (microseconds), far below the watchdog (seconds). */
#ifndef HCT_GRID_TIMEOUT_NS
#define HCT_GRID_TIMEOUT_NS 200000000ull
#endif

#define HCT_GRID_FLAG 0
#define HCT_GRID_GROUPS 8
#define HCT_GRID_SUB(g) (32 + 32 * (g)) /* group g's arrival count */
#define HCT_GRID_TOP (32 + 32 * HCT_GRID_GROUPS)
#define HCT_GRID_GEN (HCT_GRID_TOP + 32)

/* Nanoseconds of a clock shared by every SM.  On HIP, the constant-rate
 * wall clock (100 MHz on the cards we target), so only roughly ns. */
HCT_DEV hct_u64 hct_globaltimer(void) {
#if defined(HCT_CUDA)
  hct_u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return (hct_u64)wall_clock64() * 10ull;
#endif
}

/* Spins the calling thread for about `ns` nanoseconds (tests and the
 * selftest op use it to make a kernel predictably slow). */
HCT_DEV void hct_spin_ns(hct_u64 ns) {
  const hct_u64 t0 = hct_globaltimer();
  while (hct_globaltimer() - t0 < ns) {
  }
}

/* How many polls between two looks at the clock and the flag: the clock
 * read is the slow part of a poll. */
#define HCT_GRID_POLLS 32

typedef struct {
  hct_u32 *ws;
  hct_u32 gen; /* the generation when this block arrived (thread 0) */
} hct_grid_t;

HCT_DEV int hct_grid_block(void) {
  return (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
}
HCT_DEV int hct_grid_thread(void) {
  return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

HCT_DEV hct_grid_t hct_grid_begin(hct_u32 *ws) {
  hct_grid_t g;
  g.ws = ws;
  g.gen = 0;
  return g;
}

/*
 * A barrier in two halves, so a block can do work that needs no other
 * block between its arrival and its wait (issue its next loads, say):
 * hct_grid_arrive(), then hct_grid_wait().  Both by every thread.  The
 * block's writes before the arrival are visible to every block after its
 * wait.
 */
HCT_DEV void hct_grid_arrive(hct_grid_t *g) {
  __syncthreads();
  if (hct_grid_thread() == 0) {
    hct_u32 *ws = g->ws;
    /* The generation cannot move before this block has arrived. */
    g->gen = ((volatile hct_u32 *)ws)[HCT_GRID_GEN];
    __threadfence(); /* this block's writes (ordered by the barrier above) first */
    const hct_u32 nb = gridDim.x * gridDim.y * gridDim.z;
    const hct_u32 b = (hct_u32)hct_grid_block(), grp = b % HCT_GRID_GROUPS;
    const hct_u32 in_grp = (nb - grp + HCT_GRID_GROUPS - 1) / HCT_GRID_GROUPS;
    const hct_u32 groups = nb < HCT_GRID_GROUPS ? nb : HCT_GRID_GROUPS;
    if ((atomicAdd(&ws[HCT_GRID_SUB(grp)], 1u) + 1u) % in_grp == 0 &&
        (atomicAdd(&ws[HCT_GRID_TOP], 1u) + 1u) % groups == 0) {
      __threadfence();
      atomicAdd(&ws[HCT_GRID_GEN], 1u);
    }
  }
}

HCT_DEV int hct_grid_wait_timeout(hct_grid_t *g, hct_u64 timeout_ns) {
  __shared__ int hct_grid_ok;
  hct_u32 *ws = g->ws;
  volatile hct_u32 *vws = ws;
  const int tid = hct_grid_thread();
  if (tid == 0) {
    hct_u64 t0 = 0;
    int ok = 1;
    for (int polls = 0; ok && vws[HCT_GRID_GEN] == g->gen; ++polls) {
      if (polls % HCT_GRID_POLLS != HCT_GRID_POLLS - 1) continue;
      const hct_u64 now = hct_globaltimer();
      if (t0 == 0) t0 = now;
      if (vws[HCT_GRID_FLAG] != 0) ok = 0;
      else if (now - t0 > timeout_ns) {
        atomicExch(&ws[HCT_GRID_FLAG], 1u);
        ok = 0;
      }
    }
    __threadfence(); /* the others' writes before this block reads them */
    hct_grid_ok = ok && vws[HCT_GRID_FLAG] == 0;
  }
  __syncthreads();
  const int res = hct_grid_ok;
  /* hct_grid_ok is written again only after the next wait's first
   * __syncthreads, when every thread has read it here. */
  __syncthreads();
  return res;
}

HCT_DEV int hct_grid_sync_timeout(hct_grid_t *g, hct_u64 timeout_ns) {
  hct_grid_arrive(g);
  return hct_grid_wait_timeout(g, timeout_ns);
}

HCT_DEV int hct_grid_sync(hct_grid_t *g) { return hct_grid_sync_timeout(g, HCT_GRID_TIMEOUT_NS); }
HCT_DEV int hct_grid_wait(hct_grid_t *g) { return hct_grid_wait_timeout(g, HCT_GRID_TIMEOUT_NS); }

#endif /* HCT_GRID_H */
