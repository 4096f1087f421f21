/*
 * ref_hc_read.h: the CPU float64 reference of hc_read (tests/ref_hc_read.c),
 * kept in the tests as a cross-check of the op's GPU reference template
 * (kernels-src/hc_read/reference.cu); bin/hctune has no per-op C code.
 */
#ifndef REF_HC_READ_H
#define REF_HC_READ_H

#include "tuner.h"

/* Fills ->ref (shaped by hct__reference_shape for s->rows, drawn with the
 * inputs) of every output and inout of an hc_read-shaped set, on the CPU.
 * 0, or a negative code with the message set. */
int ref_hc_read_cpu(hct_hostset_t *s);

#endif
