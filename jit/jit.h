/*
 * jit.h: the private header of jit/: op manifests, launch expressions,
 * devices, run-time compilation, the compile cache, and the GPU runtime
 * (memory, modules, launches, events, graphs) behind one backend interface.
 *
 * Files:
 *   jit/expr.c      integer expressions of the manifests ("cdiv(K,ROWS)")
 *   jit/manifest.c  loads kernels-src/<op>/manifest.json (with
 *                   manifest_variant.c and manifest_fields.c: see
 *                   jit/manifest_load.h)
 *   jit/variants.c  a loaded op's variants looked up: baseline, reference,
 *                   competing class, bit families
 *   jit/points.c    parameter points, fit and constraints, tensor maps
 *   jit/op_figures.c  an op's figures at T: batch, floor bytes, flops
 *   jit/backend.c   the backend table, device discovery across vendors,
 *                   and the hct__gpu_* dispatch
 *   jit/cuda.c      CUDA driver + NVRTC, both loaded with dlopen
 *   jit/hip.c       the HIP backend's table and runtime; jit/hip_load.c
 *                   (HIP + hiprtc, loaded with dlopen), hip_device.c,
 *                   hip_rtc.c and hip_codeobj.c hold the rest (see
 *                   jit/hip_internal.h)
 *   jit/nvml.c      the SM clock of NVIDIA cards
 *   jit/vendor_lib.c  dlopen and symbol tables, for every vendor library
 *   jit/cache.c     cache keys (XXH3-128 of everything that shapes a
 *                   binary) and the parallel compile of a set of jobs
 *   jit/fingerprint.c a card's fingerprint as JSON (hct__device_json)
 *   jit/softkey.c   the software key: what shaped a binary and its figures,
 *                   and whether this host would compile the same now
 *
 * Thread rules: hct__backends_load() and device discovery are safe from any
 * thread (pthread_once inside).  Compiles are thread-safe and run on libuv's
 * thread pool.  A hct_gpu_t and everything made from it belong to the
 * thread that opened it.
 */
#ifndef HCT_JIT_H
#define HCT_JIT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* ---- integer expressions (jit/expr.c) ----------------------------------- */

/*
 * Manifests give grids, shared memory and constraints as integer
 * expressions over named values: + - * / % ( ) == != < <= > >= && || !
 * and the functions min(a,b), max(a,b), cdiv(a,b) (ceiling division).
 * Division by zero is an error, not a crash.
 */
typedef struct hct_sym_s {
  const char *name;
  int64_t value;
} hct_sym_t;

typedef struct hct_symtab_s {
  hct_sym_t syms[64];
  int n;
} hct_symtab_t;

void hct__symtab_set(hct_symtab_t *t, const char *name, int64_t value);
int hct__symtab_get(const hct_symtab_t *t, const char *name, int64_t *value);
/* Evaluates `expr`; on error returns HCT_EINVAL (HCT_ENOENT for a name not
 * in syms) with a message naming the expression and the cause. */
int hct__expr_eval(const char *expr, const hct_symtab_t *syms, int64_t *out);

/* ---- manifests (jit/manifest.c loads them; jit/variants.c, jit/points.c and
 *      jit/op_figures.c answer questions about a loaded one) --------------- */

#define HCT_MAX_PARAMS 8
#define HCT_MAX_PARAM_VALUES 16
#define HCT_MAX_LAUNCHES 8
#define HCT_MAX_ARGS 16
#define HCT_MAX_SCRATCH 4
#define HCT_MAX_VARIANTS 32
#define HCT_MAX_FAMILIES 8
#define HCT_MAX_BUFFERS 16
#define HCT_MAX_CONSTRAINTS 8

typedef enum { HCT_DT_F32, HCT_DT_BF16, HCT_DT_F16, HCT_DT_U32, HCT_DT_I32 } hct_dtype_t;

typedef enum {
  HCT_BUF_INPUT,   /* read by the op; drawn fresh per check */
  HCT_BUF_WEIGHT,  /* read by the op; rotated through sets when timing cold */
  HCT_BUF_OUTPUT,  /* written by the op; poisoned before each run, checked */
  HCT_BUF_INOUT,   /* read and written (resid with pending); checked */
  HCT_BUF_OPTIONAL /* an input that may be absent: passed as a null pointer */
} hct_buf_role_t;

/* How the tuner draws an input, weight, inout or optional buffer (the
 * op's "inputs"): value = mean + sd * N(0,1) / sqrt(fan_in), drawn again
 * when the stored value (after rounding to the dtype) is zero. */
typedef struct hct_input_rule_s {
  int set;          /* the manifest gives one */
  double mean, sd;  /* sd > 0 */
  char fan_in[32];  /* an op constant, "" for 1 */
} hct_input_rule_t;

/* A tensor of the op, shared by every variant: "resid" f32 [T][S][C]. */
typedef struct hct_buffer_s {
  char name[32];
  hct_dtype_t dtype;
  hct_buf_role_t role;
  char elems[128];  /* expression: element count, may use T */
  char row[128];    /* expression: elements per KL row ("row"); "" for the
                       whole per-token slice, elems / T */
  hct_input_rule_t rule;
} hct_buffer_t;

/* When a scratch buffer is zeroed: never (its contents are poisoned for
 * checks), before each run (a memset launched with the kernels, so inside
 * a timed graph too), or once, when it is allocated (for state a kernel
 * puts back itself, such as hct_grid.h's self-resetting barrier). */
typedef enum { HCT_ZERO_NEVER = 0, HCT_ZERO_EACH_RUN, HCT_ZERO_ONCE } hct_zero_t;

/* A variant's own scratch memory: "ws" of `bytes`. */
typedef struct hct_scratch_s {
  char name[32];
  char bytes[128];
  hct_zero_t zero;
} hct_scratch_t;

/* A launch argument: a buffer or scratch by name (a device pointer), a
 * tensor map of the variant by name ("@tmap(xn_a)": its 128 bytes, by
 * value), or an integer expression passed as int ("T", "cdiv(T,TPL)"). */
typedef struct hct_arg_s {
  char text[64];
  int is_pointer;
  int tmap;         /* 1 + index into the variant's tensor_maps; 0: none */
} hct_arg_t;

