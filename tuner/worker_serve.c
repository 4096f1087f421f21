/*
 * worker_serve.c: the serving side of the worker process, the one that runs
 * candidates on a GPU for a probe (worker.h has the design and the
 * protocol; cli/cmd_worker.c is the thin command that calls
 * hct__worker_serve, as git's builtin/upload-pack.c calls upload_pack()).
 *
 * It reads one JSON request per line on stdin, looks its "cmd" up in the
 * table below, and writes one reply per line on stdout, echoing the id.
 * Nothing else may be written on stdout: logs go to stderr, which the
 * parent keeps the tail of for its messages.  It exits 0 on EOF or `quit`.
 * A sticky GPU error (a fault, a hang the driver noticed) poisons the
 * context until the process ends, so the reply says "fatal" and the worker
 * exits 1 without touching the GPU again; the parent starts a fresh one.
 *
 * Loop thread only: one request at a time, in order.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "tuner.h"

#define MAX_CANDS 512
#define MAX_OPS 8

typedef struct wcand_s {
  int id;
  int used;
  hct_cand_t c;
} wcand_t;

/* One input set of a check: host data with its float64 reference, and the
 * reference candidate's outputs on it. */
typedef struct runset_s {
  int valid;
  hct_hostset_t hs;
  void *ref_out[HCT_MAX_BUFFERS];
  json_t *ref_figs;         /* the reference's figures against float64 */
  hct_parity_figs_t ref_f[HCT_MAX_BUFFERS]; /* the same, as figures */
  /* Checks on the card (tuner/parity_card.c): the float64 reference and
   * the reference candidate's outputs there, instead of ref_out. */
  hct_pcref_t dref[HCT_MAX_BUFFERS];
  int dref_ok;
  hct_dptr_t ref_dev[HCT_MAX_BUFFERS];
  /* The set's inputs as drawn, on the card: every run copies them into the
   * device set there (a run writes resid; issue 34: at T = 32768 resid and
   * pending are 2.7 GB, uploaded from the host five times a check). */
  hct_devset_t pristine;
} runset_t;

/* The inputs of the last check, kept for the next: the probe checks every
 * candidate on the same inputs in turn, so the reference and the outputs
 * of the reference candidate are computed once per input set.  set[0] is
 * drawn from the seed; set[1] holds fresh inputs for the same weights (the
 * repeat check), drawn when first asked for. */
typedef struct inset_s {
  int valid;
  const hct_op_t *op;
  int T, pending;
  uint64_t seed;
  runset_t set[2];
  int ref_id;               /* candidate whose outputs set[].ref_out hold, or -1 */
  int ref_repeat;           /* they include set[1]'s */
  int ref_card;             /* they are on the card (ref_dev), not ref_out */
  hct_gpu_t *gpu;           /* where `dev` lives */
  hct_devset_t dev;         /* the device copy every candidate runs on */
  int dev_ok;
  int staged;               /* the producer holds set[0]'s inputs */
} inset_t;

typedef struct worker_s {
  hct_gpu_t *gpu;
  hct_device_t dev;
  struct {
    char dir[1024];
    hct_op_t *op;
    hct_cand_t ref;         /* its float64 reference, once 'reference' loaded it */
    int ref_loaded;
  } ops[MAX_OPS];
  int n_ops;
  wcand_t *cands;
  inset_t in;
  hct_producer_t producer;  /* the producer check's kernel, loaded once */
  int producer_loaded;
  char producer_broken[256]; /* why it cannot run here, once known */
  hct_pcheck_t pcheck;      /* the comparison kernels, once loaded */
  int pcheck_state;         /* 0: not tried, 1: loaded, -1: host figures */
  char pcheck_off[256];     /* why checks compare on the host, once known */
  struct timed_s *timed;    /* the last 'time' request's allocation, for 'verify' */
  double phase[HCT_WP_N];   /* where the request being answered spent its
                               time (worker.h's "phase_ms") */
  hct_devpool_t pool;       /* device buffers the checks reuse (devpool.c) */
  hct_db_t *db;             /* read-only, kept open: opening checks it */
  char dbpath[1024];
  int quit;
} worker_t;

/* Errors after which the GPU context cannot be used again. */
static int is_sticky(int rc) { return rc == HCT_EFAULT || rc == HCT_EHANG || rc == HCT_EGPU; }

/* Adds the time since t0 to phase k of the request being answered. */
static void phase_add(worker_t *W, int k, uint64_t t0) {
  W->phase[k] += (double)(hct__now_ns() - t0) / 1e6;
}

/* ---- request fields ------------------------------------------------------ */

static int get_int(json_t *req, const char *key, int required, int64_t dflt, int64_t *out) {
  json_t *v = json_object_get(req, key);
  if (v == NULL && !required) {
    *out = dflt;
    return 0;
  }
  if (!json_is_integer(v))
    return hct__error(HCT_EINVAL, "request '%s': '%s' must be an integer",
                      json_string_value(json_object_get(req, "cmd")), key);
  *out = json_integer_value(v);
  return 0;
}

static int get_str(json_t *req, const char *key, int required, const char **out) {
  json_t *v = json_object_get(req, key);
  *out = json_string_value(v);
  if (*out == NULL && (required || v != NULL))
    return hct__error(HCT_EINVAL, "request '%s': '%s' must be a string",
                      json_string_value(json_object_get(req, "cmd")), key);
  return 0;
}

static wcand_t *find_cand(worker_t *W, int64_t id) {
  for (int i = 0; i < MAX_CANDS; i++)
    if (W->cands[i].used && W->cands[i].id == id) return &W->cands[i];
  return NULL;
}

static int need_cand(worker_t *W, int64_t id, wcand_t **out) {
  *out = find_cand(W, id);
  if (*out == NULL) return hct__error(HCT_ENOENT, "candidate %lld is not loaded", (long long)id);
  return 0;
}

static void inset_clear(worker_t *W);

/* ---- requests ----------------------------------------------------------- */

static int req_hello(worker_t *W, json_t *req, json_t *reply) {
  json_object_set_new(reply, "pid", json_integer(getpid()));
  json_object_set_new(reply, "version", json_string(HCT_VERSION_STRING));
  return 0;
}

/* The hostbuf pinning hooks over the worker's GPU. */
static int pin_cb(void *arg, void *p, size_t bytes) {
  return hct__gpu_host_register(((worker_t *)arg)->gpu, p, bytes);
}

static void unpin_cb(void *arg, void *p) { hct__gpu_host_unregister(((worker_t *)arg)->gpu, p); }

static int req_open(worker_t *W, json_t *req, json_t *reply) {
  const char *spec;
  int rc = get_str(req, "device", 0, &spec);
  if (rc != 0) return rc;
  if (W->gpu != NULL) return hct__error(HCT_EBUSY, "a device is already open in this worker");
  if ((rc = hct__device_find(spec ? spec : "0", &W->dev)) != 0) return rc;
  if ((rc = hct__gpu_open(&W->dev, &W->gpu)) != 0) return rc;
  /* The check's output buffers pinned: its five downloads a run are
   * gigabytes at large T. */
  hct__hostbuf_pin(pin_cb, unpin_cb, W);
  json_object_set_new(reply, "uuid", json_string(W->dev.uuid));
  json_object_set_new(reply, "name", json_string(W->dev.name));
  json_object_set_new(reply, "arch", json_string(W->dev.arch));
  return 0;
}

/* The manifest of `name` under `kdir`, loaded once per worker. */
static int get_op(worker_t *W, const char *kdir, const char *name, hct_op_t **out) {
  char dir[1024];
  int rc;
  if (kdir != NULL) hct__strlcpy(dir, kdir, sizeof dir);
  else if ((rc = hct__kernels_dir(dir, sizeof dir)) != 0) return rc;
  for (int i = 0; i < W->n_ops; i++)
    if (strcmp(W->ops[i].dir, dir) == 0 && strcmp(W->ops[i].op->name, name) == 0) {
      *out = W->ops[i].op;
      return 0;
    }
  if (W->n_ops == MAX_OPS) return hct__error(HCT_ERANGE, "more than %d ops in one worker", MAX_OPS);
  if ((rc = hct__manifest_load(dir, name, out)) != 0) return rc;
  hct__strlcpy(W->ops[W->n_ops].dir, dir, sizeof W->ops[W->n_ops].dir);
  W->ops[W->n_ops++].op = *out;
  return 0;
}

/* The op's reference, loaded by a 'reference' request. */
static int op_reference(worker_t *W, const hct_op_t *op, const hct_cand_t **out) {
  for (int i = 0; i < W->n_ops; i++)
    if (W->ops[i].op == op && W->ops[i].ref_loaded) {
      *out = &W->ops[i].ref;
      return 0;
    }
  return hct__error(HCT_ENOENT, "op '%s': its reference is not loaded in this worker ('reference' first)",
                    op->name);
}

/* The binary `key` from the DB at dbpath, read-only: the probe (the only
 * writer) holds the database open too.  One connection for every load:
 * each open runs a quick check of the whole file. */
static int read_binary(worker_t *W, const char *dbpath, const char *key, void **image, size_t *size) {
  int rc;
  if (W->db == NULL || strcmp(W->dbpath, dbpath) != 0) {
    hct__db_close(W->db);
    W->db = NULL;
    if ((rc = hct__db_open(dbpath, HCT_DB_READONLY | HCT_DB_NOCREATE, &W->db)) != 0) return rc;
    hct__strlcpy(W->dbpath, dbpath, sizeof W->dbpath);
  }
  int is_ptx = 0;
  char *log = NULL;
  rc = hct__db_binary_get(W->db, key, image, size, &is_ptx, &log);
  free(log);
  if (rc == HCT_ENOENT) rc = hct__error(HCT_ENOENT, "binary '%s' is not in '%s'", key, dbpath);
  return rc;
}

/* reference {kernels_dir, op, binary_key, db}: loads the op's float64
 * reference (compiled by the parent, like a candidate), which every check
 * and verify of the op runs on its inputs. */
static int req_reference(worker_t *W, json_t *req, json_t *reply) {
  const char *kdir, *opname, *key, *dbpath;
  int rc;
  if ((rc = get_str(req, "kernels_dir", 0, &kdir)) != 0 || (rc = get_str(req, "op", 1, &opname)) != 0 ||
      (rc = get_str(req, "binary_key", 1, &key)) != 0 || (rc = get_str(req, "db", 1, &dbpath)) != 0)
    return rc;
  hct_op_t *op;
  if ((rc = get_op(W, kdir, opname, &op)) != 0) return rc;
  int slot = 0;
  while (W->ops[slot].op != op) slot++;
  if (W->ops[slot].ref_loaded) return hct__error(HCT_EEXIST, "op '%s': its reference is already loaded", opname);
  void *image = NULL;
  size_t size = 0;
  if ((rc = read_binary(W, dbpath, key, &image, &size)) != 0) return rc;
  rc = hct__reference_load(W->gpu, op, image, size, &W->ops[slot].ref);
  free(image);
  if (rc != 0) return rc;
  W->ops[slot].ref_loaded = 1;
  /* The comparison kernels compiled by the parent (issue 34: no compile
   * here, about a second a worker): loaded now, unless the host's figures
   * are asked for; one that does not load is compiled at the first check
   * as before (pcheck_ready). */
  const char *pkey = json_string_value(json_object_get(req, "pcheck_key"));
  const char *env = getenv("HCTUNE_CHECK_ON_HOST");
  if (pkey != NULL && W->pcheck_state == 0 && !(env != NULL && env[0] != '\0' && strcmp(env, "0") != 0) &&
      read_binary(W, dbpath, pkey, &image, &size) == 0) {
    if (hct__pcheck_load(W->gpu, image, size, &W->pcheck) == 0) W->pcheck_state = 1;
    free(image);
  }
  hct__error_clear();
  json_object_set_new(reply, "label", json_string(W->ops[slot].ref.label));
  return 0;
}

