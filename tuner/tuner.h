/*
 * tuner.h: the private header of tuner/: inputs and float64 references of
 * each op, parity checks, timing statistics, and the probe that puts them
 * together.
 *
 * Files:
 *   tuner/hostset.c   host-side buffer sets of an op (allocation, the
 *                     seedable generator, bf16/f16 conversions)
 *   tuner/inputs.c    an op's inputs drawn from its manifest's rules, and
 *                     the token rows a check compares with float64
 *   tuner/reference.c an op's float64 reference: its template compiled
 *                     like a variant and run on the GPU for those rows
 *   tuner/parity.c    bitwise comparison, normwise error, KL metrics
 *   tuner/stats.c     medians, confidence intervals, whether a timing
 *                     pass stands (the winner and range rules it uses
 *                     are db/decide.c's)
 *   tuner/devset.c    device buffer sets: allocate, free, upload, copy,
 *                     poison
 *   tuner/run.c       running a variant on a GPU: scratch, launches, runs
 *                     (the producer kernel ahead of it: tuner/producer.c)
 *   tuner/probe.c     the probe: compile, check, time, decide, record,
 *                     a stage a file (probe_cands.c, probe_check.c,
 *                     probe_judge.c, probe_search.c, probe_time.c,
 *                     probe_decide.c, probe_record.c, probe_output.c;
 *                     probe_internal.h says which does what)
 *   tuner/stale.c     what probe --stale re-probes (software keys)
 *   tuner/worker.c, worker_serve.c (and a file per request beside it),
 *                     quarantine.c: see worker.h
 */
#ifndef HCT_TUNER_H
#define HCT_TUNER_H

#include <stdint.h>

#include "jit.h"
#include "stats.h"

/* The comparison kernels' layout (kernels-src/common/parity_check.cu),
 * shared with them: hct_pc_result_t, HCT_PC_FIRST. */
#include "../kernels-src/common/hct_parity.h"

/* ---- host buffer sets (tuner/hostset.c) --------------------------------- */

/*
 * One tensor of an op on the host, with its float64 reference when it is an
 * output or inout.  The reference holds the sampled token rows only: with
 * `rows`, ref is [nrows][token_elems] and its row n is token rows[n] of the
 * buffer (element rows[n] * token_elems + j); without, ref covers every
 * element.  KL rows (row_len elements) are cut from each token's slice.
 */
typedef struct hct_hbuf_s {
  const hct_buffer_t *spec;  /* from the manifest */
  size_t elems;              /* evaluated for this T */
  void *data;                /* host data, dtype of spec; NULL when absent */
  double *ref;               /* float64 reference (outputs, inouts); NULL
                                until the reference is computed */
  double *ref_p;             /* softmax of each row of ref, for KL; NULL
                                until hct__parity_prepare */
  int row_len;               /* elements per row for KL metrics (0: the
                                whole slice) */
  const int32_t *rows;       /* token rows ref holds, ascending; NULL: all */
  int nrows;
  size_t token_elems;        /* elements per token row (elems / T) */
} hct_hbuf_t;

typedef struct hct_hostset_s {
  const hct_op_t *op;
  int T;
  int pending;               /* optional inputs present */
  int inputs_only;           /* hct__inputs_fill leaves the weights as they are
                                (fresh inputs for the same weights) */
  uint64_t seed;
  hct_hbuf_t bufs[HCT_MAX_BUFFERS];  /* same order as op->buffers */
  int n;
  int32_t *rows;             /* the token rows checked against float64
                                (hct__inputs_fill draws them), ascending */
  int nrows;
} hct_hostset_t;

/* Allocates every buffer of `op` for T tokens (optional ones only when
 * `pending`).  Data is zero until hct__inputs_fill draws it; references
 * are allocated when computed (hct__reference_shape). */
int hct__hostset_init(hct_hostset_t *s, const hct_op_t *op, int T, int pending);
void hct__hostset_free(hct_hostset_t *s);
hct_hbuf_t *hct__hostset_buf(hct_hostset_t *s, const char *name);

/* A small, fast, seedable generator (splitmix64 + xoshiro256**), so every
 * check's inputs can be drawn again from the seed stored with the trial. */
typedef struct hct_rng_s {
  uint64_t s[4];
} hct_rng_t;
void hct__rng_seed(hct_rng_t *r, uint64_t seed);
uint64_t hct__rng_next(hct_rng_t *r);
double hct__rng_normal(hct_rng_t *r);

/* bf16 and f16 conversions, round to nearest even. */
uint16_t hct__f32_to_bf16(float f);
float hct__bf16_to_f32(uint16_t h);
uint16_t hct__f32_to_f16(float f);
float hct__f16_to_f32(uint16_t h);

/* ---- inputs (tuner/inputs.c) --------------------------------------------- */

/*
 * Draws every input, weight, inout and present optional buffer of s from
 * `seed` by the rules of the op's "inputs" (value = mean + sd * N(0,1) /
 * sqrt(fan_in), never a stored zero), on every core, in fixed chunks each
 * from its own stream: the values depend on the seed alone, and each
 * buffer on its name, so resid is the same with or without pending.  With
 * s->inputs_only the weights are left as they are.  Also draws s->rows
 * (hct__inputs_rows) from the same seed.
 */
