/*
 * pipe: hc_read in one persistent launch, class kl, sized so that two
 * reads are in flight on every SM: while one read computes, the next
 * read's blocks are already resident and their weights are streaming into
 * shared memory and registers.
 *
 * Why: a read moves 13.11 MB of weights and its dependency chain (norm,
 * down, an exchange across the chip, up, mix) is latency-bound.  `persist`
 * fills an SM (640 threads, about 180 KB), so the next read's blocks can
 * only start once this read's blocks have left, and every read pays its
 * weight stream and its chain one after the other.  Here a block takes
 * 320 threads (at most 96 registers) and about 103 KB of shared memory, so
 * two fit on an SM; each block lets the next launch begin at once
 * (programmatic dependent launch, PDL), requests its weights, and only
 * then waits for the previous read.  The stream of read n+1 then overlaps
 * the chain of read n.
 *
 * Work, 128 blocks in 16 clusters of 8 (clusters of 4 are supported: CL):
 *   down   cluster (g, h) owns rows 40g .. 40g+39 of w_down over streams
 *          2h and 2h+1; its block of rank r the quarter r%4 (640 columns)
 *          of stream 2h + r/4.  Before the wait: R (and pending) are
 *          prefetched into L2, the w_down tile and w_norm land in shared
 *          memory by 41 bulk copies issued from all ten warps.  After the
 *          wait a thread per (token, 8 columns) reads R' from L2, sums its
 *          squares (the norm's partial), forms y = fl(R' * w_norm) and
 *          splits each y into three bf16 terms (hi + mid + lo == y
 *          exactly), stored as mma A registers in "planes" (pp_split8).
 *          The dots run on tensor cores (mma.sync m16n8k16, f32
 *          accumulate): tokens are A's rows (hi terms in rows 0..7 and mid
 *          in 8..15 of one mma, lo in rows 0..7 of a second), w_down rows
 *          the columns of B; every product is exact in f32, only the
 *          accumulation rounds.  A warp takes 64 columns of all 40 rows, so
 *          it loads each step's activations once for five column tiles;
 *          the ten warps' partials are summed in shared memory.
 *   cluster each block pushes its partial dots and sums of squares, by
 *          st.async, into the shared memory of the cluster's block that
 *          reduces those rows (five a block), completing on that block's
 *          mbarrier; the reducer scales by its two streams' rs (the norm's
 *          scale commutes with the dot: lo is linear in each stream's
 *          partial) and stores them.
 *   grid   one grid barrier (hct_grid.h); then every block gathers
 *          lo = part[0] + part[1] (the two stream halves) into the planes.
 *   up     block b owns channels 20b .. 20b+19, the 80 rows s*C + c of
 *          w_up, copied (four bulk copies) into w_down's shared memory
 *          once the down loop is done; a warp takes 40 rows x 64 columns
 *          of K; the five warps of a row group summed in shared memory;
 *          sigmoid; the mix of its channels.
 *
 * Columns within a 32-column step are given to mma k positions in a
 * permuted order (a lane's 8 contiguous columns serve positions 2q, 2q+1,
 * 2q+8, 2q+9 of two steps), the same for A and B, so every operand is one
 * 16-byte load.
 *
 * Measured (docs/perf/h200.md, tools/lab): the overlap works (the chain
 * after the wait starts with every weight on chip), but the chain itself
 * is 7.5-9 us where about 3.5 were predicted.  What it waits on: the
 * blocks of the last two clusters, which find no room until the previous
 * read's blocks leave (the card holds 30 clusters of 8 such blocks, not
 * the 32 of two reads), so the grid barrier waits for them; in that
 * steady state most SMs hold two blocks of the same read; a release (the
 * grid barrier's arrival) waits for the block's bulk copies in flight;
 * and each stage's L2 traffic runs beside the next read's weight stream.
 * A read costs 8.4 to 10.7 us (8a1c78d), nearly flat in T.
 *
 * Deterministic: fixed orders everywhere.  Parameters: PDL (see above;
 * without it the read runs alone), GB (the grid barrier's back-off, ns),
 * CL (cluster size).  Scratch: part (PP_NH*T*K floats of 4*T*K), ws (the
 * barrier's state, zeroed once).
 * Built by nvcc too (tools/lab/): HCR_LAB leaves the entry out, and each
 * stage can record the global timer (hct_lab.h: without HCR_LAB, as in
 * hctune, the HCT_LAB_ hooks are empty and the trace parameter is not
 * there; so are the PP_EXP experiments).
 */
