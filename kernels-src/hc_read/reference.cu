/*
 * reference: the float64 reference of hc_read for the token rows the tuner
 * checks (the op manifest's "reference"): the four steps of
 * kernels-src/common/hc_read_ref.h, one kernel each, on the device copies
 * of the check's inputs.  Never timed; it defines what the variants are
 * checked against (docs/manifest.md has the contract).
 */
#include "hc_read_ref_entries.h"