int hct__inputs_fill(hct_hostset_t *s, uint64_t seed);
/*
 * The token rows whose outputs a check compares with the float64
 * reference, into rows (room for min(T, sample) entries): every row when T
 * <= the reference's rows.sample (or no sample), else the first, the last
 * and sample - 2 others drawn from `seed`, distinct, ascending.  Returns
 * the count.
 */
int hct__inputs_rows(const hct_op_t *op, int T, uint64_t seed, int32_t *rows);

/* ---- parity (tuner/parity.c) --------------------------------------------- */

typedef struct hct_parity_figs_s {
  size_t elems;
  size_t mismatches;      /* bitwise: elements whose bits differ */
  size_t first_mismatch;  /* index of the first differing element */
  size_t n_first;         /* of first_idx: min(mismatches, HCT_PC_FIRST) */
  size_t first_idx[HCT_PC_FIRST];  /* the first differing elements, ascending */
  uint32_t first_got[HCT_PC_FIRST], first_want[HCT_PC_FIRST]; /* their bits */
  size_t unwritten;       /* elements still holding the poison pattern */
  size_t nonfinite;       /* NaN or Inf that are not the poison */
  double rel_err;         /* ||out - ref|| / ||ref|| (normwise, L2) */
  double max_err_ratio;   /* max |out - ref| / max |ref| */
  double kl_mean, kl_max; /* KL(softmax(ref row) || softmax(out row)) */
  double argmax_agree;    /* fraction of rows whose argmax agrees */
  size_t is_image;        /* 1: a 16-bit image of an f32 output */
  size_t image_mismatches;/* elements that are not the exact image */
} hct_parity_figs_t;

/* ---- a parallel for (tuner/par.c) ---------------------------------------- */

typedef void (*hct_range_fn)(void *ctx, int begin, int end);
/* Runs fn over [0, n) split into contiguous ranges, one per thread (the
 * host's cores, or HCTUNE_THREADS, at most 64), and returns when all are
 * done.  Results must not depend on the split (use fixed chunks). */
void hct__par_for(int n, hct_range_fn fn, void *ctx);
/* The threads hct__par_for uses. */
int hct__par_threads(void);

/* ---- large host buffers, kept for reuse (tuner/hostbuf.c) ----------------- */

/* A buffer of `bytes` (malloc'd below 64 MB; above, one given back before
 * of the same size when there is one, filled with 0xff bytes), or NULL. */
void *hct__hostbuf_get(size_t bytes);
/* Gives a buffer of hct__hostbuf_get back (NULL allowed); kept while the
 * idle ones stay under a quarter of the host's memory. */
void hct__hostbuf_put(void *p);
/* Frees every buffer not in use (a worker about to exit, a test). */
void hct__hostbuf_release(void);
/* Kept buffers made from now on are pinned by pin (0 or an error: the
 * first failure is logged and the rest stay pageable) and unpinned before
 * they are freed; NULL hooks: none.  The worker sets its GPU's. */
typedef int (*hct_hostbuf_pin_fn)(void *arg, void *p, size_t bytes);
typedef void (*hct_hostbuf_unpin_fn)(void *arg, void *p);
void hct__hostbuf_pin(hct_hostbuf_pin_fn pin, hct_hostbuf_unpin_fn unpin, void *arg);

/* ---- the search of a family's points (tuner/search.c) -------------------- */

/*
 * Times points ids[0..n) in round `round` with `samples` samples each
 * (exactly: no pruning, no early stop); out[k] gets ids[k]'s summary (a
 * median of INFINITY or NAN: the point failed, and is dropped).  Returns 0,
 * or an error that ends the search.
 */
typedef int (*hct_search_time_fn)(void *arg, int round, const int *ids, int n, int samples,
                                  hct_summary_t *out);
/* The samples of round r: first_samples * growth^r, at most max_samples. */
int hct__search_samples(const hct_search_t *cfg, int round);
/*
 * Successive halving over points ids[0..n) (tuner/search.c has the rule):
 * rounds of time_fn until at most cfg->final_points are left or a round at
 * max_samples has cut to the best ones; carry[0..n_carry) (ids) survive
 * round 0.  survivors (room for n) gets the ones left, fastest first, and
 * *n_survivors their count; *timings (may be NULL) the samples spent;
 * ranked (may be NULL, room for n) every point best first: the survivors,
 * then those dropped in the last round before those dropped earlier, each
 * round's by median (the probe checks the next of them when a survivor
 * fails its check).  Returns 0 or time_fn's error.
 */
int hct__search_halving(const hct_search_t *cfg, const int *ids, int n, const int *carry,
                        int n_carry, hct_search_time_fn time_fn, void *arg, int *survivors,
                        int *n_survivors, int *timings, int *ranked);

/* The poison pattern written into outputs before each run. */
#define HCT_POISON_F32 0x7fc0dead
#define HCT_POISON_16 0x7fd3   /* bf16 and f16: a NaN in both */

