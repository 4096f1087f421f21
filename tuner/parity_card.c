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

static const char *const entries[HCT_PC_KERNELS] = {"hct_pc_elems", "hct_pc_ref",  "hct_pc_rows",
                                                     "hct_pc_reduce", "hct_pc_copy", "hct_pc_dist"};

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

/* The work memory's layout: the elements' partials, the reference's, the
 * rows' KL and agreement, the result. */
typedef struct work_layout_s {
  size_t eparts, rparts, kl, agree, res, bytes;
} work_layout_t;

static work_layout_t layout_of(const hct_pc_plan_t *p) {
  work_layout_t w;
  w.eparts = 0;
  w.rparts = w.eparts + (size_t)p->e_blocks * sizeof(hct_pc_part_t);
  w.kl = w.rparts + (size_t)(p->r_blocks ? p->r_blocks : 1) * sizeof(hct_pc_part_t);
  w.agree = w.kl + up8((size_t)(p->nkl ? p->nkl : 1) * sizeof(double));
  w.res = w.agree + up8((size_t)(p->nkl ? p->nkl : 1) * sizeof(uint32_t));
  w.bytes = w.res + sizeof(hct_pc_result_t);
  return w;
}

size_t hct__pc_work_bytes(const hct_pc_plan_t *p, size_t *res_off) {
  const work_layout_t w = layout_of(p);
  *res_off = w.res;
  return w.bytes;
}

static void arg_u(hct_pc_launch_t *l, uint64_t v) {
  l->u[l->nargs] = v;
  l->args[l->nargs] = &l->u[l->nargs];
  l->nargs++;
}

static void arg_i(hct_pc_launch_t *l, int v) {
  l->i[l->nargs] = v;
  l->args[l->nargs] = &l->i[l->nargs];
  l->nargs++;
}

static hct_pc_launch_t *launch_new(hct_pc_launch_t L[], int *n, int kernel, unsigned blocks, unsigned threads) {
  hct_pc_launch_t *l = &L[(*n)++];
  memset(l, 0, sizeof *l);
  l->kernel = kernel;
  l->grid[0] = blocks;
  l->block[0] = threads;
  l->grid[1] = l->grid[2] = l->block[1] = l->block[2] = 1;
  return l;
}

/* In the order of each kernel's parameters in parity_check.cu (the CPU
 * emulator's test launches these very lists). */
int hct__pc_launches(const hct_pc_plan_t *p, const hct_pc_ptrs_t *x, hct_pc_launch_t L[4]) {
  const work_layout_t w = layout_of(p);
  int n = 0;
  hct_pc_launch_t *l = launch_new(L, &n, HCT_PC_K_ELEMS, p->e_blocks, HCT_PC_THREADS);
  arg_u(l, x->out), arg_u(l, x->want), arg_u(l, x->src), arg_u(l, p->n), arg_i(l, p->dt);
  arg_i(l, p->image), arg_u(l, p->e_chunk), arg_u(l, x->work + w.eparts);
  if (p->r_blocks > 0) {
    l = launch_new(L, &n, HCT_PC_K_REF, p->r_blocks, HCT_PC_THREADS);
    arg_u(l, x->out), arg_i(l, p->dt), arg_u(l, x->ref), arg_u(l, x->rows), arg_u(l, p->slices);
    arg_u(l, p->slice), arg_u(l, p->r_chunk), arg_u(l, x->work + w.rparts);
  }
  if (p->kl_blocks > 0) {
    l = launch_new(L, &n, HCT_PC_K_ROWS, p->kl_blocks, HCT_PC_ROW_THREADS);
    arg_u(l, x->out), arg_i(l, p->dt), arg_u(l, x->ref), arg_u(l, x->ref_p), arg_u(l, x->rows);
    arg_u(l, p->slice), arg_u(l, p->per_slice), arg_u(l, p->len), arg_u(l, p->nkl);
    arg_u(l, x->work + w.kl), arg_u(l, x->work + w.agree);
  }
  l = launch_new(L, &n, HCT_PC_K_REDUCE, 1, 1);
  arg_u(l, x->work + w.eparts), arg_u(l, p->e_blocks), arg_u(l, x->work + w.rparts), arg_u(l, p->r_blocks);
  arg_u(l, x->work + w.kl), arg_u(l, x->work + w.agree), arg_u(l, p->nkl), arg_u(l, x->out);
  /* The reduction reads the first mismatches' bits in want: out without one. */
  arg_u(l, x->want ? x->want : x->out), arg_i(l, p->dt), arg_u(l, x->res ? x->res : x->work + w.res);
  return n;
}

