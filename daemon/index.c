/*
 * index.c: the daemon's decisions in memory.
 *
 * The DB stores one decision per (card, op, parity class, token range).  An
 * engine asks for one token count, thousands of times a second, so the
 * snapshot keeps two hash tables of sorted ranges: by card UUID (the card's
 * own decisions) and by card model key (answers for a card the DB has never
 * seen, from cards of the same model: source "fleet").  A snapshot is never
 * changed after it is built; the loop thread builds a new one on reload.
 *
 * The rows' JSON as the protocol writes it is here too (a decision, its
 * params, a pin): the index renders its replies once at load with it, and
 * the verbs that answer, list, pin and probe call down to it.
 */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon.h"

typedef struct entry_s {
  const hct_db_decision_t *d;
  char *body; /* rendered reply, card buckets only */
  size_t body_len;
} entry_t;

typedef struct bucket_s {
  const char *a, *op, *parity; /* a: uuid or model key */
  uint64_t hash;
  int first, n;                /* entries, sorted by tmin */
} bucket_t;

typedef struct table_s {
  entry_t *ent;
  bucket_t *b;
  int nb;
  int *slot; /* open addressing: bucket index or -1 */
  size_t mask;
} table_t;

struct hct_index_s {
  hct_db_decision_t *dec;
  int n_dec;
  hct_db_pin_t *pins;
  int n_pins;
  hct_db_device_t *devs;
  int n_devs;      /* rows read (all freed together) */
  int n_good_devs; /* the first n_good_devs are served */
  table_t by_card, by_model;
  char **items;      /* dec[i] as a list entry, rendered once: list costs copies only */
  size_t *item_len;
};

/* XXH3 over the three parts, each with its NUL, so ("ab","c") and
 * ("a","bc") differ.  The parts are bounded (a request's device is at most
 * 255 bytes, the DB's keys shorter), so one buffer holds them. */
static uint64_t key_hash(const char *a, const char *op, const char *parity) {
  char buf[1024];
  size_t n = 0;
  const char *parts[3] = {a, op, parity};
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(parts[i]) + 1;
    if (k > sizeof buf - n) k = sizeof buf - n;
    memcpy(buf + n, parts[i], k);
    n += k;
  }
  return XXH3_64bits(buf, n);
}

static const char *dec_key(const hct_db_decision_t *d, int by_model) {
  return by_model ? d->keys.model_key : d->keys.uuid;
}

static int cmp_key(const hct_db_decision_t *x, const hct_db_decision_t *y, int by_model) {
  int c = strcmp(dec_key(x, by_model), dec_key(y, by_model));
  if (c == 0) c = strcmp(x->op, y->op);
  if (c == 0) c = strcmp(x->parity, y->parity);
  return c;
}

static int sort_by_model; /* qsort has no context argument; loop thread only */

static int cmp_entry(const void *a, const void *b) {
  const entry_t *x = a, *y = b;
  int c = cmp_key(x->d, y->d, sort_by_model);
  if (c == 0) c = (x->d->tmin > y->d->tmin) - (x->d->tmin < y->d->tmin);
  return c;
}

static void table_free(table_t *t, int n) {
  if (t->ent != NULL)
    for (int i = 0; i < n; i++) free(t->ent[i].body);
  free(t->ent);
  free(t->b);
  free(t->slot);
  memset(t, 0, sizeof *t);
}

