/*
 * parity_card.c: a check's figures computed where the outputs lie (issue
 * 29), with the kernels of kernels-src/common/parity_check.cu: what comes
 * back is a result of a few hundred bytes a buffer, not the outputs (about
 * 10 GB a check at T = 32,768 on the prefill op).  The figures are
 * tuner/parity.c's (hct__pc_plan, hct__parity_from_card); parity.c stays
 * the host path, the fallback where this one cannot compile or load, and
 * the oracle of the tests.
 *
 * The template is compiled like a variant of an op of its own whose folder
 * is kernels-src/common (so the include folders are that one twice), with
 * no constants and no parameters: one module serves every op and dtype.
 *
 * Thread of the GPU only (the worker's loop).
 */
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

int hct__pcheck_job(const hct_op_t *op, hct_backend_kind_t backend, const char *arch,
                    hct_op_t **holder, hct_compile_job_t *job) {
  *holder = calloc(1, sizeof **holder);
  if (*holder == NULL) return hct__error(HCT_ENOMEM, "out of memory for the parity check's job");
  hct_op_t *o = *holder;
  hct__strlcpy(o->name, "parity_check", sizeof o->name);
  hct__common_include_dir(op, o->dir, sizeof o->dir);
  o->n_variants = 1;
  hct_variant_t *v = &o->variants[0];
  hct__strlcpy(v->name, "parity_check", sizeof v->name);
  hct__strlcpy(v->template_file, "parity_check.cu", sizeof v->template_file);
  memset(job, 0, sizeof *job);
  job->backend = backend;
  hct__strlcpy(job->arch, arch, sizeof job->arch);
  job->op = o;
  job->variant = v;
  return 0;
}

static const char *const entries[HCT_PC_KERNELS] = {"hct_pc_elems", "hct_pc_ref", "hct_pc_rows", "hct_pc_reduce",
                                                     "hct_pc_copy"};

int hct__pcheck_load(hct_gpu_t *g, const void *image, size_t size, hct_pcheck_t *pc) {
  memset(pc, 0, sizeof *pc);
  int rc = hct__gpu_module_load(g, image, size, &pc->mod);
  for (int k = 0; rc == 0 && k < HCT_PC_KERNELS; k++) rc = hct__gpu_function(pc->mod, entries[k], &pc->fn[k]);
  if (rc != 0) {
    hct__pcheck_unload(g, pc);
    return hct__error(rc, "the parity check's kernels: %s", hct_last_error());
  }
  return 0;
}

void hct__pcheck_unload(hct_gpu_t *g, hct_pcheck_t *pc) {
  if (pc->work) hct__gpu_free(g, pc->work);
  if (pc->mod) hct__gpu_module_unload(g, pc->mod);
  memset(pc, 0, sizeof *pc);
}

/* Room for the partials, the rows' figures and the result, kept between
 * checks and grown when a plan needs more. */
static int work_room(hct_gpu_t *g, hct_pcheck_t *pc, size_t bytes) {
  if (pc->work_bytes >= bytes) return 0;
  if (pc->work) hct__gpu_free(g, pc->work);
  pc->work = 0;
  pc->work_bytes = 0;
  int rc = hct__gpu_alloc(g, bytes, &pc->work);
  if (rc == 0) pc->work_bytes = bytes;
  return rc;
}

static size_t up8(size_t n) { return (n + 7) & ~(size_t)7; }

int hct__pcheck_figs(hct_gpu_t *g, hct_pcheck_t *pc, const hct_hbuf_t *b, const hct_pcref_t *ref,
                     hct_dptr_t out, hct_dptr_t want, hct_dptr_t src, int image, hct_parity_figs_t *f) {
  hct_pc_plan_t p;
  hct__pc_plan(b, image, &p);
  if (p.have_ref && (ref == NULL || ref->ref == 0 || (p.nkl > 0 && ref->ref_p == 0)))
    return hct__error(HCT_EINVAL, "parity check of '%s': its reference is not on the card", b->spec->name);
  const size_t ep = (size_t)p.e_blocks * sizeof(hct_pc_part_t);
  const size_t rp = (size_t)(p.r_blocks ? p.r_blocks : 1) * sizeof(hct_pc_part_t);
  const size_t kl = up8((size_t)(p.nkl ? p.nkl : 1) * sizeof(double));
  const size_t ag = up8((size_t)(p.nkl ? p.nkl : 1) * sizeof(uint32_t));
  int rc = work_room(g, pc, ep + rp + kl + ag + sizeof(hct_pc_result_t));
  if (rc != 0) return rc;
  hct_dptr_t eparts = pc->work, rparts = eparts + ep, kls = rparts + rp, agree = kls + kl,
             res = agree + ag;
  hct_dptr_t dref = ref ? ref->ref : 0, dref_p = ref ? ref->ref_p : 0, drows = ref ? ref->rows : 0;
  int dt = p.dt, img = image;
  uint64_t n = p.n, e_chunk = p.e_chunk, slices = p.slices, slice = p.slice, r_chunk = p.r_chunk,
           per_slice = p.per_slice, len = p.len, nkl = p.nkl, ne = p.e_blocks, nr = p.r_blocks;
  hct_dptr_t wantp = want ? want : out; /* the reduction reads bits there */
  const unsigned one[3] = {1, 1, 1};
  unsigned grid[3] = {p.e_blocks, 1, 1}, block[3] = {HCT_PC_THREADS, 1, 1};
  void *a_elems[] = {&out, &want, &src, &n, &dt, &img, &e_chunk, &eparts};
  rc = hct__gpu_launch(g, pc->fn[0], grid, block, 0, a_elems);
  if (rc == 0 && p.r_blocks > 0) {
    grid[0] = p.r_blocks;
    void *a_ref[] = {&out, &dt, &dref, &drows, &slices, &slice, &r_chunk, &rparts};
    rc = hct__gpu_launch(g, pc->fn[1], grid, block, 0, a_ref);
  }
  if (rc == 0 && p.kl_blocks > 0) {
    grid[0] = p.kl_blocks;
    block[0] = HCT_PC_ROW_THREADS;
    void *a_rows[] = {&out, &dt, &dref, &dref_p, &drows, &slice, &per_slice, &len, &nkl, &kls, &agree};
    rc = hct__gpu_launch(g, pc->fn[2], grid, block, 0, a_rows);
  }
  if (rc == 0) {
    void *a_red[] = {&eparts, &ne, &rparts, &nr, &kls, &agree, &nkl, &out, &wantp, &dt, &res};
    rc = hct__gpu_launch(g, pc->fn[3], one, one, 0, a_red);
  }
  hct_pc_result_t r;
  if (rc == 0) rc = hct__gpu_download(g, &r, res, sizeof r); /* waits for the stream */
  if (rc == 0) hct__parity_from_card(b, &p, &r, want != 0, f);
  return rc;
}

