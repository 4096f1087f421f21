/*
 * snapshot.c: what the daemon answers from, and every SQLite access it
 * makes.
 *
 * The manifests of the kernels folder are an opset (daemon/opset.c),
 * loaded at start and on SIGHUP.  The DB's decisions, pins and devices are a snapshot
 * (daemon/index.c), rebuilt when the file changes: the watch looks at the
 * file's inode (a DB replaced by rename, install or rsync is a new inode,
 * opened afresh) and at `PRAGMA data_version` (another process committed).
 * A row the manifests refute (an unknown variant, params that are not one
 * of its points) is left out with a warning naming it, so it is never
 * served.
 *
 * The lane: SQLite may wait for seconds (a writer holding the lock, a slow
 * disk), so none of it runs on the loop thread.  Jobs (the watch's
 * refresh, a pin, an unpin, SIGHUP's re-read) run one at a time on libuv's
 * thread pool, in the order queued; the lane's read-only connection is
 * touched only by the running job.  The loop thread swaps the new snapshot
 * in when a job is done, then calls the job's `done`.  Module's binary
 * reads take a connection of their own under a mutex (hct__snapshot_binary),
 * so a long write does not delay them.
 *
 * The fleet overlay (--fleet-db): a fleet file read as any file from
 * elsewhere is (db/untrusted.c, its decisions only), its rows checked
 * against the manifests like the DB's, into a second index.  Read at start
 * (a bad file stops the daemon), and by the lane's jobs again whenever the
 * file changes (a new merge renamed over it); a bad replacement is logged
 * and the overlay read before stays.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"
#include "fleet.h"

struct hct_lane_s {
  uv_work_t work;
  hct_daemon_t *d;
  hct_dbjob_t *head, *tail; /* queued, not started */
  hct_dbjob_t *running;
  hct_dbjob_t poll_job;     /* the watch's job, queued at most once */
  int poll_queued;
  /* The running job's: touched by its thread only. */
  hct_db_t *db;
  dev_t dev;
  ino_t ino;
  int64_t version;
  hct_opset_t *ops_used;    /* the rows are checked against these */
  /* Results of the running job, for lane_done. */
  hct_index_t *ix_new;
  hct_index_t *ix_old;      /* the one replaced: freed by the next job, off the loop */
  hct_opset_t *ops_new;
  int stale;
  char why[1024];
  /* The fleet overlay: the running job's, then lane_apply's. */
  hct_index_t *fleet_new, *fleet_old;
  int64_t fleet_mtime_ns, fleet_size;
  /* Module's binary reads. */
  uv_mutex_t bin_mu;
  hct_db_t *bin_db;
  dev_t bin_dev;
  ino_t bin_ino;
};

/* ---- the fleet overlay ---------------------------------------------------- */

/* Reads the fleet file into a new index checked against `ops`; *st gets
 * the file's state.  Any thread. */
static int fleet_load(const char *path, hct_opset_t *ops, hct_index_t **out, struct stat *st) {
  if (stat(path, st) != 0)
    return hct__error(HCT_ENOENT, "fleet file '%s': %s", path, strerror(errno));
  hct_fleet_t f;
  int rc = hct__fleet_read_some(path, HCT_FLEET_DECISIONS, &f);
  hct_db_decision_t *dec = NULL;
  if (rc == 0) {
    dec = calloc((size_t)f.n_decisions + 1, sizeof *dec);
    if (dec == NULL) rc = hct__error(HCT_ENOMEM, "fleet file '%s': out of memory", path);
    for (int i = 0; dec != NULL && i < f.n_decisions; i++)
      hct__fleet_decision_to_db(&f.decisions[i], &dec[i]);
  }
  if (rc == 0) rc = hct__index_from_decisions(dec, f.n_decisions, hct__opset_row_check, ops, out);
  free(dec);
  hct__fleet_free(&f);
  return rc;
}

static int64_t mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* The running job's look at the fleet file: read again when it changed
 * (or `reopen`, SIGHUP).  Thread pool. */
