/*
 * fleet_verify.c: `hctune probe --verify-fleet`: adopt the fleet's
 * winners on this card after checking them here, without timing them.
 *
 * The fleet's decisions for this card's model and environment (driver,
 * compiler, hctune version) come from a fleet file (--fleet-db, read as an
 * untrusted file) or from those imported into the local DB.  The probe
 * runs in check-only mode on the winners' variants and the baseline: the
 * full parity checks at every token count of their ranges, with and
 * without the optional inputs, every trial recorded, nothing timed.  A
 * decision is adopted for this card (source "fleet") when every check of
 * its candidate passed at every T of its range, on the same template;
 * if any winner fails, or the check run itself fails, the op gets a full
 * probe, and the report says why.
 *
 * The timing evidence of an adopted decision is the fleet's: identical
 * cards (same model key) in the same environment time alike, which is what
 * the merge's outlier check keeps true.  What must hold on every card, the
 * parity, is checked here.
 *
 * Loop thread only (it runs the probe).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleet.h"
#include "tuner.h"

static int real_probe(void *arg, const hct_probe_opts_t *o) {
  (void)arg;
  return hct__probe(o);
}

static int real_find(void *arg, const char *spec, hct_device_t *dev) {
  (void)arg;
  return hct__device_find(spec, dev);
}

/* The fleet decisions that may apply to this card: its model key and
 * environment, another card's (or the fleet's), the op asked for. */
static int applies(const hct_db_decision_t *d, const hct_db_keys_t *k, const char *op) {
  return strcmp(d->keys.model_key, k->model_key) == 0 &&
         strcmp(d->keys.driver_version, k->driver_version) == 0 &&
         strcmp(d->keys.compiler_version, k->compiler_version) == 0 &&
         strcmp(d->keys.hctune_version, k->hctune_version) == 0 &&
         strcmp(d->keys.uuid, k->uuid) != 0 && strcmp(d->op, op) == 0;
}

/* The fleet's decisions: every one of the newest group (a merge's pseudo
 * card, or the card of an export) that applies. */
static int fleet_decisions(const hct_fleet_verify_opts_t *o, hct_db_t *db, const hct_db_keys_t *k,
                           const char *op, hct_db_decision_t **out, int *n) {
  *out = NULL;
  *n = 0;
  hct_db_decision_t *all = NULL;
  int nall = 0, rc;
  if (o->fleet_db != NULL) {
    hct_fleet_t f;
    rc = hct__fleet_read_some(o->fleet_db, HCT_FLEET_DECISIONS, &f);
    if (rc == 0 && f.n_decisions > 0) {
      all = calloc((size_t)f.n_decisions, sizeof *all);
      if (all == NULL) rc = hct__error(HCT_ENOMEM, "out of memory");
      for (int i = 0; all != NULL && i < f.n_decisions; i++)
        hct__fleet_decision_to_db(&f.decisions[i], &all[nall++]);
    }
    hct__fleet_free(&f);
  } else {
    rc = hct__db_decisions_list(db, &all, &nall);
    /* Only what came from the fleet: a card's own probe decisions of
     * another card in this DB are not the fleet's word. */
    int m = 0;
    for (int i = 0; rc == 0 && i < nall; i++)
      if (strcmp(all[i].source, "fleet") == 0) all[m++] = all[i];
    nall = m;
  }
  if (rc != 0) {
    free(all);
    return rc;
  }
  const char *group = NULL;
  int64_t newest = -1;
  for (int i = 0; i < nall; i++)
    if (applies(&all[i], k, op) && all[i].decided_at > newest) {
      newest = all[i].decided_at;
      group = all[i].keys.uuid;
    }
  int m = 0;
  char chosen[64] = "";
  if (group != NULL) hct__strlcpy(chosen, group, sizeof chosen);
  for (int i = 0; group != NULL && i < nall; i++)
    if (applies(&all[i], k, op) && strcmp(all[i].keys.uuid, chosen) == 0) all[m++] = all[i];
  *out = all;
  *n = m;
  return 0;
}

/* Parity trials of this card for op, recorded at or after `since`. */
static int checked_trials(hct_db_t *db, const char *uuid, const char *op, int64_t since,
                          json_t **out) {
  char *text = NULL;
  int rc = hct__db_trials_json(db, uuid, op, "", 0, &text);
  if (rc != 0) return rc;
  json_t *all = json_loads(text, 0, NULL);
  free(text);
  json_t *arr = json_array();
  size_t i;
  json_t *t;
  json_array_foreach(all, i, t) {
    const char *kind = json_string_value(json_object_get(t, "kind"));
    if (kind == NULL || strcmp(kind, "parity") != 0) continue;
    if (json_integer_value(json_object_get(t, "created_at")) < since) continue;
    json_array_append(arr, t);
  }
  json_decref(all);
  *out = arr;
  return 0;
}

/* Why decision d cannot be adopted ("" when it can): every T of its range
 * that was asked for checked for its candidate, every check passed, on its
 * template and under its software key. */