static int req_load(worker_t *W, json_t *req, json_t *reply) {
  int64_t id;
  const char *kdir, *opname, *vname, *key, *dbpath;
  int rc;
  if ((rc = get_int(req, "cand", 1, 0, &id)) != 0 || (rc = get_str(req, "kernels_dir", 0, &kdir)) != 0 ||
      (rc = get_str(req, "op", 1, &opname)) != 0 || (rc = get_str(req, "variant", 1, &vname)) != 0 ||
      (rc = get_str(req, "binary_key", 1, &key)) != 0 || (rc = get_str(req, "db", 1, &dbpath)) != 0)
    return rc;
  if (find_cand(W, id) != NULL) return hct__error(HCT_EEXIST, "candidate %lld is already loaded", (long long)id);
  wcand_t *slot = NULL;
  for (int i = 0; i < MAX_CANDS && slot == NULL; i++)
    if (!W->cands[i].used) slot = &W->cands[i];
  if (slot == NULL) return hct__error(HCT_ERANGE, "more than %d candidates in one worker", MAX_CANDS);
  hct_op_t *op;
  if ((rc = get_op(W, kdir, opname, &op)) != 0) return rc;
  const hct_variant_t *v = hct__variant_find(op, vname);
  if (v == NULL) return hct__error(HCT_ENOENT, "op '%s' has no variant '%s'", opname, vname);
  hct_point_t pt;
  if ((rc = hct__point_from_json(v, json_object_get(req, "params"), &pt)) != 0) return rc;

  void *image = NULL;
  size_t size = 0;
  if ((rc = read_binary(W, dbpath, key, &image, &size)) != 0) return rc;
  rc = hct__run_load(W->gpu, op, v, &pt, image, size, &slot->c);
  free(image);
  if (rc != 0) return rc;
  slot->id = (int)id;
  slot->used = 1;
  json_object_set_new(reply, "label", json_string(slot->c.label));
  return 0;
}

static int req_unload(worker_t *W, json_t *req, json_t *reply) {
  int64_t id;
  wcand_t *c;
  int rc;
  if ((rc = get_int(req, "cand", 1, 0, &id)) != 0 || (rc = need_cand(W, id, &c)) != 0) return rc;
  if (W->in.ref_id == id) inset_clear(W);
  hct__run_unload(W->gpu, &c->c);
  memset(c, 0, sizeof *c);
  return 0;
}

/* ---- check --------------------------------------------------------------- */

/* Host buffers for a run's outputs and inouts (NULL for the others). */
static int outs_alloc(const hct_hostset_t *hs, void *outs[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) outs[i] = NULL;
  for (int i = 0; i < hs->n; i++) {
    hct_buf_role_t r = hs->bufs[i].spec->role;
    if (r != HCT_BUF_OUTPUT && r != HCT_BUF_INOUT) continue;
    /* Kept for the next run (tuner/hostbuf.c): gigabytes at large T. */
    outs[i] = hct__hostbuf_get(hs->bufs[i].elems * hct__dtype_size(hs->bufs[i].spec->dtype));
    if (outs[i] == NULL) return hct__error(HCT_ENOMEM, "out of memory for outputs");
  }
  return 0;
}

static void outs_free(void *outs[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    hct__hostbuf_put(outs[i]);
    outs[i] = NULL;
  }
}

static void runset_clear(runset_t *r) {
  if (r->valid) hct__hostset_free(&r->hs);
  outs_free(r->ref_out);
  json_decref(r->ref_figs);
  memset(r, 0, sizeof *r);
}

/* Kept copies of outputs given back to the pool. */
static void kept_give(worker_t *W, hct_dptr_t kept[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    hct__devpool_give(&W->pool, W->gpu, kept[i]);
    kept[i] = 0;
  }
}

/* Room for the outputs and inouts of d in kept[] (hct__pcheck_keep fills
 * them), from the pool where empty. */
static int kept_take(worker_t *W, const hct_hostset_t *hs, const hct_devset_t *d, hct_dptr_t kept[]) {
  int rc = 0;
  for (int i = 0; rc == 0 && i < hs->n; i++) {
    const hct_buf_role_t r = hs->bufs[i].spec->role;
    if ((r == HCT_BUF_OUTPUT || r == HCT_BUF_INOUT) && d->ptr[i] != 0 && kept[i] == 0)
      rc = hct__devpool_take(&W->pool, W->gpu, d->bytes[i], &kept[i]);
  }
  return rc;
}

/* The card's copies of a set's reference, reference outputs and inputs. */
static void runset_card_free(worker_t *W, hct_gpu_t *g, runset_t *r) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) hct__pcheck_ref_free(g, &r->dref[i]);
  r->dref_ok = 0;
  kept_give(W, r->ref_dev);
  hct__devset_free(g, &r->pristine);
}

static void inset_clear(worker_t *W) {
  inset_t *in = &W->in;
  if (in->gpu != NULL)
    for (int k = 0; k < 2; k++) runset_card_free(W, in->gpu, &in->set[k]);
  if (in->staged) hct__producer_unstage(in->gpu, &W->producer);
  if (in->dev_ok) hct__devset_free(in->gpu, &in->dev);
  for (int k = 0; k < 2; k++) runset_clear(&in->set[k]);
  memset(in, 0, sizeof *in);
  in->ref_id = -1;
}

/* The device set for the current inputs, allocated and uploaded once per
 * input set: every candidate checked on it runs on the same device copy
 * of the weights (a run puts its own inputs in, and poisons its outputs). */
static int inset_device(worker_t *W) {
  inset_t *in = &W->in;
  if (in->dev_ok && in->gpu == W->gpu) return 0;
  if (in->dev_ok) hct__devset_free(in->gpu, &in->dev);
  in->dev_ok = 0;
  int rc = hct__devset_alloc(W->gpu, &in->set[0].hs, &in->dev);
  if (rc != 0) return rc;
  in->gpu = W->gpu;
  in->dev_ok = 1;
  return hct__devset_upload(W->gpu, &in->set[0].hs, &in->dev);
}

/* Figures of every output and inout into f: against the float64
 * reference, and bit for bit against `ref` when given.  An output whose
 * bits equal the reference's (ref_f: its figures) has the reference's
 * figures: the float64 comparison is the costly part of a check, and a
 * bitwise candidate's runs are bit-equal to the baseline's. */
static void figures_of(const hct_hostset_t *hs, void *outs[], void *ref[],
                       const hct_parity_figs_t *ref_f, hct_parity_figs_t f[]) {
  memset(f, 0, sizeof *f * HCT_MAX_BUFFERS);
  for (int i = 0; i < hs->n; i++) {
    if (outs[i] == NULL) continue;
    hct_parity_figs_t fb;
    memset(&fb, 0, sizeof fb);
    if (ref != NULL && ref[i] != NULL) hct__parity_bitwise(&hs->bufs[i], outs[i], ref[i], &fb);
    if (ref != NULL && ref[i] != NULL && ref_f != NULL && fb.mismatches == 0) {
      f[i] = ref_f[i];
      f[i].is_image = 0;
      f[i].image_mismatches = 0;
    } else {
      hct__parity_metrics(&hs->bufs[i], outs[i], &f[i]);
    }
    hct__parity_take_bitwise(&f[i], &fb);
  }
  hct__parity_images(hs, outs, f);
}

static json_t *figures_json(const hct_hostset_t *hs, void *outs[], const hct_parity_figs_t f[]) {
  json_t *all = json_object();
  for (int i = 0; i < hs->n; i++)
    if (outs[i] != NULL) json_object_set_new(all, hs->bufs[i].spec->name, hct__figs_to_json(&f[i]));
  return all;
}

static json_t *figures(const hct_hostset_t *hs, void *outs[], void *ref[],
                       const hct_parity_figs_t *ref_f) {
  hct_parity_figs_t f[HCT_MAX_BUFFERS];
  figures_of(hs, outs, ref, ref_f, f);
  return figures_json(hs, outs, f);
}

/* Marks (non-NULL) for the outputs and inouts a run leaves on the card, in
 * the shape figures_json reads.  Loop thread only: one static array. */
static void **card_outs(const hct_hostset_t *hs, const hct_devset_t *d) {
  static void *marks[HCT_MAX_BUFFERS];
  static char mark;
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    const int out = i < hs->n && (hs->bufs[i].spec->role == HCT_BUF_OUTPUT || hs->bufs[i].spec->role == HCT_BUF_INOUT);
    marks[i] = out && d->ptr[i] ? &mark : NULL;
  }
  return marks;
}

/* Makes W->in set 0 the input set (op, T, pending, seed): inputs and
 * reference. */
static int inset_get(worker_t *W, const hct_op_t *op, int T, int pending, uint64_t seed) {
  inset_t *in = &W->in;
  if (in->valid && in->op == op && in->T == T && in->pending == pending && in->seed == seed)
    return 0;
  const uint64_t t0 = hct__now_ns();
  inset_clear(W);
  const hct_cand_t *ref = NULL;
  int rc = op_reference(W, op, &ref);
  if (rc != 0) return rc;
  runset_t *a = &in->set[0];
  if ((rc = hct__hostset_init(&a->hs, op, T, pending)) != 0) return rc;
  a->valid = 1;
  /* The reference runs on the device copy every candidate runs on, just
   * uploaded (inset_clear dropped the last one). */
  if ((rc = hct__inputs_fill(&a->hs, seed)) != 0 || (rc = inset_device(W)) != 0 ||
      (rc = hct__devset_inputs_alloc(W->gpu, &a->hs, &a->pristine)) != 0 ||
      (rc = hct__reference_run(W->gpu, ref, &a->hs, &in->dev, 1)) != 0 ||
      (rc = hct__parity_prepare(&a->hs)) != 0) {
    if (!is_sticky(rc)) inset_clear(W);
    return rc;
  }
  phase_add(W, HCT_WP_INPUTS, t0);
  in->valid = 1;
  in->op = op;
  in->T = T;
  in->pending = pending;
  in->seed = seed;
  return 0;
}

/* Set 1: fresh inputs for set 0's weights (drawn from a seed derived from
 * set 0's), with their reference: what a second call of an engine sees at
 * the same addresses. */
static int inset_fresh(worker_t *W) {
  inset_t *in = &W->in;
  runset_t *a = &in->set[0], *b = &in->set[1];
  if (b->valid) return 0;
  const uint64_t t0 = hct__now_ns();
  const hct_cand_t *ref = NULL;
  int rc = op_reference(W, in->op, &ref);
  if (rc != 0 || (rc = hct__hostset_init(&b->hs, in->op, in->T, in->pending)) != 0) return rc;
  b->valid = 1;
  for (int i = 0; i < a->hs.n; i++)
    if (a->hs.bufs[i].spec->role == HCT_BUF_WEIGHT && a->hs.bufs[i].data)
      memcpy(b->hs.bufs[i].data, a->hs.bufs[i].data,
             a->hs.bufs[i].elems * hct__dtype_size(a->hs.bufs[i].spec->dtype));
  b->hs.inputs_only = 1;
  uint64_t seed = in->seed ^ 0x5bd1e9955bd1e995ull;
  /* Set 1's inputs go into the device copy for its reference; every run
   * uploads its own inputs again, and the weights there are the same. */
  if ((rc = hct__inputs_fill(&b->hs, seed)) != 0 || (rc = inset_device(W)) != 0 ||
      (rc = hct__devset_inputs_alloc(W->gpu, &b->hs, &b->pristine)) != 0 ||
      (rc = hct__reference_run(W->gpu, ref, &b->hs, &in->dev, 0)) != 0 ||
      (rc = hct__parity_prepare(&b->hs)) != 0) {
    if (!is_sticky(rc)) {
      runset_card_free(W, W->gpu, b);
      runset_clear(b);
    }
    return rc;
  }
  phase_add(W, HCT_WP_INPUTS, t0);
  return 0;
}

/*
 * The runs of one candidate in one allocation (a session), as an engine
 * runs it: run 0 on set 0 (the classic check); with `repeat`, run 1 on set
 * 1 (fresh inputs at the same addresses, the scratch and its "once" state
 * kept) and run 2 on set 0 again (identical inputs: a bitwise candidate must
 * give identical bits); with `producer`, run 3 on set 0 right after the
 * producer kernel, which writes the inputs and lets this launch begin
 * early.  Outputs are poisoned before every run.  With `twin`, run 4 is
 * the first run of a second, fresh allocation on set 0: identical inputs
 * and identical state, so its bits differ from run 0's only by a race
 * (run 2's may differ by state kept between runs, which is the repeat
 * check's to judge).
 */
enum { RUN_FIRST, RUN_FRESH, RUN_AGAIN, RUN_PRODUCER, RUN_TWIN, N_RUNS };
static const int run_set[N_RUNS] = {0, 1, 0, 0, 0};

/* A session's runs: their outputs on the host (out), or with `card` their
 * figures, computed on the card right after each run (figs; kept[0] and
 * kept[1] hold runs 0 and 1's outputs there when the reference's, or run 0's
 * for the twin to be compared with). */