static int table_build(table_t *t, const hct_db_decision_t *dec, int n, int by_model) {
  memset(t, 0, sizeof *t);
  t->ent = calloc((size_t)n + 1, sizeof *t->ent);
  t->b = calloc((size_t)n + 1, sizeof *t->b);
  size_t cap = 16;
  while (cap < 2 * (size_t)n + 2) cap <<= 1;
  t->slot = malloc(cap * sizeof *t->slot);
  if (t->ent == NULL || t->b == NULL || t->slot == NULL)
    return hct__error(HCT_ENOMEM, "decision index: out of memory for %d decisions", n);
  t->mask = cap - 1;
  for (size_t i = 0; i < cap; i++) t->slot[i] = -1;
  for (int i = 0; i < n; i++) t->ent[i].d = &dec[i];
  sort_by_model = by_model;
  qsort(t->ent, (size_t)n, sizeof *t->ent, cmp_entry);
  for (int i = 0; i < n; i++) {
    const hct_db_decision_t *d = t->ent[i].d;
    if (t->nb > 0 && cmp_key(t->ent[t->b[t->nb - 1].first].d, d, by_model) == 0) {
      t->b[t->nb - 1].n++;
      continue;
    }
    bucket_t *b = &t->b[t->nb];
    b->a = dec_key(d, by_model);
    b->op = d->op;
    b->parity = d->parity;
    b->hash = key_hash(b->a, b->op, b->parity);
    b->first = i;
    b->n = 1;
    size_t s = b->hash & t->mask;
    while (t->slot[s] >= 0) s = (s + 1) & t->mask;
    t->slot[s] = t->nb++;
  }
  return 0;
}

static const bucket_t *table_find(const table_t *t, const char *a, const char *op,
                                  const char *parity) {
  if (t->slot == NULL) return NULL;
  uint64_t h = key_hash(a, op, parity);
  for (size_t s = h & t->mask;; s = (s + 1) & t->mask) {
    int i = t->slot[s];
    if (i < 0) return NULL;
    const bucket_t *b = &t->b[i];
    if (b->hash == h && strcmp(b->a, a) == 0 && strcmp(b->op, op) == 0 &&
        strcmp(b->parity, parity) == 0)
      return b;
  }
}

/*
 * The T whose figures a decision's median_us and baseline_us are: a
 * decision holds a range of T (3-6) and the figures of one T of it, the
 * first probed.  Its T when the range is one T; else the per-T evidence's
 * entry whose time is the decision's (per_T rounds to 3 decimals); else
 * null (a decision recorded without per-T evidence).
 */
static json_t *measured_tokens(const hct_db_decision_t *d, json_t *parity) {
  if (d->tmin == d->tmax) return json_integer(d->tmin);
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(parity, "per_T"), i, e) {
    double us = json_number_value(json_object_get(e, "us"));
    json_int_t T = json_integer_value(json_object_get(e, "T"));
    if (us > 0 && us - d->median_us < 0.001 && d->median_us - us < 0.001 && T >= d->tmin &&
        T <= d->tmax)
      return json_integer(T);
  }
  return json_null();
}

json_t *hct__decision_json(const hct_db_decision_t *d, const char *source) {
  json_t *params = json_loads(d->params, 0, NULL);
  if (params == NULL) params = json_string(d->params);
  json_t *figs = d->evidence_json[0] ? json_loads(d->evidence_json, 0, NULL) : NULL;
  char when[40] = "";
  if (d->decided_at > 0) hct__iso_time(d->decided_at, when, sizeof when);
  json_t *measured = d->median_us > 0 ? measured_tokens(d, figs) : json_null();
  json_t *ev = json_pack("{s:f, s:f, s:[f,f], s:i, s:s, s:s, s:o}", "median_us", d->median_us,
                         "baseline_us", d->baseline_us, "ci_us", d->ci_lo_us, d->ci_hi_us,
                         "samples", d->samples, "measured_at", when, "run_id", d->run_id,
                         "parity", figs != NULL ? figs : json_object());
  return json_pack("{s:b, s:s, s:o, s:s, s:s, s:s, s:s, s:s, s:[i,i], s:o, s:o}", "ok", 1,
                   "variant", d->variant, "params", params, "class", d->variant_class, "source",
                   source, "template_hash", d->template_hash, "device", d->keys.uuid, "model",
                   d->keys.model_key, "tokens", d->tmin, d->tmax, "measured_tokens", measured,
                   "evidence", ev != NULL ? ev : json_object());
}

json_t *hct__params_json(const char *text) {
  json_t *p = json_loads(text[0] ? text : "{}", 0, NULL);
  return p != NULL ? p : json_string(text);
}

