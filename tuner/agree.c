/*
 * agree.c: the cards of one host compared as the fleet compares hosts.
 *
 * Identical cards should agree; one that does not is suspect.  There is
 * one rule for that, the fleet merge's (db/merge.c): each card's results
 * are exported as a fleet set (hct__fleet_export), the sets merged
 * (hct__fleet_merge), and what the merge found is applied to the local DB:
 *   - its decisions, recomputed from the pooled trials of each (card model,
 *     environment, op) group with its outlier cards left out, are written
 *     under the group's pool card ("pooled-<hash>", source "fleet"): the
 *     daemon answers a card of that model with them where the card has no
 *     decision of its own (daemon/index.c), before any single card's;
 *   - a variant that passed parity on one card and failed on an identical
 *     one ("conflict") is quarantined on every card of the model, and a
 *     card decision that picked it is replaced by the pooled one, which
 *     leaves it out (source "fleet": measured on its peers);
 *   - a card whose medians run slow against its peers ("outlier") is
 *     reported with the merge's figures; its own decisions stay its own.
 * Loop thread only (it uses the caller's DB handle).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "fleet.h"
#include "tuner.h"

void hct__agree_free(hct_agree_t *a) {
  if (a == NULL) return;
  free(a->report_json);
  a->report_json = NULL;
}

/* The pool card of a merged group on this host: "pooled-" and a hash of
 * the host and the merge's name for the group ("fleet-<hash of model and
 * environment>"), so the pools of two hosts never replace each other when
 * one's export is imported by the other. */
static void pool_uuid(const char *host, const char *merged, char *buf, size_t len) {
  char seed[256];
  int n = snprintf(seed, sizeof seed, "%s\n%s", host, merged);
  XXH64_hash_t h = XXH3_64bits(seed, n > 0 && (size_t)n < sizeof seed ? (size_t)n : sizeof seed - 1);
  snprintf(buf, len, "pooled-%016llx", (unsigned long long)h);
}

/* The keys of card `uuid` in environment `env` ("driver|compiler|hctune",
 * as the merge names a group's; NULL: any) as its trials recorded them:
 * a quarantine row holds for one driver version, so it must be the
 * group's. */
static int card_keys(const hct_fleet_t *f, const char *uuid, const char *env, hct_db_keys_t *k) {
  memset(k, 0, sizeof *k);
  for (int i = 0; i < f->n_trials; i++) {
    const hct_fleet_trial_t *t = &f->trials[i];
    if (strcmp(t->uuid, uuid) != 0) continue;
    char e[128];
    snprintf(e, sizeof e, "%s|%s|%s", t->driver_version, t->compiler_version, t->hctune_version);
    if (env != NULL && strcmp(e, env) != 0) continue;
    hct__strlcpy(k->host, t->host, sizeof k->host);
    hct__strlcpy(k->uuid, t->uuid, sizeof k->uuid);
    hct__strlcpy(k->model_key, t->model_key, sizeof k->model_key);
    hct__strlcpy(k->driver_version, t->driver_version, sizeof k->driver_version);
    hct__strlcpy(k->compiler_version, t->compiler_version, sizeof k->compiler_version);
    hct__strlcpy(k->hctune_version, t->hctune_version, sizeof k->hctune_version);
    return 1;
  }
  return 0;
}

/* Writes the rows d[0..n) (sorted by uuid, op, parity, tmin) one (uuid,
 * op, parity) group at a time, as hct__db_decisions_replace wants them. */
static int replace_groups(hct_db_t *db, const hct_db_decision_t *d, int n) {
  for (int i = 0; i < n;) {
    int k = 1;
    while (i + k < n && strcmp(d[i + k].keys.uuid, d[i].keys.uuid) == 0 &&
           strcmp(d[i + k].op, d[i].op) == 0 && strcmp(d[i + k].parity, d[i].parity) == 0)
      k++;
    int rc = hct__db_decisions_replace(db, &d[i], k);
    if (rc != 0) return rc;
    i += k;
  }
  return 0;
}

