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
 * zeroed once when the scratch is allocated, never between runs:
 *   ws[0]  the timeout flag: non-zero when a wait gave up (the host reads it)
 *   ws[1]  the arrival word.  Each block adds 1, except block 0, which adds
 *          2^31 - (nblocks - 1): once every block has arrived the word has
 *          grown by exactly 2^31, so its top bit has flipped, and each
 *          waiter watches for the flip from the value its own add
 *          returned.  Nothing is ever reset, so consecutive barriers and
 *          consecutive launches need no zeroing in between (a memset node
 *          per launch in a CUDA graph costs about as much as a barrier);
 *          this is the scheme of CUDA's cooperative groups grid sync.
 *
 * Every thread of every block must call hct_grid_sync() the same number of
 * times; it returns 1 when the barrier completed, 0 when it timed out (the
 * same value in every thread of a block), and the caller must then return.
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

/* How many polls of the arrival word between two looks at the clock and
 * the flag: the clock read is the slow part of a poll. */
#define HCT_GRID_POLLS 32

HCT_DEV int hct_grid_sync_timeout(hct_u32 *ws, hct_u64 timeout_ns) {
  __shared__ int hct_grid_ok;
  volatile hct_u32 *vws = ws;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const hct_u32 nblocks = gridDim.x * gridDim.y * gridDim.z;
    const bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const hct_u32 add = first ? 0x80000000u - (nblocks - 1u) : 1u;
    __threadfence(); /* this block's writes before the arrival */
    const hct_u32 old = atomicAdd(&ws[HCT_GRID_ARRIVE], add);
    int ok = 1;
    hct_u64 t0 = 0;
    for (int polls = 0; ((old ^ vws[HCT_GRID_ARRIVE]) & 0x80000000u) == 0; ++polls) {
      if (polls % HCT_GRID_POLLS != HCT_GRID_POLLS - 1) continue;
      if (vws[HCT_GRID_FLAG] != 0) {
        ok = 0;
        break;
      }
      const hct_u64 now = hct_globaltimer();
      if (t0 == 0) t0 = now;
      if (now - t0 > timeout_ns) {
        atomicExch(&ws[HCT_GRID_FLAG], 1u);
        ok = 0;
        break;
      }
    }
    __threadfence(); /* the others' writes before this block reads them */
    hct_grid_ok = ok && vws[HCT_GRID_FLAG] == 0;
  }
  __syncthreads();
  const int ok = hct_grid_ok;
  /* hct_grid_ok is written again only after the next call's first
   * __syncthreads, when every thread has read it here. */
  return ok;
}

HCT_DEV int hct_grid_sync(hct_u32 *ws) { return hct_grid_sync_timeout(ws, HCT_GRID_TIMEOUT_NS); }

#endif /* HCT_GRID_H */
