/*
 * lab.cu: a bench for the persistent hc_read kernels outside hctune, built
 * with nvcc (tools/lab/build.sh) and run on the GPU machine.  It includes
 * the templates themselves (HCR_LAB: no entry points; each stage records
 * the global timer), so what it times is the code hctune compiles.
 *
 * It prints, per token count:
 *   - parity: persist_bw against v1 bit for bit (mixed, its 16-bit images,
 *     resid with pending), persist's largest error relative to v1's max;
 *   - time per read, the spec's method: 96 launches over rotating buffer
 *     sets (over 4x the L2) in one CUDA graph, median of 15 replays;
 *   - the timeline of one read in the middle of a replay: each stage's
 *     global-timer stamp (ns after the read's first block started), the
 *     minimum, median and maximum over blocks;
 * and the building blocks: an empty 640-thread persistent grid, one and
 * two grid barriers, and a grid that only streams 13.11 MB into shared
 * memory by cp.async.
 *
 * The kernels: v1, persist_bw, persist, pipe and relay, each persistent one
 * launched plainly and as a programmatic dependent launch, and relay's
 * skeleton (skeleton+pdl: its loads, copies, barrier and stores without
 * its arithmetic; timing only).  LAB_QUICK=1 in
 * the environment skips the building blocks and the mma loop; LAB_KINDS
 * (say "pipe,pipe+pdl") times only the kinds named.
 *
 *   lab [T ...]        (default 1 2 4 8)
 */
#define HCT_CUDA 1
#define HCT_WARP 32
#define HCT_ARCH 90
#define S 4
#define C 2560
#define D 10240
#define K 320
#define HCR_LAB 1
#define RG 32
#define NB 128
#define TP 2
#define PDL 1
#define GB 0
#ifndef CL /* pipe's cluster size (build.sh -DCL=4) */
#define CL 8
#endif
#define DOWN_WARPS 4
#define UP_WARPS 4
#ifndef LT /* relay's late trigger of the next read (build.sh -DLT=1) */
#define LT 0
#endif
#include "persist.cu"
#include "persist_bw.cu"
#include "pipe.cu"
#ifndef NG /* relay's tokens a norm pass (build.sh -DNG=1) */
#define NG 4
#endif
#ifndef G /* relay's token group (build.sh -DG=2) */
#define G 1
#endif
#include "relay.cu"
#include "hct_bulk.h"
#include "v1.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "lab: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

static const int NBLK = 128, NT = 640, BATCH = 96, REPLAYS = 15, STAMPS = 16;

/* Slots 14 and 15 of a block's trace: the SM clock (clock64) when the
 * block started and when it finished, for the clock rate over the read. */
__device__ void lab_clock_stamp(hct_u64 *trace, int slot) {
  if (trace != 0 && threadIdx.x == 0) trace[blockIdx.x * 16 + slot] = clock64();
}
__global__ void __launch_bounds__(640, 1) lab_pk(PK_PARAMS, hct_u64 *trace) {
  lab_clock_stamp(trace, 14);
  pk_dispatch(PK_ARGS);
  lab_clock_stamp(trace, 15);
}
__global__ void __launch_bounds__(640, 1) lab_pb(PB_PARAMS, hct_u64 *trace) {
  lab_clock_stamp(trace, 14);
  pb_dispatch(PB_ARGS, trace);
  lab_clock_stamp(trace, 15);
}
/* Slot 13: the SM the block ran on. */
__device__ void lab_smid_stamp(hct_u64 *trace) {
  hct_u32 id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  if (trace != 0 && threadIdx.x == 0) trace[blockIdx.x * 16 + 13] = id;
}
/* No clock stamps: pipe's slot 14 is its weight copies issued, before the
 * PDL wait. */
__global__ void __cluster_dims__(PP_CL, 1, 1) __launch_bounds__(PP_NT, 2) lab_pp(PP_PARAMS, hct_u64 *trace) {
  lab_smid_stamp(trace);
  pp_read(PP_ARGS, trace);
}
__global__ void __cluster_dims__(RL_CL, 1, 1) __launch_bounds__(RL_NT, 2) lab_rl(RL_PARAMS, hct_u64 *trace) {
  lab_smid_stamp(trace);
  rl_read(RL_ARGS, trace);
}
/* The skeleton of a relay read (kind skeleton+pdl, timing only: its
 * outputs are not the op's): relay's launch, loads, copies, grid barrier,
 * gather and stores, with none of its arithmetic (no norm, chains, up
 * dots, sigmoid or mix): what a one-launch read of this shape costs before
 * any of its work, with the next read's weights streaming as in relay.
 * Stamps: 0 start, 14 weights requested, 1 released, 2 R' and w_norm in
 * shared memory, 6 lo stored, 7 the barrier passed, 11 w_up landed, 8 lo
 * gathered, 10 the end.  LAB_SKEL (a comma list) takes more away: "nowt"
 * the weights (no w_down loads, no w_up copies: no weight stream at all),
 * "nobar" the grid barrier (lo gathered whenever; wrong, timing only),
 * "wup32" issues the w_up copies from thread 32 instead of thread 0 (the
 * one that arrives at the barrier), "wupearly" issues them from thread 32
 * before the PDL wait, into room of their own behind three tokens of R
 * (T <= 3; launch with LAB_RL_SMEM=110592), "wdcg" and "wdna" load w_down
 * into registers by ld.global.cg (L2 only) or ld.global.L1::no_allocate,
 * "late" launches the next read once the barrier passed (relay's LT). */