typedef struct runs_s {
  void *out[N_RUNS][HCT_MAX_BUFFERS];
  uint8_t done[N_RUNS];
  double first_ms;
  int card;
  const hct_dptr_t *want[2];   /* per set: the outputs to equal, or NULL */
  int keep;                    /* keep runs 0 and 1 (the reference's) */
  int twin;                    /* run 4 comes: keep run 0 */
  int card_failed;             /* the figures on the card failed, not a run */
  hct_parity_figs_t figs[N_RUNS][HCT_MAX_BUFFERS];
  hct_dptr_t kept[2][HCT_MAX_BUFFERS];
} runs_t;

/* g NULL: after a sticky error, nothing on the GPU is freed. */
static void runs_free(worker_t *W, hct_gpu_t *g, runs_t *r) {
  for (int k = 0; k < N_RUNS; k++) outs_free(r->out[k]);
  for (int k = 0; g != NULL && k < 2; k++) kept_give(W, r->kept[k]);
}

/* The set's inputs on the card, or NULL where there are none (the runs
 * upload them from the host then). */
static const hct_devset_t *pristine_of(const runset_t *set) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++)
    if (set->pristine.ptr[i] != 0) return &set->pristine;
  return NULL;
}

/* A session's scratch from the pool, on hct__session_begin's terms
 * (poisoned, its "once" buffers zeroed): the twin and the next check of
 * the same candidate take the same buffers again (devpool.c). */
static int session_open(worker_t *W, const hct_cand_t *c, int T, hct_scratchset_t *s) {
  size_t bytes[4] = {0};
  memset(s, 0, sizeof *s);
  int rc = hct__scratch_sizes(c, &W->dev, T, bytes);
  for (int i = 0; rc == 0 && i < c->v->n_scratch && i < 4; i++) {
    rc = hct__devpool_take(&W->pool, W->gpu, bytes[i], &s->ptr[i]);
    s->bytes[i] = bytes[i];
  }
  return rc == 0 ? hct__session_prepare(W->gpu, c, s) : rc;
}

static void session_close(worker_t *W, hct_scratchset_t *s) {
  for (int i = 0; i < 4; i++) hct__devpool_give(&W->pool, W->gpu, s->ptr[i]);
  memset(s, 0, sizeof *s);
}

/* The comparison kernels loaded (W->pcheck_state 1), or the reason checks
 * compare on the host (W->pcheck_off): HCTUNE_CHECK_ON_HOST set (the GPU
 * test compares both paths so), or the template does not compile or load
 * here.  Compiled in the worker, once: no cache entry, about a second. */
static void pcheck_ready(worker_t *W, const hct_op_t *op) {
  if (W->pcheck_state != 0) return;
  W->pcheck_state = -1;
  const char *env = getenv("HCTUNE_CHECK_ON_HOST");
  if (env != NULL && env[0] != '\0' && strcmp(env, "0") != 0) {
    snprintf(W->pcheck_off, sizeof W->pcheck_off, "HCTUNE_CHECK_ON_HOST is set");
    return;
  }
  hct_op_t *holder = NULL;
  hct_compile_job_t job;
  int rc = hct__pcheck_job(op, W->dev.backend, W->dev.arch, &holder, &job);
  if (rc == 0) {
    hct__compile_one(&job);
    rc = job.status;
    if (rc != 0) hct__error(rc, "%s", job.error);
  }
  if (rc == 0) rc = hct__pcheck_load(W->gpu, job.image, job.image_size, &W->pcheck);
  if (rc == 0) W->pcheck_state = 1;
  else snprintf(W->pcheck_off, sizeof W->pcheck_off, "the parity check kernels: %s", hct_last_error());
  if (rc != 0) hct__log(HCT_LOG_WARN, "worker: checks compare on the host: %s", W->pcheck_off);
  hct__compile_job_clear(&job);
  free(holder);
}

/* The float64 reference of the set on the card, once a set. */
static int set_on_card(worker_t *W, runset_t *set) {
  if (set->dref_ok) return 0;
  const uint64_t t0 = hct__now_ns();
  int rc = 0;
  for (int i = 0; rc == 0 && i < set->hs.n; i++) rc = hct__pcheck_ref_upload(W->gpu, &set->hs.bufs[i], &set->dref[i]);
  set->dref_ok = rc == 0;
  phase_add(W, HCT_WP_INPUTS, t0);
  return rc;
}

/*
 * A session's runs with their figures made on the card (issue 34): every
 * run's comparisons queued right behind it, each result into a slot of its
 * own, the grid barrier's flag of each run copied beside them, and all of
 * it brought back in one copy at the end.  Only run 0 is waited for on its
 * own (its time is the check's run_ms, and a fault in it is the
 * candidate's before any comparison ran); a fault in a later run shows at
 * the end, and is the candidate's as well: a fault of the comparison
 * kernels would end the baseline's check first, which the probe makes
 * before any other on every input set.  Before, each run waited for the
 * card three to six times (its sync, each buffer's result, the flag): some
 * thirty waits a check.
 */
static int card_session(worker_t *W, const hct_cand_t *c, int repeat, int producer, int twin, runs_t *r,
                        int *timed_out_run) {
  inset_t *in = &W->in;
  hct_scratchset_t s;
  hct_pc_setplan_t sp[2];
  memset(&s, 0, sizeof s);
  memset(sp, 0, sizeof sp);
  *timed_out_run = -1;
  r->twin = twin;
  int rc = inset_device(W);
  if (rc == 0) rc = set_on_card(W, &in->set[0]);
  if (rc == 0 && repeat) rc = set_on_card(W, &in->set[1]);
  for (int k = 0; rc == 0 && k < (repeat ? 2 : 1); k++)
    rc = hct__pcheck_set_plan(&in->set[k].hs, &in->dev, in->set[k].dref, &sp[k]);
  /* The work memory grown before anything is queued on it: the partials,
   * then a slot per (run, buffer), then a flag per run. */
  const size_t partials = HCT_MAX(sp[0].partials, sp[1].partials);
  const size_t slot = sizeof(hct_pc_result_t) * HCT_MAX_BUFFERS, all = slot * N_RUNS + 8 * N_RUNS;
  if (rc == 0) rc = hct__pcheck_room(W->gpu, &W->pcheck, partials + all);
  if (rc != 0) {
    r->card_failed = !is_sticky(rc);
    return rc;
  }
  const hct_dptr_t res = W->pcheck.work + partials, flags = res + slot * N_RUNS;
  uint64_t t0 = hct__now_ns();
  rc = session_open(W, c, in->T, &s);
  phase_add(W, HCT_WP_MEMORY, t0);
  uint8_t queued[N_RUNS] = {0}, flagged[N_RUNS] = {0};
  for (int k = 0; rc == 0 && k < N_RUNS; k++) {
    if ((k == RUN_FRESH || k == RUN_AGAIN) && !repeat) continue;
    if (k == RUN_PRODUCER && !producer) continue;
    if (k == RUN_TWIN) {
      if (!twin) continue;
      t0 = hct__now_ns();
      session_close(W, &s);
      rc = session_open(W, c, in->T, &s);
      phase_add(W, HCT_WP_MEMORY, t0);
      if (rc != 0) break;
    }
    runset_t *set = &in->set[run_set[k]];
    t0 = hct__now_ns();
    rc = hct__session_enqueue(W->gpu, c, &set->hs, &in->dev, &s, k == RUN_PRODUCER ? &W->producer : NULL,
                              pristine_of(set));
    if (rc == 0 && k == RUN_FIRST) {
      rc = hct__gpu_sync(W->gpu);
      r->first_ms = (double)(hct__now_ns() - t0) / 1e6;
    }
    hct_dptr_t word;
    if (rc == 0 && c->v->grid_barrier && hct__session_barrier_word(c, &s, &word)) {
      rc = hct__gpu_copy(W->gpu, flags + 8 * (hct_dptr_t)k, word, sizeof(uint32_t));
      flagged[k] = rc == 0;
      if (rc == HCT_EUNSUPPORTED) {
        /* A driver without device copies: this run's flag waited for. */
        hct__error_clear();
        uint32_t flag = 0;
        rc = hct__gpu_download(W->gpu, &flag, word, sizeof flag);
        if (rc == 0 && flag != 0 && *timed_out_run < 0) *timed_out_run = k;
      }
    }
    phase_add(W, HCT_WP_RUNS, t0);
    if (rc != 0) break;
    /* The twin is compared bit for bit with run 0 (deterministic()). */
    const hct_dptr_t *want = k == RUN_TWIN ? r->kept[0] : r->want[run_set[k]];
    t0 = hct__now_ns();
    int crc = hct__pcheck_set_enqueue(W->gpu, &W->pcheck, &sp[run_set[k]], &set->hs, &in->dev, set->dref, want,
                                      res + slot * (hct_dptr_t)k);
    phase_add(W, HCT_WP_FIGURES, t0);
    t0 = hct__now_ns();
    const int keep = (k == RUN_FIRST && (r->keep || r->twin)) || (k == RUN_FRESH && r->keep);
    if (crc == 0 && keep) crc = kept_take(W, &set->hs, &in->dev, r->kept[k == RUN_FRESH]);
    if (crc == 0 && keep) crc = hct__pcheck_keep(W->gpu, &W->pcheck, &set->hs, &in->dev, r->kept[k == RUN_FRESH]);
    phase_add(W, HCT_WP_MEMORY, t0);
    if (crc != 0) {
      /* Named, so that a failure of the comparison kernels (which ends the
       * worker like a candidate's) is not read as the candidate's own. */
      rc = hct__error(crc, "the figures on the card after run %d: %s", k, hct_last_error());
      r->card_failed = 1;
      break;
    }
    queued[k] = 1;
  }
  /* Every result and flag back at once: the end of the session's work. */
  hct_pc_result_t *out = rc == 0 ? malloc(all) : NULL;
  if (rc == 0 && out == NULL) rc = hct__error(HCT_ENOMEM, "out of memory");
  t0 = hct__now_ns();
  if (rc == 0) rc = hct__gpu_download(W->gpu, out, res, all);
  phase_add(W, HCT_WP_RUNS, t0);
  for (int k = 0; rc == 0 && k < N_RUNS; k++) {
    if (!queued[k]) continue;
    const runset_t *set = &in->set[run_set[k]];
    const hct_dptr_t *want = k == RUN_TWIN ? r->kept[0] : r->want[run_set[k]];
    hct__pcheck_set_finish(&sp[run_set[k]], &set->hs, out + (size_t)k * HCT_MAX_BUFFERS, want, r->figs[k]);
    uint32_t flag;
    memcpy(&flag, (const char *)out + slot * N_RUNS + 8 * (size_t)k, sizeof flag);
    if (flagged[k] && flag != 0 && *timed_out_run < 0) *timed_out_run = k;
    r->done[k] = 1;
  }
  free(out);
  /* After a sticky error the context is gone: free nothing on the GPU. */
  t0 = hct__now_ns();
  if (!is_sticky(rc)) session_close(W, &s);
  phase_add(W, HCT_WP_MEMORY, t0);
  return rc;
}

static int run_session(worker_t *W, const hct_cand_t *c, int repeat, int producer, int twin,
                       runs_t *r, int *timed_out_run) {
  if (r->card) return card_session(W, c, repeat, producer, twin, r, timed_out_run);
  inset_t *in = &W->in;
  hct_scratchset_t s;
  *timed_out_run = -1;
  int rc = inset_device(W);
  r->twin = twin;
  uint64_t t0 = hct__now_ns();
  memset(&s, 0, sizeof s);
  if (rc == 0) rc = session_open(W, c, in->T, &s);
  phase_add(W, HCT_WP_MEMORY, t0);
  if (rc != 0) {
    if (!is_sticky(rc)) session_close(W, &s);
    return rc;
  }
  for (int k = 0; rc == 0 && k < N_RUNS; k++) {
    if ((k == RUN_FRESH || k == RUN_AGAIN) && !repeat) continue;
    if (k == RUN_PRODUCER && !producer) continue;
    if (k == RUN_TWIN) {
      if (!twin) continue;
      t0 = hct__now_ns();
      session_close(W, &s);
      rc = session_open(W, c, in->T, &s);
      phase_add(W, HCT_WP_MEMORY, t0);
      if (rc != 0) break;
    }
    const hct_hostset_t *hs = &in->set[run_set[k]].hs;
    if ((rc = outs_alloc(hs, r->out[k])) != 0) break;
    uint32_t flag = 0;
    t0 = hct__now_ns();
    const runset_t *set = &in->set[run_set[k]];
    rc = hct__session_run(W->gpu, c, hs, &in->dev, &s, k == RUN_PRODUCER ? &W->producer : NULL,
                          pristine_of(set),
                          r->out[k], c->v->grid_barrier ? &flag : NULL);
    if (k == RUN_FIRST) r->first_ms = (double)(hct__now_ns() - t0) / 1e6;
    phase_add(W, HCT_WP_RUNS, t0);
    r->done[k] = rc == 0;
    if (rc == 0 && flag != 0 && *timed_out_run < 0) *timed_out_run = k;
  }
  /* After a sticky error the context is gone: free nothing on the GPU. */
  t0 = hct__now_ns();
  if (!is_sticky(rc)) session_close(W, &s);
  phase_add(W, HCT_WP_MEMORY, t0);
  return rc;
}