/* The merged decisions as local rows of the pool card. */
static int pooled_rows(const hct_fleet_t *m, const char *parent_run, hct_db_decision_t **out) {
  *out = calloc((size_t)m->n_decisions + 1, sizeof **out);
  if (*out == NULL) return hct__error(HCT_ENOMEM, "agreement: out of memory");
  char host[128];
  hct__hostname(host, sizeof host);
  for (int i = 0; i < m->n_decisions; i++) {
    hct_db_decision_t *d = &(*out)[i];
    hct__fleet_decision_to_db(&m->decisions[i], d);
    /* The software key the pooled trials were measured under, so the daemon
     * judges a pooled answer stale by the rule it applies to a card's. */
    hct__strlcpy(d->software_key, m->decisions[i].software_key, sizeof d->software_key);
    hct__strlcpy(d->software_json, m->decisions[i].software_json ? m->decisions[i].software_json : "",
                 sizeof d->software_json);
    pool_uuid(host, m->decisions[i].uuid, d->keys.uuid, sizeof d->keys.uuid);
    hct__strlcpy(d->keys.host, host, sizeof d->keys.host);
    /* Source "fleet" (hct__fleet_decision_to_db's): measured on the model's
     * cards, not on the one asking; a row every fleet file accepts. */
    hct__strlcpy(d->run_id, parent_run ? parent_run : "", sizeof d->run_id);
    /* Provenance in the evidence when it fits: which host and run pooled. */
    char pre[160];
    int np = snprintf(pre, sizeof pre, "{\"pooled\":{\"host\":\"%.64s\",\"run\":\"%s\"},", host,
                      d->run_id);
    size_t el = strlen(d->evidence_json);
    if (np > 0 && el > 2 && d->evidence_json[0] == '{' && el + (size_t)np < sizeof d->evidence_json &&
        strchr(host, '"') == NULL && strchr(host, '\\') == NULL) {
      memmove(d->evidence_json + np, d->evidence_json + 1, el);
      memcpy(d->evidence_json, pre, (size_t)np);
    }
  }
  return 0;
}

/* Quarantines the conflicting variant of `fl` on every card of its model
 * (a row per card not already holding one).  Returns the rows added or a
 * negative code. */
static int quarantine_model(hct_db_t *db, const hct_fleet_t *m, const hct_fleet_flag_t *fl) {
  int added = 0;
  char log[1600];
  snprintf(log, sizeof log, "parity differs between identical cards of '%s': %s", fl->model_key,
           fl->detail);
  for (int i = 0; i < m->n_devices; i++) {
    const hct_fleet_device_t *dev = &m->devices[i];
    if (strcmp(dev->model_key, fl->model_key) != 0) continue;
    hct_db_keys_t k;
    if (!card_keys(m, dev->uuid, fl->env, &k)) continue;
    int q = hct__db_fault_check(db, &k, fl->op, fl->variant, fl->params, fl->template_hash, 0);
    if (q < 0) return q;
    if (q) continue;
    hct_qcand_t c = {&k, fl->op, fl->variant, fl->params, fl->template_hash};
    int rc = hct__quarantine_add(db, &c, 0, "parity", log);
    if (rc != 0) return rc;
    added++;
  }
  return added;
}

/* A card decision that picked a variant quarantined for its model gives
 * way to the pooled decisions of its (op, parity), under its own keys.
 * Returns the card groups replaced or a negative code. */
static int replace_conflicted(hct_db_t *db, const hct_fleet_t *m, const hct_fleet_flag_t *fl,
                              const hct_db_decision_t *pool, int npool) {
  hct_db_decision_t *dec = NULL;
  int nd = 0, rc = hct__db_decisions_list(db, &dec, &nd);
  if (rc < 0) return rc;
  int replaced = 0;
  for (int i = 0; rc >= 0 && i < nd; i++) {
    const hct_db_decision_t *x = &dec[i];
    if (strcmp(x->keys.model_key, fl->model_key) != 0 || strcmp(x->op, fl->op) != 0 ||
        strcmp(x->variant, fl->variant) != 0 || strcmp(x->params, fl->params) != 0 ||
        strcmp(x->source, "fleet") == 0)
      continue;
    /* A card compared here, in the group's environment (the decision's
     * keys: its driver, compiler and hctune version). */
    hct_db_keys_t k;
    char env[128];
    snprintf(env, sizeof env, "%s|%s|%s", x->keys.driver_version, x->keys.compiler_version,
             x->keys.hctune_version);
    if (strcmp(env, fl->env) != 0 || !card_keys(m, x->keys.uuid, env, &k)) continue;
    hct_db_decision_t *rows = calloc((size_t)npool + 1, sizeof *rows);
    if (rows == NULL) {
      rc = hct__error(HCT_ENOMEM, "agreement: out of memory");
      break;
    }
    int n = 0;
    for (int p = 0; p < npool; p++) {
      if (strcmp(pool[p].keys.model_key, fl->model_key) != 0 || strcmp(pool[p].op, x->op) != 0 ||
          strcmp(pool[p].parity, x->parity) != 0 ||
          strcmp(pool[p].keys.driver_version, x->keys.driver_version) != 0 ||
          strcmp(pool[p].keys.compiler_version, x->keys.compiler_version) != 0 ||
          strcmp(pool[p].keys.hctune_version, x->keys.hctune_version) != 0)
        continue;
      rows[n] = pool[p];
      rows[n].keys = k;
      /* Measured on its peers, not on this card: what the daemon calls a
       * fleet answer. */
      hct__strlcpy(rows[n].source, "fleet", sizeof rows[n].source);
      n++;
    }
    if (n > 0 && (rc = hct__db_decisions_replace(db, rows, n)) == 0) replaced++;
    free(rows);
  }
  free(dec);
  return rc < 0 ? rc : replaced;
}

