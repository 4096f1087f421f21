/*
 * worker.c: the parent side of the worker process (see worker.h for the
 * design and the protocol).  The quarantine policy is tuner/quarantine.c.
 *
 * One worker, one private uv loop: a call writes its line, then runs that
 * loop until the reply, the process's exit or the deadline.  Between calls
 * the loop does not run, so nothing is read; a line the worker writes
 * between calls is read by the next call and, carrying the wrong id, ends
 * the worker as a protocol error.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "tuner.h"

#define LINE_MAX_BYTES (64u << 20) /* a reply longer than this is garbage */
#define ERRTAIL_BYTES 1024
#define STDERR_DRAIN_MS 300        /* for a dead worker's last stderr bytes */

struct hct_worker_s {
  uv_loop_t loop;
  uv_process_t proc;
  uv_pipe_t in, out, err;   /* the child's stdin, stdout, stderr */
  uv_timer_t timer;
  char *exe;
  int spawned;              /* handles above are initialised */
  int closing;              /* handles whose close_cb is still due */
  int running;              /* exit_cb not seen yet */
  int pid;
  int64_t exit_status;
  int term_signal;
  char exit_text[64];
  int out_eof, err_eof;
  /* stdout bytes not yet split into lines */
  char *line;
  size_t len, cap;
  char readbuf[65536];
  /* the last bytes of stderr, a sliding window */
  char errtail[ERRTAIL_BYTES + 1];
  size_t errlen;
  /* the call in flight */
  int64_t next_id, want_id;
  int waiting;
  json_t *reply;
  int proto_rc;             /* HCT_EPROTO once garbage was seen */
  char proto_msg[256];
  int timer_fired;
  /* setup requests to replay: [{"key":..., "req":..., "timeout":...}] */
  json_t *setup;
  int time_fits;            /* the last 'time' refusal's "fits", or -1 */
  hct_worker_phases_t phases; /* the last reply's "phase_ms" */
};

typedef struct write_req_s {
  uv_write_t req;
  char *data;
} write_req_t;

/* ---- small helpers ----------------------------------------------------- */

static const struct {
  int sig;
  const char *name;
} signames[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGSYS, "SIGSYS"},
    {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
};

const char *hct__signal_name(int sig) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(signames); i++)
    if (signames[i].sig == sig) return signames[i].name;
  return "SIG?";
}

int hct__worker_deadline_ms(double expected_ms) {
  if (!(expected_ms > 0)) return HCT_WORKER_DEADLINE_MS;
  double d = 20.0 * expected_ms;
  if (d < HCT_WORKER_DEADLINE_MS) return HCT_WORKER_DEADLINE_MS;
  if (d > 3600e3) return 3600 * 1000;
  return (int)d;
}

int hct__worker_alive(const hct_worker_t *w) { return w != NULL && w->running; }
int hct__worker_pid(const hct_worker_t *w) { return w && w->running ? w->pid : 0; }

const char *hct__worker_exit_text(const hct_worker_t *w) {
  return w->running ? "running" : w->exit_text;
}

/* The last few lines of stderr, newlines shown as " | " so the result
 * stays one line in a message. */
const char *hct__worker_stderr_tail(const hct_worker_t *w) { return w->errtail; }

static void tail_one_line(const hct_worker_t *w, char *buf, size_t len) {
  size_t o = 0;
  const char *s = w->errtail;
  while (*s == '\n') s++;
  for (; *s && o + 4 < len; s++) {
    if (*s == '\n') {
      if (s[1] == '\0') break;
      o += (size_t)snprintf(buf + o, len - o, " | ");
    } else {
      buf[o++] = *s;
    }
  }
  buf[o] = '\0';
}

/* ---- libuv callbacks ----------------------------------------------------- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  hct_worker_t *w = h->data;
  (void)suggested;
  *buf = uv_buf_init(w->readbuf, sizeof w->readbuf);
}

static void kill_worker(hct_worker_t *w) {
  if (w->running) uv_process_kill(&w->proc, SIGKILL);
}

static void protocol_error(hct_worker_t *w, const char *fmt, ...) HCT_PRINTF(2, 3);
static void protocol_error(hct_worker_t *w, const char *fmt, ...) {
  if (w->proto_rc) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->proto_msg, sizeof w->proto_msg, fmt, ap);
  va_end(ap);
  w->proto_rc = HCT_EPROTO;
  kill_worker(w);
}

/* Quotes at most 60 bytes of a bad line, control bytes as '?'. */
static void excerpt(const char *s, size_t n, char *out, size_t len) {
  size_t o = 0;
  for (size_t i = 0; i < n && i < 60 && o + 4 < len; i++)
    out[o++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
  if (n > 60 && o + 4 < len) o += (size_t)snprintf(out + o, len - o, "...");
  out[o] = '\0';
}

static void handle_line(hct_worker_t *w, const char *s, size_t n) {
  if (w->proto_rc) return;
  char ex[80];
  excerpt(s, n, ex, sizeof ex);
  if (!w->waiting || w->reply != NULL) {
    protocol_error(w, "worker %d wrote a line nobody asked for: '%s'", w->pid, ex);
    return;
  }
  json_error_t jerr;
  json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, &jerr);
  if (j == NULL || !json_is_object(j)) {
    json_decref(j);
    protocol_error(w, "worker %d wrote a line that is not a JSON object: '%s'", w->pid, ex);
    return;
  }
  json_t *id = json_object_get(j, "id");
  if (!json_is_integer(id) || json_integer_value(id) != w->want_id) {
    protocol_error(w, "worker %d answered id %s while request %lld was waiting: '%s'", w->pid,
                   json_is_integer(id) ? "other" : "missing", (long long)w->want_id, ex);
    json_decref(j);
    return;
  }
  w->reply = j;
}

