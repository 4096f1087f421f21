/*
 * conn.c: the daemon's connections and their I/O (loop thread only): accept
 * with the peer's credentials, split what is read into request lines for
 * dispatch.c, write replies, close.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"

/* A client that stops reading its replies is dropped once this much waits
 * to be written to it, so it cannot make the daemon grow without bound. */
#define MAX_QUEUED (32u << 20)

typedef struct write_s {
  uv_write_t req;
  hct_conn_t *c;
  char data[];
} write_t;

static void on_write(uv_write_t *req, int status) {
  write_t *w = (write_t *)req;
  hct_conn_t *c = w->c;
  free(w);
  if (status < 0 && status != UV_ECANCELED && !c->closing) hct__conn_close(c);
}

/* Sends `n` bytes that end with a newline.  Tries the write at once, which
 * is what usually happens with a small reply, and queues what is left. */
static void conn_send(hct_conn_t *c, const char *s, size_t n) {
  if (c->closing) return;
  uv_stream_t *st = (uv_stream_t *)&c->pipe;
  uv_buf_t b = uv_buf_init((char *)s, (unsigned)n);
  int sent = uv_try_write(st, &b, 1);
  if (sent == (int)n) return;
  if (sent < 0 && sent != UV_EAGAIN) {
    hct__conn_close(c);
    return;
  }
  if (sent < 0) sent = 0;
  if (uv_stream_get_write_queue_size(st) + n > MAX_QUEUED) {
    hct__log(HCT_LOG_WARN, "client pid %d does not read its replies: dropped", (int)c->pid);
    hct__conn_close(c);
    return;
  }
  write_t *w = malloc(sizeof *w + n - (size_t)sent);
  if (w == NULL) {
    hct__conn_close(c);
    return;
  }
  w->c = c;
  memcpy(w->data, s + sent, n - (size_t)sent);
  uv_buf_t rest = uv_buf_init(w->data, (unsigned)(n - (size_t)sent));
  if (uv_write(&w->req, st, &rest, 1, on_write) < 0) {
    free(w);
    hct__conn_close(c);
  }
}

void hct__reply_body(hct_conn_t *c, const char *id, const char *body, size_t len) {
  char small[4096];
  size_t idlen = id != NULL ? strlen(id) : 0;
  size_t n = len + (idlen ? idlen + 6 : 0) + 1;
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
  memcpy(o, body + 1, len - 1);
  out[n - 1] = '\n';
  conn_send(c, out, n);
  if (out != small) free(out);
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

hct_conn_t *hct__conn_by_serial(hct_daemon_t *d, uint64_t serial) {
  for (hct_conn_t *c = d->conns; c != NULL; c = c->next)
    if (c->serial == serial && !c->closing) return c;
  return NULL;
}

static void on_conn_closed(uv_handle_t *h) {
  hct_conn_t *c = h->data;
  hct_daemon_t *d = c->d;
  if (c->prev != NULL) c->prev->next = c->next;
  else d->conns = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  d->n_conns--;
  free(c->buf);
  free(c);
}

void hct__conn_close(hct_conn_t *c) {
  if (c->closing) return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  hct_conn_t *c = h->data;
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

static void on_shutdown(uv_shutdown_t *req, int status) {
  hct_conn_t *c = req->handle->data;
  free(req);
  hct__conn_close(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  hct_conn_t *c = s->data;
  if (nread < 0) {
    hct__conn_close(c);
    return;
  }
  if (c->draining || c->closing) return;
  size_t old = c->len;
  c->len += (size_t)nread;
  size_t start = 0;
  for (size_t i = old; i < c->len && !c->closing; i++) {
    if (c->buf[i] != '\n') continue;
    size_t n = i - start;
    if (n > 0 && c->buf[start + n - 1] == '\r') n--;
    /* Blank lines are skipped, so a person typing at the socket can press
     * return freely. */
    size_t k = 0;
    while (k < n && (c->buf[start + k] == ' ' || c->buf[start + k] == '\t')) k++;
    if (k < n) hct__dispatch_line(c, c->buf + start, n);
    start = i + 1;
  }
  if (c->closing) return;
  memmove(c->buf, c->buf + start, c->len - start);
  c->len -= start;
  if (c->len == HCT_MAX_LINE + 1) {
    char msg[128];
    snprintf(msg, sizeof msg, "request line longer than %d bytes: closing the connection",
             HCT_MAX_LINE);
    hct__reply_error(c, NULL, HCT_ETOOLONG, msg);
    c->draining = 1;
    uv_read_stop(s);
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req == NULL || uv_shutdown(req, s, on_shutdown) < 0) {
      free(req);
      hct__conn_close(c);
    }
  }
}

void hct__conn_accept(uv_stream_t *server, int status) {
  hct_daemon_t *d = server->data;
  if (status < 0) {
    hct__log(HCT_LOG_WARN, "accept on '%s': %s", d->socket_path, uv_strerror(status));
    return;
  }
  hct_conn_t *c = calloc(1, sizeof *c);
  if (c == NULL) return;
  c->d = d;
  c->serial = ++d->next_serial;
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
  uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}
