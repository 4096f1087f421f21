/*
 * multiprobe.c: `hctune probe --device all|LIST`: every card chosen probed
 * at once, one child probe process per card, after one compile per arch;
 * then the cards compared (tuner/agree.c).  The design is in
 * tuner/multiprobe.h.
 *
 * The path:
 *   cards resolved -> parent run begun -> `hctune compile --arch A` per
 *   arch (the DB's compile cache filled once for the host) -> one `hctune
 *   probe --device UUID --json --parent-run ID` per card, all at once, on
 *   a private uv loop -> their JSON lines read: progress shown per card,
 *   results and errors kept -> the agreement of the cards that decided ->
 *   parent run ended.
 *
 * Loop thread only (see multiprobe.h).
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "fleet.h"
#include "tuner.h"

extern char **environ;

/* ---- choosing the cards ------------------------------------------------- */

int hct__multi_spec(const char *spec) {
  return spec != NULL && (strcmp(spec, "all") == 0 || strchr(spec, ',') != NULL);
}

static int all_digits(const char *s) {
  if (*s == '\0') return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

static void card_from(hct_multi_card_t *c, const hct_device_t *d, int index) {
  memset(c, 0, sizeof *c);
  c->index = index;
  hct__strlcpy(c->uuid, d->uuid, sizeof c->uuid);
  hct__strlcpy(c->name, d->name, sizeof c->name);
  hct__strlcpy(c->arch, d->arch, sizeof c->arch);
  c->backend = (int)d->backend;
  hct__device_model_key(d, c->model_key, sizeof c->model_key);
}

int hct__multi_cards(const char *spec, hct_multi_card_t *cards, int max, int *n) {
  *n = 0;
  /* The list's own form first: its mistakes are said with or without a
   * driver. */
  if (strcmp(spec, "all") != 0)
    for (const char *p = spec;; p++) {
      size_t len = strcspn(p, ",");
      if (len == 0 || len >= 128)
        return hct__error(HCT_EINVAL, "device list '%s': %s item", spec,
                          len == 0 ? "an empty" : "a too long");
      p += len;
      if (*p == '\0') break;
    }
  hct_device_t *all = calloc(HCT_MULTI_MAX_CARDS, sizeof *all);
  if (all == NULL) return hct__error(HCT_ENOMEM, "out of memory listing cards");
  int na = hct__devices(all, HCT_MULTI_MAX_CARDS), rc = 0;
  if (na < 0) {
    free(all);
    return na;
  }
  if (strcmp(spec, "all") == 0) {
    if (na == 0) rc = hct__error(HCT_ENOENT, "device 'all': no cards found");
    for (int i = 0; rc == 0 && i < na && i < max; i++) card_from(&cards[(*n)++], &all[i], i);
    free(all);
    return rc;
  }
  for (const char *p = spec; rc == 0;) {
    size_t len = strcspn(p, ",");
    char item[128];
    memcpy(item, p, len);
    item[len] = '\0';
    hct_device_t d;
    if ((rc = hct__device_find(item, &d)) != 0) break;
    int index = -1;
    for (int i = 0; i < na; i++)
      if (strcmp(all[i].uuid, d.uuid) == 0) index = i;
    if (all_digits(item)) index = atoi(item);
    for (int k = 0; k < *n; k++)
      if (strcmp(cards[k].uuid, d.uuid) == 0)
        rc = hct__error(HCT_EINVAL, "device list '%s': card %s (%s) is named twice", spec,
                        d.uuid, item);
    if (rc == 0 && *n == max)
      rc = hct__error(HCT_ERANGE, "device list '%s': more than %d cards", spec, max);
    if (rc == 0) card_from(&cards[(*n)++], &d, index);
    if (p[len] == '\0') break;
    p += len + 1;
  }
  free(all);
  return rc;
}

/* ---- child processes -------------------------------------------------------- */

typedef struct multi_s multi_t;

typedef struct child_s {
  multi_t *M;
  hct_multi_card_t *card;    /* NULL: a compile child */
  char label[80];            /* "card 0", "compile sm_90" */
  uv_process_t proc;
  uv_pipe_t out, err;
  int handles;               /* open handles left to close */
  int closing;               /* uv_close called on them */
  int exited;
  int64_t exit_status;
  int term_signal;
  char *buf[2];              /* partial lines of stdout, stderr */
  size_t len[2], cap[2];
  char stage[32];            /* progress: the last stage shown */
  char errtail[512];         /* its last stderr line */
} child_t;

struct multi_s {
  const hct_multi_opts_t *o;
  const hct_probe_opts_t *p;
  uv_loop_t loop;
  uv_signal_t sigint, sigterm;
  child_t *kids;
  int n_kids;
  int interrupted;
  uint64_t t0;
  uint64_t compile_ns, agree_ns; /* the host's compile, the agreement */
};

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  b->base = malloc(suggested);
  b->len = b->base ? suggested : 0;
}

