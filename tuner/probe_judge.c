/*
 * probe_judge.c: verdicts: a check's figures, or the outputs of timed
 * launches, against the op's rules (bit for bit, the kl bounds, images
 * exact, nothing unwritten).  Pure functions of figures, but for the
 * records of a baseline that fails: no GPU call.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "probe_internal.h"

/* The figures of one run of a check, as judge reads them. */
typedef struct figview_s {
  int n;
  const char (*name)[32];
  const hct_parity_figs_t *figs, *ref_figs;
  int has_ref;
  int run;               /* its place in the check's allocation (worker.h) */
  double run_ms;
} figview_t;

static figview_t view_first(const hct_worker_check_t *ck) {
  figview_t v = {ck->n, (const char (*)[32])ck->name, ck->figs, ck->ref_figs, ck->has_ref, 0, ck->run_ms};
  return v;
}

static figview_t view_more(const hct_worker_check_t *ck, int j) {
  figview_t v = {ck->n, (const char (*)[32])ck->name, ck->more[j].figs, ck->more[j].ref_figs,
                 ck->has_ref, ck->more[j].run, 0};
  return v;
}

/*
 * Judges one check's figures: every output element written and finite,
 * 16-bit images exact, and bit for bit equal to the reference (class
 * bitwise) or within the op's kl bounds relative to the baseline's figures
 * on the same inputs (class kl).  The baseline itself is judged against the
 * float64 reference (hct__probe_judge_baseline).
 */
static void judge(probe_t *P, const cand_t *c, const figview_t *ck, verdict_t *vd) {
  memset(vd, 0, sizeof *vd);
  vd->status = "pass";
  vd->check = "parity";
  size_t off = (size_t)snprintf(vd->figures, sizeof vd->figures, "{");
  for (int j = 0; j < ck->n; j++) {
    const hct_parity_figs_t *f = &ck->figs[j];
    const hct_buffer_t *b = hct__buffer_find(P->op, ck->name[j]);
    const char *st = "pass";
    if (f->unwritten > 0) st = "unwritten";
    else if (f->nonfinite > 0 || f->image_mismatches > 0) st = "parity";
    else if (c->c.v->parity == HCT_PARITY_BITWISE && f->mismatches > 0) st = "parity";
    else if (c->c.v->parity == HCT_PARITY_KL && ck->has_ref && b != NULL) {
      const hct_parity_figs_t *bf = &ck->ref_figs[j];
      double kl_limit = fmax(P->op->kl_mean_factor * bf->kl_mean, P->op->kl_abs_floor);
      double err_limit = P->op->maxerr_factor * bf->max_err_ratio;
      /* An inout (resid holding R') must be exact in every class. */
      if (b->role == HCT_BUF_INOUT ? f->rel_err != 0.0
                                   : !f->is_image && (f->kl_mean > kl_limit || f->max_err_ratio > err_limit))
        st = "parity";
    }
    if (strcmp(st, "pass") != 0 && strcmp(vd->status, "pass") == 0) {
      vd->status = st;
      vd->worst = *f;
      hct__strlcpy(vd->worst_buf, ck->name[j], sizeof vd->worst_buf);
    }
    if (off < sizeof vd->figures - 240)
      off += (size_t)snprintf(vd->figures + off, sizeof vd->figures - off,
                              "%s\"%s\":{\"rel_err\":%.3g,\"max_err_ratio\":%.3g,\"kl_mean\":%.3g,"
                              "\"kl_max\":%.3g,\"argmax\":%.4f,\"mismatches\":%zu,\"unwritten\":%zu,"
                              "\"image_mismatches\":%zu}",
                              j ? "," : "", ck->name[j], f->rel_err, f->max_err_ratio, f->kl_mean,
                              f->kl_max, f->argmax_agree, f->mismatches, f->unwritten,
                              f->image_mismatches);
  }
  snprintf(vd->figures + off, sizeof vd->figures - off, "%s\"run\":%d,\"run_ms\":%.3f}",
           off > 1 ? "," : "", ck->run, ck->run_ms);
}

/* Adds `"checks":[...]` (the checks a passing check call went through) to
 * a verdict's figures. */