#include "hc_read.h"
#ifndef GB
#error "pipe: GB must be defined"
#endif
#define HCT_GRID_BACKOFF_NS GB
#include "hct_grid.h"
#define PF 0
#include "fast_common.h"
#include "hct_bulk.h"
#include "hct_cluster.h"
#include "hct_lab.h"
#ifndef PDL
#error "pipe: PDL must be defined"
#endif
#ifndef CL
#error "pipe: CL must be defined"
#endif
#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "pipe: needs thread block clusters and bf16 mma (sm_90 or later)"
#endif

#define PP_NT 320           /* threads */
#define PP_NW 10            /* warps */
#define PP_NB 128           /* blocks */
#define PP_CL CL            /* blocks a cluster: 4 (one stream) or 8 (two) */
#define PP_SPC (PP_CL / 4)  /* streams a cluster: its ranks take the four quarters of each */
#define PP_NH (S / PP_SPC)  /* stream groups: the partials of lo the gather sums */
#define PP_RPC 40           /* w_down rows a cluster */
#define PP_RPB (PP_RPC / PP_CL) /* rows of lo a block reduces over its cluster */
#define PP_KPB 640          /* w_down columns a block: a quarter stream */
#define PP_WDS (PP_KPB + 32) /* w_down tile row stride, bf16: 64 B of padding, conflict-free */
#define PP_NCU 20           /* channels a block, up and mix */
#define PP_NR (S * PP_NCU)  /* w_up rows a block: 80 */
#define PP_DC8 (PP_KPB / 8) /* chunks of 8 columns a token, down: 80 */
#define PP_UC8 (K / 8)      /* chunks of 8 columns a token, up: 40 */
#define PP_DTS (PP_DC8 + 4) /* split plane token stride, down, in 16-byte units (padded: conflict-free) */
#define PP_UTS (PP_UC8 + 4) /* the same, up */
#define PP_TMAX 8           /* tokens: the 8 rows of an mma's A that are used */
static_assert(S == 4 && C == 4 * PP_KPB, "pipe: a block takes a quarter of a stream");
static_assert(PP_CL == 4 || PP_CL == 8, "pipe: clusters of 4 or 8");
static_assert((K / PP_RPC) * PP_NH * PP_CL == PP_NB, "pipe: 8 row groups x stream groups x ranks");
static_assert(C == PP_NB * PP_NCU && PP_NR == 8 * PP_NW, "pipe: a warp per 8 up rows");
static_assert(PP_RPC == 5 * 8 && PP_NW == 2 * 5, "pipe: down is 5 column tiles x 2 halves");
static_assert(K % 32 == 0 && PP_KPB % 64 == 0, "pipe: whole 32-column steps");
static_assert(PP_NH <= 4, "pipe: part is 4*T*K floats (the manifest)");

/* Shared memory, bytes from the start (the manifest's smem is PP_SMEM).
 * The split planes hold the activations as mma A registers, computed once
 * a block (pp_split8), [plane][token][chunk of 8 columns] of 16 bytes. */
#define PP_OFF_WD 0                                      /* [40][PP_WDS] bf16; later the gates */
#define PP_OFF_SP (PP_OFF_WD + PP_RPC * PP_WDS * 2)      /* [4][8][PP_DTS] u4; up: [4][8][PP_UTS] */
#define PP_OFF_WN (PP_OFF_SP + 4 * PP_TMAX * PP_DTS * 16) /* w_norm, 640 bf16 */
#define PP_RCVN (PP_CL * PP_TMAX * (PP_RPB + 1))         /* what the cluster sends a block, floats */
#define PP_OFF_RCV (PP_OFF_WN + PP_KPB * 2)              /* [rank][t][PP_RPB dots, 1 sum of squares] f32 */
#define PP_OFF_SSI (PP_OFF_RCV + PP_RCVN * 4)            /* sums of squares of each chunk [8][80] f32 */
#define PP_OFF_BAR (PP_OFF_SSI + PP_TMAX * PP_DC8 * 4) /* mbarriers: w_down, w_up, the cluster's partials */
#define PP_SMEM (PP_OFF_BAR + 24)
static_assert(PP_SMEM <= 102168, "pipe: the manifest's smem (102168 bytes at CL=8)");
static_assert(PP_NR * K * 2 <= PP_RPC * PP_WDS * 2 && 16384 + PP_TMAX * PP_NR * 4 <= 4 * PP_TMAX * PP_DTS * 16,
              "pipe: w_up fits where w_down was, the gates in the planes' space");


