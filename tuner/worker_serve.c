/*
 * worker_serve.c: the serving side of the worker process, the one that runs
 * candidates on a GPU for a probe (worker.h has the design and the
 * protocol; cli/cmd_worker.c is the thin command that calls
 * hct__worker_serve, as git's builtin/upload-pack.c calls upload_pack()).
 *
 * It reads one JSON request per line on stdin, looks its "cmd" up in the
 * table below, and writes one reply per line on stdout, echoing the id.
 * The requests are served by a file each (tuner/worker_load.c,
 * worker_check.c, worker_time.c, worker_verify.c) over what they share
 * (tuner/worker_state.c, tuner/worker_serve.h); hello, copy_bw and quit,
 * a few lines each, are here.
 * Nothing else may be written on stdout: logs go to stderr, which the
 * parent keeps the tail of for its messages.  It exits 0 on EOF or `quit`.
 * A sticky GPU error (a fault, a hang the driver noticed) poisons the
 * context until the process ends, so the reply says "fatal" and the worker
 * exits 1 without touching the GPU again; the parent starts a fresh one.
 *
 * Loop thread only: one request at a time, in order.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker_serve.h"

/* ---- requests ----------------------------------------------------------- */

static int req_hello(worker_t *W, json_t *req, json_t *reply) {
  json_object_set_new(reply, "pid", json_integer(getpid()));
  json_object_set_new(reply, "version", json_string(HCT_VERSION_STRING));
  return 0;
}

/* copy_bw: the card's copy rate (tuner/copy_bw.c), measured here where a
 * context is open and the card idle: the probe opens no card of its own
 * for it after its worker exits (issue 34). */
static int req_copy_bw(worker_t *W, json_t *req, json_t *reply) {
  hct__ws_inset_clear(W);
  hct__devpool_flush(&W->pool, W->gpu);
  double bw = 0;
  int rc = hct__copy_bw_on(W->gpu, &bw);
  if (rc == 0) json_object_set_new(reply, "bytes_per_s", hct__json_double(bw));
  return rc;
}

static int req_quit(worker_t *W, json_t *req, json_t *reply) {
  W->quit = 1;
  return 0;
}

/* ---- the loop --------------------------------------------------------------- */

enum { NEED_GPU = 1 };

static const struct {
  const char *cmd;
  int (*fn)(worker_t *W, json_t *req, json_t *reply);
  int flags;
} requests[] = {
    {"hello", req_hello, 0},          {"open", hct__ws_req_open, 0},
    {"load", hct__ws_req_load, NEED_GPU},     {"unload", hct__ws_req_unload, NEED_GPU},
    {"reference", hct__ws_req_reference, NEED_GPU},
    {"check", hct__ws_req_check, NEED_GPU},   {"time", hct__ws_req_time, NEED_GPU},
    {"verify", hct__ws_req_verify, NEED_GPU},
    {"copy_bw", req_copy_bw, NEED_GPU},
    {"quit", req_quit, 0},
};

/* The request's phases into its reply ("phase_ms", worker.h), when it
 * spent time in any. */
static void phase_reply(worker_t *W, json_t *reply) {
  json_t *ph = NULL;
  for (int k = 0; k < HCT_WP_N; k++) {
    if (!(W->phase[k] > 0)) continue;
    if (ph == NULL) ph = json_object();
    json_object_set_new(ph, hct__worker_phase_names[k], json_real(W->phase[k]));
  }
  if (ph != NULL) json_object_set_new(reply, "phase_ms", ph);
}

/* Answers one request line; returns 1 when the worker must exit after a
 * fatal error, 0 otherwise. */
