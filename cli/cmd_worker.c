/*
 * cmd_worker.c: `hctune worker`, the process that runs candidates on a GPU
 * for a probe (tuner/worker.h has the design and the protocol).
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
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cli.h"
#include "db.h"
#include "tuner.h"

#define MAX_CANDS 512
#define MAX_OPS 8

typedef struct wcand_s {
  int id;
  int used;
  hct_cand_t c;
} wcand_t;

/* The inputs of the last check, kept for the next: the probe checks every
 * candidate on the same inputs in turn, so the reference and the outputs
 * of the reference candidate are computed once per input set. */
typedef struct inset_s {
  int valid;
  const hct_op_t *op;
  int T, pending;
  uint64_t seed;
  hct_hostset_t hs;
  int ref_id;               /* candidate whose outputs ref_out holds, or -1 */
  void *ref_out[HCT_MAX_BUFFERS];
  json_t *ref_figs;         /* its figures against the float64 reference */
  hct_gpu_t *gpu;           /* where `dev` lives */
  hct_devset_t dev;         /* the set uploaded once, for every candidate */
  int dev_ok;
} inset_t;

typedef struct worker_s {
  hct_gpu_t *gpu;
  hct_device_t dev;
  struct {
    char dir[1024];
    hct_op_t *op;
  } ops[MAX_OPS];
  int n_ops;
  wcand_t *cands;
  inset_t in;
  hct_db_t *db;             /* read-only, kept open: opening checks it */
  char dbpath[1024];
  int quit;
} worker_t;

/* Errors after which the GPU context cannot be used again. */
static int is_sticky(int rc) { return rc == HCT_EFAULT || rc == HCT_EHANG || rc == HCT_EGPU; }

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

static void inset_clear(inset_t *in) {
  if (in->dev_ok) hct__devset_free(in->gpu, &in->dev);
  if (in->valid) hct__hostset_free(&in->hs);
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) free(in->ref_out[i]);
  json_decref(in->ref_figs);
  memset(in, 0, sizeof *in);
  in->ref_id = -1;
}

/* ---- requests ----------------------------------------------------------- */

static int req_hello(worker_t *W, json_t *req, json_t *reply) {
  json_object_set_new(reply, "pid", json_integer(getpid()));
  json_object_set_new(reply, "version", json_string(HCT_VERSION_STRING));
  return 0;
}

static int req_open(worker_t *W, json_t *req, json_t *reply) {
  const char *spec;
  int rc = get_str(req, "device", 0, &spec);
  if (rc != 0) return rc;
  if (W->gpu != NULL) return hct__error(HCT_EBUSY, "a device is already open in this worker");
  if ((rc = hct__device_find(spec ? spec : "0", &W->dev)) != 0) return rc;
  if ((rc = hct__gpu_open(&W->dev, &W->gpu)) != 0) return rc;
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

  /* The binary, by key, read-only: the probe (the only writer) holds the
   * database open too.  One connection for every load: each open runs a
   * quick check of the whole file. */
  if (W->db == NULL || strcmp(W->dbpath, dbpath) != 0) {
    hct__db_close(W->db);
    W->db = NULL;
    if ((rc = hct__db_open(dbpath, HCT_DB_READONLY | HCT_DB_NOCREATE, &W->db)) != 0) return rc;
    hct__strlcpy(W->dbpath, dbpath, sizeof W->dbpath);
  }
  void *image = NULL;
  size_t size = 0;
  int is_ptx = 0;
  char *log = NULL;
  rc = hct__db_binary_get(W->db, key, &image, &size, &is_ptx, &log);
  free(log);
  if (rc == HCT_ENOENT) rc = hct__error(HCT_ENOENT, "binary '%s' is not in '%s'", key, dbpath);
  if (rc != 0) return rc;
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
  if (W->in.ref_id == id) inset_clear(&W->in);
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
    outs[i] = malloc(hs->bufs[i].elems * hct__dtype_size(hs->bufs[i].spec->dtype));
    if (outs[i] == NULL) return hct__error(HCT_ENOMEM, "out of memory for outputs");
  }
  return 0;
}

static void outs_free(void *outs[]) {
  for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
    free(outs[i]);
    outs[i] = NULL;
  }
}

