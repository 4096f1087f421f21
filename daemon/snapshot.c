/*
 * snapshot.c: what the daemon answers from, held in memory: the op
 * manifests of the kernels folder (loaded at start) and a snapshot of the
 * DB's decisions, pins and devices (daemon/index.c), reloaded when
 * `PRAGMA data_version` says another process committed.  A row the
 * manifests refute (an unknown variant, params that are not one of its
 * points) is left out of the snapshot with a warning naming it, so it is
 * never served.  Loop thread only.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"

int hct__ops_load(hct_daemon_t *d) {
  if (d->kernels_dir[0] == '\0') return 0;
  char names[HCT_MAX_OPS][32];
  int n = hct__manifest_list(d->kernels_dir, names, HCT_MAX_OPS);
  if (n < 0) return n;
  for (int i = 0; i < n; i++) {
    hct_op_t *op;
    int rc = hct__manifest_load(d->kernels_dir, names[i], &op);
    if (rc < 0) return rc;
    d->ops.ops[d->ops.n++] = op;
  }
  return 0;
}

void hct__ops_free(hct_daemon_t *d) {
  for (int i = 0; i < d->ops.n; i++) hct__manifest_free(d->ops.ops[i]);
  d->ops.n = 0;
}

const hct_op_t *hct__op_find(hct_daemon_t *d, const char *name) {
  for (int i = 0; i < d->ops.n; i++)
    if (strcmp(d->ops.ops[i]->name, name) == 0) return d->ops.ops[i];
  if (d->kernels_dir[0] == '\0') hct__error(HCT_ENOENT, "op '%s': no kernel templates folder", name);
  else hct__error(HCT_ENOENT, "op '%s': no manifest in '%s'", name, d->kernels_dir);
  return NULL;
}

const hct_op_t *hct__op_get(hct_daemon_t *d, const char *name) {
  const hct_op_t *op = hct__op_find(d, name);
  if (op != NULL && op->selftest) {
    hct__error(HCT_ENOENT, "op '%s': a self-test op, never offered to engines", name);
    return NULL;
  }
  return op;
}

const hct_variant_t *hct__op_baseline(const hct_op_t *op) {
  for (int i = 0; i < op->n_variants; i++)
    if (op->variants[i].parity == HCT_PARITY_BASELINE) return &op->variants[i];
  return NULL;
}

/* Whether a row's (op, variant, params) may be served: 0, or a negative
 * code with the reason.  An op without a manifest here cannot be checked:
 * its rows are served as recorded. */
static int row_check(void *ctx, const char *op_name, const char *variant, const char *params) {
  hct_daemon_t *d = ctx;
  const hct_op_t *op = hct__op_find(d, op_name);
  hct__error_clear();
  if (op == NULL) return 0;
  const hct_variant_t *v = hct__variant_find(op, variant);
  if (v == NULL)
    return hct__error(HCT_ENOENT, "op '%s' has no variant '%s'", op_name, variant);
  hct_point_t pt;
  return hct__point_parse(v, params, &pt);
}

int hct__snapshot_reload(hct_daemon_t *d) {
  hct_index_t *ix;
  int64_t v = 0;
  int rc = hct__db_data_version(d->db, &v);
  if (rc >= 0) rc = hct__index_load(d->db, row_check, d, &ix);
  if (rc < 0) {
    hct__log(HCT_LOG_ERROR, "cannot reload decisions (keeping the old ones): %s", hct_last_error());
    return rc;
  }
  hct__index_free(d->ix);
  d->ix = ix;
  d->data_version = v;
  d->reloads++;
  return 0;
}

int hct__snapshot_open(hct_daemon_t *d) {
  struct stat st;
  /* The daemon may start before any probe: create an empty DB then. */
  if (stat(d->db_path, &st) != 0 && errno == ENOENT) {
    hct_db_t *w;
    int rc = hct__db_open(d->db_path, 0, &w);
    if (rc < 0) return rc;
    hct__db_close(w);
  }
  int rc = hct__db_open(d->db_path, HCT_DB_READONLY, &d->db);
  if (rc < 0) return rc;
  return hct__snapshot_reload(d);
}

static void on_poll(uv_timer_t *t) {
  hct_daemon_t *d = t->data;
  int64_t v;
  if (hct__db_data_version(d->db, &v) < 0) {
    /* Said once, not twice a second, until it works again. */
    if (!d->poll_failing) hct__log(HCT_LOG_WARN, "cannot poll the database: %s", hct_last_error());
    d->poll_failing = 1;
    return;
  }
  if (d->poll_failing) hct__log(HCT_LOG_INFO, "database '%s' can be polled again", d->db_path);
  d->poll_failing = 0;
  if (v == d->data_version) return;
  if (hct__snapshot_reload(d) == 0) {
    int n;
    hct__index_decisions(d->ix, &n);
    hct__log(HCT_LOG_INFO, "database changed: %d decisions loaded", n);
  }
}

void hct__snapshot_watch(hct_daemon_t *d, int poll_ms) {
  uv_timer_init(&d->loop, &d->poll);
  d->poll.data = d;
  uv_timer_start(&d->poll, on_poll, (uint64_t)poll_ms, (uint64_t)poll_ms);
}
