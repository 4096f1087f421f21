/*
 * server.c: hctuned, the daemon engines ask which variant to run.
 *
 * One libuv loop thread does everything: it accepts on a Unix socket, reads
 * one JSON request per line, answers from an in-memory snapshot of the DB's
 * decisions (daemon/index.c), polls `PRAGMA data_version` to reload that
 * snapshot when another process commits, and runs probes as child
 * processes whose output it streams back.  Nothing a client sends can stop
 * the loop: every bad request gets an error reply on its own connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <uv.h>

#include "daemon.h"
#include "jit.h"

/* A client that stops reading its replies is dropped once this much waits
 * to be written to it, so it cannot make the daemon grow without bound. */
#define MAX_QUEUED (32u << 20)
/* Ops whose manifests are kept in memory (each is ~0.6 MB). */
#define MAX_OPS 8
/* Longest line taken from a probe's output. */
#define MAX_PROBE_LINE (1u << 20)
/* (op, card) pairs remembered per connection for the first-answer log. */
#define MAX_SEEN 64

typedef struct daemon_s daemon_t;

typedef struct conn_s {
  uv_pipe_t pipe;
  daemon_t *d;
  uint64_t serial;
  char *buf;
  size_t len, cap;
  uid_t uid;
  gid_t gid;
  pid_t pid;
  int closing;  /* uv_close called */
  int draining; /* an over-long line: replying, then closing */
  uint64_t seen[MAX_SEEN];
  int n_seen;
  struct conn_s *prev, *next;
} conn_t;

typedef struct linebuf_s {
  char *buf;
  size_t len, cap;
} linebuf_t;

typedef struct probe_s {
  uv_process_t proc;
  uv_pipe_t out, err;
  daemon_t *d;
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
  struct probe_s *next;
} probe_t;

typedef struct op_cache_s {
  char name[32];
  hct_op_t *op;
} op_cache_t;

struct daemon_s {
  uv_loop_t loop;
  uv_pipe_t server;
  uv_timer_t poll;
  uv_signal_t sig[2];
  int server_open;
  char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  char db_path[PATH_MAX];
  char kernels_dir[PATH_MAX];
  char admin_group[64];
  int have_admin_gid;
  gid_t admin_gid;
  hct_db_t *db;
  int64_t data_version;
  hct_index_t *ix;
  op_cache_t ops[MAX_OPS];
  int n_ops;
  conn_t *conns;
  int n_conns;
  uint64_t next_serial;
  probe_t *probes;
  int n_probes;
  uint64_t requests, reloads;
  int64_t started_at;
  uint64_t started_ns;
  int stopping;
  int poll_failing;
};

typedef int (*handler_t)(conn_t *c, hct_req_t *r);

/* Puts `prefix: ` before this thread's error message.  hct__error cannot
 * take hct_last_error() as an argument: it writes that same buffer. */
static int error_prefixed(int code, const char *prefix) {
  char why[1024];
  hct__strlcpy(why, hct_last_error(), sizeof why);
  return hct__error(code, "%s: %s", prefix, why);
}

static void conn_close(conn_t *c);

/* ---- writing replies ----------------------------------------------------- */

typedef struct write_s {
  uv_write_t req;
  conn_t *c;
  char data[];
} write_t;

static void on_write(uv_write_t *req, int status) {
  write_t *w = (write_t *)req;
  conn_t *c = w->c;
  free(w);
  if (status < 0 && status != UV_ECANCELED && !c->closing) conn_close(c);
}

/* Sends `n` bytes that end with a newline.  Tries the write at once, which
 * is what usually happens with a small reply, and queues what is left. */
static void conn_send(conn_t *c, const char *s, size_t n) {
  if (c->closing) return;
  uv_stream_t *st = (uv_stream_t *)&c->pipe;
  uv_buf_t b = uv_buf_init((char *)s, (unsigned)n);
  int sent = uv_try_write(st, &b, 1);
  if (sent == (int)n) return;
  if (sent < 0 && sent != UV_EAGAIN) {
    conn_close(c);
    return;
  }
  if (sent < 0) sent = 0;
  if (uv_stream_get_write_queue_size(st) + n > MAX_QUEUED) {
    hct__log(HCT_LOG_WARN, "client pid %d does not read its replies: dropped", (int)c->pid);
    conn_close(c);
    return;
  }
  write_t *w = malloc(sizeof *w + n - (size_t)sent);
  if (w == NULL) {
    conn_close(c);
    return;
  }
  w->c = c;
  memcpy(w->data, s + sent, n - (size_t)sent);
  uv_buf_t rest = uv_buf_init(w->data, (unsigned)(n - (size_t)sent));
  if (uv_write(&w->req, st, &rest, 1, on_write) < 0) {
    free(w);
    conn_close(c);
  }
}

/* Writes `body` (a JSON object text) with "id" spliced in first: the
 * cached replies of decisions are rendered once without it.  `id` is the
 * request's id as JSON text, "" or NULL for none. */