/*
 * One check run of a candidate on the current input set, and the timeout
 * flag of a grid-barrier variant.  The inputs and weights are uploaded once
 * per input set: every candidate checked on it runs on the same device
 * copy (hct__run_on resets what a run writes).
 */
static int run_check(worker_t *W, const hct_cand_t *c, const hct_hostset_t *hs, void *outs[],
                     int *timed_out) {
  hct_gpu_t *g = W->gpu;
  inset_t *in = &W->in;
  int rc;
  *timed_out = 0;
  if (!in->dev_ok || in->gpu != g) {
    if (in->dev_ok) hct__devset_free(in->gpu, &in->dev);
    in->dev_ok = 0;
    if ((rc = hct__devset_alloc(g, hs, &in->dev)) != 0) return rc;
    in->gpu = g;
    in->dev_ok = 1;
    if ((rc = hct__devset_upload(g, hs, &in->dev)) != 0) return rc;
  }
  uint32_t flag = 0;
  rc = hct__run_on(g, c, hs, &in->dev, outs, c->v->grid_barrier ? &flag : NULL);
  *timed_out = rc == 0 && flag != 0;
  return rc;
}

/* Figures of every output and inout: against the float64 reference, and
 * bit for bit against `ref` when given. */
static json_t *figures(const hct_hostset_t *hs, void *outs[], void *ref[]) {
  json_t *all = json_object();
  hct_parity_figs_t f[HCT_MAX_BUFFERS];
  memset(f, 0, sizeof f);
  for (int i = 0; i < hs->n; i++) {
    if (outs[i] == NULL) continue;
    hct__parity_metrics(&hs->bufs[i], outs[i], &f[i]);
    if (ref != NULL && ref[i] != NULL) {
      hct_parity_figs_t fb;
      memset(&fb, 0, sizeof fb);
      hct__parity_bitwise(&hs->bufs[i], outs[i], ref[i], &fb);
      f[i].mismatches = fb.mismatches;
      f[i].first_mismatch = fb.first_mismatch;
    }
  }
  hct__parity_images(hs, outs, f);
  for (int i = 0; i < hs->n; i++)
    if (outs[i] != NULL) json_object_set_new(all, hs->bufs[i].spec->name, hct__figs_to_json(&f[i]));
  return all;
}

/* Makes W->in the input set (op, T, pending, seed): inputs and reference. */
static int inset_get(worker_t *W, const hct_op_t *op, int T, int pending, uint64_t seed) {
  inset_t *in = &W->in;
  if (in->valid && in->op == op && in->T == T && in->pending == pending && in->seed == seed)
    return 0;
  inset_clear(in);
  const hct_op_impl_t *impl = hct__op_impl(op->name);
  if (impl == NULL) return hct__error(HCT_ENOENT, "op '%s': hctune has no host implementation for it", op->name);
  int rc = hct__hostset_init(&in->hs, op, T, pending);
  if (rc != 0) return rc;
  in->valid = 1;
  if ((rc = impl->fill_inputs(&in->hs, seed)) != 0 || (rc = impl->reference(&in->hs)) != 0) {
    inset_clear(in);
    return rc;
  }
  in->hs.seed = seed;
  in->op = op;
  in->T = T;
  in->pending = pending;
  in->seed = seed;
  return 0;
}