/* ---- sm_90 pieces ----------------------------------------------------------*/

/* Two floats to a bf16 pair, round to nearest even; `a` in the low half
 * (the lower column of an mma fragment). */
HCT_DEV hct_u32 pp_bf2(float a, float b) {
  hct_u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}
/* a = hi + mid + lo in bf16 pairs: the remainders are exact in f32, and
 * three 8-bit significands cover a float's 24, so the sum is a (to 2^-27
 * relative, far below an f32 rounding). */
struct pp_split {
  hct_u32 h, m, l;
};
HCT_DEV pp_split pp_split2(float a, float b) {
  pp_split s;
  s.h = pp_bf2(a, b);
  const float ra = a - hct_bf16_lo(s.h), rb = b - hct_bf16_hi(s.h);
  s.m = pp_bf2(ra, rb);
  s.l = pp_bf2(ra - hct_bf16_lo(s.m), rb - hct_bf16_hi(s.m));
  return s;
}
/* The three terms of 8 activations (a, b) as four plane entries, each
 * the A registers of one mma as they are passed (no moves): plane 0
 * {hi, mid} of elements 0..3, plane 1 the same of 4..7, planes 2 and 3
 * {lo, 0} of each half.  Token rows past T hold zeros. */
HCT_DEV void pp_split8(hct_u4 *plane, int stride, int t, int c8, hct_f4 a, hct_f4 b) {
  const pp_split e0 = pp_split2(a.x, a.y), e1 = pp_split2(a.z, a.w), e2 = pp_split2(b.x, b.y),
                 e3 = pp_split2(b.z, b.w);
  const hct_u4 q0 = {e0.h, e0.m, e1.h, e1.m}, q1 = {e2.h, e2.m, e3.h, e3.m};
  const hct_u4 q2 = {e0.l, 0u, e1.l, 0u}, q3 = {e2.l, 0u, e3.l, 0u};
  plane[t * stride + c8] = q0;
  plane[(PP_TMAX + t) * stride + c8] = q1;
  plane[(2 * PP_TMAX + t) * stride + c8] = q2;
  plane[(3 * PP_TMAX + t) * stride + c8] = q3;
}
HCT_DEV void pp_zero8(hct_u4 *plane, int stride, int t, int c8) {
  const hct_u4 z = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int i = 0; i < 4; ++i) plane[(i * PP_TMAX + t) * stride + c8] = z;
}

/* d += A * B, one m16n8k16 step; A's rows 0..7 in a0 (k 0..7) and a2
 * (k 8..15), rows 8..15 in a1 and a3. */
HCT_DEV void pp_mma(float (&d)[4], hct_u32 a0, hct_u32 a1, hct_u32 a2, hct_u32 a3, hct_u32 b0, hct_u32 b1) {
#if defined(HCR_LAB) && defined(PP_EXP) && PP_EXP == 1 /* tools/lab experiment: no tensor cores */
  d[0] += __uint_as_float(a0 ^ a1 ^ a2 ^ a3 ^ b0 ^ b1);
  return;
#endif
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* 16 bytes of shared memory at the 32-bit shared address `a` into v when
 * `on` (v unchanged otherwise): a predicated load, no branch, and no
 * generic-to-shared conversion per load (with a generic pointer the
 * compiler re-derived the cluster window, S2R SR_CgaCtaId, at every step). */
HCT_DEV void pp_lds16(hct_u4 &v, hct_u32 a, bool on) {
#if defined(HCR_LAB) && defined(PP_EXP) && PP_EXP == 2 /* tools/lab experiment: no shared loads */
  v.x ^= a; v.y ^= (hct_u32)on;
  return;
#endif
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %4, 0;\n\t@p ld.shared.v4.u32 {%0,%1,%2,%3}, [%5];\n\t}"
               : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
               : "r"((hct_u32)on), "r"(a));
}
/* One 32-column step into a single accumulator: rows 0..7 of C collect
 * the hi and lo terms, rows 8..15 the mid terms (A's rows 8..15), so a
 * token's dot is d[e] + d[2 + e]. */
