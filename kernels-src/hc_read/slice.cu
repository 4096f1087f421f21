/*
 * slice: hc_read in one persistent launch, class bitwise (every output bit
 * equal to v1's), built so that no stage waits for another block's stage
 * of the same kind and no shared load serves one fmaf alone.
 *
 * Why (docs/perf/h100.md, "Decode bitwise, second attempt"): relay splits
 * each canonical down chain into four stream segments held by four blocks
 * and relays it through them, so a read's chains pass four block stages
 * one after the other; every segment loads one activation register from
 * shared memory for each fmaf (an SM returns 32 registers of shared loads
 * a clock, 64 when thread pairs agree: a fourth to a half of its fmaf
 * rate), with most SMs holding two blocks of the read; and each token
 * group pays a norm pass of its own.  relay_t ran a group's chains side by
 * side in a thread but kept the hand-offs and the one activation load a
 * fmaf, and lost the stream pipeline.
 *
 * Here (slice.h has the arithmetic and says which thread sums what):
 *   - a cluster of 8 blocks, rank r holding norm warp r's columns of every
 *     token and stream, which are also down lanes 4r .. 4r+3's columns: a
 *     lane's chain of 40 chunks runs whole in one thread, every block's
 *     chains at once, two rows x two tokens a thread (each weight chunk
 *     widened once for both tokens, each activation chunk loaded once for
 *     both rows; thread pairs share their loads);
 *   - one norm pass for all tokens: each rank sums its norm warp of every
 *     (token, stream) from its own columns and the ranks exchange those
 *     sums by st.async (8 x 4T floats a rank);
 *   - the 32 lane sums of each (token, row) meet by st.async in one rank of
 *     the cluster, which runs the row's butterfly: lo, stored; one grid
 *     barrier (hct_grid.h); every block gathers lo;
 *   - the up stage four streams x four tokens a thread (a group of 8 per
 *     channel, canonical lanes ul, ul+8, ul+16, ul+24 and chunk ul+32), the
 *     gates and the mix in the registers of the group's lanes.
 * Weights: w_norm's tile and w_down's by cp.async before the PDL wait,
 * two groups (xn waits for the first only; rows padded in shared memory,
 * so a quarter warp's loads fall on distinct banks), w_up's rows once the
 * block has arrived at the grid barrier (relay: a release waits for the
 * block's copies in flight).  R of the block's columns by plain loads in
 * the norm (prefetched into L2 before the wait, as relay does), R of its
 * mix channels while the cluster's norm sums travel.
 *
 * Parameters: NCL, clusters: 16 (128 blocks, even splits) or 15 (120
 * blocks; clusters of 8 may hold 21 or 22 rows, blocks 21 or 22 channels):
 * the card holds 30 clusters of 8 blocks of this size (docs/perf/h200.md),
 * so two reads of 15 fit at once and none waits for a slot, and pipe's
 * 120-block lab run found one block of a read an SM instead of two.
 * Always a programmatic dependent launch (the manifest's pdl): without one
 * the hooks do nothing.  Scratch: lo (T*K floats), ws (the barrier's
 * state, zeroed once).
 *
 * Predicted, not measured (docs/perf/h100.md).
 */
#include "hc_read.h"
#define HCT_GRID_BACKOFF_NS 0
#include "hct_grid.h"
#define PF 0
#include "fast_common.h"
#include "hct_bulk.h"
#include "hct_cluster.h"
#include "slice.h"
#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "slice: needs thread block clusters and st.async (sm_90 or later)"
#endif

/* The block's mbarriers: the cluster's norm sums, the row partials it
 * reduces.  Each takes one phase a launch (hct_bulk.h). */
#define SL_BAR_NS 0
#define SL_BAR_RS 1

