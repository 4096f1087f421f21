/*
 * worker_check.c: the worker's check request: a candidate run as an
 * engine runs it (sessions of several runs in one allocation, after the
 * producer kernel, a fresh twin allocation, scratch from the pool), on
 * input sets kept from one check to the next with their float64 reference
 * and their pristine inputs on the card, its figures made on the card
 * (each run's comparisons queued behind it, brought back in one copy) or
 * on the host.
 *
 * Loop thread only.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker_serve.h"

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

/* Makes W->in set 0 the input set (op, T, pending, seed): inputs and
 * reference. */
static int inset_get(worker_t *W, const hct_op_t *op, int T, int pending, uint64_t seed) {
  inset_t *in = &W->in;
  if (in->valid && in->op == op && in->T == T && in->pending == pending && in->seed == seed)
    return 0;
  const uint64_t t0 = hct__now_ns();
  hct__ws_inset_clear(W);
  const hct_cand_t *ref = NULL;
  int rc = hct__ws_op_reference(W, op, &ref);
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
    if (!hct__ws_is_sticky(rc)) hct__ws_inset_clear(W);
    return rc;
  }
  hct__ws_phase_add(W, HCT_WP_INPUTS, t0);
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
  int rc = hct__ws_op_reference(W, in->op, &ref);
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
    if (!hct__ws_is_sticky(rc)) {
      hct__ws_runset_card_free(W, W->gpu, b);
      hct__ws_runset_clear(b);
    }
    return rc;
  }
  hct__ws_phase_add(W, HCT_WP_INPUTS, t0);
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
  for (int k = 0; k < N_RUNS; k++) hct__ws_outs_free(r->out[k]);
  for (int k = 0; g != NULL && k < 2; k++) hct__ws_kept_give(W, r->kept[k]);
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

/* The float64 reference of the set on the card, once a set. */
/* Whether run k of a check is made (the repeat runs with repeat, the
 * producer's with producer, the twin with twin); the twin's run gets a
 * session of its own, opened afresh (*rc says whether that worked). */
static int run_begin(worker_t *W, const hct_cand_t *c, int T, hct_scratchset_t *s, int k, int repeat,
                     int producer, int twin, int *rc) {
  if ((k == RUN_FRESH || k == RUN_AGAIN) && !repeat) return 0;
  if (k == RUN_PRODUCER && !producer) return 0;
  if (k != RUN_TWIN) return 1;
  if (!twin) return 0;
  const uint64_t t0 = hct__now_ns();
  session_close(W, s);
  *rc = session_open(W, c, T, s);
  hct__ws_phase_add(W, HCT_WP_MEMORY, t0);
  return 1;
}