static int req_check(worker_t *W, json_t *req, json_t *reply) {
  int64_t id, ref_id, T, pending, seed;
  wcand_t *c, *ref = NULL;
  int rc;
  if ((rc = get_int(req, "cand", 1, 0, &id)) != 0 || (rc = get_int(req, "ref", 0, -1, &ref_id)) != 0 ||
      (rc = get_int(req, "tokens", 1, 0, &T)) != 0 || (rc = get_int(req, "pending", 0, 0, &pending)) != 0 ||
      (rc = get_int(req, "seed", 1, 0, &seed)) != 0)
    return rc;
  json_object_set_new(reply, "cand", json_integer(id));
  if ((rc = need_cand(W, id, &c)) != 0) return rc;
  if (ref_id >= 0 && ref_id != id && (rc = need_cand(W, ref_id, &ref)) != 0) return rc;
  if (T < 1 || T > 1 << 20) return hct__error(HCT_ERANGE, "request 'check': tokens %lld", (long long)T);
  char why[256];
  if (!hct__run_supports(&c->c, &W->dev, (int)T, why, sizeof why))
    return hct__error(HCT_EUNSUPPORTED, "%s at T=%lld: %s", c->c.label, (long long)T, why);
  if ((rc = inset_get(W, c->c.op, (int)T, pending != 0, (uint64_t)seed)) != 0) return rc;
  inset_t *in = &W->in;

  int timed_out;
  if (ref != NULL && in->ref_id != ref->id) {
    /* The reference's run on these inputs, kept for the next candidates. */
    for (int i = 0; i < HCT_MAX_BUFFERS; i++) {
      free(in->ref_out[i]);
      in->ref_out[i] = NULL;
    }
    json_decref(in->ref_figs);
    in->ref_figs = NULL;
    in->ref_id = -1;
    if ((rc = outs_alloc(&in->hs, in->ref_out)) != 0) return rc;
    if ((rc = run_check(W, &ref->c, &in->hs, in->ref_out, &timed_out)) != 0) {
      json_object_set_new(reply, "cand", json_integer(ref->id));
      return hct__error(rc, "reference %s at T=%lld: %s", ref->c.label, (long long)T, hct_last_error());
    }
    in->ref_figs = figures(&in->hs, in->ref_out, NULL);
    in->ref_id = ref->id;
  }
  void *outs[HCT_MAX_BUFFERS];
  if ((rc = outs_alloc(&in->hs, outs)) != 0) {
    outs_free(outs);
    return rc;
  }
  uint64_t t0 = hct__now_ns();
  rc = run_check(W, &c->c, &in->hs, outs, &timed_out);
  json_object_set_new(reply, "run_ms", json_real((double)(hct__now_ns() - t0) / 1e6));
  if (rc == 0 && timed_out)
    rc = hct__error(HCT_ETIMEDOUT, "%s at T=%lld: a grid barrier timed out (not every block was resident)",
                    c->c.label, (long long)T);
  if (rc == 0) {
    json_object_set_new(reply, "buffers", figures(&in->hs, outs, ref ? in->ref_out : NULL));
    if (ref != NULL) json_object_set(reply, "ref_buffers", in->ref_figs);
  }
  outs_free(outs);
  return rc;
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
 * Times candidates at T, interleaved (tuner/timing.c): each one's batch of
 * launches captured into a graph over rotating buffer sets (cold: their
 * total is over 4x the L2), replayed in rounds.  A sticky error of one
 * candidate ends the worker; its id is in the reply's "cand".
 */
static int req_time(worker_t *W, json_t *req, json_t *reply) {
  int64_t T, seed, batch, cold;
  int rc;
  json_t *ids = json_object_get(req, "cands");
  if (!json_is_array(ids) || json_array_size(ids) == 0 || json_array_size(ids) > MAX_CANDS)
    return hct__error(HCT_EINVAL, "request 'time': 'cands' must be a non-empty array of ids");
  int n = (int)json_array_size(ids);
  wcand_t *cs[MAX_CANDS];
  for (int k = 0; k < n; k++)
    if ((rc = need_cand(W, json_integer_value(json_array_get(ids, (size_t)k)), &cs[k])) != 0) return rc;
  const hct_op_t *op = cs[0]->c.op;
  if ((rc = get_int(req, "tokens", 1, 0, &T)) != 0 || (rc = get_int(req, "seed", 1, 0, &seed)) != 0 ||
      (rc = get_int(req, "batch", 0, op->batch, &batch)) != 0 ||
      (rc = get_int(req, "cold", 0, op->timing_cold, &cold)) != 0)
    return rc;
  if (batch < 1 || batch > 4096) return hct__error(HCT_ERANGE, "request 'time': batch %lld", (long long)batch);
  hct_timing_opts_t to;
  memset(&to, 0, sizeof to);
  if ((rc = timing_opts(req, &to)) != 0) return rc;

  hct_hostset_t hs;
  if ((rc = hct__hostset_init(&hs, op, (int)T, 0)) != 0) return rc;
  const hct_op_impl_t *impl = hct__op_impl(op->name);
  if (impl == NULL) {
    hct__hostset_free(&hs);
    return hct__error(HCT_ENOENT, "op '%s': hctune has no host implementation for it", op->name);
  }
  if ((rc = impl->fill_inputs(&hs, (uint64_t)seed)) != 0) {
    hct__hostset_free(&hs);
    return rc;
  }
  size_t set_bytes = 0;
  for (int i = 0; i < hs.n; i++)
    if (hs.bufs[i].data) set_bytes += hs.bufs[i].elems * hct__dtype_size(hs.bufs[i].spec->dtype);
  int nsets = 1;
  if (cold && set_bytes > 0)
    nsets = (int)HCT_MIN(64, HCT_MAX(2, (4 * W->dev.l2_bytes + (int64_t)set_bytes - 1) / (int64_t)set_bytes + 1));

  hct_devset_t *sets = calloc((size_t)nsets, sizeof *sets);
  hct_scratchset_t *scr = calloc((size_t)n, sizeof *scr);
  hct_graph_t **graphs = calloc((size_t)n, sizeof *graphs);
  hct_timing_res_t *res = calloc((size_t)n, sizeof *res);
  int have_res = 0;
  timer_t_ tm = {W, graphs, NULL, NULL, (int)batch};
  if (!sets || !scr || !graphs || !res) {
    rc = hct__error(HCT_ENOMEM, "out of memory");
    goto done;
  }
  for (int s = 0; s < nsets; s++)
    if ((rc = hct__devset_alloc(W->gpu, &hs, &sets[s])) != 0 ||
        (rc = hct__devset_upload(W->gpu, &hs, &sets[s])) != 0)
      goto done;
  for (int k = 0; k < n; k++) {
    const hct_cand_t *c = &cs[k]->c;
    json_object_set_new(reply, "cand", json_integer(cs[k]->id));
    if ((rc = hct__scratch_alloc(W->gpu, c, (int)T, &scr[k])) != 0) goto done;
    if ((rc = hct__gpu_capture_begin(W->gpu)) != 0) goto done;
    for (int b = 0; b < batch && rc == 0; b++)
      rc = hct__run_enqueue(W->gpu, c, &hs, &sets[b % nsets], &scr[k]);
    hct_graph_t *gr = NULL;
    int rc2 = hct__gpu_capture_end(W->gpu, &gr);
    if (rc == 0) rc = rc2;
    if (rc != 0) goto done;
    graphs[k] = gr;
  }
  json_object_del(reply, "cand");
  if ((rc = hct__gpu_event_create(W->gpu, &tm.start)) != 0 ||
      (rc = hct__gpu_event_create(W->gpu, &tm.stop)) != 0)
    goto done;
  /* "no_prune": ids of candidates that stay timed however slow (the
   * incumbent the others are compared with). */
  uint8_t no_prune[MAX_CANDS] = {0};
  json_t *np = json_object_get(req, "no_prune");
  for (size_t j = 0; j < json_array_size(np); j++)
    for (int k = 0; k < n; k++)
      if (json_integer_value(json_array_get(np, j)) == cs[k]->id) no_prune[k] = 1;
  to.no_prune = no_prune;
  /* "ranks": one per id of "cands", in order (tuner/stats.h: who may
   * prune whom). */
  uint8_t ranks[MAX_CANDS] = {0};
  json_t *rk = json_object_get(req, "ranks");
  if (rk != NULL) {
    if (!json_is_array(rk) || json_array_size(rk) != (size_t)n) {
      rc = hct__error(HCT_EINVAL, "request 'time': 'ranks' must be an array of %d integers", n);
      goto done;
    }
    for (int k = 0; k < n; k++) {
      json_t *v = json_array_get(rk, (size_t)k);
      if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 255) {
        rc = hct__error(HCT_EINVAL, "request 'time': ranks[%d] must be an integer in 0..255", k);
        goto done;
      }
      ranks[k] = (uint8_t)json_integer_value(v);
    }
    to.rank = ranks;
  }
  to.sample = sample_cb;
  to.arg = &tm;
  to.max_clock_mhz = W->dev.clock_khz / 1000;
  int mhz;
  if (to.max_clock_mhz > 0 && hct__gpu_sm_clock(W->gpu, &mhz) == 0) to.sm_clock = clock_cb;
  rc = hct__timing_run(n, &to, res);
  if (rc < 0) goto done;
  have_res = 1;
  rc = 0;
  json_t *arr = json_array();
  for (int k = 0; k < n; k++) {
    json_array_append_new(arr, timing_json(cs[k]->id, &res[k]));
    if (rc == 0 && is_sticky(res[k].err)) {
      json_object_set_new(reply, "cand", json_integer(cs[k]->id));
      rc = hct__error(res[k].err, "%s: timing at T=%lld: %s", cs[k]->c.label, (long long)T,
                      res[k].errmsg);
    }
  }
  json_object_set_new(reply, "results", arr);
  json_object_set_new(reply, "sets", json_integer(nsets));
  json_object_set_new(reply, "set_bytes", json_integer((json_int_t)set_bytes));
  json_object_set_new(reply, "batch", json_integer(batch));
done:
  /* After a sticky error the context is gone: free nothing on the GPU. */
  if (!is_sticky(rc)) {
    if (tm.start) hct__gpu_event_destroy(W->gpu, tm.start);
    if (tm.stop) hct__gpu_event_destroy(W->gpu, tm.stop);
    for (int k = 0; graphs && k < n; k++)
      if (graphs[k]) hct__gpu_graph_destroy(W->gpu, graphs[k]);
    for (int k = 0; scr && k < n; k++) hct__scratch_free(W->gpu, &scr[k]);
    for (int s = 0; sets && s < nsets; s++) hct__devset_free(W->gpu, &sets[s]);
  }
  if (have_res) hct__timing_res_free(res, n);
  free(sets);
  free(scr);
  free(graphs);
  free(res);
  hct__hostset_free(&hs);
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
    {"check", req_check, NEED_GPU},   {"time", req_time, NEED_GPU},
    {"quit", req_quit, 0},
};

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
      if ((requests[i].flags & NEED_GPU) && W->gpu == NULL)
        rc = hct__error(HCT_EINVAL, "'%s' needs 'open' first", cmd);
      else
        rc = requests[i].fn(W, req, reply);
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

