/*
 * relay_t: relay (relay.cu) rebuilt for T tokens, class bitwise (every
 * output bit equal to v1's).  The same work split: one launch of 128
 * blocks of 320 threads in clusters of four (one block a stream), two
 * reads in flight an SM with PDL, w_down in registers, each lane's
 * canonical chain relayed stream to stream by st.async, one grid barrier,
 * the canonical up and mix of 20 channels a block.  What changes is how
 * the tokens share the work (issue 28):
 *
 * Why: relay costs about 1.95 us a token (8.83 / 14.72 / 22.43 us at T =
 * 1 / 4 / 8, H200) while it streams the same 13.1 MB whatever T.  Its ncu
 * profile at T = 8 has 2.8 warps a scheduler, none eligible 79% of
 * cycles, 39% of stalls at CTA barriers: a thread runs one token's chain
 * at a time (80 dependent fmaf over a stream, 0.62 us measured where the
 * fmaf latency alone is 0.16), and each token or pair of tokens pays its
 * own norm pass (two __syncthreads).  The canonical order fixes each
 * output's sequence of operations, not which thread runs which chain when,
 * so here:
 *   - a token group of TG tokens is one norm pass and one hand-off; a
 *     thread runs the group's TG chains side by side (rt_chains: each
 *     weight chunk widened once, every token's activations loaded, then TG
 *     independent fmaf chains), so one latency covers TG chains;
 *   - groups still pipeline over the four streams (stream 1 runs group 0
 *     while stream 0 norms group 1), so TG trades the pipeline's depth
 *     (T/TG + 3 stage times) against each stage's parallelism: searched;
 *   - the up stage runs UPT tokens a pass (each w_up chunk widened once for
 *     them) and the lanes holding a row's sum take its sigmoids: one pass
 *     and one __syncthreads fewer than relay.
 * Every sum is still the spec's: the same fmaf chain a (row, lane), the
 * same butterflies, norm and mix (tests/emu/relay_t_emu.cc runs
 * relay_t.h's functions, which hold all of this arithmetic, and checks
 * the bits).
 *
 * Parameters: PDL (0: the read runs alone; 1: the next read launched at
 * the start, its weights streaming in while this one computes), TG (tokens
 * a group: 2, 4, 8), UPT (tokens an up pass: 4, 8).  Scratch: lo (T*K
 * floats), ws (the barrier's state, zeroed once).  GB (grid barrier
 * back-off) is fixed at 0, relay's measured best.
 *
 * Predicted, not measured (docs/perf/h200.md, "Predicted (not measured): a
 * bitwise decode read built for T").
 */
#include "hc_read.h"
#define HCT_GRID_BACKOFF_NS 0
#include "hct_grid.h"
#define PF 0
#include "fast_common.h"
#include "hct_bulk.h"
#include "hct_cluster.h"
#include "relay_t.h"
#ifndef PDL
#error "relay_t: PDL must be defined"
#endif
#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "relay_t: needs thread block clusters and st.async (sm_90 or later)"
#endif

#define RT_NBAR (2 + 2 * RT_TMAX) /* mbarriers: w_norm, w_up, one a token group, one a token's R */
#define RT_BAR_R (2 + RT_TMAX)

/* Shared memory, bytes from the start (relay's layout); the activations
 * last, sized by T (the manifest's smem: RT_OFF_X + max(T*C*4, RT_NR*K*2)). */
#define RT_OFF_WN 0                                   /* w_norm of the stream, C bf16 */
#define RT_OFF_RCV (RT_OFF_WN + C * 2)                /* [t][tid] f32: the chains handed over; later R' [t][80] */
#define RT_OFF_LO (RT_OFF_RCV + RT_TMAX * RT_NT * 4)  /* lo after the barrier, [half][t][K/8] f4 */
#define RT_OFF_GT (RT_OFF_LO + RT_TMAX * K * 4)       /* gates [t][80] f32 */
#define RT_OFF_RED (RT_OFF_GT + RT_TMAX * RT_NR * 4)  /* the norm's warp sums [t][8] */
#define RT_OFF_BAR (RT_OFF_RED + RT_TMAX * 9 * 4)     /* RT_NBAR mbarriers */
#define RT_OFF_X ((RT_OFF_BAR + RT_NBAR * 8 + 127) / 128 * 128) /* xn [t][C] f32; later w_up [80][K] bf16 */
static_assert(RT_OFF_X == 28672, "relay_t: the manifest's smem starts the activations at 28672");