static void reply_body(conn_t *c, const char *id, const char *body, size_t len) {
  char small[4096];
  size_t idlen = id != NULL ? strlen(id) : 0;
  size_t n = len + (idlen ? idlen + 6 : 0) + 1;
  char *out = n <= sizeof small ? small : malloc(n);
  if (out == NULL) {
    conn_close(c);
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

/* Writes a reply object (stolen). */
static void reply_json(conn_t *c, const char *id, json_t *obj) {
  char *s = obj != NULL ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
  json_decref(obj);
  if (s == NULL) {
    static const char oom[] =
        "{\"ok\":false,\"error\":{\"code\":\"ENOMEM\",\"message\":\"daemon out of memory\"}}";
    reply_body(c, id, oom, sizeof oom - 1);
    return;
  }
  reply_body(c, id, s, strlen(s));
  free(s);
}

static void reply_error(conn_t *c, const char *id, int code, const char *msg) {
  reply_json(c, id,
             json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "code", hct_err_name(code),
                       "message", msg));
}

/* ---- snapshot and manifests ---------------------------------------------- */

static int reload(daemon_t *d) {
  hct_index_t *ix;
  int64_t v = 0;
  int rc = hct__db_data_version(d->db, &v);
  if (rc >= 0) rc = hct__index_load(d->db, &ix);
  if (rc < 0) {
    hct__log(HCT_LOG_ERROR, "cannot reload decisions (keeping the old ones): %s", hct_last_error());
    return rc;
  }
  hct__index_free(d->ix);
  d->ix = ix;
  d->data_version = v;
  d->reloads++;
  return 0;
}

/* The manifest of `name`, loaded once.  NULL with the error recorded when
 * the op has none, or is a self-test op: those exist to exercise the tuner
 * and are never offered to engines. */
static const hct_op_t *op_check(const hct_op_t *op, const char *name) {
  if (op != NULL && op->selftest) {
    hct__error(HCT_ENOENT, "op '%s': a self-test op, never offered to engines", name);
    return NULL;
  }
  return op;
}

static const hct_op_t *op_load(daemon_t *d, const char *name) {
  for (int i = 0; i < d->n_ops; i++)
    if (strcmp(d->ops[i].name, name) == 0) return d->ops[i].op;
  if (d->kernels_dir[0] == '\0') {
    hct__error(HCT_ENOENT, "op '%s': no kernel templates folder", name);
    return NULL;
  }
  hct_op_t *op;
  int rc = hct__manifest_load(d->kernels_dir, name, &op);
  if (rc < 0) return NULL;
  if (d->n_ops == MAX_OPS) { /* the oldest goes: ops are few in practice */
    hct__manifest_free(d->ops[0].op);
    memmove(&d->ops[0], &d->ops[1], sizeof d->ops[0] * (MAX_OPS - 1));
    d->n_ops--;
  }
  hct__strlcpy(d->ops[d->n_ops].name, name, sizeof d->ops[0].name);
  d->ops[d->n_ops++].op = op;
  return op;
}

static const hct_op_t *op_get(daemon_t *d, const char *name) {
  return op_check(op_load(d, name), name);
}

static const hct_variant_t *op_baseline(const hct_op_t *op) {
  for (int i = 0; i < op->n_variants; i++)
    if (op->variants[i].parity == HCT_PARITY_BASELINE) return &op->variants[i];
  return NULL;
}

/* The first parameter point of v whose constraints hold at T.  Constraints
 * that need the card's figures (SMEM_OPTIN ...) cannot be told here and
 * count as holding. */
static void default_params(const hct_op_t *op, const hct_variant_t *v, int tokens, char *buf,
                           size_t len) {
  hct_point_t pts[64];
  int n = hct__param_points(v, pts, (int)HCT_ARRAY_SIZE(pts));
  hct__strlcpy(buf, "{}", len);
  for (int i = 0; i < n; i++) {
    hct_symtab_t syms;
    hct__point_symtab(op, v, &pts[i], &syms);
    hct__symtab_set(&syms, "T", tokens);
    int ok = 1;
    for (int k = 0; k < v->n_constraints && ok; k++) {
      int64_t val;
      if (hct__expr_eval(v->constraints[k], &syms, &val) == 0 && val == 0) ok = 0;
    }
    if (ok) {
      hct__point_json(v, &pts[i], buf, len);
      break;
    }
  }
  hct__error_clear();
}

/* ---- answering choose ---------------------------------------------------- */

typedef struct choice_s {
  const char *device;            /* the card asked about, NULL when none */
  const hct_db_pin_t *pin;
  const hct_db_decision_t *dec;
  const char *body;              /* rendered reply of dec, card's own */
  size_t body_len;
  int fleet;
  const char *base;              /* default: the baseline's name */
  char base_params[256];
  const char *model;             /* fleet: the model key matched */
} choice_t;

static const hct_db_decision_t *faster(const hct_db_decision_t *a, const hct_db_decision_t *b) {
  if (a == NULL) return b;
  if (b == NULL) return a;
  return b->median_us > 0 && b->median_us < a->median_us ? b : a;
}

/* Resolves a choose or module request: a live pin, else the card's own
 * decision, else one of a card of the same model, else the op's baseline.
 * "kl" may use either class: the DB keeps the best bitwise and the best of
 * all as separate decisions, so the faster of the two wins. */
static int resolve(daemon_t *d, const hct_req_t *r, choice_t *ch) {
  /* Decisions of a self-test op may sit in the database (a probe of it
   * records them like any other): they are never served. */
  const hct_op_t *raw = op_load(d, r->op);
  if (raw != NULL && op_check(raw, r->op) == NULL) return HCT_ENOENT;
  hct__error_clear();
  memset(ch, 0, sizeof *ch);
  int kl = strcmp(r->parity, "kl") == 0;
  ch->device = r->device != NULL ? r->device : hct__index_default_device(d->ix);
  ch->pin = hct__index_pin(d->ix, ch->device, r->op, r->tokens, hct__unix_time());
  if (ch->pin != NULL) return 0;
  if (ch->device != NULL) {
    const char *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    const hct_db_decision_t *x =
        hct__index_decision(d->ix, ch->device, r->op, "bitwise", r->tokens, &b1, &l1);
    const hct_db_decision_t *y =
        kl ? hct__index_decision(d->ix, ch->device, r->op, "kl", r->tokens, &b2, &l2) : NULL;
    ch->dec = faster(x, y);
    if (ch->dec != NULL) {
      ch->body = ch->dec == x ? b1 : b2;
      ch->body_len = ch->dec == x ? l1 : l2;
      return 0;
    }
  }
  const char *model = r->model;
  if (model == NULL && ch->device != NULL) {
    const hct_db_device_t *dev = hct__index_device(d->ix, ch->device);
    if (dev != NULL) model = dev->model_key;
    else if (strchr(ch->device, '|') != NULL) model = ch->device;
  }
  if (model != NULL) {
    const hct_db_decision_t *x = hct__index_fleet(d->ix, model, r->op, "bitwise", r->tokens);
    const hct_db_decision_t *y =
        kl ? hct__index_fleet(d->ix, model, r->op, "kl", r->tokens) : NULL;
    ch->dec = faster(x, y);
    if (ch->dec != NULL) {
      ch->fleet = 1;
      ch->model = model;
      return 0;
    }
  }
  const hct_op_t *op = op_get(d, r->op);
  if (op != NULL) {
    const hct_variant_t *v = op_baseline(op);
    if (v == NULL) return hct__error(HCT_EMANIFEST, "op '%s': its manifest has no baseline", r->op);
    ch->base = v->name;
    default_params(op, v, r->tokens, ch->base_params, sizeof ch->base_params);
    return 0;
  }
  /* No manifest here: the client's table still knows the safe answer. */
  ch->base = hct__builtin_baseline(r->op);
  if (ch->base == NULL) return hct__error(HCT_ENOENT, "op '%s': no decision and no manifest", r->op);
  hct__strlcpy(ch->base_params, "{}", sizeof ch->base_params);
  hct__error_clear();
  return 0;
}

static json_t *params_json(const char *text) {
  json_t *p = json_loads(text[0] ? text : "{}", 0, NULL);
  return p != NULL ? p : json_string(text);
}

static const char *variant_class(daemon_t *d, const char *op_name, const char *variant) {
  const hct_op_t *op = op_get(d, op_name);
  const hct_variant_t *v = op != NULL ? hct__variant_find(op, variant) : NULL;
  hct__error_clear();
  return v != NULL ? hct__parity_name(v->parity) : "";
}

/* The reply object of a choice that is not a cached card decision. */
static json_t *choice_json(daemon_t *d, const hct_req_t *r, const choice_t *ch) {
  if (ch->dec != NULL) return hct__decision_json(ch->dec, ch->fleet ? "fleet" : "probe");
  if (ch->pin != NULL) {
    const hct_db_pin_t *p = ch->pin;
    char at[40] = "", until[40] = "";
    hct__iso_time(p->created_at, at, sizeof at);
    if (p->until != 0) hct__iso_time(p->until, until, sizeof until);
    return json_pack("{s:b, s:s, s:o, s:s, s:s, s:s, s:s, s:[i,i], s:{s:s, s:o}}", "ok", 1,
                     "variant", p->variant, "params", params_json(p->params), "class",
                     variant_class(d, r->op, p->variant), "source", "pin", "template_hash", "",
                     "device", p->uuid, "tokens", p->tmin, p->tmax, "evidence", "pinned_at", at,
                     "until", p->until != 0 ? json_string(until) : json_null());
  }
  return json_pack("{s:b, s:s, s:o, s:s, s:s, s:s, s:o, s:[i,i], s:{}}", "ok", 1, "variant",
                   ch->base, "params", params_json(ch->base_params), "class", "baseline",
                   "source", "default", "template_hash", "", "device",
                   ch->device != NULL ? json_string(ch->device) : json_null(), "tokens",
                   r->tokens, r->tokens, "evidence");
}

static uint64_t pair_hash(const char *op, const char *dev) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = op; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  h = (h ^ 0x1f) * 1099511628211ull;
  for (const char *p = dev; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h;
}

/* "hc_read on GPU-8d1c... (NVIDIA H200): v3 for T=1-8, bitwise against v1" */
static void log_decision(daemon_t *d, const char *op, const char *device,
                         const hct_db_decision_t *dec, const char *how) {
  const hct_db_device_t *dev = hct__index_device(d->ix, device);
  const hct_op_t *o = op_get(d, op);
  const hct_variant_t *base = o != NULL ? op_baseline(o) : NULL;
  hct__error_clear();
  char name[160] = "";
  if (dev != NULL && dev->name[0]) snprintf(name, sizeof name, " (%s)", dev->name);
  hct__log(HCT_LOG_INFO, "%s on %s%s: %s for T=%d-%d, %s against %s%s", op, device, name,
           dec->variant, dec->tmin, dec->tmax, dec->variant_class,
           base != NULL ? base->name : "the baseline", how);
}

static void log_first_answer(conn_t *c, const hct_req_t *r, const choice_t *ch) {
  daemon_t *d = c->d;
  const char *dev = ch->device != NULL ? ch->device : "(no card)";
  uint64_t h = pair_hash(r->op, dev);
  for (int i = 0; i < c->n_seen; i++)
    if (c->seen[i] == h) return;
  if (c->n_seen == MAX_SEEN) return; /* a client asking about many cards: log the first */
  c->seen[c->n_seen++] = h;
  if (ch->dec != NULL) {
    char how[300] = "";
    if (ch->fleet) snprintf(how, sizeof how, ", from the fleet (%s)", ch->model);
    log_decision(d, r->op, dev, ch->dec, how);
  } else if (ch->pin != NULL) {
    hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d-%d, pinned", r->op, dev, ch->pin->variant,
             ch->pin->tmin, ch->pin->tmax);
  } else {
    hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d, the baseline (no decision)", r->op, dev,
             ch->base, r->tokens);
  }
}

