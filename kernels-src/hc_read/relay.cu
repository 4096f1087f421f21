/*
 * relay: hc_read in one persistent launch, class bitwise (every output bit
 * equal to v1's), sized like `pipe` so that two reads are in flight on
 * every SM: each block asks for its weights before it waits for the
 * previous read (programmatic dependent launch), so the next read's
 * weights stream in while this one computes.
 *
 * Why not split the down dot over blocks the way pipe does: the canonical
 * order fixes each lane's fmaf chain, and lane L of row j walks chunks
 * L + 32q for q = 0..39, ten in each stream, stream 0 first.  So a block
 * that holds one stream's columns of a row can run every lane's chain
 * over that stream, as long as it starts from the accumulator the block
 * of the stream before left: the chains are relayed, stream to stream,
 * across a cluster of four blocks, by st.async into the next block's
 * shared memory, completing on its mbarrier.  The relay is pipelined over
 * token groups (G tokens a hand-off), so stream 1 works on the first group
 * while stream 0 works on the second.
 *
 * Work, 128 blocks in 32 clusters of 4 (rank s = stream s):
 *   norm   every block runs the canonical norm of its own stream for every
 *          token (256 threads, fmaf over c = i + 256m, the two butterflies),
 *          redundantly across clusters: no exchange is needed for rs, and
 *          xn = fl(fl(R' * w_norm) * rs) of its stream lands in shared
 *          memory.  R comes in by one bulk copy a token, each on its own
 *          mbarrier, pending by loads; a token group's norm runs as soon
 *          as its R has landed, right before its chains.
 *   down   cluster c owns rows 10c .. 10c+9; thread (L, j) = tid / 10,
 *          tid % 10 holds row j's 80 weights of lane L in stream s in
 *          registers (ten 16-byte loads issued before the wait), and runs
 *          lane L's chain over the stream for each token of a group, from
 *          the accumulator stream s - 1 handed over.  The block of stream 3
 *          ends the chains and runs each row's butterfly (xor 16, 8, 4, 2,
 *          1, the same additions) out of shared memory: lo[t][j] into
 *          global scratch.
 *   grid   one grid barrier (hct_grid.h); every block reads lo.
 *   up     block b owns channels 20b .. 20b+19, the 80 rows s*C + c of
 *          w_up (four bulk copies into the activations' space once the
 *          block has arrived at the barrier); thread (row slot, L < 8) runs
 *          the canonical lanes L, L+8, L+16, L+24 of two rows (lane L also
 *          takes chunk L+32) for four tokens at a time, each weight chunk
 *          widened once for the four, adds them as the butterfly's first
 *          two levels do and finishes levels 4, 2, 1 with shuffles inside
 *          its group of eight; sigmoid; the mix of its channels (canonical
 *          fmaf order).
 *
 * Measured (docs/perf/h200.md, tools/lab, hctune bench at 7835364): 8.84
 * us a read at T=1 to 22.51 at T=8, the fastest bitwise variant at every
 * T; at T=1 the stages after the PDL wait take R' 0.7 us, norm and xn
 * 0.6, the four relay stages 0.5-0.7 each, the grid barrier about 1 us
 * after the last arrival, which comes 1.7 us after the median one (not
 * because the last two clusters start late: with 124 blocks, so that two
 * reads fit the card's 62 clusters of four, a read was no faster), the up
 * stage 1.2.  Its skeleton (tools/lab: the same launch, loads, copies,
 * barrier and stores with no arithmetic) takes 6.4 us a read at T=1 and
 * 9.6 at T=8: the weight stream slows the chain's round trips.
 * ncu calls it latency-bound (few eligible warps, stalls at barriers);
 * halving its shared-memory wavefronts (two rows a thread) made nothing
 * faster.
 *
 * Parameters: PDL (0: the read runs alone), GB (grid barrier back-off,
 * ns), G (tokens a relay hand-off: 1 or 2), NG (tokens a norm pass: each
 * token's norm right before its chains, or four at a time), LT (with PDL:
 * the next read launched at the start, or once the grid barrier passed).
 * Scratch: lo (T*K floats), ws (the barrier's state, zeroed once).  Built
 * by nvcc too (tools/lab/): HCR_LAB leaves the entry out, and each stage
 * can record the global timer (hct_lab.h: without HCR_LAB, as in hctune,
 * the HCT_LAB_ hooks are empty and the trace parameter is not there).
 */