HCT_DEV void pp_step1(float (&d)[4], const hct_u4 (&qa)[4], hct_u4 w) {
  pp_mma(d, qa[0].x, qa[0].y, qa[0].z, qa[0].w, w.x, w.y);
  pp_mma(d, qa[2].x, qa[2].y, qa[2].z, qa[2].w, w.x, w.y);
  pp_mma(d, qa[1].x, qa[1].y, qa[1].z, qa[1].w, w.z, w.w);
  pp_mma(d, qa[3].x, qa[3].y, qa[3].z, qa[3].w, w.z, w.w);
}
/* The four plane entries of one step (zeros past T stay). */
HCT_DEV void pp_loadq(hct_u4 (&qa)[4], hct_u32 a, hct_u32 pstride, bool live) {
#pragma unroll
  for (int i = 0; i < 4; ++i) pp_lds16(qa[i], a + i * pstride, live);
}

/* Two 32-column steps of lane (tok, q) over five column tiles, the loop
 * of both the down and the up stage: a step's activations (plane entries
 * at pa, planes ps bytes apart) are loaded once and serve the five tiles,
 * whose weights lie at wa + j * wtile; 64 bytes a step on both sides.
 * Tile j's dots accumulate in acc[j]. */
HCT_DEV void pp_tiles5(float (&acc)[5][4], hct_u32 pa, hct_u32 ps, bool live, hct_u32 wa, hct_u32 wtile) {
#pragma unroll
  for (int j = 0; j < 5; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  const hct_u4 z = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    hct_u4 qa[4] = {z, z, z, z};
    pp_loadq(qa, pa + 64 * m, ps, live);
    hct_u4 w[5];
#pragma unroll
    for (int j = 0; j < 5; ++j) {
      w[j] = z;
      pp_lds16(w[j], wa + j * wtile + 64 * m, true);
    }
#pragma unroll
    for (int j = 0; j < 5; ++j) pp_step1(acc[j], qa, w[j]);
  }
}


/* ---- the read --------------------------------------------------------------*/


/* w_up's 80 rows (four runs of 20 contiguous rows, one a stream) into
 * w_down's shared memory by four bulk copies, once every warp is done
 * with w_down; by one thread.  Issued right after the down loop: issued
 * after the cluster exchange the grid barrier's release waited for them,
 * issued after the barrier the up stage did (tools/lab at fe3cee5 and
 * 3853954). */
HCT_DEV void pp_issue_wup(hct_u16 *wub, const hct_u16 *w_up, int cu0, hct_u64 *bar) {
  /* The loop's reads of w_down (generic proxy) before the copies' writes
   * (async proxy). */
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  hct_bulk_copy_runs(wub, w_up + (long long)cu0 * K, (long long)C * K * 2, PP_NCU * K * 2, S, bar);
}

#define PP_PARAMS                                                                               \
  float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,            \
      const hct_u16 *w_up, float *part, hct_u32 *ws, float *mixed, hct_u16 *mixed_bf16,         \
      hct_u16 *mixed_f16, int T
#define PP_ARGS resid, pending, w_norm, w_down, w_up, part, ws, mixed, mixed_bf16, mixed_f16, T