static int req_choose(conn_t *c, hct_req_t *r) {
  choice_t ch;
  int rc = resolve(c->d, r, &ch);
  if (rc < 0) return rc;
  log_first_answer(c, r, &ch);
  if (ch.body != NULL && !ch.fleet) reply_body(c, r->id, ch.body, ch.body_len);
  else reply_json(c, r->id, choice_json(c->d, r, &ch));
  return 0;
}

/* ---- module -------------------------------------------------------------- */

/* Reads a decision's params text into a parameter point of v. */
static void params_point(const hct_variant_t *v, const char *params, hct_point_t *pt) {
  memset(pt, 0, sizeof *pt);
  json_t *j = json_loads(params, 0, NULL);
  for (int i = 0; i < v->n_params; i++) {
    json_t *x = json_object_get(j, v->params[i].name);
    pt->v[i] = json_is_integer(x) ? json_integer_value(x) : v->params[i].values[0];
  }
  json_decref(j);
}

static json_t *expr_value(const char *e, const hct_symtab_t *syms) {
  int64_t val;
  if (hct__expr_eval(e, syms, &val) < 0) {
    hct__error_clear();
    return json_null();
  }
  return json_integer(val);
}

/* Entry points and launch geometry of v at the decision's point: values
 * where they follow from T and the parameters, null where they need the
 * card's figures; the expressions are always there. */
