/*
 * hct_bulk.h: the copy engine's bulk copies from global into shared memory
 * (sm_90, CUDA), completing on an mbarrier.  One thread issues a copy of
 * any multiple of 16 bytes with one instruction and goes on (an issue
 * took 28-51 ns on the H200, so: few, large copies); the copies of
 * a group complete on one mbarrier, which every thread can wait on.  With
 * per-thread cp.async (hct_kernel.h) the issuing warps stall once the SM's
 * outstanding requests are at their limit, so warps that should compute
 * meanwhile are stuck issuing copies (measured: tools/lab, docs/perf).
 *
 * An mbarrier here is used for one phase per launch: init with count 1,
 * one hct_bulk_expect (the arrival, with the bytes to come), the copies,
 * then hct_bulk_wait(bar, 0) by every thread that reads the data.
 */
#ifndef HCT_BULK_H
#define HCT_BULK_H

#include "hct_kernel.h"

#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "hct_bulk.h: bulk copies need sm_90 or later"
#endif

HCT_DEV hct_u32 hct_smem_addr(const void *p) {
  hct_u32 s;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(p));
  return s;
}

/* By one thread, followed by a __syncthreads before any use. */
HCT_DEV void hct_bulk_init(hct_u64 *bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(hct_smem_addr(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* The one arrival of the phase, announcing `bytes` of copies. */
HCT_DEV void hct_bulk_expect(hct_u64 *bar, hct_u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(hct_smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

/* dst (shared) and src (global) 16-byte aligned, bytes a multiple of 16. */
HCT_DEV void hct_bulk_copy(void *dst, const void *src, hct_u32 bytes, hct_u64 *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          hct_smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(hct_smem_addr(bar))
      : "memory");
}

/* `runs` copies of `bytes` each, the i-th from src + i * src_stride bytes
 * to dst + i * bytes, with the phase's one arrival announcing them all;
 * by one thread.  (hc_read's variants take a block's w_up rows so: one run
 * of contiguous rows a stream.) */
HCT_DEV void hct_bulk_copy_runs(void *dst, const void *src, long long src_stride, hct_u32 bytes, int runs,
                                hct_u64 *bar) {
  hct_bulk_expect(bar, bytes * (hct_u32)runs);
  for (int i = 0; i < runs; ++i)
    hct_bulk_copy((char *)dst + (long long)i * bytes, (const char *)src + i * src_stride, bytes, bar);
}

HCT_DEV void hct_bulk_wait(hct_u64 *bar, hct_u32 parity) {
  const hct_u32 a = hct_smem_addr(bar);
  hct_u32 done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
  }
}

#endif /* HCT_BULK_H */
