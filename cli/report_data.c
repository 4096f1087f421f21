/*
 * report_data.c: what `hctune report` shows, read from the DB through db/
 * (devices, the trials as `hctune show --json` has them, decisions,
 * faults) and shaped into one section per card and op.
 *
 * What is plotted at each T is the newest probe that timed that T, so a
 * later probe of a few token counts does not hide the others.  A winner is
 * what the decisions table says (the probe's own verdict, with its
 * significance test), never recomputed here.  The variants' classes and the
 * kl limits come from the op's manifest; without one the report still
 * draws, with classes unknown.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jit.h"
#include "report.h"

/* Grows *arr (elements of size bytes) to hold n + 1; 0 or HCT_ENOMEM. */
static int grow(void **arr, int *cap, int n, size_t size) {
  if (n < *cap) return 0;
  int ncap = *cap ? *cap * 2 : 16;
  void *na = realloc(*arr, (size_t)ncap * size);
  if (na == NULL) return hct__error(HCT_ENOMEM, "out of memory reading the report's data");
  memset((char *)na + (size_t)*cap * size, 0, (size_t)(ncap - *cap) * size);
  *arr = na;
  *cap = ncap;
  return 0;
}

#define GROW(arr, cap, n) grow((void **)&(arr), &(cap), (n), sizeof *(arr))