__device__ int g_skel_nowt, g_skel_nobar, g_skel_wup32, g_skel_wupearly, g_skel_wdld, g_skel_late;
__device__ hct_u4 lab_ld_cg(const hct_u16 *p) {
  hct_u4 v;
  asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ hct_u4 lab_ld_na(const hct_u16 *p) {
  hct_u4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__global__ void __cluster_dims__(RL_CL, 1, 1) __launch_bounds__(RL_NT, 2) lab_skel(RL_PARAMS, hct_u64 *trace) {
  lab_smid_stamp(trace);
  HCT_DYN_SHARED(hct_u4, sk_sm);
  char *sm = (char *)sk_sm;
  hct_u16 *wn = (hct_u16 *)(sm + RL_OFF_WN);
  float *rcv = (float *)(sm + RL_OFF_RCV);
  float *los = (float *)(sm + RL_OFF_LO);
  hct_u64 *bar = (hct_u64 *)(sm + RL_OFF_BAR);
  float *xs = (float *)(sm + RL_OFF_X);
  hct_u16 *wub = (hct_u16 *)(sm + RL_OFF_X);
  const int tid = (int)threadIdx.x;
  const int c = hct_cluster_id(), s = hct_cluster_rank();
  const int dl = tid / RL_RPC, dj = tid % RL_RPC; /* relay's (lane, row) of a thread */
  const int cu0 = (int)blockIdx.x * RL_NCU;
  hct_grid_t grid = hct_grid_begin(ws);
  hct_lab_begin(trace);
  hct_lab_stamp(trace, 0);
  if (!g_skel_late) hcr_pdl_launch();
  { /* R into L2 before the wait, as relay does */
    const int lines = T * (C / 32);
    for (int p = c + 32 * tid; p < lines; p += 32 * RL_NT) {
      const long long at = ((long long)(p / (C / 32)) * S + s) * C + 32 * (p % (C / 32));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(resid + at));
    }
    if (tid < T * S) asm volatile("prefetch.global.L2 [%0];" ::"l"(resid + (long long)tid * C + cu0));
  }
  if (tid == 0) {
    for (int i = 0; i < RL_NBAR; ++i) hct_bulk_init(bar + i);
    hct_bulk_expect(bar, C * 2);
    hct_bulk_copy(wn, w_norm + (long long)s * C, C * 2, bar);
  }
  const int nowt = g_skel_nowt, nobar = g_skel_nobar, early = g_skel_wupearly && T <= 3;
  const int wup_tid = g_skel_wup32 || early ? 32 : 0;
  hct_u16 *wu_dst = early ? (hct_u16 *)(sm + RL_OFF_X + 3 * C * 4) : wub;
  __syncthreads(); /* the mbarriers' init */
  if (tid == wup_tid && early && !nowt)
    hct_bulk_copy_runs(wu_dst, w_up + (long long)cu0 * K, (long long)C * K * 2, RL_NCU * K * 2, S, bar + 1);
  hct_u4 wr[RL_QS];
  const hct_u16 *src = w_down + (long long)(RL_RPC * c + dj) * D + (long long)s * C + 8 * dl;
#pragma unroll
  for (int qq = 0; qq < RL_QS; ++qq) {
    const hct_u4 z = {0u, 0u, 0u, 0u};
    const hct_u16 *a = src + 8 * HCT_LW * qq;
    wr[qq] = nowt ? z : g_skel_wdld == 1 ? lab_ld_cg(a) : g_skel_wdld == 2 ? lab_ld_na(a) : *(const hct_u4 *)a;
  }
  __syncthreads();
  hct_lab_stamp(trace, 14);
  hcr_pdl_wait();
  hct_lab_stamp(trace, 1);
  if (tid < T) {
    hct_bulk_expect(bar + RL_BAR_R + tid, (hct_u32)(C * 4));
    hct_bulk_copy(xs + tid * C, resid + ((long long)tid * S + s) * C, C * 4, bar + RL_BAR_R + tid);
  }
  for (int t = 0; t < T; ++t) hct_bulk_wait(bar + RL_BAR_R + t, 0);
  hct_bulk_wait(bar, 0);
  hct_lab_stamp(trace, 2);
  /* The weights' and R's loads kept: a bit of everything into lo. */
  hct_u32 f = __float_as_uint(xs[tid]) ^ wn[tid];
#pragma unroll
  for (int qq = 0; qq < RL_QS; ++qq) f ^= wr[qq].x ^ wr[qq].y ^ wr[qq].z ^ wr[qq].w;
  if (s == S - 1 && tid < T * RL_RPC) lo[(long long)(tid / RL_RPC) * K + RL_RPC * c + tid % RL_RPC] = (float)(f & 1u);
  __syncthreads(); /* xs read before w_up's copies write it */
  hct_lab_stamp(trace, 6);
  if (!nobar) hct_grid_arrive(&grid);
  if (tid == wup_tid && !nowt && !early) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    hct_bulk_copy_runs(wub, w_up + (long long)cu0 * K, (long long)C * K * 2, RL_NCU * K * 2, S, bar + 1);
  }
  if (!nobar && !hct_grid_wait(&grid)) return;
  if (g_skel_late) hcr_pdl_launch();
  hct_lab_stamp(trace, 7);
  const int mt = tid / RL_NCU, mcl = tid % RL_NCU;
  rl_gather(resid, pending, lo, los, rcv, T, tid, cu0);
  if (!nowt) hct_bulk_wait(bar + 1, 0);
  hct_lab_stamp(trace, 11);
  __syncthreads();
  hct_lab_stamp(trace, 8);
  if (mt < T)
    hcr_mix_out(los + mt * K + mcl, RL_NCU, rcv + mt * RL_NR + mcl, RL_NCU, (long long)mt * C + cu0 + mcl, mixed,
                mixed_bf16, mixed_f16);
  hct_lab_stamp(trace, 10);
  hct_lab_out(trace);
}
#define RL_SMEM(T) (RL_OFF_X + std::max((T) * C * 4, RL_NR * K * 2))
/* LAB_RL_SMEM=N: launch relay with at least N bytes of dynamic shared
 * memory (timing experiment: more than half an SM's keeps one block of a
 * read an SM, and two reads from sharing one). */
static int g_rl_smem = 0;
static int rl_smem(int T) { return std::max(RL_SMEM(T), g_rl_smem); }
/* The mma loop of pipe's up stage alone: `steps` 32-column steps of
 * pp_step per warp, A from shared-memory planes (MODE 0), A from
 * registers (MODE 1: no shared loads), or the shared loads alone (MODE
 * 2); cycles of each warp's loop into cyc[warp]. */
