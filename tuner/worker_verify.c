/*
 * worker_verify.c: the worker's verify request: the timed launches of the
 * time request just before it replayed once more, their outputs compared
 * with the reference candidate's, so that nothing is decided from a
 * timing whose launches did not do the work: on the card where the
 * comparison kernels are (verify_card), else on the host.
 *
 * Loop thread only.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker_serve.h"

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
/* The timed candidate with this id, or -1 when it was not timed. */
static int timed_index(const timed_t *t, int id) {
  for (int q = 0; q < t->n; q++)
    if (t->ids[q] == id) return q;
  return -1;
}

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
    if ((rc = hct__ws_outs_alloc(&t->hs, o)) != 0) break;
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
 * verify on the card (issue 34): what hct__ws_req_verify's host path computes from
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
      hct__ws_kept_give(W, t->base_dev[s]);
      rc = hct__ws_kept_take(W, &t->hs, &t->sets[s], t->base_dev[s]);
      if (rc == 0) rc = hct__pcheck_keep(g, &W->pcheck, &t->hs, &t->sets[s], t->base_dev[s]);
    }
    if (rc == 0) rc = hct__pcheck_set_enqueue(g, &W->pcheck, &sp_ref, &t->hs, &t->sets[0], t->dref, NULL, first);
    if (rc == 0) rc = hct__gpu_download(g, r, first, (size_t)sp_ref.n * rsz);
    if (rc == 0) hct__pcheck_set_finish(&sp_ref, &t->hs, r, NULL, t->ref_first);
    hct__ws_phase_add(W, HCT_WP_RUNS, t0);
    if (rc != 0) {
      free(r);
      return rc;
    }
    t->base_id = (int)ref_id;
  }
  json_t *results = json_array();
  for (size_t j = 0; rc == 0 && j < json_array_size(ids); j++) {
    const int id = (int)json_integer_value(json_array_get(ids, j)), k = timed_index(t, id);
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
    hct__ws_phase_add(W, HCT_WP_RUNS, t0);
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
    void **marks = hct__ws_card_outs(&t->hs, &t->sets[0]);
    json_object_set_new(o, "first", hct__ws_figures_json(&t->hs, marks, ff));
    json_object_set_new(o, "ref_first", hct__ws_figures_json(&t->hs, marks, t->ref_first));
    json_array_append_new(results, o);
    hct__ws_phase_add(W, HCT_WP_FIGURES, t0);
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
int hct__ws_req_verify(worker_t *W, json_t *req, json_t *reply) {
  timed_t *t = W->timed;
  int64_t ref_id;
  int rc;
  if ((rc = hct__ws_get_int(req, "ref", 1, 0, &ref_id)) != 0) return rc;
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
    if ((rc = hct__ws_op_reference(W, t->hs.op, &refc)) != 0 ||
        (rc = hct__reference_run(W->gpu, refc, &t->hs, &t->sets[0], 0)) != 0 ||
        (rc = hct__parity_prepare(&t->hs)) != 0)
      return rc;
    t->ref_done = 1;
    hct__ws_phase_add(W, HCT_WP_INPUTS, t0);
  }
  /* On the card where its kernels are: one small copy a candidate instead
   * of its every used set's outputs (issue 34); the host's path where
   * they are not, or where the card's failed without the GPU failing. */
  hct__ws_pcheck_ready(W, t->hs.op);
  if (W->pcheck_state == 1 && !t->card_off) {
    rc = verify_card(W, t, ids, ref_id, kref, reply);
    if (rc == 0 || hct__ws_is_sticky(rc)) return rc;
    hct__log(HCT_LOG_WARN, "worker: the timed outputs are verified on the host: %s", hct_last_error());
    hct__error_clear();
    t->card_off = 1;
    t->base_id = -1;
    json_object_del(reply, "results");
  }
  if (t->base_id != ref_id) {
    if (t->base_out == NULL && (t->base_out = calloc((size_t)t->used_sets * HCT_MAX_BUFFERS, sizeof *t->base_out)) == NULL)
      return hct__error(HCT_ENOMEM, "out of memory");
    for (int s = 0; s < t->used_sets; s++) hct__ws_outs_free(t->base_out + (size_t)s * HCT_MAX_BUFFERS);
    json_object_set_new(reply, "cand", json_integer(ref_id));
    const uint64_t t0 = hct__now_ns();
    if ((rc = replay(W, t, kref, 0, t->base_out)) != 0) return rc;
    hct__ws_phase_add(W, HCT_WP_RUNS, t0);
    t->base_id = (int)ref_id;
  }
  void **out = calloc((size_t)t->used_sets * HCT_MAX_BUFFERS, sizeof *out);
  if (out == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  json_t *results = json_array();
  for (size_t j = 0; rc == 0 && j < json_array_size(ids); j++) {
    const int id = (int)json_integer_value(json_array_get(ids, j)), k = timed_index(t, id);
    if (k < 0) {
      rc = hct__error(HCT_ENOENT, "request 'verify': candidate %d was not timed", id);
      break;
    }
    json_object_set_new(reply, "cand", json_integer(id));
    uint64_t t0 = hct__now_ns();
    if ((rc = replay(W, t, k, 1, out)) != 0) break;
    hct__ws_phase_add(W, HCT_WP_RUNS, t0);
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
    json_object_set_new(o, "first", hct__ws_figures(&t->hs, out, NULL, NULL));
    json_object_set_new(o, "ref_first", hct__ws_figures(&t->hs, t->base_out, NULL, NULL));
    json_array_append_new(results, o);
    for (int s = 0; s < t->used_sets; s++) hct__ws_outs_free(out + (size_t)s * HCT_MAX_BUFFERS);
    hct__ws_phase_add(W, HCT_WP_FIGURES, t0);
  }
  free(out);
  if (rc == 0) json_object_del(reply, "cand");
  json_object_set_new(reply, "results", results);
  return rc;
}
