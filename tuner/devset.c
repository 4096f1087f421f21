/*
 * devset.c: a set of device buffers shaped like a host set: allocated,
 * freed, filled (inputs, weights and inouts uploaded, outputs poisoned),
 * or only its inputs uploaded again or copied on the card from a set that
 * holds the inputs alone (the pristine copy a check's runs start from).
 * The candidate's run (tuner/run.c),
 * the producer kernel's staging (tuner/producer.c), the reference and the
 * worker all hold their buffers in one; this file calls none of them.
 *
 * Loop thread only: everything here uses the GPU handle of the calling
 * thread.
 */
#include <string.h>

#include "tuner.h"

int hct__devset_alloc(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d) {
  memset(d, 0, sizeof *d);
  for (int i = 0; i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (b->data == NULL) continue; /* an absent optional buffer */
    d->bytes[i] = b->elems * hct__dtype_size(b->spec->dtype);
    int rc = hct__gpu_alloc(g, d->bytes[i], &d->ptr[i]);
    if (rc != 0) {
      hct__devset_free(g, d);
      return rc;
    }
  }
  return 0;
}

void hct__devset_free(hct_gpu_t *g, hct_devset_t *d) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++)
    if (d->ptr[i]) hct__gpu_free(g, d->ptr[i]);
  memset(d, 0, sizeof *d);
}

int hct__buf_poison(hct_gpu_t *g, const hct_hbuf_t *b, hct_dptr_t p) {
  if (hct__dtype_size(b->spec->dtype) == 2) return hct__gpu_fill16(g, p, HCT_POISON_16, b->elems);
  return hct__gpu_fill32(g, p, HCT_POISON_F32, b->elems);
}

int hct__devset_upload(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d) {
  for (int i = 0; i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (d->ptr[i] == 0) continue;
    int rc = b->spec->role == HCT_BUF_OUTPUT ? hct__buf_poison(g, b, d->ptr[i])
                                             : hct__gpu_upload(g, d->ptr[i], b->data, d->bytes[i]);
    if (rc != 0) return rc;
  }
  return 0;
}

int hct__buf_is_input(hct_buf_role_t r) {
  return r == HCT_BUF_INPUT || r == HCT_BUF_INOUT || r == HCT_BUF_OPTIONAL;
}

int hct__devset_upload_inputs(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d) {
  for (int i = 0; i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (d->ptr[i] == 0 || !hct__buf_is_input(b->spec->role)) continue;
    int rc = hct__gpu_upload(g, d->ptr[i], b->data, d->bytes[i]);
    if (rc != 0) return rc;
  }
  return 0;
}

int hct__devset_copy_inputs(hct_gpu_t *g, const hct_hostset_t *hs, const hct_devset_t *from, hct_devset_t *d) {
  for (int i = 0; i < hs->n; i++) {
    if (d->ptr[i] == 0 || from->ptr[i] == 0 || !hct__buf_is_input(hs->bufs[i].spec->role)) continue;
    int rc = hct__gpu_copy(g, d->ptr[i], from->ptr[i], d->bytes[i]);
    if (rc != 0) return rc;
  }
  return 0;
}

int hct__devset_inputs_alloc(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d) {
  memset(d, 0, sizeof *d);
  int rc = 0;
  for (int i = 0; rc == 0 && i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (b->data == NULL || !hct__buf_is_input(b->spec->role)) continue;
    d->bytes[i] = b->elems * hct__dtype_size(b->spec->dtype);
    rc = hct__gpu_alloc(g, d->bytes[i], &d->ptr[i]);
    if (rc == 0) rc = hct__gpu_upload(g, d->ptr[i], b->data, d->bytes[i]);
  }
  if (rc != 0) hct__devset_free(g, d);
  return rc;
}
