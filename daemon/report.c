/*
 * report.c: the verbs that report what the daemon holds: list (decisions
 * and pins), devices, status.  Loop thread only; they read the snapshot.
 */
#include <string.h>
#include <unistd.h>

#include "daemon.h"

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

int hct__req_list(hct_conn_t *c, hct_req_t *r) {
  int n, np;
  const hct_db_decision_t *dec = hct__index_decisions(c->d->ix, &n);
  const hct_db_pin_t *pins = hct__index_pins(c->d->ix, &np);
  json_t *arr = json_array(), *parr = json_array();
  for (int i = 0; i < n; i++) {
    if (r->device != NULL && strcmp(r->device, dec[i].keys.uuid) != 0) continue;
    if (r->op != NULL && strcmp(r->op, dec[i].op) != 0) continue;
    json_t *j = hct__decision_json(&dec[i], dec[i].source[0] ? dec[i].source
                                                             : hct_source_name(HCT_SOURCE_PROBE));
    json_object_del(j, "ok");
    json_object_set_new(j, "op", json_string(dec[i].op));
    json_object_set_new(j, "parity", json_string(dec[i].parity));
    json_object_set_new(j, "model", json_string(dec[i].keys.model_key));
    json_array_append_new(arr, j);
  }
  for (int i = 0; i < np; i++) {
    if (r->device != NULL && strcmp(r->device, pins[i].uuid) != 0) continue;
    if (r->op != NULL && strcmp(r->op, pins[i].op) != 0) continue;
    json_array_append_new(parr, hct__pin_json(&pins[i]));
  }
  hct__reply_json(c, r->id, json_pack("{s:b, s:o, s:o}", "ok", 1, "decisions", arr, "pins", parr));
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

int hct__req_status(hct_conn_t *c, hct_req_t *r) {
  hct_daemon_t *d = c->d;
  int nd, np, nv;
  hct__index_decisions(d->ix, &nd);
  hct__index_pins(d->ix, &np);
  hct__index_devices(d->ix, &nv);
  json_t *probes = hct__probes_json(d);
  hct__reply_json(c, r->id,
                  json_pack("{s:b, s:s, s:i, s:f, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, "
                            "s:I, s:o}",
                            "ok", 1, "version", HCT_VERSION_STRING, "pid", (int)getpid(),
                            "uptime_s", (hct__now_ns() - d->started_ns) / 1e9, "db", d->db_path,
                            "socket", d->socket_path, "kernels", d->kernels_dir, "decisions", nd,
                            "pins", np, "devices", nv, "clients", d->n_conns, "requests",
                            (json_int_t)d->requests, "reloads", (json_int_t)d->reloads,
                            "data_version", (json_int_t)d->data_version, "probes", probes));
  return 0;
}
