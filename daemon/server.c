/*
 * server.c: hctuned's start-up and shut-down, as Redis's server.c holds
 * initServer: resolve the paths, load the manifests and the first
 * snapshot, bind the socket (mode 0660, optional group), start the
 * watchers and signal handlers, run the loop; on SIGTERM or SIGINT close
 * every handle and remove the socket.
 *
 * One libuv loop thread does everything: connections (daemon/conn.c),
 * requests (daemon/dispatch.c), reloads (daemon/snapshot.c) and probes as
 * child processes (daemon/probe.c).  Nothing a client sends can stop the
 * loop: every bad request gets an error reply on its own connection.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon.h"

static void close_walk(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) return;
  hct_daemon_t *d = arg;
  /* Connections and probe handles close through their own paths. */
  if (h->type == UV_NAMED_PIPE && h->data != NULL && h != (uv_handle_t *)&d->server) {
    for (hct_conn_t *c = d->conns; c != NULL; c = c->next)
      if (h == (uv_handle_t *)&c->pipe) {
        hct__conn_close(c);
        return;
      }
  }
  if (hct__probe_close_handle(d, h)) return;
  uv_close(h, NULL);
}

static void on_signal(uv_signal_t *s, int signum) {
  hct_daemon_t *d = s->data;
  if (d->stopping) return;
  d->stopping = 1;
  hct__log(HCT_LOG_INFO, "signal %d: stopping, removing '%s'", signum, d->socket_path);
  unlink(d->socket_path);
  hct__probes_stop(d);
  uv_walk(&d->loop, close_walk, d);
}

/* Refuses a live socket, removes a stale one. */
static int socket_check(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return 0;
    return hct__error(HCT_EIO, "socket '%s': %s", path, strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode))
    return hct__error(HCT_EEXIST, "socket '%s': exists and is not a socket", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return hct__error(HCT_EIO, "socket '%s': %s", path, strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  hct__strlcpy(sa.sun_path, path, sizeof sa.sun_path);
  int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
  int err = errno;
  close(fd);
  if (rc == 0 || err == EAGAIN)
    return hct__error(HCT_EBUSY, "socket '%s': a daemon is already listening there", path);
  if (err != ECONNREFUSED)
    return hct__error(HCT_EIO, "socket '%s': %s", path, strerror(err));
  if (unlink(path) != 0)
    return hct__error(HCT_EIO, "cannot remove stale socket '%s': %s", path, strerror(errno));
  hct__log(HCT_LOG_INFO, "replaced stale socket '%s'", path);
  return 0;
}

static int start(hct_daemon_t *d, const hct_daemon_opts_t *o) {
  int rc = hct__socket_path(o->socket_path, d->socket_path, sizeof d->socket_path);
  if (rc < 0) return rc;
  if (o->db_path != NULL) hct__strlcpy(d->db_path, o->db_path, sizeof d->db_path);
  else if ((rc = hct__default_db_path(d->db_path, sizeof d->db_path, 1)) < 0) return rc;
  if (o->kernels_dir != NULL) {
    hct__strlcpy(d->kernels_dir, o->kernels_dir, sizeof d->kernels_dir);
  } else if (hct__kernels_dir(d->kernels_dir, sizeof d->kernels_dir) < 0) {
    hct__log(HCT_LOG_WARN, "%s: ops without decisions get the built-in baselines",
             hct_last_error());
    d->kernels_dir[0] = '\0';
  }
  if (o->admin_group != NULL) {
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(o->admin_group, &gr, buf, sizeof buf, &res) != 0 || res == NULL)
      return hct__error(HCT_ENOENT, "admin group '%s': no such group", o->admin_group);
    d->have_admin_gid = 1;
    d->admin_gid = res->gr_gid;
    hct__strlcpy(d->admin_group, o->admin_group, sizeof d->admin_group);
  }
  gid_t sock_gid = (gid_t)-1;
  if (o->socket_group != NULL) {
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(o->socket_group, &gr, buf, sizeof buf, &res) != 0 || res == NULL)
      return hct__error(HCT_ENOENT, "socket group '%s': no such group", o->socket_group);
    sock_gid = res->gr_gid;
  }
  if (o->fleet_db != NULL) hct__strlcpy(d->fleet_db, o->fleet_db, sizeof d->fleet_db);
  if ((rc = hct__ops_load(d)) < 0) return rc;
  if ((rc = hct__snapshot_open(d)) < 0) return rc;
  if ((rc = hct__snapshot_fleet(d)) < 0) return rc;
  if ((rc = socket_check(d->socket_path)) < 0) return rc;
  if (hct__mkdir_parents(d->socket_path) < 0)
    return hct__error_prefixed(HCT_EIO, "cannot make the socket's folder");

  uv_loop_init(&d->loop);
  uv_pipe_init(&d->loop, &d->server, 0);
  d->server.data = d;
  d->server_open = 1;
  if ((rc = uv_pipe_bind(&d->server, d->socket_path)) < 0)
    return hct__error(HCT_EIO, "cannot bind socket '%s': %s", d->socket_path, uv_strerror(rc));
  if (chmod(d->socket_path, 0660) != 0 ||
      (sock_gid != (gid_t)-1 && chown(d->socket_path, (uid_t)-1, sock_gid) != 0)) {
    rc = hct__error(HCT_EIO, "socket '%s': cannot set its mode or group: %s", d->socket_path,
                    strerror(errno));
    unlink(d->socket_path);
    return rc;
  }
  if ((rc = uv_listen((uv_stream_t *)&d->server, SOMAXCONN, hct__conn_accept)) < 0) {
    unlink(d->socket_path);
    return hct__error(HCT_EIO, "cannot listen on '%s': %s", d->socket_path, uv_strerror(rc));
  }
  int poll_ms = o->poll_ms > 0 ? o->poll_ms : 500;
  hct__snapshot_watch(d, poll_ms);
  int sigs[2] = {SIGTERM, SIGINT};
  for (int i = 0; i < 2; i++) {
    uv_signal_init(&d->loop, &d->sig[i]);
    d->sig[i].data = d;
    uv_signal_start(&d->sig[i], on_signal, sigs[i]);
  }
  return 0;
}

int hct__daemon_run(const hct_daemon_opts_t *opts) {
  hct_daemon_t *d = calloc(1, sizeof *d);
  if (d == NULL) return hct__error(HCT_ENOMEM, "daemon: out of memory");
  /* A client gone mid-reply must cost an EPIPE, not the process. */
  signal(SIGPIPE, SIG_IGN);
  d->started_at = hct__unix_time();
  d->started_ns = hct__now_ns();
  int rc = start(d, opts);
  if (rc == 0) {
    int n;
    hct__index_decisions(d->ix, &n);
    hct__log(HCT_LOG_INFO, "hctuned %s listening on %s (database %s, %d decisions)",
             HCT_VERSION_STRING, d->socket_path, d->db_path, n);
    uv_run(&d->loop, UV_RUN_DEFAULT);
  } else if (d->server_open) {
    uv_walk(&d->loop, close_walk, d);
    uv_run(&d->loop, UV_RUN_DEFAULT);
  }
  if (d->server_open) uv_loop_close(&d->loop);
  hct__ops_free(d);
  hct__index_free(d->ix);
  hct__index_free(d->fleet_ix);
  if (d->db != NULL) hct__db_close(d->db);
  free(d);
  return rc;
}