static void fleet_refresh(hct_lane_t *L, int reopen) {
  hct_daemon_t *d = L->d;
  struct stat st;
  if (d->fleet_db[0] == '\0' || stat(d->fleet_db, &st) != 0) return;
  if (!reopen && mtime_ns(&st) == L->fleet_mtime_ns && (int64_t)st.st_size == L->fleet_size)
    return;
  L->fleet_mtime_ns = mtime_ns(&st);
  L->fleet_size = (int64_t)st.st_size;
  hct_index_t *ix = NULL;
  if (fleet_load(d->fleet_db, L->ops_used, &ix, &st) < 0) {
    /* Said once per change of the file. */
    hct__log(HCT_LOG_ERROR, "%s (keeping the fleet decisions read before)", hct_last_error());
    return;
  }
  hct__index_free(L->fleet_new);
  L->fleet_new = ix;
}

/* The host's cards, listed once at start: the cards a request may name
 * (daemon/cards.c) and, with --fleet-db or --fleet-url, the models whose
 * fleet answers they get.  Listed in a child process (hct__child_run, the
 * handler in cards.c): the GPU runtimes a listing loads (6 MB resident for
 * HIP's alone on a host without a GPU) and their threads stay out of the
 * daemon, and a driver that hangs costs the start-up its timeout, no more. */
void hct__snapshot_host_cards(hct_daemon_t *d) {
  if (d->host_cards_listed) return;
  d->host_cards_listed = 1;
  hct_child_result_t res;
  hct_child_msg_t req = {NULL, 0};
  if (hct__child_run("host-cards", &req, 20000, &res) < 0 || res.answer.n % 2 != 0) {
    hct__log(HCT_LOG_WARN, "cannot list this host's cards: %s: every card served counts as "
             "another host's", res.answer.n % 2 != 0 ? "garbled answer" : hct_last_error());
    hct__error_clear();
    hct__child_result_free(&res);
    return;
  }
  for (int i = 0; i + 1 < res.answer.n && d->n_host_cards < (int)HCT_ARRAY_SIZE(d->host_cards); i += 2) {
    const hct_child_field_t *u = &res.answer.fields[i], *m = &res.answer.fields[i + 1];
    int k = d->n_host_cards++;
    snprintf(d->host_cards[k].uuid, sizeof d->host_cards[k].uuid, "%.*s", (int)u->n, u->p);
    snprintf(d->host_cards[k].model, sizeof d->host_cards[k].model, "%.*s", (int)m->n, m->p);
  }
  /* The child says why it found none (no driver) on its output's line. */
  const char *why = res.output != NULL ? res.output : "";
  int why_len = (int)strcspn(why, "\n");
  if (d->n_host_cards == 0)
    hct__log(HCT_LOG_INFO, "no cards found on this host%s%.*s: every card served is another "
             "host's", why_len ? ": " : "", why_len < 400 ? why_len : 400, why);
  hct__child_result_free(&res);
}

/* ---- the DB file ---------------------------------------------------------- */

/* What is at `path`: 0 with *st for a regular file (links followed), 1
 * when nothing is there (no error set), or a code with the reason. */
static int db_file(const char *path, struct stat *st) {
  struct stat lst;
  if (lstat(path, &lst) != 0) {
    if (errno == ENOENT) return 1;
    return hct__error(HCT_EIO, "database '%s': %s", path, strerror(errno));
  }
  if (stat(path, st) != 0)
    return hct__error(HCT_ENOENT, "database '%s': a symbolic link to nothing", path);
  if (S_ISDIR(st->st_mode)) return hct__error(HCT_EINVAL, "database '%s': is a folder", path);
  if (!S_ISREG(st->st_mode))
    return hct__error(HCT_EINVAL, "database '%s': not a regular file (%s)", path,
                      S_ISFIFO(st->st_mode)   ? "a FIFO"
                      : S_ISSOCK(st->st_mode) ? "a socket"
                                              : "a device");
  return 0;
}

/* The running job's refresh: reopens the DB when its file is another one
 * (or `reopen`), reloads the snapshot when its data changed (or
 * `reload`).  The old connection stays until a new one is open, so a file
 * caught mid-copy costs a stale answer and a retry at the next poll, not
 * the snapshot.  Thread pool. */
