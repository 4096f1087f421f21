/*
 * hct_tma.h: tensor maps (TMA) and the mbarriers they complete on, for
 * sm_90 and later (CUDA).  The host makes each map (cuTensorMapEncodeTiled,
 * from a variant's "tensor_maps" in its manifest: docs/manifest.md) and
 * passes it by value; a kernel takes it as
 *     const __grid_constant__ hct_tmap name
 * so that its address is that of the kernel parameter itself, which is
 * what cp.async.bulk.tensor wants.  The struct is opaque here: 128 bytes,
 * 64-byte aligned, as the driver's CUtensorMap (no toolkit header needed).
 *
 * The mbarriers are the phase-flipping kind: a barrier initialised with a
 * count completes a phase when that many arrivals (and, for an
 * expect_tx arrival, the bytes announced) have come; waiters name the
 * phase by its parity, 0 for the first.
 */
#ifndef HCT_TMA_H
#define HCT_TMA_H

#include "hct_bulk.h"

struct alignas(64) hct_tmap {
  hct_u64 opaque[16];
};

/* By one thread, then a __syncthreads before any use. */
HCT_DEV void hct_mbar_init(hct_u64 *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(hct_smem_addr(bar)), "r"(count)
               : "memory");
}

HCT_DEV void hct_mbar_init_fence(void) {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* One plain arrival (release: the caller's reads of the guarded data are
 * done before the phase can complete). */
HCT_DEV void hct_mbar_arrive(hct_u64 *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(hct_smem_addr(bar)) : "memory");
}

/* A box of a 2-D map, at element coordinates (x innermost, y), into shared
 * memory at dst (a shared address, aligned as the swizzle needs: 1024
 * bytes for 128B), completing `box bytes` of transactions on bar.  Boxes
 * that reach past the tensor's end are filled with zeros there and still
 * count in full. */
HCT_DEV void hct_tma_load_2d(hct_u32 dst, const hct_tmap *map, int x, int y, hct_u64 *bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];" ::"r"(dst),
      "l"((hct_u64)map), "r"(x), "r"(y), "r"(hct_smem_addr(bar))
      : "memory");
}

/* The same box into the shared memory of every block of the cluster whose
 * bit is set in `mask`, at the same offset dst, each completing its bytes
 * on its own mbarrier at bar's offset. */
HCT_DEV void hct_tma_load_2d_multicast(hct_u32 dst, const hct_tmap *map, int x, int y, hct_u64 *bar,
                                       hct_u16 mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
      "cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"((hct_u64)map), "r"(x), "r"(y), "r"(hct_smem_addr(bar)), "h"(mask)
      : "memory");
}

/* Asks for `bytes` (a multiple of 16) from src (16-byte aligned) to be
 * brought into L2, by one thread, without waiting: a hint, nothing
 * lands in shared memory and nothing completes on a barrier. */
HCT_DEV void hct_bulk_prefetch_l2(const void *src, hct_u32 bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

/* Asks for a box of a 2-D map (element coordinates as hct_tma_load_2d) to
 * be brought into L2, by one thread, without waiting: a hint. */
HCT_DEV void hct_tma_prefetch_l2_2d(const hct_tmap *map, int x, int y) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"((hct_u64)map), "r"(x),
               "r"(y)
               : "memory");
}

/* Fetches a map's 128 bytes ahead of its first use. */
HCT_DEV void hct_tma_prefetch(const hct_tmap *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"((hct_u64)map) : "memory");
}

#endif /* HCT_TMA_H */
