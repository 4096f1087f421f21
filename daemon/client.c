/*
 * client.c: libhctune's client, the code an inference engine links.
 *
 * It depends on libc, jansson and common/error.c only (lib/libhctune.so is
 * built from this file and error.c alone): no SQLite, no libuv in an
 * engine's process.  Every wait is bounded by the caller's timeout with
 * poll(), so a daemon that is absent, stalled or dead costs an engine at
 * most that long per call; then it gets the op's baseline from the table
 * below and HCT_FALLBACK.
 *
 * A hct_client_t belongs to one thread at a time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "client_kernel.h"
#include "daemon.h"

/* After the daemon failed to answer, calls fall back at once for this long
 * before trying to reconnect, so a stalled daemon costs an engine one
 * timeout per second rather than one per call. */
#define RETRY_MS 1000

struct hct_client_s {
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  int fd;
  int timeout_ms;
  int64_t retry_at_us;
  int64_t rcvtimeo_us; /* SO_RCVTIMEO: the timeout less a margin */
  int64_t next_id;
  char *rbuf;
  size_t rlen, rcap;
  char why[256]; /* why the last call fell back */
};

/*
 * The baselines known without the daemon: an engine must start on a safe
 * variant even when no daemon runs.  These are the ops' `class: baseline`
 * variants of kernels-src/<op>/manifest.json, copied here because the
 * client reads no files.  Keep them in step when an op is added.
 */
static const struct {
  const char *op;
  const char *variant;
} builtin_baselines[] = {
    {"hc_read", "v1"},
    {"hc_read_prefill", "pair_simt"},
};

const char *hct__builtin_baseline(const char *op) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(builtin_baselines); i++)
    if (strcmp(builtin_baselines[i].op, op) == 0) return builtin_baselines[i].variant;
  return NULL;
}

static void copy(char *dst, const char *src, size_t len) {
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

int hct__socket_path(const char *explicit_path, char *buf, size_t len) {
  const char *p = explicit_path;
  char tmp[4096];
  if (p == NULL || p[0] == '\0') p = getenv("HCTUNE_SOCKET");
  if (p == NULL || p[0] == '\0') {
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x != NULL && x[0] != '\0') {
      snprintf(tmp, sizeof tmp, "%s/hctune.sock", x);
      p = tmp;
    } else {
      p = "/run/hctune/hctune.sock";
    }
  }
  if (strlen(p) >= len || strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path))
    return hct__error(HCT_ERANGE, "socket path '%s': longer than %zu bytes", p,
                      sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
  copy(buf, p, len);
  return 0;
}

static hct_source_t source_from_name(const char *s) {
  hct_source_t src = HCT_SOURCE_DEFAULT;
  if (hct__source_from_name(s, &src) < 0) hct__error_clear();
  return src;
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Waits for `events` on fd until the deadline (microseconds, to the
 * microsecond: poll's whole milliseconds would overshoot a 5 ms timeout by
 * a fifth): 1 ready, 0 timed out. */
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_us();
    if (left < 0) left = 0;
    struct timespec ts = {.tv_sec = left / 1000000, .tv_nsec = (left % 1000000) * 1000};
    struct pollfd p = {.fd = fd, .events = events};
    int n = ppoll(&p, 1, &ts, NULL);
    if (n > 0) return 1;
    if (n == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

static void drop(hct_client_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->rlen = 0;
}

/* Connects without blocking past the deadline.  A Unix socket connect
 * either completes at once or fails with EAGAIN when the daemon's backlog
 * is full (a stalled daemon): that counts as absent. */
static int open_conn(hct_client_t *c, int64_t deadline) {
  if (c->path[0] == '\0') return hct__error(HCT_ENODAEMON, "no daemon socket path");
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return hct__error(HCT_EIO, "socket: %s", strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  copy(sa.sun_path, c->path, sizeof sa.sun_path);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int err = errno;
    if (err == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 1) {
      socklen_t l = sizeof err;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err == 0) goto ok;
    }
    close(fd);
    return hct__error(HCT_ENODAEMON, "daemon socket '%s': %s", c->path,
                      err == EINPROGRESS ? "connect timed out" : strerror(err));
  }
ok:
  /* Blocking from here on, with a receive timeout a little under the
   * caller's: the usual reply then costs one send and one recv, as a plain
   * socket would (see read_line).  Sends never block (MSG_DONTWAIT). */
  {
    int fl = fcntl(fd, F_GETFL);
    int64_t us = c->rcvtimeo_us < 3600000000ll ? c->rcvtimeo_us : 3600000000ll;
    struct timeval tv = {.tv_sec = us / 1000000, .tv_usec = us % 1000000};
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) {
      close(fd);
      return hct__error(HCT_EIO, "daemon socket '%s': %s", c->path, strerror(errno));
    }
  }
  c->fd = fd;
  c->rlen = 0;
  return 0;
}

