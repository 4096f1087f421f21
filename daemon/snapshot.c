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
#include "fleet.h"

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

/*
 * The fleet overlay.  The file is read as any file from elsewhere is
 * (db/untrusted.c): the whole of it checked before any of it is used.  Its
 * rows then pass the same manifest check as the DB's.  The host's cards
 * are listed once, at start, when an overlay is given: the one use of the
 * GPU driver in the daemon, outside any request.
 */
int hct__snapshot_fleet(hct_daemon_t *d) {
  if (d->fleet_db[0] == '\0') return 0;
  struct stat st;
  if (stat(d->fleet_db, &st) != 0)
    return hct__error(HCT_ENOENT, "fleet file '%s': %s", d->fleet_db, strerror(errno));
  hct_fleet_t f;
  int rc = hct__fleet_read_some(d->fleet_db, HCT_FLEET_DECISIONS, &f);
  hct_db_decision_t *dec = NULL;
  if (rc == 0) {
    dec = calloc((size_t)f.n_decisions + 1, sizeof *dec);
    if (dec == NULL) rc = hct__error(HCT_ENOMEM, "fleet file '%s': out of memory", d->fleet_db);
    for (int i = 0; dec != NULL && i < f.n_decisions; i++)
      hct__fleet_decision_to_db(&f.decisions[i], &dec[i]);
  }
  hct_index_t *ix = NULL;
  if (rc == 0) rc = hct__index_from_decisions(dec, f.n_decisions, row_check, d, &ix);
  free(dec);
  hct__fleet_free(&f);
  if (rc < 0) return rc;
  int first = d->fleet_ix == NULL;
  hct__index_free(d->fleet_ix);
  d->fleet_ix = ix;
  d->fleet_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  d->fleet_size = (int64_t)st.st_size;
  int n;
  hct__index_decisions(ix, &n);
  hct__log(HCT_LOG_INFO, "fleet file '%s': %d decisions", d->fleet_db, n);
  if (first) {
    hct_device_t cards[16];
    int nc = hct__devices(cards, 16);
    if (nc < 0) {
      hct__log(HCT_LOG_INFO, "no cards found on this host (%s): fleet answers need the model "
               "in the request", hct_last_error());
      hct__error_clear();
    }
    for (int i = 0; i < nc && i < 16; i++) {
      hct__strlcpy(d->host_cards[i].uuid, cards[i].uuid, sizeof d->host_cards[i].uuid);
      hct__device_model_key(&cards[i], d->host_cards[i].model, sizeof d->host_cards[i].model);
      d->n_host_cards++;
    }
  }
  return 0;
}

/* Reloads the fleet file when it changed (replaced by a newer merge). */
static void fleet_poll(hct_daemon_t *d) {
  struct stat st;
  if (d->fleet_db[0] == '\0' || stat(d->fleet_db, &st) != 0) return;
  int64_t m = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  if (m == d->fleet_mtime_ns && (int64_t)st.st_size == d->fleet_size) return;
  if (hct__snapshot_fleet(d) < 0) {
    hct__log(HCT_LOG_ERROR, "%s (keeping the fleet decisions read before)", hct_last_error());
    d->fleet_mtime_ns = m; /* said once per change */
    d->fleet_size = (int64_t)st.st_size;
  }
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
  fleet_poll(d);
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
