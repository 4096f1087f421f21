/*
 * reference: the float64 reference of hc_read_wrongtest, whose math is
 * hc_read's: the same entry points as kernels-src/hc_read/reference.cu
 * (kernels-src/common/hc_read_ref_entries.h), for the token rows
 * the tuner checks, on the device copies of the check's inputs.  Never timed; it defines what the variants are
 * checked against (docs/manifest.md has the contract).
 */
#include "hc_read_ref_entries.h"