static void out_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  hct_worker_t *w = s->data;
  if (nread < 0) {
    w->out_eof = 1;
    uv_read_stop(s);
    return;
  }
  size_t n = (size_t)nread;
  if (w->len + n > LINE_MAX_BYTES) {
    protocol_error(w, "worker %d wrote a line longer than %u bytes", w->pid, LINE_MAX_BYTES);
    w->len = 0;
    return;
  }
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + n) cap *= 2;
    char *p = realloc(w->line, cap);
    if (p == NULL) {
      protocol_error(w, "out of memory reading worker %d", w->pid);
      return;
    }
    w->line = p;
    w->cap = cap;
  }
  memcpy(w->line + w->len, buf->base, n);
  w->len += n;
  size_t start = 0;
  for (size_t i = w->len - n; i < w->len; i++) {
    if (w->line[i] != '\n') continue;
    handle_line(w, w->line + start, i - start);
    start = i + 1;
  }
  memmove(w->line, w->line + start, w->len - start);
  w->len -= start;
}

static void err_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  hct_worker_t *w = s->data;
  if (nread < 0) {
    w->err_eof = 1;
    uv_read_stop(s);
    return;
  }
  /* Keep the last ERRTAIL_BYTES: slide the window left as bytes come. */
  size_t n = (size_t)nread;
  const char *p = buf->base;
  if (n > ERRTAIL_BYTES) {
    p += n - ERRTAIL_BYTES;
    n = ERRTAIL_BYTES;
  }
  if (w->errlen + n > ERRTAIL_BYTES) {
    size_t drop = w->errlen + n - ERRTAIL_BYTES;
    memmove(w->errtail, w->errtail + drop, w->errlen - drop);
    w->errlen -= drop;
  }
  memcpy(w->errtail + w->errlen, p, n);
  w->errlen += n;
  w->errtail[w->errlen] = '\0';
}

static void exit_cb(uv_process_t *p, int64_t status, int sig) {
  hct_worker_t *w = p->data;
  w->running = 0;
  w->exit_status = status;
  w->term_signal = sig;
  if (sig)
    snprintf(w->exit_text, sizeof w->exit_text, "signal %d (%s)", sig, hct__signal_name(sig));
  else
    snprintf(w->exit_text, sizeof w->exit_text, "exit status %lld", (long long)status);
}

static void timer_cb(uv_timer_t *t) {
  hct_worker_t *w = t->data;
  w->timer_fired = 1;
}

static void write_cb(uv_write_t *req, int status) {
  write_req_t *wr = (write_req_t *)req;
  (void)status; /* a failed write shows as the worker's death or EOF */
  free(wr->data);
  free(wr);
}

/* Runs the loop until done() or the timer; the timer is (re)armed here. */
static void run_until(hct_worker_t *w, int (*done)(hct_worker_t *), int ms) {
  w->timer_fired = 0;
  /* The loop's clock stands still between calls: without this the
   * deadline would count from the end of the previous call. */
  uv_update_time(&w->loop);
  uv_timer_start(&w->timer, timer_cb, (uint64_t)(ms > 0 ? ms : 1), 0);
  while (!done(w) && !w->timer_fired) uv_run(&w->loop, UV_RUN_ONCE);
  uv_timer_stop(&w->timer);
}

static int call_done(hct_worker_t *w) { return w->reply != NULL || w->proto_rc || !w->running; }
static int exited(hct_worker_t *w) { return !w->running; }
static int reply_or_eof(hct_worker_t *w) { return w->reply != NULL || w->proto_rc || w->out_eof; }
static int err_drained(hct_worker_t *w) { return w->err_eof; }

/* Kills the worker (if it runs) and waits for its exit, then for the rest
 * of its stderr, both bounded. */
static void reap(hct_worker_t *w) {
  if (!w->spawned) return;
  kill_worker(w);
  if (w->running) run_until(w, exited, HCT_WORKER_KILL_WAIT_MS);
  if (w->running) {
    /* Stuck in the kernel driver: give up waiting; libuv reaps it later if
     * this loop runs again, and the process dies with its context. */
    hct__log(HCT_LOG_WARN, "worker %d did not exit %d ms after SIGKILL", w->pid,
             HCT_WORKER_KILL_WAIT_MS);
    snprintf(w->exit_text, sizeof w->exit_text, "killed, still exiting after %d ms",
             HCT_WORKER_KILL_WAIT_MS);
    return;
  }
  if (!w->err_eof) run_until(w, err_drained, STDERR_DRAIN_MS);
}

/* ---- process ------------------------------------------------------------- */

static void close_cb(uv_handle_t *h) {
  hct_worker_t *w = h->data;
  w->closing--;
}

/* Closes the process's handles and waits for libuv to let go of them, so
 * they can be initialised again for the next process. */
static void close_process(hct_worker_t *w) {
  if (!w->spawned) return;
  uv_handle_t *hs[] = {(uv_handle_t *)&w->in, (uv_handle_t *)&w->out, (uv_handle_t *)&w->err,
                       (uv_handle_t *)&w->proc};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(hs); i++) {
    if (uv_is_closing(hs[i])) continue;
    hs[i]->data = w;
    w->closing++;
    uv_close(hs[i], close_cb);
  }
  while (w->closing > 0) uv_run(&w->loop, UV_RUN_NOWAIT);
  w->spawned = 0;
  w->running = 0;
}