static const char usage[] =
    "usage: hctune worker\n\n"
    "Internal: started by 'hctune probe' to run candidates on a GPU in a\n"
    "process of their own.  Reads JSON requests on stdin, one per line,\n"
    "and writes one reply per line on stdout (see tuner/worker.h).\n";

int cmd_worker(int argc, char **argv) {
  const hct_option_t opts[] = {HCT_OPT_END};
  int parsed = hct__cli_options(argc, argv, opts, usage, NULL);
  if (parsed != 0) return parsed == HCT_OPTS_HELP ? HCT_EXIT_OK : parsed;
  /* Ctrl-C in a terminal reaches the whole process group: the probe
   * decides what an interrupt means (it stops between candidates), and a
   * worker dying of it mid-request would look like the candidate's fault. */
  signal(SIGINT, SIG_IGN);
  /* A worker must not outlive its probe: one killed (SIGKILL, say) while
   * this process spins in a hung kernel would leave it holding the GPU
   * forever.  The kernel kills us when the parent goes; the check after
   * covers a parent that went before the call. */
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return HCT_EXIT_FAIL;
  worker_t W;
  memset(&W, 0, sizeof W);
  W.in.ref_id = -1;
  W.cands = calloc(MAX_CANDS, sizeof *W.cands);
  if (W.cands == NULL) return hct__cli_fail(hct__error(HCT_ENOMEM, "out of memory"));
  char *line = NULL;
  size_t cap = 0;
  int fatal = 0;
  while (!W.quit && !fatal && getline(&line, &cap, stdin) > 0) fatal = serve_line(&W, line);
  free(line);
  if (fatal) {
    /* The context is poisoned: release nothing, on the GPU or off it (the
     * driver cleans up when the process ends), and leave at once: no
     * exit handlers that might touch the context. */
    fflush(stdout);
    fflush(stderr);
    _exit(HCT_EXIT_FAIL);
  }
  inset_clear(&W.in);
  for (int i = 0; i < MAX_CANDS; i++)
    if (W.cands[i].used) hct__run_unload(W.gpu, &W.cands[i].c);
  free(W.cands);
  if (W.gpu) hct__gpu_close(W.gpu);
  if (W.db) hct__db_close(W.db);
  for (int i = 0; i < W.n_ops; i++) hct__manifest_free(W.ops[i].op);
  return HCT_EXIT_OK;
}
