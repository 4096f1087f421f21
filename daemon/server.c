/*
 * server.c: hctuned's start-up and shut-down, as Redis's server.c holds
 * initServer: resolve and check the paths, load the manifests and the
 * first snapshot, take the socket (from systemd's socket activation, else
 * bind it: mode 0660, optional group), start the watchers and signal
 * handlers, tell systemd it is ready, run the loop.
 *
 * Signals: SIGTERM, SIGINT and SIGQUIT stop the daemon cleanly (the socket
 * removed, unless systemd owns it); SIGHUP re-reads the manifests and the
 * DB; SIGUSR1 logs a status line; SIGPIPE is ignored (a client gone
 * mid-reply costs an EPIPE).
 *
 * One libuv loop thread serves: connections (daemon/conn.c), requests
 * (daemon/dispatch.c), probes as child processes (daemon/probe.c); SQLite
 * runs on libuv's thread pool (daemon/snapshot.c).  Nothing a client sends
 * can stop the loop: every bad request gets an error reply on its own
 * connection.
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef HCT_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "daemon.h"

/* File descriptors kept back from the connection limit: the DB's, the
 * probes' pipes, the listening socket, the log. */
#define FD_RESERVE 64

/* Says `state` to systemd (READY=1, STOPPING=1, ...) when it started us. */
static void notify(const char *state) {
#ifdef HCT_HAVE_SYSTEMD
  sd_notify(0, state);
#else
  (void)state;
#endif
}

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

static void stop(hct_daemon_t *d, int signum) {
  if (d->stopping) return;
  d->stopping = 1;
  notify("STOPPING=1");
  if (d->socket_activated) {
    hct__log(HCT_LOG_INFO, "signal %s: stopping (the socket is systemd's)", strsignal(signum));
  } else {
    hct__log(HCT_LOG_INFO, "signal %s: stopping, removing '%s'", strsignal(signum), d->socket_path);
    unlink(d->socket_path);
  }
  hct__probes_stop(d);
  hct__snapshot_stop(d);
  uv_walk(&d->loop, close_walk, d);
}

static void on_signal(uv_signal_t *s, int signum) {
  hct_daemon_t *d = s->data;
  switch (signum) {
    case SIGHUP:
      if (!d->stopping) hct__snapshot_reread(d);
      return;
    case SIGUSR1: {
      int n;
      hct__index_decisions(d->ix, &n);
      hct__log(HCT_LOG_INFO,
               "status: %d clients, %llu requests, %zu reply bytes queued, %d decisions, %d "
               "probes, %llu refused, %llu dropped, %llu timed out%s",
               d->n_conns, (unsigned long long)d->requests, d->queued, n, d->n_probes,
               (unsigned long long)d->refused, (unsigned long long)d->dropped,
               (unsigned long long)d->timed_out, d->stale ? ", answers stale" : "");
      return;
    }
    default:
      stop(d, signum);
  }
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


static int group_gid(const char *what, const char *name, gid_t *gid) {
  struct group gr, *res = NULL;
  char buf[4096];
  if (getgrnam_r(name, &gr, buf, sizeof buf, &res) != 0 || res == NULL)
    return hct__error(HCT_ENOENT, "%s group '%s': no such group", what, name);
  *gid = res->gr_gid;
  return 0;
}

/* The socket's folder: made when only its last level is missing (as
 * /run/hctune under /run), refused when more is. */
static int socket_folder(const char *path) {
  char dir[PATH_MAX];
  hct__strlcpy(dir, path, sizeof dir);
  char *slash = strrchr(dir, '/');
  if (slash == NULL || slash == dir) return 0;
  *slash = '\0';
  struct stat st;
  if (stat(dir, &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return hct__error(HCT_EINVAL, "socket '%s': '%s' is not a folder", path, dir);
    return 0;
  }
  if (mkdir(dir, 0755) != 0)
    return hct__error(HCT_ENOENT, "socket '%s': cannot make its folder '%s': %s", path, dir,
                      strerror(errno));
  return 0;
}

/* The socket systemd passed (socket activation), or 0 when it passed none. */
static int activated_socket(hct_daemon_t *d) {
#ifdef HCT_HAVE_SYSTEMD
  int n = sd_listen_fds(1);
  if (n <= 0) return 0;
  if (n > 1) return hct__error(HCT_EINVAL, "systemd passed %d sockets: want one", n);
  int fd = SD_LISTEN_FDS_START;
  if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0)
    return hct__error(HCT_EINVAL, "systemd's socket (fd %d) is not a listening Unix stream socket",
                      fd);
  struct sockaddr_un sa;
  socklen_t len = sizeof sa;
  if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && len > sizeof(sa_family_t))
    hct__strlcpy(d->socket_path, sa.sun_path, sizeof d->socket_path);
  int rc = uv_pipe_open(&d->server, fd);
  if (rc < 0) return hct__error(HCT_EIO, "systemd's socket: %s", uv_strerror(rc));
  d->socket_activated = 1;
  return 1;
#else
  (void)d;
  return 0;
#endif
}

