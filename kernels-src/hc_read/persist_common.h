/*
 * persist_common.h: what the persistent hc_read variants (persist,
 * persist_bw) share: the token count a launch holds in shared memory, and
 * loads that bypass L1 for data other blocks wrote in the same launch.
 */
#ifndef HCR_PERSIST_COMMON_H
#define HCR_PERSIST_COMMON_H

#define HCR_PERSIST_TMAX 8 /* tokens a launch holds in shared memory */

/* Loads past L1: data another block wrote in this launch. */
HCT_DEV float hcr_ldcg(const float *p) {
#if defined(HCT_CUDA)
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
#else
  return *(const volatile float *)p;
#endif
}

#endif /* HCR_PERSIST_COMMON_H */