static json_t *launches_json(const hct_op_t *op, const hct_variant_t *v, const char *params,
                             int tokens) {
  hct_point_t pt;
  hct_symtab_t syms;
  params_point(v, params, &pt);
  hct__point_symtab(op, v, &pt, &syms);
  hct__symtab_set(&syms, "T", tokens);
  json_t *arr = json_array();
  for (int i = 0; i < v->n_launches; i++) {
    const hct_launch_t *l = &v->launches[i];
    json_t *g = json_array(), *b = json_array(), *ge = json_array(), *be = json_array();
    for (int k = 0; k < 3; k++) {
      json_array_append_new(g, expr_value(l->grid[k], &syms));
      json_array_append_new(b, expr_value(l->block[k], &syms));
      json_array_append_new(ge, json_string(l->grid[k]));
      json_array_append_new(be, json_string(l->block[k]));
    }
    json_t *args = json_array();
    for (int k = 0; k < l->n_args; k++) json_array_append_new(args, json_string(l->args[k].text));
    json_array_append_new(arr, json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:s, s:o}", "entry",
                                         l->entry, "grid", g, "block", b, "smem",
                                         expr_value(l->smem, &syms), "grid_expr", ge,
                                         "block_expr", be, "smem_expr", l->smem, "args", args));
  }
  return arr;
}

