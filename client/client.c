/*
 * client.c: libhctune's client, the code an inference engine links.
 *
 * The library (client/ with the files of common/ and jit/ it stands on,
 * Makefile's LOWER_SRC) needs libc, libdl, pthread and jansson only: no
 * SQLite, no libuv in an engine's process.  Every wait is bounded by the caller's deadline,
 * whatever the peer sends: a reply line is read into a buffer bounded by
 * the longest reply of its verb, scanned once, and the clock is checked
 * after every read, so a peer that streams bytes without a newline costs
 * the timeout and no more.  A reply that is not a valid answer to this
 * request (another id, a missing or empty field, an unknown source, class
 * or error code, a token range that does not hold T) is never taken: the
 * engine gets the op's baseline (its manifest's, client/baseline.c),
 * HCT_FALLBACK, and the reason in hct_last_error().
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
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"

/* After the daemon failed to answer, calls fall back at once for this long
 * before trying to reconnect, so a stalled daemon costs an engine one
 * timeout per second rather than one per call. */
#define RETRY_MS 1000
/* The longest reply line taken, by verb: a choose answer is under a
 * kilobyte; a module image may be megabytes of base64; a raw request
 * (list of a large DB) more. */
#define MAX_CHOOSE_REPLY (64u << 10)
#define MAX_MODULE_REPLY (256u << 20)
#define MAX_RAW_REPLY (1024u << 20)
#define SOCK_LEN sizeof(((struct sockaddr_un *)0)->sun_path)

struct hct_client_s {
  char paths[HCT_MAX_SOCKETS][SOCK_LEN]; /* the search, in order */
  int n_paths;
  char path[SOCK_LEN]; /* the one connected, or the first */
  int fd;
  int timeout_ms;
  int64_t retry_at_us;
  int64_t rcvtimeo_us; /* SO_RCVTIMEO: the timeout less a margin */
  int64_t next_id;
  char *rbuf;
  size_t rlen, rcap;
  size_t scan;   /* rbuf[0, scan) holds no newline */
  char why[512]; /* why the last call fell back */
};

static void copy(char *dst, const char *src, size_t len) {
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
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
  c->scan = 0;
}

/* Connects to one path without blocking past the deadline.  A Unix socket
 * connect either completes at once or fails with EAGAIN when the daemon's
 * backlog is full (a stalled daemon): that counts as absent. */
static int connect_one(hct_client_t *c, const char *path, int64_t deadline, int *fd_out) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return hct__error(HCT_EIO, "socket: %s", strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  copy(sa.sun_path, path, sizeof sa.sun_path);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int err = errno;
    if (err == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 1) {
      socklen_t l = sizeof err;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err == 0) goto ok;
    }
    close(fd);
    return hct__error(HCT_ENODAEMON, "daemon socket '%s': %s", path,
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
      return hct__error(HCT_EIO, "daemon socket '%s': %s", path, strerror(errno));
    }
  }
  *fd_out = fd;
  return 0;
}

/* Tries the search's paths in order (the daemon's default order): the
 * first that answers is the daemon. */
