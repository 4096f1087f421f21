/*
 * merge.c: `hctune db merge`: many fleet sets into one, by evidence.
 *
 * Rows are pooled: a row whose uid appears in several inputs is kept once
 * (and refuses the merge when the copies differ: two hosts cannot have
 * measured the same trial).  The inputs' decisions are dropped; decisions
 * are recomputed from the pooled trials, so a merge of merges, or of the
 * same files twice, or in another order, decides the same.
 *
 * A group is what one decision may be shared across: the card model key,
 * the environment (driver, compiler, hctune version) and the op.  Within
 * it a candidate is (variant, params, template hash, software key): the
 * software key of "Verdicts an engine can trust" covers the template, its
 * options and the environment, so a decision applies to a card only when
 * its model key and its software key both match.
 *
 * In a group:
 *   - a variant that passed parity on one card and failed it (a trial or
 *     a fault) on another is quarantined for the group and flagged
 *     "conflict": identical cards must agree on correctness; one that
 *     passed a parity check on no card is left out too (what is served
 *     passed its checks on this model);
 *   - a card whose timings run slow against its peers is flagged
 *     "outlier" and left out of the pool: for every (candidate, T) it
 *     shares with other cards, its median over the median of the others'
 *     medians; the card's ratio is the median of those, and it is an
 *     outlier when that ratio exceeds 1 + outlier_pct / 100;
 *   - each card contributes its newest deciding timing per (candidate, T);
 *     the pooled figures of a candidate at T are the median of the cards'
 *     medians, the lowest CI bound and the highest (the union of the
 *     cards' intervals), and the sum of samples.  With one card this is
 *     that card's own figures, so merging one export decides what its
 *     probe decided;
 *   - the winner per T and class comes from hct__pick_winner
 *     (db/decide.c), the probe's own rule, with the baseline as the
 *     incumbent and the probe's margin; per-T winners become ranges with
 *     hct__cover_ranges (db/decide.c), the probe's own function: each
 *     count timed covers up to the geometric midpoints to its neighbours,
 *     and the outermost reach the ends of the range the inputs' own
 *     decisions covered (the op's range as the probes saw it), so a merge
 *     of sparse counts (prefill: 16, 128, ..., 32768) leaves no gaps
 *     between them and decides what one probe of the same figures would.
 * db/decide.h holds both rules, below the tuner that calls them too, so
 * that there is one winner rule and one range rule.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "fleet.h"
#include "decide.h"

/* ---- generic rows ------------------------------------------------------- */

static int row_cmp(const hct_fleet_table_t *T, const char *a, const char *b) {
  for (int c = 0; c < T->ncols; c++) {
    const hct_fleet_col_t *C = &T->cols[c];
    const char *pa = a + C->off, *pb = b + C->off;
    int r;
    if (C->kind == 'i') {
      int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;
      r = (x > y) - (x < y);
    } else if (C->kind == 'r') {
      double x = *(const double *)pa, y = *(const double *)pb;
      r = (x > y) - (x < y);
    } else {
      const char *x = C->heap ? *(const char *const *)pa : pa;
      const char *y = C->heap ? *(const char *const *)pb : pb;
      r = strcmp(x ? x : "", y ? y : "");
    }
    if (r != 0) return r;
  }
  return 0;
}

static int row_copy(const hct_fleet_table_t *T, char *dst, const char *src) {
  memcpy(dst, src, T->row_size);
  int err = 0;
  for (int c = 0; c < T->ncols; c++) {
    if (!T->cols[c].heap) continue;
    char **p = (char **)(dst + T->cols[c].off);
    *p = strdup(*p ? *p : "");
    if (*p == NULL) err = HCT_ENOMEM;
  }
  return err ? hct__error(HCT_ENOMEM, "merge: out of memory") : 0;
}

typedef struct ref_s {
  const char *row;
  int input;
} ref_t;

static const hct_fleet_table_t *sort_table;
static size_t sort_key_len; /* compare this many leading bytes: the uid, or 0 for whole rows */

static int cmp_ref(const void *a, const void *b) {
  const ref_t *x = a, *y = b;
  if (sort_key_len > 0) {
    int c = strcmp(x->row, y->row); /* uid is the first field of trials and faults */
    if (c != 0) return c;
  }
  int c = row_cmp(sort_table, x->row, y->row);
  return c ? c : (x->input > y->input) - (x->input < y->input);
}

/*
 * Pools table `name` of every input into out: rows sorted, identical ones
 * once.  by_uid: rows with the same leading uid and other content refuse
 * the merge.  Devices (by uuid and host) are combined instead: first seen
 * the earliest, the rest from the copy seen last.
 */