static void refresh(hct_lane_t *L, int reopen, int reload) {
  hct_daemon_t *d = L->d;
  struct stat st;
  L->stale = 0;
  L->why[0] = '\0';
  int rc = db_file(d->db_path, &st);
  /* No DB yet (none was ever opened): nothing to refresh, nothing stale. */
  if (rc == 1 && L->db == NULL) return;
  if (rc == 1) rc = hct__error(HCT_ENOENT, "database '%s': no such file (removed?)", d->db_path);
  if (rc == 0 && (L->db == NULL || reopen || st.st_dev != L->dev || st.st_ino != L->ino)) {
    hct_db_t *fresh = NULL;
    rc = hct__db_open(d->db_path, HCT_DB_READONLY | HCT_DB_NOCREATE, &fresh);
    if (rc == 0) {
      hct__db_close(L->db);
      L->db = fresh;
      L->dev = st.st_dev;
      L->ino = st.st_ino;
      reload = 1;
    }
  }
  int64_t v = 0;
  if (rc == 0) rc = hct__db_data_version(L->db, &v);
  if (rc == 0 && !reload && v == L->version) return;
  hct_index_t *ix = NULL;
  if (rc == 0) rc = hct__index_load(L->db, hct__opset_row_check, L->ops_used, &ix);
  if (rc < 0) {
    L->stale = 1;
    hct__strlcpy(L->why, hct_last_error(), sizeof L->why);
    return;
  }
  L->ix_new = ix;
  L->version = v;
}