static int send_all(hct_client_t *c, const char *s, size_t n, int64_t deadline) {
  while (n > 0) {
    ssize_t k = send(c->fd, s, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      s += k;
      n -= (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_fd(c->fd, POLLOUT, deadline) == 1) continue;
      return hct__error(HCT_ETIMEDOUT, "daemon '%s': request not taken within the timeout",
                        c->path);
    }
    return hct__error(HCT_ENODAEMON, "daemon '%s': %s", c->path, strerror(errno));
  }
  return 0;
}

/* Reads one line (without its newline) into a malloc'd string. */
static int read_line(hct_client_t *c, int64_t deadline, char **line) {
  for (;;) {
    char *nl = c->rlen > 0 ? memchr(c->rbuf, '\n', c->rlen) : NULL;
    if (nl != NULL) {
      size_t n = (size_t)(nl - c->rbuf);
      char *s = malloc(n + 1);
      if (s == NULL) return hct__error(HCT_ENOMEM, "daemon reply: out of memory");
      memcpy(s, c->rbuf, n);
      s[n] = '\0';
      memmove(c->rbuf, nl + 1, c->rlen - n - 1);
      c->rlen -= n + 1;
      *line = s;
      return 0;
    }
    if (c->rcap - c->rlen < 4096) {
      size_t cap = c->rcap ? c->rcap * 2 : 8192;
      char *nb = realloc(c->rbuf, cap);
      if (nb == NULL) return hct__error(HCT_ENOMEM, "daemon reply: out of memory");
      c->rbuf = nb;
      c->rcap = cap;
    }
    /* Block in recv itself while the receive timeout ends before the
     * deadline; near the deadline, poll for exactly what is left. */
    int block = deadline - now_us() >= c->rcvtimeo_us;
    ssize_t k = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, block ? 0 : MSG_DONTWAIT);
    if (k > 0) {
      c->rlen += (size_t)k;
      continue;
    }
    if (k == 0) return hct__error(HCT_ENODAEMON, "daemon '%s': connection closed", c->path);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return hct__error(HCT_ENODAEMON, "daemon '%s': %s", c->path, strerror(errno));
    if (block) continue; /* the receive timeout passed: what is left, below */
    if (wait_fd(c->fd, POLLIN, deadline) != 1)
      return hct__error(HCT_ETIMEDOUT, "daemon '%s': no answer within the timeout", c->path);
  }
}

/*
 * Sends one request line and returns the first reply line that is not a
 * progress line.  A connection that fails mid-request is dropped (a late
 * reply must never be taken for the next request's); a connection the
 * daemon closed (it restarted) is reopened once within the same deadline.
 */
static int roundtrip(hct_client_t *c, const char *req, size_t n, int64_t deadline, char **reply,
                     void (*progress)(const char *line, void *ctx), void *ctx) {
  int rc = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    int fresh = 0;
    if (c->fd < 0) {
      if (now_us() < c->retry_at_us)
        return hct__error(HCT_ENODAEMON, "%s (retrying in under a second)", c->why);
      rc = open_conn(c, deadline);
      if (rc < 0) break;
      fresh = 1;
    }
    rc = send_all(c, req, n, deadline);
    while (rc == 0) {
      char *line = NULL;
      rc = read_line(c, deadline, &line);
      if (rc < 0) break;
      if (strstr(line, "\"progress\":") == NULL || line[0] != '{') {
        *reply = line;
        return 0;
      }
      if (progress != NULL) progress(line, ctx);
      free(line);
    }
    drop(c);
    if (rc != HCT_ENODAEMON || fresh) break;
  }
  copy(c->why, hct_last_error(), sizeof c->why);
  c->retry_at_us = now_us() + RETRY_MS * 1000;
  return rc;
}