/*
 * A CUDA tensor map (TMA descriptor) of a variant, made on the host at
 * launch time over a buffer or scratch: "tensor_maps" in the manifest
 * (docs/manifest.md).  dims and box are expressions, innermost dimension
 * first; the rows are dense (the stride of dimension i is the product of
 * the dims below it times the element size).
 */
#define HCT_TMAP_MAX_RANK 5
#define HCT_MAX_TMAPS 8
typedef struct hct_tmap_spec_s {
  char name[32];
  char target[32];               /* buffer or scratch */
  hct_dtype_t dtype;
  int rank;
  char dims[HCT_TMAP_MAX_RANK][96];
  char box[HCT_TMAP_MAX_RANK][96];
  int swizzle;                   /* bytes: 0 (none), 32, 64, 128 */
} hct_tmap_spec_t;

/* A tensor map's figures for one launch, evaluated and checked
 * (hct__tmap_eval); what a backend encodes. */
typedef struct hct_tmap_dims_s {
  hct_dtype_t dtype;
  int rank;
  uint64_t dims[HCT_TMAP_MAX_RANK];
  uint64_t strides[HCT_TMAP_MAX_RANK]; /* bytes; [0] is the element size */
  uint32_t box[HCT_TMAP_MAX_RANK];
  int swizzle;
} hct_tmap_dims_t;

/* The 128 bytes a kernel receives as `const __grid_constant__ hct_tmap`. */
typedef struct hct_tmap_bytes_s {
  _Alignas(64) uint64_t words[16];
} hct_tmap_bytes_t;

typedef struct hct_launch_s {
  char entry[64];
  char grid[3][96];   /* expressions */
  char block[3][96];
  char smem[256];     /* dynamic shared memory, bytes */
  char pdl[64];       /* non-zero: programmatic dependent launch (may start
                         before the previous launch ends; the kernel waits
                         with griddepcontrol.wait).  "0" by default */
  hct_arg_t args[HCT_MAX_ARGS];
  int n_args;
} hct_launch_t;

typedef struct hct_param_s {
  char name[32];
  int64_t values[HCT_MAX_PARAM_VALUES];
  int n_values;
} hct_param_t;

/* hct_parity_t and hct__parity_name: common/common.h (common/names.c). */

/* How the points of a family are chosen for the deciding timing at a T
 * (manifest "search", op or variant level; tuner/search.c). */
typedef enum { HCT_SEARCH_EXHAUSTIVE, HCT_SEARCH_HALVING } hct_search_strategy_t;
typedef struct hct_search_s {
  hct_search_strategy_t strategy;
  double keep;              /* fraction kept per round (0.5) */
  int ci_rule;              /* 1: drop only points whose interval lies above
                               the cut's ("ci", default); 0: by median */
  int first_samples;        /* samples per point in round 0 (3) */
  int growth;               /* samples multiply by this per round (2) */
  int max_samples;          /* the last round's samples (24) */
  int final_points;         /* survivors wanted (2) */
  int carry;                /* best points of the previous T kept through
                               round 0 (2) */
  int min_points;           /* a family with at most this many points at a
                               T is timed exhaustively (8) */
} hct_search_t;

typedef struct hct_variant_s {
  char name[32];
  char template_file[64];   /* relative to the op folder */
  hct_parity_t parity;
  char reference[32];       /* variant its bits must equal (bitwise) */
  int min_arch;             /* NVIDIA compute capability x10 (e.g. 80) */
  int hip;                  /* may run on HIP */
  int wave64;               /* may run with 64-wide waves */
  int tmin, tmax;           /* supported token counts */
  int grid_barrier;         /* persist: checked once per T with a timeout */
  int arch_specific;        /* compiled for sm_XXa (wgmma, setmaxnreg): runs
                               only where the arch equals min_arch */
  char description[160];
  hct_param_t params[HCT_MAX_PARAMS];
  int n_params;
  char constraints[HCT_MAX_CONSTRAINTS][256]; /* must all be non-zero */
  int n_constraints;
  hct_scratch_t scratch[HCT_MAX_SCRATCH];
  int n_scratch;
  hct_launch_t launches[HCT_MAX_LAUNCHES];
  int n_launches;
  hct_search_t search;      /* the op's, with the variant's own fields */
  hct_tmap_spec_t tmaps[HCT_MAX_TMAPS];
  int n_tmaps;
} hct_variant_t;

/*
 * The op's float64 reference (its "reference"): a template compiled like a
 * variant (same defines, no parameters) whose launches write "@ref.<out>"
 * arrays [NROWS][elems/T] for the token rows "@rows" (docs/manifest.md).
 * v holds the template, scratch and launches, under the name "reference".
 */
typedef struct hct_reference_s {
  int present;              /* the manifest has "reference" */
  int sample;               /* rows.sample; 0: every row */
  char why[256];            /* rows.why */
  hct_variant_t v;
} hct_reference_t;

typedef struct hct_op_s {
  char name[32];
  char dir[512];            /* folder of the manifest and templates */
  char description[160];
  int selftest;             /* never offered to engines */
  int tmin, tmax;           /* token counts the op is probed at by default */
  hct_symtab_t constants;   /* S, C, K ...: also passed as -D defines */
  hct_buffer_t buffers[HCT_MAX_BUFFERS];
  int n_buffers;
  /* kl parity factors, relative to the baseline's own error */
  double kl_mean_factor, kl_abs_floor, maxerr_factor;
  /* the baseline's own bound: normwise relative error of each f32 output
   * against the float64 reference (1e-5 unless the op's contract rounds
   * more, as the prefill op's bf16 GEMM operands do) */
  double baseline_max_rel_err;
  int timing_cold;          /* 1: cold (rotating weights) decides */
  char batch_expr[96];      /* launches per timed graph: an integer, or an
                               expression of T and the constants ("96") */
  int batch;                /* its value at tmin (for display; the probe and
                               the worker use hct__op_batch at each T) */
  int probe_tokens[HCT_MAX_TOKEN_LIST]; /* representative counts probed by
                               default (manifest "probe_tokens"), ascending */
  int n_probe_tokens;       /* 0: every count of the range */
  hct_search_t search;      /* "search" at op level: every variant's default */
  int checks_all_up_to;     /* manifest "checks.all_points_up_to": up to this
                               count every point is checked before timing;
                               above it only the search's finalists (the
                               probe times first).  INT_MAX: every count */
  char checks_why[200];     /* "checks.why": the reason, shown by the probe */
  char flops_expr[160];     /* manifest "flops": floating-point operations of
                               one call, an expression of T and the constants;
                               "" when the op declares none */
  hct_variant_t variants[HCT_MAX_VARIANTS];
  int n_variants;
  int has_inputs;           /* the manifest has "inputs" (every rule is then
                               in buffers[].rule) */
  hct_reference_t reference;
  /* "families" (issue 29): heads of the bit families an engine may ask
   * for as parity "bits:<head>" */
  char families[HCT_MAX_FAMILIES][32];
  int n_families;
} hct_op_t;