static int pool_table(const hct_fleet_t *in, int n, const char *name, int by_uid, hct_fleet_t *out) {
  const hct_fleet_table_t *T = hct__fleet_table(name);
  size_t total = 0;
  for (int i = 0; i < n; i++) total += (size_t)*(const int *)((const char *)&in[i] + T->n_off);
  /* Each input holds at most max_rows; the pool must too, or its file
   * would be one no reader takes. */
  if (total > (size_t)T->max_rows * (size_t)HCT_MAX(n, 1))
    return hct__error(HCT_ERANGE, "merge: more than %d %s an input", T->max_rows, name);
  ref_t *refs = calloc(total + 1, sizeof *refs);
  char *arr = calloc(total + 1, T->row_size);
  if (refs == NULL || arr == NULL) {
    free(refs);
    free(arr);
    return hct__error(HCT_ENOMEM, "merge: out of memory");
  }
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    const char *a = *(char *const *)((const char *)&in[i] + T->arr_off);
    int m = *(const int *)((const char *)&in[i] + T->n_off);
    for (int r = 0; r < m; r++) refs[k++] = (ref_t){a + (size_t)r * T->row_size, i};
  }
  sort_table = T;
  sort_key_len = by_uid;
  qsort(refs, total, sizeof *refs, cmp_ref);
  int count = 0, err = 0;
  int is_dev = strcmp(name, "devices") == 0, is_var = strcmp(name, "variants") == 0;
  for (size_t r = 0; err == 0 && r < total; r++) {
    const char *row = refs[r].row;
    if (count > 0) {
      char *prev = arr + (size_t)(count - 1) * T->row_size;
      if (row_cmp(T, prev, row) == 0) continue;
      if (by_uid && strcmp(prev, row) == 0) {
        err = hct__error(HCT_EINVAL, "merge: %s row '%s' of input %d differs from its copy in "
                         "another input (the same uid with other figures)", name, row,
                         refs[r].input + 1);
        break;
      }
      if (is_var) {
        const hct_fleet_variant_t *p = (const hct_fleet_variant_t *)prev, *v = (const hct_fleet_variant_t *)row;
        if (strcmp(p->op, v->op) == 0 && strcmp(p->variant, v->variant) == 0) {
          err = hct__error(HCT_EINVAL, "merge: variant '%s' of op '%s' is '%s' in one input and "
                           "'%s' in input %d", v->variant, v->op, p->vclass, v->vclass,
                           refs[r].input + 1);
          break;
        }
      }
      if (is_dev) {
        hct_fleet_device_t *p = (hct_fleet_device_t *)prev;
        const hct_fleet_device_t *d = (const hct_fleet_device_t *)row;
        if (strcmp(p->uuid, d->uuid) == 0 && strcmp(p->host, d->host) == 0) {
          /* Sorted by every column: d is the later or larger copy. */
          int64_t first = HCT_MIN(p->first_seen, d->first_seen);
          if (d->last_seen >= p->last_seen) *p = *d;
          p->first_seen = first;
          continue;
        }
      }
    }
    err = row_copy(T, arr + (size_t)count * T->row_size, row);
    if (err == 0) count++;
  }
  free(refs);
  *(char **)((char *)out + T->arr_off) = arr;
  *(int *)((char *)out + T->n_off) = count;
  if (err == 0 && count > T->max_rows)
    err = hct__error(HCT_ERANGE, "merge: %d %s pooled, more than the %d a fleet file may hold",
                     count, name, T->max_rows);
  return err;
}

/* ---- groups and candidates ---------------------------------------------- */

/*
 * Every step below is O(n log n) in the group's rows: a merge input is
 * untrusted, and one built with a million candidates or cards must cost
 * time in proportion, not its square.
 */

/* A check failed of the candidate's own making: any status of a parity
 * trial or reason of a fault but these (a pass, a candidate not run at
 * that T, an error of the machinery, a compile failure, a grid barrier
 * that gave up at a large T).  New reasons of the probe's checks count as
 * failures without a change here. */
static int parity_failure(const char *status) {
  static const char *const not_fails[] = {"pass", "pruned", "unsupported", "unchecked", "error", "compile",
                                          "timeout"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(not_fails); i++)
    if (strcmp(status, not_fails[i]) == 0) return 0;
  return 1;
}

/* Timing trials that decide: the pass of the manifest's mode.  Older
 * trials without the marker decide. */
static int deciding(const hct_fleet_trial_t *t) {
  if (strcmp(t->kind, "timing") != 0 || strcmp(t->status, "pass") != 0 || t->pending) return 0;
  if (t->samples < 1 || !(t->median_us > 0)) return 0;
  json_t *j = json_loads(t->figures_json, 0, NULL);
  json_t *d = j ? json_object_get(j, "decides") : NULL;
  int r = d == NULL || !json_is_integer(d) || json_integer_value(d) != 0;
  json_decref(j);
  return r;
}

static void env_of(const char *driver, const char *compiler, const char *hctune, char *buf,
                   size_t len) {
  snprintf(buf, len, "%s|%s|%s", driver, compiler, hctune);
}

typedef struct cand_s {
  const hct_fleet_trial_t *first; /* a trial of it: variant, params, keys */
  char vclass[16];
  int quarantined;
  char label[400];                /* variant params template software: its identity */
} cand_t;

typedef struct card_s {
  const char *uuid, *host;
  int outlier;
} card_t;

typedef struct timing_s {
  int card, cand, T;
  const hct_fleet_trial_t *t;
} timing_t;

/* The pooled figures of one candidate at one T. */
typedef struct cell_s {
  int cand, T;
  hct_summary_t s;
  int cards;
  int64_t at;     /* newest trial pooled */
} cell_t;

typedef struct group_s {
  const char *model_key, *op;
  char env[128];
  const hct_fleet_trial_t **trials;
  int n;
} group_t;

static int same_cand(const hct_fleet_trial_t *a, const hct_fleet_trial_t *b) {
  return strcmp(a->variant, b->variant) == 0 && strcmp(a->params, b->params) == 0 &&
         strcmp(a->template_hash, b->template_hash) == 0 &&
         strcmp(a->software_key, b->software_key) == 0;
}

/* Group order, then candidate, card, T, newest first: the first timing of
 * a (card, candidate, T) met in this order is the one that counts. */
static int cmp_trial(const void *a, const void *b) {
  const hct_fleet_trial_t *x = *(const hct_fleet_trial_t *const *)a;
  const hct_fleet_trial_t *y = *(const hct_fleet_trial_t *const *)b;
  int c;
  if ((c = strcmp(x->model_key, y->model_key))) return c;
  if ((c = strcmp(x->driver_version, y->driver_version))) return c;
  if ((c = strcmp(x->compiler_version, y->compiler_version))) return c;
  if ((c = strcmp(x->hctune_version, y->hctune_version))) return c;
  if ((c = strcmp(x->op, y->op))) return c;
  if ((c = strcmp(x->variant, y->variant))) return c;
  if ((c = strcmp(x->params, y->params))) return c;
  if ((c = strcmp(x->template_hash, y->template_hash))) return c;
  if ((c = strcmp(x->software_key, y->software_key))) return c;
  if ((c = strcmp(x->uuid, y->uuid))) return c;
  if ((c = strcmp(x->host, y->host))) return c;
  if (x->tokens != y->tokens) return x->tokens < y->tokens ? -1 : 1;
  if (x->created_at != y->created_at) return x->created_at > y->created_at ? -1 : 1;
  return strcmp(x->uid, y->uid);
}