static int spawn(hct_worker_t *w) {
  w->len = 0;
  w->errlen = 0;
  w->errtail[0] = '\0';
  w->out_eof = w->err_eof = 0;
  w->exit_status = 0;
  w->term_signal = 0;
  w->proto_rc = 0;
  w->proto_msg[0] = '\0';
  snprintf(w->exit_text, sizeof w->exit_text, "not started");
  uv_pipe_init(&w->loop, &w->in, 0);
  uv_pipe_init(&w->loop, &w->out, 0);
  uv_pipe_init(&w->loop, &w->err, 0);
  w->in.data = w->out.data = w->err.data = w->proc.data = w;
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  stdio[0].data.stream = (uv_stream_t *)&w->in;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&w->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&w->err;
  char *args[] = {w->exe, "worker", NULL};
  uv_process_options_t o;
  memset(&o, 0, sizeof o);
  o.file = w->exe;
  o.args = args;
  o.exit_cb = exit_cb;
  o.stdio = stdio;
  o.stdio_count = 3;
  w->spawned = 1;
  int r = uv_spawn(&w->loop, &w->proc, &o);
  if (r != 0) {
    /* libuv's rule: the process handle must still be closed. */
    close_process(w);
    snprintf(w->exit_text, sizeof w->exit_text, "not started");
    return hct__error(HCT_EWORKER, "cannot start worker '%s': %s", w->exe, uv_strerror(r));
  }
  w->running = 1;
  w->pid = w->proc.pid;
  uv_read_start((uv_stream_t *)&w->out, alloc_cb, out_read_cb);
  uv_read_start((uv_stream_t *)&w->err, alloc_cb, err_read_cb);
  return 0;
}

static void ignore_sigpipe(void) {
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
  }
}

int hct__worker_start(const char *exe, hct_worker_t **out) {
  *out = NULL;
  char self[4096];
  if (exe == NULL) exe = getenv("HCTUNE_WORKER");
  if (exe == NULL) {
    int rc = hct__exe_path(self, sizeof self);
    if (rc != 0) return rc;
    exe = self;
  }
  ignore_sigpipe();
  hct_worker_t *w = calloc(1, sizeof *w);
  if (w == NULL || (w->exe = hct__strdup(exe)) == NULL ||
      (w->setup = json_array()) == NULL) {
    if (w) free(w->exe);
    free(w);
    return hct__error(HCT_ENOMEM, "out of memory starting worker '%s'", exe);
  }
  int r = uv_loop_init(&w->loop);
  if (r != 0) {
    json_decref(w->setup);
    free(w->exe);
    free(w);
    return hct__error(HCT_EWORKER, "cannot start worker '%s': %s", exe, uv_strerror(r));
  }
  uv_timer_init(&w->loop, &w->timer);
  w->timer.data = w;
  w->next_id = 1;
  if ((r = spawn(w)) != 0) {
    hct__worker_stop(w);
    return r;
  }
  *out = w;
  return 0;
}

/* ---- calls --------------------------------------------------------------- */

static int send_line(hct_worker_t *w, json_t *req) {
  char *s = json_dumps(req, JSON_COMPACT);
  write_req_t *wr = malloc(sizeof *wr);
  if (s == NULL || wr == NULL) {
    free(s);
    free(wr);
    return hct__error(HCT_ENOMEM, "out of memory writing to worker %d", w->pid);
  }
  size_t n = strlen(s);
  char *line = realloc(s, n + 2);
  if (line == NULL) {
    free(s);
    free(wr);
    return hct__error(HCT_ENOMEM, "out of memory writing to worker %d", w->pid);
  }
  line[n] = '\n';
  line[n + 1] = '\0';
  wr->data = line;
  uv_buf_t b = uv_buf_init(line, (unsigned)(n + 1));
  int r = uv_write(&wr->req, (uv_stream_t *)&w->in, &b, 1, write_cb);
  if (r != 0) {
    free(line);
    free(wr);
    return hct__error(HCT_EWORKER, "cannot write to worker %d: %s", w->pid, uv_strerror(r));
  }
  return 0;
}

static const char *cmd_of(json_t *req) {
  const char *c = json_string_value(json_object_get(req, "cmd"));
  return c ? c : "?";
}