/* Compares `out` (device result, dtype of b->spec) with `ref` (same dtype),
 * bit for bit; fills mismatches, first_mismatch, the first HCT_PC_FIRST
 * mismatches (n_first, first_idx, first_got, first_want), unwritten. */
void hct__parity_bitwise(const hct_hbuf_t *b, const void *out, const void *ref,
                         hct_parity_figs_t *f);
/* Copies the bitwise figures of fb (hct__parity_bitwise's) into f. */
void hct__parity_take_bitwise(hct_parity_figs_t *f, const hct_parity_figs_t *fb);
/* Compares `out` with b->ref in float64: rel_err, max_err_ratio, KL,
 * argmax, unwritten, nonfinite. */
void hct__parity_metrics(const hct_hbuf_t *b, const void *out, hct_parity_figs_t *f);
/*
 * A 16-bit output named "<x>_bf16" or "<x>_f16" beside an f32 output "<x>"
 * is an image: it must hold exactly the round-to-nearest-even conversion of
 * the same run's "<x>".  Its error against the float64 reference is the
 * format's own rounding (a 1-ulp flip near a rounding boundary is correct
 * rounding), so images are judged by this rule and not by error bounds.
 * Sets is_image and image_mismatches of figs[i] for every image buffer i
 * (figs and outs indexed like hs->bufs; outs[i] NULL: not run).
 */
void hct__parity_images(const hct_hostset_t *hs, void *const outs[], hct_parity_figs_t figs[]);
/* Elements of out that are NaN or Inf but not the poison (which counts as
 * unwritten), on every core. */
size_t hct__parity_nonfinite(const hct_hbuf_t *b, const void *out);
/* max |a - base| / max |base| over an f32 buffer (0 for other dtypes:
 * their images are checked exactly instead; INFINITY when a NaN is met),
 * on every core. */
double hct__parity_distance(const hct_hbuf_t *b, const void *a, const void *base);
/* Keeps the softmax of every reference row of hs (ref_p), so the KL of
 * each run checked against it costs one expm1 an element, not four
 * transcendentals.  Call again after the reference changes. */
int hct__parity_prepare(hct_hostset_t *hs);
/*
 * The same figures computed on the card (kernels-src/common/parity_check.cu,
 * tuner/parity_card.c runs it): hct__pc_plan says how a buffer's check is
 * launched, from its sizes alone, so the host, the card and the CPU
 * emulator's test (tests/emu/parity_card_emu.cc) launch the same grids;
 * hct__parity_from_card turns what comes back into the figures with the
 * formulas hct__parity_metrics ends with.
 */
typedef struct hct_pc_plan_s {
  int dt;                   /* HCT_PC_F32 ..., hct_dtype_t's value */
  int image;                /* HCT_PC_IMAGE_*: b is an image (of `src`) */
  uint64_t n, e_chunk;      /* hct_pc_elems: elements, a block's share */
  unsigned e_blocks;
  uint64_t slices, slice;   /* the reference's layout (none: r_blocks 0) */
  uint64_t r_chunk;
  unsigned r_blocks;        /* hct_pc_ref's blocks, 0 without a reference */
  uint64_t per_slice, len, nkl; /* KL rows: per slice, elements, count */
  unsigned kl_blocks;       /* hct_pc_rows' blocks (0: no KL row) */
  int have_ref;             /* b->ref present (the host's rule for rows) */
} hct_pc_plan_t;
void hct__pc_plan(const hct_hbuf_t *b, int image, hct_pc_plan_t *p);
/* The figures of b from the card's result: bitwise ones when `bitwise`
 * (a variant's output was compared), float64 ones from the sums, the image
 * count when p->image. */
void hct__parity_from_card(const hct_hbuf_t *b, const hct_pc_plan_t *p, const hct_pc_result_t *r,
                           int bitwise, hct_parity_figs_t *f);
/* The image kind of buffer i of hs (HCT_PC_IMAGE_*) and the buffer it is
 * an image of (*src; -1 when none). */
int hct__parity_image_of(const hct_hostset_t *hs, int i, int *src);

/* The figures as a JSON object text. */
void hct__parity_json(const hct_parity_figs_t *f, char *buf, size_t len);


/* ---- running candidates on a GPU (tuner/run.c) ---------------------------- */

/*
 * A candidate: one variant at one parameter point, loaded on a GPU.
 * hct__run_* functions belong to the thread that opened the GPU.  They are
 * what a worker process (tuner/worker.c) calls for the probe.
 */
typedef struct hct_cand_s {
  const hct_op_t *op;
  const hct_variant_t *v;
  hct_point_t point;
  char params[256];          /* JSON text of the point */
  char label[320];           /* "v3 {\"TPL\":4}" for messages */
  hct_module_t *mod;
  hct_function_t *fn[HCT_MAX_LAUNCHES];
} hct_cand_t;

/* Device copies of one host set's buffers. */
typedef struct hct_devset_s {
  hct_dptr_t ptr[HCT_MAX_BUFFERS];
  size_t bytes[HCT_MAX_BUFFERS];
} hct_devset_t;