static void list_checks(verdict_t *vd, const hct_worker_check_t *ck) {
  size_t off = strlen(vd->figures);
  if (off < 2 || off > sizeof vd->figures - 80) return;
  int repeat = 0, producer = 0;
  for (int j = 0; j < ck->n_more; j++) {
    repeat |= strcmp(ck->more[j].check, "repeat") == 0;
    producer |= strcmp(ck->more[j].check, "producer") == 0;
  }
  snprintf(vd->figures + off - 1, sizeof vd->figures - off + 1, ",\"checks\":[\"parity\"%s%s%s]}",
           repeat ? ",\"repeat\"" : "", ck->deterministic == 1 ? ",\"determinism\"" : "",
           producer ? ",\"producer\"" : "");
}

/*
 * Judges every run of one check call, in the order that explains a failure
 * best: two allocations that disagree on identical inputs (a race: every
 * other difference would follow from it; bitwise classes only), then the
 * first run (the classic check), then the later runs in the same
 * allocation (fresh inputs, the first again: state kept between runs) and
 * the run after the producer.  vd->check names the check that caught it;
 * log gets one line of detail.
 */
void hct__probe_judge_all(probe_t *P, const cand_t *c, const hct_worker_check_t *ck, int T,
                      int pending, uint64_t seed, verdict_t *vd, char *log, size_t len) {
  static const char *const run_text[] = {"first run", "fresh inputs in the same allocation",
                                         "the first inputs again in the same allocation",
                                         "right after a producer that lets it launch early",
                                         "a second allocation"};
  figview_t v0 = view_first(ck);
  judge(P, c, &v0, vd);
  log[0] = '\0';
  if (ck->deterministic == 0 && (c->c.v->parity != HCT_PARITY_KL || c->is_ref)) {
    vd->status = "nondeterminism";
    vd->check = "determinism";
    snprintf(log, len, "T=%d%s seed %llu: two allocations on identical inputs gave different bits: "
             "'%s' %zu elements (first at %zu)", T, pending ? " pending" : "",
             (unsigned long long)seed, ck->nondet_buf, ck->nondet_mismatches, ck->nondet_first);
    return;
  }
  for (int j = -1; j < ck->n_more && strcmp(vd->status, "pass") == 0; j++) {
    if (j >= 0) {
      figview_t v = view_more(ck, j);
      judge(P, c, &v, vd);
      if (strcmp(vd->status, "pass") == 0) continue;
      vd->check = strcmp(ck->more[j].check, "producer") == 0 ? "producer" : "repeat";
      vd->status = vd->check;
    }
    int run = j < 0 ? 0 : ck->more[j].run;
    if (strcmp(vd->status, "pass") != 0)
      snprintf(log, len, "T=%d%s seed %llu, run %d (%s): '%s' %zu mismatches (first at %zu), %zu "
               "unwritten, %zu not finite, %zu image mismatches, rel err %.3g, kl %.3g", T,
               pending ? " pending" : "", (unsigned long long)seed, run,
               run_text[run < 5 ? run : 0], vd->worst_buf, vd->worst.mismatches,
               vd->worst.first_mismatch, vd->worst.unwritten, vd->worst.nonfinite,
               vd->worst.image_mismatches, vd->worst.rel_err, vd->worst.kl_mean);
  }
  if (strcmp(vd->status, "pass") == 0) {
    judge(P, c, &v0, vd); /* the first run's figures stand for the check */
    list_checks(vd, ck);
  }
}

/* The baseline against the float64 reference: normwise relative error
 * under the op's kl.baseline_max_rel_err (1e-5 by default) for every f32
 * output, images exact, so a wrong baseline cannot make every bitwise copy
 * of it pass. */