#include "hc_read.h"
#ifndef GB
#error "relay: GB must be defined"
#endif
#define HCT_GRID_BACKOFF_NS GB
#include "hct_grid.h"
#define PF 0
#include "fast_common.h"
#include "hct_bulk.h"
#include "hct_cluster.h"
#include "hct_lab.h"
#ifndef PDL
#error "relay: PDL must be defined"
#endif
#ifndef G
#error "relay: G must be defined"
#endif
#ifndef NG
#error "relay: NG must be defined"
#endif
#ifndef LT
#error "relay: LT must be defined"
#endif
#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "relay: needs thread block clusters and st.async (sm_90 or later)"
#endif

#define RL_NT 320             /* threads */
#define RL_NB 128             /* blocks */
#define RL_CL 4               /* a cluster: one block a stream */
#define RL_RPC 10             /* w_down rows a cluster */
#define RL_QS (HCR_DOWN_Q / S) /* chunks of a lane chain in one stream: 10 */
#define RL_NCU 20             /* channels a block, up and mix */
#define RL_NR (S * RL_NCU)    /* w_up rows a block: 80 */
#define RL_TMAX 8
#define RL_UPT 4              /* tokens a pass of the up stage */
#define RL_NBAR (2 + 2 * RL_TMAX) /* mbarriers: w_norm, w_up, one a token group, one a token's R */
#define RL_BAR_R (2 + RL_TMAX)
static_assert(S == RL_CL && HCR_DOWN_Q == S * RL_QS, "relay: a block per stream, ten chunks of a chain each");
static_assert(K == (RL_NB / RL_CL) * RL_RPC && RL_NT == HCT_LW * RL_RPC, "relay: a thread per (lane, row)");
static_assert(C == RL_NB * RL_NCU && RL_NR * 4 == RL_NT && RL_NT == (RL_NR / 2) * 8, "relay: 40 row slots of 8 lanes, two w_up rows each");
static_assert(C == HCR_NORM_THREADS * HCR_NORM_PER_THREAD, "relay: the norm's threads take ten elements each");
static_assert(HCR_UP_CHUNKS == 40, "relay: up lane L takes chunk L, and L+32 when L < 8");
static_assert(G == 1 || G == 2 || G == 4, "relay: G is 1, 2 or 4");
static_assert(NG >= 1 && NG <= RL_TMAX && NG % G == 0, "relay: a norm pass covers whole token groups");

/* Shared memory, bytes from the start; the activations last, sized by T
 * (the manifest's smem: RL_OFF_X + max(T*C*4, RL_NR*K*2)). */
#define RL_OFF_WN 0                                   /* w_norm of the stream, C bf16 */
#define RL_OFF_RCV (RL_OFF_WN + C * 2)                /* [t][tid] f32: the chains handed over */
#define RL_OFF_LO (RL_OFF_RCV + RL_TMAX * RL_NT * 4)  /* lo after the barrier, [half][t][K/8] f4 */
#define RL_OFF_GT (RL_OFF_LO + RL_TMAX * K * 4)       /* gates [t][80] f32 */
#define RL_OFF_RED (RL_OFF_GT + RL_TMAX * RL_NR * 4)  /* the norm's warp sums [t][8] (and 8 floats unused) */
#define RL_OFF_BAR (RL_OFF_RED + RL_TMAX * 9 * 4)     /* RL_NBAR mbarriers */
#define RL_OFF_X ((RL_OFF_BAR + RL_NBAR * 8 + 127) / 128 * 128) /* xn [t][C] f32; later w_up [80][K] bf16 */
static_assert(RL_OFF_X == 28672, "relay: the manifest's smem starts the activations at 28672");

#define RL_PARAMS                                                                                \
  float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,             \
      const hct_u16 *w_up, float *lo, hct_u32 *ws, float *mixed, hct_u16 *mixed_bf16,            \
      hct_u16 *mixed_f16, int T

#define RL_ARGS resid, pending, w_norm, w_down, w_up, lo, ws, mixed, mixed_bf16, mixed_f16, T