static int open_writable(const char *path, hct_db_t **w) {
  /* A pin may create the DB file, never its folder: the daemon was told
   * where its DB lives and checked that folder at start. */
  char dir[PATH_MAX];
  hct__strlcpy(dir, path, sizeof dir);
  char *slash = strrchr(dir, '/');
  if (slash != NULL) {
    *slash = '\0';
    struct stat st;
    if (dir[0] != '\0' && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
      return hct__error(HCT_ENOENT, "database '%s': its folder '%s' is gone", path, dir);
  }
  struct stat st;
  int rc = db_file(path, &st);
  if (rc < 0) return rc;
  return hct__db_open(path, 0, w);
}

/* ---- the lane ------------------------------------------------------------- */

static void lane_work(uv_work_t *w) {
  hct_lane_t *L = w->data;
  hct_daemon_t *d = L->d;
  hct_dbjob_t *j = L->running;
  hct__error_clear();
  hct__index_free(L->ix_old);
  L->ix_old = NULL;
  hct__index_free(L->fleet_old);
  L->fleet_old = NULL;
  j->rc = 0;
  j->err[0] = '\0';
  L->ix_new = NULL;
  L->ops_new = NULL;
  if (j->reopen) {
    hct_opset_t *ops;
    if (hct__opset_load(d->kernels_dir, L->ops_used, &ops) == 0) {
      L->ops_new = ops;
      hct__opset_unref(L->ops_used);
      ops->refs++;
      L->ops_used = ops;
    } else {
      hct__log(HCT_LOG_ERROR, "cannot re-read the manifests (keeping the old ones): %s",
               hct_last_error());
    }
  }
  if (j->write != NULL) {
    hct_db_t *wdb = NULL;
    int rc = open_writable(d->db_path, &wdb);
    if (rc == 0) rc = j->write(j, wdb);
    hct__db_close(wdb);
    if (rc < 0) {
      j->rc = rc;
      hct__strlcpy(j->err, hct_last_error(), sizeof j->err);
    }
  }
  refresh(L, j->reopen, j->reopen || j->write != NULL);
  fleet_refresh(L, j->reopen);
}

static void lane_next(hct_lane_t *L);

/* Puts what the job found in place: loop thread. */
static void lane_apply(hct_lane_t *L, int first) {
  hct_daemon_t *d = L->d;
  int changed = first || L->ix_new != NULL || L->fleet_new != NULL;
  if (L->ops_new != NULL) {
    hct__opset_unref(d->ops);
    d->ops = L->ops_new;
    L->ops_new = NULL;
    hct__log(HCT_LOG_INFO, "manifests re-read: %d ops, %d broken", d->ops->n - d->ops->n_broken,
             d->ops->n_broken);
  }
  if (L->ix_new != NULL) {
    /* Thousands of rendered replies: freed on the pool by the next job. */
    hct__index_free(L->ix_old);
    L->ix_old = d->ix;
    d->ix = L->ix_new;
    L->ix_new = NULL;
    d->data_version = L->version;
    d->reloads++;
    int n, np;
    hct__index_decisions(d->ix, &n);
    hct__index_pins(d->ix, &np);
    if (!first) hct__log(HCT_LOG_INFO, "database changed: %d decisions and %d pins loaded", n, np);
  }
  if (L->fleet_new != NULL) {
    hct__index_free(L->fleet_old);
    L->fleet_old = d->fleet_ix;
    d->fleet_ix = L->fleet_new;
    L->fleet_new = NULL;
    int n;
    hct__index_decisions(d->fleet_ix, &n);
    hct__log(HCT_LOG_INFO, "fleet file '%s': %d decisions", d->fleet_db, n);
  }
  if (changed) hct__cards_refresh(d);
  /* Said once when it starts failing, once when it works again. */
  if (L->stale && !d->stale)
    hct__log(HCT_LOG_WARN, "cannot re-read the database (answering from the last good copy, "
             "marked stale): %s", L->why);
  else if (!L->stale && d->stale)
    hct__log(HCT_LOG_INFO, "database '%s' read again", d->db_path);
  d->stale = L->stale;
}

static void lane_done(uv_work_t *w, int status) {
  hct_lane_t *L = w->data;
  hct_dbjob_t *j = L->running;
  L->running = NULL;
  lane_apply(L, 0);
  if (j == &L->poll_job) L->poll_queued = 0;
  else if (j->done != NULL) j->done(j, j->rc);
  lane_next(L);
}

static void lane_next(hct_lane_t *L) {
  if (L->running != NULL || L->head == NULL) return;
  hct_dbjob_t *j = L->head;
  L->head = j->next;
  if (L->head == NULL) L->tail = NULL;
  if (L->d->stopping) {
    /* No one is left to answer; the DB is not written on the way out. */
    if (j == &L->poll_job) L->poll_queued = 0;
    else if (j->done != NULL) j->done(j, hct__error(HCT_EINTERRUPTED, "the daemon is stopping"));
    lane_next(L);
    return;
  }
  L->running = j;
  if (L->ops_used != L->d->ops) {
    hct__opset_unref(L->ops_used);
    L->ops_used = L->d->ops;
    L->ops_used->refs++;
  }
  L->work.data = L;
  if (uv_queue_work(&L->d->loop, &L->work, lane_work, lane_done) < 0) {
    L->running = NULL;
    if (j == &L->poll_job) L->poll_queued = 0;
    else if (j->done != NULL) j->done(j, hct__error(HCT_EIO, "cannot queue a database job"));
  }
}

void hct__snapshot_submit(hct_daemon_t *d, hct_dbjob_t *j) {
  hct_lane_t *L = d->lane;
  j->next = NULL;
  if (L->tail != NULL) L->tail->next = j;
  else L->head = j;
  L->tail = j;
  lane_next(L);
}

static void on_poll(uv_timer_t *t) {
  hct_daemon_t *d = t->data;
  hct_lane_t *L = d->lane;
  if (L->poll_queued) return;
  L->poll_queued = 1;
  L->poll_job.reopen = 0;
  hct__snapshot_submit(d, &L->poll_job);
}

void hct__snapshot_watch(hct_daemon_t *d, int poll_ms) {
  uv_timer_init(&d->loop, &d->poll);
  d->poll.data = d;
  uv_timer_start(&d->poll, on_poll, (uint64_t)poll_ms, (uint64_t)poll_ms);
}

static void reread_done(hct_dbjob_t *j, int rc) { free(j); }

void hct__snapshot_reread(hct_daemon_t *d) {
  hct_dbjob_t *j = calloc(1, sizeof *j);
  if (j == NULL) return;
  j->reopen = 1;
  j->done = reread_done;
  hct__log(HCT_LOG_INFO, "SIGHUP: re-reading the manifests and the database");
  hct__snapshot_submit(d, j);
}

int hct__snapshot_start(hct_daemon_t *d) {
  hct_lane_t *L = calloc(1, sizeof *L);
  if (L == NULL) return hct__error(HCT_ENOMEM, "daemon: out of memory");
  L->d = d;
  uv_mutex_init(&L->bin_mu);
  d->lane = L;
  int rc = hct__opset_load(d->kernels_dir, NULL, &d->ops);
  if (rc < 0) return rc;
  L->ops_used = d->ops;
  d->ops->refs++;
  /* The paths are checked before anything is opened: the daemon reads its
   * DB and creates nothing but an absent file inside an existing folder,
   * and then only for a pin. */
  struct stat st;
  rc = db_file(d->db_path, &st);
  if (rc == 1) {
    char dir[PATH_MAX];
    hct__strlcpy(dir, d->db_path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) *slash = '\0';
    struct stat ds;
    if (slash != NULL && dir[0] != '\0' && (stat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode)))
      return hct__error(HCT_ENOENT, "database '%s': folder '%s' does not exist", d->db_path, dir);
    hct__log(HCT_LOG_WARN, "database '%s' does not exist yet: every op gets its baseline until "
             "a probe creates it", d->db_path);
    rc = 0;
  } else if (rc < 0) {
    return rc;
  } else {
    rc = hct__db_open(d->db_path, HCT_DB_READONLY | HCT_DB_NOCREATE, &L->db);
    if (rc < 0) return rc;
    L->dev = st.st_dev;
    L->ino = st.st_ino;
  }
  if (L->db != NULL) {
    if ((rc = hct__db_data_version(L->db, &L->version)) < 0) return rc;
    if ((rc = hct__index_load(L->db, hct__opset_row_check, d->ops, &L->ix_new)) < 0) return rc;
    /* Decisions with software keys are checked against this host's cards
     * and compiler: ask them now, not during the first request (a database
     * of unkeyed decisions needs neither, and the daemon stays small). */
    if (hct__db_decisions_keyed(L->db) > 0) hct__softkeys_prepare(d);
    hct__error_clear();
  } else if ((rc = hct__index_empty(&L->ix_new)) < 0) {
    return rc;
  }
  if (d->fleet_db[0] != '\0') {
    /* A fleet file that cannot be read is a start-up error, said once. */
    struct stat fst;
    if ((rc = fleet_load(d->fleet_db, d->ops, &L->fleet_new, &fst)) < 0) return rc;
    L->fleet_mtime_ns = mtime_ns(&fst);
    L->fleet_size = (int64_t)fst.st_size;
  }
  hct__snapshot_host_cards(d);
  lane_apply(L, 1);
  return 0;
}