/* The largest batch of launches a timed graph may hold (the worker's). */
#define HCT_MAX_BATCH 4096

/* Launches per timed graph at T: timing.batch evaluated over T and the
 * constants; HCT_ERANGE (with a message) outside 1..HCT_MAX_BATCH. */
int hct__op_batch(const hct_op_t *op, int T);
/* The floors of one call at T (the report's distance to the card's limit):
 * the bytes it must move (every input, weight, output and inout buffer
 * once, docs/manifest.md), and its "flops" (0 when the op declares none).
 * 0, or an error naming the expression. */
int hct__op_floor_bytes(const hct_op_t *op, int T, double *bytes);
int hct__op_flops(const hct_op_t *op, int T, double *flops);
/* The counts a probe takes when none are named: probe_tokens, else every
 * count of the range when it fits in one token list, else HCT_ERANGE
 * asking for --tokens. */
int hct__op_probe_tokens(const hct_op_t *op, hct_tokens_t *out);

/* The largest manifest and template read: anything bigger is a mistake
 * (a data file copied in), refused by its size before a byte is read. */
#define HCT_MANIFEST_MAX ((size_t)4 << 20)
#define HCT_TEMPLATE_MAX ((size_t)8 << 20)

/* Loads <kernels_dir>/<op>/manifest.json; kernels_dir may be a
 * colon-separated list of folders, the first holding the op wins.  Every
 * error is one line naming the op, the file, the field and the cause, and
 * the load refuses what a probe would (docs/manifest.md, "What the load
 * checks"): unknown fields, unknown names in expressions, an empty
 * parameter space, a scratch over 1 TiB, templates that are missing, not
 * regular files or outside the op's folder and the shared include folder.
 * It never blocks on a FIFO or a device (hct__read_regular). */
int hct__manifest_load(const char *kernels_dir, const char *op, hct_op_t **out);
void hct__manifest_free(hct_op_t *op);
/* A copy of a loaded op that lives on its own (freed with
 * hct__manifest_free): what the daemon keeps serving when the op's folder
 * breaks under it. */
int hct__manifest_copy(const hct_op_t *op, hct_op_t **out);
/* Names of the ops under kernels_dir (folders holding a manifest.json;
 * of a colon-separated list, the union, the first folder's op hiding a
 * later one of the same name), sorted; returns the count or a negative
 * code. */
int hct__manifest_list(const char *kernels_dir, char names[][32], int max);
const hct_variant_t *hct__variant_find(const hct_op_t *op, const char *name);
/* The op's variant of class baseline (the load checks there is one), or
 * NULL: what the daemon answers without a decision and what the client
 * library falls back to without a daemon, read from the manifest by both. */
const hct_variant_t *hct__op_baseline(const hct_op_t *op);
/* The op's buffer called `name`, or NULL. */
const hct_buffer_t *hct__buffer_find(const hct_op_t *op, const char *name);
/* The variant whose bits v must equal (its "reference"), when v is bitwise;
 * NULL for the baseline and kl variants. */
const hct_variant_t *hct__variant_reference(const hct_op_t *op, const hct_variant_t *v);
/*
 * The class a variant competes in, the one rule for every decision: a
 * decision of class bitwise promises bits identical to the baseline's, so a
 * bitwise variant takes part in it only when its chain of references ends
 * at the baseline; a bitwise variant whose chain ends at a kl variant (the
 * prefill op's upmix, bit-identical to pair_mma) has that variant's error
 * and competes in kl.  The baseline and kl variants compete in their own
 * class (the baseline in both decisions, kl in kl only).  It is also the
 * class a decision records for its variant (variant_class).  How a variant
 * is *checked* is still its declared class: upmix is checked bit for bit.
 */
hct_parity_t hct__variant_competes(const hct_op_t *op, const hct_variant_t *v);
/* 1 when v takes part in the decision of class `decision` (bitwise or kl):
 * what competes in kl is in the kl decision only, the rest in both. */
int hct__variant_in_decision(const hct_op_t *op, const hct_variant_t *v, hct_parity_t decision);
/*
 * Bit families (issue 29, manifest "families"): the head variant of family
 * `head` when the op declares it, else NULL.  A variant is in the family
 * when it is the head or its chain of bitwise references reaches the head
 * (its bits are the head's).  hct__op_parity_variant: the variant an
 * engine asking for `parity` gets without a decision: the family's head
 * for "bits:<head>" (NULL and HCT_ENOENT when the op has no such family),
 * else the baseline.
 */
const hct_variant_t *hct__op_family(const hct_op_t *op, const char *head);
int hct__variant_in_family(const hct_op_t *op, const hct_variant_t *v, const hct_variant_t *head);
/* Whether v takes part in the decisions of `parity` ("bitwise", "kl" or
 * "bits:<head>"): hct__variant_in_decision or hct__variant_in_family. */
int hct__variant_in_parity(const hct_op_t *op, const hct_variant_t *v, const char *parity);
const hct_variant_t *hct__op_parity_variant(const hct_op_t *op, const char *parity);
size_t hct__dtype_size(hct_dtype_t t);

/*
 * A parameter point of a variant: one value per parameter, in the order of
 * variant->params.  hct__param_points() enumerates the cartesian product;
 * returns the count (at most max).
 */
