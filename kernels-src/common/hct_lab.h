/*
 * hct_lab.h: stage stamps for tools/lab, which builds a template with
 * HCR_LAB defined (no entry points): thread 0 stores the global timer of
 * each stage into shared memory, and the block writes its 16 slots out as
 * it leaves, so no global store of the lab's sits in front of a release.
 * Slot 13 is the lab's own (the SM it ran on).  Without HCR_LAB every
 * call is empty.
 */
#ifndef HCT_LAB_H
#define HCT_LAB_H

#include "hct_grid.h"

#ifdef HCR_LAB
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
#else
HCT_DEV void hct_lab_stamp(hct_u64 *, int) {}
HCT_DEV void hct_lab_begin(hct_u64 *) {}
HCT_DEV void hct_lab_out(hct_u64 *) {}
#endif

#endif /* HCT_LAB_H */