int hct_connect(const char *path, int timeout_ms, hct_client_t **out) {
  hct_client_t *c = calloc(1, sizeof *c);
  *out = c;
  if (c == NULL) return hct__error(HCT_ENOMEM, "client: out of memory");
  c->fd = -1;
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : HCT_DEFAULT_TIMEOUT_MS;
  /* The kernel rounds SO_RCVTIMEO up to its clock tick (up to 10 ms), so
   * the receive timeout ends that much before the caller's; the rest is
   * waited with ppoll, to the microsecond.  Short timeouts use ppoll only. */
  c->rcvtimeo_us = (int64_t)c->timeout_ms * 1000 - 10500;
  if (c->rcvtimeo_us < 1000) c->rcvtimeo_us = INT64_MAX / 2; /* never block in recv */
  c->next_id = 1;
  if (hct__socket_path(path, c->path, sizeof c->path) < 0) {
    copy(c->why, hct_last_error(), sizeof c->why);
    c->path[0] = '\0';
    return HCT_FALLBACK;
  }
  if (open_conn(c, now_us() + (int64_t)c->timeout_ms * 1000) < 0) {
    copy(c->why, hct_last_error(), sizeof c->why);
    c->retry_at_us = now_us() + RETRY_MS * 1000;
    return HCT_FALLBACK;
  }
  return 0;
}

void hct_close(hct_client_t *c) {
  if (c == NULL) return;
  drop(c);
  free(c->rbuf);
  free(c);
}

/* Appends a JSON string literal of s; the caller's buffer is large enough
 * for 6 bytes per input byte. */
static char *put_json_string(char *o, const char *s) {
  *o++ = '"';
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      *o++ = '\\';
      *o++ = (char)*p;
    } else if (*p < 0x20) {
      o += sprintf(o, "\\u%04x", *p);
    } else {
      *o++ = (char)*p;
    }
  }
  *o++ = '"';
  return o;
}

static void fill_baseline(hct_choice_t *out, const char *variant, hct_source_t src,
                          const char *cls) {
  memset(out, 0, sizeof *out);
  copy(out->variant, variant, sizeof out->variant);
  copy(out->params, "{}", sizeof out->params);
  copy(out->parity_class, cls, sizeof out->parity_class);
  out->source = src;
}

static const char *jstr(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s != NULL ? s : "";
}

/* The error of a reply {"ok":false,...} as a code with its message. */
static int reply_error(json_t *r) {
  json_t *e = json_object_get(r, "error");
  const char *code = jstr(e, "code");
  int rc = hct_err_from_name(code);
  return hct__error(rc, "daemon: %s", jstr(e, "message"));
}

/* Builds a choose/module request line into buf (at least 2 KiB). */
static size_t build_request(hct_client_t *c, char *buf, const char *cmd, const char *op,
                            int tokens, const char *device, const char *parity) {
  char *o = buf + sprintf(buf, "{\"id\":%lld,\"cmd\":\"%s\",\"op\":", (long long)c->next_id++, cmd);
  o = put_json_string(o, op);
  o += sprintf(o, ",\"tokens\":%d", tokens);
  if (device != NULL) {
    memcpy(o, ",\"device\":", 10);
    o = put_json_string(o + 10, device);
  }
  if (parity != NULL) {
    memcpy(o, ",\"parity\":", 10);
    o = put_json_string(o + 10, parity);
  }
  *o++ = '}';
  *o++ = '\n';
  return (size_t)(o - buf);
}

static int check_args(const char *op, int tokens, const char *device, const char *parity) {
  if (op == NULL || op[0] == '\0' || strlen(op) > 31)
    return hct__error(HCT_EINVAL, "op '%s': want a name of 1 to 31 characters", op ? op : "(null)");
  if (tokens < 1) return hct__error(HCT_EINVAL, "tokens %d: want at least 1", tokens);
  if (device != NULL && strlen(device) > 255)
    return hct__error(HCT_EINVAL, "device '%.40s...': longer than 255 characters", device);
  hct_parity_t asked;
  if (parity != NULL &&
      (hct__parity_from_name(parity, &asked) < 0 || asked == HCT_PARITY_BASELINE))
    return hct__error(HCT_EINVAL, "parity '%s': want 'bitwise' or 'kl'", parity);
  return 0;
}