/* ---- the same figures on the card (tuner/parity_card.c) ------------------ */

/* The comparison kernels, loaded on a GPU, and their work memory. */
#define HCT_PC_KERNELS 6
typedef struct hct_pcheck_s {
  hct_module_t *mod;
  hct_function_t *fn[HCT_PC_KERNELS]; /* hct_pc_elems, _ref, _rows, _reduce, _copy, _dist */
  hct_dptr_t work;           /* partials, rows' figures, the result */
  size_t work_bytes;
} hct_pcheck_t;
/* The kernels, in hct_pcheck_t.fn's order. */
enum { HCT_PC_K_ELEMS, HCT_PC_K_REF, HCT_PC_K_ROWS, HCT_PC_K_REDUCE, HCT_PC_K_COPY, HCT_PC_K_DIST };
/* Where a check's data lie on the card, and its work memory (at least
 * hct__pc_work_bytes); res: where the result goes (0: in the work memory,
 * at the offset hct__pc_work_bytes gives), so that the results of several
 * buffers, each checked in its turn over the same work memory, come back
 * in one copy. */
typedef struct hct_pc_ptrs_s {
  hct_dptr_t out, want, src, ref, ref_p, rows, work, res;
} hct_pc_ptrs_t;
/* One launch as data: args point into the struct itself (do not copy it
 * once built), as cuLaunchKernel and hipModuleLaunchKernel take them. */
typedef struct hct_pc_launch_s {
  int kernel;                /* HCT_PC_K_* */
  unsigned grid[3], block[3];
  int nargs;
  uint64_t u[12];
  int32_t i[12];
  void *args[12];
} hct_pc_launch_t;
/* The work memory plan p needs; *res_off: where its result lies there. */
size_t hct__pc_work_bytes(const hct_pc_plan_t *p, size_t *res_off);
/* The launches of plan p over x, in order, into L; returns how many (2 to
 * 4).  hct__pcheck_figs runs them; tests/emu/parity_card_emu.cc runs the
 * same lists on the CPU emulator. */
int hct__pc_launches(const hct_pc_plan_t *p, const hct_pc_ptrs_t *x, hct_pc_launch_t L[4]);
/* The launches of the normwise distance of two f32 outputs of n elements
 * (hct__parity_distance's maxima, issue 34): hct_pc_dist over n, its
 * partials at `work` (at least hct__pc_dist_work_bytes), reduced into the
 * result at res (maxe: the largest difference, maxr: the largest |base|;
 * hct__pc_distance_of turns them into the distance).  Returns 2. */
size_t hct__pc_dist_work_bytes(uint64_t n);
int hct__pc_dist_launches(uint64_t n, hct_dptr_t out, hct_dptr_t base, hct_dptr_t work, hct_dptr_t res,
                          hct_pc_launch_t L[2]);
double hct__pc_distance_of(const hct_pc_result_t *r);
/* A buffer's float64 reference on the card: ref, its rows' softmax, the
 * token rows (0 where the host has none). */
typedef struct hct_pcref_s {
  hct_dptr_t ref, ref_p, rows;
} hct_pcref_t;
/* The compile job of kernels-src/common/parity_check.cu for backend and
 * arch: an op of its own beside `op`'s folder, which *holder keeps (free
 * it after the job). */
int hct__pcheck_job(const hct_op_t *op, hct_backend_kind_t backend, const char *arch,
                    hct_op_t **holder, hct_compile_job_t *job);
int hct__pcheck_load(hct_gpu_t *g, const void *image, size_t size, hct_pcheck_t *pc);
void hct__pcheck_unload(hct_gpu_t *g, hct_pcheck_t *pc);
/* Uploads b's reference (ref, ref_p after hct__parity_prepare, rows). */
int hct__pcheck_ref_upload(hct_gpu_t *g, const hct_hbuf_t *b, hct_pcref_t *d);
void hct__pcheck_ref_free(hct_gpu_t *g, hct_pcref_t *d);
/* The figures of b whose output lies at `out` on the card: bit for bit
 * against `want` (0: none), as an image of the f32 `src` when `image`
 * (HCT_PC_IMAGE_*), in float64 against `ref` (NULL when b has none).  The
 * same figures as hct__parity_bitwise, hct__parity_metrics and
 * hct__parity_images give on the host (sums to rounding). */
int hct__pcheck_figs(hct_gpu_t *g, hct_pcheck_t *pc, const hct_hbuf_t *b, const hct_pcref_t *ref,
                     hct_dptr_t out, hct_dptr_t want, hct_dptr_t src, int image, hct_parity_figs_t *f);

/* The figures of every output and inout of hs from the run whose buffers
 * are d, on the card: what hct__ws_figures_of (tuner/worker_state.c) gives on the
 * host (want[i]: the outputs they must equal bit for bit, or 0; want
 * NULL: none; dref[i]: buffer i's reference on the card). */
int hct__pcheck_set_figs(hct_gpu_t *g, hct_pcheck_t *pc, const hct_hostset_t *hs, const hct_devset_t *d,
                         const hct_pcref_t dref[], const hct_dptr_t want[], hct_parity_figs_t f[]);