int hct__pcheck_ref_upload(hct_gpu_t *g, const hct_hbuf_t *b, hct_pcref_t *d) {
  memset(d, 0, sizeof *d);
  if (b->ref == NULL) return 0;
  const size_t refn = b->rows != NULL && b->token_elems > 0 ? (size_t)b->nrows * b->token_elems : b->elems;
  int rc = hct__gpu_alloc(g, refn * sizeof(double), &d->ref);
  if (rc == 0) rc = hct__gpu_upload(g, d->ref, b->ref, refn * sizeof(double));
  if (rc == 0 && b->ref_p != NULL) {
    hct_pc_plan_t p;
    hct__pc_plan(b, HCT_PC_IMAGE_NONE, &p);
    const size_t pn = (size_t)(p.nkl * p.len);
    if (pn > 0 && (rc = hct__gpu_alloc(g, pn * sizeof(double), &d->ref_p)) == 0)
      rc = hct__gpu_upload(g, d->ref_p, b->ref_p, pn * sizeof(double));
  }
  if (rc == 0 && b->rows != NULL && b->token_elems > 0 && b->nrows > 0) {
    rc = hct__gpu_alloc(g, (size_t)b->nrows * sizeof(int32_t), &d->rows);
    if (rc == 0) rc = hct__gpu_upload(g, d->rows, b->rows, (size_t)b->nrows * sizeof(int32_t));
  }
  if (rc != 0) hct__pcheck_ref_free(g, d);
  return rc;
}

void hct__pcheck_ref_free(hct_gpu_t *g, hct_pcref_t *d) {
  if (d->ref) hct__gpu_free(g, d->ref);
  if (d->ref_p) hct__gpu_free(g, d->ref_p);
  if (d->rows) hct__gpu_free(g, d->rows);
  memset(d, 0, sizeof *d);
}

/* Outputs and inouts: what a run writes and a check compares. */
static int is_out(const hct_hbuf_t *b) {
  return b->spec->role == HCT_BUF_OUTPUT || b->spec->role == HCT_BUF_INOUT;
}

int hct__pcheck_set_figs(hct_gpu_t *g, hct_pcheck_t *pc, const hct_hostset_t *hs, const hct_devset_t *d,
                         const hct_pcref_t dref[], const hct_dptr_t want[], hct_parity_figs_t f[]) {
  memset(f, 0, sizeof *f * HCT_MAX_BUFFERS);
  int rc = 0;
  for (int i = 0; rc == 0 && i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (!is_out(b) || d->ptr[i] == 0) continue;
    int src;
    int image = hct__parity_image_of(hs, i, &src);
    hct_dptr_t srcp = image != HCT_PC_IMAGE_NONE ? d->ptr[src] : 0;
    if (srcp == 0) image = HCT_PC_IMAGE_NONE;
    rc = hct__pcheck_figs(g, pc, b, b->ref ? &dref[i] : NULL, d->ptr[i], want ? want[i] : 0, srcp,
                          image, &f[i]);
  }
  return rc;
}

int hct__pcheck_keep(hct_gpu_t *g, hct_pcheck_t *pc, const hct_hostset_t *hs, const hct_devset_t *d,
                     hct_dptr_t kept[]) {
  int rc = 0;
  for (int i = 0; rc == 0 && i < hs->n; i++) {
    if (!is_out(&hs->bufs[i]) || d->ptr[i] == 0) continue;
    if (kept[i] == 0) rc = hct__gpu_alloc(g, d->bytes[i], &kept[i]);
    uint64_t n = d->bytes[i] / 2;
    hct_dptr_t dst = kept[i], src = d->ptr[i];
    unsigned grid[3] = {(unsigned)HCT_MIN((n + HCT_PC_THREADS - 1) / HCT_PC_THREADS, (uint64_t)4096), 1, 1},
             block[3] = {HCT_PC_THREADS, 1, 1};
    void *args[] = {&dst, &src, &n};
    if (rc == 0 && n > 0) rc = hct__gpu_launch(g, pc->fn[4], grid, block, 0, args);
  }
  return rc;
}

void hct__pcheck_kept_free(hct_gpu_t *g, hct_dptr_t kept[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    if (kept[i]) hct__gpu_free(g, kept[i]);
    kept[i] = 0;
  }
}
