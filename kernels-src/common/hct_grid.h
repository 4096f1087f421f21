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
 * The barrier's state is the first two words of the variant's scratch
 * buffer "ws" (manifest: {"name": "ws", "bytes": "64", "zero": "once"}),
 * zeroed once when it is allocated, never between runs:
 *   ws[0]  the timeout flag: non-zero when a wait gave up (the host reads
 *          it after a check run)
 *   ws[1]  the arrival word.  Each block adds 1, except block 0, which adds
 *          2^31 - (nblocks - 1): once every block has arrived the word has
 *          grown by exactly 2^31, so its top bit has flipped, and each
 *          waiter watches for the flip from the value its own add
 *          returned (CUDA cooperative groups' grid sync works this way).
 *          Nothing is reset, so a timed CUDA graph needs no memset node
 *          per launch.
 * The add is a release and the polls are acquires (PTX memory model), so
 * no separate fences.  Measured on the H200 with tools/lab (docs/perf/
 * h200.md): that scheme with __threadfence() took 1.3 to 1.5 us a barrier
 * for 128 blocks; a two-level tree of counts 2.4 us; every block polling
 * every block's own arrival count 2.8 us.
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
#define HCT_GRID_ARRIVE 1

/* The arrival: an add with release semantics at device scope, returning
 * the old value; the poll: a load with acquire semantics. */
HCT_DEV hct_u32 hct_grid_add_release(hct_u32 *p, hct_u32 v) {
#if defined(HCT_CUDA) && HCT_ARCH >= 70
  hct_u32 old;
  asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
#else
  __threadfence();
  return atomicAdd(p, v);
#endif
}

HCT_DEV hct_u32 hct_grid_load_acquire(const hct_u32 *p) {
#if defined(HCT_CUDA) && HCT_ARCH >= 70
  hct_u32 v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  const hct_u32 v = *(volatile const hct_u32 *)p;
  __threadfence();
  return v;
#endif
}

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
/* Nanoseconds a waiter sleeps between polls (0: none), so 128 pollers load
 * the arrival word's L2 slice less while the last blocks arrive.  A
 * template may define it (from a parameter) before including this file. */
#ifndef HCT_GRID_BACKOFF_NS
#define HCT_GRID_BACKOFF_NS 0
#endif

typedef struct {
  hct_u32 *ws;
  hct_u32 old; /* the arrival word before this block's add (thread 0) */
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
  g.old = 0;
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
  __syncthreads(); /* the block's writes, ordered before thread 0's release */
  if (hct_grid_thread() == 0) {
    const hct_u32 nblocks = gridDim.x * gridDim.y * gridDim.z;
    const hct_u32 add = hct_grid_block() == 0 ? 0x80000000u - (nblocks - 1u) : 1u;
    g->old = hct_grid_add_release(&g->ws[HCT_GRID_ARRIVE], add);
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
    for (int polls = 0; ok && ((g->old ^ hct_grid_load_acquire(&ws[HCT_GRID_ARRIVE])) & 0x80000000u) == 0;
         ++polls) {
#if HCT_GRID_BACKOFF_NS > 0 && defined(HCT_CUDA) && HCT_ARCH >= 70
      __nanosleep(HCT_GRID_BACKOFF_NS);
#endif
      if (polls % HCT_GRID_POLLS != HCT_GRID_POLLS - 1) continue;
      const hct_u64 now = hct_globaltimer();
      if (t0 == 0) t0 = now;
      if (vws[HCT_GRID_FLAG] != 0) ok = 0;
      else if (now - t0 > timeout_ns) {
        atomicExch(&ws[HCT_GRID_FLAG], 1u);
        ok = 0;
      }
    }
    /* Completed: every block arrived (one that timed out waiting has
     * raised the flag for the host, and returned). */
    hct_grid_ok = ok;
  }
  __syncthreads();
  const int res = hct_grid_ok;
  /* hct_grid_ok is written again only after the next arrival's
   * __syncthreads, when every thread has read it here. */
  return res;
}

HCT_DEV int hct_grid_sync_timeout(hct_grid_t *g, hct_u64 timeout_ns) {
  hct_grid_arrive(g);
  return hct_grid_wait_timeout(g, timeout_ns);
}

HCT_DEV int hct_grid_sync(hct_grid_t *g) { return hct_grid_sync_timeout(g, HCT_GRID_TIMEOUT_NS); }
HCT_DEV int hct_grid_wait(hct_grid_t *g) { return hct_grid_wait_timeout(g, HCT_GRID_TIMEOUT_NS); }

#endif /* HCT_GRID_H */
