/*
 * wgmma.h: the warpgroup MMA of sm_90a (wgmma.mma_async) as hc_read_prefill's
 * Hopper variants (wgmma_pu, wgmma_pb) use it: shared memory descriptors
 * of 128B-swizzled, K-major tiles, the fence / commit / wait sequence, and
 * the register reconfiguration of producer and consumer warpgroups.
 *
 * Tiles.  An operand tile is ROWS rows of 64 bf16 (128 bytes, one swizzle
 * span) along K, written by a TMA box [64, ROWS] with SWIZZLE_128B: in
 * each 1024-byte group of 8 rows, the 16-byte chunk q of row r sits at
 * chunk q ^ (r % 8).  That is the layout wgmma reads for a K-major operand
 * with swizzle mode 1 (128B): the stride between 8-row groups (SBO) is
 * 1024 bytes, the leading offset (LBO) is unused (1 by convention), and
 * the k16 slice k of the tile starts 32*k bytes after the tile's start
 * (the hardware applies the XOR to the address it forms, so the tile
 * must start 1024-byte aligned and the base offset field stays 0).
 *
 * Descriptor bits: [0,14) start address >> 4; [16,30) LBO >> 4; [32,46)
 * SBO >> 4; [49,52) base offset; [62,64) swizzle (1 = 128B).
 *
 * Accumulators.  For m64nNk16 with f32 D, thread t of the warpgroup (warp
 * w = t/32, lane l) holds N/2 floats: d[4j + 2i + e] is row 16w + l/4 +
 * 8i, column 8j + 2(l%4) + e (i, e in {0, 1}, j < N/8).
 */
#ifndef HCP_WGMMA_H
#define HCP_WGMMA_H

#include "hct_grid.h"
#include "hct_tma.h"

#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "wgmma.h: wgmma needs sm_90a"
#endif

#define HCP_WG_THREADS 128

/* Two floats as one 8-byte access (the up epilogues' pairs of channels,
 * c even: the pair is aligned). */
struct alignas(8) hcp_f2 {
  float x, y;
};
#define HCP_TILE_ROW_BYTES 128 /* 64 bf16 along K */

HCT_DEV hct_u64 hcp_desc_sw128(hct_u32 smem_addr) {
  return (hct_u64)((smem_addr & 0x3ffffu) >> 4) | ((hct_u64)1 << 16) | ((hct_u64)(1024 >> 4) << 32) |
         ((hct_u64)1 << 62);
}

/* Before the first wgmma of a batch: orders the registers and shared
 * memory the warpgroup wrote before it. */