/* The same in steps, so that the comparisons of a check's every run are
 * queued behind its runs and their results come back in one copy (issue
 * 34): the plans of hs's outputs (which buffers, images, the work memory
 * their partials need); the work memory grown to at least `bytes` (its
 * partials and the result slots after them: grow it before queueing, a
 * grown area is a new one); one run's comparisons queued, their sp->n
 * results into res on the card (res: in the work memory, after
 * sp->partials); the figures from the results brought back. */
typedef struct hct_pc_setplan_s {
  int n;
  int which[HCT_MAX_BUFFERS];   /* the buffers compared, in order */
  int image[HCT_MAX_BUFFERS], src[HCT_MAX_BUFFERS];
  hct_pc_plan_t plan[HCT_MAX_BUFFERS];
  size_t partials;              /* work bytes before the result slots */
} hct_pc_setplan_t;
int hct__pcheck_set_plan(const hct_hostset_t *hs, const hct_devset_t *d, const hct_pcref_t dref[],
                         hct_pc_setplan_t *sp);
int hct__pcheck_room(hct_gpu_t *g, hct_pcheck_t *pc, size_t bytes);
int hct__pcheck_set_enqueue(hct_gpu_t *g, hct_pcheck_t *pc, const hct_pc_setplan_t *sp, const hct_hostset_t *hs,
                            const hct_devset_t *d, const hct_pcref_t dref[], const hct_dptr_t want[],
                            hct_dptr_t res);
void hct__pcheck_set_finish(const hct_pc_setplan_t *sp, const hct_hostset_t *hs, const hct_pc_result_t *r,
                            const hct_dptr_t want[], hct_parity_figs_t f[]);
/* Copies the outputs and inouts of d into kept[] (allocated where 0; enqueued
 * on the stream), so the next run cannot overwrite them. */
int hct__pcheck_keep(hct_gpu_t *g, hct_pcheck_t *pc, const hct_hostset_t *hs, const hct_devset_t *d,
                     hct_dptr_t kept[]);
/* Frees kept[0..HCT_MAX_BUFFERS) and zeroes them. */
void hct__pcheck_kept_free(hct_gpu_t *g, hct_dptr_t kept[]);

/* A candidate's scratch memory for T tokens. */
typedef struct hct_scratchset_s {
  hct_dptr_t ptr[4];
  size_t bytes[4];
} hct_scratchset_t;

/* ---- device buffers a worker's checks reuse (tuner/devpool.c) ---------- */

#define HCT_DEVPOOL_SLOTS 64
#define HCT_DEVPOOL_IDLE_MAX ((size_t)8 << 30) /* idle bytes kept at most */
typedef struct hct_devpool_s {
  struct {
    hct_dptr_t ptr;
    size_t bytes;
    int in_use;
    uint64_t stamp;           /* when given back (the oldest go first) */
  } slot[HCT_DEVPOOL_SLOTS];
  size_t idle;                /* bytes of the buffers not in use */
  uint64_t clock;
  long allocated, reused;     /* takes that allocated, that reused */
} hct_devpool_t;
/* A buffer of exactly `bytes` (a kept one of that size, else a new one;
 * an allocation that fails gives the idle ones back and tries once more).
 * Its contents are undefined, as fresh memory's. */
int hct__devpool_take(hct_devpool_t *pool, hct_gpu_t *g, size_t bytes, hct_dptr_t *out);
/* Gives p back to be taken again (one the pool did not hand out is
 * freed); 0 is allowed. */
void hct__devpool_give(hct_devpool_t *pool, hct_gpu_t *g, hct_dptr_t p);
/* Frees every buffer not in use. */
void hct__devpool_flush(hct_devpool_t *pool, hct_gpu_t *g);

/* The names every launch expression may use: op constants, the point, T,
 * and the device's SMEM_OPTIN, SM_COUNT, WARP, ARCH, HIP (1 on HIP). */
void hct__run_symtab(const hct_cand_t *c, const hct_device_t *dev, int T, hct_symtab_t *syms);
/* A pointer argument beyond the op's buffers and the candidate's scratch
 * (the reference's "@rows", "@ref.mixed"): its name without the @. */
typedef struct hct_argptr_s {
  const char *name;
  hct_dptr_t ptr;
} hct_argptr_t;
/* 1 when the candidate supports T on dev (token range, constraints);
 * else 0 with the reason in why. */
int hct__run_supports(const hct_cand_t *c, const hct_device_t *dev, int T, char *why, size_t len);

int hct__run_load(hct_gpu_t *g, const hct_op_t *op, const hct_variant_t *v, const hct_point_t *pt,
                  const void *image, size_t size, hct_cand_t *out);
void hct__run_unload(hct_gpu_t *g, hct_cand_t *c);

/* Allocates device buffers for a host set's shapes (absent optional
 * buffers get no memory and pass a null pointer).  The devset calls are
 * tuner/devset.c's. */