/* "hctune: x" -> "x": a child's own prefix is replaced by the card's. */
static const char *unprefixed(const char *line) {
  return strncmp(line, "hctune: ", 8) == 0 ? line + 8 : line;
}

static void on_json_line(child_t *k, const char *line) {
  multi_t *M = k->M;
  json_t *j = json_loads(line, 0, NULL);
  const char *ev = json_string_value(json_object_get(j, "event"));
  if (j == NULL || ev == NULL) {
    /* Not one of the probe's events: shown as it is. */
    if (!M->p->quiet) fprintf(stderr, "hctune: [%s] %s\n", k->label, line);
    json_decref(j);
    return;
  }
  hct_multi_card_t *c = k->card;
  if (strcmp(ev, "result") == 0) {
    c->decisions = (int)json_array_size(json_object_get(j, "decisions"));
    c->wall_s = json_real_value(json_object_get(j, "wall_s"));
    const char *rid = json_string_value(json_object_get(j, "run_id"));
    if (rid) hct__strlcpy(c->run_id, rid, sizeof c->run_id);
    /* Where its time went, kept for the summary (a breakdown too large
     * for the room is left out rather than cut). */
    char *b = json_object_get(j, "breakdown") ? json_dumps(json_object_get(j, "breakdown"), JSON_COMPACT) : NULL;
    if (b && strlen(b) < sizeof c->breakdown) hct__strlcpy(c->breakdown, b, sizeof c->breakdown);
    free(b);
  } else if (strcmp(ev, "error") == 0) {
    const char *msg = json_string_value(json_object_get(j, "message"));
    hct__strlcpy(c->error, msg ? msg : "error", sizeof c->error);
  }
  if (M->p->json) {
    /* Every card's events on one stream, each naming its card. */
    json_object_set_new(j, "card", json_integer(c->index));
    json_object_set_new(j, "uuid", json_string(c->uuid));
    char *s = json_dumps(j, JSON_COMPACT);
    if (s) printf("%s\n", s);
    fflush(stdout);
    free(s);
  } else if (!M->p->quiet && strcmp(ev, "progress") == 0) {
    /* One line per card per step (a check or timing pass at one T, a
     * fault, a skip); the compile's per-binary events (cache hits, after
     * the host's compile) once. */
    const char *stage = json_string_value(json_object_get(j, "stage"));
    int done = (int)json_integer_value(json_object_get(j, "done"));
    if (stage == NULL) stage = "?";
    if (strcmp(stage, "compile") != 0 || strcmp(k->stage, "compile") != 0) {
      fprintf(stderr, "hctune: [card %d] %s [%d/%d] %s\n", c->index, stage, done,
              (int)json_integer_value(json_object_get(j, "total")),
              json_string_value(json_object_get(j, "what")) ? json_string_value(json_object_get(j, "what")) : "");
      hct__strlcpy(k->stage, stage, sizeof k->stage);
    }
  } else if (!M->p->quiet && strcmp(ev, "compiled") == 0) {
    fprintf(stderr, "hctune: [card %d] %d binaries, %d from the cache, %d failed\n", c->index,
            (int)json_integer_value(json_object_get(j, "binaries")),
            (int)json_integer_value(json_object_get(j, "cache_hits")),
            (int)json_integer_value(json_object_get(j, "failed")));
  }
  json_decref(j);
}