static json_t *detail_json(const char *text) {
  json_t *j = json_loads(text, 0, NULL);
  return j != NULL ? j : json_string(text);
}

/* {"models":[{model, env, cards:[uuid], pooled:[...]}], "flags":[...]} */
static char *report(const hct_fleet_t *m, const hct_db_decision_t *pool) {
  json_t *models = json_array(), *flags = json_array();
  for (int i = 0; i < m->n_devices; i++) {
    const hct_fleet_device_t *dev = &m->devices[i];
    json_t *mo = NULL;
    for (size_t k = 0; k < json_array_size(models); k++) {
      json_t *x = json_array_get(models, k);
      if (strcmp(json_string_value(json_object_get(x, "model")), dev->model_key) == 0) mo = x;
    }
    if (mo == NULL) {
      mo = json_pack("{s:s, s:[], s:[]}", "model", dev->model_key, "cards", "pooled");
      json_array_append_new(models, mo);
    }
    json_array_append_new(json_object_get(mo, "cards"), json_string(dev->uuid));
  }
  for (int i = 0; i < m->n_decisions; i++) {
    const hct_db_decision_t *d = &pool[i];
    for (size_t k = 0; k < json_array_size(models); k++) {
      json_t *x = json_array_get(models, k);
      if (strcmp(json_string_value(json_object_get(x, "model")), d->keys.model_key) != 0) continue;
      json_array_append_new(json_object_get(x, "pooled"),
                            json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:f, s:f, s:o}",
                                      "pool", d->keys.uuid, "op", d->op, "parity", d->parity,
                                      "tmin", d->tmin, "tmax", d->tmax, "variant", d->variant,
                                      "params", d->params, "median_us", d->median_us,
                                      "baseline_us", d->baseline_us, "evidence",
                                      detail_json(d->evidence_json)));
    }
  }
  for (int i = 0; i < m->n_flags; i++) {
    const hct_fleet_flag_t *fl = &m->flags[i];
    json_array_append_new(flags, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "kind",
                                           fl->kind, "model", fl->model_key, "card", fl->uuid,
                                           "op", fl->op, "variant", fl->variant, "params",
                                           fl->params, "env", fl->env, "detail",
                                           detail_json(fl->detail)));
  }
  json_t *r = json_pack("{s:o, s:o}", "models", models, "flags", flags);
  char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;
  json_decref(r);
  return s;
}