/* Tokens t0 .. t0+NTK-1 of stream s, by every thread of the block (two
 * __syncthreads): R' = fl(R + P) in place once each token's copy has
 * landed, the canonical norm of each (threads 0..255, fmaf over
 * c = i + 256m, the warp butterfly, the eight warp sums by the butterfly
 * 4, 2, 1, which every warp runs alike), and xn = fl(fl(R' * w_norm) * rs)
 * in place.  The NTK tokens go through each step together, so that one
 * token's latencies (loads, shuffles, barriers) cover all of them.
 * red: 8 floats of its own a token. */
template <int NTK>
HCT_DEV void rl_norm_tokens(int t0, int s, float *xs, const float *pending, const hct_u16 *wn, float *red,
                            hct_u64 *bar_r, hct_u64 *bar_wn, int tid, int wp, int lane HCT_LAB_TRACE) {
  const bool norm = tid < HCR_NORM_THREADS;
  float *x0 = xs + (long long)t0 * C + tid;
#pragma unroll
  for (int u = 0; u < NTK; ++u) {
    if (norm && pending != 0) {
      /* Each thread adds P to the elements it sums below (its own). */
      const float *p = pending + ((long long)(t0 + u) * S + s) * C + tid;
      float pv[HCR_NORM_PER_THREAD];
#pragma unroll
      for (int m = 0; m < HCR_NORM_PER_THREAD; ++m) pv[m] = p[m * HCR_NORM_THREADS];
      hct_bulk_wait(bar_r + u, 0);
#pragma unroll
      for (int m = 0; m < HCR_NORM_PER_THREAD; ++m)
        x0[u * C + m * HCR_NORM_THREADS] = x0[u * C + m * HCR_NORM_THREADS] + pv[m];
    } else {
      hct_bulk_wait(bar_r + u, 0);
    }
  }
  if (t0 == 0) HCT_LAB_STAMP(2);
  if (norm) {
    float a[NTK];
#pragma unroll
    for (int u = 0; u < NTK; ++u) a[u] = 0.0f;
#pragma unroll
    for (int m = 0; m < HCR_NORM_PER_THREAD; ++m)
#pragma unroll
      for (int u = 0; u < NTK; ++u) {
        const float x = x0[u * C + m * HCR_NORM_THREADS];
        a[u] = fmaf(x, x, a[u]);
      }
#pragma unroll
    for (int u = 0; u < NTK; ++u) a[u] = hct_warp_sum(a[u]);
    if (lane == 0)
#pragma unroll
      for (int u = 0; u < NTK; ++u) red[(t0 + u) * 8 + wp] = a[u];
  }
  __syncthreads();
  if (norm) {
    float rs[NTK];
#pragma unroll
    for (int u = 0; u < NTK; ++u) {
      /* Warp k's sum in lane k, butterfly 4, 2, 1 on lanes 0..7. */
      float b = lane < HCR_NORM_THREADS / HCT_LW ? red[(t0 + u) * 8 + lane] : 0.0f;
      b += hct_shfl_xor(b, 4);
      b += hct_shfl_xor(b, 2);
      b += hct_shfl_xor(b, 1);
      rs[u] = rsqrtf(__shfl_sync(0xffffffffu, b, 0) / (float)C + HCT_EPS);
    }
    hct_bulk_wait(bar_wn, 0); /* w_norm */
#pragma unroll
    for (int m = 0; m < HCR_NORM_PER_THREAD; ++m) {
      const float w = hct_bf16_lo((hct_u32)wn[tid + m * HCR_NORM_THREADS]);
#pragma unroll
      for (int u = 0; u < NTK; ++u) {
        float *x = x0 + u * C + m * HCR_NORM_THREADS;
        const float y = *x * w;
        *x = y * rs[u];
      }
    }
  }
  __syncthreads();
  if (t0 == 0) HCT_LAB_STAMP(3);
}

/* rl_norm_tokens<n> for a run-time n <= N. */
template <int N>
HCT_DEV void rl_norm_n(int n, int t0, int s, float *xs, const float *pending, const hct_u16 *wn, float *red,
                       hct_u64 *bar_r, hct_u64 *bar_wn, int tid, int wp, int lane HCT_LAB_TRACE) {
  if (n == N) rl_norm_tokens<N>(t0, s, xs, pending, wn, red, bar_r, bar_wn, tid, wp, lane HCT_LAB_PASS);
  else if constexpr (N > 1) rl_norm_n<N - 1>(n, t0, s, xs, pending, wn, red, bar_r, bar_wn, tid, wp, lane HCT_LAB_PASS);
}

