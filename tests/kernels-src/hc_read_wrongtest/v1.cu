/*
 * The baseline of the hc_read_wrongtest op: hc_read's v1, unchanged.  The
 * op exists so the GPU tests can show that the probe rejects a variant whose
 * bits differ (see wrong.cu); it is marked selftest and never offered to
 * engines.  The path resolves against -I kernels-src/common.
 */
#include "../hc_read/v1.cu"