int hct__agree(hct_db_t *db, const char *kernels_dir, const char *const *uuids, int n,
               double outlier_pct, const char *parent_run, int write, hct_agree_t *out) {
  memset(out, 0, sizeof *out);
  hct_fleet_t *sets = calloc((size_t)n + 1, sizeof *sets);
  if (sets == NULL) return hct__error(HCT_ENOMEM, "agreement: out of memory");
  int rc = 0, ns = 0;
  for (; rc == 0 && ns < n; ns++) rc = hct__fleet_export(db, uuids[ns], kernels_dir, &sets[ns]);
  hct_fleet_t m;
  memset(&m, 0, sizeof m);
  hct_db_decision_t *pool = NULL;
  if (rc == 0) {
    hct_fleet_merge_opts_t mo = {.outlier_pct = outlier_pct};
    rc = hct__fleet_merge(sets, n, &mo, &m);
  }
  if (rc == 0) rc = pooled_rows(&m, parent_run, &pool);
  if (rc == 0 && write) rc = hct__db_begin(db);
  if (rc == 0 && write) {
    rc = replace_groups(db, pool, m.n_decisions);
    for (int i = 0; rc == 0 && i < m.n_flags; i++) {
      if (strcmp(m.flags[i].kind, "conflict") != 0) continue;
      int q = quarantine_model(db, &m, &m.flags[i]);
      int r = q < 0 ? 0 : replace_conflicted(db, &m, &m.flags[i], pool, m.n_decisions);
      if (q < 0 || r < 0) rc = q < 0 ? q : r;
      else out->faults_added += q, out->replaced += r;
    }
    if (rc == 0) rc = hct__db_commit(db);
    else {
      char saved[1024];
      snprintf(saved, sizeof saved, "%s", hct_last_error());
      hct__db_rollback(db);
      hct__error(rc, "%s", saved);
    }
  }
  if (rc == 0) {
    out->pooled = write ? m.n_decisions : 0;
    for (int i = 0; i < m.n_flags; i++) {
      out->outliers += strcmp(m.flags[i].kind, "outlier") == 0;
      out->conflicts += strcmp(m.flags[i].kind, "conflict") == 0;
    }
    out->report_json = report(&m, pool);
    if (out->report_json == NULL) rc = hct__error(HCT_ENOMEM, "agreement: out of memory");
    json_t *r = out->report_json ? json_loads(out->report_json, 0, NULL) : NULL;
    out->models = (int)json_array_size(json_object_get(r, "models"));
    json_decref(r);
  }
  free(pool);
  hct__fleet_free(&m);
  for (int i = 0; i < ns; i++) hct__fleet_free(&sets[i]);
  free(sets);
  return rc;
}

void hct__agree_print(const hct_agree_t *a, FILE *f) {
  json_t *r = a->report_json ? json_loads(a->report_json, 0, NULL) : NULL;
  if (r == NULL) return;
  json_t *models = json_object_get(r, "models"), *flags = json_object_get(r, "flags");
  fprintf(f, "agreement: %zu model%s, %d outlier card%s, %d variant%s quarantined\n",
          json_array_size(models), json_array_size(models) == 1 ? "" : "s", a->outliers,
          a->outliers == 1 ? "" : "s", a->conflicts, a->conflicts == 1 ? "" : "s");
  for (size_t i = 0; i < json_array_size(models); i++) {
    json_t *mo = json_array_get(models, i), *pooled = json_object_get(mo, "pooled");
    fprintf(f, "  %s: %zu card%s\n", json_string_value(json_object_get(mo, "model")),
            json_array_size(json_object_get(mo, "cards")),
            json_array_size(json_object_get(mo, "cards")) == 1 ? "" : "s");
    for (size_t k = 0; k < json_array_size(pooled); k++) {
      json_t *p = json_array_get(pooled, k);
      fprintf(f, "    pooled %s %s T=%d-%d: %s %s %.2f us (baseline %.2f us)\n",
              json_string_value(json_object_get(p, "op")),
              json_string_value(json_object_get(p, "parity")),
              (int)json_integer_value(json_object_get(p, "tmin")),
              (int)json_integer_value(json_object_get(p, "tmax")),
              json_string_value(json_object_get(p, "variant")),
              json_string_value(json_object_get(p, "params")),
              json_real_value(json_object_get(p, "median_us")),
              json_real_value(json_object_get(p, "baseline_us")));
    }
  }
  for (size_t i = 0; i < json_array_size(flags); i++) {
    json_t *fl = json_array_get(flags, i);
    char *detail = json_dumps(json_object_get(fl, "detail"), JSON_COMPACT);
    const char *kind = json_string_value(json_object_get(fl, "kind"));
    if (strcmp(kind, "outlier") == 0)
      fprintf(f, "  OUTLIER card %s (%s): slower than its peers: %s\n",
              json_string_value(json_object_get(fl, "card")),
              json_string_value(json_object_get(fl, "model")), detail ? detail : "");
    else
      fprintf(f, "  QUARANTINED %s %s %s for %s: %s\n", json_string_value(json_object_get(fl, "op")),
              json_string_value(json_object_get(fl, "variant")),
              json_string_value(json_object_get(fl, "params")),
              json_string_value(json_object_get(fl, "model")), detail ? detail : "");
    free(detail);
  }
  if (a->faults_added > 0 || a->replaced > 0)
    fprintf(f, "  %d quarantine row%s added, %d card decision%s replaced by the pooled one\n",
            a->faults_added, a->faults_added == 1 ? "" : "s", a->replaced, a->replaced == 1 ? "" : "s");
  json_decref(r);
}