/* The producer kernel loaded and holding set 0's inputs.  A producer that
 * does not load is no candidate's fault: the check is skipped, saying why
 * (W->producer_broken, which the probe reports), not failed; a sticky
 * error is returned. */
static int producer_ready(worker_t *W) {
  inset_t *in = &W->in;
  int rc = inset_device(W);
  if (rc != 0 || W->producer_broken[0] != '\0' || in->staged) return rc;
  if (!W->producer_loaded && (rc = hct__producer_load(W->gpu, &W->producer)) == 0)
    W->producer_loaded = 1;
  if (rc == 0 && (rc = hct__producer_stage(W->gpu, &W->producer, &in->set[0].hs, &in->dev)) == 0)
    in->staged = 1;
  if (rc != 0 && !is_sticky(rc)) {
    snprintf(W->producer_broken, sizeof W->producer_broken, "the producer kernel is not ready: %s",
             hct_last_error());
    hct__log(HCT_LOG_WARN, "worker: %s", W->producer_broken);
    rc = 0;
  }
  return rc;
}

/* The reference candidate's outputs on set 0 (and set 1 with `repeat`),
 * kept in W->in for every candidate checked on these inputs. */
static int keep_ref(worker_t *W, int id, runs_t *r, int repeat) {
  inset_t *in = &W->in;
  for (int k = 0; k < 2; k++) {
    runset_t *set = &in->set[k];
    outs_free(set->ref_out);
    kept_give(W, set->ref_dev);
    json_decref(set->ref_figs);
    set->ref_figs = NULL;
  }
  int runs[2] = {RUN_FIRST, RUN_FRESH};
  for (int k = 0; k < (repeat ? 2 : 1); k++) {
    runset_t *set = &in->set[k];
    if (r->card) {
      /* The outputs stay on the card; the figures were made there. */
      memcpy(set->ref_dev, r->kept[k], sizeof set->ref_dev);
      memset(r->kept[k], 0, sizeof r->kept[k]);
      memcpy(set->ref_f, r->figs[runs[k]], sizeof set->ref_f);
      set->ref_figs = figures_json(&set->hs, card_outs(&set->hs, &in->dev), set->ref_f);
      continue;
    }
    memcpy(set->ref_out, r->out[runs[k]], sizeof set->ref_out);
    memset(r->out[runs[k]], 0, sizeof r->out[runs[k]]);
    figures_of(&set->hs, set->ref_out, NULL, NULL, set->ref_f);
    set->ref_figs = figures_json(&set->hs, set->ref_out, set->ref_f);
  }
  in->ref_card = r->card;
  in->ref_id = id;
  in->ref_repeat = repeat;
  return 0;
}

/* Bits of run 4 (a fresh allocation) against run 0, on identical inputs:
 * 1 when identical; else 0 with the first buffer that differs and its
 * count. */
static int deterministic(const inset_t *in, runs_t *r, json_t *reply) {
  const hct_hostset_t *hs = &in->set[0].hs;
  void *const *outs = r->card ? card_outs(hs, &in->dev) : r->out[RUN_FIRST];
  for (int i = 0; i < hs->n; i++) {
    if (outs[i] == NULL || (!r->card && r->out[RUN_TWIN][i] == NULL)) continue;
    hct_parity_figs_t f;
    memset(&f, 0, sizeof f);
    if (r->card) f = r->figs[RUN_TWIN][i]; /* against run 0's kept copy */
    else hct__parity_bitwise(&hs->bufs[i], r->out[RUN_TWIN][i], r->out[RUN_FIRST][i], &f);
    if (f.mismatches == 0) continue;
    json_object_set_new(reply, "nondeterministic_buffer", json_string(hs->bufs[i].spec->name));
    json_object_set_new(reply, "nondeterministic_mismatches", json_integer((json_int_t)f.mismatches));
    json_object_set_new(reply, "nondeterministic_first", json_integer((json_int_t)f.first_mismatch));
    return 0;
  }
  return 1;
}

/* Run `run`'s figures as JSON: made on the card after the run, or on the
 * host from its outputs (against the reference candidate's, when
 * `with_ref`). */
static json_t *run_figures(worker_t *W, runs_t *r, int run, int with_ref) {
  runset_t *set = &W->in.set[run_set[run]];
  if (r->card) return figures_json(&set->hs, card_outs(&set->hs, &W->in.dev), r->figs[run]);
  return figures(&set->hs, r->out[run], with_ref ? set->ref_out : NULL, with_ref ? set->ref_f : NULL);
}

static int check_on_host(worker_t *W, json_t *req, json_t *reply);

/*
 * check: candidate `cand` at T on the inputs drawn from `seed` (pending:
 * with the optional inputs), against candidate `ref` (-1: none; the
 * figures are then against the float64 reference only, and the
 * candidate's outputs become the reference for the next checks on these
 * inputs).  "repeat": 1 adds runs 1 and 2 of the session (run_session),
 * "producer": 1 run 3 when the candidate's first launch is programmatic,
 * "twin": 1 run 4 in a second allocation (the determinism check).
 * The reply has run 0's figures as "buffers" (the reference's as
 * "ref_buffers"), the others under "more", and "deterministic".
 */