HCT_ENTRY void __cluster_dims__(SL_CL, 1, 1) __launch_bounds__(SL_NT, 2)
    hc_sl_read(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down, const hct_u16 *w_up,
               float *lo, hct_u32 *ws, float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  HCT_DYN_SHARED(hct_u4, sl_sm);
  char *sm = (char *)sl_sm;
  hct_u64 *bar = (hct_u64 *)(sm + SL_OFF_BAR);
  const int tid = (int)threadIdx.x;
  const sl_geo o = sl_geometry(hct_cluster_id(), hct_cluster_rank(), (int)blockIdx.x);
  hct_grid_t grid = hct_grid_begin(ws);
  {
    /* The manifest's smem is this layout's (a mismatch is a fault, not
     * corrupt shared memory). */
    hct_u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (hct_u32)SL_SMEM(T)) __trap();
  }

  /* ---- before the wait: the weights (no kernel writes them), R into L2 --- */
  hcr_pdl_launch();
  for (int p = tid; p < T * S * (SL_QS + 1); p += SL_NT) {
    const int t = p / (S * (SL_QS + 1)), s = (p / (SL_QS + 1)) % S, m = p % (SL_QS + 1);
    /* m < 10: a 128-byte run of the block's norm columns; m = 10: its mix channels' */
    const long long at = ((long long)t * S + s) * C + (m < SL_QS ? 256 * m + 32 * o.r : o.cu0);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(resid + at));
    if (pending != 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(pending + at));
  }
  if (tid == 0) {
    hct_bulk_init(bar + SL_BAR_NS);
    hct_bulk_init(bar + SL_BAR_RS);
    hct_bulk_expect(bar + SL_BAR_NS, (hct_u32)sl_ns_bytes(T));
    hct_bulk_expect(bar + SL_BAR_RS, (hct_u32)sl_rs_bytes(T, o.nr, o.r));
  }
  const auto cp16 = [](void *d, const void *s) { hct_cp_async16(d, s); };
  sl_load_wn(sm, w_norm, o, tid, cp16);
  hct_cp_async_commit(); /* group 1: w_norm, for xn */
  sl_load_wd(sm, w_down, o, tid, cp16);
  hct_cp_async_commit(); /* group 2: w_down, for the chains */
  __syncthreads();              /* the mbarriers' init, before any wait names them */
  hct_cluster_arrive_relaxed(); /* waited for before the first st.async */
  hcr_pdl_wait();

  /* ---- R', the norm: warp r's sums exchanged across the cluster --------- */
  sl_norm(T, resid, pending, sm, o, tid);
  __syncthreads();
  hct_cluster_wait(); /* every block of the cluster has initialised its mbarriers */
  const auto send_ns = [&](int off, float v, int rank) { hct_st_async((float *)(sm + off), v, bar + SL_BAR_NS, rank); };
  sl_norm_send(T, sm, o, tid, send_ns);
  sl_load_rm(T, resid, pending, sm, o, tid); /* needed after the grid barrier: loaded while the sums travel */
  hct_bulk_wait(bar + SL_BAR_NS, 0);
  sl_scales(T, sm, tid);
  hct_cp_async_wait<1>(); /* this thread's copies of w_norm (w_down may still be on its way) */
  __syncthreads();
  sl_xn(T, sm, tid);
  hct_cp_async_wait<0>(); /* w_down */
  __syncthreads();

  /* ---- down: whole lane chains; each row's lane sums to its reducer ------ */
  const auto send_rs = [&](int off, float v, int rank) { hct_st_async((float *)(sm + off), v, bar + SL_BAR_RS, rank); };
  sl_down(T, sm, o, tid, send_rs);
  hct_bulk_wait(bar + SL_BAR_RS, 0);
  sl_rows(T, sm, lo, o, tid);
  hct_grid_arrive(&grid);
  /* w_up into w_down's place (every chain is done with it: the arrival's
   * __syncthreads), landing while the barrier completes; issued once
   * thread 0's arrival is (relay: a release waits for the block's copies
   * in flight, and relay's arriving thread issues its copies after it). */
  __syncthreads();
  sl_load_wup(sm, w_up, o, tid, cp16);
  hct_cp_async_commit();
  if (!hct_grid_wait(&grid)) return;

  /* ---- R' stored, lo gathered, up and mix ------------------------------- */
  sl_store_resid(T, resid, pending, sm, o, tid);
  sl_gather(T, lo, sm, tid, [](const float *p) { return hct_ldcg4(p); });
  hct_cp_async_wait<0>(); /* w_up */
  __syncthreads();
  sl_upmix(T, sm, o, tid, mixed, mixed_bf16, mixed_f16);
}