HCT_DEV void pp_read(PP_PARAMS HCT_LAB_TRACE) {
  HCT_DYN_SHARED(hct_u4, pp_sm);
  char *sm = (char *)pp_sm;
  hct_u16 *wd = (hct_u16 *)(sm + PP_OFF_WD);
  float *gt = (float *)(sm + PP_OFF_SP + 16384); /* the gates [t][80], past the up stage's partials */
  hct_u16 *wub = (hct_u16 *)(sm + PP_OFF_WD);      /* w_up's 80 rows [s][cl][K], after the down loop */
  hct_u4 *sp = (hct_u4 *)(sm + PP_OFF_SP);
  hct_u16 *wn = (hct_u16 *)(sm + PP_OFF_WN);
  float *ssi = (float *)(sm + PP_OFF_SSI);

  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int tok = lane >> 2, q = lane & 3; /* an mma fragment's row / column and k pair */
  const int cid = hct_cluster_id(), r = hct_cluster_rank();
  const int g = cid / PP_NH, h = cid % PP_NH, s = PP_SPC * h + r / 4;
  const int j0 = g * PP_RPC;           /* the cluster's first w_down row */
  const int cs0 = (r % 4) * PP_KPB;    /* the block's first column within stream s */
  const int cu0 = (int)blockIdx.x * PP_NCU;
  HCT_LAB_BEGIN();
  HCT_LAB_STAMP(0);
  hct_grid_t grid = hct_grid_begin(ws);

  /* ---- before the wait: the weights (no kernel writes them), R into L2 --- */
  if (PDL) hcr_pdl_launch();
  /* R and pending into L2 before the wait, first: a prefetch returns
   * nothing to the SM, and the loads after the wait read the L2, where
   * the previous kernel's stores land, so this is safe even when the
   * previous read wrote resid.  First, because the blocks placed late (as
   * the previous read ends) run their chain right after, and their R had
   * not landed when they split it (tools/lab at 8a1c78d: 1.2 us); their
   * split came sooner, the read was no faster (3853954). */
  for (int p = tid; p < T * (PP_KPB / 32 + S); p += PP_NT) {
    const int t = p / (PP_KPB / 32 + S), i = p % (PP_KPB / 32 + S);
    const long long at = i < PP_KPB / 32 ? ((long long)t * S + s) * C + cs0 + 32 * i
                                         : ((long long)t * S + (i - PP_KPB / 32)) * C + cu0;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(resid + at));
    if (pending != 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(pending + at));
  }
  /* w_down's 40 row segments (1280 bytes each) and w_norm's by bulk
   * copies: the copy engine moves them, so the 6400 16-byte cp.async a
   * block would issue do not queue in front of the shared loads of the
   * read running beside it on the SM. */
  hct_u64 *bar = (hct_u64 *)(sm + PP_OFF_BAR);
  float *rcv = (float *)(sm + PP_OFF_RCV); /* [rank][t][PP_RPB + 1] */
  if (tid == 0) {
    hct_bulk_init(bar);
    hct_bulk_init(bar + 1);
    hct_bulk_expect(bar, (PP_RPC + 1) * PP_KPB * 2);
    hct_bulk_init(bar + 2); /* fence.mbarrier_init.release.cluster: the cluster sees it */
    hct_bulk_expect(bar + 2, PP_CL * T * (PP_RPB + 1) * 4);
  }
  __syncthreads(); /* the mbarriers' init, before any copy names them */
  /* The cluster's blocks send into each other's shared memory after the
   * down loop, once every block's mbarrier is initialised: arrive now,
   * wait then. */
  hct_cluster_arrive_relaxed();
  /* Row i by lane i / 10 of warp i % 10: each bulk copy holds its warp for
   * 30-50 ns (tools/lab), so 41 from one warp took 1.5-2 us, and a block
   * placed late (as the previous read ends) had its chain held up by that:
   * a read 1 us faster at T=1 (lab at 98a7d4d). */
  for (int row = wp + PP_NW * lane; row <= PP_RPC; row += PP_NW * HCT_LW) {
    if (row < PP_RPC)
      hct_bulk_copy(wd + row * PP_WDS, w_down + (long long)(j0 + row) * D + (long long)s * C + cs0, PP_KPB * 2, bar);
    else
      hct_bulk_copy(wn, w_norm + (long long)s * C + cs0, PP_KPB * 2, bar);
  }
  HCT_LAB_STAMP(14);
  /* w_up is not prefetched into L2 here: with four bulk prefetches a read
   * was 0.1-0.2 us slower than without (lab at e7056b0), with 400 line
   * prefetches slower still (98a7d4d). */
  if (PDL) hcr_pdl_wait();
  HCT_LAB_STAMP(1);

  /* Every global load of the chain's start is issued here, before any
   * use, so that they take one trip to L2 together: R (and pending) of
   * this block's mix channels, which this block owns and stores after the
   * barrier, when every block has read R; and R' of the split pass's
   * items, a thread per (token, chunk of 8 columns), two items a thread.
   * (Before 01715c7 the split pass loaded R' after the weights' wait and
   * after the mix channels' R' had been formed; this order took 0.25 us
   * off a read at T=1 and 0.65 at T=8, tools/lab.) */
  const int mt = tid / PP_NCU, mcl = tid % PP_NCU; /* the mix: a thread per (token, channel) */
  float rm[S] = {0.0f, 0.0f, 0.0f, 0.0f}, rp[S] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (mt < T) {
#pragma unroll
    for (int sr = 0; sr < S; ++sr) {
      const long long at = ((long long)mt * S + sr) * C + cu0 + mcl;
      rm[sr] = resid[at];
      if (pending != 0) rp[sr] = pending[at];
    }
  }
  static_assert(PP_TMAX * PP_DC8 == 2 * PP_NT, "pipe: two split items a thread");
  hct_f4 xa[2], xb[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int p = tid + k * PP_NT, t = p / PP_DC8, c8 = p % PP_DC8;
    const hct_f4 z = {0.0f, 0.0f, 0.0f, 0.0f};
    xa[k] = xb[k] = z;
    if (t < T) {
      const long long at = ((long long)t * S + s) * C + cs0 + 8 * c8;
      xa[k] = *(const hct_f4 *)(resid + at);
      xb[k] = *(const hct_f4 *)(resid + at + 4);
      if (pending != 0) {
        const hct_f4 pa = *(const hct_f4 *)(pending + at), pbv = *(const hct_f4 *)(pending + at + 4);
        hct_f4 &a = xa[k], &b = xb[k];
        a.x = a.x + pa.x; a.y = a.y + pa.y; a.z = a.z + pa.z; a.w = a.w + pa.w;
        b.x = b.x + pbv.x; b.y = b.y + pbv.y; b.z = b.z + pbv.z; b.w = b.w + pbv.w;
      }
    }
  }
  if (pending != 0)