static int serve_line(worker_t *W, const char *line) {
  json_error_t jerr;
  json_t *req = json_loads(line, 0, &jerr);
  json_t *reply = json_object();
  json_t *id = req ? json_object_get(req, "id") : NULL;
  json_object_set(reply, "id", id ? id : json_null());
  int rc;
  const char *cmd = req ? json_string_value(json_object_get(req, "cmd")) : NULL;
  if (req == NULL || !json_is_object(req)) {
    rc = hct__error(HCT_EPROTO, "request is not a JSON object: %s", req ? "other type" : jerr.text);
  } else if (cmd == NULL) {
    rc = hct__error(HCT_EINVAL, "request has no 'cmd'");
  } else {
    rc = hct__error(HCT_EINVAL, "'%s' is not a worker command", cmd);
    for (size_t i = 0; i < HCT_ARRAY_SIZE(requests); i++) {
      if (strcmp(requests[i].cmd, cmd) != 0) continue;
      hct__error_clear();
      /* 'verify' refers to the 'time' just before it; anything else
       * gives that allocation back. */
      if (requests[i].fn != hct__ws_req_verify && requests[i].fn != hct__ws_req_time && W->timed != NULL) {
        /* (A 'time' takes over what it can reuse, reuse_sets.) */
        hct__ws_timed_free(W, W->timed, 0);
        W->timed = NULL;
      }
      memset(W->phase, 0, sizeof W->phase);
      if (requests[i].fn == hct__ws_req_time && W->gpu != NULL) {
        /* A timing takes the card's memory by what is free (time_fit):
         * the checks' input set (never used after a timing: the probe's
         * next check draws another) and the pool's idle buffers go back. */
        hct__ws_inset_clear(W);
        hct__devpool_flush(&W->pool, W->gpu);
      }
      if ((requests[i].flags & NEED_GPU) && W->gpu == NULL)
        rc = hct__error(HCT_EINVAL, "'%s' needs 'open' first", cmd);
      else
        rc = requests[i].fn(W, req, reply);
      phase_reply(W, reply);
      break;
    }
  }
  int fatal = hct__ws_is_sticky(rc);
  json_object_set_new(reply, "ok", json_boolean(rc == 0));
  if (rc != 0) {
    json_object_set_new(reply, "error", json_string(hct_err_name(rc)));
    const char *msg = hct_last_error();
    json_object_set_new(reply, "message", json_string(msg && msg[0] ? msg : hct_strerror(rc)));
    if (fatal) json_object_set_new(reply, "fatal", json_true());
    hct__log(HCT_LOG_WARN, "worker: %s: %s", cmd ? cmd : "?", msg);
  }
  char *s = json_dumps(reply, JSON_COMPACT);
  if (s == NULL) {
    /* A reply jansson cannot write (bad UTF-8 in a message, say). */
    s = hct__asprintf("{\"id\":%lld,\"ok\":false,\"error\":\"EPROTO\",\"message\":\"reply not encodable\"}",
                      (long long)json_integer_value(id));
  }
  if (s != NULL) {
    fputs(s, stdout);
    fputc('\n', stdout);
  }
  fflush(stdout);
  free(s);
  json_decref(reply);
  json_decref(req);
  return fatal;
}

/*
 * Serves requests from stdin until EOF, `quit` or a sticky GPU error.
 * Returns 0, or HCT_EFAULT when a sticky error poisoned the context: then
 * nothing was released and the caller must leave at once (_exit), running
 * no exit handler that could touch the context.
 */
int hct__worker_serve(void) {
  worker_t W;
  memset(&W, 0, sizeof W);
  W.in.ref_id = -1;
  W.cands = calloc(MAX_CANDS, sizeof *W.cands);
  if (W.cands == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  char *line = NULL;
  size_t cap = 0;
  int fatal = 0;
  while (!W.quit && !fatal && getline(&line, &cap, stdin) > 0) fatal = serve_line(&W, line);
  free(line);
  if (fatal) {
    fflush(stdout);
    fflush(stderr);
    return HCT_EFAULT;
  }
  hct__ws_timed_free(&W, W.timed, 0);
  hct__ws_inset_clear(&W);
  if (W.gpu != NULL) hct__devpool_flush(&W.pool, W.gpu);
  hct__hostbuf_release(); /* unpinned while the GPU is still open */
  hct__hostbuf_pin(NULL, NULL, NULL);
  if (W.producer_loaded) hct__producer_unload(W.gpu, &W.producer);
  if (W.pcheck_state == 1) hct__pcheck_unload(W.gpu, &W.pcheck);
  for (int i = 0; i < MAX_CANDS; i++)
    if (W.cands[i].used) hct__run_unload(W.gpu, &W.cands[i].c);
  free(W.cands);
  if (W.gpu) hct__gpu_close(W.gpu);
  if (W.db) hct__db_close(W.db);
  for (int i = 0; i < W.n_ops; i++) {
    if (W.ops[i].ref_loaded) hct__run_unload(W.gpu, &W.ops[i].ref);
    hct__manifest_free(W.ops[i].op);
  }
  return 0;
}
