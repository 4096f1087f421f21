/*
 * fleet_pull.c: hctuned --fleet-url: the fleet's decisions for the card
 * models of this host (and those named by --fleet-model), pulled from the
 * live fleet's server (db/fleet_pg.c) and kept in the local DB.
 *
 * The pull runs on a thread of its own with its own libpq connection and
 * its own writable connection to the DB, so the network never delays an
 * answer: the loop thread only ever sees the DB, whose snapshot it reloads
 * when data_version changes (daemon/snapshot.c), at most --poll-ms after a
 * pull wrote.  The thread pulls at start, whenever the server announces a
 * recompute of one of its models (LISTEN on HCT_PG_CHANNEL), and every
 * --fleet-poll-ms in case a notification was lost.  A pulled set is stored
 * only when the models' revision changed, through hct__fleet_import, the
 * path of `hctune db import`: each (fleet card, op, parity) group replaces
 * the one pulled before, and decisions of this host's own cards are never
 * touched.
 *
 * With the server down the daemon answers from the last set stored, says
 * so once, retries every --fleet-poll-ms, and says once when it is back.
 * A pull whose rows fail their checks stores nothing and is logged once
 * per distinct reason.  URLs appear in logs without their password.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "fleet_pg.h"

#ifndef HCT_NO_PG
#include <libpq-fe.h>
#endif

static void pull_stop(hct_fleet_pull_t *p);

struct hct_fleet_pull_s {
  uv_thread_t thread;
  int started;
  int wake[2];            /* the loop thread writes a byte: stop */
  int done[2];            /* the pull thread writes a byte as it ends */
  atomic_int stop;
  char url[4096];
  char shown[512];
  char db_path[4096];
  char models[HCT_MAX_FLEET_MODELS][256];
  const char *model_ptrs[HCT_MAX_FLEET_MODELS];
  int n_models;
  int poll_ms;
  /* the pull thread's alone */
  hct_pg_t *pg;
  hct_db_t *db;
  int64_t revision;
  int pulled;             /* a set was stored by this daemon */
  int down;               /* the server was unreachable when last tried */
  char problem[512];      /* the last reason logged, to log each once */
  /* What `hctune status` shows (the status verb, loop thread), written by
   * the pull thread: under mu. */
  uv_mutex_t mu;
  int mu_ready;
  hct_fleet_state_t st;
};

#ifndef HCT_NO_PG
/* The pull thread's news for the status verb. */
static void note(hct_fleet_pull_t *p, const char *state, const char *error, int pulled,
                 int decisions) {
  uv_mutex_lock(&p->mu);
  hct__strlcpy(p->st.state, state, sizeof p->st.state);
  if (error != NULL) {
    hct__strlcpy(p->st.last_error, error, sizeof p->st.last_error);
    p->st.last_error_at = hct__unix_time();
  }
  if (pulled) {
    p->st.last_pull_at = hct__unix_time();
    p->st.revision = p->revision;
    if (decisions >= 0) p->st.decisions = decisions;
  }
  uv_mutex_unlock(&p->mu);
}

/* Logs `what` unless it was the last thing said. */
static void say_once(hct_fleet_pull_t *p, hct_log_level_t lvl, const char *what) {
  if (strcmp(p->problem, what) == 0) return;
  hct__strlcpy(p->problem, what, sizeof p->problem);
  hct__log(lvl, "%s", what);
}

static void unreachable(hct_fleet_pull_t *p, const char *why) {
  if (!p->down) {
    char line[1024];
    snprintf(line, sizeof line, "%s (answering from the fleet decisions pulled before; "
             "retrying every %d ms)", why, p->poll_ms);
    hct__log(HCT_LOG_WARN, "%s", line);
    hct__strlcpy(p->problem, "", sizeof p->problem);
  }
  p->down = 1;
  note(p, "unreachable", why, 0, 0);
  hct__pg_close(p->pg);
  p->pg = NULL;
}

/* Waits ms for a stop; 1 when stopping. */
static int nap(hct_fleet_pull_t *p, int ms) {
  struct pollfd w = {.fd = p->wake[0], .events = POLLIN};
  int n = poll(&w, 1, ms);
  return n > 0 || atomic_load(&p->stop);
}

static int connect_and_listen(hct_fleet_pull_t *p) {
  int rc = hct__pg_connect(p->url, 0, &p->pg);
  if (rc < 0) return rc;
  PGresult *r = PQexec(hct__pg_conn(p->pg), "LISTEN " HCT_PG_CHANNEL);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) {
    char why[512];
    hct__pg_conn_error(p->pg, why, sizeof why);
    rc = hct__error(HCT_EIO, "fleet '%s': cannot listen for changes: %s", p->shown, why);
    hct__pg_close(p->pg);
    p->pg = NULL;
    return rc;
  }
  if (p->down) hct__log(HCT_LOG_INFO, "fleet '%s': reachable again", p->shown);
  else hct__log(HCT_LOG_INFO, "fleet '%s': connected, pulling the decisions of %d card model(s)",
                p->shown, p->n_models);
  p->down = 0;
  note(p, "connected", NULL, 0, 0);
  return 0;
}

