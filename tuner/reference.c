/*
 * reference.c: an op's float64 reference, from its manifest's "reference"
 * (docs/manifest.md): a template compiled like a variant (the same compile
 * path, cache and DB binaries) and run on the GPU, on the device copies of
 * a check's inputs, for the token rows the check compares (hct__inputs_rows).
 * Nothing here knows an op.
 *
 * The parent compiles it with the candidates and the worker loads it by
 * its binary key, like a candidate (docs/architecture.md says why).
 * Loop thread only: everything uses the GPU handle of the calling thread.
 */
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

int hct__reference_ready(const hct_op_t *op) {
  if (!op->has_inputs)
    return hct__error(HCT_EMANIFEST, "op '%s': its manifest has no \"inputs\": the tuner cannot draw its inputs (docs/manifest.md)",
                      op->name);
  if (!op->reference.present)
    return hct__error(HCT_EMANIFEST, "op '%s': its manifest has no \"reference\": the tuner cannot check it (docs/manifest.md)",
                      op->name);
  return 0;
}

int hct__reference_job(const hct_op_t *op, hct_backend_kind_t backend, const char *arch,
                       hct_compile_job_t *job) {
  int rc = hct__reference_ready(op);
  if (rc != 0) return rc;
  memset(job, 0, sizeof *job);
  job->backend = backend;
  hct__strlcpy(job->arch, arch, sizeof job->arch);
  job->op = op;
  job->variant = &op->reference.v;
  return 0;
}

int hct__reference_load(hct_gpu_t *g, const hct_op_t *op, const void *image, size_t size,
                        hct_cand_t *out) {
  int rc = hct__reference_ready(op);
  if (rc != 0) return rc;
  hct_point_t none;
  memset(&none, 0, sizeof none);
  rc = hct__run_load(g, op, &op->reference.v, &none, image, size, out);
  if (rc != 0) return hct__error(rc, "op '%s': reference '%s': %s", op->name,
                                 op->reference.v.template_file, hct_last_error());
  return 0;
}

int hct__reference_shape(hct_hostset_t *hs) {
  const hct_op_t *op = hs->op;
  hct_symtab_t syms = op->constants;
  hct__symtab_set(&syms, "T", hs->T);
  if (hs->rows == NULL || hs->nrows < 1)
    return hct__error(HCT_EINVAL, "op '%s': no token rows drawn for the reference", op->name);
  for (int i = 0; i < hs->n; i++) {
    hct_hbuf_t *b = &hs->bufs[i];
    const hct_buffer_t *spec = b->spec;
    if (spec->role != HCT_BUF_OUTPUT && spec->role != HCT_BUF_INOUT) continue;
    if (b->elems % (size_t)hs->T != 0)
      return hct__error(HCT_EMANIFEST, "op '%s': buffer '%s': %zu elements at T=%d: not a slice per token row",
                        op->name, spec->name, b->elems, hs->T);
    b->token_elems = b->elems / (size_t)hs->T;
    int64_t row = (int64_t)b->token_elems;
    if (spec->row[0] != '\0') {
      int rc = hct__expr_eval(spec->row, &syms, &row);
      if (rc != 0) return rc;
    }
    if (row < 1 || b->token_elems % (size_t)row != 0)
      return hct__error(HCT_EMANIFEST, "op '%s': buffer '%s': row '%s' is %lld at T=%d: must divide the %zu elements of a token",
                        op->name, spec->name, spec->row, (long long)row, hs->T, b->token_elems);
    b->row_len = (int)row;
    b->rows = hs->rows;
    b->nrows = hs->nrows;
    free(b->ref);
    free(b->ref_p);
    b->ref_p = NULL;
    b->ref = malloc((size_t)hs->nrows * b->token_elems * sizeof *b->ref);
    if (b->ref == NULL)
      return hct__error(HCT_ENOMEM, "buffer '%s': no memory for the reference of %d rows", spec->name, hs->nrows);
  }
  return 0;
}

int hct__reference_run(hct_gpu_t *g, const hct_cand_t *ref, hct_hostset_t *hs, hct_devset_t *d,
                       int uploaded) {
  const hct_op_t *op = hs->op;
  int rc = hct__reference_shape(hs);
  if (rc != 0) return rc;
  /* The inputs as drawn: a candidate's run may have left R' in resid
   * (at T = 32768, R and P are 2.7 GB: not sent twice when just sent). */
  if (!uploaded && (rc = hct__devset_upload_inputs(g, hs, d)) != 0) return rc;

  hct_argptr_t extra[HCT_MAX_BUFFERS + 1];
  char names[HCT_MAX_BUFFERS][40];
  int n_extra = 0;
  hct_scratchset_t scr;
  memset(&scr, 0, sizeof scr);
  hct_dptr_t rows_dev = 0;
  const size_t rows_bytes = (size_t)hs->nrows * sizeof *hs->rows;
  if ((rc = hct__gpu_alloc(g, rows_bytes, &rows_dev)) != 0 ||
      (rc = hct__gpu_upload(g, rows_dev, hs->rows, rows_bytes)) != 0)
    goto done;
  extra[n_extra++] = (hct_argptr_t){"rows", rows_dev};
  for (int i = 0; i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (b->ref == NULL) continue;
    snprintf(names[n_extra - 1], sizeof names[0], "ref.%s", b->spec->name);
    hct_argptr_t *x = &extra[n_extra];
    x->name = names[n_extra - 1];
    x->ptr = 0;
    n_extra++;
    const size_t bytes = (size_t)b->nrows * b->token_elems * sizeof(double);
    if ((rc = hct__gpu_alloc(g, bytes, &x->ptr)) != 0) goto done;
    /* NaN in every element: one the reference leaves unwritten shows as a
     * wrong reference (the check fails), never as a silent zero. */
    if ((rc = hct__gpu_fill32(g, x->ptr, 0xffffffffu, bytes / 4)) != 0) goto done;
  }
  hct_symtab_t syms;
  hct__run_symtab(ref, hct__gpu_device(g), hs->T, &syms);
  hct__symtab_set(&syms, "NROWS", hs->nrows);
  if ((rc = hct__scratch_alloc_with(g, ref, &syms, &scr)) != 0) goto done;
  if ((rc = hct__run_launches_with(g, ref, &syms, d, &scr, extra, n_extra)) != 0 ||
      (rc = hct__gpu_sync(g)) != 0)
    goto done;
  for (int i = 0, k = 1; i < hs->n; i++) {
    hct_hbuf_t *b = &hs->bufs[i];
    if (b->ref == NULL) continue;
    const size_t bytes = (size_t)b->nrows * b->token_elems * sizeof(double);
    if ((rc = hct__gpu_download(g, b->ref, extra[k++].ptr, bytes)) != 0) goto done;
  }
done:
  if (rc != 0 && rc != HCT_EFAULT && rc != HCT_EHANG && rc != HCT_EGPU)
    rc = hct__error(rc, "op '%s': reference at T=%d: %s", op->name, hs->T, hct_last_error());
  /* After a sticky error the context is gone: free nothing on the GPU. */
  if (rc == HCT_EFAULT || rc == HCT_EHANG || rc == HCT_EGPU) return rc;
  hct__scratch_free(g, &scr);
  for (int k = 1; k < n_extra; k++)
    if (extra[k].ptr) hct__gpu_free(g, extra[k].ptr);
  if (rows_dev) hct__gpu_free(g, rows_dev);
  return rc;
}