static int req_check(worker_t *W, json_t *req, json_t *reply) {
  int64_t id, ref_id, T, pending, seed, repeat, producer, twin;
  wcand_t *c, *ref = NULL;
  int rc;
  if ((rc = get_int(req, "cand", 1, 0, &id)) != 0 || (rc = get_int(req, "ref", 0, -1, &ref_id)) != 0 ||
      (rc = get_int(req, "tokens", 1, 0, &T)) != 0 || (rc = get_int(req, "pending", 0, 0, &pending)) != 0 ||
      (rc = get_int(req, "seed", 1, 0, &seed)) != 0 || (rc = get_int(req, "repeat", 0, 0, &repeat)) != 0 ||
      (rc = get_int(req, "producer", 0, 0, &producer)) != 0 ||
      (rc = get_int(req, "twin", 0, 0, &twin)) != 0)
    return rc;
  json_object_set_new(reply, "cand", json_integer(id));
  if ((rc = need_cand(W, id, &c)) != 0) return rc;
  if (ref_id >= 0 && ref_id != id && (rc = need_cand(W, ref_id, &ref)) != 0) return rc;
  if (T < 1 || T > HCT_MAX_TOKENS) return hct__error(HCT_ERANGE, "request 'check': tokens %lld", (long long)T);
  char why[256];
  if (!hct__run_supports(&c->c, &W->dev, (int)T, why, sizeof why))
    return hct__error(HCT_EUNSUPPORTED, "%s at T=%lld: %s", c->c.label, (long long)T, why);
  if ((rc = inset_get(W, c->c.op, (int)T, pending != 0, (uint64_t)seed)) != 0) return rc;
  if (repeat && (rc = inset_fresh(W)) != 0) return rc;
  inset_t *in = &W->in;

  /* The producer check applies to a candidate that may start before the
   * kernel ahead of it ends. */
  int with_producer = 0;
  if (producer) {
    if (!hct__producer_applies(&W->dev, why, sizeof why))
      json_object_set_new(reply, "producer_skipped", json_string(why));
    else if (!hct__run_first_pdl(&c->c, &W->dev, (int)T))
      json_object_set_new(reply, "producer_skipped", json_string("its first launch waits for the kernel before it"));
    else if ((rc = producer_ready(W)) != 0)
      return rc;
    else if (W->producer_broken[0] != '\0')
      json_object_set_new(reply, "producer_skipped", json_string(W->producer_broken));
    else
      with_producer = 1;
  }

  /* Figures on the card where its kernels load, else on the host. */
  pcheck_ready(W, c->c.op);
  const int card = W->pcheck_state == 1;
  if (!card) json_object_set_new(reply, "checked_on_host", json_string(W->pcheck_off));
  int timed_out;
  /* Calloc'd: five runs' figures are some 20 KB. */
  runs_t *rp = calloc(1, sizeof *rp);
  if (rp == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  rp->card = card;
  if (ref != NULL && (in->ref_id != ref->id || (repeat && !in->ref_repeat) || in->ref_card != card)) {
    /* The reference's runs on these inputs, kept for the next candidates. */
    in->ref_id = -1;
    rp->keep = 1;
    rc = run_session(W, &ref->c, (int)repeat, 0, 0, rp, &timed_out);
    if (rc == 0) rc = keep_ref(W, ref->id, rp, (int)repeat);
    const int card_failed = rp->card_failed;
    uint64_t t0 = hct__now_ns();
    runs_free(W, is_sticky(rc) ? NULL : W->gpu, rp);
    phase_add(W, HCT_WP_MEMORY, t0);
    memset(rp, 0, sizeof *rp);
    rp->card = card;
    if (rc != 0) {
      free(rp);
      if (card_failed && !is_sticky(rc)) return check_on_host(W, req, reply);
      json_object_set_new(reply, "cand", json_integer(ref->id));
      return hct__error(rc, "reference %s at T=%lld: %s", ref->c.label, (long long)T, hct_last_error());
    }
  }
  /* Without a reference this candidate becomes the next ones' (keep). */
  rp->keep = ref == NULL;
  rp->want[0] = ref ? in->set[0].ref_dev : NULL;
  rp->want[1] = ref ? in->set[1].ref_dev : NULL;
  rc = run_session(W, &c->c, (int)repeat, with_producer, twin != 0, rp, &timed_out);
  json_object_set_new(reply, "run_ms", json_real(rp->first_ms));
  if (rc == 0 && timed_out >= 0)
    rc = hct__error(HCT_ETIMEDOUT, "%s at T=%lld: a grid barrier timed out in run %d (not every block was resident)",
                    c->c.label, (long long)T, timed_out);
  if (rc == 0) {
    /* On the host path the figures are made here, from the outputs. */
    const uint64_t tf = hct__now_ns();
    json_object_set_new(reply, "buffers", run_figures(W, rp, RUN_FIRST, ref != NULL));
    if (ref != NULL) json_object_set(reply, "ref_buffers", in->set[0].ref_figs);
    json_t *more = json_array();
    static const struct {
      int run;
      const char *check;
    } later[] = {{RUN_FRESH, "repeat"}, {RUN_AGAIN, "repeat"}, {RUN_PRODUCER, "producer"}};
    for (size_t k = 0; k < HCT_ARRAY_SIZE(later); k++) {
      int run = later[k].run;
      if (!rp->done[run]) continue;
      const runset_t *set = &in->set[run_set[run]];
      json_t *o = json_pack("{s:s, s:i, s:o}", "check", later[k].check, "run", run, "buffers",
                            run_figures(W, rp, run, ref != NULL));
      if (ref != NULL) json_object_set(o, "ref_buffers", set->ref_figs);
      json_array_append_new(more, o);
    }
    json_object_set_new(reply, "more", more);
    if (rp->done[RUN_TWIN])
      json_object_set_new(reply, "deterministic", json_boolean(deterministic(in, rp, reply)));
    /* A check without a reference makes this candidate the reference of
     * the next ones on these inputs (the probe checks the baseline so). */
    if (ref == NULL) keep_ref(W, c->id, rp, (int)repeat);
    phase_add(W, HCT_WP_FIGURES, tf);
  }
  const int card_failed = rp->card_failed;
  const uint64_t tm = hct__now_ns();
  runs_free(W, is_sticky(rc) ? NULL : W->gpu, rp);
  phase_add(W, HCT_WP_MEMORY, tm);
  free(rp);
  if (rc != 0 && card_failed && !is_sticky(rc)) return check_on_host(W, req, reply);
  return rc;
}

/* The figures on the card failed without the GPU failing (out of memory for
 * the kept copies, say): no candidate's fault, so the check runs again with
 * the host's figures, as every check after it does in this worker. */
static int check_on_host(worker_t *W, json_t *req, json_t *reply) {
  snprintf(W->pcheck_off, sizeof W->pcheck_off, "the figures on the card failed: %s", hct_last_error());
  hct__log(HCT_LOG_WARN, "worker: checks compare on the host from now on: %s", W->pcheck_off);
  /* Its memory back: the reference and outputs kept on the card, the
   * kernels' work buffer (the reference candidate runs again, on the host's
   * terms, as in->ref_card no longer matches). */
  if (W->in.gpu != NULL)
    for (int k = 0; k < 2; k++) runset_card_free(W, W->in.gpu, &W->in.set[k]);
  W->in.ref_id = -1;
  hct__pcheck_unload(W->gpu, &W->pcheck);
  W->pcheck_state = -1;
  hct__error_clear();
  return req_check(W, req, reply);
}

/* ---- time ---------------------------------------------------------------- */

typedef struct timer_s {
  worker_t *W;
  hct_graph_t **graph;
  hct_event_t *start, *stop;
  int batch;
} timer_t_;

static int sample_cb(void *arg, int slot, double *us) {
  timer_t_ *tm = arg;
  hct_gpu_t *g = tm->W->gpu;
  float ms;
  int rc;
  if ((rc = hct__gpu_event_record(g, tm->start)) != 0) return rc;
  if ((rc = hct__gpu_graph_launch(g, tm->graph[slot])) != 0) return rc;
  if ((rc = hct__gpu_event_record(g, tm->stop)) != 0) return rc;
  if ((rc = hct__gpu_event_elapsed(g, tm->start, tm->stop, &ms)) != 0) return rc;
  *us = (double)ms * 1e3 / tm->batch;
  return 0;
}

static int clock_cb(void *arg, int *mhz) {
  timer_t_ *tm = arg;
  return hct__gpu_sm_clock(tm->W->gpu, mhz);
}

static int opt_num(json_t *o, const char *key, double *out) {
  json_t *v = json_object_get(o, key);
  if (v == NULL) return 0;
  if (!json_is_number(v)) return hct__error(HCT_EINVAL, "request 'time': '%s' must be a number", key);
  *out = json_number_value(v);
  return 0;
}

/* Timing options from the request: the names of hct_timing_opts_t. */
static int timing_opts(json_t *req, hct_timing_opts_t *to) {
  double max_seconds = 0.5, max_rounds = 60, min_samples = 0, target = 0, prune = 0, warmup = 0,
         seed = 1;
  int rc;
  if ((rc = opt_num(req, "max_seconds", &max_seconds)) || (rc = opt_num(req, "max_rounds", &max_rounds)) ||
      (rc = opt_num(req, "min_samples", &min_samples)) || (rc = opt_num(req, "target_rel_ci", &target)) ||
      (rc = opt_num(req, "prune_factor", &prune)) || (rc = opt_num(req, "warmup", &warmup)) ||
      (rc = opt_num(req, "timing_seed", &seed)))
    return rc;
  to->max_seconds = max_seconds;
  to->max_rounds = (int)max_rounds;
  to->min_samples = (int)min_samples;
  to->target_rel_ci = target;
  to->prune_factor = prune;
  to->warmup = (int)warmup;
  to->seed = (uint64_t)seed;
  return 0;
}

static json_t *timing_json(int id, const hct_timing_res_t *r) {
  const hct_summary_t *s = &r->s;
  json_t *j = json_pack("{s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:i, s:i, s:i, s:i, s:o}",
                        "cand", id, "samples", s->n, "median_us", hct__json_double(s->median), "min_us",
                        hct__json_double(s->min), "max_us", hct__json_double(s->max), "p10_us",
                        hct__json_double(s->p10), "p90_us", hct__json_double(s->p90), "ci_lo_us",
                        hct__json_double(s->ci_lo), "ci_hi_us", hct__json_double(s->ci_hi), "rel_ci",
                        hct__json_double(s->rel_ci), "rounds", r->rounds, "converged", r->converged,
                        "pruned", r->pruned, "throttled", r->throttled, "clock_checked",
                        r->clock_checked, "seconds", hct__json_double(r->seconds));
  if (j != NULL && r->err != 0) {
    json_object_set_new(j, "error", json_string(hct_err_name(r->err)));
    json_object_set_new(j, "message", json_string(r->errmsg));
  }
  return j;
}

/*
 * The allocation of the last 'time' request, kept for 'verify': its sets
 * (set s holding the inputs and weights rotated by rotation(s) elements, so
 * that no two sets hold the same data), each candidate's scratch (its state
 * as the timed launches left it) and graph.  Freed by the next request of
 * any other kind: 'verify' refers to the 'time' just before it.
 */
typedef struct timed_s {
  int T, n, nsets, used_sets;   /* used: the sets a graph's launches touch */
  int ids[MAX_CANDS];
  wcand_t *cs[MAX_CANDS];
  hct_hostset_t hs;             /* set 0's data; reference filled on demand */
  int ref_done;
  hct_devset_t *sets;
  hct_scratchset_t *scr;
  hct_graph_t **graphs;
  void **base_out;              /* [used_sets][HCT_MAX_BUFFERS]: the
                                   reference candidate's timed outputs */
  int base_id;                  /* whose they are, or -1 */
  /* Verified on the card (verify_card): the reference candidate's timed
   * outputs kept there, set 0's float64 reference there, and the
   * reference candidate's figures against it. */
  hct_dptr_t (*base_dev)[HCT_MAX_BUFFERS];
  hct_pcref_t dref[HCT_MAX_BUFFERS];
  int dref_ok;
  hct_parity_figs_t ref_first[HCT_MAX_BUFFERS];
  int card_off;                 /* the card's path failed: the host's */
  hct_devset_t *reuse_sets;     /* the last timing's, while taken over */
  int reuse_n;
  uint64_t seed;                /* what hs was drawn from, and how: the */
  int cold;                     /* next 'time' of the same reuses hs and */
  const hct_op_t *op;           /* the sets' memory (reuse_sets) */
} timed_t;

static void timed_free(worker_t *W, timed_t *t, int sticky) {
  if (t == NULL) return;
  if (!sticky) {
    for (int k = 0; t->graphs && k < t->n; k++)
      if (t->graphs[k]) hct__gpu_graph_destroy(W->gpu, t->graphs[k]);
    for (int k = 0; t->scr && k < t->n; k++) hct__scratch_free(W->gpu, &t->scr[k]);
    for (int s = 0; t->sets && s < t->nsets; s++) hct__devset_free(W->gpu, &t->sets[s]);
  }
  for (int s = 0; t->base_out && s < t->used_sets; s++) outs_free(t->base_out + (size_t)s * HCT_MAX_BUFFERS);
  free(t->base_out);
  for (int s = 0; !sticky && t->base_dev && s < t->used_sets; s++) kept_give(W, t->base_dev[s]);
  for (int s = 0; !sticky && t->reuse_sets && s < t->reuse_n; s++) hct__devset_free(W->gpu, &t->reuse_sets[s]);
  free(t->reuse_sets);
  for (int i = 0; !sticky && i < HCT_MAX_BUFFERS; i++) hct__pcheck_ref_free(W->gpu, &t->dref[i]);
  free(t->base_dev);
  free(t->sets);
  free(t->scr);
  free(t->graphs);
  hct__hostset_free(&t->hs);
  free(t);
}

/* How far set s's data is rotated: 0 for set 0, distinct for the others
 * (104729 is prime), so a variant that is right only on some data, or only
 * on the first buffers it saw, is wrong on some set. */
static size_t rotation(int s, size_t elems) {
  return elems > 1 ? ((size_t)s * 104729u) % elems : 0;
}

/* Uploads set s: every input and weight of hs rotated by rotation(s)
 * (set 0 as it is: hct__devset_upload), outputs poisoned. */
static int upload_rotated(hct_gpu_t *g, const hct_hostset_t *hs, hct_devset_t *d, int s) {
  if (s == 0) return hct__devset_upload(g, hs, d);
  int rc = 0;
  for (int i = 0; rc == 0 && i < hs->n; i++) {
    const hct_hbuf_t *b = &hs->bufs[i];
    if (d->ptr[i] == 0) continue;
    if (b->spec->role == HCT_BUF_OUTPUT) {
      rc = hct__dtype_size(b->spec->dtype) == 2 ? hct__gpu_fill16(g, d->ptr[i], HCT_POISON_16, b->elems)
                                                : hct__gpu_fill32(g, d->ptr[i], HCT_POISON_F32, b->elems);
      continue;
    }
    size_t esz = hct__dtype_size(b->spec->dtype), r = rotation(s, b->elems);
    const char *data = b->data;
    rc = hct__gpu_upload(g, d->ptr[i], data + r * esz, (b->elems - r) * esz);
    if (rc == 0 && r > 0) rc = hct__gpu_upload(g, d->ptr[i] + (b->elems - r) * esz, data, r * esz);
  }
  return rc;
}

int hct__time_fits(uint64_t sets_bytes, const size_t *scratch, int n, uint64_t budget) {
  uint64_t held = sets_bytes;
  int k = 0;
  while (k < n && held <= budget && scratch[k] <= budget - held) held += scratch[k++];
  return held > budget ? 0 : k;
}

/*
 * A 'time' request holds its input sets and every candidate's scratch at
 * once (the graphs are replayed interleaved, and 'verify' replays them
 * after), so more candidates than the card holds would fail half-way
 * through the allocations: at T = 32768 a set is 3.2 GB and one pair_mma
 * point's scratch 2 GB.  Refused (HCT_ENOMEM) when it does not fit in
 * HCT_TIME_MEM_SHARE of the free memory (the card's total when the driver
 * cannot say), the reply's "fits" saying how many of the first candidates
 * do; none fitting names the first.
 */
static int time_fit(worker_t *W, wcand_t **cs, int n, int T, uint64_t sets_bytes, int nsets, uint64_t held,
                    json_t *reply) {
  size_t free_b = 0, total_b = 0, scratch[MAX_CANDS];
  if (hct__gpu_mem_info(W->gpu, &free_b, &total_b) != 0) {
    hct__error_clear();
    free_b = (size_t)W->dev.mem_bytes;
  }
  /* Sets this request reuses are held already: free as far as it goes. */
  free_b += (size_t)held;
  const uint64_t budget = (uint64_t)(HCT_TIME_MEM_SHARE * (double)free_b);
  uint64_t all = sets_bytes;
  for (int k = 0; k < n; k++) {
    int rc = hct__scratch_bytes(&cs[k]->c, &W->dev, T, &scratch[k]);
    if (rc != 0) return rc;
    all += scratch[k];
  }
  int fits = hct__time_fits(sets_bytes, scratch, n, budget);
  if (fits == n) return 0;
  const double gib = 1024.0 * 1024 * 1024;
  json_object_set_new(reply, "fits", json_integer(fits));
  if (fits == 0)
    return hct__error(HCT_ENOMEM, "%s at T=%d cannot be timed on this card: its scratch (%.2f GiB) and "
                      "the %d input sets (%.2f GiB) exceed %.0f%% of the %.2f GiB free",
                      cs[0]->c.label, T, (double)scratch[0] / gib, nsets, (double)sets_bytes / gib,
                      100 * HCT_TIME_MEM_SHARE, (double)free_b / gib);
  return hct__error(HCT_ENOMEM, "request 'time' at T=%d: %d candidates need %.2f GiB (%d input sets "
                    "%.2f GiB and their scratch), over %.0f%% of the %.2f GiB free; the first %d fit",
                    T, n, (double)all / gib, nsets, (double)sets_bytes / gib, 100 * HCT_TIME_MEM_SHARE,
                    (double)free_b / gib, fits);
}

/* The arguments of a 'time' request, checked: the candidates (loaded), T,
 * seed, batch (the manifest's at T by default) and cold (the manifest's
 * mode by default), and the timing options (timing_opts). */
typedef struct time_req_s {
  wcand_t *cs[MAX_CANDS];
  int n;
  int64_t T, seed, batch, cold;
  hct_timing_opts_t to;
} time_req_t;

static int time_args(worker_t *W, json_t *req, time_req_t *q) {
  int rc;
  json_t *ids = json_object_get(req, "cands");
  if (!json_is_array(ids) || json_array_size(ids) == 0 || json_array_size(ids) > MAX_CANDS)
    return hct__error(HCT_EINVAL, "request 'time': 'cands' must be a non-empty array of ids");
  q->n = (int)json_array_size(ids);
  for (int k = 0; k < q->n; k++)
    if ((rc = need_cand(W, json_integer_value(json_array_get(ids, (size_t)k)), &q->cs[k])) != 0) return rc;
  const hct_op_t *op = q->cs[0]->c.op;
  if ((rc = get_int(req, "tokens", 1, 0, &q->T)) != 0 || (rc = get_int(req, "seed", 1, 0, &q->seed)) != 0)
    return rc;
  /* No "batch": the manifest's, at this T. */
  int dflt_batch = hct__op_batch(op, (int)q->T);
  if (dflt_batch < 0 && json_object_get(req, "batch") == NULL) return dflt_batch;
  if ((rc = get_int(req, "batch", 0, dflt_batch, &q->batch)) != 0 ||
      (rc = get_int(req, "cold", 0, op->timing_cold, &q->cold)) != 0)
    return rc;
  if (q->batch < 1 || q->batch > HCT_MAX_BATCH)
    return hct__error(HCT_ERANGE, "request 'time': batch %lld", (long long)q->batch);
  memset(&q->to, 0, sizeof q->to);
  return timing_opts(req, &q->to);
}

/*
 * "no_prune" (ids of candidates that stay timed however slow: the
 * incumbent the others are compared with) and "ranks" (one per id of
 * "cands", in order; tuner/stats.h: who may prune whom) into q->to, over
 * the caller's arrays of MAX_CANDS.
 */
static int time_pruning(json_t *req, time_req_t *q, uint8_t *no_prune, uint8_t *ranks) {
  const int n = q->n;
  json_t *np = json_object_get(req, "no_prune");
  for (size_t j = 0; j < json_array_size(np); j++)
    for (int k = 0; k < n; k++)
      if (json_integer_value(json_array_get(np, j)) == q->cs[k]->id) no_prune[k] = 1;
  q->to.no_prune = no_prune;
  json_t *rk = json_object_get(req, "ranks");
  if (rk == NULL) return 0;
  if (!json_is_array(rk) || json_array_size(rk) != (size_t)n)
    return hct__error(HCT_EINVAL, "request 'time': 'ranks' must be an array of %d integers", n);
  for (int k = 0; k < n; k++) {
    json_t *v = json_array_get(rk, (size_t)k);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 255)
      return hct__error(HCT_EINVAL, "request 'time': ranks[%d] must be an integer in 0..255", k);
    ranks[k] = (uint8_t)json_integer_value(v);
  }
  q->to.rank = ranks;
  return 0;
}