typedef struct hct_point_s {
  int64_t v[HCT_MAX_PARAMS];
} hct_point_t;
int hct__param_points(const hct_variant_t *v, hct_point_t *out, int max);
/* The point of v made of the first value of every parameter (its default
 * point as a reference: a bitwise variant whose reference is not the
 * baseline is checked against the reference at this point, whose
 * parameters must not change its bits: its template says so).  Not
 * hct__point_default (jit/plan.c), the first point whose
 * constraints hold at T. */
void hct__point_first(const hct_variant_t *v, hct_point_t *pt);
/* The point of v that {"ROWS":4,"TPL":2} names, strictly: every parameter
 * present, an integer, one of the values the manifest lists, and nothing
 * else.  The one reader of a point for every caller (worker, daemon,
 * HCTUNE_FORCE); the message names the variant and the parameter. */
struct json_t;
int hct__point_from_json(const hct_variant_t *v, const struct json_t *params, hct_point_t *pt);
/* The same from JSON text (NULL reads as {}). */
int hct__point_parse(const hct_variant_t *v, const char *text, hct_point_t *pt);
/* {"ROWS":4,"TPL":2} */
void hct__point_json(const hct_variant_t *v, const hct_point_t *p, char *buf, size_t len);
/*
 * Evaluates tensor map t over syms (the launch's names, T included) and
 * checks it against what the hardware takes (rank, box sizes of 1..256,
 * the inner box within the swizzle span, 16-byte strides, `bytes` of the
 * memory it spans): 0, or HCT_EINVAL / HCT_ERANGE naming the map and the
 * field.
 */
int hct__tmap_eval(const hct_tmap_spec_t *t, const hct_symtab_t *syms, size_t bytes,
                   hct_tmap_dims_t *out);
/* A launch argument's text "@tmap(name)" among maps[n]: 1 + the index of
 * the map named, 0 when text is no tensor map argument, -1 when it names
 * none.  The one reader of the syntax (the manifest, libhctune's plans). */
int hct__tmap_arg(const hct_tmap_spec_t *maps, int n, const char *text);

/* Fills syms with the op constants, the point's params, and T. */
void hct__point_symtab(const hct_op_t *op, const hct_variant_t *v, const hct_point_t *p,
                       hct_symtab_t *syms);

/* ---- devices (jit/backend.c) ------------------------------------------- */

typedef enum { HCT_BACKEND_CUDA, HCT_BACKEND_HIP, HCT_BACKEND_COUNT } hct_backend_kind_t;

typedef struct hct_device_s {
  hct_backend_kind_t backend;
  int ordinal;              /* index within its backend */
  char vendor[16];          /* "nvidia", "amd" */
  char name[128];
  char uuid[64];            /* "GPU-8d1c...": NVIDIA's form for CUDA */
  char pci_bus_id[32];
  char arch[64];            /* "sm_90", "gfx90a:sramecc+:xnack-" */
  int arch_num;             /* 90 for sm_90; 0x90a style for gfx not needed */
  int sm_count;             /* SMs or CUs */
  int warp_size;
  int64_t l2_bytes;
  int64_t smem_optin;       /* opt-in shared memory per block */
  int64_t mem_bytes;
  int clock_khz;            /* max SM clock */
  char driver_version[32];
  char compiler_version[32];
} hct_device_t;

/* The card model key shared by every card of the same kind across hosts:
 * "nvidia|NVIDIA H200|sm_90|132|143" (memory in GiB). */
void hct__device_model_key(const hct_device_t *d, char *buf, size_t len);

/*
 * Lists the cards of every backend whose driver loads.  Returns the count
 * (0 when drivers load and find no card), or HCT_ENODRIVER when no backend's
 * driver could be loaded, with a message that says which were tried.
 */
int hct__devices(hct_device_t *out, int max);
/* Finds a card by index ("0") or UUID (or a unique prefix of it). */
int hct__device_find(const char *spec, hct_device_t *out);
/* Whether card UUID `uuid` starts with `spec`, case-insensitively; "GPU-"
 * may be left out of spec.  The one prefix rule of a card's name: `hctune
 * probe --device` and the daemon's choose (daemon/cards.c) both use it. */
int hct__uuid_matches(const char *uuid, const char *spec);

/* A card's fingerprint: every field of d, its backend's name and its model
 * key, as a new JSON object (NULL on out of memory).  The one rendering, for
 * `hctune devices --json` and the devices table. */
struct json_t *hct__device_json(const hct_device_t *d);

/* ---- which variants and points may run where (jit/points.c) ------------- */

/*
 * 1 when variant v may run at all on a card of this backend, arch number
 * and wave size (minimum arch, HIP support, 64-wide waves); else 0 with the
 * reason in why.  The one rule for the probe and `hctune compile`.
 */
int hct__variant_fits(const hct_variant_t *v, hct_backend_kind_t backend, int arch_num,
                      int warp_size, char *why, size_t len);

/*
 * Evaluates v's constraints over syms: 1 when every one holds, 0 when one
 * does not, with why naming it ("constraint 'X' is false", or "constraint
 * 'X' cannot be evaluated: <cause>": an evaluation error, a division by
 * zero say, is a failed constraint).  With `partial`, the caller does not
 * know every value (no card: SMEM_OPTIN, SM_COUNT; no T): a constraint that
 * names a value missing from syms is undecided and left to whoever knows
 * it (the probe), which is the only case that is not a failure.
 */
int hct__constraints_hold(const hct_variant_t *v, const hct_symtab_t *syms, int partial, char *why,
                          size_t len);

/* ---- compiling (jit/cuda.c, jit/hip_rtc.c, jit/cache.c) ----------------- */

typedef struct hct_compile_job_s {
  /* in */
  hct_backend_kind_t backend;
  char arch[64];                 /* "sm_90", "gfx90a" */
  const hct_op_t *op;
  const hct_variant_t *variant;
  hct_point_t point;
  /* out */
  int status;                    /* 0 or negative */
  char error[512];               /* one line, when status < 0 */
  char key[33];                  /* cache key, hex */
  char template_hash[33];        /* the template and its includes */
  void *image;                   /* cubin, PTX or code object (malloc'd) */
  size_t image_size;
  int is_ptx;                    /* PTX for an arch NVRTC does not know */
  char *log;                     /* compiler log (malloc'd), may be NULL */
  double compile_ms;
  int cache_hit;
  int regs, spill_bytes, smem_static, stack_bytes; /* per kernel: max */
                                 /* (-1 each for PTX: no ptxas ran) */
} hct_compile_job_t;

