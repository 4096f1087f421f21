/*
 * conn.c: the daemon's connections and their I/O (loop thread only).
 *
 * Fair service, as memcached's worker threads yield after a few requests of
 * one connection: each connection gets at most TURN_LINES requests, or
 * TURN_BYTES of replies, per loop turn.  A connection with more requests
 * waiting stops being read and goes on the ready list, which an idle
 * handle serves round-robin, one turn per connection, between the loop's
 * polls: a client pipelining ten thousand requests costs every other
 * client at most one turn of its.
 *
 * Bounded memory: a connection whose unread replies reach PAUSE_BYTES is
 * not read (its requests wait in the kernel) until they drain below
 * RESUME_BYTES; the replies of all connections together are capped at
 * --max-queued, and past it the connections with the most unread bytes,
 * the slowest readers, are dropped first, each with a log line.  At most
 * --max-clients connections are kept (new ones get one error line), and a
 * connection silent for --idle-timeout is closed.
 *
 * A half-close (the peer's shutdown(SHUT_WR)) is not a close: the
 * requests it sent are answered and written out, then the connection
 * closes.
 *
 * Each line read goes to d->on_line (hct__dispatch_line, set by
 * daemon/server.c): the verbs' handlers write their replies through this
 * file, so it names none of them, as libuv's streams call back their
 * owner's read callback.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"

#define TURN_LINES 16
#define TURN_BYTES (256u << 10)
#define PAUSE_BYTES (512u << 10)
#define RESUME_BYTES (128u << 10)
/* Refusals and drops are logged at most once a second, with a count. */
#define LOG_EVERY_NS 1000000000ull

typedef struct write_s {
  uv_write_t req;
  hct_conn_t *c;
  size_t n;
  char *owned; /* the whole buffer, when it was taken (hct__reply_take) */
  char data[]; /* else the bytes, copied */
} write_t;

static void conn_pump(hct_conn_t *c);
static void conn_update(hct_conn_t *c);

hct_conn_t *hct__conn_by_serial(hct_daemon_t *d, uint64_t serial) {
  for (hct_conn_t *c = d->conns; c != NULL; c = c->next)
    if (c->serial == serial && !c->closing) return c;
  return NULL;
}

static void on_conn_closed(uv_handle_t *h) {
  hct_conn_t *c = h->data;
  hct_daemon_t *d = c->d;
  if (c->ready) { /* still on the ready list: unlink it */
    hct_conn_t **pp = &d->ready_head, *prev = NULL;
    while (*pp != NULL && *pp != c) {
      prev = *pp;
      pp = &(*pp)->ready_next;
    }
    if (*pp == c) {
      *pp = c->ready_next;
      if (d->ready_tail == c) d->ready_tail = prev;
    }
  }
  if (c->prev != NULL) c->prev->next = c->next;
  else d->conns = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  d->n_conns--;
  free(c->buf);
  free(c);
}