/* The plan of the distance's element pass over n f32 elements. */
static hct_pc_plan_t dist_plan(uint64_t n) {
  hct_hbuf_t b;
  hct_buffer_t spec;
  memset(&b, 0, sizeof b);
  memset(&spec, 0, sizeof spec);
  spec.dtype = HCT_DT_F32;
  b.spec = &spec;
  b.elems = n;
  hct_pc_plan_t p;
  hct__pc_plan(&b, HCT_PC_IMAGE_NONE, &p);
  return p;
}

size_t hct__pc_dist_work_bytes(uint64_t n) {
  return (size_t)dist_plan(n).e_blocks * sizeof(hct_pc_part_t);
}

int hct__pc_dist_launches(uint64_t n, hct_dptr_t out, hct_dptr_t base, hct_dptr_t work, hct_dptr_t res,
                          hct_pc_launch_t L[2]) {
  /* The blocks of the element pass over n f32 elements (hct__pc_plan). */
  const hct_pc_plan_t p = dist_plan(n);
  int k = 0;
  hct_pc_launch_t *l = launch_new(L, &k, HCT_PC_K_DIST, p.e_blocks, HCT_PC_THREADS);
  arg_u(l, out), arg_u(l, base), arg_u(l, n), arg_u(l, p.e_chunk), arg_u(l, work);
  /* The reduction with no element partials and no rows: only the maxima
   * of the distance's partials, read as the reference's. */
  l = launch_new(L, &k, HCT_PC_K_REDUCE, 1, 1);
  arg_u(l, work), arg_u(l, 0), arg_u(l, work), arg_u(l, p.e_blocks);
  arg_u(l, work), arg_u(l, work), arg_u(l, 0), arg_u(l, out);
  arg_u(l, out), arg_i(l, HCT_PC_F32), arg_u(l, res);
  return k;
}

double hct__pc_distance_of(const hct_pc_result_t *r) { return r->maxr > 0 ? r->maxe / r->maxr : r->maxe; }