int hct__worker_call(hct_worker_t *w, json_t *req, int timeout_ms, json_t **reply) {
  if (reply) *reply = NULL;
  char cmd[32];
  hct__strlcpy(cmd, cmd_of(req), sizeof cmd);
  if (!w->running)
    return hct__error(HCT_EWORKER, "worker is not running (%s): cannot send '%s'", w->exit_text,
                      cmd);
  memset(&w->phases, 0, sizeof w->phases);
  int64_t id = w->next_id++;
  if (json_object_set_new(req, "id", json_integer(id)) != 0)
    return hct__error(HCT_ENOMEM, "out of memory calling worker %d", w->pid);
  int rc = send_line(w, req);
  if (rc != 0) return rc;
  if (timeout_ms <= 0) timeout_ms = HCT_WORKER_DEADLINE_MS;
  w->want_id = id;
  w->waiting = 1;
  w->reply = NULL;
  uint64_t t0 = hct__now_ns();
  run_until(w, call_done, timeout_ms);
  /* A worker may answer and exit at once (a fatal error): its reply can
   * still sit in the pipe when its exit is seen.  Read to the end. */
  if (w->reply == NULL && !w->proto_rc && !w->running && !w->out_eof)
    run_until(w, reply_or_eof, STDERR_DRAIN_MS);
  w->waiting = 0;
  int pid = w->pid;

  if (w->reply != NULL && !w->proto_rc) {
    json_t *r = w->reply;
    w->reply = NULL;
    rc = 0;
    hct__worker_phases_of(r, &w->phases);
    if (!json_is_true(json_object_get(r, "ok"))) {
      const char *name = json_string_value(json_object_get(r, "error"));
      const char *msg = json_string_value(json_object_get(r, "message"));
      rc = name ? hct_err_from_name(name) : HCT_EPROTO;
      if (rc >= 0) rc = HCT_EPROTO;
      if (json_is_true(json_object_get(r, "fatal"))) {
        /* The worker exits after a fatal error: wait for it (killing it if
         * it lingers), so the caller sees it dead and restarts it. */
        run_until(w, exited, 1000);
        reap(w);
      }
      hct__error(rc, "%s", msg ? msg : "worker error without a message");
    }
    if (reply) *reply = r;
    else json_decref(r);
    return rc;
  }
  if (w->proto_rc) {
    json_decref(w->reply);
    w->reply = NULL;
    char msg[256];
    hct__strlcpy(msg, w->proto_msg, sizeof msg);
    reap(w);
    return hct__error(HCT_EPROTO, "%s (during '%s'; worker killed)", msg, cmd);
  }
  if (w->running) {
    /* The deadline passed with the worker still running: a hang. */
    reap(w);
    return hct__error(HCT_EHANG, "worker %d: '%s' did not answer within %d ms (killed after %.0f ms)",
                      pid, cmd, timeout_ms, (double)(hct__now_ns() - t0) / 1e6);
  }
  /* Died during the call: collect the rest of its stderr for the message. */
  reap(w);
  char tail[ERRTAIL_BYTES + 256];
  tail_one_line(w, tail, sizeof tail);
  return hct__error(HCT_EFAULT, "worker %d died during '%s': %s%s%s", pid, cmd, w->exit_text,
                    tail[0] ? "; stderr: " : "", tail);
}

/* ---- setup replay ---------------------------------------------------------- */

static int setup_index(hct_worker_t *w, const char *key) {
  for (size_t i = 0; i < json_array_size(w->setup); i++) {
    const char *k = json_string_value(json_object_get(json_array_get(w->setup, i), "key"));
    if (k && strcmp(k, key) == 0) return (int)i;
  }
  return -1;
}

int hct__worker_setup(hct_worker_t *w, const char *key, json_t *req, int timeout_ms,
                      json_t **reply) {
  int rc = hct__worker_call(w, req, timeout_ms, reply);
  if (rc != 0) return rc;
  json_t *copy = json_deep_copy(req);
  json_t *e = copy ? json_pack("{s:s, s:o, s:i}", "key", key, "req", copy, "timeout", timeout_ms)
                   : NULL;
  if (e == NULL) return hct__error(HCT_ENOMEM, "out of memory recording setup '%s'", key);
  json_object_del(copy, "id");
  int i = setup_index(w, key);
  if (i >= 0) json_array_set_new(w->setup, (size_t)i, e);
  else json_array_append_new(w->setup, e);
  return 0;
}

void hct__worker_forget(hct_worker_t *w, const char *key) {
  int i = setup_index(w, key);
  if (i >= 0) json_array_remove(w->setup, (size_t)i);
}

int hct__worker_restart(hct_worker_t *w, char *failed_key, size_t len) {
  if (failed_key && len) failed_key[0] = '\0';
  reap(w);
  close_process(w);
  int rc = spawn(w);
  if (rc != 0) return rc;
  for (size_t i = 0; i < json_array_size(w->setup); i++) {
    json_t *e = json_array_get(w->setup, i);
    json_t *req = json_object_get(e, "req");
    rc = hct__worker_call(w, req, (int)json_integer_value(json_object_get(e, "timeout")), NULL);
    json_object_del(req, "id");
    if (rc != 0) {
      if (failed_key && len)
        hct__strlcpy(failed_key, json_string_value(json_object_get(e, "key")), len);
      return rc;
    }
  }
  return 0;
}

int hct__worker_recover(hct_worker_t *w,
                        void (*dropped)(void *arg, const char *key, int code, const char *msg),
                        void *arg) {
  for (int attempt = 0; attempt < 8; attempt++) {
    char key[64];
    int rc = hct__worker_restart(w, key, sizeof key);
    if (rc == 0) return 0;
    if (key[0] == '\0' || strcmp(key, "open") == 0) return rc;
    char msg[512];
    hct__strlcpy(msg, hct_last_error(), sizeof msg);
    hct__worker_forget(w, key);
    if (dropped) dropped(arg, key, rc, msg);
  }
  return hct__error(HCT_EWORKER, "worker '%s': still failing after 8 restarts (%s)", w->exe,
                    w->exit_text);
}

void hct__worker_stop(hct_worker_t *w) {
  if (w == NULL) return;
  if (w->running) {
    json_t *q = json_pack("{s:s}", "cmd", "quit");
    if (q && hct__worker_call(w, q, 1000, NULL) == 0) run_until(w, exited, 1000);
    json_decref(q);
  }
  reap(w);
  close_process(w);
  w->closing++;
  uv_close((uv_handle_t *)&w->timer, close_cb);
  while (w->closing > 0) uv_run(&w->loop, UV_RUN_NOWAIT);
  if (uv_loop_close(&w->loop) != 0) hct__log(HCT_LOG_WARN, "worker loop still has handles");
  json_decref(w->setup);
  json_decref(w->reply);
  free(w->line);
  free(w->exe);
  free(w);
}