int hct__devset_alloc(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d);
void hct__devset_free(hct_gpu_t *g, hct_devset_t *d);
/* Uploads inputs, weights and inouts; poisons outputs. */
int hct__devset_upload(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d);
/* Writes the poison pattern over a device buffer of b's shape. */
int hct__buf_poison(hct_gpu_t *g, const hct_hbuf_t *b, hct_dptr_t p);
/* 1 for an input of a run: what the kernel before it on the stream writes
 * in an engine (R, pending), as opposed to weights and outputs. */
int hct__buf_is_input(hct_buf_role_t r);
/* Allocates the candidate's scratch at T; buffers marked "zero": "once"
 * come back zeroed. */
int hct__scratch_alloc(hct_gpu_t *g, const hct_cand_t *c, int T, hct_scratchset_t *s);
/* Zeroes the "once" buffers again (after a check run poisoned them). */
int hct__scratch_zero_once(hct_gpu_t *g, const hct_cand_t *c, hct_scratchset_t *s);
void hct__scratch_free(hct_gpu_t *g, hct_scratchset_t *s);

/* Enqueues the candidate's launches (zeroing its "zero": true scratch first) on the
 * GPU's stream; no allocation or synchronisation, so it can be captured
 * into a graph.  It is hct__run_zero_each then hct__run_launches. */
int hct__run_enqueue(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs,
                     const hct_devset_t *d, const hct_scratchset_t *s);
int hct__run_zero_each(hct_gpu_t *g, const hct_cand_t *c, const hct_scratchset_t *s);
int hct__run_launches(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs,
                      const hct_devset_t *d, const hct_scratchset_t *s);
/* The same over the names in syms, with the pointers `extra` besides the
 * buffers and scratch (the reference's launches). */
int hct__run_launches_with(hct_gpu_t *g, const hct_cand_t *c, const hct_symtab_t *syms,
                           const hct_devset_t *d, const hct_scratchset_t *s,
                           const hct_argptr_t *extra, int n_extra);
/* The device bytes hct__scratch_alloc takes for c at T (every scratch
 * buffer, as allocated): what the worker's timing holds per candidate. */
int hct__scratch_bytes(const hct_cand_t *c, const hct_device_t *dev, int T, size_t *out);
/* hct__scratch_alloc over the names in syms (the reference's NROWS). */
int hct__scratch_alloc_with(hct_gpu_t *g, const hct_cand_t *c, const hct_symtab_t *syms,
                            hct_scratchset_t *s);
/* 1 when the candidate's first launch at T is programmatic (PDL): it may
 * start before the kernel ahead of it on the stream ends. */
int hct__run_first_pdl(const hct_cand_t *c, const hct_device_t *dev, int T);
/* Uploads the inputs (input, inout, optional: what the kernel before a
 * read writes in an engine) of hs into d; weights and outputs untouched. */
int hct__devset_upload_inputs(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d);

/* ---- the float64 reference (tuner/reference.c) ----------------------------- */

/* 0 when the op can be checked (its manifest has "inputs" and
 * "reference"), else HCT_EMANIFEST naming the op and the missing field. */
int hct__reference_ready(const hct_op_t *op);
/* The compile job of the op's reference template for a card (backend,
 * arch): a job like a variant's, so the cache and the DB's binaries keep it. */
int hct__reference_job(const hct_op_t *op, hct_backend_kind_t backend, const char *arch,
                       hct_compile_job_t *job);
/* Loads a compiled reference as a candidate (label "reference {}"). */
int hct__reference_load(hct_gpu_t *g, const hct_op_t *op, const void *image, size_t size,
                        hct_cand_t *out);
/*
 * Shapes the reference of every output and inout of hs for hs->rows:
 * allocates ref ([nrows][elems / T] doubles), sets rows, nrows,
 * token_elems and row_len (the buffer's "row", by default elems / T).
 * HCT_EMANIFEST when a buffer's elems is not a multiple of T or its row
 * does not divide a token's slice.  The CPU cross-check of the tests fills
 * what this allocates.
 */
int hct__reference_shape(hct_hostset_t *hs);
/*
 * Computes the float64 reference of hs on the GPU: uploads hs's inputs
 * into d (device buffers of hs's shapes: the weights there are hs's)
 * unless `uploaded` says d holds them as drawn, allocates @rows, the @ref
 * arrays and the scratch, runs the reference's launches, and downloads
 * into each output's and inout's ref.  Thread of g.
 */
int hct__reference_run(hct_gpu_t *g, const hct_cand_t *ref, hct_hostset_t *hs, hct_devset_t *d,
                       int uploaded);

/* ---- the producer of the producer check (tuner/producer.c) ---------------- */

/*
 * A kernel standing for the one before the read in an engine: it lets
 * dependents launch at once, spins spin_ns, then writes the read's inputs
 * (from staging copies) into buffers that held poison until then.
 */
typedef struct hct_producer_s {
  hct_module_t *mod;
  hct_function_t *fn;
  hct_devset_t stage;        /* staging copies of the inputs */
  hct_dptr_t table;          /* (src, dst, words) triples */
  int count;
  unsigned spin_ns;
} hct_producer_t;
/* 1 when the card can launch programmatically (CUDA, sm_90+), else 0 and
 * why. */