int hct__pcheck_figs(hct_gpu_t *g, hct_pcheck_t *pc, const hct_hbuf_t *b, const hct_pcref_t *ref,
                     hct_dptr_t out, hct_dptr_t want, hct_dptr_t src, int image, hct_parity_figs_t *f) {
  hct_pc_plan_t p;
  hct__pc_plan(b, image, &p);
  if (p.have_ref && (ref == NULL || ref->ref == 0 || (p.nkl > 0 && ref->ref_p == 0)))
    return hct__error(HCT_EINVAL, "parity check of '%s': its reference is not on the card", b->spec->name);
  size_t res_off;
  int rc = work_room(g, pc, hct__pc_work_bytes(&p, &res_off));
  if (rc != 0) return rc;
  const hct_pc_ptrs_t x = {out, want, src, ref ? ref->ref : 0, ref ? ref->ref_p : 0, ref ? ref->rows : 0,
                           pc->work, 0};
  hct_pc_launch_t L[4];
  const int n = hct__pc_launches(&p, &x, L);
  for (int k = 0; rc == 0 && k < n; k++)
    rc = hct__gpu_launch(g, pc->fn[L[k].kernel], L[k].grid, L[k].block, 0, L[k].args);
  hct_pc_result_t r;
  if (rc == 0) rc = hct__gpu_download(g, &r, pc->work + res_off, sizeof r); /* waits for the stream */
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

int hct__pcheck_set_plan(const hct_hostset_t *hs, const hct_devset_t *d, const hct_pcref_t dref[],
                         hct_pc_setplan_t *sp) {
  memset(sp, 0, sizeof *sp);
  size_t res_off;
  for (int i = 0; i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (!is_out(b) || d->ptr[i] == 0) continue;
    const int q = sp->n;
    int src;
    sp->image[q] = hct__parity_image_of(hs, i, &src);
    sp->src[q] = sp->image[q] != HCT_PC_IMAGE_NONE && d->ptr[src] != 0 ? src : -1;
    if (sp->src[q] < 0) sp->image[q] = HCT_PC_IMAGE_NONE;
    hct__pc_plan(b, sp->image[q], &sp->plan[q]);
    if (sp->plan[q].have_ref && (dref[i].ref == 0 || (sp->plan[q].nkl > 0 && dref[i].ref_p == 0)))
      return hct__error(HCT_EINVAL, "parity check of '%s': its reference is not on the card", b->spec->name);
    sp->partials = HCT_MAX(sp->partials, up8(hct__pc_work_bytes(&sp->plan[q], &res_off)));
    sp->which[sp->n++] = i;
  }
  return 0;
}

int hct__pcheck_room(hct_gpu_t *g, hct_pcheck_t *pc, size_t bytes) { return work_room(g, pc, bytes); }

int hct__pcheck_set_enqueue(hct_gpu_t *g, hct_pcheck_t *pc, const hct_pc_setplan_t *sp, const hct_hostset_t *hs,
                            const hct_devset_t *d, const hct_pcref_t dref[], const hct_dptr_t want[],
                            hct_dptr_t res) {
  if (pc->work_bytes < sp->partials)
    return hct__error(HCT_EINVAL, "parity check: %zu bytes of work memory, %zu needed", pc->work_bytes, sp->partials);
  int rc = 0;
  for (int q = 0; rc == 0 && q < sp->n; q++) {
    const int i = sp->which[q];
    const hct_pcref_t *ref = hs->bufs[i].ref ? &dref[i] : NULL;
    const hct_pc_ptrs_t x = {d->ptr[i], want ? want[i] : 0, sp->src[q] >= 0 ? d->ptr[sp->src[q]] : 0,
                             ref ? ref->ref : 0, ref ? ref->ref_p : 0, ref ? ref->rows : 0, pc->work,
                             res + (hct_dptr_t)((size_t)q * sizeof(hct_pc_result_t))};
    hct_pc_launch_t L[4];
    const int nl = hct__pc_launches(&sp->plan[q], &x, L);
    for (int k = 0; rc == 0 && k < nl; k++)
      rc = hct__gpu_launch(g, pc->fn[L[k].kernel], L[k].grid, L[k].block, 0, L[k].args);
  }
  return rc;
}

void hct__pcheck_set_finish(const hct_pc_setplan_t *sp, const hct_hostset_t *hs, const hct_pc_result_t *r,
                            const hct_dptr_t want[], hct_parity_figs_t f[]) {
  memset(f, 0, sizeof *f * HCT_MAX_BUFFERS);
  for (int q = 0; q < sp->n; q++) {
    const int i = sp->which[q];
    hct__parity_from_card(&hs->bufs[i], &sp->plan[q], &r[q], want != NULL && want[i] != 0, &f[i]);
  }
}

/*
 * Every output's comparisons queued one after the other over the same
 * work memory (the stream orders them: a buffer's partials are reduced
 * before the next buffer's overwrite them), each result in a slot of its
 * own after the largest work area, and all the results brought back in
 * one copy: one wait for the card a run, not one a buffer (issue 34).
 */
int hct__pcheck_set_figs(hct_gpu_t *g, hct_pcheck_t *pc, const hct_hostset_t *hs, const hct_devset_t *d,
                         const hct_pcref_t dref[], const hct_dptr_t want[], hct_parity_figs_t f[]) {
  memset(f, 0, sizeof *f * HCT_MAX_BUFFERS);
  hct_pc_setplan_t sp;
  int rc = hct__pcheck_set_plan(hs, d, dref, &sp);
  if (rc != 0 || sp.n == 0) return rc;
  rc = work_room(g, pc, sp.partials + (size_t)sp.n * sizeof(hct_pc_result_t));
  if (rc == 0) rc = hct__pcheck_set_enqueue(g, pc, &sp, hs, d, dref, want, pc->work + sp.partials);
  hct_pc_result_t r[HCT_MAX_BUFFERS];
  if (rc == 0) rc = hct__gpu_download(g, r, pc->work + sp.partials, (size_t)sp.n * sizeof r[0]); /* waits */
  if (rc == 0) hct__pcheck_set_finish(&sp, hs, r, want, f);
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
    if (rc == 0 && n > 0) rc = hct__gpu_launch(g, pc->fn[HCT_PC_K_COPY], grid, block, 0, args);
  }
  return rc;
}

void hct__pcheck_kept_free(hct_gpu_t *g, hct_dptr_t kept[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    if (kept[i]) hct__gpu_free(g, kept[i]);
    kept[i] = 0;
  }
}
