/*
 * worker_time.c: the worker's time request: the candidates' launches
 * captured into graphs over rotated input sets and replayed interleaved
 * (hct__timing_run), refused up front when the sets and every scratch do
 * not fit the card; the allocation kept for the verify request after it,
 * and its drawn inputs and sets' memory taken over by the next timing of
 * the same count (reuse_sets).
 *
 * Loop thread only.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker_serve.h"

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

void hct__ws_timed_free(worker_t *W, timed_t *t, int sticky) {
  if (t == NULL) return;
  if (!sticky) {
    for (int k = 0; t->graphs && k < t->n; k++)
      if (t->graphs[k]) hct__gpu_graph_destroy(W->gpu, t->graphs[k]);
    for (int k = 0; t->scr && k < t->n; k++) hct__scratch_free(W->gpu, &t->scr[k]);
    for (int s = 0; t->sets && s < t->nsets; s++) hct__devset_free(W->gpu, &t->sets[s]);
  }
  for (int s = 0; t->base_out && s < t->used_sets; s++) hct__ws_outs_free(t->base_out + (size_t)s * HCT_MAX_BUFFERS);
  free(t->base_out);
  for (int s = 0; !sticky && t->base_dev && s < t->used_sets; s++) hct__ws_kept_give(W, t->base_dev[s]);
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
    if ((rc = hct__ws_need_cand(W, json_integer_value(json_array_get(ids, (size_t)k)), &q->cs[k])) != 0) return rc;
  const hct_op_t *op = q->cs[0]->c.op;
  if ((rc = hct__ws_get_int(req, "tokens", 1, 0, &q->T)) != 0 || (rc = hct__ws_get_int(req, "seed", 1, 0, &q->seed)) != 0)
    return rc;
  /* No "batch": the manifest's, at this T. */
  int dflt_batch = hct__op_batch(op, (int)q->T);
  if (dflt_batch < 0 && json_object_get(req, "batch") == NULL) return dflt_batch;
  if ((rc = hct__ws_get_int(req, "batch", 0, dflt_batch, &q->batch)) != 0 ||
      (rc = hct__ws_get_int(req, "cold", 0, op->timing_cold, &q->cold)) != 0)
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
    if (rc == 0 && hct__ws_is_sticky(res[k].err)) {
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

int hct__ws_req_time(worker_t *W, json_t *req, json_t *reply) {
  time_req_t q;
  timed_t *prev = W->timed;
  W->timed = NULL;
  int rc = time_args(W, req, &q);
  if (rc != 0) {
    hct__ws_timed_free(W, prev, 0);
    return rc;
  }
  const int n = q.n;
  timed_t *tt = calloc(1, sizeof *tt);
  if (tt == NULL) {
    hct__ws_timed_free(W, prev, 0);
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
  hct__ws_timed_free(W, prev, 0);
  hct__devpool_flush(&W->pool, W->gpu); /* its kept outputs too: the timing's memory */
  size_t set_bytes = 0;
  const uint64_t t0 = hct__now_ns();
  if ((rc = time_inputs(W, &q, tt, &set_bytes, held, reply)) != 0) {
    hct__ws_timed_free(W, tt, 0);
    return rc;
  }
  hct__ws_phase_add(W, HCT_WP_INPUTS, t0);
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
  if (!hct__ws_is_sticky(rc)) {
    if (tm.start) hct__gpu_event_destroy(W->gpu, tm.start);
    if (tm.stop) hct__gpu_event_destroy(W->gpu, tm.stop);
  }
  if (have_res) hct__timing_res_free(res, n);
  free(res);
  /* Kept for 'verify' when the timing went through. */
  if (rc == 0) W->timed = tt;
  else hct__ws_timed_free(W, tt, hct__ws_is_sticky(rc));
  return rc;
}