void hct__compile_job_clear(hct_compile_job_t *job);
/* The arch a job compiles for: job->arch, with the "a" suffix of an
 * arch-specific variant ("sm_90" -> "sm_90a"). */
void hct__compile_arch(const hct_compile_job_t *job, char *buf, size_t len);


/*
 * Where compiled binaries are kept between runs: the db layer provides one.
 * get returns 0 and a malloc'd image, HCT_ENOENT when absent.
 */
typedef struct hct_binary_store_s {
  void *ctx;
  int (*get)(void *ctx, const char *key, void **image, size_t *size, int *is_ptx,
             char **log);
  int (*put)(void *ctx, const hct_compile_job_t *job);
} hct_binary_store_t;

/* The compiler's version as text ("nvrtc 13.0", "hiprtc 5.2"), or a negative
 * code when the compiler cannot be loaded. */
int hct__compiler_version(hct_backend_kind_t b, char *buf, size_t len);

/* Fills job->key and job->template_hash (reads the template and every header
 * it includes). */
int hct__compile_key(hct_compile_job_t *job);

/*
 * Compiles jobs in parallel on libuv's thread pool; a job whose key is in
 * `store` (may be NULL) is loaded from it instead.  New binaries are put
 * into the store from the calling thread.  `progress` (may be NULL) is
 * called on the calling thread after each job.  Returns 0 when every job
 * ran (each job has its own status), or a negative code.
 */
int hct__compile_all(hct_compile_job_t *jobs, int n, const hct_binary_store_t *store,
                     void (*progress)(void *arg, const hct_compile_job_t *job, int done,
                                      int total),
                     void *arg);

/* Compiles one job on the calling thread, no cache. */
int hct__compile_one(hct_compile_job_t *job);

/* ---- the software key (jit/softkey.c) ----------------------------------- */

/*
 * What shaped a decision's binary and figures, in five parts, and its key:
 * software_key is XXH3-128 (32 hex digits) of software_json, the parts as
 * compact JSON with sorted keys:
 *   {"compiler":..,"driver":..,"hctune":..,"options":..,"template":..}
 * (softkey.c's header has the details; the fleet's merge relies on them).
 */
typedef struct hct_softkey_s {
  char template_hash[33];  /* the template and every header it includes */
  char options[33];        /* the compile options, -I folders aside */
  char compiler[32];       /* NVRTC or hiprtc version; "" when none loads */
  char driver[32];         /* the card's driver version */
  char hctune[16];         /* HCT_VERSION_STRING */
  char key[33];            /* software_key */
  char json[320];          /* software_json */
} hct_softkey_t;

/* Computes json and key from the five parts (hctune defaults to this
 * hctune's version). */
int hct__softkey_finish(hct_softkey_t *k);
/*
 * The key this host would compile now for job (backend, arch, op,
 * variant, point): the template hash (job->template_hash when already
 * filled, else read from the files), the option list, this host's
 * compiler version and `driver_version` (the card's).  The test hooks
 * HCTUNE_TEST_COMPILER_VERSION and HCTUNE_TEST_DRIVER_VERSION replace the
 * last two when set.  Never depends on tuner/: the daemon calls it.
 */
int hct__softkey_now(const hct_compile_job_t *job, const char *driver_version, hct_softkey_t *out);
/* Reads stored software_json into out (and recomputes its key). */
int hct__softkey_parse(const char *json, hct_softkey_t *out);
/*
 * 0 when the stored key (software_json; NULL or "" for a decision recorded
 * before keys existed) equals `now`; 1 when not, with why naming each part
 * that changed in the order template, options, compiler, driver, hctune
 * ("compiler changed ('nvrtc 12.8', now 'nvrtc 13.0')"), or "no software
 * key recorded".
 */
int hct__softkey_compare(const char *stored_json, const hct_softkey_t *now, char *why, size_t len);
/* The backend and arch of a card from its fingerprint (hct__device_json;
 * older ones without "backend" by their vendor). */
int hct__softkey_card(const char *fingerprint_json, hct_backend_kind_t *backend, char *arch,
                      size_t len);
/*
 * Whether a decision (op, variant, params, recorded with stored_json) on a
 * card of this backend and arch would still be served on this host: 0 when
 * the key this host would compile now is the recorded one, 1 when stale,
 * with why naming the part (a variant gone from the manifest is a changed
 * template, params it no longer lists changed options).  driver_now is the
 * card's driver now, or NULL when the card is not on this host (that part
 * is then not checked).  Negative only on out of memory.
 */
int hct__softkey_check(const hct_op_t *op, const char *variant, const char *params,
                       hct_backend_kind_t backend, const char *arch, const char *driver_now,
                       const char *stored_json, char *why, size_t len);

/*
 * The option list of a compile.  hct__compile_options() builds it, and both
 * the cache key and the backend's compile call that one function, so the
 * key always covers what the compiler is given.  The first n_include
 * options are the -I folders (kernels-src/common, then the op folder): the
 * key hashes the headers found there rather than their paths, so a moved
 * kernels folder keeps its cache.
 */
#define HCT_MAX_COMPILE_OPTS 64
typedef struct hct_compile_opts_s {
  const char *argv[HCT_MAX_COMPILE_OPTS];
  int n;
  int n_include;
  int is_ptx;          /* set by the backend: PTX, not a binary */
  int arch_num;        /* set by the backend: 90 for sm_90 */
  int warp;            /* set by the backend: the HCT_WARP define */
  size_t used;
  char text[8192];     /* storage of argv */
} hct_compile_opts_t;
typedef struct hct_backend_ops_s hct_backend_ops_t;
/* jit/options.c; `ops` is the job's backend (a backend's compile passes
 * the table it was called through, others hct__backend(job->backend)). */