template <int MODE>
__global__ void __launch_bounds__(PP_NT, 2) lab_mma(int steps, const hct_u4 *wsrc, float *sink, hct_u64 *cyc) {
  HCT_DYN_SHARED(hct_u4, sm);
  const int tid = threadIdx.x, lane = tid % 32, wp = tid / 32, tok = lane >> 2, q = lane & 3;
  for (int i = tid; i < 4 * PP_TMAX * PP_UTS; i += blockDim.x) sm[i] = wsrc[i % 64];
  hct_u4 w = wsrc[lane];
  __syncthreads();
  float acc[4][4] = {};
  hct_u4 r0 = sm[lane], r1 = sm[lane + 32];
  const hct_u64 c0 = clock64();
  for (int m = 0; m < steps; ++m) {
    if (MODE == 0) {
      const hct_u4 z = {0u, 0u, 0u, 0u};
      hct_u4 qa[4] = {z, z, z, z};
      pp_loadq(qa, hct_smem_addr(sm + tok * PP_UTS + (4 * m + q) % PP_UC8), PP_TMAX * PP_UTS * 16, true);
      pp_step1(acc[0], qa, w);
      pp_step1(acc[1], qa, w);
    }
    else if (MODE == 1) {
      pp_mma(acc[0], r0.x, r0.y, r0.z, r0.w, w.x, w.y);
      pp_mma(acc[1], r1.x, r1.y, r1.z, r1.w, w.x, w.y);
      pp_mma(acc[2], r0.x, r0.y, r0.z, r0.w, w.z, w.w);
      pp_mma(acc[3], r1.x, r1.y, r1.z, r1.w, w.z, w.w);
    } else {
      const int c8 = (4 * m + q) % PP_UC8;
      const hct_u4 a = sm[tok * PP_UTS + c8], b = sm[(PP_TMAX + tok) * PP_UTS + c8];
      const hct_u4 c = sm[(2 * PP_TMAX + tok) * PP_UTS + c8], d = sm[(3 * PP_TMAX + tok) * PP_UTS + c8];
      acc[0][0] += __uint_as_float(a.x ^ b.y ^ c.z ^ d.w);
    }
  }
  const hct_u64 c1 = clock64();
  if (lane == 0) cyc[blockIdx.x * PP_NW + wp] = c1 - c0;
  sink[blockIdx.x * blockDim.x + tid] = acc[0][0] + acc[1][1] + acc[2][2] + acc[3][3];
}
/* For the cluster occupancy query: pipe's block shape, no work. */
__global__ void lab_noop(int *p) {
  if (p != nullptr && threadIdx.x == 0) p[blockIdx.x] = 1;
}

/* Latency of dependent loads: one thread follows `n` links of a chain. */
__global__ void lab_chase(const unsigned *next, int n, unsigned *sink, hct_u64 *ns) {
  unsigned i = 0;
  const hct_u64 t0 = hct_globaltimer();
  for (int k = 0; k < n; ++k) i = ((volatile const unsigned *)next)[i];
  const hct_u64 t1 = hct_globaltimer();
  *sink = i;
  *ns = t1 - t0;
}
/* The SM clock: cycles over 20 us of the global timer. */
__global__ void lab_clock(hct_u64 *out) {
  const hct_u64 t0 = hct_globaltimer();
  const hct_u64 c0 = clock64();
  while (hct_globaltimer() - t0 < 20000) {
  }
  out[0] = clock64() - c0;
  out[1] = hct_globaltimer() - t0;
}
__global__ void __launch_bounds__(640, 1) lab_empty(hct_u32 *ws, int nbar, hct_u64 *trace) {
  hct_lab_store(trace, 0);
  hct_grid_t g = hct_grid_begin(ws);
  for (int i = 0; i < nbar; ++i) {
    hct_grid_sync(&g);
    hct_lab_store(trace, 1 + i);
  }
}
/* The same bytes by bulk copies: warp 0 issues 4 KB pieces, one mbarrier. */
__global__ void __launch_bounds__(640, 1) lab_stream_bulk(const hct_u4 *src, int bytes, hct_u64 *trace) {
  HCT_DYN_SHARED(hct_u4, sm);
  __shared__ hct_u64 bar;
  hct_lab_store(trace, 0);
  if (threadIdx.x == 0) hct_bulk_init(&bar);
  __syncthreads();
  const char *p = (const char *)(src + (long long)blockIdx.x * (bytes / 16));
  if (threadIdx.x < 32) {
    if (threadIdx.x == 0) hct_bulk_expect(&bar, bytes);
    __syncwarp();
    for (int i = threadIdx.x; i < bytes / 4096; i += 32)
      hct_bulk_copy((char *)sm + i * 4096, p + (long long)i * 4096, 4096, &bar);
  }
  hct_lab_store(trace, 1);
  hct_bulk_wait(&bar, 0);
  hct_lab_store(trace, 2);
  if (threadIdx.x == 0 && sm[5].x == 0x12345678u) ((hct_u4 *)src)[0].y = 1; /* keep the copy */
}
/* Each block copies its `bytes` of src into shared memory (cp.async, 16 B a
 * thread at a time, all issued before the first wait). */
__global__ void __launch_bounds__(640, 1) lab_stream(const hct_u4 *src, int bytes, hct_u64 *trace) {
  HCT_DYN_SHARED(hct_u4, sm);
  hct_lab_store(trace, 0);
  const hct_u4 *p = src + (long long)blockIdx.x * (bytes / 16);
  for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) hct_cp_async16(&sm[i], &p[i]);
  hct_cp_async_commit();
  hct_lab_store(trace, 1);
  hct_cp_async_wait<0>();
  __syncthreads();
  hct_lab_store(trace, 2);
  if (threadIdx.x == 0 && sm[5].x == 0x12345678u) ((hct_u4 *)src)[0].y = 1; /* keep the copy */
}

__global__ void lab_fill(hct_u16 *w, long long n, unsigned seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761ull) ^ seed;
    h ^= h >> 15; h *= 0x2c1b3c6du; h ^= h >> 12; h *= 0x297a2d39u; h ^= h >> 15;
    const float u = ((float)(h & 0xffffff) / 16777216.0f - 0.5f) * 3.4f * scale;
    w[i] = hct_f32_to_bf16(u);
  }
}
__global__ void lab_fillf(float *x, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761ull) ^ seed;
    h ^= h >> 15; h *= 0x2c1b3c6du; h ^= h >> 12; h *= 0x297a2d39u; h ^= h >> 15;
    x[i] = ((float)(h & 0xffffff) / 16777216.0f - 0.5f) * 3.4f;
  }
}

struct Set {
  float *resid, *pending, *mixed, *xn, *lo, *gate, *rs, *part;
  hct_u16 *wn, *wd, *wu, *mb, *mh;
};

