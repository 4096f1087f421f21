/*
 * worker_verify.c: the worker's verify request: the timed launches of the
 * time request just before it replayed once more, their outputs compared
 * with the reference candidate's, so that nothing is decided from a
 * timing whose launches did not do the work.
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
static int replay(worker_t *W, timed_t *t, int k, int stale, void **out) {
  int rc = 0;
  for (int s = 0; rc == 0 && s < t->used_sets; s++)
    for (int i = 0; rc == 0 && i < t->hs.n; i++)
      if (t->sets[s].ptr[i] && t->hs.bufs[i].spec->role == HCT_BUF_OUTPUT)
        rc = prefill(W, t, s, i, stale);
  if (rc == 0) rc = hct__gpu_graph_launch(W->gpu, t->graphs[k]);
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
    const hct_cand_t *refc = NULL;
    if ((rc = hct__ws_op_reference(W, t->hs.op, &refc)) != 0 ||
        (rc = hct__reference_run(W->gpu, refc, &t->hs, &t->sets[0], 0)) != 0 ||
        (rc = hct__parity_prepare(&t->hs)) != 0)
      return rc;
    t->ref_done = 1;
  }
  if (t->base_id != ref_id) {
    if (t->base_out == NULL && (t->base_out = calloc((size_t)t->used_sets * HCT_MAX_BUFFERS, sizeof *t->base_out)) == NULL)
      return hct__error(HCT_ENOMEM, "out of memory");
    for (int s = 0; s < t->used_sets; s++) hct__ws_outs_free(t->base_out + (size_t)s * HCT_MAX_BUFFERS);
    json_object_set_new(reply, "cand", json_integer(ref_id));
    if ((rc = replay(W, t, kref, 0, t->base_out)) != 0) return rc;
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
    if ((rc = replay(W, t, k, 1, out)) != 0) break;
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
  }
  free(out);
  if (rc == 0) json_object_del(reply, "cand");
  json_object_set_new(reply, "results", results);
  return rc;
}