int hct__compile_options(const hct_backend_ops_t *ops, const hct_compile_job_t *job,
                         hct_compile_opts_t *o);
/* Appends one printf-formatted option; HCT_ERANGE when the list is full. */
int hct__compile_opt_add(hct_compile_opts_t *o, const char *fmt, ...) HCT_PRINTF(2, 3);
/* <kernels dir>/common: the folder beside op->dir. */
void hct__common_include_dir(const hct_op_t *op, char *buf, size_t len);
/* Checks that `arch` names a target of backend b (an unknown one is
 * HCT_EINVAL with a message listing the known); fills *arch_num and *warp
 * (either may be NULL). */
int hct__arch_check(hct_backend_kind_t b, const char *arch, int *arch_num, int *warp);
/* Reads the per-kernel resources ptxas -v wrote into a compile log ("Used N
 * registers", "N bytes spill stores", "N bytes smem", "N bytes stack
 * frame") into job: the largest over the kernels. */
void hct__log_resources(const char *log, hct_compile_job_t *job);
/* The line of a compiler log to quote in a one-line error: the first that
 * says "error" (returns 1), else the first non-empty one (returns 0; ""
 * for an empty or NULL log), cut to len - 1 bytes. */
int hct__log_error_line(const char *log, char *buf, size_t len);

/*
 * The resources of an AMDGPU code object (jit/hip_codeobj.c), the largest
 * over its kernels: VGPRs, spilled registers in bytes (x 4), static LDS,
 * scratch.  0, or HCT_EINVAL naming what is wrong with the bytes (they are
 * read as untrusted); the four figures are -1 then.
 */
int hct__hip_code_resources(const void *image, size_t size, int *regs, int *spill_bytes,
                            int *smem_static, int *stack_bytes);

/* ---- vendor libraries (jit/vendor_lib.c) -------------------------------- */

/* A row of a library's symbol table: where the pointer goes, the symbol,
 * and whether its absence is an error (else the pointer stays NULL). */
typedef struct hct_vendor_sym_s {
  void **slot;
  const char *name;
  int required;
} hct_vendor_sym_t;

/* dlopens the first of names[] that loads (RTLD_NOW | RTLD_LOCAL); *which
 * (may be NULL) gets its index.  Appends each name that failed to `tried`
 * (", " between), and copies the last loader message into `why`; NULL when
 * none loads. */
void *hct__vendor_open(const char *const *names, size_t n, size_t *which, char *tried,
                       size_t tried_len, char *why, size_t why_len);
/* Resolves every row; a missing required symbol is HCT_ENOSYM, "'lib' has
 * no symbol 'name'". */
int hct__vendor_resolve(void *lib, const char *libname, const hct_vendor_sym_t *syms, size_t n);

/* Encodes t over device memory at base with the driver's
 * cuTensorMapEncodeTiled (jit/cuda_api.h's table; HCT_EUNSUPPORTED naming
 * CUDA 12.0 when the driver lacks it): the one translation of a
 * manifest's tensor map into the driver's (element type, swizzle, strides,
 * no interleave, 256-byte L2 promotion, zeros out of bounds), for the
 * tuner and the client library alike. */
int hct__cuda_tmap_encode(const hct_tmap_dims_t *t, uint64_t base, uint64_t out[16]);

/* CUresult (jit/cuda_driver.c) and nvrtcResult (jit/cuda.c) values mapped
 * to HCT codes; a table,
 * usable without the libraries. */
int hct__cuda_result_code(int cu_result);
int hct__nvrtc_result_code(int nvrtc_result);

/* NVML (jit/nvml.c), loaded with dlopen: SM clock of the card with `uuid`
 * in MHz, the current one or (max != 0) the highest.  HCT_ENODRIVER when
 * libnvidia-ml.so.1 is absent (logged once). */
int hct__nvml_sm_clock(const char *uuid, int max, int *mhz);

/* ---- the GPU runtime (jit/backend.c dispatching to a backend) ------------ */

typedef struct hct_gpu_s hct_gpu_t;        /* a context and a stream */
typedef struct hct_module_s hct_module_t;
typedef struct hct_function_s hct_function_t;
typedef struct hct_event_s hct_event_t;
typedef struct hct_graph_s hct_graph_t;
typedef uint64_t hct_dptr_t;

int hct__gpu_open(const hct_device_t *dev, hct_gpu_t **out);
void hct__gpu_close(hct_gpu_t *g);
const hct_device_t *hct__gpu_device(const hct_gpu_t *g);

int hct__gpu_alloc(hct_gpu_t *g, size_t bytes, hct_dptr_t *out);
void hct__gpu_free(hct_gpu_t *g, hct_dptr_t p);
int hct__gpu_upload(hct_gpu_t *g, hct_dptr_t dst, const void *src, size_t bytes);
int hct__gpu_download(hct_gpu_t *g, void *dst, hct_dptr_t src, size_t bytes);
/* Fills `count` 32-bit words with `value` (async on the stream). */
int hct__gpu_fill32(hct_gpu_t *g, hct_dptr_t dst, uint32_t value, size_t count);
/* Fills `count` 16-bit words with `value` (async on the stream). */
int hct__gpu_fill16(hct_gpu_t *g, hct_dptr_t dst, uint16_t value, size_t count);

int hct__gpu_module_load(hct_gpu_t *g, const void *image, size_t size, hct_module_t **out);
void hct__gpu_module_unload(hct_gpu_t *g, hct_module_t *m);
int hct__gpu_function(hct_module_t *m, const char *entry, hct_function_t **out);
/* Raises the function's dynamic shared memory limit (needed above 48 KB). */
int hct__gpu_function_smem(hct_function_t *f, int bytes);
/* `args` as for cuLaunchKernel: an array of pointers to each argument. */
int hct__gpu_launch(hct_gpu_t *g, hct_function_t *f, const unsigned grid[3],
                    const unsigned block[3], unsigned smem, void **args);
/* The same with programmatic stream serialisation (CUDA, sm_90): the
 * kernel may start while the previous one on the stream still runs.  A
 * backend without it launches plainly, which is always correct for a
 * kernel written for it (its griddepcontrol instructions are then no-ops). */