static int req_module(conn_t *c, hct_req_t *r) {
  daemon_t *d = c->d;
  choice_t ch;
  int rc = resolve(d, r, &ch);
  if (rc < 0) return rc;
  if (ch.dec == NULL || ch.dec->binary_key[0] == '\0')
    return hct__error(HCT_ENOENT,
                      "module of '%s' for T=%d on '%s': the answer, %s %s, has no recorded "
                      "binary (probe the card first)",
                      r->op, r->tokens, ch.device != NULL ? ch.device : "(no card)",
                      ch.dec != NULL ? "decided" : ch.pin != NULL ? "pinned" : "baseline",
                      ch.dec != NULL ? ch.dec->variant : ch.pin != NULL ? ch.pin->variant : ch.base);
  void *image = NULL;
  size_t size = 0;
  int is_ptx = 0;
  char *log = NULL;
  rc = hct__db_binary_get(d->db, ch.dec->binary_key, &image, &size, &is_ptx, &log);
  free(log);
  if (rc < 0) {
    char what[200];
    snprintf(what, sizeof what, "module of '%s' %s: binary '%s'", r->op, ch.dec->variant,
             ch.dec->binary_key);
    return error_prefixed(rc, what);
  }
  size_t b64len;
  char *b64 = hct__base64_encode(image, size, &b64len);
  free(image);
  if (b64 == NULL) return hct__error(HCT_ENOMEM, "module of '%s': out of memory", r->op);
  const hct_op_t *op = op_get(d, r->op);
  const hct_variant_t *v = op != NULL ? hct__variant_find(op, ch.dec->variant) : NULL;
  hct__error_clear();
  json_t *launches = v != NULL ? launches_json(op, v, ch.dec->params, r->tokens) : json_null();
  json_t *obj = json_pack(
      "{s:b, s:s, s:o, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:{s:s, s:o, s:i, s:o}}", "ok", 1,
      "variant", ch.dec->variant, "params", params_json(ch.dec->params), "class",
      ch.dec->variant_class, "source", ch.fleet ? "fleet" : "probe", "device",
      ch.dec->keys.uuid, "binary_key", ch.dec->binary_key, "format", is_ptx ? "ptx" : "binary",
      "size", (json_int_t)size, "image", b64, "entries", "variant", ch.dec->variant, "params",
      params_json(ch.dec->params), "tokens", r->tokens, "launches", launches);
  free(b64);
  reply_json(c, r->id, obj);
  return 0;
}

/* ---- list, devices, status ----------------------------------------------- */

static json_t *pin_json(const hct_db_pin_t *p) {
  return json_pack("{s:s, s:s, s:[i,i], s:s, s:o, s:I, s:I}", "device", p->uuid, "op", p->op,
                   "tokens", p->tmin, p->tmax, "variant", p->variant, "params",
                   params_json(p->params), "until", (json_int_t)p->until, "created_at",
                   (json_int_t)p->created_at);
}

static int req_list(conn_t *c, hct_req_t *r) {
  int n, np;
  const hct_db_decision_t *dec = hct__index_decisions(c->d->ix, &n);
  const hct_db_pin_t *pins = hct__index_pins(c->d->ix, &np);
  json_t *arr = json_array(), *parr = json_array();
  for (int i = 0; i < n; i++) {
    if (r->device != NULL && strcmp(r->device, dec[i].keys.uuid) != 0) continue;
    if (r->op != NULL && strcmp(r->op, dec[i].op) != 0) continue;
    json_t *j = hct__decision_json(&dec[i], dec[i].source[0] ? dec[i].source : "probe");
    json_object_del(j, "ok");
    json_object_set_new(j, "op", json_string(dec[i].op));
    json_object_set_new(j, "parity", json_string(dec[i].parity));
    json_object_set_new(j, "model", json_string(dec[i].keys.model_key));
    json_array_append_new(arr, j);
  }
  for (int i = 0; i < np; i++) {
    if (r->device != NULL && strcmp(r->device, pins[i].uuid) != 0) continue;
    if (r->op != NULL && strcmp(r->op, pins[i].op) != 0) continue;
    json_array_append_new(parr, pin_json(&pins[i]));
  }
  reply_json(c, r->id, json_pack("{s:b, s:o, s:o}", "ok", 1, "decisions", arr, "pins", parr));
  return 0;
}

static int req_devices(conn_t *c, hct_req_t *r) {
  int n;
  const hct_db_device_t *dev = hct__index_devices(c->d->ix, &n);
  json_t *arr = json_array();
  for (int i = 0; i < n; i++) {
    json_t *fp = dev[i].fingerprint_json != NULL ? json_loads(dev[i].fingerprint_json, 0, NULL)
                                                 : NULL;
    json_array_append_new(
        arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:o}", "uuid", dev[i].uuid, "host",
                       dev[i].host, "model", dev[i].model_key, "name", dev[i].name, "arch",
                       dev[i].arch, "first_seen", (json_int_t)dev[i].first_seen, "last_seen",
                       (json_int_t)dev[i].last_seen, "fingerprint",
                       fp != NULL ? fp : json_null()));
  }
  reply_json(c, r->id, json_pack("{s:b, s:o}", "ok", 1, "devices", arr));
  return 0;
}

static int req_status(conn_t *c, hct_req_t *r) {
  daemon_t *d = c->d;
  int nd, np, nv;
  hct__index_decisions(d->ix, &nd);
  hct__index_pins(d->ix, &np);
  hct__index_devices(d->ix, &nv);
  json_t *probes = json_array();
  for (probe_t *p = d->probes; p != NULL; p = p->next)
    json_array_append_new(probes,
                          json_pack("{s:s, s:s, s:i, s:f}", "device", p->device, "op", p->op,
                                    "pid", p->proc.pid,
                                    "running_s", (hct__now_ns() - p->started_ns) / 1e9));
  reply_json(c, r->id,
             json_pack("{s:b, s:s, s:i, s:f, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, "
                       "s:o}",
                       "ok", 1, "version", HCT_VERSION_STRING, "pid", (int)getpid(), "uptime_s",
                       (hct__now_ns() - d->started_ns) / 1e9, "db", d->db_path, "socket",
                       d->socket_path, "kernels", d->kernels_dir, "decisions", nd, "pins", np,
                       "devices", nv, "clients", d->n_conns, "requests",
                       (json_int_t)d->requests, "reloads", (json_int_t)d->reloads,
                       "data_version", (json_int_t)d->data_version, "probes", probes));
  return 0;
}