static void alloc_set(Set &s, int T, unsigned seed) {
  CK(cudaMalloc(&s.resid, (size_t)T * D * 4));
  CK(cudaMalloc(&s.pending, (size_t)T * D * 4));
  CK(cudaMalloc(&s.mixed, (size_t)T * C * 4));
  CK(cudaMalloc(&s.mb, (size_t)T * C * 2));
  CK(cudaMalloc(&s.mh, (size_t)T * C * 2));
  CK(cudaMalloc(&s.xn, (size_t)T * D * 4));
  CK(cudaMalloc(&s.lo, (size_t)T * K * 4));
  CK(cudaMalloc(&s.gate, (size_t)T * D * 4));
  CK(cudaMalloc(&s.rs, 4096));
  CK(cudaMalloc(&s.part, (size_t)8 * S * K * 4)); /* pipe: 2 x 8 x K tagged 8-byte entries */
  CK(cudaMemset(s.part, 0, (size_t)8 * S * K * 4));
  CK(cudaMalloc(&s.wn, (size_t)D * 2));
  CK(cudaMalloc(&s.wd, (size_t)K * D * 2));
  CK(cudaMalloc(&s.wu, (size_t)D * K * 2));
  lab_fillf<<<256, 256>>>(s.resid, (long long)T * D, seed * 7 + 1);
  lab_fillf<<<256, 256>>>(s.pending, (long long)T * D, seed * 7 + 2);
  lab_fill<<<256, 256>>>(s.wn, D, seed * 7 + 3, 1.0f);
  lab_fill<<<1024, 256>>>(s.wd, (long long)K * D, seed * 7 + 4, 1.0f / sqrtf((float)D));
  lab_fill<<<1024, 256>>>(s.wu, (long long)D * K, seed * 7 + 5, 1.0f / sqrtf((float)K));
  CK(cudaGetLastError());
}

enum Kind { V1, PB, PK, PBP, PKP, PP, PPP, RL, RLP, SKP };
static const char *kind_name[] = {"v1",   "persist_bw", "persist", "persist_bw+pdl", "persist+pdl",
                                  "pipe", "pipe+pdl",   "relay",   "relay+pdl",      "skeleton+pdl"};

/* LAB_GRID=120: launch the persistent kernels with fewer blocks (their
 * results are then wrong: a timing experiment only). */
static unsigned g_grid = 128;

/* A launch with programmatic stream serialisation (PDL). */
template <typename... A>
static void launch_pdl(void (*f)(A...), int nt, int smem, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(g_grid);
  cfg.blockDim = dim3(nt);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = cudaStreamPerThread;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, f, args...));
}

static hct_u32 *g_ws;

static void launch(Kind k, Set &s, int T, bool pend, hct_u64 *trace) {
  const float *P = pend ? s.pending : nullptr;
  if (k == V1) {
    hc_v1_norm<<<T, 256>>>(s.resid, P, s.wn, s.xn, T);
    hc_v1_down<<<dim3(K / DOWN_WARPS, T), DOWN_WARPS * 32>>>(s.wd, s.xn, s.lo, T);
    hc_v1_up<<<dim3(D / UP_WARPS, T), UP_WARPS * 32>>>(s.wu, s.lo, s.gate, T);
    hc_v1_mix<<<(T * C + 255) / 256, 256>>>(s.resid, s.gate, s.mixed, s.mb, s.mh, T);
  } else if (k == PB) {
    lab_pb<<<NBLK, NT, PB_SMEM(T)>>>(s.resid, P, s.wn, s.wd, s.wu, s.lo, g_ws, s.mixed, s.mb, s.mh, T, trace);
  } else if (k == PK) {
    lab_pk<<<NBLK, NT, PK_SMEM(T)>>>(s.resid, P, s.wn, s.wd, s.wu, s.part, g_ws, s.mixed, s.mb, s.mh, T, trace);
  } else if (k == PBP) {
    launch_pdl(lab_pb, 640, PB_SMEM(T), s.resid, P, (const hct_u16 *)s.wn, (const hct_u16 *)s.wd,
               (const hct_u16 *)s.wu, s.lo, g_ws, s.mixed, s.mb, s.mh, T, trace);
  } else if (k == PP) {
    lab_pp<<<g_grid, PP_NT, PP_SMEM>>>(s.resid, P, s.wn, s.wd, s.wu, s.part, g_ws, s.mixed, s.mb, s.mh, T, trace);
  } else if (k == RL) {
    lab_rl<<<g_grid, RL_NT, rl_smem(T)>>>(s.resid, P, s.wn, s.wd, s.wu, s.lo, g_ws, s.mixed, s.mb, s.mh, T, trace);
  } else if (k == RLP) {
    launch_pdl(lab_rl, RL_NT, rl_smem(T), s.resid, P, (const hct_u16 *)s.wn, (const hct_u16 *)s.wd,
               (const hct_u16 *)s.wu, s.lo, g_ws, s.mixed, s.mb, s.mh, T, trace);
  } else if (k == SKP) {
    launch_pdl(lab_skel, RL_NT, rl_smem(T), s.resid, P, (const hct_u16 *)s.wn, (const hct_u16 *)s.wd,
               (const hct_u16 *)s.wu, s.lo, g_ws, s.mixed, s.mb, s.mh, T, trace);
  } else if (k == PPP) {
    launch_pdl(lab_pp, PP_NT, PP_SMEM, s.resid, P, (const hct_u16 *)s.wn, (const hct_u16 *)s.wd,
               (const hct_u16 *)s.wu, s.part, g_ws, s.mixed, s.mb, s.mh, T, trace);
  } else {
    launch_pdl(lab_pk, 640, PK_SMEM(T), s.resid, P, (const hct_u16 *)s.wn, (const hct_u16 *)s.wd,
               (const hct_u16 *)s.wu, s.part, g_ws, s.mixed, s.mb, s.mh, T, trace);
  }
}

/* LAB_KINDS="pipe,pipe+pdl": time only those kinds (v1 is always the
 * parity reference). */
static bool kind_wanted(int k) {
  const char *w = getenv("LAB_KINDS");
  if (w == nullptr || k == V1) return true;
  std::string list = std::string(",") + w + ",";
  return list.find(std::string(",") + kind_name[k] + ",") != std::string::npos;
}

struct Outs {
  std::vector<float> mixed, resid;
  std::vector<hct_u16> mb, mh;
};