/* The up stage's dots for tokens t0 .. t0+NTK-1 of the thread's two rows
 * (ir and ir + 40) and canonical lanes ul, ul+8, ul+16, ul+24 (lane ul also
 * takes chunk ul+32, after its first): the raw gate u of each into gt.
 * Chunk by chunk, the weights widened once for the NTK tokens; per token
 * the butterfly's levels 16 and 8 as the additions they are, then levels
 * 4, 2, 1 by shuffles inside the group of eight.  (hctune bench: 0.2 to
 * 2.0 us a read faster at T = 2..8 than the token-by-token loop of
 * 197c06b, 27abb4b against 27abb4b's tree with that loop; four rows and
 * two lanes a thread, a third less loaded from shared memory, was 0.2 to
 * 2.2 us slower at T = 2..8, f10f680.) */
template <int NTK>
HCT_DEV void rl_up_tokens(int t0, const hct_u4 *w4, const hct_f4 *los, float *gt, int ir, int ul) {
  float va[NTK][4], vb[NTK][4];
#pragma unroll
  for (int k = 0; k < 5; ++k) {
    const int ch = k < 4 ? ul + 8 * k : ul + 32;
    const hct_u4 pa = w4[ir * HCR_UP_CHUNKS + ch], pb = w4[(ir + RL_NR / 2) * HCR_UP_CHUNKS + ch];
    const float wa[8] = {hct_bf16_lo(pa.x), hct_bf16_hi(pa.x), hct_bf16_lo(pa.y), hct_bf16_hi(pa.y),
                         hct_bf16_lo(pa.z), hct_bf16_hi(pa.z), hct_bf16_lo(pa.w), hct_bf16_hi(pa.w)};
    const float wb[8] = {hct_bf16_lo(pb.x), hct_bf16_hi(pb.x), hct_bf16_lo(pb.y), hct_bf16_hi(pb.y),
                         hct_bf16_lo(pb.z), hct_bf16_hi(pb.z), hct_bf16_lo(pb.w), hct_bf16_hi(pb.w)};
#pragma unroll
    for (int u = 0; u < NTK; ++u) {
      const hct_f4 *l4 = los + (t0 + u) * (K / 8);
      const hct_f4 x0 = l4[ch], x1 = l4[RL_TMAX * K / 8 + ch];
      const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float a = k < 4 ? 0.0f : va[u][0], b = k < 4 ? 0.0f : vb[u][0];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        a = fmaf(wa[e], xv[e], a);
        b = fmaf(wb[e], xv[e], b);
      }
      va[u][k < 4 ? k : 0] = a;
      vb[u][k < 4 ? k : 0] = b;
    }
  }
#pragma unroll
  for (int u = 0; u < NTK; ++u) {
    float ua = (va[u][0] + va[u][2]) + (va[u][1] + va[u][3]); /* the butterfly's levels 16 and 8 */
    float ub = (vb[u][0] + vb[u][2]) + (vb[u][1] + vb[u][3]);
    ua += hct_shfl_xor(ua, 4);
    ub += hct_shfl_xor(ub, 4);
    ua += hct_shfl_xor(ua, 2);
    ub += hct_shfl_xor(ub, 2);
    ua += hct_shfl_xor(ua, 1);
    ub += hct_shfl_xor(ub, 1);
    if (ul == 0) {
      gt[(t0 + u) * RL_NR + ir] = ua;
      gt[(t0 + u) * RL_NR + ir + RL_NR / 2] = ub;
    }
  }
}

/* After the grid barrier, by every thread: lo of every cluster into
 * shared memory, and the block's mix channels' R' into rcv [t][s][channel]
 * (stored back into resid with pending).  R' is loaded here, beside lo:
 * every block has read R by now, so storing R' back is safe, and only this
 * block writes these elements; it waits in shared memory, not in registers
 * through the up stage.  lo lands as two halves, [half][t][chunk of 8] of
 * 16 bytes, so that the eight lanes of an up group read 128 contiguous
 * bytes a load (a 16-byte load is served a quarter warp at a time; [t][K]
 * put lanes u and u + 4 on the same banks).  (tools/lab's skeleton of
 * relay calls it too.) */