/* Faults by what they fail: the fields a candidate is matched on. */
static int cmp_fault_key(const hct_fleet_fault_t *x, const char *model, const char *env,
                         const char *op, const char *variant, const char *params,
                         const char *template_hash) {
  char xe[128];
  env_of(x->driver_version, x->compiler_version, x->hctune_version, xe, sizeof xe);
  int c;
  if ((c = strcmp(x->model_key, model))) return c;
  if ((c = strcmp(xe, env))) return c;
  if ((c = strcmp(x->op, op))) return c;
  if ((c = strcmp(x->variant, variant))) return c;
  if ((c = strcmp(x->params, params))) return c;
  return strcmp(x->template_hash, template_hash);
}

static int cmp_fault(const void *a, const void *b) {
  const hct_fleet_fault_t *x = *(const hct_fleet_fault_t *const *)a;
  const hct_fleet_fault_t *y = *(const hct_fleet_fault_t *const *)b;
  char ye[128];
  env_of(y->driver_version, y->compiler_version, y->hctune_version, ye, sizeof ye);
  int c = cmp_fault_key(x, y->model_key, ye, y->op, y->variant, y->params, y->template_hash);
  if (c == 0) c = strcmp(x->uuid, y->uuid);
  return c ? c : strcmp(x->uid, y->uid);
}