static void on_line(child_t *k, int which, const char *line) {
  if (which == 0 && k->card != NULL) {
    on_json_line(k, line);
    return;
  }
  if (which != 1) return; /* a compile child's table goes unseen */
  hct__strlcpy(k->errtail, unprefixed(line), sizeof k->errtail);
  /* A card's warnings and errors always, as its own probe would say them;
   * a compile's notes and failures unless --quiet (each card's probe
   * records the failures). */
  if (k->card != NULL || !k->M->p->quiet)
    fprintf(stderr, "hctune: [%s] %s\n", k->label, unprefixed(line));
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b) {
  child_t *k = s->data;
  int which = s == (uv_stream_t *)&k->err;
  if (nread > 0) {
    size_t need = k->len[which] + (size_t)nread + 1;
    if (need > k->cap[which]) {
      size_t cap = need * 2;
      char *nb = realloc(k->buf[which], cap);
      if (nb != NULL) k->buf[which] = nb, k->cap[which] = cap;
    }
    if (need <= k->cap[which]) {
      memcpy(k->buf[which] + k->len[which], b->base, (size_t)nread);
      k->len[which] += (size_t)nread;
      k->buf[which][k->len[which]] = '\0';
      char *start = k->buf[which], *nl;
      while ((nl = strchr(start, '\n')) != NULL) {
        *nl = '\0';
        if (nl > start) on_line(k, which, start);
        start = nl + 1;
      }
      size_t rest = k->len[which] - (size_t)(start - k->buf[which]);
      memmove(k->buf[which], start, rest);
      k->len[which] = rest;
    }
  } else if (nread < 0) {
    if (k->len[which] > 0) {
      k->buf[which][k->len[which]] = '\0';
      on_line(k, which, k->buf[which]);
      k->len[which] = 0;
    }
    uv_read_stop(s);
  }
  free(b->base);
}

static void close_cb(uv_handle_t *h) {
  child_t *k = h->data;
  k->handles--;
}

static void exit_cb(uv_process_t *p, int64_t status, int sig) {
  child_t *k = p->data;
  k->exited = 1;
  k->exit_status = status;
  k->term_signal = sig;
  if (k->card) {
    k->card->end_ns = hct__now_ns();
    k->card->exit_status = (int)status;
    k->card->term_signal = sig;
  }
}

/* The environment of a child: ours, with `extra` ("NAME=value", NULL
 * ended) replacing the variables of the same names. */
static char **child_env(char *const *extra) {
  size_t n = 0, ne = 0;
  while (environ != NULL && environ[n] != NULL) n++;
  while (extra[ne] != NULL) ne++;
  char **env = calloc(n + ne + 1, sizeof *env);
  if (env == NULL) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int replaced = 0;
    for (size_t e = 0; e < ne; e++) {
      size_t len = strcspn(extra[e], "=") + 1;
      if (strncmp(environ[i], extra[e], len) == 0) replaced = 1;
    }
    if (!replaced) env[k++] = environ[i];
  }
  for (size_t e = 0; e < ne; e++) env[k++] = extra[e];
  return env;
}

static int spawn_child(multi_t *M, child_t *k, char **args, char *const *extra_env) {
  k->M = M;
  uv_pipe_init(&M->loop, &k->out, 0);
  uv_pipe_init(&M->loop, &k->err, 0);
  k->out.data = k->err.data = k->proc.data = k;
  k->handles = 2;
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&k->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&k->err;
  char **env = child_env(extra_env);
  if (env == NULL) return hct__error(HCT_ENOMEM, "out of memory starting '%s'", args[0]);
  uv_process_options_t po;
  memset(&po, 0, sizeof po);
  po.file = args[0];
  po.args = args;
  po.env = env;
  po.exit_cb = exit_cb;
  po.stdio = stdio;
  po.stdio_count = 3;
  /* Its own session: a Ctrl-C reaches the parent alone, which passes it on
   * once (a terminal's signal would reach every child as well, and a
   * second one ends a probe at once). */
  po.flags = UV_PROCESS_DETACHED;
  if (k->card) k->card->start_ns = hct__now_ns();
  int r = uv_spawn(&M->loop, &k->proc, &po);
  free(env);
  k->handles++;
  if (r != 0) {
    k->exited = 1;
    k->exit_status = 127;
    if (k->card) k->card->exit_status = 127, k->card->end_ns = hct__now_ns();
    /* libuv's rule: the process handle is closed even so; wait_children
     * runs the loop until the closes are done. */
    k->closing = 1;
    uv_close((uv_handle_t *)&k->proc, close_cb);
    uv_close((uv_handle_t *)&k->out, close_cb);
    uv_close((uv_handle_t *)&k->err, close_cb);
    return hct__error(HCT_EWORKER, "%s: cannot start '%s': %s", k->label, args[0], uv_strerror(r));
  }
  uv_read_start((uv_stream_t *)&k->out, alloc_cb, read_cb);
  uv_read_start((uv_stream_t *)&k->err, alloc_cb, read_cb);
  return 0;
}