int hct__producer_applies(const hct_device_t *dev, char *why, size_t len);
/* The PTX text (for tests: it must assemble for sm_90). */
const char *hct__producer_ptx(void);
int hct__producer_load(hct_gpu_t *g, hct_producer_t *p);
void hct__producer_unload(hct_gpu_t *g, hct_producer_t *p);
/* Staging copies of hs's inputs, to be written into d's. */
int hct__producer_stage(hct_gpu_t *g, hct_producer_t *p, const hct_hostset_t *hs,
                        const hct_devset_t *d);
void hct__producer_unstage(hct_gpu_t *g, hct_producer_t *p);
int hct__producer_enqueue(hct_gpu_t *g, const hct_producer_t *p);

/*
 * A session: a candidate's consecutive runs in one allocation, as an
 * engine calls it: the scratch is allocated, poisoned and its "once"
 * buffers zeroed at begin, then kept (state and all) from run to run.
 * Each run poisons the outputs, zeroes the "zero": true scratch, puts the
 * inputs of hs into d (or, with `pre`, poisons them and enqueues the
 * producer that writes them), launches, syncs and downloads outputs and
 * inouts into outs (as hct__run_on).  Free the scratch with
 * hct__scratch_free.
 */
int hct__session_begin(hct_gpu_t *g, const hct_cand_t *c, int T, hct_scratchset_t *s);
/* What begin does to scratch it did not allocate itself (a worker's pooled
 * buffers, tuner/devpool.c): poisoned, the "once" buffers zeroed. */
int hct__session_prepare(hct_gpu_t *g, const hct_cand_t *c, hct_scratchset_t *s);
/* The bytes of each of c's scratch buffers at T (c->v->n_scratch of them),
 * as hct__scratch_alloc sizes them. */
int hct__scratch_sizes(const hct_cand_t *c, const hct_device_t *dev, int T, size_t bytes[4]);
/* `from` (may be NULL): device copies of hs's inputs (hct__devset_copy_inputs)
 * that each run copies into d on the card instead of uploading them from
 * the host: at T = 32768 resid and pending are 2.7 GB a run. */
int hct__session_run(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs, hct_devset_t *d,
                     hct_scratchset_t *s, const hct_producer_t *pre, const hct_devset_t *from,
                     void *outs[], uint32_t *barrier_flag);
/* hct__session_run up to its launches, queued, not waited for: the
 * outputs poisoned, the scratch zeroed, the inputs put in, the launches
 * made.  A worker's check queues its figures after it (issue 34). */
int hct__session_enqueue(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs, hct_devset_t *d,
                         hct_scratchset_t *s, const hct_producer_t *pre, const hct_devset_t *from);
/* 1 with *out the address of the grid barrier's timeout flag (word 0 of
 * the scratch "ws", kernels-src/common/hct_grid.h), 0 when c has none. */
int hct__session_barrier_word(const hct_cand_t *c, const hct_scratchset_t *s, hct_dptr_t *out);
/* The inputs of hs (input, inout and optional buffers present in both)
 * copied from the device set `from` into d, queued on the stream.  This
 * and the next are tuner/devset.c's, as the other devset calls. */
int hct__devset_copy_inputs(hct_gpu_t *g, const hct_hostset_t *hs, const hct_devset_t *from, hct_devset_t *d);
/* A device set holding only hs's inputs (the pristine copy for
 * hct__session_run's `from`), uploaded from the host. */
int hct__devset_inputs_alloc(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d);

/*
 * Runs the candidate once on buffers already uploaded with
 * hct__devset_upload (many candidates can run on one upload of the
 * weights): a session of one run (outputs poisoned, inputs uploaded again,
 * the scratch allocated and poisoned), and outs[i] receives buffer i
 * (outputs and inouts; malloc'd by the caller with hs->bufs[i].elems
 * elements, NULL for the others).  barrier_flag (may be NULL) receives
 * word 0 of the scratch "ws": non-zero when a grid barrier timed out.
 */
int hct__run_on(hct_gpu_t *g, const hct_cand_t *c, const hct_hostset_t *hs, hct_devset_t *d,
                void *outs[], uint32_t *barrier_flag);

/* ---- the probe (tuner/probe*.c) --------------------------------------------- */