int hct__gpu_launch_pdl(hct_gpu_t *g, hct_function_t *f, const unsigned grid[3],
                        const unsigned block[3], unsigned smem, void **args);
int hct__gpu_sync(hct_gpu_t *g);
/* Free and total device memory of g's card (cuMemGetInfo, hipMemGetInfo);
 * HCT_EUNSUPPORTED when the driver cannot say. */
int hct__gpu_mem_info(hct_gpu_t *g, size_t *free_bytes, size_t *total_bytes);
/* Queues a device-to-device copy of bytes on g's stream, ordered with its
 * launches and events; HCT_EUNSUPPORTED when the driver has none. */
int hct__gpu_copy(hct_gpu_t *g, hct_dptr_t dst, hct_dptr_t src, size_t bytes);
/* Pins host memory [p, p + bytes) (page-aligned) so downloads into it run
 * at the bus's rate (cuMemHostRegister, hipHostRegister); unregister
 * before freeing it.  HCT_EUNSUPPORTED when the driver has neither. */
int hct__gpu_host_register(hct_gpu_t *g, void *p, size_t bytes);
void hct__gpu_host_unregister(hct_gpu_t *g, void *p);
/* A tensor map over base (host work only: no launch, safe while
 * capturing); HCT_EUNSUPPORTED on a backend or driver without them. */
int hct__gpu_tensor_map(hct_gpu_t *g, const hct_tmap_dims_t *t, hct_dptr_t base,
                        hct_tmap_bytes_t *out);

int hct__gpu_event_create(hct_gpu_t *g, hct_event_t **out);
void hct__gpu_event_destroy(hct_gpu_t *g, hct_event_t *e);
int hct__gpu_event_record(hct_gpu_t *g, hct_event_t *e);
/* Milliseconds between two recorded events (waits for `end`). */
int hct__gpu_event_elapsed(hct_gpu_t *g, hct_event_t *start, hct_event_t *end, float *ms);

/* Launches between begin and end are captured into a graph, not run. */
int hct__gpu_capture_begin(hct_gpu_t *g);
int hct__gpu_capture_end(hct_gpu_t *g, hct_graph_t **out);
int hct__gpu_graph_launch(hct_gpu_t *g, hct_graph_t *graph);
void hct__gpu_graph_destroy(hct_gpu_t *g, hct_graph_t *graph);

/* Current SM clock in MHz (NVML when present), or a negative code. */
int hct__gpu_sm_clock(hct_gpu_t *g, int *mhz);

/*
 * The backend interface: one table per vendor, filled by jit/cuda.c and
 * jit/hip.c.  hct__gpu_* above dispatch through the device's table.
 */
struct hct_backend_ops_s {
  const char *name;                  /* "cuda", "hip" */
  hct_backend_kind_t kind;
  /* Loads the driver library; HCT_ENODRIVER with a message when absent. */
  int (*load)(void);
  int (*device_count)(int *n);
  int (*device_get)(int ordinal, hct_device_t *out);
  int (*compiler_version)(char *buf, size_t len);
  /* Compiles job (thread-safe); fills image, log, resources.  `ops` is
   * this table, passed in so that a backend whose compiler lives in a file
   * of its own (jit/hip_rtc.c) builds its options without naming the table
   * that names it. */
  int (*compile)(const hct_backend_ops_t *ops, hct_compile_job_t *job, const char *source,
                 const char *include_dir);
  int (*open)(const hct_device_t *dev, hct_gpu_t **out);
  void (*close)(hct_gpu_t *g);
  int (*alloc)(hct_gpu_t *g, size_t bytes, hct_dptr_t *out);
  void (*free)(hct_gpu_t *g, hct_dptr_t p);
  int (*upload)(hct_gpu_t *g, hct_dptr_t dst, const void *src, size_t bytes);
  int (*download)(hct_gpu_t *g, void *dst, hct_dptr_t src, size_t bytes);
  /* Queues a device-to-device copy on the gpu's stream (no wait); NULL:
   * the backend has none (tuner/copy_bw.c then measures nothing). */
  int (*copy)(hct_gpu_t *g, hct_dptr_t dst, hct_dptr_t src, size_t bytes);
  int (*fill32)(hct_gpu_t *g, hct_dptr_t dst, uint32_t value, size_t count);
  int (*fill16)(hct_gpu_t *g, hct_dptr_t dst, uint16_t value, size_t count);
  int (*module_load)(hct_gpu_t *g, const void *image, size_t size, hct_module_t **out);
  void (*module_unload)(hct_gpu_t *g, hct_module_t *m);
  int (*function)(hct_module_t *m, const char *entry, hct_function_t **out);
  int (*function_smem)(hct_function_t *f, int bytes);
  int (*launch)(hct_gpu_t *g, hct_function_t *f, const unsigned grid[3],
                const unsigned block[3], unsigned smem, void **args);
  int (*sync)(hct_gpu_t *g);
  /* Free and total device memory; NULL or HCT_EUNSUPPORTED: unknown. */
  int (*mem_info)(hct_gpu_t *g, size_t *free_bytes, size_t *total_bytes);
  /* Page-locks (pins) host memory for fast copies, and undoes it. */
  int (*host_register)(hct_gpu_t *g, void *p, size_t bytes);
  void (*host_unregister)(hct_gpu_t *g, void *p);
  int (*event_create)(hct_gpu_t *g, hct_event_t **out);
  void (*event_destroy)(hct_gpu_t *g, hct_event_t *e);
  int (*event_record)(hct_gpu_t *g, hct_event_t *e);
  int (*event_elapsed)(hct_gpu_t *g, hct_event_t *a, hct_event_t *b, float *ms);
  int (*capture_begin)(hct_gpu_t *g);
  int (*capture_end)(hct_gpu_t *g, hct_graph_t **out);
  int (*graph_launch)(hct_gpu_t *g, hct_graph_t *graph);
  void (*graph_destroy)(hct_gpu_t *g, hct_graph_t *graph);
  int (*sm_clock)(hct_gpu_t *g, int *mhz);
  /* NULL: hct__gpu_launch_pdl launches plainly. */
  int (*launch_pdl)(hct_gpu_t *g, hct_function_t *f, const unsigned grid[3],
                    const unsigned block[3], unsigned smem, void **args);
  /* Appends the options that depend on the target (arch flags, the
   * HCT_WARP, HCT_ARCH, HCT_CUDA / HCT_HIP defines) and sets o->is_ptx,
   * o->arch_num, o->warp; HCT_EINVAL naming an unknown arch. */
  int (*target_options)(const char *arch, hct_compile_opts_t *o);
  /* Encodes a tensor map over device memory at base; NULL: the backend
   * has none (HIP), and a variant using one cannot run there. */
  int (*tensor_map)(hct_gpu_t *g, const hct_tmap_dims_t *t, hct_dptr_t base,
                    hct_tmap_bytes_t *out);
};