int hct__probe_judge_baseline(probe_t *P, const hct_worker_check_t *ck, int T, int pending,
                          uint64_t seed, verdict_t *vd) {
  cand_t *base = &P->cands[P->baseline];
  if (ck->deterministic == 0) {
    hct__probe_record_failure(P, base, "determinism", "nondeterminism", T, pending, seed, NULL, NULL);
    return hct__error(HCT_EPARITY, "baseline %s at T=%d%s: two allocations on identical inputs gave "
                      "different bits ('%s', %zu elements): nothing can be checked against it",
                      base->c.label, T, pending ? " with pending" : "", ck->nondet_buf,
                      ck->nondet_mismatches);
  }
  /* Every run: the first, then the later ones of the same allocation. */
  for (int r = -1; r < ck->n_more; r++) {
    figview_t v = r < 0 ? view_first(ck) : view_more(ck, r);
    judge(P, base, &v, vd);
    for (int j = 0; j < ck->n; j++) {
      const hct_parity_figs_t *f = &v.figs[j];
      if (f->unwritten || f->nonfinite || f->image_mismatches ||
          (!f->is_image && f->rel_err > P->op->baseline_max_rel_err)) {
        const char *check = r < 0 ? "parity" : ck->more[r].check;
        hct__probe_record_failure(P, base, check, r >= 0 ? check : f->unwritten ? "unwritten" : "parity", T,
                       pending, seed, vd->figures, NULL);
        return hct__error(HCT_EPARITY,
                          "baseline %s at T=%d%s, run %d: '%s' is off the float64 reference "
                          "(relative error %.3g, %zu unwritten, %zu not finite, %zu not the exact "
                          "image of its f32 output; limit %.0e): nothing can be checked against it",
                          base->c.label, T, pending ? " with pending" : "", v.run, ck->name[j],
                          f->rel_err, f->unwritten, f->nonfinite, f->image_mismatches,
                          P->op->baseline_max_rel_err);
      }
    }
  }
  figview_t v0 = view_first(ck);
  judge(P, base, &v0, vd);
  list_checks(vd, ck);
  return 0;
}

/*
 * Judges one candidate's timed outputs (hct__worker_verify) against the
 * baseline's timed outputs on the same rotating sets: a bitwise class must
 * match every bit on every set; a kl one must have every element written,
 * finite, its images exact, be within the kl bounds against the float64
 * reference on set 0, and on every set within 4 (maxerr_factor + 1) times
 * the baseline's own error (on set 0) of the baseline's outputs (an honest kl
 * candidate is within maxerr_factor + 1 of it by the triangle inequality;
 * one right only on some sets is far off on the others).
 */
int hct__probe_timed_ok(probe_t *P, const cand_t *c, const hct_worker_verify_t *v, char *log,
                    size_t len) {
  int kl = c->c.v->parity == HCT_PARITY_KL;
  double base_err = 0;
  for (int j = 0; j < v->n; j++)
    if (!v->ref_first[j].is_image) base_err = fmax(base_err, v->ref_first[j].max_err_ratio);
  /* 4: room for the baseline's own error to differ from set to set. */
  double dist_limit = 4 * (P->op->maxerr_factor + 1) * fmax(base_err, 1e-9);
  const char *what = NULL;
  if (v->unwritten > 0) what = "elements left unwritten";
  else if (v->nonfinite > 0) what = "elements not finite";
  else if (v->image_mismatches > 0) what = "16-bit images not the rounding of their f32 output";
  else if (!kl && v->mismatches > 0) what = "bits differ from its reference's";
  else if (kl && !(v->max_dist <= dist_limit)) what = "far from the baseline's outputs";
  for (int j = 0; kl && what == NULL && j < v->n; j++) {
    const hct_parity_figs_t *f = &v->first[j], *bf = &v->ref_first[j];
    const hct_buffer_t *b = hct__buffer_find(P->op, v->name[j]);
    if (f->is_image || b == NULL || b->role == HCT_BUF_INOUT) continue;
    if (f->kl_mean > fmax(P->op->kl_mean_factor * bf->kl_mean, P->op->kl_abs_floor) ||
        f->max_err_ratio > P->op->maxerr_factor * bf->max_err_ratio)
      what = "outside the kl bounds against the float64 reference";
  }
  if (what == NULL) return 1;
  snprintf(log, len, "the outputs of its timed launches (%d rotating sets) are wrong: %s (set %d, "
           "'%s': %zu mismatches, %zu unwritten, %zu not finite, %zu image mismatches, distance "
           "%.3g against a limit of %.3g)", v->sets, what, v->worst_set, v->worst_buf, v->mismatches,
           v->unwritten, v->nonfinite, v->image_mismatches, v->max_dist, dist_limit);
  return 0;
}
