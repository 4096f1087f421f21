/*
 * ops.c: the table of op implementations, by the op name of a manifest.
 *
 * To add an op: write tuner/op_NAME.c exporting a `const hct_op_impl_t
 * hct__op_NAME`, declare it below, and add a row to the table.  Several ops
 * may share one implementation when their tensors and math are the same.
 */
#include <string.h>

#include "tuner.h"

/* The implementations, one per tuner/op_NAME.c.  Declared here rather than
 * in tuner.h: nothing but this table refers to them. */
extern const hct_op_impl_t hct__op_hc_read;
extern const hct_op_impl_t hct__op_selftest;

static const struct {
  const char *op;
  const hct_op_impl_t *impl;
} op_table[] = {
    {"hc_read", &hct__op_hc_read},
    /* The selftest op of the GPU tests: hc_read's tensors and math, with a
     * variant that must fail parity. */
    {"hc_read_wrongtest", &hct__op_hc_read},
    /* Bridge (issue 23, prefill branch only, reverted at merge): the prefill
     * op's tensors are hc_read's, so hc_read's CPU inputs and reference
     * (xn and lo unrounded) check it until the op's own reference.cu runs. */
    {"hc_read_prefill", &hct__op_hc_read},
    /* The selftest op: y = 2x + 1, each variant failing one way. */
    {"selftest", &hct__op_selftest},
};

const hct_op_impl_t *hct__op_impl(const char *name) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(op_table); i++)
    if (strcmp(op_table[i].op, name) == 0) return op_table[i].impl;
  return NULL;
}
