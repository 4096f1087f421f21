/*
 * probe_cands.c: the probe's candidates: every point of every variant that
 * fits the card and a count asked for, what each is checked against, and
 * their binaries (compiled on the thread pool, cache first).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_internal.h"

/* 1 when `name` is one of the items of `list` separated by sep (a whole
 * item: a prefix is not a match); a NULL list selects everything. */
static int listed(const char *list, char sep, const char *name) {
  if (list == NULL) return 1;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, sep);
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return 1;
    p += len + (e != NULL);
  }
  return 0;
}

/* --variants: a comma list of names. */
static int variant_selected(const hct_probe_opts_t *o, const char *name) {
  return listed(o->only_variants, ',', name);
}

/* --points: lines "variant {params}" as hctune list prints them. */
static int point_selected(const hct_probe_opts_t *o, const char *label) {
  return listed(o->only_points, '\n', label);
}

/* The candidate of variant v at point pt, or -1. */
static int cand_of(const probe_t *P, const hct_variant_t *v, const hct_point_t *pt) {
  for (int i = 0; i < P->n; i++) {
    const cand_t *c = &P->cands[i];
    int same = c->c.v == v;
    for (int p = 0; same && p < v->n_params; p++) same = c->c.point.v[p] == pt->v[p];
    if (same) return i;
  }
  return -1;
}

/* Fills the next candidate slot with variant v at point pt (P->n is not
 * advanced: the caller decides whether it stays). */
static cand_t *cand_fill(probe_t *P, const hct_variant_t *v, const hct_point_t *pt) {
  cand_t *c = &P->cands[P->n];
  memset(c, 0, sizeof *c);
  c->c.op = P->op;
  c->c.v = v;
  c->c.point = *pt;
  hct__point_json(v, pt, c->c.params, sizeof c->c.params);
  snprintf(c->c.label, sizeof c->c.label, "%s %s", v->name, c->c.params);
  c->job.backend = P->dev.backend;
  hct__strlcpy(c->job.arch, P->dev.arch, sizeof c->job.arch);
  c->job.op = P->op;
  c->job.variant = v;
  c->job.point = *pt;
  return c;
}

/*
 * What each candidate is checked against (cand_t.ref) and how deep it sits
 * in the chain from the baseline.  A bitwise variant whose reference is
 * not the baseline is checked against the reference variant's default
 * point (hct__point_first), which joins the candidates (ref_only) when
 * --variants or --points left it out; a variant whose reference cannot run
 * on this card cannot be checked at all, and is skipped saying so.
 */
static int resolve_references(probe_t *P) {
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    c->competes = hct__variant_competes(P->op, c->c.v);
    c->ref = i == P->baseline ? -1 : P->baseline;
    const hct_variant_t *rv = hct__variant_reference(P->op, c->c.v);
    if (i == P->baseline || rv == NULL || rv->parity == HCT_PARITY_BASELINE) continue;
    hct_point_t pt;
    hct__point_first(rv, &pt);
    int r = cand_of(P, rv, &pt);
    char why[256];
    if (r < 0 && !hct__variant_fits(rv, P->dev.backend, P->dev.arch_num, P->dev.warp_size, why, sizeof why)) {
      hct__probe_progress(P, "skip", 0, 0, "%s: its reference %s cannot run here: %s", c->c.label, rv->name, why);
      c->dead = 1;
      continue;
    }
    if (r < 0) {
      if (P->n == MAX_CANDS) return hct__error(HCT_ERANGE, "op '%s': more than %d candidates", P->op->name, MAX_CANDS);
      cand_t *x = cand_fill(P, rv, &pt);
      x->ref_only = 1;
      r = P->n++;
      c = &P->cands[i];
    }
    c->ref = r;
    P->cands[r].is_ref = 1;
  }
  /* Depths: the manifest loader refuses a cycle, so n rounds settle them. */
  for (int round = 0; round < P->n; round++)
    for (int i = 0; i < P->n; i++) {
      cand_t *c = &P->cands[i];
      c->depth = c->ref < 0 ? 0 : P->cands[c->ref].depth + 1;
    }
  return 0;
}

/* Builds the candidate list: every point of every variant that fits the
 * card and supports at least one of the token counts asked for, and the
 * references they are checked against (resolve_references). */