static double median_sorted(const double *v, int n) {
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Variants are sorted by (op, variant) by pool_table. */
static const char *class_of(const hct_fleet_t *f, const char *op, const char *variant) {
  int lo = 0, hi = f->n_variants - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(f->variants[mid].op, op);
    if (c == 0) c = strcmp(f->variants[mid].variant, variant);
    if (c == 0) return f->variants[mid].vclass;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

static int add_flag(hct_fleet_t *out, const hct_fleet_flag_t *fl) {
  hct_fleet_flag_t *nf = realloc(out->flags, (size_t)(out->n_flags + 1) * sizeof *nf);
  if (nf == NULL) return hct__error(HCT_ENOMEM, "merge: out of memory");
  out->flags = nf;
  out->flags[out->n_flags++] = *fl;
  return 0;
}

static int add_decision(hct_fleet_t *out, const hct_fleet_decision_t *d) {
  hct_fleet_decision_t *nd = realloc(out->decisions, (size_t)(out->n_decisions + 1) * sizeof *nd);
  if (nd == NULL) return hct__error(HCT_ENOMEM, "merge: out of memory");
  out->decisions = nd;
  out->decisions[out->n_decisions] = *d;
  out->decisions[out->n_decisions].software_json = strdup(d->software_json ? d->software_json : "");
  if (out->decisions[out->n_decisions].software_json == NULL)
    return hct__error(HCT_ENOMEM, "merge: out of memory");
  out->n_decisions++;
  return 0;
}

static void hex_of(const void *data, size_t len, char out[33]) {
  XXH128_hash_t h = XXH3_128bits(data, len);
  hct_hash_t hh = {h.low64, h.high64};
  hct__hash_hex(hh, out);
}

/* State of one group's computation. */
typedef struct ctx_s {
  const hct_fleet_merge_opts_t *o;
  hct_fleet_t *out;
  const hct_fleet_fault_t *const *faults; /* every input fault, sorted by cmp_fault */
  int nfaults;
  group_t *g;
  cand_t *cands;
  int ncand;
  card_t *cards;
  int ncard;
  timing_t *tm;   /* sorted by (cand, T, median) once pooled */
  int ntm;
  cell_t *cells;  /* sorted by (cand, T) */
  int ncells;
  const cell_t **by_T; /* the same, sorted by (T, cand) */
  int *tlist;     /* the token counts timed, ascending */
  int ntl;
  const hct_fleet_t *in;
  int nin;
} ctx_t;

static int cmp_card(const void *a, const void *b) {
  const card_t *x = a, *y = b;
  int c = strcmp(x->uuid, y->uuid);
  return c ? c : strcmp(x->host, y->host);
}

static int find_card(const ctx_t *X, const hct_fleet_trial_t *t) {
  card_t key = {t->uuid, t->host, 0};
  const card_t *c = bsearch(&key, X->cards, (size_t)X->ncard, sizeof key, cmp_card);
  return c ? (int)(c - X->cards) : -1;
}

/* Cards, candidates and the timings that count, from the group's sorted
 * trials. */
static int collect(ctx_t *X, const hct_fleet_t *all) {
  group_t *g = X->g;
  X->cards = calloc((size_t)g->n + 1, sizeof *X->cards);
  X->cands = calloc((size_t)g->n + 1, sizeof *X->cands);
  X->tm = calloc((size_t)g->n + 1, sizeof *X->tm);
  if (X->cards == NULL || X->cands == NULL || X->tm == NULL)
    return hct__error(HCT_ENOMEM, "merge: out of memory");
  for (int i = 0; i < g->n; i++) X->cards[i] = (card_t){g->trials[i]->uuid, g->trials[i]->host, 0};
  qsort(X->cards, (size_t)g->n, sizeof *X->cards, cmp_card);
  for (int i = 0; i < g->n; i++)
    if (X->ncard == 0 || cmp_card(&X->cards[X->ncard - 1], &X->cards[i]) != 0)
      X->cards[X->ncard++] = X->cards[i];
  for (int i = 0; i < g->n; i++) {
    const hct_fleet_trial_t *t = g->trials[i];
    if (X->ncand == 0 || !same_cand(X->cands[X->ncand - 1].first, t)) {
      cand_t *c = &X->cands[X->ncand++];
      c->first = t;
      const char *cl = class_of(all, t->op, t->variant);
      if (cl == NULL)
        return hct__error(HCT_EINVAL, "merge: variant '%s' of op '%s' has no class in any "
                          "input's variants table", t->variant, t->op);
      hct__strlcpy(c->vclass, cl, sizeof c->vclass);
      snprintf(c->label, sizeof c->label, "%s %s %s %s", t->variant, t->params, t->template_hash,
               t->software_key);
    }
    /* A timing at T = 0 decides nothing (a probe times at T >= 1; a file
     * may say otherwise, and T indexes the ranges below). */
    if (!deciding(t) || t->tokens < 1) continue;
    int card = find_card(X, t);
    timing_t *p = X->ntm ? &X->tm[X->ntm - 1] : NULL;
    /* Sorted newest first within (candidate, card, T): keep the first. */
    if (p && p->cand == X->ncand - 1 && p->card == card && p->T == (int)t->tokens) continue;
    X->tm[X->ntm++] = (timing_t){card, X->ncand - 1, (int)t->tokens, t};
  }
  return 0;
}

/* Appends uuid to arr unless it is its last element (the rows come sorted
 * by card). */
static void add_card_name(json_t *arr, const char *uuid) {
  size_t n = json_array_size(arr);
  if (n > 0 && strcmp(json_string_value(json_array_get(arr, n - 1)), uuid) == 0) return;
  json_array_append_new(arr, json_string(uuid));
}

/* Parity conflicts: a candidate that passed on one card and failed on an
 * identical one, by trial or by fault. */
static int conflicts(ctx_t *X) {
  group_t *g = X->g;
  int i = 0;
  for (int c = 0; c < X->ncand; c++) {
    cand_t *cd = &X->cands[c];
    const hct_fleet_trial_t *ft0 = cd->first;
    json_t *pass = json_array(), *fail = json_array();
    if (pass == NULL || fail == NULL) {
      json_decref(pass);
      json_decref(fail);
      return hct__error(HCT_ENOMEM, "merge: out of memory");
    }
    for (; i < g->n && same_cand(g->trials[i], ft0); i++) {
      const hct_fleet_trial_t *t = g->trials[i];
      if (strcmp(t->kind, "parity") != 0) continue;
      if (strcmp(t->status, "pass") == 0) add_card_name(pass, t->uuid);
      else if (parity_failure(t->status)) add_card_name(fail, t->uuid);
    }
    /* The faults of this candidate: a range of the sorted faults. */
    int lo = 0, hi = X->nfaults;
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      if (cmp_fault_key(X->faults[mid], g->model_key, g->env, g->op, ft0->variant, ft0->params,
                        ft0->template_hash) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    json_t *ffail = json_array();
    for (int f = lo; ffail != NULL && f < X->nfaults &&
                     cmp_fault_key(X->faults[f], g->model_key, g->env, g->op, ft0->variant,
                                   ft0->params, ft0->template_hash) == 0;
         f++)
      if (parity_failure(X->faults[f]->reason)) add_card_name(ffail, X->faults[f]->uuid);
    size_t k;
    json_t *v;
    /* Cards failing by fault, not already listed by a trial. */
    json_array_foreach(ffail, k, v) {
      size_t k2;
      json_t *w;
      int have = 0;
      if (json_array_size(fail) > 64) break; /* enough to report */
      json_array_foreach(fail, k2, w) have |= json_equal(v, w);
      if (!have) json_array_append(fail, v);
    }
    int failed = json_array_size(fail) > 0 || json_array_size(ffail) > 0;
    json_decref(ffail);
    int err = 0;
    /* Only what passed its checks on this model is served (issue 29): a
     * candidate no card of the group saw pass a check is out of the pool
     * (one that failed on some card and passed on another is too, flagged
     * below), so a merge cannot make a winner of a variant whose
     * correctness no host vouched for. */
    if (json_array_size(pass) == 0) cd->quarantined = 1;
    if (json_array_size(pass) > 0 && failed) {
      cd->quarantined = 1;
      hct_fleet_flag_t fl;
      memset(&fl, 0, sizeof fl);
      hct__strlcpy(fl.kind, "conflict", sizeof fl.kind);
      hct__strlcpy(fl.model_key, g->model_key, sizeof fl.model_key);
      hct__strlcpy(fl.env, g->env, sizeof fl.env);
      hct__strlcpy(fl.op, g->op, sizeof fl.op);
      hct__strlcpy(fl.variant, ft0->variant, sizeof fl.variant);
      hct__strlcpy(fl.params, ft0->params, sizeof fl.params);
      hct__strlcpy(fl.template_hash, ft0->template_hash, sizeof fl.template_hash);
      json_t *det = json_pack("{s:O, s:O}", "passed_on", pass, "failed_on", fail);
      char *s = det ? json_dumps(det, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
      if (s != NULL && strlen(s) >= sizeof fl.detail) {
        free(s);
        s = hct__asprintf("{\"passed_on\":%zu,\"failed_on\":%zu}", json_array_size(pass),
                          json_array_size(fail));
      }
      hct__strlcpy(fl.detail, s ? s : "{}", sizeof fl.detail);
      free(s);
      json_decref(det);
      err = add_flag(X->out, &fl);
    }
    json_decref(pass);
    json_decref(fail);
    if (err) return err;
  }
  return 0;
}

static int cmp_timing_cell(const void *a, const void *b) {
  const timing_t *x = a, *y = b;
  if (x->cand != y->cand) return x->cand < y->cand ? -1 : 1;
  if (x->T != y->T) return x->T < y->T ? -1 : 1;
  double mx = x->t->median_us, my = y->t->median_us;
  if (mx != my) return mx < my ? -1 : 1;
  return x->card - y->card;
}

typedef struct ratio_s {
  int card;
  double r;
} ratio_t;

static int cmp_ratio(const void *a, const void *b) {
  const ratio_t *x = a, *y = b;
  if (x->card != y->card) return x->card < y->card ? -1 : 1;
  return (x->r > y->r) - (x->r < y->r);
}

/* Outlier cards: slow against their peers on what they share.  Timings
 * are sorted by (candidate, T, median): for each cell the median of the
 * others is read off the sorted block without the card's own entry. */
static int outliers(ctx_t *X) {
  qsort(X->tm, (size_t)X->ntm, sizeof *X->tm, cmp_timing_cell);
  if (X->ncard < 2) return 0;
  double pct = X->o->outlier_pct > 0 ? X->o->outlier_pct : HCT_FLEET_OUTLIER_PCT;
  ratio_t *rs = calloc((size_t)X->ntm + 1, sizeof *rs);
  if (rs == NULL) return hct__error(HCT_ENOMEM, "merge: out of memory");
  int nr = 0;
  for (int a = 0; a < X->ntm;) {
    int b = a;
    while (b < X->ntm && X->tm[b].cand == X->tm[a].cand && X->tm[b].T == X->tm[a].T) b++;
    int n = b - a;
    if (n >= 2 && !X->cands[X->tm[a].cand].quarantined) {
      for (int p = 0; p < n; p++) {
        /* The others: the block without position p, still sorted. */
        int m = n - 1;
#define OTHER(k) X->tm[a + ((k) < p ? (k) : (k) + 1)].t->median_us
        double med = m % 2 ? OTHER(m / 2) : (OTHER(m / 2 - 1) + OTHER(m / 2)) / 2;
#undef OTHER
        rs[nr++] = (ratio_t){X->tm[a + p].card, X->tm[a + p].t->median_us / med};
      }
    }
    a = b;
  }
  qsort(rs, (size_t)nr, sizeof *rs, cmp_ratio);
  double *v = calloc((size_t)nr + 1, sizeof *v);
  int err = v == NULL ? hct__error(HCT_ENOMEM, "merge: out of memory") : 0;
  for (int a = 0; err == 0 && a < nr;) {
    int b = a;
    while (b < nr && rs[b].card == rs[a].card) b++;
    for (int k = a; k < b; k++) v[k - a] = rs[k].r;
    double ratio = median_sorted(v, b - a);
    int card = rs[a].card, compared = b - a;
    a = b;
    if (!(ratio > 1 + pct / 100)) continue;
    X->cards[card].outlier = 1;
    hct_fleet_flag_t fl;
    memset(&fl, 0, sizeof fl);
    hct__strlcpy(fl.kind, "outlier", sizeof fl.kind);
    hct__strlcpy(fl.model_key, X->g->model_key, sizeof fl.model_key);
    hct__strlcpy(fl.env, X->g->env, sizeof fl.env);
    hct__strlcpy(fl.uuid, X->cards[card].uuid, sizeof fl.uuid);
    hct__strlcpy(fl.host, X->cards[card].host, sizeof fl.host);
    hct__strlcpy(fl.op, X->g->op, sizeof fl.op);
    snprintf(fl.detail, sizeof fl.detail,
             "{\"median_ratio\":%.4f,\"compared\":%d,\"threshold_pct\":%.4g}", ratio, compared,
             pct);
    err = add_flag(X->out, &fl);
  }
  free(v);
  free(rs);
  return err;
}

static int cmp_cell_T(const void *a, const void *b) {
  const cell_t *x = *(const cell_t *const *)a, *y = *(const cell_t *const *)b;
  if (x->T != y->T) return x->T < y->T ? -1 : 1;
  return (x->cand > y->cand) - (x->cand < y->cand);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Pooled figures of every (candidate, T) over the cards kept; timings are
 * sorted by (candidate, T, median) by outliers(). */
static int pool(ctx_t *X) {
  X->cells = calloc((size_t)X->ntm + 1, sizeof *X->cells);
  X->tlist = calloc((size_t)X->ntm + 1, sizeof *X->tlist);
  double *med = calloc((size_t)X->ntm + 1, sizeof *med);
  if (X->cells == NULL || X->tlist == NULL || med == NULL) {
    free(med);
    return hct__error(HCT_ENOMEM, "merge: out of memory");
  }
  for (int a = 0; a < X->ntm;) {
    int b = a, k = 0;
    while (b < X->ntm && X->tm[b].cand == X->tm[a].cand && X->tm[b].T == X->tm[a].T) b++;
    cell_t *c = &X->cells[X->ncells];
    memset(c, 0, sizeof *c);
    c->cand = X->tm[a].cand;
    c->T = X->tm[a].T;
    X->tlist[X->ntl++] = c->T;
    for (int i = a; i < b && !X->cands[c->cand].quarantined; i++) {
      const timing_t *m = &X->tm[i];
      if (X->cards[m->card].outlier) continue;
      hct_summary_t *s = &c->s;
      if (k == 0 || m->t->ci_lo_us < s->ci_lo) s->ci_lo = m->t->ci_lo_us;
      if (k == 0 || m->t->ci_hi_us > s->ci_hi) s->ci_hi = m->t->ci_hi_us;
      if (k == 0 || m->t->min_us < s->min) s->min = m->t->min_us;
      if (s->n < 1000000000 - (int)m->t->samples) s->n += (int)m->t->samples;
      med[k++] = m->t->median_us; /* ascending: the block is sorted by median */
      if (m->t->created_at > c->at) c->at = m->t->created_at;
    }
    a = b;
    if (k == 0) continue;
    c->s.median = median_sorted(med, k);
    c->s.max = med[k - 1];
    c->s.p10 = c->s.p90 = c->s.median;
    c->s.rel_ci = INFINITY;
    c->cards = k;
    X->ncells++;
  }
  free(med);
  qsort(X->tlist, (size_t)X->ntl, sizeof *X->tlist, cmp_int);
  X->by_T = calloc((size_t)X->ncells + 1, sizeof *X->by_T);
  if (X->by_T == NULL) return hct__error(HCT_ENOMEM, "merge: out of memory");
  for (int i = 0; i < X->ncells; i++) X->by_T[i] = &X->cells[i];
  qsort(X->by_T, (size_t)X->ncells, sizeof *X->by_T, cmp_cell_T);
  int u = 0;
  for (int i = 0; i < X->ntl; i++)
    if (u == 0 || X->tlist[u - 1] != X->tlist[i]) X->tlist[u++] = X->tlist[i];
  X->ntl = u;
  return 0;
}

/* Pooled figures of candidate c at T, or NULL when none. */
static const cell_t *cell(const ctx_t *X, int c, int T) {
  int lo = 0, hi = X->ncells - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    const cell_t *x = &X->cells[mid];
    int d = x->cand != c ? (x->cand < c ? -1 : 1) : x->T != T ? (x->T < T ? -1 : 1) : 0;
    if (d == 0) return x;
    if (d < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

/* The cells at T: by_T[*first .. *end). */
static void cells_at(const ctx_t *X, int T, int *first, int *end) {
  int lo = 0, hi = X->ncells;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (X->by_T[mid]->T < T) lo = mid + 1;
    else hi = mid;
  }
  *first = lo;
  while (lo < X->ncells && X->by_T[lo]->T == T) lo++;
  *end = lo;
}

/* The incumbent: the baseline candidate timed on the most cards at T (the
 * probe has one; a pool may hold several points or template versions). */
static int baseline_at(const ctx_t *X, int T) {
  int best = -1, best_cards = 0, a, b;
  cells_at(X, T, &a, &b);
  for (int i = a; i < b; i++) {
    const cell_t *x = X->by_T[i];
    if (X->cands[x->cand].quarantined || strcmp(X->cands[x->cand].vclass, "baseline") != 0) continue;
    if (best < 0 || x->cards > best_cards) best = x->cand, best_cards = x->cards;
  }
  return best;
}

/* Whether input decision d belongs to the group being merged (its model,
 * environment and op). */
static int in_group(const ctx_t *X, const hct_fleet_decision_t *d) {
  char env[128];
  env_of(d->driver_version, d->compiler_version, d->hctune_version, env, sizeof env);
  return strcmp(d->model_key, X->g->model_key) == 0 && strcmp(d->op, X->g->op) == 0 &&
         strcmp(env, X->g->env) == 0;
}

/*
 * Whether `variant` is in bit family `family` ("bits:<head>", issue 29):
 * the head, or a variant some card's probe decided the family for (the
 * probe decides a family only for variants bit-equal to its head that
 * passed every check there).  db/ has no manifest, so a member that won
 * the family on no card is not pooled (KNOWN-GAP: the variants table
 * carries classes, not bitwise references); what is pooled is the
 * family's bits, never another's.
 */
static int family_member(const ctx_t *X, const char *family, const char *variant) {
  if (strcmp(hct__parity_family(family), variant) == 0) return 1;
  for (int f = 0; f < X->nin; f++)
    for (int i = 0; i < X->in[f].n_decisions; i++) {
      const hct_fleet_decision_t *d = &X->in[f].decisions[i];
      if (strcmp(d->parity, family) == 0 && strcmp(d->variant, variant) == 0 && in_group(X, d))
        return 1;
    }
  return 0;
}

/* The bit families the inputs decided for this group: distinct parities
 * "bits:<head>" of its decisions, into fam[max]; returns the count. */
static int group_families(const ctx_t *X, const char **fam, int max) {
  int n = 0;
  for (int f = 0; f < X->nin; f++)
    for (int i = 0; i < X->in[f].n_decisions; i++) {
      const hct_fleet_decision_t *d = &X->in[f].decisions[i];
      if (hct__parity_family(d->parity) == NULL || !in_group(X, d)) continue;
      int seen = 0;
      for (int j = 0; j < n && !seen; j++) seen = strcmp(fam[j], d->parity) == 0;
      if (!seen && n < max) fam[n++] = d->parity;
    }
  return n;
}

/* Whether candidate c takes part in decision `parity`: bitwise admits the
 * incumbent baseline and bitwise variants, kl kl ones too, a family its
 * members. */
static int admitted(const ctx_t *X, int c, int base, const char *parity) {
  const cand_t *cd = &X->cands[c];
  if (hct__parity_family(parity) != NULL) return family_member(X, parity, cd->first->variant);
  return c == base || strcmp(cd->vclass, "bitwise") == 0 ||
         (strcmp(parity, "kl") == 0 && strcmp(cd->vclass, "kl") == 0);
}

/* The winner at T of decision `parity` ("bitwise", "kl", "bits:<head>"):
 * hct__pick_winner over the candidates it admits, against the baseline
 * (a family: its head's candidate timed on the most cards), as the probe
 * does.  res and idx hold ncand entries. */
static int winner_at(const ctx_t *X, int T, const char *parity, double margin, int *base_out,
                     hct_timing_res_t *res, int *idx) {
  int base = baseline_at(X, T);
  *base_out = base;
  if (base < 0) return -1;
  const char *head = hct__parity_family(parity);
  int m = 0, inc = -1, inc_cards = 0, a, b;
  cells_at(X, T, &a, &b);
  for (int i = a; i < b; i++) {
    const cell_t *x = X->by_T[i];
    const cand_t *cd = &X->cands[x->cand];
    if (cd->quarantined || !admitted(X, x->cand, base, parity)) continue;
    int is_inc = head == NULL ? x->cand == base
                              : strcmp(cd->first->variant, head) == 0 && x->cards > inc_cards;
    if (is_inc) inc = m, inc_cards = x->cards;
    memset(&res[m], 0, sizeof res[m]);
    res[m].s = x->s;
    idx[m++] = x->cand;
  }
  int w = hct__pick_winner(res, m, inc, margin);
  return w >= 0 ? idx[w] : -1;
}

/*
 * The ends of the group's ranges: the lowest tmin and highest tmax of the
 * inputs' decisions of its model, environment and op (a probe's reach the
 * op's range, which db/ cannot read: it has no manifest), widened to the
 * counts timed.  Merged decisions keep those ends, so a merge of merges
 * reaches the same ones.
 */
static void group_span(ctx_t *X, int *lo, int *hi) {
  *lo = X->tlist[0];
  *hi = X->tlist[X->ntl - 1];
  for (int f = 0; f < X->nin; f++)
    for (int i = 0; i < X->in[f].n_decisions; i++) {
      const hct_fleet_decision_t *d = &X->in[f].decisions[i];
      if (!in_group(X, d)) continue;
      if (d->tmin < *lo) *lo = (int)d->tmin;
      if (d->tmax > *hi) *hi = (int)d->tmax;
    }
}

/* The per-class state of decide: the winner and baseline at each timed
 * count (indexed like tlist), their labels, and the decision's card. */
typedef struct decide_s {
  int *win, *base;
  const char **label;
  hct_cover_t *ranges;
  hct_timing_res_t *res;
  int *idx;
  char pseudo[64];
  int kept;                /* cards pooled (not outliers) */
} decide_t;

/* The decision row of one range r of class `cls`. */
static int add_range(ctx_t *X, const decide_t *D, const hct_cover_t *r, const char *cls) {
  const int c = D->win[r->first], T0 = X->tlist[r->first];
  const cand_t *cd = &X->cands[c];
  const hct_fleet_trial_t *t = cd->first;
  const cell_t *x0 = cell(X, c, T0);
  hct_fleet_decision_t d;
  memset(&d, 0, sizeof d);
  hct__strlcpy(d.host, "fleet", sizeof d.host);
  hct__strlcpy(d.uuid, D->pseudo, sizeof d.uuid);
  hct__strlcpy(d.model_key, X->g->model_key, sizeof d.model_key);
  hct__strlcpy(d.driver_version, t->driver_version, sizeof d.driver_version);
  hct__strlcpy(d.compiler_version, t->compiler_version, sizeof d.compiler_version);
  hct__strlcpy(d.hctune_version, t->hctune_version, sizeof d.hctune_version);
  hct__strlcpy(d.software_key, t->software_key, sizeof d.software_key);
  d.software_json = t->software_json;
  hct__strlcpy(d.op, X->g->op, sizeof d.op);
  hct__strlcpy(d.parity, cls, sizeof d.parity);
  d.tmin = r->tmin;
  d.tmax = r->tmax;
  hct__strlcpy(d.variant, t->variant, sizeof d.variant);
  hct__strlcpy(d.params, t->params, sizeof d.params);
  hct__strlcpy(d.variant_class, cd->vclass, sizeof d.variant_class);
  hct__strlcpy(d.template_hash, t->template_hash, sizeof d.template_hash);
  hct__strlcpy(d.binary_key, t->binary_key, sizeof d.binary_key);
  hct__strlcpy(d.source, "fleet", sizeof d.source);
  d.median_us = x0->s.median;
  d.baseline_us = cell(X, D->base[r->first], T0)->s.median;
  d.ci_lo_us = x0->s.ci_lo;
  d.ci_hi_us = x0->s.ci_hi;
  d.samples = x0->s.n;
  /* Provenance: the cards pooled and left out, and the figures per count
   * timed (the counts between them were not measured). */
  size_t off = (size_t)snprintf(d.evidence_json, sizeof d.evidence_json,
                                "{\"fleet\":{\"cards\":%d,\"outliers\":%d},\"per_T\":[", D->kept,
                                X->ncard - D->kept);
  for (int k = r->first; k <= r->last; k++) {
    const int T = X->tlist[k];
    const cell_t *x = cell(X, c, T);
    if (x->at > d.decided_at) d.decided_at = x->at;
    if (off >= sizeof d.evidence_json - 120) continue;
    off += (size_t)snprintf(d.evidence_json + off, sizeof d.evidence_json - off,
                            "%s{\"T\":%d,\"us\":%.3f,\"baseline_us\":%.3f,\"ci\":[%.3f,%.3f],"
                            "\"cards\":%d}", k > r->first ? "," : "", T, x->s.median,
                            cell(X, D->base[k], T)->s.median, x->s.ci_lo, x->s.ci_hi, x->cards);
  }
  snprintf(d.evidence_json + off, sizeof d.evidence_json - off, "]}");
  char uidseed[256];
  snprintf(uidseed, sizeof uidseed, "%s\n%s\n%s\n%d", D->pseudo, d.op, d.parity, r->tmin);
  hex_of(uidseed, strlen(uidseed), d.uid);
  return add_decision(X->out, &d);
}

static int decide(ctx_t *X) {
  /* The classes, then the bit families the inputs decided (issue 29). */
  const char *parities[2 + 16] = {"bitwise", "kl"};
  const int nparity = 2 + group_families(X, parities + 2, 16);
  double margin = X->o->min_margin > 0 ? X->o->min_margin : HCT_MIN_MARGIN_DEFAULT;
  if (X->ntl < 1) return 0;
  const size_t n = (size_t)X->ntl + 1;
  decide_t D = {calloc(n, sizeof(int)), calloc(n, sizeof(int)), calloc(n, sizeof(char *)),
                calloc(n, sizeof(hct_cover_t)), calloc((size_t)X->ncand + 1, sizeof(hct_timing_res_t)),
                calloc((size_t)X->ncand + 1, sizeof(int)), "", 0};
  int err = 0;
  if (D.win == NULL || D.base == NULL || D.label == NULL || D.ranges == NULL || D.res == NULL ||
      D.idx == NULL)
    err = hct__error(HCT_ENOMEM, "merge: out of memory");
  char seed[512], h16[33];
  snprintf(seed, sizeof seed, "%s\n%s", X->g->model_key, X->g->env);
  hex_of(seed, strlen(seed), h16);
  /* A decision row needs a card: a merged one belongs to the group, named
   * by a hash of its model key and environment. */
  snprintf(D.pseudo, sizeof D.pseudo, "fleet-%.16s", h16);
  for (int i = 0; i < X->ncard; i++) D.kept += !X->cards[i].outlier;
  int lo = 0, hi = 0;
  if (err == 0) group_span(X, &lo, &hi);
  for (int k = 0; err == 0 && k < nparity; k++) {
    for (int i = 0; i < X->ntl; i++) {
      D.win[i] = winner_at(X, X->tlist[i], parities[k], margin, &D.base[i], D.res, D.idx);
      D.label[i] = D.win[i] >= 0 ? X->cands[D.win[i]].label : NULL;
    }
    /* Every count timed is a representative one: the ranges are the
     * probe's over the counts the cards measured. */
    int nr = hct__cover_ranges(X->tlist, D.label, X->ntl, X->tlist, X->ntl, lo, hi, D.ranges, X->ntl);
    if (nr < 0) err = nr;
    for (int r = 0; err == 0 && r < nr && r < X->ntl; r++) err = add_range(X, &D, &D.ranges[r], parities[k]);
  }
  free(D.win);
  free(D.base);
  free(D.label);
  free(D.ranges);
  free(D.res);
  free(D.idx);
  return err;
}

static int cmp_decision(const void *a, const void *b) {
  const hct_fleet_decision_t *x = a, *y = b;
  int c;
  if ((c = strcmp(x->uuid, y->uuid))) return c;
  if ((c = strcmp(x->op, y->op))) return c;
  if ((c = strcmp(x->parity, y->parity))) return c;
  return (x->tmin > y->tmin) - (x->tmin < y->tmin);
}

static int cmp_flag(const void *a, const void *b) {
  return row_cmp(hct__fleet_table("flags"), a, b);
}

int hct__fleet_merge(const hct_fleet_t *in, int n, const hct_fleet_merge_opts_t *opts,
                     hct_fleet_t *out) {
  memset(out, 0, sizeof *out);
  hct_fleet_merge_opts_t dflt = {0};
  if (opts == NULL) opts = &dflt;
  int err = 0;
  static const struct {
    const char *name;
    int by_uid;
  } pools[] = {{"devices", 0}, {"variants", 0}, {"trials", 1}, {"faults", 1}};
  for (size_t p = 0; err == 0 && p < HCT_ARRAY_SIZE(pools); p++)
    err = pool_table(in, n, pools[p].name, pools[p].by_uid, out);
  if (err != 0) return err;

  const hct_fleet_trial_t **tp = calloc((size_t)out->n_trials + 1, sizeof *tp);
  const hct_fleet_fault_t **fp = calloc((size_t)out->n_faults + 1, sizeof *fp);
  if (tp == NULL || fp == NULL) {
    free(tp);
    free(fp);
    return hct__error(HCT_ENOMEM, "merge: out of memory");
  }
  for (int i = 0; i < out->n_faults; i++) fp[i] = &out->faults[i];
  qsort(fp, (size_t)out->n_faults, sizeof *fp, cmp_fault);
  int nt = 0;
  for (int i = 0; i < out->n_trials; i++)
    if (strcmp(out->trials[i].kind, "compile") != 0) tp[nt++] = &out->trials[i];
  qsort(tp, (size_t)nt, sizeof *tp, cmp_trial);
  for (int i = 0; err == 0 && i < nt;) {
    group_t g;
    memset(&g, 0, sizeof g);
    g.model_key = tp[i]->model_key;
    g.op = tp[i]->op;
    env_of(tp[i]->driver_version, tp[i]->compiler_version, tp[i]->hctune_version, g.env,
           sizeof g.env);
    g.trials = &tp[i];
    char env[128];
    while (i + g.n < nt) {
      const hct_fleet_trial_t *t = tp[i + g.n];
      env_of(t->driver_version, t->compiler_version, t->hctune_version, env, sizeof env);
      if (strcmp(t->model_key, g.model_key) != 0 || strcmp(t->op, g.op) != 0 ||
          strcmp(env, g.env) != 0)
        break;
      g.n++;
    }
    i += g.n;
    ctx_t X;
    memset(&X, 0, sizeof X);
    X.o = opts;
    X.out = out;
    X.g = &g;
    X.faults = fp;
    X.nfaults = out->n_faults;
    X.in = in;
    X.nin = n;
    err = collect(&X, out);
    if (err == 0) err = conflicts(&X);
    if (err == 0) err = outliers(&X);
    if (err == 0) err = pool(&X);
    if (err == 0) err = decide(&X);
    free(X.cards);
    free(X.cands);
    free(X.tm);
    free(X.cells);
    free(X.by_T);
    free(X.tlist);
  }
  free(tp);
  free(fp);
  if (err == 0) {
    if (out->n_decisions > 1)
      qsort(out->decisions, (size_t)out->n_decisions, sizeof *out->decisions, cmp_decision);
    if (out->n_flags > 1) qsort(out->flags, (size_t)out->n_flags, sizeof *out->flags, cmp_flag);
    hct__strlcpy(out->meta.kind, "merge", sizeof out->meta.kind);
    hct__hostname(out->meta.host, sizeof out->meta.host);
    hct__strlcpy(out->meta.hctune_version, HCT_VERSION_STRING, sizeof out->meta.hctune_version);
    out->meta.created_at = hct__unix_time();
    out->meta.inputs = n;
    out->meta.outlier_pct = opts->outlier_pct > 0 ? opts->outlier_pct : HCT_FLEET_OUTLIER_PCT;
  }
  return err;
}