/* The timing's host set, drawn from the seed, and how many rotating device
 * sets it needs (cold: over 4x the L2 in all), once the card is known to
 * hold them and every candidate's scratch (time_fit).  *set_bytes gets one
 * set's size. */
static int time_inputs(worker_t *W, const time_req_t *q, timed_t *tt, size_t *set_bytes, uint64_t held,
                       json_t *reply) {
  hct_hostset_t *hsp = &tt->hs;
  const int reused = hsp->n > 0;
  int rc = reused ? 0 : hct__hostset_init(hsp, q->cs[0]->c.op, (int)q->T, 0);
  if (rc != 0) return rc;
  *set_bytes = 0;
  for (int i = 0; i < hsp->n; i++)
    if (hsp->bufs[i].data) *set_bytes += hsp->bufs[i].elems * hct__dtype_size(hsp->bufs[i].spec->dtype);
  int nsets = 1;
  if (q->cold && *set_bytes > 0)
    nsets = (int)HCT_MIN(64, HCT_MAX(2, (4 * W->dev.l2_bytes + (int64_t)*set_bytes - 1) / (int64_t)*set_bytes + 1));
  tt->nsets = nsets;
  tt->used_sets = (int)HCT_MIN(nsets, q->batch);
  /* Before drawing gigabytes of inputs: whether the card holds it all. */
  rc = time_fit(W, (wcand_t **)q->cs, q->n, (int)q->T, (uint64_t)*set_bytes * (uint64_t)nsets, nsets, held,
                reply);
  return rc != 0 || reused ? rc : hct__inputs_fill(hsp, (uint64_t)q->seed);
}

/* 1 when d holds device memory (a set reused from the last timing). */
static int devset_held(const hct_devset_t *d) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++)
    if (d->ptr[i] != 0) return 1;
  return 0;
}

/* The device sets uploaded (rotated), and each candidate's batch of
 * launches over them captured into one graph (tt->graphs); a candidate
 * whose capture fails is named in the reply's "cand". */
static int time_capture(worker_t *W, const time_req_t *q, timed_t *tt, json_t *reply) {
  int rc;
  /* Reused sets are uploaded again: the last timing's launches changed
   * what the inouts hold, and every timing starts from the drawn data. */
  for (int s = 0; s < tt->nsets; s++)
    if ((!devset_held(&tt->sets[s]) && (rc = hct__devset_alloc(W->gpu, &tt->hs, &tt->sets[s])) != 0) ||
        (rc = upload_rotated(W->gpu, &tt->hs, &tt->sets[s], s)) != 0)
      return rc;
  for (int k = 0; k < q->n; k++) {
    const hct_cand_t *c = &q->cs[k]->c;
    json_object_set_new(reply, "cand", json_integer(q->cs[k]->id));
    if ((rc = hct__scratch_alloc(W->gpu, c, (int)q->T, &tt->scr[k])) != 0) return rc;
    if ((rc = hct__gpu_capture_begin(W->gpu)) != 0) return rc;
    for (int b = 0; b < q->batch && rc == 0; b++)
      rc = hct__run_enqueue(W->gpu, c, &tt->hs, &tt->sets[b % tt->nsets], &tt->scr[k]);
    hct_graph_t *gr = NULL;
    int rc2 = hct__gpu_capture_end(W->gpu, &gr);
    if (rc == 0) rc = rc2;
    if (rc != 0) return rc;
    tt->graphs[k] = gr;
  }
  json_object_del(reply, "cand");
  return 0;
}

/* The reply of a timing that ran: every candidate's figures, the sets;
 * the first candidate with a sticky error named ("cand") and its error
 * returned. */
static int time_reply(const time_req_t *q, const timed_t *tt, size_t set_bytes,
                      const hct_timing_res_t *res, json_t *reply) {
  int rc = 0;
  json_t *arr = json_array();
  for (int k = 0; k < q->n; k++) {
    json_array_append_new(arr, timing_json(q->cs[k]->id, &res[k]));
    if (rc == 0 && is_sticky(res[k].err)) {
      json_object_set_new(reply, "cand", json_integer(q->cs[k]->id));
      rc = hct__error(res[k].err, "%s: timing at T=%lld: %s", q->cs[k]->c.label, (long long)q->T,
                      res[k].errmsg);
    }
  }
  json_object_set_new(reply, "results", arr);
  json_object_set_new(reply, "sets", json_integer(tt->nsets));
  json_object_set_new(reply, "set_bytes", json_integer((json_int_t)set_bytes));
  json_object_set_new(reply, "batch", json_integer(q->batch));
  return rc;
}

/*
 * Times candidates at T, interleaved (tuner/timing.c): each one's batch of
 * launches captured into a graph over rotating buffer sets (cold: their
 * total is over 4x the L2), replayed in rounds.  A sticky error of one
 * candidate ends the worker; its id is in the reply's "cand".
 */
/*
 * The last timing's drawn inputs and its sets' memory, taken over by a
 * timing of the same op, T, seed and mode (issue 34: the probe times a
 * count's search rounds, its deciding pass and its other mode on one seed;
 * at T = 32768 each drew 1.3 GB of inputs again): the host set kept, the
 * device sets kept to be uploaded again; the rest given back.
 */
static void reuse_sets(worker_t *W, timed_t *prev, const time_req_t *q, timed_t *tt, uint64_t *held) {
  *held = 0;
  if (prev == NULL || prev->op != q->cs[0]->c.op || prev->T != (int)q->T || prev->seed != (uint64_t)q->seed ||
      prev->cold != (int)q->cold || prev->hs.n == 0)
    return;
  tt->hs = prev->hs;
  memset(&prev->hs, 0, sizeof prev->hs);
  tt->reuse_sets = prev->sets;
  tt->reuse_n = prev->nsets;
  for (int s = 0; s < prev->nsets; s++)
    for (int i = 0; i < HCT_MAX_BUFFERS; i++) *held += prev->sets[s].bytes[i];
  prev->sets = NULL;
  prev->nsets = 0;
}

static int req_time(worker_t *W, json_t *req, json_t *reply) {
  time_req_t q;
  timed_t *prev = W->timed;
  W->timed = NULL;
  int rc = time_args(W, req, &q);
  if (rc != 0) {
    timed_free(W, prev, 0);
    return rc;
  }
  const int n = q.n;
  timed_t *tt = calloc(1, sizeof *tt);
  if (tt == NULL) {
    timed_free(W, prev, 0);
    return hct__error(HCT_ENOMEM, "out of memory");
  }
  tt->T = (int)q.T;
  tt->n = n;
  tt->base_id = -1;
  tt->seed = (uint64_t)q.seed;
  tt->cold = (int)q.cold;
  tt->op = q.cs[0]->c.op;
  for (int k = 0; k < n; k++) {
    tt->cs[k] = q.cs[k];
    tt->ids[k] = q.cs[k]->id;
  }
  uint64_t held = 0;
  reuse_sets(W, prev, &q, tt, &held);
  timed_free(W, prev, 0);
  hct__devpool_flush(&W->pool, W->gpu); /* its kept outputs too: the timing's memory */
  size_t set_bytes = 0;
  const uint64_t t0 = hct__now_ns();
  if ((rc = time_inputs(W, &q, tt, &set_bytes, held, reply)) != 0) {
    timed_free(W, tt, 0);
    return rc;
  }
  phase_add(W, HCT_WP_INPUTS, t0);
  tt->sets = calloc((size_t)tt->nsets, sizeof *tt->sets);
  /* Reused sets' memory, as many as this timing needs (the same count:
   * the same op, T and mode); any left over given back. */
  for (int s = 0; tt->sets != NULL && s < tt->reuse_n; s++) {
    if (s < tt->nsets) tt->sets[s] = tt->reuse_sets[s];
    else hct__devset_free(W->gpu, &tt->reuse_sets[s]);
  }
  free(tt->reuse_sets);
  tt->reuse_sets = NULL;
  tt->reuse_n = 0;
  tt->scr = calloc((size_t)n, sizeof *tt->scr);
  tt->graphs = calloc((size_t)n, sizeof *tt->graphs);
  hct_timing_res_t *res = calloc((size_t)n, sizeof *res);
  int have_res = 0;
  timer_t_ tm = {W, tt->graphs, NULL, NULL, (int)q.batch};
  uint8_t no_prune[MAX_CANDS] = {0}, ranks[MAX_CANDS] = {0};
  if (!tt->sets || !tt->scr || !tt->graphs || !res) rc = hct__error(HCT_ENOMEM, "out of memory");
  if (rc == 0) rc = time_capture(W, &q, tt, reply);
  if (rc == 0 && (rc = hct__gpu_event_create(W->gpu, &tm.start)) == 0)
    rc = hct__gpu_event_create(W->gpu, &tm.stop);
  if (rc == 0) rc = time_pruning(req, &q, no_prune, ranks);
  if (rc == 0) {
    q.to.sample = sample_cb;
    q.to.arg = &tm;
    q.to.max_clock_mhz = W->dev.clock_khz / 1000;
    int mhz;
    if (q.to.max_clock_mhz > 0 && hct__gpu_sm_clock(W->gpu, &mhz) == 0) q.to.sm_clock = clock_cb;
    rc = hct__timing_run(n, &q.to, res);
    have_res = rc >= 0;
    rc = rc < 0 ? rc : time_reply(&q, tt, set_bytes, res, reply);
  }
  /* After a sticky error the context is gone: free nothing on the GPU. */
  if (!is_sticky(rc)) {
    if (tm.start) hct__gpu_event_destroy(W->gpu, tm.start);
    if (tm.stop) hct__gpu_event_destroy(W->gpu, tm.stop);
  }
  if (have_res) hct__timing_res_free(res, n);
  free(res);
  /* Kept for 'verify' when the timing went through. */
  if (rc == 0) W->timed = tt;
  else timed_free(W, tt, is_sticky(rc));
  return rc;
}

/* What the outputs hold before a replay: poison for the reference (so an
 * element it leaves unwritten shows), and for a candidate a finite value,
 * 1.0, as an engine's buffers hold finite values from the last call: a
 * variant that skips work when its outputs do not hold the poison keeps
 * the 1.0s and differs from the reference. */