/* ---- reading a choose reply without jansson ---------------------------------
 *
 * A choose reply is read on every engine call; jansson's allocations cost
 * more than the round trip itself.  This scanner walks the reply once and
 * picks the fields out; a reply it does not understand (an error, an
 * escaped string) goes to jansson instead, which reads anything.
 */

typedef struct span_s {
  const char *p;
  size_t n;
} span_t;

static const char *ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* p at '"'; returns past the closing quote, NULL when malformed; *esc set
 * when the string holds an escape. */
static const char *skip_string(const char *p, const char *end, int *esc) {
  for (p++; p < end; p++) {
    if (*p == '\\') {
      *esc = 1;
      p++;
    } else if (*p == '"') {
      return p + 1;
    }
  }
  return NULL;
}

static const char *skip_value(const char *p, const char *end, int depth) {
  int esc = 0;
  if (p >= end || depth > 32) return NULL;
  if (*p == '"') return skip_string(p, end, &esc);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1, end);
    if (p < end && *p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        if (p >= end || *p != '"' || (p = skip_string(p, end, &esc)) == NULL) return NULL;
        p = ws(p, end);
        if (p >= end || *p++ != ':') return NULL;
        p = ws(p, end);
      }
      if ((p = skip_value(p, end, depth + 1)) == NULL) return NULL;
      p = ws(p, end);
      if (p < end && *p == ',') {
        p = ws(p + 1, end);
        continue;
      }
      return p < end && *p == close ? p + 1 : NULL;
    }
  }
  const char *q = p;
  while (q < end && (*q == '-' || *q == '+' || *q == '.' || (*q >= '0' && *q <= '9') ||
                     (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')))
    q++;
  return q > p ? q : NULL;
}

/* Calls each member of the object at p: key (unescaped) and value span.
 * Returns -1 when malformed or a key has an escape. */
static int members(const char *p, const char *end, const char *const *keys, span_t *vals, int n) {
  int esc = 0;
  p = ws(p, end);
  if (p >= end || *p++ != '{') return -1;
  p = ws(p, end);
  if (p < end && *p == '}') return 0;
  for (;;) {
    if (p >= end || *p != '"') return -1;
    const char *k = p + 1, *ke = skip_string(p, end, &esc);
    if (ke == NULL || esc) return -1;
    size_t klen = (size_t)(ke - 1 - k);
    p = ws(ke, end);
    if (p >= end || *p++ != ':') return -1;
    p = ws(p, end);
    const char *v = p;
    if ((p = skip_value(p, end, 0)) == NULL) return -1;
    for (int i = 0; i < n; i++)
      if (strlen(keys[i]) == klen && memcmp(keys[i], k, klen) == 0) {
        vals[i].p = v;
        vals[i].n = (size_t)(p - v);
      }
    p = ws(p, end);
    if (p < end && *p == ',') {
      p = ws(p + 1, end);
      continue;
    }
    return p < end && *p == '}' ? 0 : -1;
  }
}

/* A plain string value into dst; -1 when absent, not a string, escaped or
 * too long. */
static int span_str(span_t v, char *dst, size_t len) {
  if (v.p == NULL || v.n < 2 || v.p[0] != '"' || memchr(v.p, '\\', v.n) != NULL ||
      v.n - 2 >= len)
    return -1;
  memcpy(dst, v.p + 1, v.n - 2);
  dst[v.n - 2] = '\0';
  return 0;
}

static double span_num(span_t v) {
  char buf[64];
  if (v.p == NULL || v.n == 0 || v.n >= sizeof buf) return 0;
  memcpy(buf, v.p, v.n);
  buf[v.n] = '\0';
  return strtod(buf, NULL);
}

/* 0 with `out` filled from a successful choose reply, -1 to let jansson
 * read it. */
static int fast_choice(const char *line, hct_choice_t *out) {
  static const char *const keys[] = {"ok", "variant", "params", "class", "source",
                                     "template_hash", "evidence"};
  span_t v[7] = {{0}};
  const char *end = line + strlen(line);
  if (members(line, end, keys, v, 7) < 0) return -1;
  if (v[0].n != 4 || memcmp(v[0].p, "true", 4) != 0) return -1;
  memset(out, 0, sizeof *out);
  char src[16];
  if (span_str(v[1], out->variant, sizeof out->variant) < 0 ||
      span_str(v[3], out->parity_class, sizeof out->parity_class) < 0 ||
      span_str(v[4], src, sizeof src) < 0 ||
      span_str(v[5], out->template_hash, sizeof out->template_hash) < 0)
    return -1;
  out->source = source_from_name(src);
  /* The daemon writes compact JSON: the params' text is already what
   * jansson's compact dump would give. */
  if (v[2].p == NULL || v[2].n >= sizeof out->params) {
    copy(out->params, "{}", sizeof out->params);
  } else {
    memcpy(out->params, v[2].p, v[2].n);
    out->params[v[2].n] = '\0';
  }
  if (v[6].p != NULL) {
    static const char *const ek[] = {"median_us", "baseline_us"};
    span_t e[2] = {{0}};
    if (members(v[6].p, v[6].p + v[6].n, ek, e, 2) < 0) return -1;
    out->median_us = span_num(e[0]);
    out->baseline_us = span_num(e[1]);
  }
  return 0;
}

int hct_choose(hct_client_t *c, const char *op, int tokens, const char *device,
               const char *parity, hct_choice_t *out) {
  if (c == NULL || out == NULL) return hct__error(HCT_EINVAL, "hct_choose: no client or no output");
  int rc = check_args(op, tokens, device, parity);
  if (rc < 0) return rc;
  char forced[64], fparams[256];
  rc = hct__force_lookup(op, forced, sizeof forced, fparams, sizeof fparams);
  if (rc < 0) return rc;
  if (rc == 1) {
    /* A variant or point the manifest does not have is refused (one line
     * on stderr), never passed on (daemon/client_force.c). */
    if (hct__force_check(op, forced, fparams) == HCT_EINVAL) return HCT_EINVAL;
    fill_baseline(out, forced, HCT_SOURCE_ENV, "");
    if (fparams[0] != '\0') copy(out->params, fparams, sizeof out->params);
    return 0;
  }
  int64_t deadline = now_us() + (int64_t)c->timeout_ms * 1000;
  char req[2048];
  size_t n = build_request(c, req, "choose", op, tokens, device, parity);
  char *line = NULL;
  rc = roundtrip(c, req, n, deadline, &line, NULL, NULL);
  if (rc < 0) goto fallback;
  if (fast_choice(line, out) == 0) {
    free(line);
    return 0;
  }
  json_t *r = json_loads(line, 0, NULL);
  free(line);
  if (r == NULL) {
    drop(c);
    rc = hct__error(HCT_EPROTO, "daemon '%s': reply is not JSON", c->path);
    goto fallback;
  }
  if (!json_is_true(json_object_get(r, "ok"))) {
    rc = reply_error(r);
    json_decref(r);
    return rc;
  }
  memset(out, 0, sizeof *out);
  copy(out->variant, jstr(r, "variant"), sizeof out->variant);
  json_t *params = json_object_get(r, "params");
  size_t k = params != NULL ? json_dumpb(params, out->params, sizeof out->params - 1,
                                         JSON_COMPACT | JSON_ENCODE_ANY)
                            : 0;
  /* Params too long to hold read as "{}": the template's own defaults. */
  if (k == 0 || k > sizeof out->params - 1) copy(out->params, "{}", sizeof out->params);
  else out->params[k] = '\0';
  copy(out->parity_class, jstr(r, "class"), sizeof out->parity_class);
  copy(out->template_hash, jstr(r, "template_hash"), sizeof out->template_hash);
  out->source = source_from_name(jstr(r, "source"));
  json_t *ev = json_object_get(r, "evidence");
  out->median_us = json_number_value(json_object_get(ev, "median_us"));
  out->baseline_us = json_number_value(json_object_get(ev, "baseline_us"));
  json_decref(r);
  return 0;

fallback: {
    /* hct__error writes the buffer hct_last_error() reads: copy it first. */
    char why[512];
    copy(why, hct_last_error(), sizeof why);
    const char *base = hct__builtin_baseline(op);
    if (base == NULL)
      return hct__error(HCT_ENOENT, "op '%s': %s, and the op has no built-in baseline", op, why);
    hct__error(rc, "%s: fell back to %s's baseline %s", why, op, base);
    fill_baseline(out, base, HCT_SOURCE_DEFAULT, hct__parity_name(HCT_PARITY_BASELINE));
    return HCT_FALLBACK;
  }
}

static int b64_value(int ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

int hct__base64_decode(const char *s, size_t n, unsigned char **out, size_t *out_len) {
  if (n % 4 != 0) return hct__error(HCT_EPROTO, "module image: base64 length %zu is not a multiple of 4", n);
  unsigned char *b = malloc(n / 4 * 3 + 1);
  if (b == NULL) return hct__error(HCT_ENOMEM, "module image: out of memory");
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int v[4];
    for (int k = 0; k < 4; k++) {
      v[k] = s[i + k] == '=' && i + 4 == n && k >= 2 ? 0 : b64_value((unsigned char)s[i + k]);
      if (v[k] < 0) {
        free(b);
        return hct__error(HCT_EPROTO, "module image: bad base64 at byte %zu", i + (size_t)k);
      }
    }
    uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    b[o++] = (unsigned char)(x >> 16);
    if (!(i + 4 == n && s[i + 2] == '=')) b[o++] = (unsigned char)(x >> 8);
    if (!(i + 4 == n && s[i + 3] == '=')) b[o++] = (unsigned char)x;
  }
  *out = b;
  *out_len = o;
  return 0;
}

int hct_module(hct_client_t *c, const char *op, int tokens, const char *device,
               const char *parity, void **image, size_t *image_size, char **entries) {
  if (c == NULL || image == NULL || image_size == NULL)
    return hct__error(HCT_EINVAL, "hct_module: no client or no output");
  int rc = check_args(op, tokens, device, parity);
  if (rc < 0) return rc;
  /* A binary is larger than a choice: wait longer, still bounded. */
  int64_t wait = c->timeout_ms * 10 > 1000 ? c->timeout_ms * 10 : 1000;
  char req[2048];
  size_t n = build_request(c, req, "module", op, tokens, device, parity);
  char *line = NULL;
  rc = roundtrip(c, req, n, now_us() + wait * 1000, &line, NULL, NULL);
  if (rc < 0) return rc;
  json_t *r = json_loads(line, 0, NULL);
  free(line);
  if (r == NULL) return hct__error(HCT_EPROTO, "daemon '%s': reply is not JSON", c->path);
  if (!json_is_true(json_object_get(r, "ok"))) {
    rc = reply_error(r);
    json_decref(r);
    return rc;
  }
  json_t *img = json_object_get(r, "image");
  unsigned char *bin = NULL;
  size_t len = 0;
  rc = json_is_string(img) ? hct__base64_decode(json_string_value(img), json_string_length(img), &bin, &len)
                           : hct__error(HCT_EPROTO, "module reply has no image");
  if (rc == 0 && entries != NULL) {
    *entries = json_dumps(json_object_get(r, "entries"), JSON_COMPACT | JSON_PRESERVE_ORDER |
                                                             JSON_ENCODE_ANY);
    if (*entries == NULL) {
      free(bin);
      rc = hct__error(HCT_ENOMEM, "module entries: out of memory");
    }
  }
  json_decref(r);
  if (rc < 0) return rc;
  *image = bin;
  *image_size = len;
  return 0;
}

int hct__client_request(hct_client_t *c, const char *line, int timeout_ms, char **reply,
                        void (*progress)(const char *line, void *ctx), void *ctx) {
  size_t n = strlen(line);
  char *req = malloc(n + 2);
  if (req == NULL) return hct__error(HCT_ENOMEM, "request: out of memory");
  memcpy(req, line, n);
  req[n] = '\n';
  c->retry_at_us = 0; /* an explicit request always tries */
  int rc = roundtrip(c, req, n + 1, now_us() + (int64_t)timeout_ms * 1000, reply, progress, ctx);
  free(req);
  return rc;
}