void hct__conn_close(hct_conn_t *c) {
  if (c->closing) return;
  hct_daemon_t *d = c->d;
  c->closing = 1;
  /* Its queued bytes stop counting now; the writes' callbacks (cancelled)
   * come before the close callback and count nothing. */
  d->queued -= c->queued;
  c->queued = 0;
  /* Off the ready list: the pump skips closing connections, and unlinks. */
  uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* Drops the connections with the most unread bytes until the total is
 * under the cap. */
static void drop_slowest(hct_daemon_t *d) {
  while (d->queued > d->max_queued) {
    hct_conn_t *worst = NULL;
    for (hct_conn_t *c = d->conns; c != NULL; c = c->next)
      if (!c->closing && (worst == NULL || c->queued > worst->queued)) worst = c;
    if (worst == NULL) return;
    d->dropped++;
    hct__log(HCT_LOG_WARN,
             "client pid %d uid %u: %zu bytes of replies unread, and all clients' reach the cap "
             "of %zu (--max-queued): the slowest reader, dropped",
             (int)worst->pid, (unsigned)worst->uid, worst->queued, d->max_queued);
    hct__conn_close(worst);
  }
}

static void on_write(uv_write_t *req, int status) {
  write_t *w = (write_t *)req;
  hct_conn_t *c = w->c;
  free(w->owned);
  size_t n = w->n;
  free(w);
  if (c->closing) return;
  c->queued -= n;
  c->d->queued -= n;
  if (status < 0) {
    hct__conn_close(c);
    return;
  }
  c->last_active_ns = hct__now_ns();
  /* A paused reader that caught up gets its next requests served. */
  if (c->queued < RESUME_BYTES) conn_update(c);
}

/* Sends n bytes (ending with a newline): at once as far as the socket
 * takes them, the rest queued.  `owned` (may be NULL) is s itself, malloc'd,
 * handed over so that a large reply is not copied again. */
static void conn_send(hct_conn_t *c, const char *s, size_t n, char *owned) {
  if (c->closing) {
    free(owned);
    return;
  }
  uv_stream_t *st = (uv_stream_t *)&c->pipe;
  size_t sent = 0;
  /* Nothing may overtake bytes already queued. */
  if (c->queued == 0) {
    uv_buf_t b = uv_buf_init((char *)s, (unsigned)n);
    int k = uv_try_write(st, &b, 1);
    if (k < 0 && k != UV_EAGAIN) {
      free(owned);
      hct__conn_close(c);
      return;
    }
    sent = k > 0 ? (size_t)k : 0;
  }
  c->turn_out += n;
  if (sent == n) {
    free(owned);
    c->last_active_ns = hct__now_ns();
    return;
  }
  size_t rest = n - sent;
  write_t *w = malloc(sizeof *w + (owned != NULL ? 0 : rest));
  if (w == NULL) {
    free(owned);
    hct__conn_close(c);
    return;
  }
  w->c = c;
  w->n = rest;
  w->owned = owned;
  char *base = owned != NULL ? owned + sent : w->data;
  if (owned == NULL) memcpy(w->data, s + sent, rest);
  uv_buf_t b = uv_buf_init(base, (unsigned)rest);
  if (uv_write(&w->req, st, &b, 1, on_write) < 0) {
    free(owned);
    free(w);
    hct__conn_close(c);
    return;
  }
  c->queued += rest;
  c->d->queued += rest;
  if (c->d->queued > c->d->max_queued) drop_slowest(c->d);
}

void hct__reply_take(hct_conn_t *c, char *buf, size_t n) { conn_send(c, buf, n, buf); }

/* Splices `"id":<id>,` and `extra` (may be "") after the body's '{'. */
static void reply_spliced(hct_conn_t *c, const char *id, const char *extra, const char *body,
                          size_t len) {
  char small[4096];
  size_t idlen = id != NULL ? strlen(id) : 0, xlen = strlen(extra);
  size_t n = len + (idlen ? idlen + 6 : 0) + xlen + 1;
  char *out = n <= sizeof small ? small : malloc(n);
  if (out == NULL) {
    hct__conn_close(c);
    return;
  }
  char *o = out;
  *o++ = '{';
  if (idlen) {
    memcpy(o, "\"id\":", 5);
    memcpy(o + 5, id, idlen);
    o[5 + idlen] = ',';
    o += idlen + 6;
  }
  memcpy(o, extra, xlen);
  o += xlen;
  memcpy(o, body + 1, len - 1);
  out[n - 1] = '\n';
  if (out == small) conn_send(c, out, n, NULL);
  else conn_send(c, out, n, out);
}

void hct__reply_body(hct_conn_t *c, const char *id, const char *body, size_t len) {
  reply_spliced(c, id, "", body, len);
}

void hct__reply_answer(hct_conn_t *c, const char *id, const char *body, size_t len) {
  reply_spliced(c, id, c->d->stale ? "\"stale\":true," : "", body, len);
}

void hct__reply_json(hct_conn_t *c, const char *id, json_t *obj) {
  char *s = obj != NULL ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9))
                        : NULL;
  json_decref(obj);
  if (s == NULL) {
    static const char oom[] =
        "{\"ok\":false,\"error\":{\"code\":\"ENOMEM\",\"message\":\"daemon out of memory\"}}";
    hct__reply_body(c, id, oom, sizeof oom - 1);
    return;
  }
  hct__reply_body(c, id, s, strlen(s));
  free(s);
}

void hct__reply_error(hct_conn_t *c, const char *id, int code, const char *msg) {
  hct__reply_json(c, id,
                  json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "code", hct_err_name(code),
                            "message", msg));
}

/* ---- reading and serving ------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  hct_conn_t *c = h->data;
  /* Bytes already served go first, so the buffer never outgrows a line. */
  if (c->head > 0) {
    if (c->scan < c->head) c->scan = c->head;
    memmove(c->buf, c->buf + c->head, c->len - c->head);
    c->len -= c->head;
    c->scan -= c->head;
    c->head = 0;
  }
  if (c->len == c->cap && c->cap < HCT_MAX_LINE + 1) {
    size_t cap = c->cap ? c->cap * 4 : 4096;
    if (cap > HCT_MAX_LINE + 1) cap = HCT_MAX_LINE + 1;
    char *nb = realloc(c->buf, cap);
    if (nb != NULL) {
      c->buf = nb;
      c->cap = cap;
    }
  }
  buf->base = c->buf + c->len;
  buf->len = c->cap - c->len;
}

