/*
 * probe.c: the probe supervisor.  A probe (verb `probe`) runs as a child
 * process, `hctune probe --json ...` beside this executable, so a GPU
 * fault or a hang costs that process, never the daemon.  Its stdout lines
 * go back to the asking connection as progress replies; its exit ends the
 * request with the decisions it recorded (read back after a reload) or
 * with its error.  Loop thread only.
 */
#include <limits.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

/* Longest line taken from a probe's output. */
#define MAX_PROBE_LINE (1u << 20)

typedef struct linebuf_s {
  char *buf;
  size_t len, cap;
} linebuf_t;

struct hct_probe_s {
  uv_process_t proc;
  uv_pipe_t out, err;
  hct_daemon_t *d;
  uint64_t conn_serial; /* the asking connection; 0 once it is gone */
  char id[HCT_ID_TEXT];
  char device[64], op[32];
  linebuf_t out_lb, err_lb;
  json_t *result;        /* the last {"event":"result"} line */
  char last_err[512];    /* the last line it wrote to stderr */
  char uuid[64];         /* the card's UUID, from the result line */
  int error_code;        /* from an {"event":"error"} line, 0 when none */
  char error_msg[512];
  int open_handles;
  int spawn_failed;
  int64_t exit_status;
  int term_signal;
  uint64_t started_ns;
  hct_dbjob_t refresh;   /* the snapshot refresh after it exited */
  struct hct_probe_s *next;
};

static void on_probe_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  hct_probe_t *p = h->data;
  linebuf_t *lb = h == (uv_handle_t *)&p->out ? &p->out_lb : &p->err_lb;
  if (lb->cap - lb->len < 4096) {
    size_t cap = lb->cap ? lb->cap * 2 : 8192;
    char *nb = realloc(lb->buf, cap);
    if (nb == NULL) {
      buf->base = NULL;
      buf->len = 0;
      return;
    }
    lb->buf = nb;
    lb->cap = cap;
  }
  buf->base = lb->buf + lb->len;
  buf->len = lb->cap - lb->len;
}