/* Raises the soft RLIMIT_NOFILE to the hard one, and fits the connection
 * limit under it with room for everything else. */
static void fit_fd_limit(hct_daemon_t *d) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rlim_t want = rl.rlim_max;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur == RLIM_INFINITY) return;
  long room = (long)rl.rlim_cur - FD_RESERVE;
  if (room < 1) room = 1;
  if (d->max_clients > room) {
    hct__log(HCT_LOG_WARN, "open files limited to %ld (RLIMIT_NOFILE): at most %ld clients, not %d",
             (long)rl.rlim_cur, room, d->max_clients);
    d->max_clients = (int)room;
  }
}

static int start(hct_daemon_t *d, const hct_daemon_opts_t *o) {
  int rc = hct__socket_path(o->socket_path, d->socket_path, sizeof d->socket_path);
  if (rc < 0) return rc;
  /* A DB path given (--db, $HCTUNE_DB) is taken as it is: nothing is
   * created for it.  The default one, in the user's state folder, gets its
   * folders as `hctune probe` would make them; never the file. */
  const char *env_db = getenv("HCTUNE_DB");
  int given = o->db_path != NULL || (env_db != NULL && env_db[0] != '\0');
  if (o->db_path != NULL) hct__strlcpy(d->db_path, o->db_path, sizeof d->db_path);
  else if ((rc = hct__default_db_path(d->db_path, sizeof d->db_path, !given)) < 0) return rc;
  if (o->kernels_dir != NULL) {
    /* One folder, or a colon-separated list of them (as $HCTUNE_KERNELS). */
    for (const char *p = o->kernels_dir; *p != '\0';) {
      size_t n = strcspn(p, ":");
      char one[PATH_MAX];
      snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), p);
      struct stat st;
      errno = 0;
      if (n > 0 && (stat(one, &st) != 0 || !S_ISDIR(st.st_mode)))
        return hct__error(HCT_ENOENT, "kernel templates '%s': %s", one,
                          errno == 0 ? "not a folder" : "no such folder");
      p += n + (p[n] == ':');
    }
    hct__strlcpy(d->kernels_dir, o->kernels_dir, sizeof d->kernels_dir);
  } else if (hct__kernels_dir(d->kernels_dir, sizeof d->kernels_dir) < 0) {
    /* $HCTUNE_KERNELS names a folder: a wrong one is refused.  Found by
     * nothing: decisions still answer; an op without one gets HCT_ENOENT
     * and the client falls back to its own manifest's baseline. */
    if (getenv("HCTUNE_KERNELS") != NULL && getenv("HCTUNE_KERNELS")[0] != '\0') return HCT_ENOENT;
    hct__log(HCT_LOG_WARN, "%s: ops without decisions get no answer (engines fall back)",
             hct_last_error());
    d->kernels_dir[0] = '\0';
  }
  if (o->admin_group != NULL) {
    if ((rc = group_gid("admin", o->admin_group, &d->admin_gid)) < 0) return rc;
    d->have_admin_gid = 1;
    hct__strlcpy(d->admin_group, o->admin_group, sizeof d->admin_group);
  }
  gid_t sock_gid = (gid_t)-1;
  if (o->socket_group != NULL && (rc = group_gid("socket", o->socket_group, &sock_gid)) < 0)
    return rc;
  d->max_clients = o->max_clients > 0 ? o->max_clients : 1024;
  d->max_queued = (size_t)(o->max_queued_mb > 0 ? o->max_queued_mb : 64) << 20;
  d->idle_timeout_ns = o->idle_timeout_s < 0    ? 0
                       : o->idle_timeout_s == 0 ? 300 * 1000000000ull
                                                : (uint64_t)o->idle_timeout_s * 1000000000ull;
  fit_fd_limit(d);

  uv_loop_init(&d->loop);
  d->loop_open = 1;
  if (o->fleet_db != NULL) hct__strlcpy(d->fleet_db, o->fleet_db, sizeof d->fleet_db);
  if ((rc = hct__snapshot_start(d)) < 0) return rc;
  if ((rc = hct__fleet_pull_begin(d, o)) < 0) return rc;
  uv_pipe_init(&d->loop, &d->server, 0);
  d->server.data = d;
  d->server_open = 1;
  if ((rc = activated_socket(d)) < 0) return rc;
  if (rc == 0) {
    if ((rc = socket_check(d->socket_path)) < 0) return rc;
    if ((rc = socket_folder(d->socket_path)) < 0) return rc;
    if ((rc = uv_pipe_bind(&d->server, d->socket_path)) < 0)
      return hct__error(HCT_EIO, "cannot bind socket '%s': %s", d->socket_path, uv_strerror(rc));
    if (chmod(d->socket_path, 0660) != 0 ||
        (sock_gid != (gid_t)-1 && chown(d->socket_path, (uid_t)-1, sock_gid) != 0)) {
      rc = hct__error(HCT_EIO, "socket '%s': cannot set its mode or group: %s", d->socket_path,
                      strerror(errno));
      unlink(d->socket_path);
      return rc;
    }
  }
  d->on_line = hct__dispatch_line;
  if ((rc = uv_listen((uv_stream_t *)&d->server, SOMAXCONN, hct__conn_accept)) < 0) {
    if (!d->socket_activated) unlink(d->socket_path);
    return hct__error(HCT_EIO, "cannot listen on '%s': %s", d->socket_path, uv_strerror(rc));
  }
  hct__snapshot_watch(d, o->poll_ms > 0 ? o->poll_ms : 500);
  uv_idle_init(&d->loop, &d->pump);
  d->pump.data = d;
  uv_timer_init(&d->loop, &d->sweep);
  d->sweep.data = d;
  if (d->idle_timeout_ns > 0) {
    uint64_t every = d->idle_timeout_ns / 4000000ull;
    if (every > 1000) every = 1000;
    if (every < 50) every = 50;
    uv_timer_start(&d->sweep, hct__conns_sweep, every, every);
  }
  const int sigs[] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(sigs); i++) {
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
  /* Replies of a megabyte are malloc'd and freed all day: from mmap, so
   * that freeing one gives its memory back rather than growing the heap
   * to the largest burst ever seen. */
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
  /* The DB lane holds one thread of the pool, module reads the others. */
  setenv("UV_THREADPOOL_SIZE", "8", 0);
  d->started_at = hct__unix_time();
  d->started_ns = hct__now_ns();
  int rc = start(d, opts);
  if (rc == 0) {
    int n;
    hct__index_decisions(d->ix, &n);
    hct__log(HCT_LOG_INFO,
             "hctuned %s listening on %s%s (database %s, %d decisions; at most %d clients, %zu MiB "
             "of queued replies)",
             HCT_VERSION_STRING, d->socket_path, d->socket_activated ? " (from systemd)" : "",
             d->db_path, n, d->max_clients, d->max_queued >> 20);
    notify("READY=1");
    uv_run(&d->loop, UV_RUN_DEFAULT);
  } else if (d->loop_open) {
    d->stopping = 1;
    hct__snapshot_stop(d);
    uv_walk(&d->loop, close_walk, d);
    uv_run(&d->loop, UV_RUN_DEFAULT);
  }
  hct__fleet_pull_end(d);
  if (d->loop_open) uv_loop_close(&d->loop);
  hct__snapshot_free(d);
  free(d);
  return rc;
}
