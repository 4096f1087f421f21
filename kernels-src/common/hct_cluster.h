/*
 * hct_cluster.h: what the sm_90 thread-block-cluster variants (hc_read's
 * pipe and relay) do with their cluster: who they are in it, stores into a
 * peer block's shared memory that complete on its mbarrier, the cluster
 * barrier in two halves; and the 16-byte load that bypasses L1, for data
 * other blocks stored before a grid barrier.
 */
#ifndef HCT_CLUSTER_H
#define HCT_CLUSTER_H

#include "hct_bulk.h"

HCT_DEV int hct_cluster_rank(void) {
  hct_u32 r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return (int)r;
}
HCT_DEV int hct_cluster_id(void) {
  hct_u32 r;
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return (int)r;
}

/* The shared::cluster address of `p` (an address of this block's layout)
 * in the shared memory of cluster block `rank`. */
HCT_DEV hct_u32 hct_mapa(const void *p, int rank) {
  hct_u32 a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(hct_smem_addr(p)), "r"(rank));
  return a;
}

/* v into cluster block `rank`'s shared memory at dst, completing (4 bytes)
 * on that block's mbarrier bar, which the receiver initialised, announced
 * the bytes on (hct_bulk_expect) and waits on (hct_bulk_wait).  No fence:
 * the completion orders the store for the receiver. */
HCT_DEV void hct_st_async(const float *dst, float v, const hct_u64 *bar, int rank) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(hct_mapa(dst, rank)),
               "r"(__float_as_uint(v)), "r"(hct_mapa(bar, rank))
               : "memory");
}

/* The cluster barrier in two halves (every thread of every block): arrive
 * once the mbarriers the peers will name are initialised (their init's
 * fence.mbarrier_init orders it), wait before the first store into a peer. */
HCT_DEV void hct_cluster_arrive_relaxed(void) { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
HCT_DEV void hct_cluster_wait(void) { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }

/* 16 bytes from global memory, cached in L2 only. */
HCT_DEV hct_f4 hct_ldcg4(const float *p) {
  hct_f4 v;
  asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}

#endif /* HCT_CLUSTER_H */