static void on_signal(uv_signal_t *s, int sig) {
  multi_t *M = s->data;
  M->interrupted = 1;
  for (int i = 0; i < M->n_kids; i++)
    if (!M->kids[i].exited && M->kids[i].handles > 0) uv_process_kill(&M->kids[i].proc, sig);
}

/* Runs the loop until every child of kids[0..n) exited and closed. */
static void wait_children(multi_t *M, child_t *kids, int n) {
  M->kids = kids;
  M->n_kids = n;
  for (;;) {
    int busy = 0;
    for (int i = 0; i < n; i++) {
      child_t *k = &kids[i];
      if (k->exited && !k->closing && !uv_is_active((uv_handle_t *)&k->out) &&
          !uv_is_active((uv_handle_t *)&k->err)) {
        k->closing = 1;
        uv_close((uv_handle_t *)&k->proc, close_cb);
        uv_close((uv_handle_t *)&k->out, close_cb);
        uv_close((uv_handle_t *)&k->err, close_cb);
      }
      busy |= k->handles > 0;
    }
    if (!busy) break;
    uv_run(&M->loop, UV_RUN_ONCE);
  }
  for (int i = 0; i < n; i++) free(kids[i].buf[0]), free(kids[i].buf[1]);
  M->kids = NULL;
  M->n_kids = 0;
}

/* ---- the arguments of the children -------------------------------------- */

typedef struct argv_s {
  char *v[48];
  int n;
  char store[48][1100];
} argv_t;

static void arg(argv_t *a, const char *fmt, ...) HCT_PRINTF(2, 3);
static void arg(argv_t *a, const char *fmt, ...) {
  if (a->n >= (int)HCT_ARRAY_SIZE(a->v) - 1) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->store[a->n], sizeof a->store[a->n], fmt, ap);
  va_end(ap);
  a->v[a->n] = a->store[a->n];
  a->v[++a->n] = NULL;
}

/* "1-4,8" from the token set (sorted, distinct): what --tokens reads back. */
static void tokens_text(const hct_tokens_t *t, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < t->n && off < len; i++) {
    int e = i;
    while (e + 1 < t->n && t->t[e + 1] == t->t[e] + 1) e++;
    off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "", t->t[i]);
    if (e > i && off < len) off += (size_t)snprintf(buf + off, len - off, "-%d", t->t[e]);
    i = e;
  }
}

static void probe_args(const multi_t *M, const char *exe, const hct_multi_card_t *c,
                       const char *dbpath, const char *parent, argv_t *a) {
  const hct_probe_opts_t *p = M->p;
  a->n = 0;
  arg(a, "%s", exe);
  arg(a, "probe");
  arg(a, "--device");
  arg(a, "%s", c->uuid);
  arg(a, "--json");
  arg(a, "--parent-run");
  arg(a, "%s", parent);
  arg(a, "--db");
  arg(a, "%s", dbpath);
  if (p->op) arg(a, "--op"), arg(a, "%s", p->op);
  char toks[1200];
  tokens_text(&p->tokens, toks, sizeof toks);
  if (toks[0]) arg(a, "--tokens"), arg(a, "%s", toks);
  if (p->only_variants) arg(a, "--variants"), arg(a, "%s", p->only_variants);
  if (p->retry_quarantined) arg(a, "--retry-quarantined");
  if (p->check_sets > 0) arg(a, "--check-sets"), arg(a, "%d", p->check_sets);
  if (p->min_margin > 0) arg(a, "--margin"), arg(a, "%g", p->min_margin * 100.0);
  if (p->no_decide) arg(a, "--no-decide");
  if (p->stale) arg(a, "--stale");
  if (p->verify_all) arg(a, "--verify-all");
}

/* ---- the steps -------------------------------------------------------------- */

/* One `hctune compile` per (backend, arch) of the cards, one after the
 * other, each with every core: the cards' probes then find every binary in
 * the DB's compile cache.  A binary that fails is the probes' to record;
 * a compile that cannot run at all is said and the probes compile. */