static const char *jstr(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

static double jnum(json_t *o, const char *k) {
  double v = json_number_value(json_object_get(o, k));
  return isfinite(v) ? v : NAN;
}

static int prefix_of(const char *prefix, const char *s) {
  return prefix == NULL || strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Parameters as canonical JSON text, so trials and decisions compare. */
static void canon_json(json_t *v, char *out, size_t len) {
  if (json_is_string(v)) {
    json_t *p = json_loads(json_string_value(v), 0, NULL);
    if (p == NULL) {
      hct__strlcpy(out, json_string_value(v), len);
      return;
    }
    canon_json(p, out, len);
    json_decref(p);
    return;
  }
  char *s = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
  hct__strlcpy(out, s ? s : "{}", len);
  free(s);
}

static void canon_text(const char *text, char *out, size_t len) {
  json_t *p = json_loads(text ? text : "{}", 0, NULL);
  if (p == NULL) hct__strlcpy(out, text ? text : "", len);
  else canon_json(p, out, len);
  json_decref(p);
}

/* ---- sections ------------------------------------------------------------ */

typedef struct builder_s {
  hct_report_t *r;
  int cap_sec;
  const hct_db_device_t *devs;
  int ndev;
} builder_t;

/* Per-section growth bookkeeping, freed once the section is built. */
typedef struct caps_s {
  int runs, fam, ser, tm, Ts;
} caps_t;

/*
 * The card's limits when its probe measured none: per model, by the name
 * the driver gives.  The H200's copy rate is the device-to-device copy
 * measured on 2026-11-30 (docs/ops/hc_read.md, "Floors"); the rest are the
 * vendors' nominal figures.  Peak: dense bf16 tensor-core throughput
 * (no sparsity), nominal.  A card not listed gets no floor.
 */
static const struct {
  const char *name;
  double copy_bw;   /* bytes/s */
  double peak;      /* flop/s */
  const char *note;
} nominal_limits[] = {
    {"NVIDIA H200", 4.27e12, 989e12,
     "nominal: 4.27 TB/s copy (an H200 measured 2026-11-30), 989 TFLOP/s bf16"},
    {"NVIDIA H100 80GB HBM3", 3.35e12, 989e12, "nominal: 3.35 TB/s, 989 TFLOP/s bf16 (H100 SXM)"},
    {"NVIDIA H100 PCIe", 2.0e12, 756e12, "nominal: 2.0 TB/s, 756 TFLOP/s bf16 (H100 PCIe)"},
    {"NVIDIA A100-SXM4-80GB", 2.04e12, 312e12, "nominal: 2.04 TB/s, 312 TFLOP/s bf16 (A100 SXM)"},
};

/* The card's copy bandwidth and peak: what its probe measured
 * (fingerprint "copy_bytes_per_s", hct__db_device_copy_bw_set), else the
 * nominal table; fp may be NULL. */
static void card_limits(hct_rp_section_t *s, const char *fp) {
  json_t *j = fp != NULL ? json_loads(fp, 0, NULL) : NULL;
  double bw = json_number_value(json_object_get(j, "copy_bytes_per_s"));
  const char *at = json_string_value(json_object_get(j, "copy_measured_at"));
  for (size_t i = 0; i < HCT_ARRAY_SIZE(nominal_limits); i++)
    if (strcmp(nominal_limits[i].name, s->name) == 0) {
      s->copy_bw = nominal_limits[i].copy_bw;
      s->peak_flops = nominal_limits[i].peak;
      hct__strlcpy(s->limits_note, nominal_limits[i].note, sizeof s->limits_note);
    }
  if (isfinite(bw) && bw > 1e9 && bw < 1e15) {
    s->copy_bw = bw;
    s->bw_measured = 1;
    snprintf(s->limits_note, sizeof s->limits_note, "measured: %.2f TB/s copy by hctune probe%s%s",
             bw / 1e12, at ? " " : "", at ? at : "");
    if (s->peak_flops > 0) {
      size_t n = strlen(s->limits_note);
      snprintf(s->limits_note + n, sizeof s->limits_note - n, "; peak nominal");
    }
  }
  json_decref(j);
}

static int section_for(builder_t *b, const char *uuid, const char *op, const hct_db_keys_t *k,
                       int *out) {
  hct_report_t *r = b->r;
  for (int i = 0; i < r->nsec; i++)
    if (strcmp(r->sec[i].uuid, uuid) == 0 && strcmp(r->sec[i].op, op) == 0) {
      *out = i;
      return 0;
    }
  int err = GROW(r->sec, b->cap_sec, r->nsec);
  if (err) return err;
  hct_rp_section_t *s = &r->sec[r->nsec];
  memset(s, 0, sizeof *s);
  hct__strlcpy(s->uuid, uuid, sizeof s->uuid);
  hct__strlcpy(s->op, op, sizeof s->op);
  s->baseline = -1;
  if (k) {
    hct__strlcpy(s->host, k->host, sizeof s->host);
    hct__strlcpy(s->driver, k->driver_version, sizeof s->driver);
    hct__strlcpy(s->compiler, k->compiler_version, sizeof s->compiler);
    hct__strlcpy(s->hctune, k->hctune_version, sizeof s->hctune);
  }
  for (int i = 0; i < b->ndev; i++)
    if (strcmp(b->devs[i].uuid, uuid) == 0) {
      hct__strlcpy(s->name, b->devs[i].name, sizeof s->name);
      hct__strlcpy(s->arch, b->devs[i].arch, sizeof s->arch);
      card_limits(s, b->devs[i].fingerprint_json);
    }
  if (s->copy_bw == 0) card_limits(s, NULL);
  *out = r->nsec++;
  return 0;
}

static int sec_cmp(const void *a, const void *b) {
  const hct_rp_section_t *x = a, *y = b;
  int c = strcmp(x->uuid, y->uuid);
  return c ? c : strcmp(x->op, y->op);
}

/* ---- families and series ---------------------------------------------- */

static int family_for(hct_rp_section_t *s, caps_t *c, const hct_op_t *man, const char *variant,
                      int *out) {
  for (int i = 0; i < s->nfam; i++)
    if (strcmp(s->fam[i].variant, variant) == 0) {
      *out = i;
      return 0;
    }
  int err = GROW(s->fam, c->fam, s->nfam);
  if (err) return err;
  hct_rp_family_t *f = &s->fam[s->nfam];
  hct__strlcpy(f->variant, variant, sizeof f->variant);
  f->klass = HCT_RP_UNKNOWN;
  const hct_variant_t *v = man ? hct__variant_find(man, variant) : NULL;
  if (v) {
    static const int by_parity[] = {[HCT_PARITY_BASELINE] = HCT_RP_BASELINE,
                                    [HCT_PARITY_BITWISE] = HCT_RP_BITWISE,
                                    [HCT_PARITY_KL] = HCT_RP_KL};
    f->klass = by_parity[v->parity];
  }
  if (f->klass == HCT_RP_BASELINE && s->baseline < 0) s->baseline = s->nfam;
  *out = s->nfam++;
  return 0;
}

static int series_for(hct_rp_section_t *s, caps_t *c, const hct_op_t *man, const char *variant,
                      const char *params, int *out) {
  int fam, err = family_for(s, c, man, variant, &fam);
  if (err) return err;
  for (int i = 0; i < s->nser; i++)
    if (s->ser[i].family == fam && strcmp(s->ser[i].params, params) == 0) {
      *out = i;
      return 0;
    }
  if ((err = GROW(s->ser, c->ser, s->nser)) != 0) return err;
  hct_rp_series_t *x = &s->ser[s->nser];
  x->family = fam;
  hct__strlcpy(x->params, params, sizeof x->params);
  x->worst_ratio = -1;
  x->worst_value = NAN;
  x->worst_limit = NAN;
  *out = s->nser++;
  return 0;
}

/* A series' label: only the parameters whose value differs between the
 * points of its variant ("NG=4 PDL=1"); "" when it has one point. */
static void label_series(hct_rp_section_t *s) {
  for (int i = 0; i < s->nser; i++) {
    hct_rp_series_t *x = &s->ser[i];
    json_t *p = json_loads(x->params, 0, NULL);
    size_t off = 0;
    x->label[0] = '\0';
    if (!json_is_object(p)) {
      hct__strlcpy(x->label, x->params, sizeof x->label);
      json_decref(p);
      continue;
    }
    const char *key;
    json_t *v;
    json_object_foreach(p, key, v) {
      int varies = 0;
      for (int j = 0; j < s->nser && !varies; j++) {
        if (j == i || s->ser[j].family != x->family) continue;
        json_t *q = json_loads(s->ser[j].params, 0, NULL);
        varies = !json_equal(json_object_get(q, key), v);
        json_decref(q);
      }
      if (!varies || off >= sizeof x->label) continue;
      char *val = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
      off += (size_t)snprintf(x->label + off, sizeof x->label - off, "%s%s=%s", off ? " " : "",
                              key, val ? val : "?");
      free(val);
    }
    json_decref(p);
  }
}

static int run_index(hct_rp_section_t *s, caps_t *c, const char *id, int64_t at, int64_t trial,
                     int *out) {
  for (int i = 0; i < s->nruns; i++)
    if (strcmp(s->runs[i].id, id) == 0) {
      if (at < s->runs[i].started) s->runs[i].started = at;
      if (trial < s->runs[i].first_id) s->runs[i].first_id = trial;
      *out = i;
      return 0;
    }
  int err = GROW(s->runs, c->runs, s->nruns);
  if (err) return err;
  hct__strlcpy(s->runs[s->nruns].id, id, sizeof s->runs[s->nruns].id);
  s->runs[s->nruns].started = at;
  s->runs[s->nruns].first_id = trial;
  *out = s->nruns++;
  return 0;
}

static int add_T(hct_rp_section_t *s, caps_t *c, int T) {
  if (T < 1) return 0;
  for (int i = 0; i < s->nT; i++)
    if (s->Ts[i] == T) return 0;
  int err = GROW(s->Ts, c->Ts, s->nT);
  if (err) return err;
  s->Ts[s->nT++] = T;
  return 0;
}

/* The counts a decision shows at: those it was measured at (its evidence's
 * per-T counts: a range over sparse counts covers many more that were not
 * probed), else the ends of its range. */
static int add_decision_Ts(hct_rp_section_t *s, caps_t *c, const hct_db_decision_t *d) {
  json_t *ev = json_loads(d->evidence_json, 0, NULL), *x;
  size_t i;
  int err = 0, any = 0;
  json_array_foreach(json_object_get(ev, "per_T"), i, x) {
    json_int_t T = json_integer_value(json_object_get(x, "T"));
    if (err != 0 || T < d->tmin || T > d->tmax) continue;
    err = add_T(s, c, (int)T);
    any = 1;
  }
  json_decref(ev);
  if (err == 0 && !any) err = add_T(s, c, d->tmin);
  if (err == 0 && !any) err = add_T(s, c, d->tmax);
  return err;
}

static int int_cmp(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int hct__report_T_index(const hct_rp_section_t *s, int T) {
  for (int i = 0; i < s->nT; i++)
    if (s->Ts[i] == T) return i;
  return -1;
}

/* ---- parity figures against the limits of the class ------------------- */

/* A 16-bit output "<x>_bf16"/"<x>_f16" beside an f32 "<x>" is an image of
 * it, judged by exactness and not by error bounds (tuner/parity.c). */
static int is_image(const hct_op_t *man, const char *name) {
  const char *us = strrchr(name, '_');
  if (man == NULL || us == NULL || (strcmp(us, "_bf16") != 0 && strcmp(us, "_f16") != 0)) return 0;
  for (int i = 0; i < man->n_buffers; i++)
    if (strlen(man->buffers[i].name) == (size_t)(us - name) &&
        strncmp(man->buffers[i].name, name, (size_t)(us - name)) == 0)
      return 1;
  return 0;
}

/* Records figure `what` of buffer `buf` (value against limit) on x when it
 * is the worst so far.  A limit of 0 means "must be 0". */
static void consider(hct_rp_series_t *x, const char *what, const char *buf, int T, double value,
                     double limit) {
  if (!isfinite(value)) value = INFINITY;
  double ratio = limit > 0 ? value / limit : value > 0 ? INFINITY : 0;
  if (ratio <= x->worst_ratio) return;
  x->worst_ratio = ratio;
  x->worst_value = value;
  x->worst_limit = limit;
  x->parity_T = T;
  snprintf(x->worst_what, sizeof x->worst_what, "%s of %.40s", what, buf);
}

/* The figures of one parity trial of x against its class's limits, the
 * baseline's figures of the same check (base, may be NULL) giving the kl
 * limits as the probe's judge computes them. */
static void judge_figures(const hct_rp_section_t *s, const hct_op_t *man, hct_rp_series_t *x,
                          int klass, int T, json_t *figs, json_t *base) {
  const char *name;
  json_t *f;
  json_object_foreach(figs, name, f) {
    if (!json_is_object(f)) continue;
    if (klass == HCT_RP_BITWISE) {
      consider(x, "mismatching elements", name, T, jnum(f, "mismatches"), 0);
    } else if (klass == HCT_RP_KL) {
      const hct_buffer_t *b = man ? hct__buffer_find(man, name) : NULL;
      json_t *bf = json_object_get(base, name);
      if (is_image(man, name)) {
        consider(x, "image mismatches", name, T, jnum(f, "image_mismatches"), 0);
      } else if (b && b->role == HCT_BUF_INOUT) {
        consider(x, "relative error", name, T, jnum(f, "rel_err"), 0);
      } else if (json_is_object(bf)) {
        double kl_limit = fmax(s->kl_mean_factor * jnum(bf, "kl_mean"), s->kl_abs_floor);
        consider(x, "kl_mean", name, T, jnum(f, "kl_mean"), kl_limit);
        consider(x, "max_err_ratio", name, T, jnum(f, "max_err_ratio"),
                 s->maxerr_factor * jnum(bf, "max_err_ratio"));
      }
    } else if (klass == HCT_RP_BASELINE && !is_image(man, name)) {
      /* The baseline is held to the float64 reference by the probe; its
       * error is shown, with no class limit to compare against. */
      double v = jnum(f, "rel_err");
      if (isfinite(v) && (x->worst_ratio < 0 || v > x->worst_value)) {
        x->worst_ratio = 0;
        x->worst_value = v;
        x->worst_limit = NAN;
        x->parity_T = T;
        snprintf(x->worst_what, sizeof x->worst_what, "relative error of %.40s", name);
      }
    }
    /* Last, so that a clean check names its class's own figure. */
    consider(x, "unwritten elements", name, T, jnum(f, "unwritten"), 0);
  }
}

static int same_check(json_t *a, json_t *b) {
  return strcmp(jstr(a, "run_id"), jstr(b, "run_id")) == 0 &&
         json_integer_value(json_object_get(a, "tokens")) ==
             json_integer_value(json_object_get(b, "tokens")) &&
         json_integer_value(json_object_get(a, "pending")) ==
             json_integer_value(json_object_get(b, "pending")) &&
         strcmp(jstr(a, "seed"), jstr(b, "seed")) == 0;
}

/* A parity trial and the series it checked. */
typedef struct ptrial_s {
  json_t *t;
  int series;
} ptrial_t;

static void parity_of(hct_rp_section_t *s, const hct_op_t *man, const ptrial_t *pt, int np) {
  /* The baseline's checks, whose figures set the kl limits of the others. */
  int *base = malloc((size_t)(np ? np : 1) * sizeof *base), nb = 0;
  for (int k = 0; base && k < np; k++)
    if (s->ser[pt[k].series].family == s->baseline) base[nb++] = k;
  /* Per series, the newest run that checked it (trials come newest first). */
  const char **run = calloc((size_t)(s->nser ? s->nser : 1), sizeof *run);
  if (base == NULL || run == NULL) {
    free(base);
    free(run);
    return; /* no parity figures rather than no page */
  }
  for (int k = 0; k < np; k++) {
    json_t *t = pt[k].t;
    hct_rp_series_t *x = &s->ser[pt[k].series];
    if (run[pt[k].series] == NULL) run[pt[k].series] = jstr(t, "run_id");
    if (strcmp(run[pt[k].series], jstr(t, "run_id")) != 0) continue;
    x->checks++;
    const char *st = jstr(t, "status");
    if (strcmp(st, "pass") == 0) x->passed++;
    else if (x->worst_status[0] == '\0') hct__strlcpy(x->worst_status, st, sizeof x->worst_status);
    json_t *bf = NULL;
    for (int j = 0; j < nb && bf == NULL; j++)
      if (same_check(pt[base[j]].t, t)) bf = json_object_get(pt[base[j]].t, "figures");
    json_t *figs = json_object_get(t, "figures");
    if (json_is_object(figs))
      judge_figures(s, man, x, s->fam[x->family].klass,
                    (int)json_integer_value(json_object_get(t, "tokens")), figs, bf);
  }
  free(base);
  free(run);
}

/* A decision's figures are those of its first T; the probe keeps every
 * T's in the evidence ({"per_T":[{"T":..,"us":..,"baseline_us":..,
 * "ci":[lo,hi]}]}): take T's from there when it has them. */
static void per_T_figures(const char *evidence, int T, hct_rp_win_t *w) {
  json_t *e = json_loads(evidence, 0, NULL);
  size_t i;
  json_t *x;
  json_array_foreach(json_object_get(e, "per_T"), i, x) {
    if (json_integer_value(json_object_get(x, "T")) != T) continue;
    double us = jnum(x, "us"), base = jnum(x, "baseline_us");
    json_t *ci = json_object_get(x, "ci");
    if (!(us > 0)) break;
    w->median = us;
    w->baseline = base > 0 ? base : NAN;
    w->lo = json_number_value(json_array_get(ci, 0));
    w->hi = json_number_value(json_array_get(ci, 1));
    if (!(w->lo > 0 && w->lo <= us)) w->lo = NAN;
    if (!(w->hi >= us && isfinite(w->hi))) w->hi = NAN;
    break;
  }
  json_decref(e);
}

/* ---- one section ---------------------------------------------------------- */

/* The manifest's figures of the section, and its baseline as a family
 * even before a trial names it. */
static int from_manifest(hct_rp_section_t *s, caps_t *c, const hct_op_t *man) {
  s->have_manifest = man != NULL;
  s->timing_cold = man ? man->timing_cold : 1;
  s->batch = man ? man->batch : 0;
  s->kl_mean_factor = man ? man->kl_mean_factor : NAN;
  s->kl_abs_floor = man ? man->kl_abs_floor : NAN;
  s->maxerr_factor = man ? man->maxerr_factor : NAN;
  int err = 0;
  for (int i = 0; man && i < man->n_variants && err == 0; i++)
    if (man->variants[i].parity == HCT_PARITY_BASELINE) {
      int fam;
      err = family_for(s, c, man, man->variants[i].name, &fam);
    }
  return err;
}

/* One timing trial of the section into s->tm; failed ones are counted. */
static int add_timing(hct_rp_section_t *s, caps_t *c, const hct_op_t *man, json_t *t,
                      const char *params, int T) {
  const char *st = jstr(t, "status");
  double med = jnum(t, "median_us");
  if ((strcmp(st, "pass") != 0 && strcmp(st, "pruned") != 0) || !(med > 0)) {
    s->failed_timings++;
    return 0;
  }
  hct_rp_timing_t m = {0};
  m.id = json_integer_value(json_object_get(t, "id"));
  m.T = T;
  m.cold = json_integer_value(json_object_get(t, "cold")) != 0;
  m.pruned = strcmp(st, "pruned") == 0;
  m.median = med;
  m.lo = jnum(t, "ci_lo_us");
  m.hi = jnum(t, "ci_hi_us");
  /* An interval that does not hold the median, or spans more than 100x
   * around it (no timing does), is not drawn: it would flatten the plot. */
  if (!(m.lo > 0 && m.lo <= med && m.lo * 100 >= med)) m.lo = med;
  if (!(m.hi >= med && m.hi <= med * 100)) m.hi = med;
  m.samples = (int)json_integer_value(json_object_get(t, "samples"));
  json_t *dec = json_object_get(json_object_get(t, "figures"), "decides");
  m.deciding = !(json_is_integer(dec) && json_integer_value(dec) == 0);
  int err = series_for(s, c, man, jstr(t, "variant"), params, &m.series);
  if (err == 0)
    err = run_index(s, c, jstr(t, "run_id"), json_integer_value(json_object_get(t, "created_at")),
                    m.id, &m.run);
  if (err == 0) err = GROW(s->tm, c->tm, s->ntm);
  if (err == 0) s->tm[s->ntm++] = m;
  return err;
}

/* The section's trials: timings into s->tm, parity checks into pt[*np]
 * (for parity_of). */
static int read_trials(hct_rp_section_t *s, caps_t *c, const hct_op_t *man, json_t *arr,
                       ptrial_t *pt, int *np) {
  int err = 0;
  for (size_t i = 0; i < json_array_size(arr) && err == 0; i++) {
    json_t *t = json_array_get(arr, i);
    if (strcmp(jstr(t, "uuid"), s->uuid) != 0 || strcmp(jstr(t, "op"), s->op) != 0) continue;
    const char *kind = jstr(t, "kind");
    char params[256];
    canon_json(json_object_get(t, "params"), params, sizeof params);
    json_int_t T = json_integer_value(json_object_get(t, "tokens"));
    if (T < 1 || T > INT_MAX) continue;
    if (strcmp(kind, "parity") == 0) {
      pt[*np].t = t;
      err = series_for(s, c, man, jstr(t, "variant"), params, &pt[(*np)++].series);
    } else if (strcmp(kind, "timing") == 0) {
      err = add_timing(s, c, man, t, params, (int)T);
    }
  }
  return err;
}

/* Runs in time order, and the trials' indexes with them. */
static int order_runs(hct_rp_section_t *s) {
  if (s->nruns < 2) return 0;
  int err = 0;
  int *order = malloc((size_t)s->nruns * sizeof *order);
  hct_rp_run_t *sorted = malloc((size_t)s->nruns * sizeof *sorted);
  if (order == NULL || sorted == NULL) err = hct__error(HCT_ENOMEM, "out of memory");
  for (int i = 0; err == 0 && i < s->nruns; i++) {
    int rank = 0;
    for (int j = 0; j < s->nruns; j++)
      rank += s->runs[j].started < s->runs[i].started ||
              (s->runs[j].started == s->runs[i].started &&
               (s->runs[j].first_id < s->runs[i].first_id ||
                (s->runs[j].first_id == s->runs[i].first_id && j < i)));
    order[i] = rank;
    sorted[rank] = s->runs[i];
  }
  if (err == 0) {
    memcpy(s->runs, sorted, (size_t)s->nruns * sizeof *sorted);
    for (int i = 0; i < s->ntm; i++) s->tm[i].run = order[s->tm[i].run];
  }
  free(order);
  free(sorted);
  return err;
}

/* At each T, the newest run that timed it in the deciding mode is the one
 * plotted; then the T's of the decisions join, in order. */
static int mark_plotted(hct_rp_section_t *s, caps_t *c, const hct_op_t *man) {
  int err = 0;
  for (int i = 0; err == 0 && i < s->ntm; i++)
    if (s->tm[i].deciding) err = add_T(s, c, s->tm[i].T);
  int *newest = calloc(s->nT ? (size_t)s->nT : 1, sizeof *newest);
  if (err == 0 && newest == NULL) err = hct__error(HCT_ENOMEM, "out of memory");
  for (int i = 0; err == 0 && i < s->ntm; i++) {
    int k = hct__report_T_index(s, s->tm[i].T);
    if (k >= 0 && s->tm[i].deciding && s->tm[i].run + 1 > newest[k]) newest[k] = s->tm[i].run + 1;
  }
  for (int i = 0; err == 0 && i < s->ntm; i++) {
    int k = hct__report_T_index(s, s->tm[i].T);
    s->tm[i].plotted = k >= 0 && s->tm[i].run + 1 == newest[k];
  }
  free(newest);
  for (int i = 0; err == 0 && i < s->ndec; i++) {
    int sr;
    char params[256];
    canon_text(s->dec[i].params, params, sizeof params);
    err = series_for(s, c, man, s->dec[i].variant, params, &sr);
    if (err == 0) err = add_decision_Ts(s, c, &s->dec[i]);
  }
  if (err == 0 && s->nT > 1) qsort(s->Ts, (size_t)s->nT, sizeof *s->Ts, int_cmp);
  return err;
}

/* Decision d as the winner w at T (the newest of two for one T). */
static void take_win(hct_rp_section_t *s, const hct_db_decision_t *d, int T, hct_rp_win_t *w) {
  /* Two decisions of one T (kept apart by a key this report does not
   * read, such as the software they were made with): the newest. */
  if (w->set && w->decided_at > d->decided_at) return;
  if (w->set && w->family >= 0) s->fam[w->family].wins--;
  w->set = 1;
  hct__strlcpy(w->variant, d->variant, sizeof w->variant);
  canon_text(d->params, w->params, sizeof w->params);
  hct__strlcpy(w->variant_class, d->variant_class, sizeof w->variant_class);
  w->median = d->median_us;
  w->lo = d->ci_lo_us;
  w->hi = d->ci_hi_us;
  w->baseline = d->baseline_us;
  w->samples = d->samples;
  w->decided_at = d->decided_at;
  per_T_figures(d->evidence_json, T, w);
  w->series = w->family = w->trial = -1;
  for (int j = 0; j < s->nser; j++)
    if (strcmp(s->fam[s->ser[j].family].variant, w->variant) == 0 &&
        strcmp(s->ser[j].params, w->params) == 0)
      w->series = j, w->family = s->ser[j].family;
  for (int j = 0; j < s->ntm; j++)
    if (s->tm[j].plotted && s->tm[j].deciding && s->tm[j].T == T &&
        s->tm[j].series == w->series && (w->trial < 0 || s->tm[j].id > s->tm[w->trial].id))
      w->trial = j;
  if (w->family >= 0) s->fam[w->family].wins++;
}

/* The winners of each class at each T shown. */
static int find_winners(hct_rp_section_t *s) {
  static const char *const parity_names[HCT_RP_NPAR] = {"bitwise", "kl"};
  for (int p = 0; p < HCT_RP_NPAR; p++) {
    s->win[p] = calloc(s->nT ? (size_t)s->nT : 1, sizeof *s->win[p]);
    if (s->win[p] == NULL) return hct__error(HCT_ENOMEM, "out of memory");
    for (int i = 0; i < s->ndec; i++) {
      const hct_db_decision_t *d = &s->dec[i];
      if (strcmp(d->parity, parity_names[p]) != 0) continue;
      for (int k = 0; k < s->nT; k++)
        if (s->Ts[k] >= d->tmin && s->Ts[k] <= d->tmax) take_win(s, d, s->Ts[k], &s->win[p][k]);
    }
  }
  return 0;
}

/*
 * The floor of each T shown: the bytes the op must move over the card's
 * copy bandwidth, or its flops over the card's peak when the manifest
 * declares them and that takes longer (hct__op_floor_bytes, hct__op_flops).
 * No manifest, or no bandwidth for the card: no floors (NAN).
 */
static int compute_floors(hct_rp_section_t *s, const hct_op_t *man) {
  s->floor_us = calloc(s->nT ? (size_t)s->nT : 1, sizeof *s->floor_us);
  s->floor_compute = calloc(s->nT ? (size_t)s->nT : 1, sizeof *s->floor_compute);
  if (s->floor_us == NULL || s->floor_compute == NULL)
    return hct__error(HCT_ENOMEM, "out of memory");
  for (int k = 0; k < s->nT; k++) {
    double bytes = 0, flops = 0;
    s->floor_us[k] = NAN;
    if (man == NULL || !(s->copy_bw > 0)) continue;
    if (hct__op_floor_bytes(man, s->Ts[k], &bytes) != 0 ||
        hct__op_flops(man, s->Ts[k], &flops) != 0) {
      hct__error_clear(); /* a floor left out, not a report refused */
      continue;
    }
    double mem = bytes / s->copy_bw * 1e6;
    double cmp = flops > 0 && s->peak_flops > 0 ? flops / s->peak_flops * 1e6 : 0;
    s->floor_us[k] = fmax(mem, cmp);
    s->floor_compute[k] = cmp > mem;
  }
  if (man != NULL) s->has_flops = man->flops_expr[0] != '\0';
  return 0;
}

double hct__report_floor_fraction(const hct_rp_section_t *s, int k, const hct_rp_win_t *w) {
  if (s->floor_us == NULL || k < 0 || k >= s->nT || !w->set) return NAN;
  double med = w->trial >= 0 ? s->tm[w->trial].median : w->median;
  return med > 0 && s->floor_us[k] > 0 ? s->floor_us[k] / med : NAN;
}

/* ---- one section ---------------------------------------------------------- */

static int build_section(hct_report_t *r, hct_rp_section_t *s, json_t *arr) {
  caps_t c = {0};
  hct_op_t *man = NULL;
  if (r->kernels_dir[0] && hct__manifest_load(r->kernels_dir, s->op, &man) != 0) man = NULL;
  hct__error_clear();
  int err = from_manifest(s, &c, man);
  size_t n = json_array_size(arr);
  ptrial_t *ptrials = calloc(n ? n : 1, sizeof *ptrials);
  int np = 0;
  if (err == 0 && ptrials == NULL) err = hct__error(HCT_ENOMEM, "out of memory reading trials");
  if (err == 0) err = read_trials(s, &c, man, arr, ptrials, &np);
  if (err == 0) err = order_runs(s);
  if (err == 0) err = mark_plotted(s, &c, man);
  if (err == 0) err = find_winners(s);
  if (err == 0) err = compute_floors(s, man);
  if (err == 0) {
    label_series(s);
    parity_of(s, man, ptrials, np);
  }
  free(ptrials);
  hct__manifest_free(man);
  return err;
}

/* ---- the whole report ------------------------------------------------------ */

int hct__report_load(hct_db_t *db, const hct_report_filter_t *f, hct_report_t *r) {
  memset(r, 0, sizeof *r);
  hct__strlcpy(r->db_path, hct__db_path(db), sizeof r->db_path);
  r->generated = hct__unix_time();
  if (hct__kernels_dir(r->kernels_dir, sizeof r->kernels_dir) != 0) r->kernels_dir[0] = '\0';
  hct__error_clear();

  builder_t b = {r, 0, NULL, 0};
  hct_db_device_t *devs = NULL;
  hct_db_decision_t *dec = NULL;
  hct_db_fault_t *faults = NULL;
  int ndev = 0, ndec = 0, nfaults = 0;
  char *text = NULL;
  json_t *arr = NULL;
  int err = hct__db_devices_list(db, &devs, &ndev);
  if (err == 0) err = hct__db_decisions_list(db, &dec, &ndec);
  if (err == 0) err = hct__db_faults_list(db, &faults, &nfaults);
  if (err == 0) err = hct__db_trials_json(db, f->device, f->op, NULL, 0, &text);
  if (err == 0) {
    json_error_t jerr;
    arr = json_loads(text, 0, &jerr);
    if (!json_is_array(arr))
      err = hct__error(HCT_EINVAL, "trials of '%s': bad JSON: %s", r->db_path, jerr.text);
  }
  b.devs = devs;
  b.ndev = ndev;
  r->ntrials = (int)json_array_size(arr);

  /* Sections: every (card, op) that a trial, decision or fault names. */
  for (size_t i = 0; err == 0 && i < json_array_size(arr); i++) {
    json_t *t = json_array_get(arr, i);
    hct_db_keys_t k = {0};
    hct__strlcpy(k.host, jstr(t, "host"), sizeof k.host);
    hct__strlcpy(k.driver_version, jstr(t, "driver_version"), sizeof k.driver_version);
    hct__strlcpy(k.compiler_version, jstr(t, "compiler_version"), sizeof k.compiler_version);
    hct__strlcpy(k.hctune_version, jstr(t, "hctune_version"), sizeof k.hctune_version);
    int sec;
    err = section_for(&b, jstr(t, "uuid"), jstr(t, "op"), &k, &sec);
  }
  for (int i = 0; err == 0 && i < ndec; i++) {
    if (!prefix_of(f->device, dec[i].keys.uuid) || (f->op && strcmp(f->op, dec[i].op) != 0))
      continue;
    int sec;
    if ((err = section_for(&b, dec[i].keys.uuid, dec[i].op, &dec[i].keys, &sec)) != 0) break;
    hct_rp_section_t *s = &r->sec[sec];
    hct_db_decision_t *nd = realloc(s->dec, (size_t)(s->ndec + 1) * sizeof *nd);
    if (nd == NULL) {
      err = hct__error(HCT_ENOMEM, "out of memory");
      break;
    }
    s->dec = nd;
    s->dec[s->ndec++] = dec[i];
  }
  for (int i = 0; err == 0 && i < nfaults; i++) {
    if (!prefix_of(f->device, faults[i].keys.uuid) || (f->op && strcmp(f->op, faults[i].op) != 0))
      continue;
    int sec;
    if ((err = section_for(&b, faults[i].keys.uuid, faults[i].op, &faults[i].keys, &sec)) != 0)
      break;
    hct_rp_section_t *s = &r->sec[sec];
    hct_db_fault_t *nf = realloc(s->faults, (size_t)(s->nfaults + 1) * sizeof *nf);
    if (nf == NULL) {
      err = hct__error(HCT_ENOMEM, "out of memory");
      break;
    }
    s->faults = nf;
    s->faults[s->nfaults++] = faults[i];
    faults[i].log = NULL; /* the section owns it now */
  }
  if (err == 0 && r->nsec > 1) qsort(r->sec, (size_t)r->nsec, sizeof *r->sec, sec_cmp);
  for (int i = 0; err == 0 && i < r->nsec; i++) err = build_section(r, &r->sec[i], arr);
  for (int i = 0; err == 0 && i < r->nsec; i++) {
    hct_rp_section_t *s = &r->sec[i];
    err = hct__db_run_breakdown(db, s->uuid, s->op, &s->breakdown, s->breakdown_run, &s->breakdown_at);
  }

  json_decref(arr);
  free(text);
  free(dec);
  hct__db_faults_free(faults, nfaults);
  hct__db_devices_free(devs, ndev);
  return err;
}

void hct__report_free(hct_report_t *r) {
  for (int i = 0; i < r->nsec; i++) {
    hct_rp_section_t *s = &r->sec[i];
    free(s->runs);
    free(s->fam);
    free(s->ser);
    free(s->tm);
    free(s->Ts);
    for (int p = 0; p < HCT_RP_NPAR; p++) free(s->win[p]);
    free(s->floor_us);
    free(s->floor_compute);
    free(s->dec);
    free(s->breakdown);
    hct__db_faults_free(s->faults, s->nfaults);
  }
  free(r->sec);
  memset(r, 0, sizeof *r);
}