/* One pull; the set stored when its revision is new to this daemon. */
static int pull_once(hct_fleet_pull_t *p) {
  hct_fleet_t set;
  int64_t rev;
  int rc = hct__pg_pull(p->pg, p->model_ptrs, p->n_models, &set, &rev);
  if (rc < 0) return rc;
  if (p->pulled && rev == p->revision) {
    hct__fleet_free(&set);
    note(p, "connected", NULL, 1, -1);
    return 0;
  }
  if (p->db == NULL) rc = hct__db_open(p->db_path, 0, &p->db);
  hct_fleet_import_stats_t st;
  if (rc == 0) rc = hct__fleet_import(p->db, &set, &st);
  if (rc == 0) {
    hct__log(HCT_LOG_INFO, "fleet '%s': %d decisions pulled (revision %lld), kept in '%s'",
             p->shown, st.decisions, (long long)rev, p->db_path);
    p->revision = rev;
    p->pulled = 1;
    hct__strlcpy(p->problem, "", sizeof p->problem);
    note(p, "connected", NULL, 1, st.decisions);
  } else {
    /* A DB this daemon may not write keeps what it had. */
    rc = hct__error_prefixed(rc, "cannot keep the pulled fleet decisions");
    hct__db_close(p->db);
    p->db = NULL;
  }
  hct__fleet_free(&set);
  return rc;
}

static int is_ours(const hct_fleet_pull_t *p, const char *model) {
  for (int i = 0; i < p->n_models; i++)
    if (strcmp(p->models[i], model) == 0) return 1;
  return 0;
}

static void pull_thread(void *arg) {
  hct_fleet_pull_t *p = arg;
  int need = 1;
  while (!atomic_load(&p->stop)) {
    if (p->pg == NULL) {
      if (connect_and_listen(p) < 0) {
        unreachable(p, hct_last_error());
        if (nap(p, p->poll_ms)) break;
        continue;
      }
      need = 1;
    }
    if (need) {
      need = 0;
      if (pull_once(p) < 0) {
        if (PQstatus(hct__pg_conn(p->pg)) != CONNECTION_OK) {
          unreachable(p, hct_last_error());
          continue;
        }
        say_once(p, HCT_LOG_ERROR, hct_last_error());
        note(p, "connected", hct_last_error(), 0, 0);
      }
    }
    PGconn *c = hct__pg_conn(p->pg);
    struct pollfd fds[2] = {{.fd = PQsocket(c), .events = POLLIN},
                            {.fd = p->wake[0], .events = POLLIN}};
    int n = poll(fds, 2, p->poll_ms);
    if (n < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) break;
    if (n == 0) {
      need = 1; /* the periodic pull, in case a notification was lost */
      continue;
    }
    if (fds[0].revents != 0) {
      if (!PQconsumeInput(c)) {
        char msg[512], why[1100];
        hct__pg_conn_error(p->pg, msg, sizeof msg);
        snprintf(why, sizeof why, "fleet '%s': connection lost: %s", p->shown, msg);
        unreachable(p, why);
        continue;
      }
      PGnotify *nt;
      while ((nt = PQnotifies(c)) != NULL) {
        if (is_ours(p, nt->extra)) need = 1;
        PQfreemem(nt);
      }
    }
  }
  hct__pg_close(p->pg);
  p->pg = NULL;
  hct__db_close(p->db);
  p->db = NULL;
  char b = 1;
  if (write(p->done[1], &b, 1) < 0) {
    /* the loop thread then waits its time out; nothing else to do */
  }
}

#endif /* HCT_NO_PG */

