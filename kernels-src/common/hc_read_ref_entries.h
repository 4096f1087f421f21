/*
 * hc_read_ref_entries.h: the entry points of the float64 reference of
 * hc_read's math (hc_ref_norm, hc_ref_down, hc_ref_up, hc_ref_mix), one
 * kernel per step of hc_read_ref.h over the token rows the tuner checks.
 * An op whose math is hc_read's has a reference.cu that includes this
 * file and its manifest's "reference" launches these entries
 * (kernels-src/hc_read, kernels-src/hc_read_wrongtest).
 */
#ifndef HC_READ_REF_ENTRIES_H
#define HC_READ_REF_ENTRIES_H

#include "hc_read_ref.h"

/* Grid (S, NROWS), block HRR_NORM_THREADS. */
HCT_ENTRY void __launch_bounds__(HRR_NORM_THREADS)
    hc_ref_norm(const int *rows, const float *resid, const float *pending, const hct_u16 *w_norm,
                double *ref_resid, double *xn) {
  __shared__ double red[C];
  __shared__ double rs;
  hrr_norm((int)blockIdx.y, (int)blockIdx.x, rows, resid, pending, w_norm, ref_resid, xn, red, &rs);
}

/* Grid (cdiv(K, HRR_DOWN_THREADS), NROWS). */
HCT_ENTRY void __launch_bounds__(HRR_DOWN_THREADS)
    hc_ref_down(const hct_u16 *w_down, const double *xn, double *lo) {
  const int j = (int)(blockIdx.x * HRR_DOWN_THREADS + threadIdx.x);
  if (j < K) hrr_down((int)blockIdx.y, j, w_down, xn, lo);
}

/* Grid (cdiv(D, HRR_UP_THREADS), NROWS). */
HCT_ENTRY void __launch_bounds__(HRR_UP_THREADS)
    hc_ref_up(const hct_u16 *w_up, const double *lo, double *gate) {
  const int i = (int)(blockIdx.x * HRR_UP_THREADS + threadIdx.x);
  if (i < D) hrr_up((int)blockIdx.y, i, w_up, lo, gate);
}

/* Grid (cdiv(C, HRR_MIX_THREADS), NROWS). */
HCT_ENTRY void __launch_bounds__(HRR_MIX_THREADS)
    hc_ref_mix(const double *ref_resid, const double *gate, double *ref_mixed, double *ref_bf16,
               double *ref_f16) {
  const int c = (int)(blockIdx.x * HRR_MIX_THREADS + threadIdx.x);
  if (c < C) hrr_mix((int)blockIdx.y, c, ref_resid, gate, ref_mixed, ref_bf16, ref_f16);
}

#endif /* HC_READ_REF_ENTRIES_H */