static int compile_once(multi_t *M, const char *exe, const char *dbpath, const hct_op_t *op) {
  const hct_multi_opts_t *o = M->o;
  for (int i = 0; i < o->n_cards; i++) {
    int seen = 0;
    for (int k = 0; k < i; k++)
      seen |= o->cards[k].backend == o->cards[i].backend && strcmp(o->cards[k].arch, o->cards[i].arch) == 0;
    if (seen) continue;
    child_t kid;
    memset(&kid, 0, sizeof kid);
    snprintf(kid.label, sizeof kid.label, "compile %s", o->cards[i].arch);
    argv_t *a = calloc(1, sizeof *a);
    if (a == NULL) return hct__error(HCT_ENOMEM, "out of memory");
    arg(a, "%s", exe);
    arg(a, "compile");
    arg(a, "--arch");
    arg(a, "%s", o->cards[i].arch);
    arg(a, "--backend");
    arg(a, "%s", hct__backend((hct_backend_kind_t)o->cards[i].backend)->name);
    arg(a, "--op");
    arg(a, "%s", op->name);
    arg(a, "--db");
    arg(a, "%s", dbpath);
    if (M->p->only_variants) {
      const hct_variant_t *b = NULL;
      for (int v = 0; v < op->n_variants && b == NULL; v++)
        if (op->variants[v].parity == HCT_PARITY_BASELINE) b = &op->variants[v];
      arg(a, "--variant");
      arg(a, "%s%s%s", b ? b->name : "", b ? "," : "", M->p->only_variants);
    }
    char kenv[1100];
    char *env[] = {NULL, NULL};
    if (M->p->kernels_dir) {
      snprintf(kenv, sizeof kenv, "HCTUNE_KERNELS=%s", M->p->kernels_dir);
      env[0] = kenv;
    }
    uint64_t t0 = hct__now_ns();
    if (M->p->json) {
      printf("{\"event\":\"progress\",\"stage\":\"compile\",\"done\":0,\"total\":1,\"what\":\"%s for every card\"}\n",
             o->cards[i].arch);
      fflush(stdout);
    } else if (!M->p->quiet) {
      fprintf(stderr, "hctune: [%s] every binary once, for the cards of this arch\n", kid.label);
    }
    int rc = spawn_child(M, &kid, a->v, env);
    free(a);
    wait_children(M, &kid, 1); /* also after a failed start: its closes */
    double s = (double)(hct__now_ns() - t0) / 1e9;
    if (rc != 0 || kid.term_signal != 0 || kid.exit_status > 1) {
      hct__log(HCT_LOG_WARN, "%s failed (%s): each card's probe compiles for itself",
               kid.label, rc != 0 ? hct_last_error() : kid.errtail);
      hct__error_clear();
    } else if (!M->p->quiet && !M->p->json) {
      fprintf(stderr, "hctune: [%s] done in %.1f s%s\n", kid.label, s,
              kid.exit_status ? " (some binaries failed: the probes record them)" : "");
    }
    if (M->interrupted) return hct__error(HCT_EINTERRUPTED, "probe interrupted while compiling");
  }
  return 0;
}