#pragma unroll
    for (int sr = 0; sr < S; ++sr) rm[sr] = rm[sr] + rp[sr];
  HCT_LAB_STAMP(12);
  hct_bulk_wait(bar, 0); /* w_down and w_norm */
  HCT_LAB_STAMP(2);

  /* ---- y = fl(R' * w_norm), split into the planes; sums of squares ------- */
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int p = tid + k * PP_NT, t = p / PP_DC8, c8 = p % PP_DC8;
    if (t >= T) {
      pp_zero8(sp, PP_DTS, t, c8);
      continue;
    }
    hct_f4 a = xa[k], b = xb[k];
    float ss = 0.0f;
    ss = fmaf(a.x, a.x, ss); ss = fmaf(a.y, a.y, ss); ss = fmaf(a.z, a.z, ss); ss = fmaf(a.w, a.w, ss);
    ss = fmaf(b.x, b.x, ss); ss = fmaf(b.y, b.y, ss); ss = fmaf(b.z, b.z, ss); ss = fmaf(b.w, b.w, ss);
    ssi[p] = ss;
    const hct_u4 n = *(const hct_u4 *)(wn + 8 * c8);
    a.x = a.x * hct_bf16_lo(n.x); a.y = a.y * hct_bf16_hi(n.x);
    a.z = a.z * hct_bf16_lo(n.y); a.w = a.w * hct_bf16_hi(n.y);
    b.x = b.x * hct_bf16_lo(n.z); b.y = b.y * hct_bf16_hi(n.z);
    b.z = b.z * hct_bf16_lo(n.w); b.w = b.w * hct_bf16_hi(n.w);
    pp_split8(sp, PP_DTS, t, c8, a, b);
  }
  __syncthreads();
  HCT_LAB_STAMP(3);

  /* ---- down: warp kg takes columns 64kg .. 64kg+63 for all 40 rows ------
   * The activations of a step are loaded once a warp and used for the five
   * column tiles: every warp loading them for its own tile made the loop
   * bound by shared-memory wavefronts (tools/lab: about 100 ns a step). */
  {
    const int kg = wp;
    const hct_u32 wa = hct_smem_addr(wd + tok * PP_WDS + kg * 64 + 8 * q);
    const hct_u32 pa = hct_smem_addr(sp + tok * PP_DTS + kg * 8 + q), ps = PP_TMAX * PP_DTS * 16;
    const bool live = tok < T;
    float acc[5][4];
    pp_tiles5(acc, pa, ps, live, wa, 8 * PP_WDS * 2);
    HCT_LAB_STAMP(11); /* the loop's end (lab only: the stage split finer) */
    /* Lane (tok, q) holds token tok's dots over this warp's columns with
     * rows 8nt + 2q, +1; summed over the ten warps in a fixed order, in
     * the planes' space (every warp is done with them). */
    __syncthreads();
    /* Every warp is done with w_down: w_up's 80 rows (four runs of 20
     * contiguous rows, one a stream) into its place by four bulk copies,
     * landing while the cluster exchange, the barrier and the gather run.
     * (Ten 16-byte loads a thread into registers here stalled their issue
     * 0.5 to 1.2 us: tools/lab at 6a1560f.) */
    if (tid == 0) pp_issue_wup(wub, w_up, cu0, bar + 1);
    float *rd = (float *)sp; /* [warp][t][40] */
    if (live)
#pragma unroll
      for (int nt = 0; nt < 5; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) rd[(kg * PP_TMAX + tok) * PP_RPC + 8 * nt + 2 * q + e] = acc[nt][e] + acc[nt][2 + e];
    __syncthreads();
    /* The cluster's partials, pushed.
     * A release (barrier.cluster.arrive.release, atom.add.release) waits on
     * sm_90 for the block's bulk copies still in flight (tools/lab at
     * fe3cee5: the w_up copies issued after the down loop held the cluster
     * barrier 1.9 us, and the grid barrier's arrival when issued after it).
     * So each block pushes its partial dots into the shared memory of the
     * cluster's block that reduces them, by st.async, which completes on that
     * block's mbarrier: no fence, and the w_up copies land meanwhile, before
     * the grid barrier's release.  (Tagged 64-bit entries of lo behind a
     * relaxed grid barrier, so that no release waits at all, were slower:
     * 10.04 against 9.60 us at T=1, 13.50 against 11.41 at T=8, lab at
     * 5168583: readers spun on entries that arrived late.  Against the
     * pull it replaced, a cluster barrier and loads from the other blocks'
     * shared memory, the push took a read from 9.55 to 8.84 us at T=1 and
     * from 11.36 to 10.82 at T=8: lab at 8a1c78d.) */
    /* Every block of the cluster has initialised its mbarrier. */
    hct_cluster_wait();
    if (tid < T * PP_RPC) {
      float v = 0.0f;
#pragma unroll
      for (int w = 0; w < PP_NW; ++w) v += rd[w * PP_TMAX * PP_RPC + tid];
      /* [t][40]: tid = t * 40 + row; row's reducer is rank row / PP_RPB */
      const int t = tid / PP_RPC, row = tid % PP_RPC;
      hct_st_async(rcv + (r * PP_TMAX + t) * (PP_RPB + 1) + row % PP_RPB, v, bar + 2, row / PP_RPB);
    }
    /* Warp t < T: token t's sum of squares over the block's columns. */
    if (wp < T) {
      float v = ssi[wp * PP_DC8 + lane] + ssi[wp * PP_DC8 + 32 + lane];
      if (lane < PP_DC8 - 64) v += ssi[wp * PP_DC8 + 64 + lane];
      v = hct_warp_sum(v);
      if (lane < PP_CL) hct_st_async(rcv + (r * PP_TMAX + wp) * (PP_RPB + 1) + PP_RPB, v, bar + 2, lane);
    }
  }
  HCT_LAB_STAMP(10);
  hct_bulk_wait(bar + 2, 0); /* the cluster's partials of this block's rows */
  HCT_LAB_STAMP(4);

  /* ---- the cluster's lo over its streams: this block's PP_RPB rows ------- */
  if (tid < PP_RPB * T) {
    const int t = tid / PP_RPB, row = PP_RPB * r + tid % PP_RPB;
    float p[PP_SPC], ss[PP_SPC];
#pragma unroll
    for (int i = 0; i < PP_SPC; ++i) {
      p[i] = ss[i] = 0.0f;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float *e = rcv + ((4 * i + k) * PP_TMAX + t) * (PP_RPB + 1);
        p[i] += e[tid % PP_RPB];
        ss[i] += e[PP_RPB];
      }
    }
    float v = rsqrtf(ss[0] / (float)C + HCT_EPS) * p[0];