typedef struct hct_probe_opts_s {
  const char *device;        /* index or UUID; NULL: "0" */
  const char *parent_run;    /* NULL, or the run of a probe of several
                                cards this one is part of (multiprobe.c) */
  const char *op;            /* NULL: "hc_read" */
  const char *db_path;       /* NULL: the default path */
  const char *kernels_dir;   /* NULL: hct__kernels_dir() */
  hct_tokens_t tokens;       /* the token counts to probe; empty: the op's range */
  const char *only_variants; /* comma list, NULL: all */
  const char *only_points;   /* of those, only these points: lines "variant
                                {params}" as hctune list prints them; NULL:
                                every point (--verify-fleet checks just the
                                fleet's winners) */
  int json;                  /* JSON lines on stdout instead of text */
  int quiet;                 /* no progress */
  int retry_quarantined;
  int check_sets;            /* input sets per (T, pending); 0: 1 */
  double min_margin;         /* a challenger must be this much faster; 0:
                                HCT_MIN_MARGIN_DEFAULT */
  int no_decide;             /* time and record trials, change no decision */
  int no_table;              /* print no decision table at the end */
  int no_prune;              /* time every candidate to the end (bench) */
  int one_mode;              /* time only in the mode that decides: no hot
                                figures for the winners beside the cold */
  int sample_factor;         /* min samples x this (verify-decisions: 2); 0: 1 */
  int check_only;            /* compile and check, record the trials; no
                                timing, no decisions (--verify-fleet) */
  int stale;                 /* only the token counts whose decision is
                                missing or stale (hct__stale_tokens) */
  /* Called for every candidate timed at T (hctune bench, verify-decisions). */
  void (*on_timed)(void *arg, int T, const char *variant, const char *params,
                   const hct_summary_t *s, int pruned);
  void *on_timed_arg;
  /* Called for every candidate put out at T, with the check that caught it
   * ("compile", "parity", "repeat", "determinism", "producer", "timed", or
   * a fault's kind) and why (hctune verify-decisions). */
  void (*on_rejected)(void *arg, int T, const char *variant, const char *params,
                      const char *check, const char *why);
  void *on_rejected_arg;
  int verify_all;            /* verify the timed launches' outputs of every
                                timed candidate, not only the winners' */
  int exhaustive;            /* time every point of every family, whatever
                                the manifest's "search" says (hctune
                                verify-decisions --exhaustive) */
  int copy_bw;               /* measure the card's copy bandwidth once every
                                count is probed, record it with the card
                                (hct__db_device_copy_bw_set) and say so:
                                the rate the report's floors use */
} hct_probe_opts_t;

/*
 * Probes one op on one card: compile (cache first), check parity of every
 * candidate at every T with and without the optional inputs, time the ones
 * that pass, record every trial as it completes and the decisions at the
 * end.  Returns 0, or a negative code with the one-line message set; trials
 * committed before an error stay.
 */
int hct__probe(const hct_probe_opts_t *opts);

/* Where a probe's time went, as the table `hctune probe` ends with: the
 * breakdown of its result (tuner/probe_clock.c; "breakdown" in --json's
 * result and in the run's args), each line after `indent`. */
struct json_t;
void hct__probe_breakdown_print(const struct json_t *breakdown, FILE *f, const char *indent);

/* The card's device-to-device copy rate, bytes per second with each byte
 * counted read and written (tuner/copy_bw.c): the best of 3 rounds of 20
 * copies of up to 256 MiB.  0, or an error code (then *bytes_per_s = 0). */
int hct__copy_bw_measure(const hct_device_t *dev, double *bytes_per_s);
/* The same on a card already open (the probe's worker, issue 34). */
int hct__copy_bw_on(hct_gpu_t *g, double *bytes_per_s);

/* ---- verify-only adoption of fleet decisions (tuner/fleet_verify.c) ------- */

typedef struct hct_fleet_verify_opts_s {
  hct_probe_opts_t probe;    /* card, op, db, tokens, output: as for a probe;
                                also the full probe run on a failure */
  const char *fleet_db;      /* a fleet file; NULL: the fleet decisions
                                imported into the local DB */
  /* For tests without a GPU (NULL: hct__probe, hct__device_find). */
  int (*run_probe)(void *arg, const hct_probe_opts_t *o);
  int (*find_device)(void *arg, const char *spec, hct_device_t *dev);
  void *hook_arg;
} hct_fleet_verify_opts_t;

/*
 * `hctune probe --verify-fleet`: the fleet's decisions for this card's
 * model and environment, checked here by a check-only probe of their
 * variants (full parity checks, nothing timed) and adopted as this card's
 * (source "fleet") when every check passed; otherwise, or when the fleet
 * has none, a full probe of the op, and the report says why.  Returns 0 or
 * the error of the probe or the DB.
 */
int hct__fleet_verify(const hct_fleet_verify_opts_t *o);

/* ---- what probe --stale re-probes (tuner/stale.c) -------------------------- */

struct hct_db_s;
/*
 * Of the token counts `asked`, those (into *out) where card `dev` has no
 * decision of op for a class (bitwise, kl), or one whose software key is
 * not what this host would compile now (hct__softkey_check); a line per
 * (T, class) into report says why ("T=3 bitwise: stale: relay {..}:
 * template changed (...)", "missing").  A count with no decision of this
 * card but decisions of its model under other keys only is "stale", not
 * unknown.  Returns 0 or a DB error.
 */
int hct__stale_tokens(struct hct_db_s *db, const hct_op_t *op, const hct_device_t *dev,
                      const hct_tokens_t *asked, hct_tokens_t *out, char *report, size_t len);

/* Worker processes, watchdog and quarantine (worker.c, worker_serve.c,
 * quarantine.c). */
#include "worker.h"
/* Every card of a host at once, and the cards compared (tuner/multiprobe.c,
 * tuner/agree.c). */
#include "multiprobe.h"

#endif /* HCT_TUNER_H */