/* ---- parity figures over the pipe ----------------------------------------- */

json_t *hct__json_double(double x) {
  if (isfinite(x)) return json_real(x);
  return json_string(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

int hct__json_double_value(json_t *j, double *out) {
  static const struct {
    const char *text;
    double value;
  } special[] = {{"nan", NAN}, {"inf", INFINITY}, {"-inf", -INFINITY}};
  if (json_is_number(j)) {
    *out = json_number_value(j);
    return 0;
  }
  for (size_t i = 0; json_is_string(j) && i < HCT_ARRAY_SIZE(special); i++)
    if (strcmp(json_string_value(j), special[i].text) == 0) {
      *out = special[i].value;
      return 0;
    }
  return HCT_EPROTO;
}

json_t *hct__figs_to_json(const hct_parity_figs_t *f) {
  json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "is_image",
                   (json_int_t)f->is_image, "image_mismatches", (json_int_t)f->image_mismatches, "elems",
                   (json_int_t)f->elems, "mismatches", (json_int_t)f->mismatches, "first_mismatch",
                   (json_int_t)f->first_mismatch, "unwritten", (json_int_t)f->unwritten,
                   "nonfinite", (json_int_t)f->nonfinite, "rel_err", hct__json_double(f->rel_err),
                   "max_err_ratio", hct__json_double(f->max_err_ratio), "kl_mean",
                   hct__json_double(f->kl_mean), "kl_max", hct__json_double(f->kl_max), "argmax_agree",
                   hct__json_double(f->argmax_agree));
  /* The first mismatches, [index, got bits, want bits] each: what a report
   * shows of a wrong output now that checks leave the outputs on the card. */
  if (j != NULL && f->n_first > 0) {
    json_t *first = json_array();
    for (size_t k = 0; k < f->n_first && k < HCT_PC_FIRST; k++)
      json_array_append_new(first, json_pack("[I, I, I]", (json_int_t)f->first_idx[k],
                                             (json_int_t)f->first_got[k], (json_int_t)f->first_want[k]));
    json_object_set_new(j, "first", first);
  }
  return j;
}

/* "first", optional (added after the first protocol). */
static int first_from_json(json_t *j, hct_parity_figs_t *f) {
  json_t *first = json_object_get(j, "first"), *e;
  size_t k;
  if (first == NULL) return 0;
  if (!json_is_array(first) || json_array_size(first) > HCT_PC_FIRST)
    return hct__error(HCT_EPROTO, "parity figures: 'first' must be an array of at most %d", HCT_PC_FIRST);
  json_array_foreach(first, k, e) {
    json_int_t idx, got, want;
    if (json_unpack(e, "[III]", &idx, &got, &want) != 0 || idx < 0 || got < 0 || want < 0)
      return hct__error(HCT_EPROTO, "parity figures: 'first' entry %zu is not [index, got, want]", k);
    f->first_idx[k] = (size_t)idx;
    f->first_got[k] = (uint32_t)got;
    f->first_want[k] = (uint32_t)want;
  }
  f->n_first = json_array_size(first);
  return 0;
}

int hct__figs_from_json(json_t *j, hct_parity_figs_t *f) {
  static const struct {
    const char *key;
    size_t off;
    int optional; /* added after the first protocol: absent means 0 */
  } counts[] = {
      {"elems", offsetof(hct_parity_figs_t, elems), 0},
      {"mismatches", offsetof(hct_parity_figs_t, mismatches), 0},
      {"first_mismatch", offsetof(hct_parity_figs_t, first_mismatch), 0},
      {"unwritten", offsetof(hct_parity_figs_t, unwritten), 0},
      {"nonfinite", offsetof(hct_parity_figs_t, nonfinite), 0},
      {"is_image", offsetof(hct_parity_figs_t, is_image), 1},
      {"image_mismatches", offsetof(hct_parity_figs_t, image_mismatches), 1},
  }, reals[] = {
      {"rel_err", offsetof(hct_parity_figs_t, rel_err), 0},
      {"max_err_ratio", offsetof(hct_parity_figs_t, max_err_ratio), 0},
      {"kl_mean", offsetof(hct_parity_figs_t, kl_mean), 0},
      {"kl_max", offsetof(hct_parity_figs_t, kl_max), 0},
      {"argmax_agree", offsetof(hct_parity_figs_t, argmax_agree), 0},
  };
  memset(f, 0, sizeof *f);
  if (!json_is_object(j)) return hct__error(HCT_EPROTO, "parity figures: not an object");
  for (size_t i = 0; i < HCT_ARRAY_SIZE(counts); i++) {
    json_t *v = json_object_get(j, counts[i].key);
    if (v == NULL && counts[i].optional) continue;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return hct__error(HCT_EPROTO, "parity figures: '%s' missing or not a count", counts[i].key);
    *(size_t *)((char *)f + counts[i].off) = (size_t)json_integer_value(v);
  }
  for (size_t i = 0; i < HCT_ARRAY_SIZE(reals); i++) {
    if (hct__json_double_value(json_object_get(j, reals[i].key),
                               (double *)((char *)f + reals[i].off)) != 0)
      return hct__error(HCT_EPROTO, "parity figures: '%s' missing or not a number", reals[i].key);
  }
  return first_from_json(j, f);
}

/* ---- typed requests ---------------------------------------------------------- */

/* Calls and drops req; *reply as hct__worker_call. */
static int call_new(hct_worker_t *w, json_t *req, int timeout_ms, json_t **reply) {
  if (req == NULL) return hct__error(HCT_ENOMEM, "out of memory building a worker request");
  int rc = hct__worker_call(w, req, timeout_ms, reply);
  json_decref(req);
  return rc;
}

/* A setup request (replayed after a restart) under `key`, with the kernels
 * folder when one is named; drops req.  The open deadline for all of them:
 * opening makes a context, and a load reads its binary from the DB and the
 * driver compiles PTX, more than a launch's time. */
static int setup_new(hct_worker_t *w, const char *key, json_t *req, const char *kernels_dir) {
  if (req != NULL && kernels_dir != NULL)
    json_object_set_new(req, "kernels_dir", json_string(kernels_dir));
  if (req == NULL) return hct__error(HCT_ENOMEM, "out of memory building a worker request");
  int rc = hct__worker_setup(w, key, req, HCT_WORKER_OPEN_DEADLINE_MS, NULL);
  json_decref(req);
  return rc;
}

int hct__worker_open(hct_worker_t *w, const char *device) {
  return setup_new(w, "open", json_pack("{s:s, s:s}", "cmd", "open", "device", device ? device : "0"), NULL);
}

int hct__worker_load(hct_worker_t *w, int cand, const char *kernels_dir, const char *op,
                     const char *variant, const char *params_json, const char *binary_key,
                     const char *db_path) {
  json_error_t jerr;
  json_t *params = json_loads(params_json && params_json[0] ? params_json : "{}", 0, &jerr);
  if (!json_is_object(params)) {
    json_decref(params);
    return hct__error(HCT_EINVAL, "params '%s' of '%s': not a JSON object", params_json, variant);
  }
  json_t *req = json_pack("{s:s, s:i, s:s, s:s, s:o, s:s, s:s}", "cmd", "load", "cand", cand,
                          "op", op, "variant", variant, "params", params, "binary_key",
                          binary_key, "db", db_path);
  char key[32];
  snprintf(key, sizeof key, "cand%d", cand);
  return setup_new(w, key, req, kernels_dir);
}

int hct__worker_reference(hct_worker_t *w, const char *kernels_dir, const char *op,
                          const char *binary_key, const char *db_path) {
  return hct__worker_reference_with(w, kernels_dir, op, binary_key, db_path, NULL);
}

int hct__worker_reference_with(hct_worker_t *w, const char *kernels_dir, const char *op,
                               const char *binary_key, const char *db_path, const char *pcheck_key) {
  json_t *req = json_pack("{s:s, s:s, s:s, s:s}", "cmd", "reference", "op", op, "binary_key",
                          binary_key, "db", db_path);
  if (req != NULL && pcheck_key != NULL && pcheck_key[0] != '\0')
    json_object_set_new(req, "pcheck_key", json_string(pcheck_key));
  char key[64];
  snprintf(key, sizeof key, "reference:%s", op);
  return setup_new(w, key, req, kernels_dir);
}

int hct__worker_unload(hct_worker_t *w, int cand) {
  char key[32];
  snprintf(key, sizeof key, "cand%d", cand);
  hct__worker_forget(w, key);
  return call_new(w, json_pack("{s:s, s:i}", "cmd", "unload", "cand", cand), 0, NULL);
}

/* Figures of every buffer of a check reply's object `bufs`, in its order;
 * with `names` (the candidate's buffer names) in that order instead. */
static int figs_of(json_t *bufs, char names[][32], int *n, hct_parity_figs_t *figs, int by_name) {
  if (!json_is_object(bufs)) return hct__error(HCT_EPROTO, "check reply: no buffer figures");
  if (by_name) {
    for (int i = 0; i < *n; i++) {
      int rc = hct__figs_from_json(json_object_get(bufs, names[i]), &figs[i]);
      if (rc != 0) return rc;
    }
    return 0;
  }
  const char *k;
  json_t *v;
  *n = 0;
  json_object_foreach(bufs, k, v) {
    if (*n == HCT_MAX_BUFFERS) return hct__error(HCT_EPROTO, "check reply: too many buffers");
    hct__strlcpy(names[*n], k, 32);
    int rc = hct__figs_from_json(v, &figs[*n]);
    if (rc != 0) return rc;
    (*n)++;
  }
  return 0;
}

/* The later runs of a check reply ("more"), by the first run's names. */
static int more_of(json_t *more, hct_worker_check_t *out) {
  size_t i;
  json_t *o;
  json_array_foreach(more, i, o) {
    if (out->n_more == (int)HCT_ARRAY_SIZE(out->more))
      return hct__error(HCT_EPROTO, "check reply: too many later runs");
    hct_worker_run_t *r = &out->more[out->n_more];
    const char *check = json_string_value(json_object_get(o, "check"));
    if (check == NULL || !json_is_integer(json_object_get(o, "run")))
      return hct__error(HCT_EPROTO, "check reply: a later run without 'check' or 'run'");
    hct__strlcpy(r->check, check, sizeof r->check);
    r->run = (int)json_integer_value(json_object_get(o, "run"));
    int rc = figs_of(json_object_get(o, "buffers"), out->name, &out->n, r->figs, 1);
    if (rc == 0 && out->has_ref) rc = figs_of(json_object_get(o, "ref_buffers"), out->name, &out->n, r->ref_figs, 1);
    if (rc != 0) return rc;
    out->n_more++;
  }
  return 0;
}

int hct__worker_check(hct_worker_t *w, int cand, int ref, int T, int pending, uint64_t seed,
                      int flags, int timeout_ms, hct_worker_check_t *out) {
  memset(out, 0, sizeof *out);
  out->deterministic = -1;
  json_t *reply = NULL;
  int rc = call_new(w, json_pack("{s:s, s:i, s:i, s:i, s:i, s:I, s:i, s:i, s:i}", "cmd", "check",
                                 "cand", cand, "ref", ref, "tokens", T, "pending", pending, "seed",
                                 (json_int_t)seed, "repeat", (flags & HCT_CHECK_REPEAT) != 0,
                                 "producer", (flags & HCT_CHECK_PRODUCER) != 0, "twin",
                                 (flags & HCT_CHECK_TWIN) != 0),
                    timeout_ms, &reply);
  if (rc == 0) {
    char saved[512];
    rc = figs_of(json_object_get(reply, "buffers"), out->name, &out->n, out->figs, 0);
    json_t *rb = json_object_get(reply, "ref_buffers");
    if (rc == 0 && ref >= 0 && rb != NULL) {
      out->has_ref = 1;
      rc = figs_of(rb, out->name, &out->n, out->ref_figs, 1);
    }
    json_t *more = json_object_get(reply, "more");
    if (rc == 0 && more != NULL) rc = json_is_array(more) ? more_of(more, out)
                                     : hct__error(HCT_EPROTO, "check reply: 'more' is not an array");
    json_t *det = json_object_get(reply, "deterministic");
    if (rc == 0 && det != NULL) {
      out->deterministic = json_is_true(det);
      const char *b = json_string_value(json_object_get(reply, "nondeterministic_buffer"));
      hct__strlcpy(out->nondet_buf, b ? b : "", sizeof out->nondet_buf);
      out->nondet_mismatches = (size_t)json_integer_value(json_object_get(reply, "nondeterministic_mismatches"));
      out->nondet_first = (size_t)json_integer_value(json_object_get(reply, "nondeterministic_first"));
    }
    const char *skip = json_string_value(json_object_get(reply, "producer_skipped"));
    if (skip) hct__strlcpy(out->producer_skipped, skip, sizeof out->producer_skipped);
    const char *host = json_string_value(json_object_get(reply, "checked_on_host"));
    if (host) hct__strlcpy(out->checked_on_host, host, sizeof out->checked_on_host);
    if (rc != 0) {
      /* A reply that does not parse is the worker's fault, like garbage. */
      hct__strlcpy(saved, hct_last_error(), sizeof saved);
      reap(w);
      rc = hct__error(HCT_EPROTO, "worker %d: %s (worker killed)", w->pid, saved);
    }
    double ms;
    if (rc == 0 && hct__json_double_value(json_object_get(reply, "run_ms"), &ms) == 0)
      out->run_ms = ms;
  }
  json_decref(reply);
  return rc;
}

int hct__worker_verify(hct_worker_t *w, const int *cands, int n, int ref, int timeout_ms,
                       hct_worker_verify_t *out, int *failed) {
  if (failed) *failed = -1;
  memset(out, 0, sizeof *out * (size_t)n);
  json_t *ids = json_array();
  for (int k = 0; k < n; k++) json_array_append_new(ids, json_integer(cands[k]));
  json_t *reply = NULL;
  int rc = call_new(w, json_pack("{s:s, s:o, s:i}", "cmd", "verify", "cands", ids, "ref", ref),
                    timeout_ms, &reply);
  json_t *who = reply ? json_object_get(reply, "cand") : NULL;
  if (rc != 0 && failed && json_is_integer(who)) *failed = (int)json_integer_value(who);
  if (rc == 0) {
    json_t *res = json_object_get(reply, "results");
    if (!json_is_array(res) || json_array_size(res) != (size_t)n)
      rc = hct__error(HCT_EPROTO, "verify reply: want %d results", n);
    for (int k = 0; rc == 0 && k < n; k++) {
      json_t *o = json_array_get(res, (size_t)k);
      hct_worker_verify_t *v = &out[k];
      v->cand = (int)json_integer_value(json_object_get(o, "cand"));
      v->sets = (int)json_integer_value(json_object_get(o, "sets"));
      v->mismatches = (size_t)json_integer_value(json_object_get(o, "mismatches"));
      v->unwritten = (size_t)json_integer_value(json_object_get(o, "unwritten"));
      v->nonfinite = (size_t)json_integer_value(json_object_get(o, "nonfinite"));
      v->image_mismatches = (size_t)json_integer_value(json_object_get(o, "image_mismatches"));
      v->worst_set = (int)json_integer_value(json_object_get(o, "worst_set"));
      const char *wb = json_string_value(json_object_get(o, "worst_buffer"));
      hct__strlcpy(v->worst_buf, wb ? wb : "", sizeof v->worst_buf);
      if (v->cand != cands[k] || hct__json_double_value(json_object_get(o, "max_dist"), &v->max_dist) != 0)
        rc = hct__error(HCT_EPROTO, "verify reply: result %d is not candidate %d's", k, cands[k]);
      if (rc == 0) rc = figs_of(json_object_get(o, "first"), v->name, &v->n, v->first, 0);
      if (rc == 0) rc = figs_of(json_object_get(o, "ref_first"), v->name, &v->n, v->ref_first, 1);
    }
    if (rc != 0) {
      char saved[512];
      hct__strlcpy(saved, hct_last_error(), sizeof saved);
      reap(w);
      rc = hct__error(HCT_EPROTO, "worker %d: %s (worker killed)", w->pid, saved);
    }
  }
  json_decref(reply);
  return rc;
}

int hct__worker_time_fits(const hct_worker_t *w) { return w->time_fits; }

int hct__worker_copy_bw(hct_worker_t *w, double *bytes_per_s) {
  *bytes_per_s = 0;
  json_t *reply = NULL;
  int rc = call_new(w, json_pack("{s:s}", "cmd", "copy_bw"), 60000, &reply);
  if (rc == 0 && hct__json_double_value(json_object_get(reply, "bytes_per_s"), bytes_per_s) != 0)
    rc = hct__error(HCT_EPROTO, "copy_bw reply: no 'bytes_per_s'");
  json_decref(reply);
  return rc;
}

const char *const hct__worker_phase_names[HCT_WP_N] = {"inputs", "runs", "figures", "memory"};

void hct__worker_phases_of(json_t *reply, hct_worker_phases_t *out) {
  memset(out, 0, sizeof *out);
  json_t *ph = json_object_get(reply, "phase_ms");
  for (int k = 0; json_is_object(ph) && k < HCT_WP_N; k++) {
    double ms = json_number_value(json_object_get(ph, hct__worker_phase_names[k]));
    /* A worker's figures are data: nothing negative or absurd is added. */
    out->ms[k] = ms > 0 && ms < 1e9 ? ms : 0;
  }
}

void hct__worker_phases(const hct_worker_t *w, hct_worker_phases_t *out) { *out = w->phases; }

int hct__worker_time(hct_worker_t *w, const int *cands, int n, int T, uint64_t seed,
                     json_t *opts, int timeout_ms, hct_timing_res_t *res, int *failed) {
  w->time_fits = -1;
  if (failed) *failed = -1;
  memset(res, 0, sizeof *res * (size_t)n);
  json_t *req = opts ? json_deep_copy(opts) : json_object();
  json_t *ids = json_array();
  if (req == NULL || ids == NULL) {
    json_decref(req);
    json_decref(ids);
    return hct__error(HCT_ENOMEM, "out of memory building a worker request");
  }
  for (int k = 0; k < n; k++) json_array_append_new(ids, json_integer(cands[k]));
  json_object_set_new(req, "cmd", json_string("time"));
  json_object_set_new(req, "cands", ids);
  json_object_set_new(req, "tokens", json_integer(T));
  json_object_set_new(req, "seed", json_integer((json_int_t)seed));
  json_t *reply = NULL;
  int rc = call_new(w, req, timeout_ms, &reply);
  json_t *who = reply ? json_object_get(reply, "cand") : NULL;
  if (failed && json_is_integer(who)) *failed = (int)json_integer_value(who);
  json_t *fits = reply ? json_object_get(reply, "fits") : NULL;
  w->time_fits = rc != 0 && json_is_integer(fits) ? (int)json_integer_value(fits) : -1;
  json_t *arr = reply ? json_object_get(reply, "results") : NULL;
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *r = json_array_get(arr, i);
    int id = (int)json_integer_value(json_object_get(r, "cand"));
    int k = 0;
    while (k < n && cands[k] != id) k++;
    if (k == n) continue;
    hct_timing_res_t *t = &res[k];
    static const struct {
      const char *key;
      size_t off;
    } reals[] = {
        {"median_us", offsetof(hct_timing_res_t, s.median)},
        {"min_us", offsetof(hct_timing_res_t, s.min)},
        {"max_us", offsetof(hct_timing_res_t, s.max)},
        {"p10_us", offsetof(hct_timing_res_t, s.p10)},
        {"p90_us", offsetof(hct_timing_res_t, s.p90)},
        {"ci_lo_us", offsetof(hct_timing_res_t, s.ci_lo)},
        {"ci_hi_us", offsetof(hct_timing_res_t, s.ci_hi)},
        {"rel_ci", offsetof(hct_timing_res_t, s.rel_ci)},
        {"seconds", offsetof(hct_timing_res_t, seconds)},
    }, ints[] = {
        {"samples", offsetof(hct_timing_res_t, s.n)},
        {"rounds", offsetof(hct_timing_res_t, rounds)},
        {"converged", offsetof(hct_timing_res_t, converged)},
        {"pruned", offsetof(hct_timing_res_t, pruned)},
        {"throttled", offsetof(hct_timing_res_t, throttled)},
        {"clock_checked", offsetof(hct_timing_res_t, clock_checked)},
    };
    for (size_t j = 0; j < HCT_ARRAY_SIZE(reals); j++)
      if (hct__json_double_value(json_object_get(r, reals[j].key),
                                 (double *)((char *)t + reals[j].off)) != 0)
        *(double *)((char *)t + reals[j].off) = NAN;
    for (size_t j = 0; j < HCT_ARRAY_SIZE(ints); j++)
      *(int *)((char *)t + ints[j].off) = (int)json_integer_value(json_object_get(r, ints[j].key));
    const char *err = json_string_value(json_object_get(r, "error"));
    if (err != NULL) {
      t->err = hct_err_from_name(err);
      const char *msg = json_string_value(json_object_get(r, "message"));
      hct__strlcpy(t->errmsg, msg ? msg : err, sizeof t->errmsg);
    }
  }
  json_decref(reply);
  return rc;
}