/* The probes of every card at once. */
static int fan_out(multi_t *M, const char *exe, const char *dbpath, const char *parent) {
  const hct_multi_opts_t *o = M->o;
  child_t *kids = calloc((size_t)o->n_cards, sizeof *kids);
  argv_t *a = calloc(1, sizeof *a);
  if (kids == NULL || a == NULL) {
    free(kids);
    free(a);
    return hct__error(HCT_ENOMEM, "out of memory");
  }
  /* The cores shared equally: each probe's thread pool and reference
   * threads get its share, and every child its parent's niceness. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  long share = cores / (o->n_cards > 0 ? o->n_cards : 1);
  if (share < 1) share = 1;
  char pool[64], threads[64], kenv[1100];
  snprintf(pool, sizeof pool, "UV_THREADPOOL_SIZE=%ld", share);
  snprintf(threads, sizeof threads, "HCTUNE_THREADS=%ld", share);
  char *env[4] = {pool, threads, NULL, NULL};
  if (M->p->kernels_dir) {
    snprintf(kenv, sizeof kenv, "HCTUNE_KERNELS=%s", M->p->kernels_dir);
    env[2] = kenv;
  }
  int rc = 0, started = 0;
  for (int i = 0; i < o->n_cards; i++) {
    child_t *k = &kids[i];
    k->card = &o->cards[i];
    snprintf(k->label, sizeof k->label, "card %d", o->cards[i].index);
    probe_args(M, exe, &o->cards[i], dbpath, parent, a);
    int r = spawn_child(M, k, a->v, env);
    if (r != 0) {
      hct__strlcpy(o->cards[i].error, hct_last_error(), sizeof o->cards[i].error);
      if (rc == 0) rc = r;
    }
    started++;
  }
  free(a);
  if (!M->p->quiet && !M->p->json)
    fprintf(stderr, "hctune: probing %d card%s at once, %ld core%s each\n", o->n_cards,
            o->n_cards == 1 ? "" : "s", share, share == 1 ? "" : "s");
  wait_children(M, kids, started);
  for (int i = 0; i < o->n_cards; i++) {
    hct_multi_card_t *c = &o->cards[i];
    if (c->error[0] == '\0' && (c->exit_status != 0 || c->term_signal != 0))
      snprintf(c->error, sizeof c->error, "its probe ended with %s %d%s%.400s", c->term_signal ? "signal" : "exit status",
               c->term_signal ? c->term_signal : c->exit_status, kids[i].errtail[0] ? ": " : "",
               kids[i].errtail);
  }
  free(kids);
  return rc;
}

/* The host's run keeps where its time went, in the shape of a card's
 * (tuner/probe_clock.c): the compile for every card, the cards' probes at
 * once (each card's own breakdown is in its run), the agreement. */
static void record_breakdown(const multi_t *M, hct_db_t *db, const char *parent, uint64_t cards_ns) {
  const uint64_t total = hct__now_ns() - M->t0;
  const uint64_t known = M->compile_ns + cards_ns + M->agree_ns;
  char text[1024];
  snprintf(text, sizeof text,
           "{\"total_ms\":%llu,\"stages\":[{\"stage\":\"compile\",\"label\":\"compile\",\"ms\":%llu,\"n\":0,"
           "\"unit\":\"\"},{\"stage\":\"cards\",\"label\":\"the cards' probes\",\"ms\":%llu,\"n\":%d,"
           "\"unit\":\"cards\"},{\"stage\":\"agree\",\"label\":\"agreement\",\"ms\":%llu,\"n\":0,"
           "\"unit\":\"\"},{\"stage\":\"other\",\"label\":\"other\",\"ms\":%llu,\"n\":0,\"unit\":\"\"}]}",
           (unsigned long long)(total / 1000000), (unsigned long long)(M->compile_ns / 1000000),
           (unsigned long long)(cards_ns / 1000000), M->o->n_cards, (unsigned long long)(M->agree_ns / 1000000),
           (unsigned long long)((total > known ? total - known : 0) / 1000000));
  if (hct__db_run_set_breakdown(db, parent, text) != 0) {
    hct__log(HCT_LOG_WARN, "where the probe's time went is not recorded: %s", hct_last_error());
    hct__error_clear();
  }
}

static void print_summary(const multi_t *M, const hct_agree_t *ag, double wall) {
  const hct_multi_opts_t *o = M->o;
  double longest = 0;
  for (int i = 0; i < o->n_cards; i++) {
    const hct_multi_card_t *c = &o->cards[i];
    double s = (double)(c->end_ns - c->start_ns) / 1e9;
    if (s > longest) longest = s;
    if (c->start_ns == 0)
      printf("card %d %s (%s): not started\n", c->index, c->uuid, c->name);
    else if (c->error[0])
      printf("card %d %s (%s): FAILED after %.1f s: %s\n", c->index, c->uuid, c->name, s, c->error);
    else
      printf("card %d %s (%s): %d decisions in %.1f s\n", c->index, c->uuid, c->name, c->decisions, s);
    json_t *b = c->breakdown[0] ? json_loads(c->breakdown, 0, NULL) : NULL;
    if (b != NULL) hct__probe_breakdown_print(b, stdout, "  ");
    json_decref(b);
  }
  if (ag != NULL && ag->report_json != NULL) hct__agree_print(ag, stdout);
  printf("probe of %d card%s took %.1f s (the longest card %.1f s; the host's compile %.1f s, the "
         "agreement %.1f s)\n", o->n_cards, o->n_cards == 1 ? "" : "s", wall, longest,
         (double)M->compile_ns / 1e9, (double)M->agree_ns / 1e9);
}

static json_t *summary_json(const multi_t *M, const hct_agree_t *ag, const char *parent, double wall) {
  const hct_multi_opts_t *o = M->o;
  json_t *cards = json_array();
  for (int i = 0; i < o->n_cards; i++) {
    const hct_multi_card_t *c = &o->cards[i];
    /* Seconds from the command's start; null for a card never started
     * (an interrupted compile). */
    int ran = c->start_ns != 0;
    json_t *b = c->breakdown[0] ? json_loads(c->breakdown, 0, NULL) : NULL;
    json_array_append_new(
        cards, json_pack("{s:i, s:s, s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:s?, s:o}", "card", c->index,
                         "uuid", c->uuid, "name", c->name, "model", c->model_key, "run_id",
                         c->run_id, "decisions", c->decisions, "start_s",
                         ran ? json_real((double)(c->start_ns - M->t0) / 1e9) : json_null(),
                         "end_s", ran ? json_real((double)(c->end_ns - M->t0) / 1e9) : json_null(),
                         "wall_s", ran ? json_real((double)(c->end_ns - c->start_ns) / 1e9) : json_null(),
                         "error", c->error[0] ? c->error : NULL, "breakdown", b ? b : json_null()));
  }
  json_t *agreement = ag && ag->report_json ? json_loads(ag->report_json, 0, NULL) : NULL;
  return json_pack("{s:s, s:s, s:o, s:o, s:f, s:I, s:I}", "event", "multi_result", "run_id", parent,
                   "cards", cards, "agreement", agreement ? agreement : json_null(), "wall_s", wall,
                   "compile_ms", (json_int_t)(M->compile_ns / 1000000), "agree_ms",
                   (json_int_t)(M->agree_ns / 1000000));
}

int hct__multiprobe(const hct_multi_opts_t *o, hct_agree_t *agree_out) {
  if (agree_out) memset(agree_out, 0, sizeof *agree_out);
  if (o->n_cards < 1) return hct__error(HCT_EINVAL, "probe: no cards to probe");
  multi_t M;
  memset(&M, 0, sizeof M);
  M.o = o;
  M.p = o->probe;
  M.t0 = hct__now_ns();
  char kdir[1024], dbpath[1024], exe[4096];
  const char *opname = M.p->op ? M.p->op : "hc_read";
  int rc;
  if (M.p->kernels_dir) hct__strlcpy(kdir, M.p->kernels_dir, sizeof kdir);
  else if ((rc = hct__kernels_dir(kdir, sizeof kdir)) != 0) return rc;
  /* The op is read here too: a bad op is said once, not once per card. */
  hct_op_t *op = NULL;
  if ((rc = hct__manifest_load(kdir, opname, &op)) != 0) return rc;
  if (M.p->db_path) hct__strlcpy(dbpath, M.p->db_path, sizeof dbpath);
  else if ((rc = hct__default_db_path(dbpath, sizeof dbpath, 1)) != 0) goto out_op;
  if (o->exe) hct__strlcpy(exe, o->exe, sizeof exe);
  else if (getenv("HCTUNE_PROBE_EXE")) hct__strlcpy(exe, getenv("HCTUNE_PROBE_EXE"), sizeof exe);
  else if ((rc = hct__exe_path(exe, sizeof exe)) != 0) goto out_op;

  hct_db_t *db = NULL;
  if ((rc = hct__db_open(dbpath, 0, &db)) != 0) goto out_op;
  /* The run of the host: every card's run names it ("parent_run" in its args). */
  hct_db_keys_t keys;
  memset(&keys, 0, sizeof keys);
  hct__hostname(keys.host, sizeof keys.host);
  hct__strlcpy(keys.uuid, "*", sizeof keys.uuid);
  hct__strlcpy(keys.model_key, "*", sizeof keys.model_key);
  hct__strlcpy(keys.hctune_version, HCT_VERSION_STRING, sizeof keys.hctune_version);
  json_t *ja = json_pack("{s:[]}", "cards");
  for (int i = 0; i < o->n_cards; i++)
    json_array_append_new(json_object_get(ja, "cards"), json_string(o->cards[i].uuid));
  char *args = json_dumps(ja, JSON_COMPACT);
  json_decref(ja);
  char parent[33];
  rc = hct__db_run_begin(db, &keys, op->name, args, parent);
  free(args);
  if (rc != 0) goto out_db;

  if ((rc = uv_loop_init(&M.loop)) != 0) {
    rc = hct__error(HCT_EWORKER, "probe: cannot start an event loop: %s", uv_strerror(rc));
    hct__db_run_end(db, parent, "failed");
    goto out_db;
  }
  uv_signal_init(&M.loop, &M.sigint);
  uv_signal_init(&M.loop, &M.sigterm);
  M.sigint.data = M.sigterm.data = &M;
  uv_signal_start(&M.sigint, on_signal, SIGINT);
  uv_signal_start(&M.sigterm, on_signal, SIGTERM);

  uint64_t t_stage = hct__now_ns();
  if (!o->no_compile) rc = compile_once(&M, exe, dbpath, op);
  M.compile_ns = hct__now_ns() - t_stage;
  t_stage = hct__now_ns();
  if (rc == 0) rc = fan_out(&M, exe, dbpath, parent);
  const uint64_t cards_ns = hct__now_ns() - t_stage;
  int failed = 0;
  char failed_list[512] = "";
  for (int i = 0; i < o->n_cards; i++) {
    if (o->cards[i].error[0] == '\0') continue;
    size_t l = strlen(failed_list);
    snprintf(failed_list + l, sizeof failed_list - l, "%s%d", failed ? "," : "", o->cards[i].index);
    failed++;
  }
  hct_agree_t ag;
  memset(&ag, 0, sizeof ag);
  int arc = 0;
  const char *uuids[HCT_MULTI_MAX_CARDS];
  int nu = 0;
  for (int i = 0; i < o->n_cards && nu < HCT_MULTI_MAX_CARDS; i++)
    if (o->cards[i].error[0] == '\0') uuids[nu++] = o->cards[i].uuid;
  t_stage = hct__now_ns();
  if (nu > 0 && !M.interrupted) {
    arc = hct__agree(db, kdir, uuids, nu, o->outlier_pct, parent, !M.p->no_decide, &ag);
    if (arc != 0) hct__log(HCT_LOG_ERROR, "agreement of the cards: %s", hct_last_error());
  }
  M.agree_ns = hct__now_ns() - t_stage;
  double wall = (double)(hct__now_ns() - M.t0) / 1e9;
  record_breakdown(&M, db, parent, cards_ns);
  if (M.p->json) {
    json_t *j = summary_json(&M, &ag, parent, wall);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (s) printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(j);
  } else {
    print_summary(&M, &ag, wall);
  }
  hct__db_run_end(db, parent, M.interrupted ? "interrupted" : failed || arc ? "failed" : "done");
  if (rc == 0 && M.interrupted)
    rc = hct__error(HCT_EINTERRUPTED, "probe interrupted: the trials recorded so far are kept in '%s'", dbpath);
  else if (rc == 0 && failed)
    rc = hct__error(HCT_EWORKER, "probe of %d cards: card%s %s failed (the others' results are kept)",
                    o->n_cards, failed == 1 ? "" : "s", failed_list);
  else if (rc == 0 && arc != 0)
    rc = arc;
  if (agree_out) *agree_out = ag;
  else hct__agree_free(&ag);
  uv_close((uv_handle_t *)&M.sigint, NULL);
  uv_close((uv_handle_t *)&M.sigterm, NULL);
  uv_run(&M.loop, UV_RUN_DEFAULT);
  uv_loop_close(&M.loop);
out_db:
  hct__db_close(db);
out_op:
  hct__manifest_free(op);
  return rc;
}

int hct__multiprobe_cli(const hct_probe_opts_t *o, double outlier_pct) {
  hct_multi_card_t *cards = calloc(HCT_MULTI_MAX_CARDS, sizeof *cards);
  if (cards == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  int n = 0;
  int rc = hct__multi_cards(o->device, cards, HCT_MULTI_MAX_CARDS, &n);
  if (rc == 0) {
    hct_multi_opts_t m;
    memset(&m, 0, sizeof m);
    m.probe = o;
    m.cards = cards;
    m.n_cards = n;
    m.outlier_pct = outlier_pct;
    rc = hct__multiprobe(&m, NULL);
  }
  free(cards);
  return rc;
}