json_t *hct__pin_json(const hct_db_pin_t *p) {
  return json_pack("{s:s, s:s, s:[i,i], s:s, s:o, s:I, s:I}", "device", p->uuid, "op", p->op,
                   "tokens", p->tmin, p->tmax, "variant", p->variant, "params",
                   hct__params_json(p->params), "until", (json_int_t)p->until, "created_at",
                   (json_int_t)p->created_at);
}

/* Whether every text is valid UTF-8 (jansson refuses anything else, and a
 * reply that cannot be written is worse than a row left out). */
static int utf8_ok(const char *const *texts, int n) {
  for (int i = 0; i < n; i++) {
    json_t *j = json_string(texts[i]);
    if (j == NULL) return 0;
    json_decref(j);
  }
  return 1;
}

static int decision_ok(const hct_db_decision_t *d, hct_row_check_t check, void *ctx) {
  const char *texts[] = {d->keys.uuid, d->keys.model_key, d->op,  d->parity,
                         d->variant,   d->params,         d->variant_class, d->template_hash,
                         d->source,    d->run_id};
  const char *why = NULL;
  int rc = 0;
  if (!utf8_ok(texts, (int)HCT_ARRAY_SIZE(texts))) why = "a text field is not valid UTF-8";
  else if (d->tmin < 1 || d->tmax < d->tmin || d->tmax > HCT_MAX_TOKENS) why = "bad token range";
  else if (check != NULL && (rc = check(ctx, d->op, d->variant, d->params)) < 0)
    why = hct_last_error();
  if (why == NULL) return 1;
  hct__log(HCT_LOG_WARN,
           "decision row (card '%s', op '%s', parity '%s', T=%d-%d, variant '%s'): %s: skipped, "
           "not served",
           d->keys.uuid, d->op, d->parity, d->tmin, d->tmax, d->variant, why);
  hct__error_clear();
  return 0;
}

static int pin_ok(const hct_db_pin_t *p, hct_row_check_t check, void *ctx) {
  const char *texts[] = {p->uuid, p->op, p->variant, p->params};
  const char *why = NULL;
  if (!utf8_ok(texts, (int)HCT_ARRAY_SIZE(texts))) why = "a text field is not valid UTF-8";
  else if (p->tmin < 1 || p->tmax < p->tmin || p->tmax > HCT_MAX_TOKENS) why = "bad token range";
  else if (p->until < 0 || p->until > 253402300799ll) why = "'until' is not a time before year 10000";
  else if (check != NULL && check(ctx, p->op, p->variant, p->params) < 0) why = hct_last_error();
  if (why == NULL) return 1;
  hct__log(HCT_LOG_WARN, "pin row (card '%s', op '%s', T=%d-%d, variant '%s'): %s: skipped, not served",
           p->uuid, p->op, p->tmin, p->tmax, p->variant, why);
  hct__error_clear();
  return 0;
}

static int device_ok(const hct_db_device_t *v) {
  const char *texts[] = {v->uuid, v->host, v->model_key, v->name, v->arch};
  if (utf8_ok(texts, (int)HCT_ARRAY_SIZE(texts))) return 1;
  hct__log(HCT_LOG_WARN, "device row (card '%s'): a text field is not valid UTF-8: skipped",
           v->uuid);
  return 0;
}

/* Drops the rows `check` refutes and builds the tables and rendered
 * replies of ix's rows (read by the caller); frees ix on error. */