static int prefill(worker_t *W, timed_t *t, int s, int i, int stale) {
  const hct_hbuf_t *b = &t->hs.bufs[i];
  hct_dptr_t p = t->sets[s].ptr[i];
  if (hct__dtype_size(b->spec->dtype) == 2)
    return hct__gpu_fill16(W->gpu, p, !stale ? HCT_POISON_16 : b->spec->dtype == HCT_DT_BF16 ? 0x3f80 : 0x3c00,
                           b->elems);
  return hct__gpu_fill32(W->gpu, p, stale ? 0x3f800000u : HCT_POISON_F32, b->elems);
}

/* The outputs of candidate k's timed launches: its graph replayed once
 * more (the same launches on the same sets and scratch), outputs prefilled
 * first (poison, or with `stale` 1.0), every used set's outputs downloaded
 * into out[set][buffer]. */
static int replay_launch(worker_t *W, timed_t *t, int k, int stale) {
  int rc = 0;
  for (int s = 0; rc == 0 && s < t->used_sets; s++)
    for (int i = 0; rc == 0 && i < t->hs.n; i++)
      if (t->sets[s].ptr[i] && t->hs.bufs[i].spec->role == HCT_BUF_OUTPUT)
        rc = prefill(W, t, s, i, stale);
  return rc == 0 ? hct__gpu_graph_launch(W->gpu, t->graphs[k]) : rc;
}

static int replay(worker_t *W, timed_t *t, int k, int stale, void **out) {
  int rc = replay_launch(W, t, k, stale);
  if (rc == 0) rc = hct__gpu_sync(W->gpu);
  for (int s = 0; rc == 0 && s < t->used_sets; s++) {
    void **o = out + (size_t)s * HCT_MAX_BUFFERS;
    if ((rc = outs_alloc(&t->hs, o)) != 0) break;
    for (int i = 0; rc == 0 && i < t->hs.n; i++)
      if (o[i] != NULL && t->sets[s].ptr[i])
        rc = hct__gpu_download(W->gpu, o[i], t->sets[s].ptr[i], t->sets[s].bytes[i]);
  }
  return rc;
}

/* Buffers of hs that a check compares (outputs and inouts) of dtype f32:
 * the ones hct__parity_distance measures. */
static int is_f32_out(const hct_hbuf_t *b) {
  return (b->spec->role == HCT_BUF_OUTPUT || b->spec->role == HCT_BUF_INOUT) && b->spec->dtype == HCT_DT_F32;
}

/*
 * verify on the card (issue 34): what req_verify's host path computes from
 * every used set's outputs downloaded (gigabytes a candidate at T = 32768),
 * computed where they lie: the reference candidate's timed outputs kept
 * there (hct__pcheck_keep) and its figures against the float64 reference
 * on set 0; then per candidate, its graph replayed, and on every used set
 * its outputs against the reference candidate's (bits, poison, non-finite,
 * images: hct_pc_elems; the normwise distance of each f32 output:
 * hct_pc_dist), and on set 0 against the float64 reference, each result
 * into a slot of its own, one copy back a candidate.  The reply is the host
 * path's, field for field.
 */
