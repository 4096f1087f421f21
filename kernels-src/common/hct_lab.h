/*
 * hct_lab.h: the hooks of tools/lab in a template, and nothing at all in
 * hctune's compiles.  tools/lab builds persist.cu, persist_bw.cu, pipe.cu
 * and relay.cu with nvcc and HCR_LAB defined (no entry points); then each
 * stage records the global timer into the block's 16 slots of `trace`.
 * HCT_LAB_STAMP (relay, pipe): thread 0 stores it into shared memory, and
 * the block writes its slots out as it leaves (HCT_LAB_OUT), so no global
 * store of the lab's sits in front of a release; slot 13 is the lab's own
 * (the SM it ran on).  HCT_LAB_STORE (persist, persist_bw): straight to
 * global memory, as those were measured.
 *
 * A template writes the hooks as macros that are empty without HCR_LAB:
 *   HCT_DEV void f(int x HCT_LAB_TRACE)   the lab's trace parameter
 *   f(x HCT_LAB_PASS)                     passed on
 *   HCT_LAB_BEGIN(); HCT_LAB_STAMP(3); HCT_LAB_OUT(); HCT_LAB_STORE(3);
 * so the product's code (and PTX) is the template's alone: no parameter,
 * no call.  hctune never defines HCR_LAB, and a run-time compile that did
 * (a manifest parameter of that name) stops at the #error below.
 */
#ifndef HCT_LAB_H
#define HCT_LAB_H

#include "hct_grid.h"

#ifdef HCR_LAB
#if defined(__CUDACC_RTC__) || defined(__HIPCC_RTC__)
#error "HCR_LAB is tools/lab's define (nvcc): hctune's run-time compiles must not see it"
#endif
__shared__ hct_u64 hct_lab_tr[16];
HCT_DEV void hct_lab_stamp(hct_u64 *trace, int i) {
  if (trace != 0 && threadIdx.x == 0) hct_lab_tr[i] = hct_globaltimer();
}
HCT_DEV void hct_lab_begin(hct_u64 *trace) {
  if (trace != 0 && threadIdx.x == 0)
    for (int i = 0; i < 16; ++i) hct_lab_tr[i] = 0;
}
HCT_DEV void hct_lab_out(hct_u64 *trace) {
  if (trace != 0 && threadIdx.x == 0)
    for (int i = 0; i < 16; ++i)
      if (i != 13) trace[blockIdx.x * 16 + i] = hct_lab_tr[i];
}
HCT_DEV void hct_lab_store(hct_u64 *trace, int i) {
  if (trace != 0 && threadIdx.x == 0) trace[blockIdx.x * 16 + i] = hct_globaltimer();
}
#define HCT_LAB_TRACE , hct_u64 *trace
#define HCT_LAB_PASS , trace
#define HCT_LAB_BEGIN() hct_lab_begin(trace)
#define HCT_LAB_STAMP(slot) hct_lab_stamp(trace, slot)
#define HCT_LAB_OUT() hct_lab_out(trace)
#define HCT_LAB_STORE(slot) hct_lab_store(trace, slot)
#else
#define HCT_LAB_TRACE
#define HCT_LAB_PASS
#define HCT_LAB_BEGIN() ((void)0)
#define HCT_LAB_STAMP(slot) ((void)0)
#define HCT_LAB_OUT() ((void)0)
#define HCT_LAB_STORE(slot) ((void)0)
#endif

#endif /* HCT_LAB_H */