/* The next whole line of c (newline and CR excluded), or 0 when there is
 * none yet.  After the peer's EOF, what is left counts as a last line. */
static int next_line(hct_conn_t *c, const char **line, size_t *n) {
  if (c->scan < c->head) c->scan = c->head;
  const char *nl = c->scan < c->len ? memchr(c->buf + c->scan, '\n', c->len - c->scan) : NULL;
  size_t end;
  if (nl != NULL) {
    end = (size_t)(nl - c->buf);
    *line = c->buf + c->head;
    *n = end - c->head;
    c->head = c->scan = end + 1;
  } else {
    c->scan = c->len;
    if (!c->eof || c->head == c->len) return 0;
    *line = c->buf + c->head;
    *n = c->len - c->head;
    c->head = c->scan = c->len;
  }
  if (*n > 0 && (*line)[*n - 1] == '\r') (*n)--;
  return 1;
}

static int has_line(const hct_conn_t *c) {
  size_t from = c->scan > c->head ? c->scan : c->head;
  if (from < c->len && memchr(c->buf + from, '\n', c->len - from) != NULL) return 1;
  return c->eof && c->head < c->len;
}

static void ready_push(hct_conn_t *c) {
  hct_daemon_t *d = c->d;
  if (c->ready) return;
  c->ready = 1;
  c->ready_next = NULL;
  if (d->ready_tail != NULL) d->ready_tail->ready_next = c;
  else d->ready_head = c;
  d->ready_tail = c;
  if (!uv_is_active((uv_handle_t *)&d->pump)) uv_idle_start(&d->pump, hct__conns_pump);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  hct_conn_t *c = req->handle->data;
  free(req);
  hct__conn_close(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Decides what c does next: serve its next requests now or next turn, read
 * more, or close once a half-closed peer has all its replies. */
static void conn_update(hct_conn_t *c) {
  if (c->closing || c->draining) return;
  int paused = c->queued >= PAUSE_BYTES;
  int want_read = !c->eof && !c->busy && !c->ready && !paused && !has_line(c);
  if (want_read && !c->reading) {
    if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) == 0) c->reading = 1;
  } else if (!want_read && c->reading) {
    uv_read_stop((uv_stream_t *)&c->pipe);
    c->reading = 0;
  }
  if (!c->busy && !paused && has_line(c)) ready_push(c);
  /* A half-closed peer: close once everything it asked is written. */
  if (c->eof && !c->busy && !c->ready && c->n_probes == 0 && c->queued == 0 && !has_line(c))
    hct__conn_close(c);
}

static void too_long(hct_conn_t *c) {
  char msg[128];
  snprintf(msg, sizeof msg, "request line longer than %d bytes: closing the connection",
           HCT_MAX_LINE);
  hct__reply_error(c, NULL, HCT_ETOOLONG, msg);
  c->draining = 1;
  if (c->reading) uv_read_stop((uv_stream_t *)&c->pipe);
  c->reading = 0;
  uv_shutdown_t *req = malloc(sizeof *req);
  if (req == NULL || uv_shutdown(req, (uv_stream_t *)&c->pipe, on_shutdown) < 0) {
    free(req);
    hct__conn_close(c);
  }
}

/* One turn of c: at most TURN_LINES requests or TURN_BYTES of replies. */
static void conn_pump(hct_conn_t *c) {
  c->turn_out = 0;
  for (int served = 0; served < TURN_LINES && c->turn_out < TURN_BYTES; served++) {
    if (c->closing || c->draining || c->busy || c->queued >= PAUSE_BYTES) break;
    const char *line;
    size_t n;
    if (!next_line(c, &line, &n)) break;
    /* Blank lines are skipped, so a person typing at the socket can press
     * return freely. */
    size_t k = 0;
    while (k < n && (line[k] == ' ' || line[k] == '\t')) k++;
    if (k < n) c->d->on_line(c, line, n);
    else served--;
  }
  if (c->closing || c->draining) return;
  if (!has_line(c) && c->len - c->head > HCT_MAX_LINE) {
    too_long(c);
    return;
  }
  conn_update(c);
}