extern const hct_backend_ops_t hct__cuda_backend;
extern const hct_backend_ops_t hct__hip_backend;
const hct_backend_ops_t *hct__backend(hct_backend_kind_t kind);

/*
 * Every hct_gpu_t begins with this, so the dispatch in backend.c can find
 * the table; backends put their own state after it.
 */
struct hct_gpu_s {
  const hct_backend_ops_t *ops;
  hct_device_t dev;
};

/* ---- launch plans (jit/plan.c) ------------------------------------------- */

/*
 * A variant's launch plan evaluated for one T on one card: what the tuner
 * (tuner/run.c) and the client library (client/kernel.c) launch, each
 * binding its own pointers to it.  The one evaluation of the manifest's
 * launch expressions (grid, block, shared memory, PDL, integer arguments),
 * scratch sizes and tensor maps; the plan holds numbers and indices only.
 */

/* What a plan is evaluated from: the manifest's (hct__plan_spec) or one a
 * daemon sent (client/kernel.c reads it into the same structures). */
typedef struct hct_plan_spec_s {
  const char *label;                /* names the candidate in messages */
  const hct_buffer_t *buffers;
  int n_buffers;
  const hct_scratch_t *scratch;
  int n_scratch;
  const hct_launch_t *launches;
  int n_launches;
  const hct_tmap_spec_t *tmaps;
  int n_tmaps;
  int64_t smem_max;                 /* the card's SMEM_OPTIN */
  /* Pointer arguments the caller binds itself, by name without the '@'
   * (the reference's "rows" and "ref.<output>"): plan arguments of kind
   * HCT_PLAN_EXTRA, index into this list.  None for a variant. */
  const char *const *extra;
  int n_extra;
} hct_plan_spec_t;

typedef enum {
  HCT_PLAN_BUFFER,                  /* a device pointer: buffer `index` */
  HCT_PLAN_SCRATCH,                 /* a device pointer: scratch `index` */
  HCT_PLAN_INT,                     /* an int: `value` */
  HCT_PLAN_TMAP,                    /* a tensor map: the launch's tmaps[index] */
  HCT_PLAN_EXTRA                    /* a device pointer: the spec's extra[index] */
} hct_plan_arg_kind_t;

typedef struct hct_plan_arg_s {
  hct_plan_arg_kind_t kind;
  int index;
  int value;
} hct_plan_arg_t;

/* A tensor map's figures, checked against the memory it spans; encoded by
 * whoever knows that memory's address. */
typedef struct hct_plan_tmap_s {
  hct_tmap_dims_t dims;
  hct_plan_arg_kind_t over;         /* HCT_PLAN_BUFFER or HCT_PLAN_SCRATCH */
  int index;
} hct_plan_tmap_t;

typedef struct hct_plan_launch_s {
  unsigned grid[3], block[3], smem;
  int pdl;                          /* programmatic stream serialisation */
  int n_args;
  hct_plan_arg_t args[HCT_MAX_ARGS];
  int n_tmaps;
  hct_plan_tmap_t tmaps[HCT_MAX_TMAPS];
} hct_plan_launch_t;

typedef struct hct_plan_s {
  int n_scratch;
  size_t scratch_bytes[HCT_MAX_SCRATCH];  /* at T, hct__scratch_size's rule */
  hct_zero_t scratch_zero[HCT_MAX_SCRATCH];
  int n_launches;
  hct_plan_launch_t launches[HCT_MAX_LAUNCHES];
} hct_plan_t;

/* The spec of variant v of op, as its manifest gives it. */
void hct__plan_spec(const hct_op_t *op, const hct_variant_t *v, int64_t smem_max,
                    hct_plan_spec_t *spec);
/* The bytes scratch s takes at syms: its expression (0 .. 16 GiB), rounded
 * up to whole 32-bit words (so a fill32 clears it) plus one word (so none
 * is empty).  The one sizing rule of scratch: a kernel sees the same
 * memory in an engine as when the tuner checked it. */
int hct__scratch_size(const hct_scratch_t *s, const hct_symtab_t *syms, size_t *out);
/*
 * Evaluates spec at syms (constants, point, card, T) into *out: pure, no
 * allocation, any thread.  A tensor map is checked against the memory it
 * spans: buffer_bytes[i] / scratch_bytes[i] when given (what was
 * allocated; 0 is an absent buffer, refused), else the buffer's elems and
 * the scratch's size at T.  Errors name spec->label and the launch.
 */
int hct__plan_eval(const hct_plan_spec_t *spec, const hct_symtab_t *syms,
                   const size_t *buffer_bytes, const size_t *scratch_bytes, hct_plan_t *out);

/* The first point of v whose constraints all hold at T (syms: constants,
 * T and the card's figures, as hct__point_symtab and the launch symbols
 * give them); HCT_ENOENT when none does.  The daemon's baseline answer and
 * the library's own fallback use this one rule. */
int hct__point_default(const hct_op_t *op, const hct_variant_t *v, const hct_symtab_t *card,
                       int tokens, hct_point_t *pt);
/* Adds the card's figures to syms under the names launch expressions use
 * (SMEM_OPTIN, SM_COUNT, WARP, ARCH, HIP), as tuner/run.c does. */
void hct__card_symbols(hct_symtab_t *syms, int arch_num, int sm_count, int64_t smem_optin,
                       int warp, int hip);

#endif /* HCT_JIT_H */