HCT_DEV void hcp_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
HCT_DEV void hcp_wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
/* Until at most N committed groups of this warpgroup are still running. */
template <int N>
HCT_DEV void hcp_wgmma_wait(void) {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* A compiler-only fence on the accumulators: no access to them moves
 * across it, so none lands between a wgmma's issue and its wait. */
template <int N>
HCT_DEV void hcp_fence_acc(float *acc) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

/* wgmma reads shared memory through the async proxy: a generic write to
 * a tile (none here: every tile is TMA-written) would need this first. */
HCT_DEV void hcp_fence_async_smem(void) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* The whole cluster's barrier (release, then acquire): every thread of
 * every block of the cluster, whole warps. */
HCT_DEV void hcp_cluster_sync(void) {
  asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}

/* One arrival on the mbarrier at shared::cluster address `remote` (a peer
 * block's, from mapa), released at cluster scope. */
HCT_DEV void hcp_mbar_arrive_remote(hct_u32 remote) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

/* Register budgets of a warpgroup (every warp of it executes the same). */
template <int N>
HCT_DEV void hcp_regs_dec(void) {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
HCT_DEV void hcp_regs_inc(void) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

#include "wgmma_mma.h"

/* lo = bf16(sum of SPLIT f32 partials [SPLIT][T][K], in split order), one
 * element a thread of a grid of cdiv(T*K, 256) blocks of 256; nothing
 * when SPLIT is 1 (the down kernel wrote lo itself).  Needs K. */
template <int SPLIT>
HCT_DEV void hcp_split_reduce(const float *part, hct_u16 *lo, int T) {
  if (SPLIT == 1) return;
  const long long n = (long long)T * K, idx = (long long)blockIdx.x * 256 + threadIdx.x;
  if (idx >= n) return;
  float v = part[idx];
#pragma unroll
  for (int k = 1; k < SPLIT; ++k) v += part[k * n + idx];
  lo[idx] = hct_f32_to_bf16(v);
}

/* ---- the ring of stages shared by the GEMMs ---------------------------------- */

/* Shared memory of a CTA: STAGES stages of STAGE_BYTES (a multiple of
 * 1024: the tiles of a stage, each rows x 128 bytes), from a 1024-byte
 * aligned start; then EXTRA_BYTES (a multiple of 1024, the caller's own
 * tiles, at tiles + STAGES * STAGE_BYTES); then the barriers.  The
 * manifest's smem adds 1024 bytes of alignment slack and 256 for the
 * barriers.  full[s]: one arrival (the
 * producer's, with the stage's bytes) and the bytes landed; empty[s]: one
 * arrival per consumer warp once its wgmmas reading the stage are done. */
struct hcp_ring {
  hct_u32 tiles;  /* shared address of stage 0 */
  hct_u64 *full;  /* [STAGES]: the stage's bytes have landed */
  hct_u64 *empty; /* [STAGES]: every consumer warp is done reading it */
};

template <int STAGES, int STAGE_BYTES, int EXTRA_BYTES = 0>
HCT_DEV hcp_ring hcp_ring_setup(unsigned char *smem, int consumer_warps) {
  static_assert(STAGE_BYTES % 1024 == 0 && EXTRA_BYTES % 1024 == 0, "1024-byte aligned tiles");
  hcp_ring r;
  const hct_u32 raw = hct_smem_addr(smem);
  const hct_u32 pad = ((raw + 1023u) & ~1023u) - raw;
  r.tiles = raw + pad;
  r.full = (hct_u64 *)(smem + pad + STAGES * STAGE_BYTES + EXTRA_BYTES);
  r.empty = r.full + STAGES;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      hct_mbar_init(&r.full[s], 1);
      hct_mbar_init(&r.empty[s], consumer_warps);
    }
    hct_mbar_init_fence();
  }
  __syncthreads();
  return r;
}

/*
 * Waits for phase `parity` of an mbarrier, as hct_bulk_wait, with a
 * watchdog: 1 when the phase completed, 0 when the wait lasted
 * HCP_WAIT_TIMEOUT_NS (a load that never lands, an arrival count never
 * reached: a wrong tensor map, a wrong expect_tx, a protocol bug).  The
 * caller then leaves the kernel, its outputs unwritten (still the poison
 * the checks put there: "elements left unwritten"), and every other
 * waiter times out the same way, so the launch ends in seconds instead of
 * hanging the card until its process is killed.  (A trap would say so
 * louder, but makes ptxas spill the accumulators.)  A right kernel waits
 * microseconds.
 */
#ifndef HCP_WAIT_TIMEOUT_NS
#define HCP_WAIT_TIMEOUT_NS 4000000000ull
#endif
HCT_DEV int hcp_wait(hct_u64 *bar, hct_u32 parity) {
  const hct_u32 a = hct_smem_addr(bar);
  hct_u64 t0 = 0;
  for (hct_u32 spins = 0;; ++spins) {
    hct_u32 done;
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
    if (done) return 1;
    if ((spins & 1023u) == 0) {
      const hct_u64 now = hct_globaltimer();
      if (t0 == 0) t0 = now;
      else if (now - t0 > HCP_WAIT_TIMEOUT_NS) return 0;
    }
  }
}

/* The producer's wait before refilling stage kb % STAGES (not on the first
 * round: every stage starts empty); 0 when it timed out (hcp_wait). */
template <int STAGES>
HCT_DEV int hcp_ring_acquire(const hcp_ring &r, int kb) {
  return kb < STAGES || hcp_wait(&r.empty[kb % STAGES], (hct_u32)((kb / STAGES) + 1) & 1u);
}

/* The consumers' wait for k block kb; 0 when it timed out. */
template <int STAGES>
HCT_DEV int hcp_ring_wait_full(const hcp_ring &r, int kb) {
  return hcp_wait(&r.full[kb % STAGES], (hct_u32)(kb / STAGES) & 1u);
}

#endif /* HCP_WGMMA_H */