static int verify_card(worker_t *W, timed_t *t, json_t *ids, int64_t ref_id, int kref, json_t *reply) {
  hct_gpu_t *g = W->gpu;
  int rc = 0;
  if (!t->dref_ok) {
    for (int i = 0; rc == 0 && i < t->hs.n; i++) rc = hct__pcheck_ref_upload(g, &t->hs.bufs[i], &t->dref[i]);
    if (rc != 0) return rc;
    t->dref_ok = 1;
  }
  /* The sets' comparisons without the float64 reference (it is set 0's
   * alone): a view of the host set without it. */
  hct_hostset_t plain = t->hs;
  for (int i = 0; i < plain.n; i++) {
    plain.bufs[i].ref = NULL;
    plain.bufs[i].ref_p = NULL;
    plain.bufs[i].rows = NULL;
  }
  static const hct_pcref_t none[HCT_MAX_BUFFERS];
  hct_pc_setplan_t sp_plain, sp_ref;
  if ((rc = hct__pcheck_set_plan(&plain, &t->sets[0], none, &sp_plain)) != 0 ||
      (rc = hct__pcheck_set_plan(&t->hs, &t->sets[0], t->dref, &sp_ref)) != 0)
    return rc;
  int f32[HCT_MAX_BUFFERS], nf = 0;
  size_t partials = HCT_MAX(sp_plain.partials, sp_ref.partials);
  for (int i = 0; i < t->hs.n; i++)
    if (t->sets[0].ptr[i] && is_f32_out(&t->hs.bufs[i])) {
      f32[nf++] = i;
      partials = HCT_MAX(partials, (hct__pc_dist_work_bytes(t->hs.bufs[i].elems) + 7) & ~(size_t)7);
    }
  /* The slots: per used set the buffers' comparisons then the distances;
   * then set 0's figures against the float64 reference. */
  const int per_set = sp_plain.n + nf, nslots = t->used_sets * per_set + sp_ref.n;
  const size_t rsz = sizeof(hct_pc_result_t);
  if ((rc = hct__pcheck_room(g, &W->pcheck, partials + (size_t)nslots * rsz)) != 0) return rc;
  const hct_dptr_t res = W->pcheck.work + partials;
  hct_pc_result_t *r = calloc((size_t)nslots, rsz);
  if (r == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  if (t->base_dev == NULL && (t->base_dev = calloc((size_t)t->used_sets, sizeof *t->base_dev)) == NULL) {
    free(r);
    return hct__error(HCT_ENOMEM, "out of memory");
  }
  const hct_dptr_t first = res + (hct_dptr_t)((size_t)t->used_sets * per_set * rsz);
  if (t->base_id != ref_id) {
    /* The reference candidate's timed outputs, kept on the card, and its
     * figures against the float64 reference on set 0. */
    t->base_id = -1;
    json_object_set_new(reply, "cand", json_integer(ref_id));
    uint64_t t0 = hct__now_ns();
    rc = replay_launch(W, t, kref, 0);
    for (int s = 0; rc == 0 && s < t->used_sets; s++) {
      kept_give(W, t->base_dev[s]);
      rc = kept_take(W, &t->hs, &t->sets[s], t->base_dev[s]);
      if (rc == 0) rc = hct__pcheck_keep(g, &W->pcheck, &t->hs, &t->sets[s], t->base_dev[s]);
    }
    if (rc == 0) rc = hct__pcheck_set_enqueue(g, &W->pcheck, &sp_ref, &t->hs, &t->sets[0], t->dref, NULL, first);
    if (rc == 0) rc = hct__gpu_download(g, r, first, (size_t)sp_ref.n * rsz);
    if (rc == 0) hct__pcheck_set_finish(&sp_ref, &t->hs, r, NULL, t->ref_first);
    phase_add(W, HCT_WP_RUNS, t0);
    if (rc != 0) {
      free(r);
      return rc;
    }
    t->base_id = (int)ref_id;
  }
  json_t *results = json_array();
  for (size_t j = 0; rc == 0 && j < json_array_size(ids); j++) {
    int id = (int)json_integer_value(json_array_get(ids, j)), k = -1;
    for (int q = 0; q < t->n; q++)
      if (t->ids[q] == id) k = q;
    if (k < 0) {
      rc = hct__error(HCT_ENOENT, "request 'verify': candidate %d was not timed", id);
      break;
    }
    json_object_set_new(reply, "cand", json_integer(id));
    uint64_t t0 = hct__now_ns();
    rc = replay_launch(W, t, k, 1);
    for (int s = 0; rc == 0 && s < t->used_sets; s++) {
      const hct_dptr_t slot = res + (hct_dptr_t)((size_t)s * per_set * rsz);
      rc = hct__pcheck_set_enqueue(g, &W->pcheck, &sp_plain, &plain, &t->sets[s], none, t->base_dev[s], slot);
      for (int q = 0; rc == 0 && q < nf; q++) {
        hct_pc_launch_t L[2];
        const int i = f32[q];
        const int nl = hct__pc_dist_launches(t->hs.bufs[i].elems, t->sets[s].ptr[i], t->base_dev[s][i],
                                             W->pcheck.work, slot + (hct_dptr_t)((size_t)(sp_plain.n + q) * rsz), L);
        for (int l = 0; rc == 0 && l < nl; l++)
          rc = hct__gpu_launch(g, W->pcheck.fn[L[l].kernel], L[l].grid, L[l].block, 0, L[l].args);
      }
    }
    if (rc == 0) rc = hct__pcheck_set_enqueue(g, &W->pcheck, &sp_ref, &t->hs, &t->sets[0], t->dref, NULL, first);
    if (rc == 0) rc = hct__gpu_download(g, r, res, (size_t)nslots * rsz); /* waits for the replay too */
    phase_add(W, HCT_WP_RUNS, t0);
    if (rc != 0) break;
    /* The host path's figures and worst set, from the results. */
    t0 = hct__now_ns();
    size_t mism = 0, unwr = 0, nonfin = 0, img = 0;
    double dist = 0;
    int worst = -1, worst_bad = 0;
    const char *worst_buf = "";
    for (int s = 0; s < t->used_sets; s++) {
      hct_parity_figs_t f[HCT_MAX_BUFFERS];
      double di[HCT_MAX_BUFFERS] = {0};
      hct__pcheck_set_finish(&sp_plain, &plain, r + (size_t)s * per_set, t->base_dev[s], f);
      for (int q = 0; q < nf; q++) di[f32[q]] = hct__pc_distance_of(&r[(size_t)s * per_set + sp_plain.n + q]);
      for (int q = 0; q < sp_plain.n; q++) {
        const int i = sp_plain.which[q];
        size_t bad = f[i].mismatches + f[i].unwritten + f[i].nonfinite + f[i].image_mismatches;
        /* The first set with a wrong element, else the farthest one. */
        if ((bad > 0 && (worst < 0 || !worst_bad)) || (!worst_bad && di[i] > dist)) {
          worst = s;
          worst_buf = t->hs.bufs[i].spec->name;
          worst_bad = bad > 0;
        }
        mism += f[i].mismatches;
        unwr += f[i].unwritten;
        nonfin += f[i].nonfinite;
        img += f[i].image_mismatches;
        dist = fmax(dist, di[i]);
      }
    }
    hct_parity_figs_t ff[HCT_MAX_BUFFERS];
    hct__pcheck_set_finish(&sp_ref, &t->hs, r + (size_t)t->used_sets * per_set, NULL, ff);
    json_t *o = json_pack("{s:i, s:i, s:I, s:I, s:I, s:I, s:o, s:i, s:s}", "cand", id, "sets", t->used_sets,
                          "mismatches", (json_int_t)mism, "unwritten", (json_int_t)unwr, "nonfinite",
                          (json_int_t)nonfin, "image_mismatches", (json_int_t)img, "max_dist",
                          hct__json_double(dist), "worst_set", worst, "worst_buffer", worst_buf);
    void **marks = card_outs(&t->hs, &t->sets[0]);
    json_object_set_new(o, "first", figures_json(&t->hs, marks, ff));
    json_object_set_new(o, "ref_first", figures_json(&t->hs, marks, t->ref_first));
    json_array_append_new(results, o);
    phase_add(W, HCT_WP_FIGURES, t0);
  }
  free(r);
  if (rc == 0) json_object_del(reply, "cand");
  json_object_set_new(reply, "results", results);
  return rc;
}

/*
 * verify: the outputs of the launches each candidate made while being
 * timed (the last 'time' request), against the reference candidate's
 * timed outputs on the same sets: bits, poison (unwritten), non-finite
 * values, exact 16-bit images and the normwise distance, worst over the
 * used sets; and on set 0 (whose data the host has) the figures against
 * the float64 reference, candidate's and reference's, for the kl rules.
 */
static int req_verify(worker_t *W, json_t *req, json_t *reply) {
  timed_t *t = W->timed;
  int64_t ref_id;
  int rc;
  if ((rc = get_int(req, "ref", 1, 0, &ref_id)) != 0) return rc;
  json_t *ids = json_object_get(req, "cands");
  if (t == NULL) return hct__error(HCT_ENOENT, "request 'verify': no 'time' request just before it");
  if (!json_is_array(ids)) return hct__error(HCT_EINVAL, "request 'verify': 'cands' must be an array of ids");
  int kref = -1;
  for (int k = 0; k < t->n; k++)
    if (t->ids[k] == ref_id) kref = k;
  if (kref < 0) return hct__error(HCT_ENOENT, "request 'verify': reference %lld was not timed", (long long)ref_id);
  if (!t->ref_done) {
    /* On set 0 (its data is the host's), before any replay below. */
    const uint64_t t0 = hct__now_ns();
    const hct_cand_t *refc = NULL;
    if ((rc = op_reference(W, t->hs.op, &refc)) != 0 ||
        (rc = hct__reference_run(W->gpu, refc, &t->hs, &t->sets[0], 0)) != 0 ||
        (rc = hct__parity_prepare(&t->hs)) != 0)
      return rc;
    t->ref_done = 1;
    phase_add(W, HCT_WP_INPUTS, t0);
  }
  /* On the card where its kernels are: one small copy a candidate instead
   * of its every used set's outputs (issue 34); the host's path where
   * they are not, or where the card's failed without the GPU failing. */
  pcheck_ready(W, t->hs.op);
  if (W->pcheck_state == 1 && !t->card_off) {
    rc = verify_card(W, t, ids, ref_id, kref, reply);
    if (rc == 0 || is_sticky(rc)) return rc;
    hct__log(HCT_LOG_WARN, "worker: the timed outputs are verified on the host: %s", hct_last_error());
    hct__error_clear();
    t->card_off = 1;
    t->base_id = -1;
    json_object_del(reply, "results");
  }
  if (t->base_id != ref_id) {
    if (t->base_out == NULL && (t->base_out = calloc((size_t)t->used_sets * HCT_MAX_BUFFERS, sizeof *t->base_out)) == NULL)
      return hct__error(HCT_ENOMEM, "out of memory");
    for (int s = 0; s < t->used_sets; s++) outs_free(t->base_out + (size_t)s * HCT_MAX_BUFFERS);
    json_object_set_new(reply, "cand", json_integer(ref_id));
    const uint64_t t0 = hct__now_ns();
    if ((rc = replay(W, t, kref, 0, t->base_out)) != 0) return rc;
    phase_add(W, HCT_WP_RUNS, t0);
    t->base_id = (int)ref_id;
  }
  void **out = calloc((size_t)t->used_sets * HCT_MAX_BUFFERS, sizeof *out);
  if (out == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  json_t *results = json_array();
  for (size_t j = 0; rc == 0 && j < json_array_size(ids); j++) {
    int id = (int)json_integer_value(json_array_get(ids, j)), k = -1;
    for (int q = 0; q < t->n; q++)
      if (t->ids[q] == id) k = q;
    if (k < 0) {
      rc = hct__error(HCT_ENOENT, "request 'verify': candidate %d was not timed", id);
      break;
    }
    json_object_set_new(reply, "cand", json_integer(id));
    uint64_t t0 = hct__now_ns();
    if ((rc = replay(W, t, k, 1, out)) != 0) break;
    phase_add(W, HCT_WP_RUNS, t0);
    t0 = hct__now_ns();
    size_t mism = 0, unwr = 0, nonfin = 0, img = 0;
    double dist = 0;
    int worst = -1, worst_bad = 0;
    const char *worst_buf = "";
    for (int s = 0; s < t->used_sets; s++) {
      void **o = out + (size_t)s * HCT_MAX_BUFFERS, **b = t->base_out + (size_t)s * HCT_MAX_BUFFERS;
      hct_parity_figs_t f[HCT_MAX_BUFFERS];
      memset(f, 0, sizeof f);
      for (int i = 0; i < t->hs.n; i++) {
        if (o[i] == NULL) continue;
        hct__parity_bitwise(&t->hs.bufs[i], o[i], b[i], &f[i]);
        /* Not the float64 comparison (the host has set 0's reference
         * only): the one figure of it verify needs on every set. */
        f[i].nonfinite = hct__parity_nonfinite(&t->hs.bufs[i], o[i]);
      }
      hct__parity_images(&t->hs, o, f);
      for (int i = 0; i < t->hs.n; i++) {
        if (o[i] == NULL) continue;
        double di = hct__parity_distance(&t->hs.bufs[i], o[i], b[i]);
        size_t bad = f[i].mismatches + f[i].unwritten + f[i].nonfinite + f[i].image_mismatches;
        /* The first set with a wrong element, else the farthest one. */
        if ((bad > 0 && (worst < 0 || !worst_bad)) || (!worst_bad && di > dist)) {
          worst = s;
          worst_buf = t->hs.bufs[i].spec->name;
          worst_bad = bad > 0;
        }
        mism += f[i].mismatches;
        unwr += f[i].unwritten;
        nonfin += f[i].nonfinite;
        img += f[i].image_mismatches;
        dist = fmax(dist, di);
      }
    }
    json_t *o = json_pack("{s:i, s:i, s:I, s:I, s:I, s:I, s:o, s:i, s:s}", "cand", id, "sets",
                          t->used_sets, "mismatches", (json_int_t)mism, "unwritten", (json_int_t)unwr,
                          "nonfinite", (json_int_t)nonfin, "image_mismatches", (json_int_t)img,
                          "max_dist", hct__json_double(dist), "worst_set", worst, "worst_buffer",
                          worst_buf);
    json_object_set_new(o, "first", figures(&t->hs, out, NULL, NULL));
    json_object_set_new(o, "ref_first", figures(&t->hs, t->base_out, NULL, NULL));
    json_array_append_new(results, o);
    for (int s = 0; s < t->used_sets; s++) outs_free(out + (size_t)s * HCT_MAX_BUFFERS);
    phase_add(W, HCT_WP_FIGURES, t0);
  }
  free(out);
  if (rc == 0) json_object_del(reply, "cand");
  json_object_set_new(reply, "results", results);
  return rc;
}

/* copy_bw: the card's copy rate (tuner/copy_bw.c), measured here where a
 * context is open and the card idle: the probe opens no card of its own
 * for it after its worker exits (issue 34). */
static int req_copy_bw(worker_t *W, json_t *req, json_t *reply) {
  inset_clear(W);
  hct__devpool_flush(&W->pool, W->gpu);
  double bw = 0;
  int rc = hct__copy_bw_on(W->gpu, &bw);
  if (rc == 0) json_object_set_new(reply, "bytes_per_s", hct__json_double(bw));
  return rc;
}

static int req_quit(worker_t *W, json_t *req, json_t *reply) {
  W->quit = 1;
  return 0;
}

/* ---- the loop --------------------------------------------------------------- */

enum { NEED_GPU = 1 };

static const struct {
  const char *cmd;
  int (*fn)(worker_t *W, json_t *req, json_t *reply);
  int flags;
} requests[] = {
    {"hello", req_hello, 0},          {"open", req_open, 0},
    {"load", req_load, NEED_GPU},     {"unload", req_unload, NEED_GPU},
    {"reference", req_reference, NEED_GPU},
    {"check", req_check, NEED_GPU},   {"time", req_time, NEED_GPU},
    {"verify", req_verify, NEED_GPU},
    {"copy_bw", req_copy_bw, NEED_GPU},
    {"quit", req_quit, 0},
};

/* The request's phases into its reply ("phase_ms", worker.h), when it
 * spent time in any. */
static void phase_reply(worker_t *W, json_t *reply) {
  json_t *ph = NULL;
  for (int k = 0; k < HCT_WP_N; k++) {
    if (!(W->phase[k] > 0)) continue;
    if (ph == NULL) ph = json_object();
    json_object_set_new(ph, hct__worker_phase_names[k], json_real(W->phase[k]));
  }
  if (ph != NULL) json_object_set_new(reply, "phase_ms", ph);
}

/* Answers one request line; returns 1 when the worker must exit after a
 * fatal error, 0 otherwise. */
static int serve_line(worker_t *W, const char *line) {
  json_error_t jerr;
  json_t *req = json_loads(line, 0, &jerr);
  json_t *reply = json_object();
  json_t *id = req ? json_object_get(req, "id") : NULL;
  json_object_set(reply, "id", id ? id : json_null());
  int rc;
  const char *cmd = req ? json_string_value(json_object_get(req, "cmd")) : NULL;
  if (req == NULL || !json_is_object(req)) {
    rc = hct__error(HCT_EPROTO, "request is not a JSON object: %s", req ? "other type" : jerr.text);
  } else if (cmd == NULL) {
    rc = hct__error(HCT_EINVAL, "request has no 'cmd'");
  } else {
    rc = hct__error(HCT_EINVAL, "'%s' is not a worker command", cmd);
    for (size_t i = 0; i < HCT_ARRAY_SIZE(requests); i++) {
      if (strcmp(requests[i].cmd, cmd) != 0) continue;
      hct__error_clear();
      /* 'verify' refers to the 'time' just before it; anything else
       * gives that allocation back. */
      if (requests[i].fn != req_verify && requests[i].fn != req_time && W->timed != NULL) {
        /* (A 'time' takes over what it can reuse, reuse_sets.) */
        timed_free(W, W->timed, 0);
        W->timed = NULL;
      }
      memset(W->phase, 0, sizeof W->phase);
      if (requests[i].fn == req_time && W->gpu != NULL) {
        /* A timing takes the card's memory by what is free (time_fit):
         * the checks' input set (never used after a timing: the probe's
         * next check draws another) and the pool's idle buffers go back. */
        inset_clear(W);
        hct__devpool_flush(&W->pool, W->gpu);
      }
      if ((requests[i].flags & NEED_GPU) && W->gpu == NULL)
        rc = hct__error(HCT_EINVAL, "'%s' needs 'open' first", cmd);
      else
        rc = requests[i].fn(W, req, reply);
      phase_reply(W, reply);
      break;
    }
  }
  int fatal = is_sticky(rc);
  json_object_set_new(reply, "ok", json_boolean(rc == 0));
  if (rc != 0) {
    json_object_set_new(reply, "error", json_string(hct_err_name(rc)));
    const char *msg = hct_last_error();
    json_object_set_new(reply, "message", json_string(msg && msg[0] ? msg : hct_strerror(rc)));
    if (fatal) json_object_set_new(reply, "fatal", json_true());
    hct__log(HCT_LOG_WARN, "worker: %s: %s", cmd ? cmd : "?", msg);
  }
  char *s = json_dumps(reply, JSON_COMPACT);
  if (s == NULL) {
    /* A reply jansson cannot write (bad UTF-8 in a message, say). */
    s = hct__asprintf("{\"id\":%lld,\"ok\":false,\"error\":\"EPROTO\",\"message\":\"reply not encodable\"}",
                      (long long)json_integer_value(id));
  }
  if (s != NULL) {
    fputs(s, stdout);
    fputc('\n', stdout);
  }
  fflush(stdout);
  free(s);
  json_decref(reply);
  json_decref(req);
  return fatal;
}

/*
 * Serves requests from stdin until EOF, `quit` or a sticky GPU error.
 * Returns 0, or HCT_EFAULT when a sticky error poisoned the context: then
 * nothing was released and the caller must leave at once (_exit), running
 * no exit handler that could touch the context.
 */
int hct__worker_serve(void) {
  worker_t W;
  memset(&W, 0, sizeof W);
  W.in.ref_id = -1;
  W.cands = calloc(MAX_CANDS, sizeof *W.cands);
  if (W.cands == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  char *line = NULL;
  size_t cap = 0;
  int fatal = 0;
  while (!W.quit && !fatal && getline(&line, &cap, stdin) > 0) fatal = serve_line(&W, line);
  free(line);
  if (fatal) {
    fflush(stdout);
    fflush(stderr);
    return HCT_EFAULT;
  }
  timed_free(&W, W.timed, 0);
  inset_clear(&W);
  if (W.gpu != NULL) hct__devpool_flush(&W.pool, W.gpu);
  hct__hostbuf_release(); /* unpinned while the GPU is still open */
  hct__hostbuf_pin(NULL, NULL, NULL);
  if (W.producer_loaded) hct__producer_unload(W.gpu, &W.producer);
  if (W.pcheck_state == 1) hct__pcheck_unload(W.gpu, &W.pcheck);
  for (int i = 0; i < MAX_CANDS; i++)
    if (W.cands[i].used) hct__run_unload(W.gpu, &W.cands[i].c);
  free(W.cands);
  if (W.gpu) hct__gpu_close(W.gpu);
  if (W.db) hct__db_close(W.db);
  for (int i = 0; i < W.n_ops; i++) {
    if (W.ops[i].ref_loaded) hct__run_unload(W.gpu, &W.ops[i].ref);
    hct__manifest_free(W.ops[i].op);
  }
  return 0;
}