#pragma unroll
    for (int i = 1; i < PP_SPC; ++i) v = fmaf(rsqrtf(ss[i] / (float)C + HCT_EPS), p[i], v);
    part[((long long)h * T + t) * K + j0 + row] = v;
  }
  HCT_LAB_STAMP(5);
  /* A block's partials left it by its own stores, which its cluster's
   * receivers waited for, so its shared memory may go. */
  if (!hct_grid_sync(&grid)) return;
  HCT_LAB_STAMP(6);

  /* ---- gather lo into the planes; store this block's R' ---------------- */
  for (int p = tid; p < PP_TMAX * PP_UC8; p += PP_NT) {
    const int t = p / PP_UC8, c8 = p % PP_UC8;
    if (t >= T) {
      pp_zero8(sp, PP_UTS, t, c8);
      continue;
    }
    hct_f4 pa[PP_NH], pb[PP_NH]; /* every stream group's partial, loads first */
#pragma unroll
    for (int i = 0; i < PP_NH; ++i) {
      const float *pi = part + ((long long)i * T + t) * K + 8 * c8;
      pa[i] = hct_ldcg4(pi);
      pb[i] = hct_ldcg4(pi + 4);
    }
    hct_f4 a = pa[0], b = pb[0];
#pragma unroll
    for (int i = 1; i < PP_NH; ++i) {
      a.x += pa[i].x; a.y += pa[i].y; a.z += pa[i].z; a.w += pa[i].w;
      b.x += pb[i].x; b.y += pb[i].y; b.z += pb[i].z; b.w += pb[i].w;
    }
    pp_split8(sp, PP_UTS, t, c8, a, b);
  }
  if (pending != 0 && mt < T)
