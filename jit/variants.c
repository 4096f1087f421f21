/*
 * variants.c: a loaded op's variants and buffers looked up: by name, the
 * baseline, the reference a variant is checked against, the decision
 * class it competes in, and bit families (manifest "families": a head and
 * the variants that must match it bit for bit).  Pure functions of the
 * loaded op; any thread.
 */
#include <string.h>

#include "jit.h"

const hct_variant_t *hct__op_baseline(const hct_op_t *op) {
  for (int i = 0; i < op->n_variants; i++)
    if (op->variants[i].parity == HCT_PARITY_BASELINE) return &op->variants[i];
  return NULL;
}
const hct_variant_t *hct__variant_find(const hct_op_t *op, const char *name) {
  for (int i = 0; i < op->n_variants; i++)
    if (strcmp(op->variants[i].name, name) == 0) return &op->variants[i];
  return NULL;
}
const hct_buffer_t *hct__buffer_find(const hct_op_t *op, const char *name) {
  for (int b = 0; b < op->n_buffers; b++)
    if (strcmp(op->buffers[b].name, name) == 0) return &op->buffers[b];
  return NULL;
}
const hct_variant_t *hct__variant_reference(const hct_op_t *op, const hct_variant_t *v) {
  return v->parity == HCT_PARITY_BITWISE ? hct__variant_find(op, v->reference) : NULL;
}
hct_parity_t hct__variant_competes(const hct_op_t *op, const hct_variant_t *v) {
  if (v->parity != HCT_PARITY_BITWISE) return v->parity;
  /* Bits equal to bits equal to ... the baseline's are the baseline's;
   * anywhere a kl variant sits in the chain, the error is that one's. */
  const hct_variant_t *r = v;
  for (int steps = 0; r != NULL && steps <= op->n_variants; steps++) {
    r = hct__variant_reference(op, r);
    if (r == NULL) break;
    if (r->parity == HCT_PARITY_BASELINE) return HCT_PARITY_BITWISE;
    if (r->parity == HCT_PARITY_KL) return HCT_PARITY_KL;
  }
  return HCT_PARITY_KL; /* no chain (the manifest loader refuses one): no bitwise promise */
}
int hct__variant_in_decision(const hct_op_t *op, const hct_variant_t *v, hct_parity_t decision) {
  hct_parity_t cls = hct__variant_competes(op, v);
  return cls != HCT_PARITY_KL || decision == HCT_PARITY_KL;
}
const hct_variant_t *hct__op_family(const hct_op_t *op, const char *head) {
  for (int f = 0; head != NULL && f < op->n_families; f++)
    if (strcmp(op->families[f], head) == 0) return hct__variant_find(op, head);
  return NULL;
}
int hct__variant_in_family(const hct_op_t *op, const hct_variant_t *v, const hct_variant_t *head) {
  /* The head, or bits equal to bits equal to ... the head's. */
  const hct_variant_t *r = v;
  for (int steps = 0; r != NULL && steps <= op->n_variants; steps++) {
    if (r == head) return 1;
    r = hct__variant_reference(op, r);
  }
  return 0;
}
int hct__variant_in_parity(const hct_op_t *op, const hct_variant_t *v, const char *parity) {
  const char *head = hct__parity_family(parity);
  hct_parity_t cls = HCT_PARITY_BITWISE;
  if (head != NULL) {
    const hct_variant_t *h = hct__op_family(op, head);
    return h != NULL && hct__variant_in_family(op, v, h);
  }
  if (hct__parity_from_name(parity, &cls) < 0) hct__error_clear();
  return hct__variant_in_decision(op, v, cls);
}
const hct_variant_t *hct__op_parity_variant(const hct_op_t *op, const char *parity) {
  const char *head = hct__parity_family(parity);
  if (head == NULL) return hct__op_baseline(op);
  const hct_variant_t *v = hct__op_family(op, head);
  if (v == NULL)
    hct__error(HCT_ENOENT, "parity '%.48s': op '%s' has no family '%.31s' (its manifest's \"families\")",
               parity, op->name, head);
  return v;
}