HCT_ENTRY void __cluster_dims__(RT_CL, 1, 1) __launch_bounds__(RT_NT, 2)
    hc_rt_read(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down, const hct_u16 *w_up,
               float *lo, hct_u32 *ws, float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  HCT_DYN_SHARED(hct_u4, rt_sm);
  char *sm = (char *)rt_sm;
  hct_u16 *wn = (hct_u16 *)(sm + RT_OFF_WN);
  float *rcv = (float *)(sm + RT_OFF_RCV);
  float *los = (float *)(sm + RT_OFF_LO);
  float *gt = (float *)(sm + RT_OFF_GT);
  float *red = (float *)(sm + RT_OFF_RED);
  hct_u64 *bar = (hct_u64 *)(sm + RT_OFF_BAR);
  float *xs = (float *)(sm + RT_OFF_X);
  hct_u16 *wub = (hct_u16 *)(sm + RT_OFF_X);

  const int tid = (int)threadIdx.x;
  const int c = hct_cluster_id(), s = hct_cluster_rank();
  const int dl = tid / RT_RPC, dj = tid % RT_RPC;
  const int cu0 = (int)blockIdx.x * RT_NCU;
  hct_grid_t grid = hct_grid_begin(ws);

  /* ---- before the wait: weights (no kernel writes them), R into L2 ----- */
  if (PDL) hcr_pdl_launch();
  {
    const int lines = T * (C / 32);
    for (int p = c + 32 * tid; p < lines; p += 32 * RT_NT) {
      const long long at = ((long long)(p / (C / 32)) * S + s) * C + 32 * (p % (C / 32));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(resid + at));
      if (pending != 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(pending + at));
    }
    if (tid < T * S) {
      const long long at = (long long)tid * C + cu0;
      asm volatile("prefetch.global.L2 [%0];" ::"l"(resid + at));
      if (pending != 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(pending + at));
    }
  }
  if (tid == 0) {
    for (int i = 0; i < RT_NBAR; ++i) hct_bulk_init(bar + i);
    hct_bulk_expect(bar, C * 2);
    hct_bulk_copy(wn, w_norm + (long long)s * C, C * 2, bar);
    /* The hand-offs this block receives, a token group's bytes each. */
    if (s > 0)
      for (int gi = 0; gi * TG < T; ++gi) hct_bulk_expect(bar + 2 + gi, (hct_u32)(min(TG, T - gi * TG) * RT_NT * 4));
  }
  /* Plain loads (relay: as ld.global.nc the compiler moved them past the
   * PDL wait, to their first use). */
  hct_u4 wr[RT_QS];
  rt_load_wr(wr, w_down, c, s, dl, dj);
  __syncthreads(); /* the mbarriers' init, before any wait names them */
  hct_cluster_arrive_relaxed(); /* waited for before the first hand-off */
  if (PDL) hcr_pdl_wait();

  /* ---- R of the stream, a bulk copy a token on its own mbarrier ---------*/
  if (tid < T) {
    hct_bulk_expect(bar + RT_BAR_R + tid, (hct_u32)(C * 4));
    hct_bulk_copy(xs + tid * C, resid + ((long long)tid * S + s) * C, C * 4, bar + RT_BAR_R + tid);
  }
  hct_cluster_wait(); /* every block of the cluster has initialised its mbarriers */

  /* ---- the relay: per token group, the norm, then the chains side by side */
  rt_down(
      T, c, s, xs, pending, wn, red, rcv, wr, tid, [&](int t) { hct_bulk_wait(bar + RT_BAR_R + t, 0); },
      [&]() { hct_bulk_wait(bar, 0); }, [&](int gi) { hct_bulk_wait(bar + 2 + gi, 0); },
      [&](float *dst, float v, int gi) { hct_st_async(dst, v, bar + 2 + gi, s + 1); });
  __syncthreads(); /* every thread is done with xs (and, in stream 3, rcv holds the chains) */
  if (s == S - 1 && tid < T * RT_RPC) {
    const int t = tid / RT_RPC, j = tid % RT_RPC;
    lo[(long long)t * K + RT_RPC * c + j] = rt_row_sum(rcv, t, j);
  }
  hct_grid_arrive(&grid);
  /* w_up's 80 rows into the activations' space, issued after the arrival
   * (relay: the arrival's release waits for the block's bulk copies in
   * flight); the reads of xs (generic proxy) before the copies' writes. */
  if (tid == 0) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    hct_bulk_copy_runs(wub, w_up + (long long)cu0 * K, (long long)C * K * 2, RT_NCU * K * 2, S, bar + 1);
  }
  if (!hct_grid_wait(&grid)) return;

  /* ---- lo from every cluster, R' of the block's channels; up; mix ------- */
  rt_gather(resid, pending, lo, los, rcv, T, tid, cu0, [](const float *p) { return hct_ldcg4(p); });
  hct_bulk_wait(bar + 1, 0); /* w_up */
  __syncthreads();
  rt_upmix(T, wub, los, gt, rcv, tid, cu0, mixed, mixed_bf16, mixed_f16);
}