static void verdict(const hct_db_decision_t *d, const hct_tokens_t *asked, json_t *trials,
                    char *why, size_t len) {
  why[0] = '\0';
  json_t *want = json_loads(d->params, 0, NULL);
  for (int k = 0; k < asked->n && why[0] == '\0'; k++) {
    int T = asked->t[k];
    if (T < d->tmin || T > d->tmax) continue;
    int seen = 0;
    size_t i;
    json_t *t;
    json_array_foreach(trials, i, t) {
      if (json_integer_value(json_object_get(t, "tokens")) != T) continue;
      const char *v = json_string_value(json_object_get(t, "variant"));
      if (v == NULL || strcmp(v, d->variant) != 0) continue;
      if (want != NULL && !json_equal(want, json_object_get(t, "params"))) continue;
      seen++;
      const char *st = json_string_value(json_object_get(t, "status"));
      const char *th = json_string_value(json_object_get(t, "template_hash"));
      const char *sk = json_string_value(json_object_get(t, "software_key"));
      if (st == NULL || strcmp(st, "pass") != 0)
        snprintf(why, len, "parity check at T=%d: %s", T, st ? st : "no status");
      else if (d->template_hash[0] && th && strcmp(th, d->template_hash) != 0)
        snprintf(why, len, "the local template differs from the fleet's (%.8s, fleet %.8s)", th,
                 d->template_hash);
      else if (d->software_key[0] && sk && sk[0] && strcmp(sk, d->software_key) != 0)
        snprintf(why, len, "this host's software key %.8s is not the fleet's %.8s (what shaped "
                 "the binary differs)", sk, d->software_key);
      if (why[0]) break;
    }
    if (why[0] == '\0' && seen == 0) snprintf(why, len, "not checked at T=%d", T);
  }
  json_decref(want);
}

static void report(const hct_fleet_verify_opts_t *o, const hct_db_decision_t *d, const char *why) {
  if (o->probe.json) {
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:b, s:s}", "event", "verify-fleet",
                          "parity", d->parity, "variant", d->variant, "params", d->params, "tmin",
                          d->tmin, "tmax", d->tmax, "passed", why[0] == '\0', "why", why);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
  } else if (why[0] == '\0') {
    printf("verified %s %s for %s T=%d-%d: every parity check passed on this card\n", d->variant,
           d->params, d->parity, d->tmin, d->tmax);
  } else {
    printf("failed %s %s for %s T=%d-%d: %s\n", d->variant, d->params, d->parity, d->tmin,
           d->tmax, why);
  }
  fflush(stdout);
}

static int cmp_decision(const void *a, const void *b) {
  const hct_db_decision_t *x = a, *y = b;
  int c = strcmp(x->parity, y->parity);
  return c ? c : (x->tmin > y->tmin) - (x->tmin < y->tmin);
}

/* Writes the adopted decisions as this card's, one parity group at a
 * time (hct__db_decisions_replace takes one group). */
static int adopt(hct_db_t *db, hct_db_decision_t *d, int n, const hct_db_keys_t *k) {
  qsort(d, (size_t)n, sizeof *d, cmp_decision);
  int64_t now = hct__unix_time();
  for (int i = 0; i < n; i++) {
    char from[64];
    hct__strlcpy(from, d[i].keys.uuid, sizeof from);
    d[i].keys = *k;
    hct__strlcpy(d[i].source, "fleet", sizeof d[i].source);
    char ev[sizeof d[i].evidence_json];
    int w = snprintf(ev, sizeof ev, "{\"verified\":{\"from\":\"%s\",\"at\":%lld,\"how\":"
                     "\"parity checked on this card, timing from the fleet\"},\"fleet\":%s}", from,
                     (long long)now, d[i].evidence_json[0] ? d[i].evidence_json : "{}");
    if (w > 0 && (size_t)w < sizeof ev && strchr(from, '"') == NULL)
      memcpy(d[i].evidence_json, ev, (size_t)w + 1);
  }
  int rc = 0;
  for (int a = 0; rc == 0 && a < n;) {
    int b = a;
    while (b < n && strcmp(d[b].parity, d[a].parity) == 0) b++;
    rc = hct__db_decisions_replace(db, &d[a], b - a);
    a = b;
  }
  return rc;
}