/* ---- pin, unpin ---------------------------------------------------------- */

/* Pins are written through a connection of their own: the serving one is
 * read-only, so a daemon whose DB is not writable still serves. */
static int with_writable_db(daemon_t *d, hct_db_t **out) {
  int rc = hct__db_open(d->db_path, 0, out);
  if (rc < 0) return error_prefixed(rc, "cannot write pins");
  return 0;
}

static int req_pin(conn_t *c, hct_req_t *r) {
  daemon_t *d = c->d;
  const hct_op_t *op = op_get(d, r->op);
  if (op == NULL) return error_prefixed(HCT_ENOENT, "pin");
  if (hct__variant_find(op, r->variant) == NULL)
    return hct__error(HCT_ENOENT, "pin: op '%s' has no variant '%s'", r->op, r->variant);
  hct_db_pin_t p;
  memset(&p, 0, sizeof p);
  hct__strlcpy(p.uuid, r->device, sizeof p.uuid);
  hct__strlcpy(p.op, r->op, sizeof p.op);
  hct__strlcpy(p.variant, r->variant, sizeof p.variant);
  p.tmin = r->tmin > 0 ? r->tmin : 1;
  p.tmax = r->tmax > 0 ? r->tmax : HCT_MAX_TOKENS;
  p.until = r->until;
  p.created_at = hct__unix_time();
  if (r->params != NULL) {
    char *s = json_dumps((json_t *)r->params, JSON_COMPACT | JSON_SORT_KEYS);
    if (s == NULL || strlen(s) >= sizeof p.params) {
      free(s);
      return hct__error(HCT_EINVAL, "pin: field 'params' is longer than %zu bytes",
                        sizeof p.params - 1);
    }
    hct__strlcpy(p.params, s, sizeof p.params);
    free(s);
  } else {
    hct__strlcpy(p.params, "{}", sizeof p.params);
  }
  if (p.until != 0 && p.until <= p.created_at)
    return hct__error(HCT_ERANGE, "pin: 'until' %lld is in the past", (long long)p.until);
  hct_db_t *w;
  int rc = with_writable_db(d, &w);
  if (rc < 0) return rc;
  rc = hct__db_pin_add(w, &p);
  hct__db_close(w);
  if (rc < 0) return rc;
  reload(d);
  hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d-%d pinned by uid %u", p.op, p.uuid, p.variant,
           p.tmin, p.tmax, (unsigned)c->uid);
  reply_json(c, r->id, json_pack("{s:b, s:o}", "ok", 1, "pinned", pin_json(&p)));
  return 0;
}

static int req_unpin(conn_t *c, hct_req_t *r) {
  daemon_t *d = c->d;
  hct_db_t *w;
  int rc = with_writable_db(d, &w);
  if (rc < 0) return rc;
  int tmin = r->tmin > 0 ? r->tmin : 1, tmax = r->tmax > 0 ? r->tmax : HCT_MAX_TOKENS;
  rc = hct__db_pin_remove(w, r->device, r->op, tmin, tmax);
  hct__db_close(w);
  if (rc < 0) return rc;
  reload(d);
  hct__log(HCT_LOG_INFO, "%s on %s: %d pin(s) for T=%d-%d removed by uid %u", r->op, r->device,
           rc, tmin, tmax, (unsigned)c->uid);
  reply_json(c, r->id, json_pack("{s:b, s:i}", "ok", 1, "removed", rc));
  return 0;
}

/* ---- probe --------------------------------------------------------------- */

static conn_t *conn_by_serial(daemon_t *d, uint64_t serial) {
  for (conn_t *c = d->conns; c != NULL; c = c->next)
    if (c->serial == serial && !c->closing) return c;
  return NULL;
}

static void on_probe_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  probe_t *p = h->data;
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

static void probe_out_line(probe_t *p, char *line, size_t n) {
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
  conn_t *c = conn_by_serial(p->d, p->conn_serial);
  if (c != NULL) reply_json(c, p->id, json_pack("{s:b, s:o}", "ok", 1, "progress", j));
  else json_decref(j);
}

static void probe_err_line(probe_t *p, char *line, size_t n) {
  if (n == 0) return;
  snprintf(p->last_err, sizeof p->last_err, "%.*s", (int)n, line);
  hct__log(HCT_LOG_DEBUG, "probe %d: %s", p->proc.pid, p->last_err);
}

static void probe_handle_closed(uv_handle_t *h);

static void on_probe_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  probe_t *p = s->data;
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