HCT_DEV void rl_gather(float *resid, const float *pending, const float *lo, float *los, float *rcv, int T, int tid,
                       int cu0) {
  const int mt = tid / RL_NCU, mcl = tid % RL_NCU; /* a thread per (token, channel) */
  float rm[S] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (mt < T) {
#pragma unroll
    for (int sr = 0; sr < S; ++sr) {
      const long long at = ((long long)mt * S + sr) * C + cu0 + mcl;
      rm[sr] = resid[at];
      if (pending != 0) rm[sr] = rm[sr] + pending[at];
    }
  }
  for (int p = tid; p < T * (K / 4); p += RL_NT)
    ((hct_f4 *)los)[(p % 2) * (RL_TMAX * K / 8) + p / 2] = hct_ldcg4(lo + 4 * p);
  if (mt < T)
#pragma unroll
    for (int sr = 0; sr < S; ++sr) {
      rcv[mt * RL_NR + sr * RL_NCU + mcl] = rm[sr];
      if (pending != 0) resid[((long long)mt * S + sr) * C + cu0 + mcl] = rm[sr];
    }
}

/* Lab stamps: 0 start, 14 weights requested, 1 released (PDL wait), 4 the
 * cluster's mbarriers ready, 2 the first token's R' in shared memory, 3 its
 * xn formed, 12 the first hand-off received (streams 1-3), 5 the block's
 * chains done, 6 lo stored, 7 the grid barrier passed, 11 w_up landed, 8 lo
 * gathered, 9 the gates, 10 the end. */