static int pull_start(const char *url, const char *db_path, const char *const *models, int n,
                      int poll_ms, hct_fleet_pull_t **out) {
  *out = NULL;
#ifdef HCT_NO_PG
  (void)url;
  (void)db_path;
  (void)models;
  (void)n;
  (void)poll_ms;
  return hct__error(HCT_EUNSUPPORTED, "--fleet-url: this hctuned was built without PostgreSQL "
                    "(make STATIC=1); use --fleet-db with a fleet file instead");
#else
  hct_fleet_pull_t *p = calloc(1, sizeof *p);
  if (p == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  p->wake[0] = p->wake[1] = p->done[0] = p->done[1] = -1;
  hct__strlcpy(p->url, url, sizeof p->url);
  hct__pg_url_shown(url, p->shown, sizeof p->shown);
  hct__strlcpy(p->db_path, db_path, sizeof p->db_path);
  p->poll_ms = poll_ms > 0 ? poll_ms : 30000;
  if (uv_mutex_init(&p->mu) != 0) {
    free(p);
    return hct__error(HCT_EIO, "fleet: cannot make a mutex");
  }
  p->mu_ready = 1;
  hct__strlcpy(p->st.url, p->shown, sizeof p->st.url);
  hct__strlcpy(p->st.state, "connecting", sizeof p->st.state);
  p->st.poll_ms = p->poll_ms;
  for (int i = 0; i < n; i++) {
    int dup = 0;
    for (int j = 0; j < p->n_models; j++) dup |= strcmp(p->models[j], models[i]) == 0;
    if (dup || models[i][0] == '\0') continue;
    if (p->n_models == HCT_MAX_FLEET_MODELS) break;
    hct__strlcpy(p->models[p->n_models], models[i], sizeof p->models[0]);
    p->model_ptrs[p->n_models] = p->models[p->n_models];
    p->n_models++;
  }
  if (pipe2(p->wake, O_CLOEXEC) != 0 || pipe2(p->done, O_CLOEXEC) != 0) {
    int e = errno;
    pull_stop(p);
    return hct__error(HCT_EIO, "fleet: cannot make a pipe: %s", strerror(e));
  }
  if (p->n_models == 0) {
    hct__log(HCT_LOG_WARN, "fleet '%s': no card models to pull (no cards found on this host; "
             "name them with --fleet-model): not connecting", p->shown);
    /* Kept, without a thread, for the status verb to say so. */
    hct__strlcpy(p->st.state, "idle", sizeof p->st.state);
    hct__strlcpy(p->st.last_error, "no card models to pull (no cards found on this host; "
                 "name them with --fleet-model)", sizeof p->st.last_error);
    p->st.last_error_at = hct__unix_time();
    *out = p;
    return 0;
  }
  if (uv_thread_create(&p->thread, pull_thread, p) != 0) {
    pull_stop(p);
    return hct__error(HCT_EIO, "fleet: cannot start the pull thread");
  }
  p->st.models = p->n_models;
  p->started = 1;
  *out = p;
  return 0;
#endif
}

static void pull_stop(hct_fleet_pull_t *p) {
  if (p == NULL) return;
  int joined = !p->started;
  if (p->started) {
    atomic_store(&p->stop, 1);
    char b = 1;
    if (write(p->wake[1], &b, 1) < 0) {
      /* the flag alone stops it at its next wake-up */
    }
    /* A connect to an unresponsive host blocks up to its connect_timeout:
     * the daemon does not wait that long to exit. */
    struct pollfd d = {.fd = p->done[0], .events = POLLIN};
    if (poll(&d, 1, 2000) > 0) {
      uv_thread_join(&p->thread);
      joined = 1;
    } else {
      hct__log(HCT_LOG_WARN, "fleet '%s': the pull thread is still waiting on the server; "
               "leaving it", p->shown);
    }
  }
  if (!joined) return; /* its memory stays with the thread */
  for (int i = 0; i < 2; i++) {
    if (p->wake[i] >= 0) close(p->wake[i]);
    if (p->done[i] >= 0) close(p->done[i]);
  }
  if (p->mu_ready) uv_mutex_destroy(&p->mu);
  free(p);
}

int hct__fleet_pull_begin(hct_daemon_t *d, const hct_daemon_opts_t *o) {
  const char *url = o->fleet_url;
  if (url == NULL || url[0] == '\0') return 0;
  /* This host's cards first (listed once, also for --fleet-db), then the
   * models named on the command line. */
  const char *models[2 * HCT_MAX_FLEET_MODELS];
  int n = 0;
#ifdef HCT_NO_PG
  return pull_start(url, d->db_path, models, 0, 0, &d->fleet_pull);
#endif
  hct__snapshot_host_cards(d);
  for (int i = 0; i < d->n_host_cards && n < HCT_MAX_FLEET_MODELS; i++)
    models[n++] = d->host_cards[i].model;
  for (int i = 0; i < o->n_fleet_models && n < 2 * HCT_MAX_FLEET_MODELS; i++)
    models[n++] = o->fleet_models[i];
  return pull_start(url, d->db_path, models, n, o->fleet_poll_ms, &d->fleet_pull);
}

void hct__fleet_pull_end(hct_daemon_t *d) {
  pull_stop(d->fleet_pull);
  d->fleet_pull = NULL;
}

int hct__fleet_pull_state(const hct_daemon_t *d, hct_fleet_state_t *out) {
  hct_fleet_pull_t *p = d->fleet_pull;
  memset(out, 0, sizeof *out);
  if (p == NULL) return 0;
  uv_mutex_lock(&p->mu);
  *out = p->st;
  uv_mutex_unlock(&p->mu);
  return 1;
}