/* Called once the process has exited and both pipes are closed. */
static void probe_finish(probe_t *p) {
  daemon_t *d = p->d;
  for (probe_t **pp = &d->probes; *pp != NULL; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  d->n_probes--;
  conn_t *c = conn_by_serial(d, p->conn_serial);
  /* A spawn that failed was answered by req_probe; a daemon stopping has
   * no one left to tell. */
  if (!p->spawn_failed && !d->stopping) reload(d);
  if (p->spawn_failed || d->stopping) {
    /* nothing to report */
  } else if (p->exit_status == 0 && p->term_signal == 0) {
    json_t *decs = json_array();
    int n;
    const hct_db_decision_t *dec = d->ix != NULL ? hct__index_decisions(d->ix, &n) : NULL;
    for (int i = 0; dec != NULL && i < n; i++) {
      if (strcmp(dec[i].keys.uuid, p->uuid[0] ? p->uuid : p->device) != 0) continue;
      if (p->op[0] && strcmp(dec[i].op, p->op) != 0) continue;
      char how[64];
      snprintf(how, sizeof how, " (%s parity, probe)", dec[i].parity);
      log_decision(d, dec[i].op, dec[i].keys.uuid, &dec[i], how);
      json_t *j = hct__decision_json(&dec[i], "probe");
      json_object_del(j, "ok");
      json_object_set_new(j, "op", json_string(dec[i].op));
      json_object_set_new(j, "parity", json_string(dec[i].parity));
      json_array_append_new(decs, j);
    }
    hct__log(HCT_LOG_INFO, "probe of %s on %s finished", p->op[0] ? p->op : "every op",
             p->device);
    if (c != NULL)
      reply_json(c, p->id,
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
    if (c != NULL) reply_error(c, p->id, p->error_code < 0 ? p->error_code : HCT_EWORKER, msg);
  }
  json_decref(p->result);
  free(p->out_lb.buf);
  free(p->err_lb.buf);
  free(p);
}

static void probe_handle_closed(uv_handle_t *h) {
  probe_t *p = h->data;
  if (--p->open_handles == 0) probe_finish(p);
}

static void on_probe_exit(uv_process_t *proc, int64_t status, int sig) {
  probe_t *p = proc->data;
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

static int req_probe(conn_t *c, hct_req_t *r) {
  daemon_t *d = c->d;
  for (probe_t *q = d->probes; q != NULL; q = q->next)
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

  probe_t *p = calloc(1, sizeof *p);
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
  uv_read_start((uv_stream_t *)&p->out, on_probe_alloc, on_probe_read);
  uv_read_start((uv_stream_t *)&p->err, on_probe_alloc, on_probe_read);
  hct__log(HCT_LOG_INFO, "probe of %s on %s started (pid %d) for uid %u",
           p->op[0] ? p->op : "every op", p->device, p->proc.pid, (unsigned)c->uid);
  return 0;
}

/* ---- requests ------------------------------------------------------------ */

static const struct {
  hct_verb_t verb;
  handler_t fn;
} handlers[] = {
    {HCT_REQ_CHOOSE, req_choose}, {HCT_REQ_LIST, req_list},   {HCT_REQ_DEVICES, req_devices},
    {HCT_REQ_STATUS, req_status}, {HCT_REQ_PROBE, req_probe}, {HCT_REQ_PIN, req_pin},
    {HCT_REQ_UNPIN, req_unpin},   {HCT_REQ_MODULE, req_module},
};

/* Whether the peer may run an admin verb; the error says why not. */
static int check_admin(conn_t *c, const char *verb) {
  daemon_t *d = c->d;
  if (c->uid == 0 || c->uid == geteuid()) return 0;
  if (d->have_admin_gid) {
    if (c->gid == d->admin_gid) return 0;
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(c->uid, &pw, buf, sizeof buf, &res) == 0 && res != NULL) {
      gid_t groups[256];
      int ng = (int)HCT_ARRAY_SIZE(groups);
      if (getgrouplist(res->pw_name, res->pw_gid, groups, &ng) >= 0)
        for (int i = 0; i < ng; i++)
          if (groups[i] == d->admin_gid) return 0;
    }
    return hct__error(HCT_EPERM,
                      "'%s' is for uid %u (the daemon's), root, or group '%s': peer uid %u is "
                      "none of them",
                      verb, (unsigned)geteuid(), d->admin_group, (unsigned)c->uid);
  }
  return hct__error(HCT_EPERM,
                    "'%s' is for uid %u (the daemon's) or root, and no --admin-group is set: "
                    "peer uid %u is neither",
                    verb, (unsigned)geteuid(), (unsigned)c->uid);
}

static void handle_line(conn_t *c, const char *line, size_t n) {
  daemon_t *d = c->d;
  d->requests++;
  hct_req_t r;
  int rc = hct__req_parse(line, n, &r);
  if (rc >= 0 && (r.flags & HCT_REQ_ADMIN)) rc = check_admin(c, r.cmd);
  if (rc >= 0) {
    for (size_t i = 0; i < HCT_ARRAY_SIZE(handlers); i++)
      if (handlers[i].verb == r.verb) {
        hct__error_clear();
        rc = handlers[i].fn(c, &r);
        break;
      }
  }
  if (rc < 0) reply_error(c, r.id, rc, hct_last_error()[0] ? hct_last_error() : hct_strerror(rc));
  hct__req_free(&r);
}

/* ---- connections --------------------------------------------------------- */

static void on_conn_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  daemon_t *d = c->d;
  if (c->prev != NULL) c->prev->next = c->next;
  else d->conns = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  d->n_conns--;
  free(c->buf);
  free(c);
}

static void conn_close(conn_t *c) {
  if (c->closing) return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  conn_t *c = h->data;
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
  conn_t *c = req->handle->data;
  free(req);
  conn_close(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn_t *c = s->data;
  if (nread < 0) {
    conn_close(c);
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
    if (k < n) handle_line(c, c->buf + start, n);
    start = i + 1;
  }
  if (c->closing) return;
  memmove(c->buf, c->buf + start, c->len - start);
  c->len -= start;
  if (c->len == HCT_MAX_LINE + 1) {
    char msg[128];
    snprintf(msg, sizeof msg, "request line longer than %d bytes: closing the connection",
             HCT_MAX_LINE);
    reply_error(c, NULL, HCT_ETOOLONG, msg);
    c->draining = 1;
    uv_read_stop(s);
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req == NULL || uv_shutdown(req, s, on_shutdown) < 0) {
      free(req);
      conn_close(c);
    }
  }
}

static void on_connection(uv_stream_t *server, int status) {
  daemon_t *d = server->data;
  if (status < 0) {
    hct__log(HCT_LOG_WARN, "accept on '%s': %s", d->socket_path, uv_strerror(status));
    return;
  }
  conn_t *c = calloc(1, sizeof *c);
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
    conn_close(c);
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

/* ---- start and stop ------------------------------------------------------ */

static void on_poll(uv_timer_t *t) {
  daemon_t *d = t->data;
  int64_t v;
  if (hct__db_data_version(d->db, &v) < 0) {
    /* Said once, not twice a second, until it works again. */
    if (!d->poll_failing) hct__log(HCT_LOG_WARN, "cannot poll the database: %s", hct_last_error());
    d->poll_failing = 1;
    return;
  }
  if (d->poll_failing) hct__log(HCT_LOG_INFO, "database '%s' can be polled again", d->db_path);
  d->poll_failing = 0;
  if (v == d->data_version) return;
  if (reload(d) == 0) {
    int n;
    hct__index_decisions(d->ix, &n);
    hct__log(HCT_LOG_INFO, "database changed: %d decisions loaded", n);
  }
}

static void close_walk(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) return;
  daemon_t *d = arg;
  if (h->type == UV_NAMED_PIPE && h->data != NULL && h != (uv_handle_t *)&d->server) {
    /* Connections and probe pipes close through their own paths. */
    for (conn_t *c = d->conns; c != NULL; c = c->next)
      if (h == (uv_handle_t *)&c->pipe) {
        conn_close(c);
        return;
      }
    for (probe_t *p = d->probes; p != NULL; p = p->next)
      if (h == (uv_handle_t *)&p->out || h == (uv_handle_t *)&p->err) {
        uv_read_stop((uv_stream_t *)h);
        uv_close(h, probe_handle_closed);
        return;
      }
  }
  if (h->type == UV_PROCESS) {
    /* A probe still running is left to finish its run on its own (it was
     * sent SIGTERM); its handle goes with the loop. */
    uv_close(h, probe_handle_closed);
    return;
  }
  uv_close(h, NULL);
}

static void on_signal(uv_signal_t *s, int signum) {
  daemon_t *d = s->data;
  if (d->stopping) return;
  d->stopping = 1;
  hct__log(HCT_LOG_INFO, "signal %d: stopping, removing '%s'", signum, d->socket_path);
  unlink(d->socket_path);
  for (probe_t *p = d->probes; p != NULL; p = p->next) uv_process_kill(&p->proc, SIGTERM);
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

static int open_db(daemon_t *d) {
  struct stat st;
  /* The daemon may start before any probe: create an empty DB then. */
  if (stat(d->db_path, &st) != 0 && errno == ENOENT) {
    hct_db_t *w;
    int rc = hct__db_open(d->db_path, 0, &w);
    if (rc < 0) return rc;
    hct__db_close(w);
  }
  int rc = hct__db_open(d->db_path, HCT_DB_READONLY, &d->db);
  if (rc < 0) return rc;
  return reload(d);
}

static int start(daemon_t *d, const hct_daemon_opts_t *o) {
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
  if ((rc = open_db(d)) < 0) return rc;
  if ((rc = socket_check(d->socket_path)) < 0) return rc;
  if (hct__mkdir_parents(d->socket_path) < 0)
    return error_prefixed(HCT_EIO, "cannot make the socket's folder");

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
  if ((rc = uv_listen((uv_stream_t *)&d->server, SOMAXCONN, on_connection)) < 0) {
    unlink(d->socket_path);
    return hct__error(HCT_EIO, "cannot listen on '%s': %s", d->socket_path, uv_strerror(rc));
  }
  int poll_ms = o->poll_ms > 0 ? o->poll_ms : 500;
  uv_timer_init(&d->loop, &d->poll);
  d->poll.data = d;
  uv_timer_start(&d->poll, on_poll, (uint64_t)poll_ms, (uint64_t)poll_ms);
  int sigs[2] = {SIGTERM, SIGINT};
  for (int i = 0; i < 2; i++) {
    uv_signal_init(&d->loop, &d->sig[i]);
    d->sig[i].data = d;
    uv_signal_start(&d->sig[i], on_signal, sigs[i]);
  }
  return 0;
}

int hct__daemon_run(const hct_daemon_opts_t *opts) {
  daemon_t *d = calloc(1, sizeof *d);
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
  for (int i = 0; i < d->n_ops; i++) hct__manifest_free(d->ops[i].op);
  hct__index_free(d->ix);
  if (d->db != NULL) hct__db_close(d->db);
  free(d);
  return rc;
}