HCT_DEV void rl_read(RL_PARAMS HCT_LAB_TRACE) {
  HCT_DYN_SHARED(hct_u4, rl_sm);
  char *sm = (char *)rl_sm;
  hct_u16 *wn = (hct_u16 *)(sm + RL_OFF_WN);
  float *rcv = (float *)(sm + RL_OFF_RCV);
  float *los = (float *)(sm + RL_OFF_LO);
  float *gt = (float *)(sm + RL_OFF_GT);
  float *red = (float *)(sm + RL_OFF_RED); /* the norm's warp sums, [t][8] */
  hct_u64 *bar = (hct_u64 *)(sm + RL_OFF_BAR);
  float *xs = (float *)(sm + RL_OFF_X);
  hct_u16 *wub = (hct_u16 *)(sm + RL_OFF_X);

  const int tid = (int)threadIdx.x, wp = tid / HCT_LW, lane = tid % HCT_LW;
  const int c = hct_cluster_id(), s = hct_cluster_rank();
  /* down: the chain's lane L and row.  (A warp a row, tid % 32 and tid / 32,
   * so that a warp's w_down loads are contiguous, was 3 us slower a read at
   * T=1 and 11 at T=8, hctune bench at 3988b1d: the chain's activation
   * loads, 32 distinct 32-byte pieces a warp instead of three or four
   * broadcast, bound the relay stages.) */
  const int dl = tid / RL_RPC, dj = tid % RL_RPC;
  const int cu0 = (int)blockIdx.x * RL_NCU;
  hct_grid_t grid = hct_grid_begin(ws);
  HCT_LAB_BEGIN();
  HCT_LAB_STAMP(0);

  /* ---- before the wait: weights (no kernel writes them), R into L2 ----- */
  if (PDL && !LT) hcr_pdl_launch();
  {
    /* This cluster's share of the stream's lines of R (and pending), every
     * block of the stream taking a different share, and the mix channels'. */
    const int lines = T * (C / 32);
    for (int p = c + 32 * tid; p < lines; p += 32 * RL_NT) {
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
    for (int i = 0; i < RL_NBAR; ++i) hct_bulk_init(bar + i);
    hct_bulk_expect(bar, C * 2);
    hct_bulk_copy(wn, w_norm + (long long)s * C, C * 2, bar);
    /* The hand-offs this block receives, a token group's bytes each. */
    if (s > 0)
      for (int gi = 0; gi * G < T; ++gi) hct_bulk_expect(bar + 2 + gi, (hct_u32)(min(G, T - gi * G) * RL_NT * 4));
  }
  /* Row j's weights of lane L over stream s: chunk L + 32q, q = 10s + qq. */
  hct_u4 wr[RL_QS];
  {
    const hct_u16 *src = w_down + (long long)(RL_RPC * c + dj) * D + (long long)s * C + 8 * dl;
    /* Plain loads: as ld.global.nc the compiler moved them past the PDL
     * wait, to their first use, and stream 0's relay stage took 1.6 us
     * instead of 0.7 (hctune bench at 6b3d922: 10.42 against 8.78 us at
     * T=1; tools/lab). */
#pragma unroll
    for (int qq = 0; qq < RL_QS; ++qq) wr[qq] = *(const hct_u4 *)(src + 8 * HCT_LW * qq);
  }
  __syncthreads(); /* the mbarriers' init, before any wait names them */
  hct_cluster_arrive_relaxed(); /* waited for before the first hand-off */
  HCT_LAB_STAMP(14);
  if (PDL) hcr_pdl_wait();
  HCT_LAB_STAMP(1);

  /* ---- R' of the stream, token by token ---------------------------------
   * A bulk copy a token, each on an mbarrier of its own, by lanes 0..T-1 of
   * warp 0.  (By cp.async, 16 bytes a thread, a read was 0.3-0.7 us slower:
   * tools/lab at f22dd70.) */
  if (tid < T) {
    hct_bulk_expect(bar + RL_BAR_R + tid, (hct_u32)(C * 4));
    hct_bulk_copy(xs + tid * C, resid + ((long long)tid * S + s) * C, C * 4, bar + RL_BAR_R + tid);
  }
  hct_cluster_wait(); /* every block of the cluster has initialised its mbarriers */
  HCT_LAB_STAMP(4);

  /* ---- per token group: the canonical norm of stream s, then the chains --
   * Each group's norm runs as soon as its R has landed, and its chains right
   * after, so stream 0 hands its first group over while the later tokens'
   * R is still landing, and the other streams norm a group while they wait
   * for its hand-off.  (Norm of every token first, then the relay: at T=8
   * R' landed 2.8 us and xn 6.1 us after the release before stream 0's
   * first chain, tools/lab at e70e54e.  A token a pass (NG=1) hands the
   * first token over soonest, four a pass costs less a token: hctune bench
   * at 42fa02b and 27abb4b, each faster at some T.) */
  for (int t0 = 0, gi = 0; t0 < T; t0 += G, ++gi) {
    if (t0 % NG == 0)
      rl_norm_n<NG>(min(NG, T - t0), t0, s, xs, pending, wn, red, bar + RL_BAR_R + t0, bar, tid, wp, lane
                    HCT_LAB_PASS);
    float acc[G];
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g] = 0.0f;
    if (s > 0) {
      hct_bulk_wait(bar + 2 + gi, 0); /* stream s - 1's hand-off of this group */
      if (gi == 0) HCT_LAB_STAMP(12);
#pragma unroll
      for (int g = 0; g < G; ++g)
        if (t0 + g < T) acc[g] = rcv[(t0 + g) * RL_NT + tid];
    }
#pragma unroll
    for (int qq = 0; qq < RL_QS; ++qq) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        if (t0 + g < T) {
          const hct_f4 *x = (const hct_f4 *)(xs + (long long)(t0 + g) * C + 8 * HCT_LW * qq + 8 * dl);
          acc[g] = hcr_dot8(wr[qq], x[0], x[1], acc[g]);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (t0 + g < T) {
        float *dst = rcv + (t0 + g) * RL_NT + tid;
        if (s == S - 1) *dst = acc[g]; /* this thread's own slot: read above, by it */
        /* The hand-off: by st.async into the next stream's block, completing
         * on its mbarrier.  (Plain remote stores and one release arrival
         * after a __syncthreads were slower at every T: hctune bench at
         * faf7c38, 10.06 against 8.92 us at T=1, 27.44 against 25.66 at
         * T=8.) */
        else hct_st_async(dst, acc[g], bar + 2 + gi, s + 1);
      }
    }
  }
  __syncthreads(); /* every thread is done with xs (and, in stream 3, rcv holds the chains) */
  HCT_LAB_STAMP(5);
  if (s == S - 1 && tid < T * RL_RPC) {
    /* Row j's butterfly for token t: lane L + m into lane L, m = 16 .. 1. */
    const int t = tid / RL_RPC, j = tid % RL_RPC;
    float v[HCT_LW];
#pragma unroll
    for (int l = 0; l < HCT_LW; ++l) v[l] = rcv[t * RL_NT + l * RL_RPC + j];
    /* (each level its own loop: nested, the compiler left v in local memory) */
#pragma unroll
    for (int l = 0; l < 16; ++l) v[l] = v[l] + v[l + 16];
#pragma unroll
    for (int l = 0; l < 8; ++l) v[l] = v[l] + v[l + 8];
#pragma unroll
    for (int l = 0; l < 4; ++l) v[l] = v[l] + v[l + 4];
    v[0] = v[0] + v[2];
    v[1] = v[1] + v[3];
    v[0] = v[0] + v[1];
    lo[(long long)t * K + RL_RPC * c + j] = v[0];
  }
  HCT_LAB_STAMP(6);
  hct_grid_arrive(&grid);
  /* w_up's 80 rows (four runs of 20 contiguous rows, one a stream) into the
   * activations' space, landing while the barrier completes; the loop's
   * reads of xs (generic proxy) before the copies' writes (async proxy).
   * Issued after the arrival, because the arrival's release waits for the
   * block's bulk copies in flight (pipe's finding; tools/lab at 06cc33f,
   * copies issued before it: the barrier ended 3.3 us after stream 3's
   * last lo store). */
  if (tid == 0) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    hct_bulk_copy_runs(wub, w_up + (long long)cu0 * K, (long long)C * K * 2, RL_NCU * K * 2, S, bar + 1);
  }
  if (!hct_grid_wait(&grid)) return;
  /* LT: the next read may start only now, so that its weight stream (6.5
   * MB of w_down requested before its wait) does not slow this read's R
   * and barrier (relay's skeleton in tools/lab: R 0.6 us and the barrier
   * 2 us slower under the stream).  hctune bench at 5c9a1eb: 0.1-0.5 us a
   * read faster at T = 3..6, where the gather and up stage after the
   * barrier are long enough to cover the next read's w_down; 0.5-1.7 us
   * slower at T = 1, 2, 7, 8. */
  if (PDL && LT) hcr_pdl_launch();
  HCT_LAB_STAMP(7);

  /* ---- lo from every cluster; this block's R' stored -------------------- */
  const int mt = tid / RL_NCU, mcl = tid % RL_NCU; /* the mix: a thread per (token, channel) */
  rl_gather(resid, pending, lo, los, rcv, T, tid, cu0);
  hct_bulk_wait(bar + 1, 0); /* w_up */
  HCT_LAB_STAMP(11);
  __syncthreads();
  HCT_LAB_STAMP(8);

  /* ---- up: thread (row slot, L < 8) takes rows ir and ir + 40 -----------
   * Four tokens at a time (rl_up_tokens): each 16-byte chunk of both rows'
   * weights is loaded and widened to floats once for the four, and each
   * chunk of lo is loaded once for both rows. */
  {
    const int ul = tid % 8, ir = tid / 8;
    const hct_u4 *w4 = (const hct_u4 *)wub;
    for (int t0 = 0; t0 < T; t0 += RL_UPT) {
      switch (min(RL_UPT, T - t0)) {
      case 4: rl_up_tokens<4>(t0, w4, (const hct_f4 *)los, gt, ir, ul); break;
      case 3: rl_up_tokens<3>(t0, w4, (const hct_f4 *)los, gt, ir, ul); break;
      case 2: rl_up_tokens<2>(t0, w4, (const hct_f4 *)los, gt, ir, ul); break;
      default: rl_up_tokens<1>(t0, w4, (const hct_f4 *)los, gt, ir, ul); break;
      }
    }
  }
  __syncthreads();
  for (int p = tid; p < T * RL_NR; p += RL_NT) gt[p] = hcr_sigmoid(gt[p]);
  __syncthreads();
  HCT_LAB_STAMP(9);

  /* ---- mix ---------------------------------------------------------------*/
  if (mt < T)
    hcr_mix_out(gt + mt * RL_NR + mcl, RL_NCU, rcv + mt * RL_NR + mcl, RL_NCU, (long long)mt * C + cu0 + mcl, mixed,
                mixed_bf16, mixed_f16);
  HCT_LAB_STAMP(10);
  HCT_LAB_OUT();
}

#ifndef HCR_LAB
/* Grid 128 in clusters of 4, block 320, dynamic shared memory
 * RL_OFF_X + max(T*C*4, 80*K*2). */
HCT_ENTRY void __cluster_dims__(RL_CL, 1, 1) __launch_bounds__(RL_NT, 2) hc_rl_read(RL_PARAMS) {
  rl_read(RL_ARGS);
}
#endif
