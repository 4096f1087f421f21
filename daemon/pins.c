/*
 * pins.c: the verbs that write: pin and unpin.  An administrator's pin wins
 * over every decision (daemon/answer.c) until it ends or is removed.
 *
 * The write runs on the DB lane (daemon/snapshot.c), off the loop thread:
 * while another process holds the DB's write lock, only the asking
 * connection waits (its later requests are held so that replies keep their
 * order), never the other clients.  The reply goes out once the snapshot
 * holding the change is in place, so a pin answered ok is served.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

typedef struct pin_job_s {
  hct_dbjob_t job; /* first: the lane hands this back */
  hct_daemon_t *d;
  uint64_t conn_serial;
  char id[HCT_ID_TEXT];
  uid_t uid;
  int unpin;
  hct_db_pin_t p; /* unpin: uuid, op, tmin, tmax */
  int removed;
} pin_job_t;

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

static int pin_write(hct_dbjob_t *j, hct_db_t *w) {
  pin_job_t *pj = (pin_job_t *)j;
  if (!pj->unpin) return hct__db_pin_add(w, &pj->p);
  int rc = hct__db_pin_remove(w, pj->p.uuid, pj->p.op, pj->p.tmin, pj->p.tmax);
  if (rc >= 0) pj->removed = rc;
  return rc < 0 ? rc : 0;
}

static void pin_done(hct_dbjob_t *j, int rc) {
  pin_job_t *pj = (pin_job_t *)j;
  hct_daemon_t *d = pj->d;
  const hct_db_pin_t *p = &pj->p;
  hct_conn_t *c = hct__conn_by_serial(d, pj->conn_serial);
  if (rc < 0) {
    const char *why = j->err[0] ? j->err : hct_strerror(rc);
    hct__log(HCT_LOG_WARN, "%s of %s on %s by uid %u failed: %s", pj->unpin ? "unpin" : "pin",
             p->op, p->uuid, (unsigned)pj->uid, why);
    if (c != NULL) hct__reply_error(c, pj->id, rc, why);
  } else if (pj->unpin) {
    hct__log(HCT_LOG_INFO, "%s on %s: %d pin(s) for T=%d-%d removed by uid %u", p->op, p->uuid,
             pj->removed, p->tmin, p->tmax, (unsigned)pj->uid);
    if (c != NULL)
      hct__reply_json(c, pj->id, json_pack("{s:b, s:i}", "ok", 1, "removed", pj->removed));
  } else {
    hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d-%d pinned by uid %u", p->op, p->uuid,
             p->variant, p->tmin, p->tmax, (unsigned)pj->uid);
    if (c != NULL) hct__reply_json(c, pj->id, json_pack("{s:b, s:o}", "ok", 1, "pinned", hct__pin_json(p)));
  }
  if (c != NULL) hct__conn_resume(c);
  free(pj);
}

static int submit(hct_conn_t *c, hct_req_t *r, pin_job_t *pj) {
  pj->job.write = pin_write;
  pj->job.done = pin_done;
  pj->d = c->d;
  pj->conn_serial = c->serial;
  pj->uid = c->uid;
  memcpy(pj->id, r->id, sizeof pj->id);
  c->busy = 1;
  hct__snapshot_submit(c->d, &pj->job);
  return 0;
}

int hct__req_pin(hct_conn_t *c, hct_req_t *r) {
  hct_daemon_t *d = c->d;
  const hct_op_t *op = hct__op_get(d, r->op);
  if (op == NULL) return hct__error_prefixed(HCT_ENOENT, "pin");
  const hct_variant_t *v = hct__variant_find(op, r->variant);
  if (v == NULL) return hct__error(HCT_ENOENT, "pin: op '%s' has no variant '%s'", r->op, r->variant);
  pin_job_t *pj = calloc(1, sizeof *pj);
  if (pj == NULL) return hct__error(HCT_ENOMEM, "pin: out of memory");
  hct_db_pin_t *p = &pj->p;
  hct__strlcpy(p->uuid, r->device, sizeof p->uuid);
  hct__strlcpy(p->op, r->op, sizeof p->op);
  hct__strlcpy(p->variant, r->variant, sizeof p->variant);
  p->tmin = r->tmin > 0 ? r->tmin : 1;
  p->tmax = r->tmax > 0 ? r->tmax : HCT_MAX_TOKENS;
  p->until = r->until;
  p->created_at = hct__unix_time();
  int rc = pin_params(v, r->params, p->params, sizeof p->params);
  if (rc == 0 && p->until != 0 && p->until <= p->created_at)
    rc = hct__error(HCT_ERANGE, "pin: 'until' %lld is in the past", (long long)p->until);
  if (rc < 0) {
    free(pj);
    return rc;
  }
  return submit(c, r, pj);
}

int hct__req_unpin(hct_conn_t *c, hct_req_t *r) {
  pin_job_t *pj = calloc(1, sizeof *pj);
  if (pj == NULL) return hct__error(HCT_ENOMEM, "unpin: out of memory");
  pj->unpin = 1;
  hct__strlcpy(pj->p.uuid, r->device, sizeof pj->p.uuid);
  hct__strlcpy(pj->p.op, r->op, sizeof pj->p.op);
  pj->p.tmin = r->tmin > 0 ? r->tmin : 1;
  pj->p.tmax = r->tmax > 0 ? r->tmax : HCT_MAX_TOKENS;
  return submit(c, r, pj);
}