static Outs run_once(Kind k, Set &s, int T, bool pend, const std::vector<float> &r0) {
  CK(cudaMemcpy(s.resid, r0.data(), r0.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(s.mixed, 0xff, (size_t)T * C * 4));
  CK(cudaMemset(s.mb, 0xff, (size_t)T * C * 2));
  CK(cudaMemset(s.mh, 0xff, (size_t)T * C * 2));
  launch(k, s, T, pend, nullptr);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  Outs o;
  o.mixed.resize((size_t)T * C);
  o.resid.resize((size_t)T * D);
  o.mb.resize((size_t)T * C);
  o.mh.resize((size_t)T * C);
  CK(cudaMemcpy(o.mixed.data(), s.mixed, o.mixed.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(o.resid.data(), s.resid, o.resid.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(o.mb.data(), s.mb, o.mb.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(o.mh.data(), s.mh, o.mh.size() * 2, cudaMemcpyDeviceToHost));
  return o;
}

static void parity(int T, Set &s) {
  std::vector<float> r0((size_t)T * D);
  CK(cudaMemcpy(r0.data(), s.resid, r0.size() * 4, cudaMemcpyDeviceToHost));
  for (int pend = 0; pend < 2; ++pend) {
    Outs ref = run_once(V1, s, T, pend, r0);
    for (int k = PB; k <= RLP; ++k) {
      if (!kind_wanted(k)) continue;
      Outs o = run_once((Kind)k, s, T, pend, r0);
      long bad = 0, badr = 0;
      double maxref = 0, maxerr = 0;
      for (size_t i = 0; i < ref.mixed.size(); ++i) {
        if (memcmp(&ref.mixed[i], &o.mixed[i], 4) || ref.mb[i] != o.mb[i] || ref.mh[i] != o.mh[i]) bad++;
        maxref = std::max(maxref, (double)fabsf(ref.mixed[i]));
        double e = fabs((double)ref.mixed[i] - (double)o.mixed[i]);
        if (!(e <= 1e30)) e = 1e30;
        maxerr = std::max(maxerr, e);
      }
      for (size_t i = 0; i < ref.resid.size(); ++i)
        if (memcmp(&ref.resid[i], &o.resid[i], 4)) badr++;
      printf("parity T=%d pending=%d %-10s: %ld of %zu outputs differ in bits, resid %ld differ, "
             "max err / max |v1| = %.3g\n",
             T, pend, kind_name[k], bad, ref.mixed.size(), badr, maxerr / maxref);
    }
  }
  CK(cudaMemcpy(s.resid, r0.data(), r0.size() * 4, cudaMemcpyHostToDevice));
}

static double clock_mhz(const std::vector<hct_u64> &tr, int launch_i, int nst) {
  const hct_u64 *b = tr.data() + (size_t)launch_i * NBLK * STAMPS;
  std::vector<double> v;
  for (int i = 0; i < (int)g_grid; ++i) {
    hct_u64 t_first = b[i * STAMPS], t_last = 0;
    for (int j = 0; j < nst; ++j) t_last = std::max(t_last, b[i * STAMPS + j]);
    if (b[i * STAMPS + 15] > b[i * STAMPS + 14] && t_last > t_first)
      v.push_back((double)(b[i * STAMPS + 15] - b[i * STAMPS + 14]) * 1000.0 / (double)(t_last - t_first));
  }
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void timeline(const char *what, const std::vector<hct_u64> &tr, int launch_i, int nst) {
  const hct_u64 *b = tr.data() + (size_t)launch_i * NBLK * STAMPS;
  hct_u64 t0 = ~0ull, prev_end = 0;
  for (int i = 0; i < (int)g_grid; ++i) t0 = std::min(t0, b[i * STAMPS]);
  const hct_u64 *pb = b - (size_t)NBLK * STAMPS;
  for (int i = 0; i < (int)g_grid; ++i)
    for (int j = 0; j < nst; ++j) prev_end = std::max(prev_end, pb[i * STAMPS + j]);
  printf("  timeline %s (read %d; the previous read's last stamp %lld ns before)\n", what, launch_i,
         (long long)t0 - (long long)prev_end);
  for (int j = 0; j < nst; ++j) {
    if (j == 13) continue; /* the SM id (pipe) */
    std::vector<long long> v;
    for (int i = 0; i < (int)g_grid; ++i)
      if (b[i * STAMPS + j]) v.push_back((long long)(b[i * STAMPS + j] - t0));
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    printf("    stamp %2d: min %6lld  median %6lld  max %6lld ns\n", j, v[0], v[v.size() / 2], v.back());
  }
}

/* pipe: when each block of read `launch_i` was released from the PDL wait
 * (stamp 1) after the previous read's last block ended (stamp 9), and the
 * blocks that shared an SM with another block of the same read, against
 * the others, by the end of their down stage (stamp 10) and their
 * arrival at the exchange (stamp 5). */
/* How many blocks of the read in `b` ran on each SM (slot 13), by SM id. */
static std::vector<int> blocks_per_sm(const hct_u64 *b) {
  std::vector<int> count(1024, 0);
  for (int i = 0; i < (int)g_grid; ++i) count[b[i * STAMPS + 13] & 1023]++;
  return count;
}

/* The blocks that share their SM with another block of the read against
 * the others: median and max of stamps sa and sb (ns after t0). */
static void print_pairing(const hct_u64 *b, hct_u64 t0, const std::vector<int> &count, int sa, const char *na, int sb,
                          const char *nb) {
  std::vector<long long> a_sh, a_al, b_sh, b_al;
  for (int i = 0; i < (int)g_grid; ++i) {
    const bool sh = count[b[i * STAMPS + 13] & 1023] > 1;
    (sh ? a_sh : a_al).push_back((long long)(b[i * STAMPS + sa] - t0));
    (sh ? b_sh : b_al).push_back((long long)(b[i * STAMPS + sb] - t0));
  }
  for (auto *v : {&a_sh, &a_al, &b_sh, &b_al}) std::sort(v->begin(), v->end());
  if (!a_al.empty())
    printf("    alone:  %s median %lld max %lld, %s median %lld max %lld ns\n", na, a_al[a_al.size() / 2], a_al.back(),
           nb, b_al[b_al.size() / 2], b_al.back());
  if (!a_sh.empty())
    printf("    shared: %s median %lld max %lld, %s median %lld max %lld ns\n", na, a_sh[a_sh.size() / 2], a_sh.back(),
           nb, b_sh[b_sh.size() / 2], b_sh.back());
}

/* The n blocks with the latest stamp `slot`, latest first. */
static std::vector<int> latest_blocks(const hct_u64 *b, int slot, int n) {
  std::vector<std::pair<hct_u64, int>> v;
  for (int i = 0; i < (int)g_grid; ++i) v.push_back({b[i * STAMPS + slot], i});
  std::sort(v.rbegin(), v.rend());
  std::vector<int> r;
  for (int k = 0; k < n && k < (int)v.size(); ++k) r.push_back(v[k].second);
  return r;
}

static void pipe_analysis(const std::vector<hct_u64> &tr, int launch_i) {
  const hct_u64 *b = tr.data() + (size_t)launch_i * NBLK * STAMPS, *pb = b - (size_t)NBLK * STAMPS;
  hct_u64 prev_end = 0, t0 = ~0ull;
  for (int i = 0; i < (int)g_grid; ++i) prev_end = std::max(prev_end, pb[i * STAMPS + 9]);
  for (int i = 0; i < (int)g_grid; ++i) t0 = std::min(t0, b[i * STAMPS]);
  std::vector<long long> rel;
  for (int i = 0; i < (int)g_grid; ++i) rel.push_back((long long)b[i * STAMPS + 1] - (long long)prev_end);
  std::sort(rel.begin(), rel.end());
  printf("  released after the previous read's last end: min %lld median %lld max %lld ns\n", rel[0],
         rel[rel.size() / 2], rel.back());
  int late = 0;
  for (int i = 0; i < (int)g_grid; ++i) late += b[i * STAMPS] + 1000 > prev_end;
  printf("  %d blocks started less than 1 us before the previous read's last end, or after it\n", late);
  const std::vector<int> count = blocks_per_sm(b), pc = blocks_per_sm(pb);
  int shared = 0, prev_on = 0; /* prev_on: blocks on an SM that held a block of the previous read */
  for (int i = 0; i < (int)g_grid; ++i) {
    shared += count[b[i * STAMPS + 13] & 1023] > 1;
    prev_on += pc[b[i * STAMPS + 13] & 1023] > 0;
  }
  /* The six blocks whose down stage ended last: when they started, were
   * released, had their weights, split, looped, summed. */
  for (int i : latest_blocks(b, 10, 6)) {
    const hct_u64 *x = b + i * STAMPS;
    printf("    late block %3d on SM %3llu (%d of this read there): start %lld release %lld weights %lld split %lld "
           "loop %lld down %lld (rm loaded %lld, copies issued %lld) ns\n",
           i, (unsigned long long)x[13], count[x[13] & 1023], (long long)(x[0] - t0),
           (long long)(x[1] - t0), (long long)(x[2] - t0), (long long)(x[3] - t0), (long long)(x[11] - t0),
           (long long)(x[10] - t0), (long long)(x[12] - t0), (long long)(x[14] - t0));
  }
  printf("  %d blocks share an SM with a block of the same read, %d sit on an SM the previous read used\n",
         shared, prev_on);
  print_pairing(b, t0, count, 10, "down end", 5, "exchange");
}

typedef void (*enq_fn)(int b, hct_u64 *trace);

static double time_graph(enq_fn enq, hct_u64 *trace, std::vector<hct_u64> *tr) {
  /* Built with --default-stream per-thread: every <<<>>> launch goes to
   * this thread's stream, which can be captured. */
  cudaStream_t st = cudaStreamPerThread;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int b = 0; b < BATCH; ++b) enq(b, trace ? trace + (size_t)b * NBLK * STAMPS : nullptr);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> v;
  for (int r = 0; r < REPLAYS + 1; ++r) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0) v.push_back(ms * 1000.0 / BATCH);
  }
  CK(cudaGetLastError());
  if (tr) {
    tr->resize((size_t)BATCH * NBLK * STAMPS);
    CK(cudaMemcpy(tr->data(), trace, tr->size() * 8, cudaMemcpyDeviceToHost));
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static std::vector<Set> g_sets;
static int g_T, g_nsets;
/* relay: each stage's median over the blocks of each stream (cluster
 * rank = block % 4), ns after the read's first block started. */
static void relay_analysis(const std::vector<hct_u64> &tr, int launch_i) {
  const hct_u64 *b = tr.data() + (size_t)launch_i * NBLK * STAMPS;
  hct_u64 t0 = ~0ull;
  for (int i = 0; i < (int)g_grid; ++i) t0 = std::min(t0, b[i * STAMPS]);
  const int slots[] = {1, 2, 3, 4, 12, 5, 6, 7, 11, 8, 9, 10};
  printf("  by stream:   ");
  for (int j : slots) printf(" %6d", j);
  printf("\n");
  for (int st = 0; st < RL_CL; ++st) {
    printf("    stream %d: ", st);
    for (int j : slots) {
      std::vector<long long> v;
      for (int i = st; i < (int)g_grid; i += RL_CL)
        if (b[i * STAMPS + j]) v.push_back((long long)(b[i * STAMPS + j] - t0));
      std::sort(v.begin(), v.end());
      printf(" %6lld", v.empty() ? -1ll : v[v.size() / 2]);
    }
    printf("\n");
  }
  /* Blocks that share their SM with another block of this read, against
   * the others: when their chains are done (stamp 5) and when they arrive
   * at the barrier (stamp 6); and the six latest arrivals. */
  const std::vector<int> count = blocks_per_sm(b);
  int shared = 0;
  for (int i = 0; i < (int)g_grid; ++i) shared += count[b[i * STAMPS + 13] & 1023] > 1;
  printf("  %d blocks share an SM with a block of the same read\n", shared);
  print_pairing(b, t0, count, 5, "chains done", 6, "arrival");
  for (int i : latest_blocks(b, 6, 6)) {
    const hct_u64 *x = b + i * STAMPS;
    printf("    late block %3d (stream %d) on SM %3llu (%d of this read there): start %lld release %lld R' %lld xn %lld "
           "first hand-off %lld chains %lld arrival %lld ns\n",
           i, i % RL_CL, (unsigned long long)x[13], count[x[13] & 1023],
           (long long)(x[0] - t0), (long long)(x[1] - t0), (long long)(x[2] - t0), (long long)(x[3] - t0),
           x[12] ? (long long)(x[12] - t0) : -1ll, (long long)(x[5] - t0), (long long)(x[6] - t0));
  }
}

static Kind g_kind;
static int g_nbar;
static hct_u4 *g_src;

static void enq_kernel(int b, hct_u64 *trace) { launch(g_kind, g_sets[b % g_nsets], g_T, false, trace); }
static void enq_empty(int b, hct_u64 *trace) { lab_empty<<<NBLK, NT, 200 * 1024>>>(g_ws, g_nbar, trace); }
static void enq_stream(int b, hct_u64 *trace) {
  const int bytes = 102400; /* 13.1 MB over 128 blocks */
  lab_stream<<<NBLK, NT, bytes>>>(g_src + (size_t)(b % 20) * NBLK * (bytes / 16), bytes, trace);
}
static void enq_stream_bulk(int b, hct_u64 *trace) {
  const int bytes = 102400;
  lab_stream_bulk<<<NBLK, NT, bytes>>>(g_src + (size_t)(b % 20) * NBLK * (bytes / 16), bytes, trace);
}

int main(int argc, char **argv) {
  std::vector<int> Ts;
  for (int i = 1; i < argc; ++i) Ts.push_back(atoi(argv[i]));
  if (Ts.empty()) Ts = {1, 2, 4, 8};
  cudaDeviceProp pr;
  CK(cudaGetDeviceProperties(&pr, 0));
  printf("lab: %s, %d SMs, L2 %d MB, commit %s\n", pr.name, pr.multiProcessorCount, pr.l2CacheSize >> 20,
         getenv("COMMIT") ? getenv("COMMIT") : "?");
  CK(cudaFuncSetAttribute(lab_pk, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 - 64));
  CK(cudaFuncSetAttribute(lab_pb, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 - 64));
  CK(cudaFuncSetAttribute(lab_empty, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 - 64));
  CK(cudaFuncSetAttribute(lab_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 - 64));
  CK(cudaFuncSetAttribute(lab_stream_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(lab_pp, cudaFuncAttributeMaxDynamicSharedMemorySize, PP_SMEM));
  if (getenv("LAB_RL_SMEM") != nullptr) g_rl_smem = atoi(getenv("LAB_RL_SMEM"));
  CK(cudaFuncSetAttribute(lab_rl, cudaFuncAttributeMaxDynamicSharedMemorySize, rl_smem(8)));
  CK(cudaFuncSetAttribute(lab_skel, cudaFuncAttributeMaxDynamicSharedMemorySize, rl_smem(8)));
  {
    /* relay's clusters (of four, compiled in) resident at once at that
     * size: a read needs g_grid / 4 of them, or its grid barrier times out */
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(g_grid);
    cfg.blockDim = dim3(RL_NT);
    cfg.dynamicSmemBytes = rl_smem(8);
    int n = -1;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, lab_rl, &cfg);
    printf("relay: clusters of 4 blocks of %d threads and %d bytes resident at once: %d%s%s\n", RL_NT, rl_smem(8), n,
           e ? ": " : "", e ? cudaGetErrorString(e) : "");
    if (g_rl_smem > 0 && n < (int)g_grid / RL_CL) {
      printf("relay: too few for one read of %u blocks; not run\n", g_grid);
      return 0;
    }
  }
  CK(cudaMalloc(&g_ws, 4096));
  CK(cudaMemset(g_ws, 0, 4096));
  hct_u64 *trace;
  CK(cudaMalloc(&trace, (size_t)BATCH * NBLK * STAMPS * 8));
  std::vector<hct_u64> tr;

  if (getenv("LAB_GRID") != nullptr) g_grid = (unsigned)atoi(getenv("LAB_GRID"));
  if (getenv("LAB_SKEL") != nullptr) {
    const std::string w = std::string(",") + getenv("LAB_SKEL") + ",";
    const int nowt = w.find(",nowt,") != std::string::npos, nobar = w.find(",nobar,") != std::string::npos;
    const int wup32 = w.find(",wup32,") != std::string::npos, early = w.find(",wupearly,") != std::string::npos;
    CK(cudaMemcpyToSymbol(g_skel_nowt, &nowt, sizeof nowt));
    CK(cudaMemcpyToSymbol(g_skel_nobar, &nobar, sizeof nobar));
    CK(cudaMemcpyToSymbol(g_skel_wup32, &wup32, sizeof wup32));
    CK(cudaMemcpyToSymbol(g_skel_wupearly, &early, sizeof early));
    const int wdld = w.find(",wdcg,") != std::string::npos ? 1 : w.find(",wdna,") != std::string::npos ? 2 : 0;
    CK(cudaMemcpyToSymbol(g_skel_wdld, &wdld, sizeof wdld));
    const int late = w.find(",late,") != std::string::npos;
    CK(cudaMemcpyToSymbol(g_skel_late, &late, sizeof late));
    if (late) printf("skeleton: the next read launched once the barrier passed\n");
    if (wdld) printf("skeleton: w_down by %s\n", wdld == 1 ? "ld.global.cg" : "ld.global.L1::no_allocate");
    printf("skeleton: %s%s%s%s\n", nowt ? "no weights " : "", nobar ? "no grid barrier " : "",
           wup32 ? "w_up copies from thread 32 " : "", early ? "w_up copies before the wait (T <= 3)" : "");
  }
  /* How many clusters of pipe's blocks (320 threads, PP_SMEM bytes) the
   * card holds at once, by cluster size. */
  CK(cudaFuncSetAttribute(lab_noop, cudaFuncAttributeMaxDynamicSharedMemorySize, PP_SMEM));
  CK(cudaFuncSetAttribute(lab_noop, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int cl : {1, 2, 4, 8, 16}) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(128);
    cfg.blockDim = dim3(PP_NT);
    cfg.dynamicSmemBytes = PP_SMEM;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = cl;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int n = -1;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, lab_noop, &cfg);
    printf("clusters of %2d blocks of %d threads and %d bytes resident at once: %d (%d blocks)%s%s\n", cl, PP_NT,
           PP_SMEM, n, n * cl, e ? ": " : "", e ? cudaGetErrorString(e) : "");
  }
  const bool quick = getenv("LAB_QUICK") != nullptr; /* skip the building blocks */
  if (quick) goto kernels;
  /* Building blocks: the clock, load latencies, launches, barriers, streaming. */
  {
    hct_u64 *d, h[2];
    CK(cudaMalloc(&d, 16));
    for (int i = 0; i < 3; ++i) {
      lab_clock<<<1, 1>>>(d);
      CK(cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost));
      printf("SM clock, one spinning thread: %.0f MHz\n", (double)h[0] * 1000.0 / (double)h[1]);
    }
    const size_t sizes[2] = {(size_t)4 << 20, (size_t)2 << 30};
    const char *names[2] = {"4 MB chain (L2)", "2 GB chain (DRAM)"};
    for (int k = 0; k < 2; ++k) {
      const size_t n = sizes[k] / 4;
      std::vector<unsigned> nx(n);
      /* A random cycle over every 64th word (separate 256-byte lines). */
      std::vector<unsigned> idx;
      for (size_t i = 0; i < n; i += 64) idx.push_back((unsigned)i);
      unsigned long long r = 88172645463325252ull;
      for (size_t i = idx.size() - 1; i > 0; --i) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        std::swap(idx[i], idx[r % (i + 1)]);
      }
      for (size_t i = 0; i < idx.size(); ++i) nx[idx[i]] = idx[(i + 1) % idx.size()];
      unsigned *dn, *sink;
      CK(cudaMalloc(&dn, sizes[k]));
      CK(cudaMalloc(&sink, 4));
      CK(cudaMemcpy(dn, nx.data(), sizes[k], cudaMemcpyHostToDevice));
      const int steps = 2000;
      lab_chase<<<1, 1>>>(dn, steps, sink, d); /* warm (L2) */
      lab_chase<<<1, 1>>>(dn, steps, sink, d);
      CK(cudaMemcpy(h, d, 8, cudaMemcpyDeviceToHost));
      printf("dependent loads, %s: %.0f ns each\n", names[k], (double)h[0] / steps);
      CK(cudaFree(dn));
      CK(cudaFree(sink));
    }
    CK(cudaFree(d));
  }
  CK(cudaMalloc(&g_src, (size_t)20 * 13107200));
  CK(cudaMemset(g_src, 1, (size_t)20 * 13107200));
  for (int nb = 0; nb <= 2; ++nb) {
    g_nbar = nb;
    CK(cudaMemset(trace, 0, (size_t)BATCH * NBLK * STAMPS * 8));
    double us = time_graph(enq_empty, trace, &tr);
    printf("empty 128x640 grid, 200 KB smem, %d barriers: %.2f us a launch\n", nb, us);
    timeline("empty", tr, BATCH / 2, 1 + nb);
  }
  {
    CK(cudaMemset(trace, 0, (size_t)BATCH * NBLK * STAMPS * 8));
    double us = time_graph(enq_stream, trace, &tr);
    printf("stream 13.11 MB into shared memory, 128 blocks of 100 KB, cp.async: %.2f us a launch (%.2f TB/s)\n",
           us, 13.1072 / us);
    timeline("stream", tr, BATCH / 2, 3);
    CK(cudaMemset(trace, 0, (size_t)BATCH * NBLK * STAMPS * 8));
    us = time_graph(enq_stream_bulk, trace, &tr);
    printf("stream 13.11 MB into shared memory, 128 blocks of 100 KB, bulk copies: %.2f us a launch (%.2f TB/s)\n",
           us, 13.1072 / us);
    timeline("stream bulk", tr, BATCH / 2, 3);
  }
  CK(cudaFree(g_src));

kernels:
  /* pipe's mma loop alone: cycles a warp for 10 and 40 steps, 128 blocks
   * of 320 threads (103 KB: up to two an SM) and 1 block (alone on an SM). */
  if (!quick) {
    hct_u4 *wsrc;
    float *sink;
    hct_u64 *cyc;
    CK(cudaMalloc(&wsrc, 64 * 16));
    CK(cudaMemset(wsrc, 0x3c, 64 * 16));
    CK(cudaMalloc(&sink, 128 * PP_NT * 4));
    CK(cudaMalloc(&cyc, 128 * PP_NW * 8));
    void (*fns[3])(int, const hct_u4 *, float *, hct_u64 *) = {lab_mma<0>, lab_mma<1>, lab_mma<2>};
    const char *mn[3] = {"mma, A from shared planes", "mma, A in registers", "shared loads only"};
    for (int f = 0; f < 3; ++f) {
      CK(cudaFuncSetAttribute(fns[f], cudaFuncAttributeMaxDynamicSharedMemorySize, PP_SMEM));
      for (int nb : {1, 128})
        for (int steps : {10, 40}) {
          fns[f]<<<nb, PP_NT, PP_SMEM>>>(steps, wsrc, sink, cyc);
          fns[f]<<<nb, PP_NT, PP_SMEM>>>(steps, wsrc, sink, cyc);
          CK(cudaDeviceSynchronize());
          std::vector<hct_u64> h((size_t)nb * PP_NW);
          CK(cudaMemcpy(h.data(), cyc, h.size() * 8, cudaMemcpyDeviceToHost));
          std::sort(h.begin(), h.end());
          printf("mma loop: %-28s %3d blocks, %2d steps: median %llu cycles a warp, max %llu\n", mn[f], nb,
                 steps, (unsigned long long)h[h.size() / 2], (unsigned long long)h.back());
        }
    }
  }
  for (int T : Ts) {
    g_T = T;
    const double set_bytes = 2.0 * K * D * 2 + (double)T * D * 4 * 2;
    g_nsets = std::min(64, (int)(4.0 * pr.l2CacheSize / set_bytes) + 2);
    for (auto &s : g_sets) {
      cudaFree(s.resid); cudaFree(s.pending); cudaFree(s.mixed); cudaFree(s.mb); cudaFree(s.mh);
      cudaFree(s.xn); cudaFree(s.lo); cudaFree(s.gate); cudaFree(s.rs); cudaFree(s.part);
      cudaFree(s.wn); cudaFree(s.wd); cudaFree(s.wu);
    }
    g_sets.assign(g_nsets, Set());
    for (int i = 0; i < g_nsets; ++i) alloc_set(g_sets[i], T, 1000 * T + i);
    CK(cudaDeviceSynchronize());
    parity(T, g_sets[0]);
    for (int k = V1; k <= SKP; ++k) { /* (the skeleton has no parity to check) */
      if (!kind_wanted(k)) continue;
      g_kind = (Kind)k;
      CK(cudaMemset(trace, 0, (size_t)BATCH * NBLK * STAMPS * 8));
      double us = time_graph(enq_kernel, k == V1 ? nullptr : trace, k == V1 ? nullptr : &tr);
      printf("time T=%d %-10s: %.2f us a read (cold, %d sets, %d reads a graph, median of %d)\n", T,
             kind_name[k], us, g_nsets, BATCH, REPLAYS);
      if (k != V1) {
        const bool pipe = k == PP || k == PPP, relay = k == RL || k == RLP, skel = k == SKP;
        timeline(kind_name[k], tr, BATCH / 2, pipe || relay || skel ? 16 : 14);
        if (pipe) pipe_analysis(tr, BATCH / 2);
        else if (relay) relay_analysis(tr, BATCH / 2);
        else if (!skel) printf("  SM clock over that read: %.0f MHz (median over blocks)\n", clock_mhz(tr, BATCH / 2, 14));
      }
    }
  }
  return 0;
}