static int index_build(hct_index_t *ix, int rc, hct_row_check_t check, void *ctx,
                       hct_index_t **out) {
  if (rc >= 0) {
    /* Bad rows go; the order of the rest (uuid, op, parity, tmin) stays. */
    int k = 0;
    for (int i = 0; i < ix->n_dec; i++)
      if (decision_ok(&ix->dec[i], check, ctx)) ix->dec[k++] = ix->dec[i];
    ix->n_dec = k;
    k = 0;
    for (int i = 0; i < ix->n_pins; i++)
      if (pin_ok(&ix->pins[i], check, ctx)) ix->pins[k++] = ix->pins[i];
    ix->n_pins = k;
    k = 0;
    for (int i = 0; i < ix->n_devs; i++) {
      if (device_ok(&ix->devs[i])) {
        hct_db_device_t t = ix->devs[k];
        ix->devs[k++] = ix->devs[i];
        ix->devs[i] = t; /* the skipped one is still freed with the rest */
      }
    }
    ix->n_good_devs = k;
  }
  if (rc >= 0) rc = table_build(&ix->by_card, ix->dec, ix->n_dec, 0);
  if (rc >= 0) rc = table_build(&ix->by_model, ix->dec, ix->n_dec, 1);
  for (int i = 0; rc >= 0 && i < ix->n_dec; i++) {
    entry_t *e = &ix->by_card.ent[i];
    const char *src = e->d->source[0] ? e->d->source : hct_source_name(HCT_SOURCE_PROBE);
    json_t *j = hct__decision_json(e->d, src);
    e->body = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (e->body == NULL) rc = hct__error(HCT_ENOMEM, "decision index: cannot render a reply");
    else e->body_len = strlen(e->body);
  }
  if (rc >= 0) {
    ix->items = calloc((size_t)ix->n_dec + 1, sizeof *ix->items);
    ix->item_len = calloc((size_t)ix->n_dec + 1, sizeof *ix->item_len);
    if (ix->items == NULL || ix->item_len == NULL)
      rc = hct__error(HCT_ENOMEM, "decision index: out of memory");
  }
  for (int i = 0; rc >= 0 && i < ix->n_dec; i++) {
    const hct_db_decision_t *d = &ix->dec[i];
    json_t *j = hct__decision_json(d, d->source[0] ? d->source : hct_source_name(HCT_SOURCE_PROBE));
    json_object_del(j, "ok");
    json_object_set_new(j, "op", json_string(d->op));
    json_object_set_new(j, "parity", json_string(d->parity));
    ix->items[i] = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (ix->items[i] == NULL) rc = hct__error(HCT_ENOMEM, "decision index: cannot render a list entry");
    else ix->item_len[i] = strlen(ix->items[i]);
  }
  if (rc < 0) {
    hct__index_free(ix);
    return rc;
  }
  *out = ix;
  return 0;
}

int hct__index_load(hct_db_t *db, hct_row_check_t check, void *ctx, hct_index_t **out) {
  hct_index_t *ix = calloc(1, sizeof *ix);
  if (ix == NULL) return hct__error(HCT_ENOMEM, "decision index: out of memory");
  int rc = hct__db_decisions_list(db, &ix->dec, &ix->n_dec);
  if (rc >= 0) rc = hct__db_pins_list(db, &ix->pins, &ix->n_pins);
  if (rc >= 0) rc = hct__db_devices_list(db, &ix->devs, &ix->n_devs);
  return index_build(ix, rc, check, ctx, out);
}

int hct__index_from_decisions(const hct_db_decision_t *dec, int n, hct_row_check_t check,
                              void *ctx, hct_index_t **out) {
  hct_index_t *ix = calloc(1, sizeof *ix);
  if (ix == NULL) return hct__error(HCT_ENOMEM, "decision index: out of memory");
  ix->dec = malloc(((size_t)n + 1) * sizeof *ix->dec);
  if (ix->dec == NULL) {
    free(ix);
    return hct__error(HCT_ENOMEM, "decision index: out of memory");
  }
  if (n > 0) memcpy(ix->dec, dec, (size_t)n * sizeof *dec);
  ix->n_dec = n;
  return index_build(ix, 0, check, ctx, out);
}

int hct__index_empty(hct_index_t **out) {
  *out = calloc(1, sizeof **out);
  return *out != NULL ? 0 : hct__error(HCT_ENOMEM, "decision index: out of memory");
}