#pragma unroll
    for (int sr = 0; sr < S; ++sr) resid[((long long)mt * S + sr) * C + cu0 + mcl] = rm[sr];
  __syncthreads();
  HCT_LAB_STAMP(7);

  /* ---- up: warp (ng, ukg) takes rows 40ng .. 40ng+39 (five column tiles)
   * over columns 64ukg .. 64ukg+63 of K; the five warps of a row group are
   * summed in a fixed order; gates. */
  {
    const int ng = wp / 5, ukg = wp % 5;
    const hct_u32 pa = hct_smem_addr(sp + tok * PP_UTS + ukg * 8 + q), ps = PP_TMAX * PP_UTS * 16;
    const bool live = tok < T;
    /* Lane (tok, q) of n-tile j reads row 40ng + 8j + tok, columns
     * 64ukg + 32m + 8q .. +7 (rows 640 bytes apart: a 2-way conflict). */
    const hct_u32 ba = hct_smem_addr(wub + (40 * ng + tok) * K + 64 * ukg + 8 * q);
    hct_bulk_wait(bar + 1, 0); /* w_up */
    HCT_LAB_STAMP(15); /* w_up landed (lab only) */
    float acc[5][4];
    pp_tiles5(acc, pa, ps, live, ba, 8 * K * 2);
    __syncthreads(); /* every warp is done with the planes */
    float *rd = (float *)sp; /* [ukg][t][80] */
    if (live)
#pragma unroll
      for (int j = 0; j < 5; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) rd[(ukg * PP_TMAX + tok) * PP_NR + 40 * ng + 8 * j + 2 * q + e] = acc[j][e] + acc[j][2 + e];
    __syncthreads();
    for (int p = tid; p < T * PP_NR; p += PP_NT) {
      float u = 0.0f;
#pragma unroll
      for (int k = 0; k < 5; ++k) u += rd[k * PP_TMAX * PP_NR + p];
      gt[p] = hcr_sigmoid(u); /* [t][80] */
    }
  }
  __syncthreads();
  HCT_LAB_STAMP(8);

  /* ---- mix ----------------------------------------------------------------*/
  if (mt < T)
    hcr_mix_out(gt + mt * PP_NR + mcl, PP_NCU, rm, 1, (long long)mt * C + cu0 + mcl, mixed, mixed_bf16, mixed_f16);
  HCT_LAB_STAMP(9);
  HCT_LAB_OUT();
}

#ifndef HCR_LAB
/* Grid 128 in clusters of 8, block 320, dynamic shared memory PP_SMEM. */
HCT_ENTRY void __cluster_dims__(PP_CL, 1, 1) __launch_bounds__(PP_NT, 2) hc_pp_read(PP_PARAMS) {
  pp_read(PP_ARGS);
}
#endif