int hct__snapshot_binary(hct_daemon_t *d, const char *key, void **image, size_t *size,
                         int *is_ptx) {
  hct_lane_t *L = d->lane;
  struct stat st;
  uv_mutex_lock(&L->bin_mu);
  int rc = db_file(d->db_path, &st);
  if (rc == 1) rc = hct__error(HCT_ENOENT, "database '%s': no such file", d->db_path);
  if (rc == 0 && (L->bin_db == NULL || st.st_dev != L->bin_dev || st.st_ino != L->bin_ino)) {
    hct__db_close(L->bin_db);
    L->bin_db = NULL;
    rc = hct__db_open(d->db_path, HCT_DB_READONLY | HCT_DB_NOCREATE, &L->bin_db);
    if (rc == 0) {
      L->bin_dev = st.st_dev;
      L->bin_ino = st.st_ino;
    }
  }
  char *log = NULL;
  if (rc == 0) rc = hct__db_binary_get(L->bin_db, key, image, size, is_ptx, &log);
  free(log);
  uv_mutex_unlock(&L->bin_mu);
  return rc;
}

void hct__snapshot_stop(hct_daemon_t *d) {
  hct_lane_t *L = d->lane;
  if (L == NULL) return;
  /* Jobs not started are answered now (their connections are closing). */
  lane_next(L);
}

void hct__snapshot_free(hct_daemon_t *d) {
  hct_lane_t *L = d->lane;
  if (L != NULL) {
    hct__db_close(L->db);
    hct__db_close(L->bin_db);
    hct__index_free(L->ix_new);
    hct__index_free(L->ix_old);
    hct__index_free(L->fleet_new);
    hct__index_free(L->fleet_old);
    hct__opset_unref(L->ops_new);
    hct__opset_unref(L->ops_used);
    uv_mutex_destroy(&L->bin_mu);
    free(L);
  }
  d->lane = NULL;
  hct__opset_unref(d->ops);
  d->ops = NULL;
  hct__index_free(d->ix);
  d->ix = NULL;
  hct__index_free(d->fleet_ix);
  d->fleet_ix = NULL;
  hct__cards_free(d);
}