void hct__conns_pump(uv_idle_t *h) {
  hct_daemon_t *d = h->data;
  /* One turn for each connection ready now; those that become ready
   * during this pass wait for the next. */
  hct_conn_t *list = d->ready_head;
  d->ready_head = d->ready_tail = NULL;
  while (list != NULL) {
    hct_conn_t *c = list;
    list = c->ready_next;
    c->ready = 0;
    c->ready_next = NULL;
    if (!c->closing) conn_pump(c);
  }
  if (d->ready_head == NULL) uv_idle_stop(&d->pump);
}

void hct__conn_resume(hct_conn_t *c) {
  c->busy = 0;
  conn_update(c);
}

void hct__conn_update(hct_conn_t *c) { conn_update(c); }

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  hct_conn_t *c = s->data;
  if (c->closing || c->draining) return;
  if (nread == UV_EOF) {
    /* The peer will send nothing more; it may still read. */
    uv_read_stop(s);
    c->reading = 0;
    c->eof = 1;
    conn_pump(c);
    return;
  }
  if (nread < 0) {
    hct__conn_close(c);
    return;
  }
  c->len += (size_t)nread;
  if (nread > 0) c->last_active_ns = hct__now_ns();
  conn_pump(c);
}

/* A connection over the limit: told why in one line, then closed. */
static void refuse(hct_daemon_t *d, uv_pipe_t *p) {
  char line[256];
  int n = snprintf(line, sizeof line,
                   "{\"ok\":false,\"error\":{\"code\":\"EBUSY\",\"message\":\"hctuned serves %d "
                   "clients, its limit (--max-clients): try again later\"}}\n",
                   d->max_clients);
  uv_buf_t b = uv_buf_init(line, (unsigned)n);
  uv_try_write((uv_stream_t *)p, &b, 1);
  d->refused++;
  uint64_t now = hct__now_ns();
  if (now - d->refuse_logged_ns >= LOG_EVERY_NS) {
    hct__log(HCT_LOG_WARN, "%d clients connected, the limit (--max-clients): refused a new one "
             "(%llu refused so far)", d->n_conns, (unsigned long long)d->refused);
    d->refuse_logged_ns = now;
  }
}

static void on_refused_closed(uv_handle_t *h) { free(h); }

void hct__conn_accept(uv_stream_t *server, int status) {
  hct_daemon_t *d = server->data;
  if (status < 0) {
    uint64_t now = hct__now_ns();
    if (now - d->refuse_logged_ns >= LOG_EVERY_NS) {
      hct__log(HCT_LOG_WARN, "accept on '%s' (%d clients): %s", d->socket_path, d->n_conns,
               uv_strerror(status));
      d->refuse_logged_ns = now;
    }
    return;
  }
  if (d->n_conns >= d->max_clients || d->stopping) {
    uv_pipe_t *p = malloc(sizeof *p);
    if (p == NULL) return;
    uv_pipe_init(&d->loop, p, 0);
    if (uv_accept(server, (uv_stream_t *)p) == 0) refuse(d, p);
    uv_close((uv_handle_t *)p, on_refused_closed);
    return;
  }
  hct_conn_t *c = calloc(1, sizeof *c);
  if (c == NULL) return;
  c->d = d;
  c->serial = ++d->next_serial;
  c->last_active_ns = hct__now_ns();
  uv_pipe_init(&d->loop, &c->pipe, 0);
  c->pipe.data = c;
  c->next = d->conns;
  if (d->conns != NULL) d->conns->prev = c;
  d->conns = c;
  d->n_conns++;
  if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
    hct__conn_close(c);
    return;
  }
  uv_os_fd_t fd;
  struct ucred cred;
  socklen_t len = sizeof cred;
  /* Unknown credentials get no rights: uid -1 is nobody's. */
  c->uid = (uid_t)-1;
  c->gid = (gid_t)-1;
  if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0 &&
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    c->uid = cred.uid;
    c->gid = cred.gid;
    c->pid = cred.pid;
  }
  conn_update(c);
}

void hct__conns_sweep(uv_timer_t *t) {
  hct_daemon_t *d = t->data;
  if (d->idle_timeout_ns == 0) return;
  uint64_t now = hct__now_ns();
  for (hct_conn_t *c = d->conns; c != NULL; c = c->next) {
    /* A client waiting on its probe or a request served off the loop is
     * not idle. */
    if (c->closing || c->busy || c->n_probes > 0) continue;
    if (now - c->last_active_ns < d->idle_timeout_ns) continue;
    d->timed_out++;
    hct__log(HCT_LOG_INFO, "client pid %d uid %u: silent for %.0f s (--idle-timeout): closed",
             (int)c->pid, (unsigned)c->uid, (now - c->last_active_ns) / 1e9);
    hct__conn_close(c);
  }
}
