/*
 * pins.c: the verbs that write: pin and unpin.  An administrator's pin wins
 * over every decision (daemon/answer.c) until it ends or is removed.
 * Loop thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

/* Pins are written through a connection of their own: the serving one is
 * read-only, so a daemon whose DB is not writable still serves. */
static int with_writable_db(hct_daemon_t *d, hct_db_t **out) {
  int rc = hct__db_open(d->db_path, HCT_DB_NOCREATE, out);
  if (rc < 0) return hct__error_prefixed(rc, "cannot write pins");
  return 0;
}

/* The pin's params: those given, checked strictly against the variant's
 * parameters, or the variant's first point when none are given. */
static int pin_params(const hct_variant_t *v, const json_t *given, char *buf, size_t len) {
  hct_point_t pt;
  if (given == NULL) {
    if (hct__param_points(v, &pt, 1) < 1)
      return hct__error(HCT_EMANIFEST, "pin: variant '%s' has no parameter point", v->name);
  } else if (hct__point_from_json(v, given, &pt) < 0) {
    return hct__error_prefixed(HCT_EINVAL, "pin");
  }
  hct__point_json(v, &pt, buf, len);
  return 0;
}

int hct__req_pin(hct_conn_t *c, hct_req_t *r) {
  hct_daemon_t *d = c->d;
  const hct_op_t *op = hct__op_get(d, r->op);
  if (op == NULL) return hct__error_prefixed(HCT_ENOENT, "pin");
  const hct_variant_t *v = hct__variant_find(op, r->variant);
  if (v == NULL) return hct__error(HCT_ENOENT, "pin: op '%s' has no variant '%s'", r->op, r->variant);
  hct_db_pin_t p;
  memset(&p, 0, sizeof p);
  hct__strlcpy(p.uuid, r->device, sizeof p.uuid);
  hct__strlcpy(p.op, r->op, sizeof p.op);
  hct__strlcpy(p.variant, r->variant, sizeof p.variant);
  p.tmin = r->tmin > 0 ? r->tmin : 1;
  p.tmax = r->tmax > 0 ? r->tmax : HCT_MAX_TOKENS;
  p.until = r->until;
  p.created_at = hct__unix_time();
  int rc = pin_params(v, r->params, p.params, sizeof p.params);
  if (rc < 0) return rc;
  if (p.until != 0 && p.until <= p.created_at)
    return hct__error(HCT_ERANGE, "pin: 'until' %lld is in the past", (long long)p.until);
  hct_db_t *w;
  rc = with_writable_db(d, &w);
  if (rc < 0) return rc;
  rc = hct__db_pin_add(w, &p);
  hct__db_close(w);
  if (rc < 0) return rc;
  hct__snapshot_reload(d);
  hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d-%d pinned by uid %u", p.op, p.uuid, p.variant,
           p.tmin, p.tmax, (unsigned)c->uid);
  hct__reply_json(c, r->id, json_pack("{s:b, s:o}", "ok", 1, "pinned", hct__pin_json(&p)));
  return 0;
}

int hct__req_unpin(hct_conn_t *c, hct_req_t *r) {
  hct_daemon_t *d = c->d;
  hct_db_t *w;
  int rc = with_writable_db(d, &w);
  if (rc < 0) return rc;
  int tmin = r->tmin > 0 ? r->tmin : 1, tmax = r->tmax > 0 ? r->tmax : HCT_MAX_TOKENS;
  rc = hct__db_pin_remove(w, r->device, r->op, tmin, tmax);
  hct__db_close(w);
  if (rc < 0) return rc;
  hct__snapshot_reload(d);
  hct__log(HCT_LOG_INFO, "%s on %s: %d pin(s) for T=%d-%d removed by uid %u", r->op, r->device,
           rc, tmin, tmax, (unsigned)c->uid);
  hct__reply_json(c, r->id, json_pack("{s:b, s:i}", "ok", 1, "removed", rc));
  return 0;
}