static int open_conn(hct_client_t *c, int64_t deadline) {
  if (c->n_paths == 0) return hct__error(HCT_ENODAEMON, "no daemon socket path");
  char why[HCT_MAX_SOCKETS][300];
  for (int i = 0; i < c->n_paths; i++) {
    int fd = -1;
    if (connect_one(c, c->paths[i], deadline, &fd) == 0) {
      copy(c->path, c->paths[i], sizeof c->path);
      c->fd = fd;
      c->rlen = 0;
      c->scan = 0;
      return 0;
    }
    copy(why[i], hct_last_error(), sizeof why[i]);
  }
  if (c->n_paths == 1) return hct__error(HCT_ENODAEMON, "%s", why[0]);
  return hct__error(HCT_ENODAEMON, "%s; %s", why[0], why[1]);
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

/* The deadline passed before a whole reply line came.  What the message
 * says depends on what came, never on where in read_line the deadline was
 * noticed (that depends on the scheduler): nothing at all, or part of a
 * line. */
static int answer_timed_out(const hct_client_t *c) {
  if (c->rlen == 0)
    return hct__error(HCT_ETIMEDOUT, "daemon '%s': no answer within the timeout", c->path);
  return hct__error(HCT_ETIMEDOUT, "daemon '%s': no whole answer within the timeout (%zu bytes came)",
                    c->path, c->rlen);
}

/* Reads one line (without its newline) into a malloc'd string: at most
 * `max` bytes, and never past the deadline however the bytes come. */
static int read_line(hct_client_t *c, int64_t deadline, size_t max, char **line) {
  for (;;) {
    char *nl = c->scan < c->rlen ? memchr(c->rbuf + c->scan, '\n', c->rlen - c->scan) : NULL;
    if (nl != NULL) {
      size_t n = (size_t)(nl - c->rbuf);
      char *s = malloc(n + 1);
      if (s == NULL) return hct__error(HCT_ENOMEM, "daemon reply: out of memory");
      memcpy(s, c->rbuf, n);
      s[n] = '\0';
      memmove(c->rbuf, nl + 1, c->rlen - n - 1);
      c->rlen -= n + 1;
      c->scan = 0;
      *line = s;
      return 0;
    }
    c->scan = c->rlen;
    if (c->rlen > max)
      return hct__error(HCT_EPROTO, "daemon '%s': reply line longer than %zu bytes", c->path, max);
    if (now_us() >= deadline) return answer_timed_out(c);
    if (c->rcap - c->rlen < 4096) {
      size_t cap = c->rcap ? c->rcap * 2 : 8192;
      if (cap > max + 8192) cap = max + 8192;
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
    if (wait_fd(c->fd, POLLIN, deadline) != 1) return answer_timed_out(c);
  }
}

/* Whether a line is a probe's progress reply ({"id":..,"ok":true,"progress":..}). */
static int is_progress(const char *line) {
  return line[0] == '{' && strstr(line, "\"progress\":") != NULL;
}

/*
 * Sends one request line and returns the first reply line (with a
 * progress callback: the first that is not a progress line).  A connection
 * that fails mid-request is dropped (a late reply must never be taken for
 * the next request's); a connection the daemon closed (it restarted, or
 * timed the connection out) is reopened once within the same deadline.
 */
static int roundtrip(hct_client_t *c, const char *req, size_t n, int64_t deadline, size_t max,
                     char **reply, void (*progress)(const char *line, void *ctx), void *ctx) {
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
      rc = read_line(c, deadline, max, &line);
      if (rc < 0) break;
      if (progress == NULL || !is_progress(line)) {
        *reply = line;
        return 0;
      }
      progress(line, ctx);
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
  int n = hct__socket_paths(path, c->paths, HCT_MAX_SOCKETS);
  if (n < 0) {
    copy(c->why, hct_last_error(), sizeof c->why);
    c->n_paths = 0;
    return HCT_FALLBACK;
  }
  c->n_paths = n;
  copy(c->path, c->paths[0], sizeof c->path);
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

static void fill_baseline(hct_choice_t *out, const char *variant, const char *params,
                          hct_source_t src, const char *cls, int tokens) {
  memset(out, 0, sizeof *out);
  copy(out->variant, variant, sizeof out->variant);
  copy(out->params, params[0] ? params : "{}", sizeof out->params);
  copy(out->parity_class, cls, sizeof out->parity_class);
  out->source = src;
  out->tmin = out->tmax = tokens;
}

/* The code of an error name the daemon sent, or 0 for a name this library
 * does not know (hct_err_from_name would say EINVAL). */
static int known_code(const char *name) {
  for (int e = HCT__ERR_FIRST + 1; e < HCT__ERR_LAST; e++)
    if (strcmp(hct_err_name(e), name) == 0) return e;
  return 0;
}

/* Builds a choose/module request line into buf (at least 2 KiB). */
static size_t build_request(hct_client_t *c, char *buf, const char *cmd, const char *op,
                            int tokens, const char *device, const char *parity, long long *id) {
  *id = (long long)c->next_id++;
  char *o = buf + sprintf(buf, "{\"id\":%lld,\"cmd\":\"%s\",\"op\":", *id, cmd);
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
  if (tokens < 1 || tokens > HCT_MAX_TOKENS)
    return hct__error(HCT_EINVAL, "tokens %d: want 1 to %d", tokens, HCT_MAX_TOKENS);
  if (device != NULL && strlen(device) > 255)
    return hct__error(HCT_EINVAL, "device '%.40s...': longer than 255 characters", device);
  if (parity != NULL && hct__parity_asked_ok(parity) < 0) return HCT_EINVAL;
  return 0;
}

/* ---- reading an answer -----------------------------------------------------
 *
 * A choose reply is read on every engine call; jansson's allocations cost
 * more than the round trip itself.  A scanner walks the reply once and
 * picks the fields out; a reply it does not follow (an error, an escaped
 * string) goes to jansson instead, which reads anything.  Both fill an
 * answer_t, and one function judges it.
 */

typedef struct span_s {
  const char *p;
  size_t n;
} span_t;

typedef struct answer_s {
  int ok;               /* 1, 0, or -1: absent or not a boolean */
  int has_id;
  long long id;
  int has_variant, has_params, has_class, has_source, has_tokens;
  char variant[64];
  char params[256];
  int params_long;      /* longer than params holds */
  char cls[16], src[16];
  char thash[40];
  char model[256];
  char device[256];
  long long tmin, tmax;
  long long measured;   /* measured_tokens; 0 when null or absent */
  int stale;
  double median, baseline;
  char code[32];        /* ok false */
  char msg[400];
} answer_t;

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


static int span_is(span_t v, const char *word) {
  return v.p != NULL && v.n == strlen(word) && memcmp(v.p, word, v.n) == 0;
}

/* An integer span: 0, or -1 when it is not one. */
static int span_int(span_t v, long long *out) {
  char buf[32];
  if (v.p == NULL || v.n == 0 || v.n >= sizeof buf) return -1;
  memcpy(buf, v.p, v.n);
  buf[v.n] = '\0';
  char *end;
  errno = 0;
  long long x = strtoll(buf, &end, 10);
  if (*end != '\0' || errno != 0) return -1;
  *out = x;
  return 0;
}

/* "[lo,hi]": 0, or -1. */
static int span_range(span_t v, long long *lo, long long *hi) {
  if (v.p == NULL || v.n < 5 || v.p[0] != '[' || v.p[v.n - 1] != ']') return -1;
  const char *comma = memchr(v.p, ',', v.n);
  if (comma == NULL) return -1;
  span_t a = {v.p + 1, (size_t)(comma - v.p - 1)}, b = {comma + 1, (size_t)(v.p + v.n - 1 - comma - 1)};
  while (a.n && (*a.p == ' ')) a.p++, a.n--;
  while (b.n && (*b.p == ' ')) b.p++, b.n--;
  while (a.n && a.p[a.n - 1] == ' ') a.n--;
  while (b.n && b.p[b.n - 1] == ' ') b.n--;
  return span_int(a, lo) == 0 && span_int(b, hi) == 0 ? 0 : -1;
}

/* The fast reader: 0 with `a` filled, -1 to let jansson read the line. */
static int fast_answer(const char *line, answer_t *a) {
  static const char *const keys[] = {"id",     "ok",     "variant", "params", "class",
                                     "source", "template_hash", "model", "tokens", "stale",
                                     "evidence", "device", "measured_tokens"};
  enum { K_ID, K_OK, K_VARIANT, K_PARAMS, K_CLASS, K_SOURCE, K_HASH, K_MODEL, K_TOKENS, K_STALE,
         K_EVIDENCE, K_DEVICE, K_MEASURED, K_N };
  span_t v[K_N] = {{0}};
  const char *end = line + strlen(line);
  if (members(line, end, keys, v, K_N) < 0) return -1;
  memset(a, 0, sizeof *a);
  a->ok = span_is(v[K_OK], "true") ? 1 : span_is(v[K_OK], "false") ? 0 : -1;
  if (a->ok != 1) return -1; /* errors and oddities: jansson */
  if (v[K_ID].p != NULL) {
    if (span_int(v[K_ID], &a->id) < 0) return -1;
    a->has_id = 1;
  }
  if (v[K_VARIANT].p != NULL) {
    if (span_str(v[K_VARIANT], a->variant, sizeof a->variant) < 0) return -1;
    a->has_variant = 1;
  }
  if (v[K_CLASS].p != NULL) {
    if (span_str(v[K_CLASS], a->cls, sizeof a->cls) < 0) return -1;
    a->has_class = 1;
  }
  if (v[K_SOURCE].p != NULL) {
    if (span_str(v[K_SOURCE], a->src, sizeof a->src) < 0) return -1;
    a->has_source = 1;
  }
  if (v[K_HASH].p != NULL && span_str(v[K_HASH], a->thash, sizeof a->thash) < 0) return -1;
  if (v[K_MODEL].p != NULL && !span_is(v[K_MODEL], "null") &&
      span_str(v[K_MODEL], a->model, sizeof a->model) < 0)
    return -1;
  if (v[K_DEVICE].p != NULL && !span_is(v[K_DEVICE], "null") &&
      span_str(v[K_DEVICE], a->device, sizeof a->device) < 0)
    return -1;
  if (v[K_MEASURED].p != NULL && !span_is(v[K_MEASURED], "null") &&
      span_int(v[K_MEASURED], &a->measured) < 0)
    return -1;
  /* The daemon writes compact JSON: the params' text is already what
   * jansson's compact dump would give. */
  if (v[K_PARAMS].p != NULL) {
    if (v[K_PARAMS].p[0] != '{') return -1;
    a->has_params = 1;
    if (v[K_PARAMS].n >= sizeof a->params) {
      a->params_long = 1;
    } else {
      memcpy(a->params, v[K_PARAMS].p, v[K_PARAMS].n);
      a->params[v[K_PARAMS].n] = '\0';
    }
  }
  if (v[K_TOKENS].p != NULL) {
    if (span_range(v[K_TOKENS], &a->tmin, &a->tmax) < 0) return -1;
    a->has_tokens = 1;
  }
  if (v[K_STALE].p != NULL) {
    if (!span_is(v[K_STALE], "true") && !span_is(v[K_STALE], "false")) return -1;
    a->stale = span_is(v[K_STALE], "true");
  }
  if (v[K_EVIDENCE].p != NULL) {
    static const char *const ek[] = {"median_us", "baseline_us"};
    span_t e[2] = {{0}};
    if (members(v[K_EVIDENCE].p, v[K_EVIDENCE].p + v[K_EVIDENCE].n, ek, e, 2) < 0) return -1;
    a->median = span_num(e[0]);
    a->baseline = span_num(e[1]);
  }
  return 0;
}

static void jcopy(json_t *o, const char *key, char *dst, size_t len, int *has) {
  const char *s = json_string_value(json_object_get(o, key));
  if (s != NULL) {
    copy(dst, s, len);
    if (has != NULL) *has = 1;
  }
}

/* The slow reader: any JSON.  0 with `a` filled, -1 when the line is not a
 * JSON object. */
static int json_answer(const char *line, answer_t *a) {
  json_t *r = json_loads(line, 0, NULL);
  if (!json_is_object(r)) {
    json_decref(r);
    return -1;
  }
  memset(a, 0, sizeof *a);
  json_t *ok = json_object_get(r, "ok"), *id = json_object_get(r, "id");
  a->ok = json_is_boolean(ok) ? json_is_true(ok) : -1;
  if (json_is_integer(id)) {
    a->has_id = 1;
    a->id = (long long)json_integer_value(id);
  } else if (id != NULL) {
    a->has_id = 1;
    a->id = -1; /* not an id this library sends */
  }
  jcopy(r, "variant", a->variant, sizeof a->variant, &a->has_variant);
  jcopy(r, "class", a->cls, sizeof a->cls, &a->has_class);
  jcopy(r, "source", a->src, sizeof a->src, &a->has_source);
  jcopy(r, "template_hash", a->thash, sizeof a->thash, NULL);
  jcopy(r, "model", a->model, sizeof a->model, NULL);
  jcopy(r, "device", a->device, sizeof a->device, NULL);
  if (json_is_integer(json_object_get(r, "measured_tokens")))
    a->measured = (long long)json_integer_value(json_object_get(r, "measured_tokens"));
  json_t *params = json_object_get(r, "params");
  if (json_is_object(params)) {
    a->has_params = 1;
    size_t k = json_dumpb(params, a->params, sizeof a->params - 1, JSON_COMPACT);
    if (k == 0 || k > sizeof a->params - 1) a->params_long = 1;
    else a->params[k] = '\0';
  }
  json_t *t = json_object_get(r, "tokens");
  if (json_is_array(t) && json_array_size(t) == 2 && json_is_integer(json_array_get(t, 0)) &&
      json_is_integer(json_array_get(t, 1))) {
    a->has_tokens = 1;
    a->tmin = (long long)json_integer_value(json_array_get(t, 0));
    a->tmax = (long long)json_integer_value(json_array_get(t, 1));
  }
  a->stale = json_is_true(json_object_get(r, "stale"));
  json_t *ev = json_object_get(r, "evidence");
  a->median = json_number_value(json_object_get(ev, "median_us"));
  a->baseline = json_number_value(json_object_get(ev, "baseline_us"));
  json_t *e = json_object_get(r, "error");
  jcopy(e, "code", a->code, sizeof a->code, NULL);
  jcopy(e, "message", a->msg, sizeof a->msg, NULL);
  json_decref(r);
  return 0;
}

/*
 * Judges a reply to request `id` for T = tokens: 0 with `out` filled (an
 * answer), 1 with *code and the message set (a valid error reply), or -1
 * with `why` (not an answer to this request).
 */
static int judge(const answer_t *a, long long id, int tokens, hct_choice_t *out, int *code,
                 char *why, size_t len) {
  hct_parity_t cls;
  hct_source_t src;
  if (!a->has_id) return snprintf(why, len, "the reply has no id"), -1;
  if (a->id != id) return snprintf(why, len, "the reply's id is %lld, not %lld", a->id, id), -1;
  if (a->ok < 0) return snprintf(why, len, "the reply has no boolean 'ok'"), -1;
  if (a->ok == 0) {
    *code = known_code(a->code);
    if (*code == 0) return snprintf(why, len, "error code '%.31s' is not one hctune has", a->code), -1;
    hct__error(*code, "daemon: %s", a->msg[0] ? a->msg : hct_strerror(*code));
    return 1;
  }
  if (!a->has_variant || a->variant[0] == '\0')
    return snprintf(why, len, "the answer has no variant"), -1;
  if (!a->has_params) return snprintf(why, len, "the answer has no params object"), -1;
  if (a->params_long)
    return snprintf(why, len, "the answer's params are longer than %zu bytes", sizeof out->params - 1), -1;
  if (!a->has_class || hct__parity_from_name(a->cls, &cls) < 0)
    return hct__error_clear(), snprintf(why, len, "the answer's class '%.15s' is not one hctune has", a->cls), -1;
  if (!a->has_source || hct__source_from_name(a->src, &src) < 0 || src == HCT_SOURCE_ENV)
    return hct__error_clear(), snprintf(why, len, "the answer's source '%.15s' is not one the daemon gives", a->src), -1;
  if (!a->has_tokens || a->tmin > tokens || a->tmax < tokens || a->tmin < 1)
    return snprintf(why, len, "the answer's token range does not hold T=%d", tokens), -1;
  memset(out, 0, sizeof *out);
  copy(out->variant, a->variant, sizeof out->variant);
  copy(out->params, a->params, sizeof out->params);
  copy(out->parity_class, a->cls, sizeof out->parity_class);
  copy(out->template_hash, a->thash, sizeof out->template_hash);
  copy(out->model, a->model, sizeof out->model);
  copy(out->device, a->device, sizeof out->device);
  /* The T of the figures, only when it is one of the answer's. */
  out->measured_tokens = a->measured >= a->tmin && a->measured <= a->tmax ? (int)a->measured : 0;
  out->source = src;
  out->median_us = a->median;
  out->baseline_us = a->baseline;
  out->tmin = (int)a->tmin;
  out->tmax = (int)(a->tmax < HCT_MAX_TOKENS ? a->tmax : HCT_MAX_TOKENS);
  out->stale = a->stale;
  return 0;
}

/* hct_choice_t as 0.1.0 had it: the fields before `model`. */
#define CHOICE_V0_SIZE offsetof(hct_choice_t, model)

static int choose(hct_client_t *c, const char *op, int tokens, const char *device,
                  const char *parity, hct_choice_t *out) {
  int rc = check_args(op, tokens, device, parity);
  if (rc < 0) return rc;
  char forced[64], fparams[256];
  rc = hct__force_lookup(op, forced, sizeof forced, fparams, sizeof fparams);
  if (rc < 0) return rc;
  if (rc == 1) {
    /* A variant or point the manifest does not have is refused (one line
     * on stderr), never passed on (client/force.c). */
    if (hct__force_check(op, forced, fparams) == HCT_EINVAL) return HCT_EINVAL;
    if (fparams[0] != '\0') {
      fill_baseline(out, forced, fparams, HCT_SOURCE_ENV, "", tokens);
      out->tmin = 1;
      out->tmax = HCT_MAX_TOKENS;
      return 0;
    }
    /* No point given: the variant's default point at T, the rule of every
     * other path (an op without a manifest here keeps "{}"). */
    hct_default_t dv;
    hct__default_answer_here(op, NULL, forced, tokens, &dv);
    hct__error_clear();
    fill_baseline(out, forced, dv.params, HCT_SOURCE_ENV, "", tokens);
    return 0;
  }
  int64_t deadline = now_us() + (int64_t)c->timeout_ms * 1000;
  char req[2048];
  long long id;
  size_t n = build_request(c, req, "choose", op, tokens, device, parity, &id);
  char *line = NULL;
  rc = roundtrip(c, req, n, deadline, MAX_CHOOSE_REPLY, &line, NULL, NULL);
  if (rc < 0) goto fallback;
  answer_t a;
  if (fast_answer(line, &a) < 0 && json_answer(line, &a) < 0) {
    free(line);
    drop(c);
    rc = hct__error(HCT_EPROTO, "daemon '%s': reply is not JSON", c->path);
    goto fallback;
  }
  free(line);
  char why[256];
  int code = 0;
  int j = judge(&a, id, tokens, out, &code, why, sizeof why);
  if (j == 0) return 0;
  if (j == 1) {
    /* The daemon's own answer that it cannot: its code, and the baseline
     * in `out` for an engine that needs something to run. */
    char msg[600];
    copy(msg, hct_last_error(), sizeof msg);
    hct_default_t dv;
    if (hct__default_answer_here(op, parity, NULL, tokens, &dv) == 0)
      fill_baseline(out, dv.variant, dv.params, HCT_SOURCE_DEFAULT, dv.cls, tokens);
    else
      memset(out, 0, sizeof *out);
    hct__error(code, "%s", msg); /* the daemon's reason, not the lookup's */
    return code;
  }
  /* Whatever sent it is not following the protocol: nothing more it says
   * on this connection is trusted. */
  drop(c);
  rc = hct__error(HCT_EPROTO, "daemon '%s': not an answer to this request: %s", c->path, why);

fallback: {
    /* hct__error writes the buffer hct_last_error() reads: copy it first. */
    char msg[600];
    copy(msg, hct_last_error(), sizeof msg);
    hct_default_t dv;
    if (hct__default_answer_here(op, parity, NULL, tokens, &dv) < 0) {
      memset(out, 0, sizeof *out);
      return hct__error(HCT_ENOENT, "%s, and %s", msg, hct_last_error());
    }
    /* A bit family falls back to its head, never the baseline (issue 29). */
    hct__error(rc, "%s: fell back to %s's %s %s", msg, op,
               hct__parity_family(parity) != NULL ? "family head" : "baseline", dv.variant);
    fill_baseline(out, dv.variant, dv.params, HCT_SOURCE_DEFAULT, dv.cls, tokens);
    return HCT_FALLBACK;
  }
}

int hct_choose_sized(hct_client_t *c, const char *op, int tokens, const char *device,
                     const char *parity, hct_choice_t *out, size_t out_size) {
  if (c == NULL || out == NULL || out_size < CHOICE_V0_SIZE)
    return hct__error(HCT_EINVAL, "hct_choose: no client, no output, or an output of %zu bytes",
                      out_size);
  hct_choice_t ch;
  memset(&ch, 0, sizeof ch);
  int rc = choose(c, op, tokens, device, parity, &ch);
  if (rc >= 0 || ch.variant[0] != '\0') memcpy(out, &ch, out_size < sizeof ch ? out_size : sizeof ch);
  return rc;
}

/* The entry point of programs built against 0.1.0's header, whose
 * hct_choice_t ends at baseline_us. */
int(hct_choose)(hct_client_t *c, const char *op, int tokens, const char *device,
                const char *parity, hct_choice_t *out) {
  return hct_choose_sized(c, op, tokens, device, parity, out, CHOICE_V0_SIZE);
}


/* Reads the reply of a request sent with `id` as an object: 0 with *r, or
 * a code: the daemon's error (a known one), or HCT_EPROTO when the reply
 * is not JSON, not an answer to this id, or an unknown code. */
static int reply_object(hct_client_t *c, const char *line, long long id, json_t **r) {
  *r = json_loads(line, 0, NULL);
  json_t *jid = json_object_get(*r, "id"), *ok = json_object_get(*r, "ok");
  const char *why = NULL;
  if (!json_is_object(*r)) why = "reply is not a JSON object";
  else if (id >= 0 && (!json_is_integer(jid) || json_integer_value(jid) != id))
    why = "the reply's id is not the request's";
  else if (!json_is_boolean(ok)) why = "the reply has no boolean 'ok'";
  if (why != NULL) {
    json_decref(*r);
    *r = NULL;
    drop(c);
    return hct__error(HCT_EPROTO, "daemon '%s': %s", c->path, why);
  }
  if (json_is_true(ok)) return 0;
  json_t *e = json_object_get(*r, "error");
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  int rc = code != NULL ? known_code(code) : 0;
  if (rc == 0) {
    rc = hct__error(HCT_EPROTO, "daemon '%s': error code '%.31s' is not one hctune has", c->path,
                    code != NULL ? code : "(none)");
    drop(c);
  } else {
    hct__error(rc, "daemon: %s", msg != NULL ? msg : hct_strerror(rc));
  }
  return rc;
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
  long long id;
  size_t n = build_request(c, req, "module", op, tokens, device, parity, &id);
  char *line = NULL;
  rc = roundtrip(c, req, n, now_us() + wait * 1000, MAX_MODULE_REPLY, &line, NULL, NULL);
  if (rc < 0) return rc;
  json_t *r;
  rc = reply_object(c, line, id, &r);
  free(line);
  if (rc < 0) {
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
  int rc = roundtrip(c, req, n + 1, now_us() + (int64_t)timeout_ms * 1000, MAX_RAW_REPLY, reply,
                     progress, ctx);
  free(req);
  return rc;
}

int hct__client_ask(hct_client_t *c, const char *line, int timeout_ms, char **text, json_t **reply,
                    void (*progress)(const char *line, void *ctx), void *ctx) {
  *reply = NULL;
  if (text != NULL) *text = NULL;
  char *raw = NULL;
  int rc = hct__client_request(c, line, timeout_ms, &raw, progress, ctx);
  if (rc < 0) return rc;
  /* The id is the caller's, if any: checked against the line sent. */
  long long id = -1;
  json_t *sent = json_loads(line, 0, NULL);
  json_t *sid = json_object_get(sent, "id");
  if (json_is_integer(sid)) id = (long long)json_integer_value(sid);
  int had_id = sid != NULL;
  json_decref(sent);
  if (!had_id) {
    /* No id sent: none can be checked. */
    json_t *r = json_loads(raw, 0, NULL);
    json_t *jid = json_object_get(r, "id");
    if (jid != NULL) json_object_del(r, "id");
    char *plain = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    rc = reply_object(c, plain != NULL ? plain : raw, -1, reply);
    free(plain);
  } else if (id < 0) {
    rc = reply_object(c, raw, -1, reply);
  } else {
    rc = reply_object(c, raw, id, reply);
  }
  if (text != NULL) *text = raw;
  else free(raw);
  return rc;
}

int hct__client_device(hct_client_t *c, const char *device, int timeout_ms, char *out, size_t len) {
  /* A model key, "*" (every card, for pins): as given. */
  if (strchr(device, '|') != NULL || strcmp(device, "*") == 0) {
    copy(out, device, len);
    return 0;
  }
  char *text = NULL;
  json_t *r = NULL;
  int rc = hct__client_ask(c, "{\"cmd\":\"devices\"}", timeout_ms, &text, &r, NULL, NULL);
  free(text);
  if (rc < 0) {
    json_decref(r);
    char why[400];
    copy(why, hct_last_error(), sizeof why);
    return hct__error(rc, "device '%s': cannot check it against the daemon's cards: %s", device, why);
  }
  json_t *devs = json_object_get(r, "devices"), *d;
  size_t i, n = strlen(device);
  const char *found = NULL;
  int matches = 0, exact = 0;
  char names[300] = "";
  json_array_foreach(devs, i, d) {
    const char *uuid = json_string_value(json_object_get(d, "uuid"));
    if (uuid == NULL) continue;
    if (strcmp(uuid, device) == 0) exact = 1;
    if (strncasecmp(uuid, device, n) != 0) continue;
    found = uuid;
    if (matches++ < 3) {
      size_t k = strlen(names);
      snprintf(names + k, sizeof names - k, "%s'%s'", k ? ", " : "", uuid);
    }
  }
  if (exact) {
    copy(out, device, len);
  } else if (matches == 1) {
    copy(out, found, len);
  } else if (matches > 1) {
    rc = hct__error(HCT_EINVAL, "device '%s': %d cards start with it (%s%s): give more of the UUID",
                    device, matches, names, matches > 3 ? ", ..." : "");
  } else if (strncmp(device, "GPU-", 4) == 0 && n >= 40) {
    /* A whole UUID of a card the DB has not seen: the daemon answers from
     * the fleet or the baseline, as for an engine. */
    copy(out, device, len);
  } else {
    rc = hct__error(HCT_ENOENT, "device '%s': no card the daemon knows starts with it ('hctune "
                    "devices' lists them)", device);
  }
  json_decref(r);
  return rc;
}