static void probe_out_line(hct_probe_t *p, char *line, size_t n) {
  json_t *j = json_loadb(line, n, 0, NULL);
  if (j == NULL) j = json_stringn(line, n);
  if (j == NULL) return;
  const char *ev = json_string_value(json_object_get(j, "event"));
  if (ev != NULL && strcmp(ev, "result") == 0) {
    json_decref(p->result);
    p->result = json_incref(j);
    /* The probe names the card by UUID even when asked by index. */
    const char *uuid = json_string_value(json_object_get(j, "device"));
    if (uuid != NULL) hct__strlcpy(p->uuid, uuid, sizeof p->uuid);
  } else if (ev != NULL && strcmp(ev, "error") == 0) {
    /* `hctune probe --json` ends a failure with its error: the reply
     * carries that code and message rather than a bare exit status. */
    const char *code = json_string_value(json_object_get(j, "code"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    if (code != NULL) p->error_code = hct_err_from_name(code);
    if (msg != NULL) snprintf(p->error_msg, sizeof p->error_msg, "%s", msg);
  }
  hct_conn_t *c = hct__conn_by_serial(p->d, p->conn_serial);
  if (c != NULL) hct__reply_json(c, p->id, json_pack("{s:b, s:o}", "ok", 1, "progress", j));
  else json_decref(j);
}

static void probe_err_line(hct_probe_t *p, char *line, size_t n) {
  if (n == 0) return;
  snprintf(p->last_err, sizeof p->last_err, "%.*s", (int)n, line);
  hct__log(HCT_LOG_DEBUG, "probe %d: %s", p->proc.pid, p->last_err);
}

static void probe_handle_closed(uv_handle_t *h);

static void on_probe_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  hct_probe_t *p = s->data;
  int is_out = s == (uv_stream_t *)&p->out;
  linebuf_t *lb = is_out ? &p->out_lb : &p->err_lb;
  if (nread < 0) {
    /* A last line without its newline still counts. */
    if (lb->len > 0) (is_out ? probe_out_line : probe_err_line)(p, lb->buf, lb->len);
    lb->len = 0;
    uv_close((uv_handle_t *)s, probe_handle_closed);
    return;
  }
  lb->len += (size_t)nread;
  size_t start = 0;
  for (size_t i = lb->len - (size_t)nread; i < lb->len; i++) {
    if (lb->buf[i] != '\n') continue;
    size_t n = i - start;
    if (n > 0 && lb->buf[start + n - 1] == '\r') n--;
    (is_out ? probe_out_line : probe_err_line)(p, lb->buf + start, n);
    start = i + 1;
  }
  memmove(lb->buf, lb->buf + start, lb->len - start);
  lb->len -= start;
  /* A probe writing without newlines is passed on in pieces rather than
   * held without bound. */
  if (lb->len >= MAX_PROBE_LINE) {
    (is_out ? probe_out_line : probe_err_line)(p, lb->buf, lb->len);
    lb->len = 0;
  }
}

static void probe_free(hct_probe_t *p) {
  json_decref(p->result);
  free(p->out_lb.buf);
  free(p->err_lb.buf);
  free(p);
}

/* The probe's end, reported to its asker once the snapshot holding what it
 * recorded is in place (the lane's refresh came back). */
static void probe_report(hct_dbjob_t *j, int rc) {
  hct_probe_t *p = (hct_probe_t *)((char *)j - offsetof(hct_probe_t, refresh));
  hct_daemon_t *d = p->d;
  hct_conn_t *c = hct__conn_by_serial(d, p->conn_serial);
  if (d->stopping) {
    /* no one left to tell */
  } else if (p->exit_status == 0 && p->term_signal == 0) {
    json_t *decs = json_array();
    int n;
    const hct_db_decision_t *dec = hct__index_decisions(d->ix, &n);
    for (int i = 0; i < n; i++) {
      if (strcmp(dec[i].keys.uuid, p->uuid[0] ? p->uuid : p->device) != 0) continue;
      if (p->op[0] && strcmp(dec[i].op, p->op) != 0) continue;
      char how[64];
      snprintf(how, sizeof how, " (%s parity, probe)", dec[i].parity);
      hct__log_decision(d, dec[i].op, dec[i].keys.uuid, &dec[i], how);
      json_t *jd = hct__decision_json(&dec[i], hct_source_name(HCT_SOURCE_PROBE));
      json_object_del(jd, "ok");
      json_object_set_new(jd, "op", json_string(dec[i].op));
      json_object_set_new(jd, "parity", json_string(dec[i].parity));
      json_array_append_new(decs, jd);
    }
    hct__log(HCT_LOG_INFO, "probe of %s on %s finished", p->op[0] ? p->op : "every op",
             p->device);
    if (c != NULL)
      hct__reply_json(c, p->id,
                      json_pack("{s:b, s:b, s:o, s:o}", "ok", 1, "done", 1, "result",
                                p->result != NULL ? json_incref(p->result) : json_null(),
                                "decisions", decs));
    else
      json_decref(decs);
  } else {
    char msg[800];
    if (p->term_signal != 0)
      snprintf(msg, sizeof msg, "probe of '%s' on '%s' killed by signal %d%s%s",
               p->op[0] ? p->op : "every op", p->device, p->term_signal,
               p->last_err[0] ? ": " : "", p->last_err);
    else
      snprintf(msg, sizeof msg, "probe of '%s' on '%s' exited with status %lld%s%s",
               p->op[0] ? p->op : "every op", p->device, (long long)p->exit_status,
               p->last_err[0] ? ": " : "", p->last_err);
    if (p->error_code < 0 && p->error_msg[0] != '\0')
      snprintf(msg, sizeof msg, "probe of '%s' on '%s': %s", p->op[0] ? p->op : "every op",
               p->device, p->error_msg);
    hct__log(HCT_LOG_WARN, "%s", msg);
    if (c != NULL) hct__reply_error(c, p->id, p->error_code < 0 ? p->error_code : HCT_EWORKER, msg);
  }
  if (c != NULL) {
    c->n_probes--;
    hct__conn_update(c);
  }
  probe_free(p);
}

/* Called once the process has exited and both pipes are closed. */
static void probe_finish(hct_probe_t *p) {
  hct_daemon_t *d = p->d;
  for (hct_probe_t **pp = &d->probes; *pp != NULL; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  d->n_probes--;
  /* A spawn that failed was answered by req_probe. */
  if (p->spawn_failed) {
    probe_free(p);
    return;
  }
  p->refresh.done = probe_report;
  hct__snapshot_submit(d, &p->refresh);
}

static void probe_handle_closed(uv_handle_t *h) {
  hct_probe_t *p = h->data;
  if (--p->open_handles == 0) probe_finish(p);
}

static void on_probe_exit(uv_process_t *proc, int64_t status, int sig) {
  hct_probe_t *p = proc->data;
  p->exit_status = status;
  p->term_signal = sig;
  uv_close((uv_handle_t *)proc, probe_handle_closed);
}

/* The hctune next to this executable, or $HCTUNE_PROBE_CMD (tests run a
 * fake probe through it). */
static int probe_command(char *buf, size_t len) {
  const char *env = getenv("HCTUNE_PROBE_CMD");
  if (env != NULL && env[0] != '\0') {
    hct__strlcpy(buf, env, len);
    return 0;
  }
  char exe[PATH_MAX];
  int rc = hct__exe_path(exe, sizeof exe);
  if (rc != 0) return rc;
  char *slash = strrchr(exe, '/');
  if (slash != NULL) *slash = '\0';
  if ((size_t)snprintf(buf, len, "%s/hctune", exe) >= len)
    return hct__error(HCT_ERANGE, "hctune beside '%s': path too long", exe);
  return 0;
}

int hct__req_probe(hct_conn_t *c, hct_req_t *r) {
  hct_daemon_t *d = c->d;
  for (hct_probe_t *q = d->probes; q != NULL; q = q->next)
    if (strcmp(q->device, r->device) == 0)
      return hct__error(HCT_EBUSY, "probe of '%s': a probe of that card is running (pid %d)",
                        r->device, q->proc.pid);
  char cmd[PATH_MAX];
  int rc = probe_command(cmd, sizeof cmd);
  if (rc < 0) return rc;
  char tokens[32];
  if (r->tokens_text != NULL) hct__strlcpy(tokens, r->tokens_text, sizeof tokens);
  else snprintf(tokens, sizeof tokens, "%d-%d", r->tmin, r->tmax);
  char *args[16];
  int na = 0;
  args[na++] = cmd;
  args[na++] = "probe";
  args[na++] = "--json";
  args[na++] = "--device";
  args[na++] = (char *)r->device;
  if (r->op != NULL) {
    args[na++] = "--op";
    args[na++] = (char *)r->op;
  }
  if (r->tmin > 0) {
    args[na++] = "--tokens";
    args[na++] = tokens;
  }
  args[na++] = "--db";
  args[na++] = d->db_path;
  args[na] = NULL;

  hct_probe_t *p = calloc(1, sizeof *p);
  if (p == NULL) return hct__error(HCT_ENOMEM, "probe: out of memory");
  p->d = d;
  p->conn_serial = c->serial;
  memcpy(p->id, r->id, sizeof p->id);
  hct__strlcpy(p->device, r->device, sizeof p->device);
  if (r->op != NULL) hct__strlcpy(p->op, r->op, sizeof p->op);
  p->started_ns = hct__now_ns();
  uv_pipe_init(&d->loop, &p->out, 0);
  uv_pipe_init(&d->loop, &p->err, 0);
  p->out.data = p->err.data = p->proc.data = p;
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_IGNORE},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&p->out},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&p->err},
  };
  uv_process_options_t o = {.exit_cb = on_probe_exit, .file = cmd, .args = args,
                            .stdio_count = 3, .stdio = stdio};
  rc = uv_spawn(&d->loop, &p->proc, &o);
  if (rc < 0) {
    /* The handles still have to be closed on failure (libuv); nothing is
     * replied from probe_finish, the error is below. */
    p->spawn_failed = 1;
    p->open_handles = 3;
    p->next = d->probes;
    d->probes = p;
    d->n_probes++;
    uv_close((uv_handle_t *)&p->proc, probe_handle_closed);
    uv_close((uv_handle_t *)&p->out, probe_handle_closed);
    uv_close((uv_handle_t *)&p->err, probe_handle_closed);
    return hct__error(HCT_EWORKER, "cannot run probe '%s': %s", cmd, uv_strerror(rc));
  }
  p->open_handles = 3;
  p->next = d->probes;
  d->probes = p;
  d->n_probes++;
  c->n_probes++;
  uv_read_start((uv_stream_t *)&p->out, on_probe_alloc, on_probe_read);
  uv_read_start((uv_stream_t *)&p->err, on_probe_alloc, on_probe_read);
  hct__log(HCT_LOG_INFO, "probe of %s on %s started (pid %d) for uid %u",
           p->op[0] ? p->op : "every op", p->device, p->proc.pid, (unsigned)c->uid);
  return 0;
}

json_t *hct__probes_json(hct_daemon_t *d) {
  json_t *probes = json_array();
  for (hct_probe_t *p = d->probes; p != NULL; p = p->next)
    json_array_append_new(probes,
                          json_pack("{s:s, s:s, s:i, s:f}", "device", p->device, "op", p->op,
                                    "pid", p->proc.pid,
                                    "running_s", (hct__now_ns() - p->started_ns) / 1e9));
  return probes;
}

void hct__probes_stop(hct_daemon_t *d) {
  for (hct_probe_t *p = d->probes; p != NULL; p = p->next) uv_process_kill(&p->proc, SIGTERM);
}

int hct__probe_close_handle(hct_daemon_t *d, uv_handle_t *h) {
  if (h->type == UV_PROCESS) {
    /* A probe still running is left to finish its run on its own (it was
     * sent SIGTERM); its handle goes with the loop. */
    uv_close(h, probe_handle_closed);
    return 1;
  }
  for (hct_probe_t *p = d->probes; p != NULL; p = p->next)
    if (h == (uv_handle_t *)&p->out || h == (uv_handle_t *)&p->err) {
      uv_read_stop((uv_stream_t *)h);
      uv_close(h, probe_handle_closed);
      return 1;
    }
  return 0;
}