int hct__probe_candidates(probe_t *P) {
  P->cands = calloc(MAX_CANDS, sizeof *P->cands);
  if (P->cands == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  P->baseline = -1;
  for (int vi = 0; vi < P->op->n_variants; vi++) {
    const hct_variant_t *v = &P->op->variants[vi];
    char why[256];
    int is_base = v->parity == HCT_PARITY_BASELINE;
    if (!is_base && !variant_selected(P->o, v->name)) continue;
    if (!hct__variant_fits(v, P->dev.backend, P->dev.arch_num, P->dev.warp_size, why, sizeof why)) {
      if (is_base)
        return hct__error(HCT_EUNSUPPORTED, "op '%s': baseline '%s' cannot run on %s: %s",
                          P->op->name, v->name, P->dev.name, why);
      hct__probe_progress(P, "skip", 0, 0, "%s: %s", v->name, why);
      continue;
    }
    hct_point_t pts[64];
    int np = hct__param_points(v, pts, 64);
    for (int p = 0; p < np; p++) {
      if (P->n == MAX_CANDS) return hct__error(HCT_ERANGE, "op '%s': more than %d candidates", P->op->name, MAX_CANDS);
      cand_t *c = cand_fill(P, v, &pts[p]);
      if (!is_base && !point_selected(P->o, c->c.label)) continue;
      int any = 0;
      for (int k = 0; k < P->tokens.n; k++)
        if (hct__run_supports(&c->c, &P->dev, P->tokens.t[k], why, sizeof why)) any = 1;
      if (!any) continue;
      /* The baseline is one candidate: its first point that fits. */
      if (is_base && P->baseline >= 0) continue;
      if (is_base) P->baseline = P->n;
      P->n++;
    }
  }
  if (P->baseline < 0)
    return hct__error(HCT_EUNSUPPORTED, "op '%s': its baseline supports none of the token counts asked for",
                      P->op->name);
  return resolve_references(P);
}

static void compile_progress(void *arg, const hct_compile_job_t *job, int done, int total) {
  probe_t *P = arg;
  hct__probe_progress(P, "compile", done, total, "%s %s%s", job->variant->name,
           job->cache_hit ? "(cached)" : "", job->status ? " FAILED" : "");
}

int hct__probe_compile(probe_t *P) {
  /* Two more jobs, compiled with them on the thread pool: the reference,
   * and the comparison kernels the worker would otherwise compile itself
   * (issue 34: about a second a worker, and the cache keeps it). */
  hct_compile_job_t *jobs = calloc(MAX_CANDS + 2, sizeof *jobs);
  int *which = calloc(MAX_CANDS, sizeof *which);
  int nj = 0;
  if (jobs == NULL || which == NULL) {
    free(jobs);
    free(which);
    return hct__error(HCT_ENOMEM, "out of memory");
  }
  for (int i = 0; i < P->n; i++)
    if (!P->cands[i].dead) {
      which[nj] = i;
      jobs[nj++] = P->cands[i].job;
    }
  jobs[nj] = P->ref_job;
  int extra = 1;
  if (P->pcheck_holder == NULL &&
      hct__pcheck_job(P->op, P->dev.backend, P->dev.arch, &P->pcheck_holder, &P->pcheck_job) == 0)
    jobs[nj + extra++] = P->pcheck_job;
  hct__error_clear();
  hct_binary_store_t store;
  hct__db_binary_store(P->db, &store);
  uint64_t t0 = hct__now_ns();
  int rc = hct__compile_all(jobs, nj + extra, &store, compile_progress, P);
  double wall = (double)(hct__now_ns() - t0) / 1e6;
  int hits = jobs[nj].cache_hit, failed = 0;
  double cpu_ms = jobs[nj].cache_hit ? 0 : jobs[nj].compile_ms;
  P->ref_job = jobs[nj];
  if (extra > 1) {
    /* One that fails is the worker's to compile again (and to fall back
     * to the host's figures): never the probe's end. */
    P->pcheck_job = jobs[nj + 1];
    hits += jobs[nj + 1].cache_hit;
    cpu_ms += jobs[nj + 1].cache_hit ? 0 : jobs[nj + 1].compile_ms;
    if (P->pcheck_job.status != 0)
      hct__log(HCT_LOG_WARN, "the parity check kernels: %s (the worker compiles them)", P->pcheck_job.error);
  }
  for (int k = 0; k < nj; k++) {
    P->cands[which[k]].job = jobs[k];
    hits += jobs[k].cache_hit;
    cpu_ms += jobs[k].cache_hit ? 0 : jobs[k].compile_ms;
  }
  free(jobs);
  free(which);
  if (rc != 0) return rc;
  hct__probe_progress_end(P);
  /* Nothing can be checked without the reference. */
  if (P->ref_job.status != 0)
    return hct__error(P->ref_job.status, "op '%s': reference '%s': %s", P->op->name,
                      P->op->reference.v.template_file, P->ref_job.error);
  /* The software key of each binary, before any trial is recorded. */
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (c->job.template_hash[0] && hct__softkey_now(&c->job, P->dev.driver_version, &c->sk) != 0)
      return hct__error(HCT_ENOMEM, "%s: software key: %s", c->c.label, hct_last_error());
  }
  for (int i = 0; i < P->n; i++) {
    cand_t *c = &P->cands[i];
    if (c->dead || c->job.status == 0) continue;
    failed++;
    c->dead = 1;
    char figs[128];
    snprintf(figs, sizeof figs, "{\"error_code\":\"%s\"}", hct_err_name(c->job.status));
    int r = hct__probe_record_failure(P, c, "compile", "compile", 0, 0, 0, figs,
                           c->job.log ? c->job.log : c->job.error);
    if (r != 0) return r;
    hct__log(HCT_LOG_WARN, "%s: %s", c->c.label, c->job.error);
    if (i == P->baseline)
      return hct__error(HCT_ECOMPILE, "baseline %s: %s", c->c.label, c->job.error);
  }
  hct__probe_count(P, HCT_PS_COMPILE, nj + extra - hits);
  hct__probe_compiled(P, nj + extra, hits, failed, wall, cpu_ms);
  return 0;
}