void hct__index_free(hct_index_t *ix) {
  if (ix == NULL) return;
  if (ix->items != NULL)
    for (int i = 0; i < ix->n_dec; i++) free(ix->items[i]);
  free(ix->items);
  free(ix->item_len);
  table_free(&ix->by_card, ix->n_dec);
  table_free(&ix->by_model, ix->n_dec);
  free(ix->dec);
  free(ix->pins);
  if (ix->devs != NULL) hct__db_devices_free(ix->devs, ix->n_devs);
  free(ix);
}

const hct_db_decision_t *hct__index_decision(const hct_index_t *ix, const char *uuid,
                                             const char *op, const char *parity, int tokens,
                                             const char **body, size_t *body_len) {
  const bucket_t *b = table_find(&ix->by_card, uuid, op, parity);
  if (b == NULL) return NULL;
  /* Ranges of one card never overlap: the last one starting at or below
   * `tokens` is the only candidate. */
  int lo = b->first, hi = b->first + b->n - 1, best = -1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (ix->by_card.ent[mid].d->tmin <= tokens) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (best < 0 || ix->by_card.ent[best].d->tmax < tokens) return NULL;
  const entry_t *e = &ix->by_card.ent[best];
  if (body != NULL) *body = e->body;
  if (body_len != NULL) *body_len = e->body_len;
  return e->d;
}

const hct_db_decision_t *hct__index_fleet(const hct_index_t *ix, const char *model_key,
                                          const char *op, const char *parity, int tokens) {
  const bucket_t *b = table_find(&ix->by_model, model_key, op, parity);
  if (b == NULL) return NULL;
  /* Ranges of different cards overlap: the model's pooled decision (the
   * cards of a host compared, tuner/agree.c) first, then the newest
   * measurement. */
  const hct_db_decision_t *best = NULL;
  for (int i = b->first; i < b->first + b->n; i++) {
    const hct_db_decision_t *d = ix->by_model.ent[i].d;
    if (d->tmin > tokens) break;
    if (d->tmax < tokens) continue;
    int pooled = strncmp(d->keys.uuid, "pooled-", 7) == 0;
    int best_pooled = best != NULL && strncmp(best->keys.uuid, "pooled-", 7) == 0;
    if (best == NULL || pooled > best_pooled ||
        (pooled == best_pooled && d->decided_at > best->decided_at))
      best = d;
  }
  return best;
}

const hct_db_pin_t *hct__index_pin(const hct_index_t *ix, const char *device, const char *op,
                                   int tokens, int64_t now) {
  const hct_db_pin_t *any = NULL;
  for (int i = 0; i < ix->n_pins; i++) {
    const hct_db_pin_t *p = &ix->pins[i];
    if (strcmp(p->op, op) != 0 || tokens < p->tmin || tokens > p->tmax) continue;
    if (p->until != 0 && p->until <= now) continue;
    if (device != NULL && strcmp(p->uuid, device) == 0) return p;
    if (strcmp(p->uuid, "*") == 0 && any == NULL) any = p;
  }
  return any;
}

const hct_db_device_t *hct__index_device(const hct_index_t *ix, const char *uuid) {
  for (int i = 0; i < ix->n_good_devs; i++)
    if (strcmp(ix->devs[i].uuid, uuid) == 0) return &ix->devs[i];
  return NULL;
}

const char *hct__index_default_device(const hct_index_t *ix) {
  if (ix->n_good_devs > 0) return ix->devs[0].uuid;
  if (ix->n_dec > 0) return ix->dec[0].keys.uuid;
  return NULL;
}

const hct_db_decision_t *hct__index_decisions(const hct_index_t *ix, int *n) {
  *n = ix->n_dec;
  return ix->dec;
}

const hct_db_pin_t *hct__index_pins(const hct_index_t *ix, int *n) {
  *n = ix->n_pins;
  return ix->pins;
}

const hct_db_device_t *hct__index_devices(const hct_index_t *ix, int *n) {
  *n = ix->n_good_devs;
  return ix->devs;
}

const char *hct__index_list_item(const hct_index_t *ix, int i, size_t *len) {
  *len = ix->item_len[i];
  return ix->items[i];
}