static int set_on_card(worker_t *W, runset_t *set) {
  if (set->dref_ok) return 0;
  const uint64_t t0 = hct__now_ns();
  int rc = 0;
  for (int i = 0; rc == 0 && i < set->hs.n; i++) rc = hct__pcheck_ref_upload(W->gpu, &set->hs.bufs[i], &set->dref[i]);
  set->dref_ok = rc == 0;
  hct__ws_phase_add(W, HCT_WP_INPUTS, t0);
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
    r->card_failed = !hct__ws_is_sticky(rc);
    return rc;
  }
  const hct_dptr_t res = W->pcheck.work + partials, flags = res + slot * N_RUNS;
  uint64_t t0 = hct__now_ns();
  rc = session_open(W, c, in->T, &s);
  hct__ws_phase_add(W, HCT_WP_MEMORY, t0);
  uint8_t queued[N_RUNS] = {0}, flagged[N_RUNS] = {0};
  for (int k = 0; rc == 0 && k < N_RUNS; k++) {
    const int made = run_begin(W, c, in->T, &s, k, repeat, producer, twin, &rc);
    if (rc != 0) break;
    if (!made) continue;
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
    hct__ws_phase_add(W, HCT_WP_RUNS, t0);
    if (rc != 0) break;
    /* The twin is compared bit for bit with run 0 (deterministic()). */
    const hct_dptr_t *want = k == RUN_TWIN ? r->kept[0] : r->want[run_set[k]];
    t0 = hct__now_ns();
    int crc = hct__pcheck_set_enqueue(W->gpu, &W->pcheck, &sp[run_set[k]], &set->hs, &in->dev, set->dref, want,
                                      res + slot * (hct_dptr_t)k);
    hct__ws_phase_add(W, HCT_WP_FIGURES, t0);
    t0 = hct__now_ns();
    const int keep = (k == RUN_FIRST && (r->keep || r->twin)) || (k == RUN_FRESH && r->keep);
    if (crc == 0 && keep) crc = hct__ws_kept_take(W, &set->hs, &in->dev, r->kept[k == RUN_FRESH]);
    if (crc == 0 && keep) crc = hct__pcheck_keep(W->gpu, &W->pcheck, &set->hs, &in->dev, r->kept[k == RUN_FRESH]);
    hct__ws_phase_add(W, HCT_WP_MEMORY, t0);
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
  hct__ws_phase_add(W, HCT_WP_RUNS, t0);
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
  if (!hct__ws_is_sticky(rc)) session_close(W, &s);
  hct__ws_phase_add(W, HCT_WP_MEMORY, t0);
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
  hct__ws_phase_add(W, HCT_WP_MEMORY, t0);
  if (rc != 0) {
    if (!hct__ws_is_sticky(rc)) session_close(W, &s);
    return rc;
  }
  for (int k = 0; rc == 0 && k < N_RUNS; k++) {
    const int made = run_begin(W, c, in->T, &s, k, repeat, producer, twin, &rc);
    if (rc != 0) break;
    if (!made) continue;
    const hct_hostset_t *hs = &in->set[run_set[k]].hs;
    if ((rc = hct__ws_outs_alloc(hs, r->out[k])) != 0) break;
    uint32_t flag = 0;
    t0 = hct__now_ns();
    const runset_t *set = &in->set[run_set[k]];
    rc = hct__session_run(W->gpu, c, hs, &in->dev, &s, k == RUN_PRODUCER ? &W->producer : NULL,
                          pristine_of(set),
                          r->out[k], c->v->grid_barrier ? &flag : NULL);
    if (k == RUN_FIRST) r->first_ms = (double)(hct__now_ns() - t0) / 1e6;
    hct__ws_phase_add(W, HCT_WP_RUNS, t0);
    r->done[k] = rc == 0;
    if (rc == 0 && flag != 0 && *timed_out_run < 0) *timed_out_run = k;
  }
  /* After a sticky error the context is gone: free nothing on the GPU. */
  t0 = hct__now_ns();
  if (!hct__ws_is_sticky(rc)) session_close(W, &s);
  hct__ws_phase_add(W, HCT_WP_MEMORY, t0);
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
  if (rc != 0 && !hct__ws_is_sticky(rc)) {
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
    hct__ws_outs_free(set->ref_out);
    hct__ws_kept_give(W, set->ref_dev);
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
      set->ref_figs = hct__ws_figures_json(&set->hs, hct__ws_card_outs(&set->hs, &in->dev), set->ref_f);
      continue;
    }
    memcpy(set->ref_out, r->out[runs[k]], sizeof set->ref_out);
    memset(r->out[runs[k]], 0, sizeof r->out[runs[k]]);
    hct__ws_figures_of(&set->hs, set->ref_out, NULL, NULL, set->ref_f);
    set->ref_figs = hct__ws_figures_json(&set->hs, set->ref_out, set->ref_f);
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
  void *const *outs = r->card ? hct__ws_card_outs(hs, &in->dev) : r->out[RUN_FIRST];
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
  if (r->card) return hct__ws_figures_json(&set->hs, hct__ws_card_outs(&set->hs, &W->in.dev), r->figs[run]);
  return hct__ws_figures(&set->hs, r->out[run], with_ref ? set->ref_out : NULL, with_ref ? set->ref_f : NULL);
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
int hct__ws_req_check(worker_t *W, json_t *req, json_t *reply) {
  int64_t id, ref_id, T, pending, seed, repeat, producer, twin;
  wcand_t *c, *ref = NULL;
  int rc;
  if ((rc = hct__ws_get_int(req, "cand", 1, 0, &id)) != 0 || (rc = hct__ws_get_int(req, "ref", 0, -1, &ref_id)) != 0 ||
      (rc = hct__ws_get_int(req, "tokens", 1, 0, &T)) != 0 || (rc = hct__ws_get_int(req, "pending", 0, 0, &pending)) != 0 ||
      (rc = hct__ws_get_int(req, "seed", 1, 0, &seed)) != 0 || (rc = hct__ws_get_int(req, "repeat", 0, 0, &repeat)) != 0 ||
      (rc = hct__ws_get_int(req, "producer", 0, 0, &producer)) != 0 ||
      (rc = hct__ws_get_int(req, "twin", 0, 0, &twin)) != 0)
    return rc;
  json_object_set_new(reply, "cand", json_integer(id));
  if ((rc = hct__ws_need_cand(W, id, &c)) != 0) return rc;
  if (ref_id >= 0 && ref_id != id && (rc = hct__ws_need_cand(W, ref_id, &ref)) != 0) return rc;
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
  hct__ws_pcheck_ready(W, c->c.op);
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
    runs_free(W, hct__ws_is_sticky(rc) ? NULL : W->gpu, rp);
    hct__ws_phase_add(W, HCT_WP_MEMORY, t0);
    memset(rp, 0, sizeof *rp);
    rp->card = card;
    if (rc != 0) {
      free(rp);
      if (card_failed && !hct__ws_is_sticky(rc)) return check_on_host(W, req, reply);
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
    hct__ws_phase_add(W, HCT_WP_FIGURES, tf);
  }
  const int card_failed = rp->card_failed;
  const uint64_t tm = hct__now_ns();
  runs_free(W, hct__ws_is_sticky(rc) ? NULL : W->gpu, rp);
  hct__ws_phase_add(W, HCT_WP_MEMORY, tm);
  free(rp);
  if (rc != 0 && card_failed && !hct__ws_is_sticky(rc)) return check_on_host(W, req, reply);
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
    for (int k = 0; k < 2; k++) hct__ws_runset_card_free(W, W->in.gpu, &W->in.set[k]);
  W->in.ref_id = -1;
  hct__pcheck_unload(W->gpu, &W->pcheck);
  W->pcheck_state = -1;
  hct__error_clear();
  return hct__ws_req_check(W, req, reply);
}
