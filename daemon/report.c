/*
 * report.c: the verbs that report what the daemon holds: list (decisions
 * and pins), devices, status.  Loop thread only; they read the snapshot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

static int list_match(const hct_req_t *r, const char *uuid, const char *op) {
  return (r->device == NULL || strcmp(r->device, uuid) == 0) &&
         (r->op == NULL || strcmp(r->op, op) == 0);
}

/* The reply is assembled from entries rendered once per snapshot
 * (hct__index_list_item): a list of thousands of decisions costs copies,
 * not a JSON build, on the loop thread. */
int hct__req_list(hct_conn_t *c, hct_req_t *r) {
  int n, np;
  const hct_index_t *ix = c->d->ix;
  const hct_db_decision_t *dec = hct__index_decisions(ix, &n);
  const hct_db_pin_t *pins = hct__index_pins(ix, &np);
  json_t *parr = json_array();
  for (int i = 0; i < np; i++)
    if (list_match(r, pins[i].uuid, pins[i].op)) json_array_append_new(parr, hct__pin_json(&pins[i]));
  char *ptext = json_dumps(parr, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(parr);
  if (ptext == NULL) return hct__error(HCT_ENOMEM, "list: out of memory");
  char head[HCT_ID_TEXT + 64];
  int hn = snprintf(head, sizeof head, "{%s%s%s\"ok\":true,\"decisions\":[", r->id[0] ? "\"id\":" : "",
                    r->id, r->id[0] ? "," : "");
  size_t total = (size_t)hn + strlen(ptext) + 16, len;
  for (int i = 0; i < n; i++)
    if (list_match(r, dec[i].keys.uuid, dec[i].op)) {
      hct__index_list_item(ix, i, &len);
      total += len + 1;
    }
  char *out = malloc(total);
  if (out == NULL) {
    free(ptext);
    return hct__error(HCT_ENOMEM, "list: out of memory for %zu bytes", total);
  }
  memcpy(out, head, (size_t)hn);
  size_t o = (size_t)hn;
  int first = 1;
  for (int i = 0; i < n; i++) {
    if (!list_match(r, dec[i].keys.uuid, dec[i].op)) continue;
    const char *item = hct__index_list_item(ix, i, &len);
    if (!first) out[o++] = ',';
    first = 0;
    memcpy(out + o, item, len);
    o += len;
  }
  o += (size_t)snprintf(out + o, total - o, "],\"pins\":%s}\n", ptext);
  free(ptext);
  hct__reply_take(c, out, o);
  return 0;
}

int hct__req_devices(hct_conn_t *c, hct_req_t *r) {
  int n;
  const hct_db_device_t *dev = hct__index_devices(c->d->ix, &n);
  json_t *arr = json_array();
  for (int i = 0; i < n; i++) {
    json_t *fp = dev[i].fingerprint_json != NULL ? json_loads(dev[i].fingerprint_json, 0, NULL)
                                                 : NULL;
    json_array_append_new(
        arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:o}", "uuid", dev[i].uuid, "host",
                       dev[i].host, "model", dev[i].model_key, "name", dev[i].name, "arch",
                       dev[i].arch, "first_seen", (json_int_t)dev[i].first_seen, "last_seen",
                       (json_int_t)dev[i].last_seen, "fingerprint",
                       fp != NULL ? fp : json_null()));
  }
  hct__reply_json(c, r->id, json_pack("{s:b, s:o}", "ok", 1, "devices", arr));
  return 0;
}

/* The live fleet (--fleet-url) as the status verb shows it; null without
 * one.  Times are ISO 8601, null when it never happened. */
static json_t *fleet_json(const hct_daemon_t *d) {
  hct_fleet_state_t st;
  if (!hct__fleet_pull_state(d, &st)) return json_null();
  char pull[40] = "", err[40] = "";
  if (st.last_pull_at > 0) hct__iso_time(st.last_pull_at, pull, sizeof pull);
  if (st.last_error_at > 0) hct__iso_time(st.last_error_at, err, sizeof err);
  return json_pack("{s:s, s:s, s:i, s:i, s:o, s:I, s:i, s:s, s:o}", "url", st.url, "state",
                   st.state, "models", st.models, "poll_ms", st.poll_ms, "last_pull",
                   pull[0] ? json_string(pull) : json_null(), "revision",
                   (json_int_t)st.revision, "decisions", st.decisions, "last_error",
                   st.last_error, "last_error_at", err[0] ? json_string(err) : json_null());
}

int hct__req_status(hct_conn_t *c, hct_req_t *r) {
  hct_daemon_t *d = c->d;
  int nd, np, nv;
  hct__index_decisions(d->ix, &nd);
  hct__index_pins(d->ix, &np);
  hct__index_devices(d->ix, &nv);
  json_t *probes = hct__probes_json(d);
  json_t *o = json_pack("{s:b, s:s, s:i, s:f, s:s, s:s, s:s, s:b, s:i, s:i, s:i, s:i, s:I, s:I, "
                        "s:I, s:o}",
                        "ok", 1, "version", HCT_VERSION_STRING, "pid", (int)getpid(), "uptime_s",
                        (hct__now_ns() - d->started_ns) / 1e9, "db", d->db_path, "socket",
                        d->socket_path, "kernels", d->kernels_dir, "stale", d->stale,
                        "decisions", nd, "pins", np, "devices", nv, "clients", d->n_conns,
                        "requests", (json_int_t)d->requests, "reloads", (json_int_t)d->reloads,
                        "data_version", (json_int_t)d->data_version, "probes", probes);
  json_t *lim = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I}", "max_clients", d->max_clients,
                          "max_queued", (json_int_t)d->max_queued, "queued",
                          (json_int_t)d->queued, "idle_timeout_s",
                          (json_int_t)(d->idle_timeout_ns / 1000000000ull), "refused",
                          (json_int_t)d->refused, "dropped", (json_int_t)d->dropped,
                          "timed_out", (json_int_t)d->timed_out);
  if (o != NULL) json_object_set_new(o, "limits", lim);
  else json_decref(lim);
  if (o != NULL) json_object_set_new(o, "broken_ops", hct__opset_broken_json(d->ops));
  /* --fleet-db's file, and the live fleet's connection. */
  if (o != NULL) json_object_set_new(o, "fleet_db", d->fleet_db[0] ? json_string(d->fleet_db)
                                                                    : json_null());
  /* The cards answered for, each saying whether this host has it: a card
   * served that is not here is visible (issue 30). */
  if (o != NULL) json_object_set_new(o, "cards", hct__cards_json(d));
  if (o != NULL) json_object_set_new(o, "fleet", fleet_json(d));
  hct__reply_json(c, r->id, o);
  return 0;
}