int hct__fleet_verify(const hct_fleet_verify_opts_t *o) {
  int (*probe)(void *, const hct_probe_opts_t *) = o->run_probe ? o->run_probe : real_probe;
  int (*find)(void *, const char *, hct_device_t *) = o->find_device ? o->find_device : real_find;
  const char *op = o->probe.op ? o->probe.op : "hc_read";
  hct_device_t dev;
  int rc = find(o->hook_arg, o->probe.device ? o->probe.device : "0", &dev);
  if (rc != 0) return rc;
  hct_db_keys_t k;
  memset(&k, 0, sizeof k);
  hct__hostname(k.host, sizeof k.host);
  hct__strlcpy(k.uuid, dev.uuid, sizeof k.uuid);
  hct__device_model_key(&dev, k.model_key, sizeof k.model_key);
  hct__strlcpy(k.driver_version, dev.driver_version, sizeof k.driver_version);
  hct__strlcpy(k.compiler_version, dev.compiler_version, sizeof k.compiler_version);
  hct__strlcpy(k.hctune_version, HCT_VERSION_STRING, sizeof k.hctune_version);

  char dbpath[1024];
  if (o->probe.db_path) hct__strlcpy(dbpath, o->probe.db_path, sizeof dbpath);
  else if ((rc = hct__default_db_path(dbpath, sizeof dbpath, 1)) != 0) return rc;
  hct_db_t *db = NULL;
  if ((rc = hct__db_open(dbpath, 0, &db)) != 0) return rc;
  hct_db_decision_t *d = NULL;
  int n = 0;
  rc = fleet_decisions(o, db, &k, op, &d, &n);
  hct__db_close(db);
  db = NULL;
  if (rc != 0) return rc;

  const char *fallback = NULL;
  char why_all[1024] = "";
  if (n == 0) {
    fallback = "the fleet has no decision for this card's model and software";
  } else {
    /* The check-only probe: the winners' variants (the baseline always
     * comes along) at the token counts of their ranges. */
    hct_probe_opts_t po = o->probe;
    char variants[1024] = "";
    memset(&po.tokens, 0, sizeof po.tokens);
    for (int i = 0; i < n; i++) {
      char pat[40], have[1100];
      snprintf(pat, sizeof pat, ",%s,", d[i].variant);
      snprintf(have, sizeof have, ",%s,", variants);
      if (strstr(have, pat) == NULL && strlen(variants) + strlen(d[i].variant) + 2 < sizeof variants)
        snprintf(variants + strlen(variants), sizeof variants - strlen(variants), "%s%s",
                 variants[0] ? "," : "", d[i].variant);
      /* Every T of the range while the token set has room (a prefill
       * range may span thousands; its ends are taken first). */
      hct__tokens_add(&po.tokens, d[i].tmin);
      hct__tokens_add(&po.tokens, d[i].tmax);
      for (int T = d[i].tmin + 1; T < d[i].tmax && po.tokens.n < HCT_MAX_TOKEN_LIST; T++)
        hct__tokens_add(&po.tokens, T);
    }
    /* Only the winning points: the fleet timed the others already, and
     * each point checked here is one compile more on a cold cache. */
    size_t plen = 1;
    for (int i = 0; i < n; i++) plen += strlen(d[i].variant) + strlen(d[i].params) + 2;
    char *points = malloc(plen);
    if (points == NULL) {
      free(d);
      return hct__error(HCT_ENOMEM, "verify-fleet: out of memory");
    }
    points[0] = '\0';
    for (int i = 0, off = 0; i < n; i++)
      off += snprintf(points + off, plen - (size_t)off, "%s%s %s", i ? "\n" : "", d[i].variant,
                      d[i].params);
    po.only_variants = variants;
    po.only_points = points;
    po.check_only = 1;
    po.no_table = 1;
    int64_t since = hct__unix_time();
    rc = probe(o->hook_arg, &po);
    free(points);
    if (rc != 0) {
      snprintf(why_all, sizeof why_all, "the check run failed: %s", hct_last_error());
      fallback = why_all;
    } else if ((rc = hct__db_open(dbpath, 0, &db)) == 0) {
      json_t *trials = NULL;
      rc = checked_trials(db, k.uuid, op, since, &trials);
      int failed = 0;
      for (int i = 0; rc == 0 && i < n; i++) {
        char why[256];
        verdict(&d[i], &po.tokens, trials, why, sizeof why);
        report(o, &d[i], why);
        if (why[0] && !failed) {
          failed = 1;
          snprintf(why_all, sizeof why_all, "%s %s (%s T=%d-%d): %s", d[i].variant, d[i].params,
                   d[i].parity, d[i].tmin, d[i].tmax, why);
        }
      }
      json_decref(trials);
      if (rc == 0 && !failed) rc = adopt(db, d, n, &k);
      if (rc == 0 && failed) fallback = why_all;
      hct__db_close(db);
    }
  }
  free(d);
  if (rc != 0 && fallback == NULL) return rc;
  if (fallback == NULL) {
    if (!o->probe.json && !o->probe.quiet)
      printf("verify-fleet: %d fleet decision%s of %s adopted for %s without timing\n", n,
             n == 1 ? "" : "s", op, k.uuid);
    return 0;
  }
  if (o->probe.json) {
    json_t *j = json_pack("{s:s, s:s, s:s}", "event", "verify-fleet-fallback", "op", op,
                          "reason", fallback);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
  } else
    printf("verify-fleet: full probe of %s: %s\n", op, fallback);
  fflush(stdout);
  return probe(o->hook_arg, &o->probe);
}
