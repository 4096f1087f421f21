/*
 * daemon.h: the private header of daemon/: hctuned, the server engines ask
 * (the client library they link is client/, which includes nothing here).
 *
 * Files (one concern each, along Redis's lines):
 *   daemon/verbs.c     the one table of verbs: name, rights, handler, fields
 *   daemon/proto.c     the request parser: one JSON line in, a checked
 *                      hct_req_t out, against the verb table (libc + jansson
 *                      only, so the fuzz target links it alone)
 *   daemon/dispatch.c  one request line: parse, check the peer's rights,
 *                      call the verb's handler, answer errors
 *   daemon/conn.c      connections and I/O: accept, read lines (each to
 *                      d->on_line), write replies, close
 *   daemon/answer.c    the answer policy: pin, the card's own decision, the
 *                      fleet's, the baseline (choose, module)
 *   daemon/softkeys.c  whether a decision is stale on this host (its
 *                      software key against what it would compile now)
 *   daemon/report.c    list, devices, status
 *   daemon/pins.c      pin, unpin: the writes
 *   daemon/probe.c     the probe supervisor: probes as child processes
 *   daemon/snapshot.c  the DB snapshot: load, poll, reload, the DB lane
 *   daemon/opset.c     the manifests served from: load, reload, look up
 *   daemon/server.c    start-up and shut-down: socket, signals, the loop
 *   daemon/options.c   hctuned's command line (hct__daemon_main)
 *   daemon/fleet_pull.c  --fleet-url: the live fleet's decisions pulled on a
 *                      thread of their own into the local DB
 *   daemon/main.c      the hctuned executable
 *   daemon/index.c     decisions, pins and devices of the DB in memory: a hash
 *                      of (card UUID, op, parity) to sorted token ranges, and
 *                      the same by card model for fleet answers
 *   daemon/cards.c     which card a request means: a UUID, a prefix of one,
 *                      or the only card (ENODEV, EINVAL otherwise)
 *   daemon/fuzz_request.c  libFuzzer target of the parser (`make fuzz`)
 *
 * One request's path: conn.c reads a line, dispatch.c has proto.c parse it
 * into a hct_req_t against the table of verbs.c, checks the peer's rights
 * and calls the verb's handler (answer.c for choose), which answers from the
 * index (never from SQLite on the hot path) and writes one line back.
 */
#ifndef HCT_DAEMON_H
#define HCT_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common.h"
#include "db.h"

/* Longest request line, newline excluded; a longer one closes the
 * connection after an error reply. */
#define HCT_MAX_LINE 65536

/* ---- requests (daemon/proto.c) ------------------------------------------- */

struct hct_conn_s;
struct hct_req_s;

typedef enum {
  HCT_REQ_CHOOSE,
  HCT_REQ_LIST,
  HCT_REQ_DEVICES,
  HCT_REQ_STATUS,
  HCT_REQ_PROBE,
  HCT_REQ_PIN,
  HCT_REQ_UNPIN,
  HCT_REQ_MODULE,
  HCT_REQ__COUNT
} hct_verb_t;

/* Verb flags. */
enum {
  HCT_REQ_READ = 0,      /* anyone who can open the socket */
  HCT_REQ_ADMIN = 1 << 0 /* daemon's uid, root, or --admin-group */
};

/*
 * The verb table (daemon/verbs.c): what each verb accepts is data, not
 * code: a field's name, its type and whether it is required.
 */
typedef enum {
  HCT_F_STR,   /* a string */
  HCT_F_INT,   /* an integer */
  HCT_F_RANGE, /* tokens: an integer, or a string "lo-hi" */
  HCT_F_OBJ    /* a JSON object */
} hct_field_type_t;

typedef struct hct_field_s {
  const char *name;
  hct_field_type_t type;
  int required;
  size_t max_len; /* HCT_F_STR: longest accepted, in bytes */
} hct_field_t;

/* A verb's handler (loop thread only): answers on c, or returns a negative
 * code with the message set, which dispatch.c turns into the error reply. */
typedef int (*hct_handler_t)(struct hct_conn_s *c, struct hct_req_s *r);

typedef struct hct_verb_spec_s {
  const char *name;
  hct_verb_t verb;
  int flags;
  hct_handler_t fn; /* NULL in the fuzz target's build (HCT_VERBS_NO_HANDLERS) */
  hct_field_t fields[8];
} hct_verb_spec_t;

/* The row of verb `name`, or NULL. */
const hct_verb_spec_t *hct__verb_find(const char *name);
const char *hct__verb_name(hct_verb_t v);

/* Longest id a request may carry (characters of a string id), and the
 * room its JSON text takes (escapes included). */
#define HCT_MAX_ID 128
#define HCT_ID_TEXT (HCT_MAX_ID * 6 + 8)

/*
 * A parsed request.  Strings point into the request's own storage (its
 * strbuf, or `root` when the line went through jansson): hct__req_free()
 * releases it.  Fields absent from the request are NULL or zero; defaults
 * are filled in (parity "bitwise").
 */
typedef struct hct_req_s {
  hct_verb_t verb;
  const char *cmd;
  int flags;                 /* of the verb */
  const hct_verb_spec_t *spec;
  void *root;                /* json_t *: the whole request, when parsed by jansson */
  char id[HCT_ID_TEXT];      /* the id as JSON text ("7", "\"a\""); "" when absent */
  const char *op;
  const char *device;
  const char *model;         /* choose/module: model key to fall back on */
  const char *parity;
  const char *variant;
  void *params;              /* json_t * object (pin), borrowed */
  int tokens;                /* choose/module; 0 when absent */
  int tmin, tmax;            /* pin/unpin/probe/list: token range, 0 absent */
  const char *tokens_text;   /* the range as given ("1-8"), for probe */
  int64_t until;             /* pin: unix seconds, 0 none */
  char strbuf[1024];         /* the fast path's copies of string values */
} hct_req_t;

/*
 * Parses one request line (no newline).  On failure returns a negative
 * code with a one-line message (hct_last_error) and still fills what it
 * could: req->id is set whenever the line was a JSON object with a valid
 * id, so the error reply can echo it.  A flat object of short strings and
 * integers (every choose) is read by a scanner of its own; anything else
 * goes through jansson: both feed the same checks.  Call hct__req_free() in both cases.
 */
int hct__req_parse(const char *line, size_t len, hct_req_t *req);
void hct__req_free(hct_req_t *req);
/* 1 (the default): flat requests take the fast scanner.  The fuzz target
 * sets 0 to read the same line through jansson and compare. */
extern int hct__req_fast;


/* ---- decisions in memory (daemon/index.c) -------------------------------- */

/*
 * A snapshot of the DB's decisions, pins and devices, read once and then
 * only looked up: the loop thread swaps in a new one on reload.  Choose
 * replies of a card's own decisions are rendered once at load, so a
 * `choose` costs a hash lookup, a binary search and one write.
 */
typedef struct hct_index_s hct_index_t;

/* Whether a row may be served: 0, or a negative code with the reason (the
 * snapshot leaves the row out and logs a warning naming it). */
typedef int (*hct_row_check_t)(void *ctx, const char *op, const char *variant,
                               const char *params);
/* Reads the DB's decisions, pins and devices; rows that `check` (may be
 * NULL) refutes, or that are not valid UTF-8 text, are skipped with a
 * warning naming the row. */
int hct__index_load(hct_db_t *db, hct_row_check_t check, void *ctx, hct_index_t **out);
/* An index of the decisions `dec` alone (copied), no pins or devices: the
 * fleet file's overlay (--fleet-db). */
int hct__index_from_decisions(const hct_db_decision_t *dec, int n, hct_row_check_t check,
                              void *ctx, hct_index_t **out);
void hct__index_free(hct_index_t *ix);
/* A snapshot of nothing (no DB yet). */
int hct__index_empty(hct_index_t **out);

/* The decision of (uuid, op, parity) covering `tokens`, or NULL; *body
 * (may be NULL) gets its rendered reply object text "{\"ok\":true,...}". */
const hct_db_decision_t *hct__index_decision(const hct_index_t *ix, const char *uuid,
                                             const char *op, const char *parity, int tokens,
                                             const char **body, size_t *body_len);
/* The newest decision of any card of model `model_key` covering `tokens`. */
const hct_db_decision_t *hct__index_fleet(const hct_index_t *ix, const char *model_key,
                                          const char *op, const char *parity, int tokens);
/* The pin of `device` (else of "*") for op covering tokens, live at `now`. */
const hct_db_pin_t *hct__index_pin(const hct_index_t *ix, const char *device, const char *op,
                                   int tokens, int64_t now);
const hct_db_device_t *hct__index_device(const hct_index_t *ix, const char *uuid);
/* The card asked for when a request names none: the first device of the
 * DB, else the first card with a decision; NULL when the DB has neither. */
const char *hct__index_default_device(const hct_index_t *ix);

const hct_db_decision_t *hct__index_decisions(const hct_index_t *ix, int *n);
const hct_db_pin_t *hct__index_pins(const hct_index_t *ix, int *n);
const hct_db_device_t *hct__index_devices(const hct_index_t *ix, int *n);

/* Decision i of hct__index_decisions as rendered for list (no "ok"; op,
 * parity and model in). */
const char *hct__index_list_item(const hct_index_t *ix, int i, size_t *len);

/* A decision as a reply object: ok, variant, params, class, source, ... */
json_t *hct__decision_json(const hct_db_decision_t *d, const char *source);


/* ---- the daemon (daemon/server.c and the files it calls) ----------------- */

#include <sys/types.h>
#include <uv.h>

#include "jit.h"

/* Card models a daemon pulls from a live fleet, at most. */
#define HCT_MAX_FLEET_MODELS 16

typedef struct hct_daemon_opts_s {
  const char *socket_path;   /* NULL: hct__socket_path's order */
  const char *db_path;       /* NULL: hct__default_db_path */
  const char *kernels_dir;   /* NULL: hct__kernels_dir */
  const char *admin_group;   /* NULL: none */
  const char *socket_group;  /* NULL: the daemon's group */
  int poll_ms;               /* DB watch period; <= 0: 500 */
  int max_clients;           /* connections at once; <= 0: 1024 */
  int max_queued_mb;         /* reply bytes waiting for all clients; <= 0: 64 MiB */
  int idle_timeout_s;        /* close a connection silent this long; 0: 300, < 0: never */
  const char *fleet_db;      /* NULL: none; a fleet file (docs/fleet.md) whose
                                decisions answer under the DB's own */
  const char *fleet_url;     /* NULL: none; a live fleet server (docs/fleet-live.md) */
  const char *fleet_models[HCT_MAX_FLEET_MODELS]; /* pulled besides the host's cards' */
  int n_fleet_models;
  int fleet_poll_ms;         /* the pull's fallback period; <= 0: 30000 */
} hct_daemon_opts_t;

/* Runs the daemon until SIGTERM, SIGINT or SIGQUIT; returns 0, or a
 * negative code when it cannot start (the message says why). */
int hct__daemon_run(const hct_daemon_opts_t *opts);
/* hctuned's command line (daemon/options.c), for daemon/main.c and `hctune
 * daemon` (cli/cmd_daemon.c).  Returns the exit status: 0, 1 when the
 * daemon could not start, 2 for bad usage. */
int hct__daemon_main(int argc, char **argv);

typedef struct hct_daemon_s hct_daemon_t;
typedef struct hct_fleet_pull_s hct_fleet_pull_t;
typedef struct hct_conn_s hct_conn_t;
typedef struct hct_probe_s hct_probe_t;
typedef struct hct_lane_s hct_lane_t;

/* (op, card) pairs remembered per connection for the first-answer log. */
#define HCT_MAX_SEEN 64
/* Ops whose manifests the daemon holds (every op of the kernels folder). */
#define HCT_MAX_OPS 32

/*
 * One client connection (daemon/conn.c).  Loop thread only.  Bytes read
 * wait in buf[head, len); requests are served a few per loop turn (see
 * conn.c), and reading stops while the client has requests waiting, a
 * request served off the loop thread (busy), or too many unread replies.
 */
struct hct_conn_s {
  uv_pipe_t pipe;
  hct_daemon_t *d;
  uint64_t serial;  /* never reused: replies served late find their asker by it */
  char *buf;
  size_t head, len, cap;
  size_t scan;      /* the newline search resumes here: no byte is looked at twice */
  uid_t uid;
  gid_t gid;
  pid_t pid;
  int closing;      /* uv_close called */
  int draining;     /* an over-long line: replying, then closing */
  int reading;      /* uv_read_start is on */
  int eof;          /* the peer shut its side: answer what it sent, then close */
  int busy;         /* one of its requests is served off the loop thread */
  int ready;        /* on the daemon's list of connections with requests waiting */
  int n_probes;     /* probes it started that are still running */
  size_t queued;    /* reply bytes handed to libuv, not yet written */
  size_t turn_out;  /* reply bytes written in this turn */
  uint64_t last_active_ns;
  uint64_t seen[HCT_MAX_SEEN];
  int n_seen;
  struct hct_conn_s *prev, *next; /* every connection */
  struct hct_conn_s *ready_next;  /* the ready list */
};

/* The ops of the kernels folder (daemon/snapshot.c).  Shared with the jobs
 * that check rows against it on the thread pool: refs counts them, and
 * only the loop thread changes it. */
/* An op whose folder did not load, and why (one line naming the field). */
typedef struct hct_broken_op_s {
  char name[32];
  char why[1024];
  int kept; /* the manifest of the load before is served in its place (SIGHUP) */
} hct_broken_op_t;

typedef struct hct_opset_s {
  int refs;
  hct_op_t *ops[HCT_MAX_OPS];
  int n;
  /* Ops whose folder did not load: the rest are served all the same (one
   * broken op must not take the others down), and status says why. */
  hct_broken_op_t broken[HCT_MAX_OPS];
  int n_broken;
} hct_opset_t;

struct hct_daemon_s {
  uv_loop_t loop;
  uv_pipe_t server;
  uv_timer_t poll, sweep;
  uv_idle_t pump;       /* runs while connections have requests waiting */
  uv_signal_t sig[6];
  int loop_open;
  int server_open;
  int socket_activated; /* the socket came from systemd: not ours to remove */
  char socket_path[108];
  char db_path[4096];
  char kernels_dir[4096];
  char admin_group[64];
  int have_admin_gid;
  gid_t admin_gid;
  /* limits */
  int max_clients;
  size_t max_queued;
  uint64_t idle_timeout_ns; /* 0: never */
  size_t queued;            /* reply bytes waiting, every connection */
  uint64_t refused, dropped, timed_out;
  uint64_t refuse_logged_ns;
  /* what is answered from: loop thread only */
  hct_index_t *ix;
  /* --fleet-db: the fleet file's decisions, read as an untrusted file (on
   * the lane, like the DB), and the cards of this host (UUID to model
   * key) listed at start, so a card the DB has never seen still gets its
   * model's fleet answer. */
  char fleet_db[4096];
  hct_index_t *fleet_ix;
  struct {
    char uuid[64], model[256];
  } host_cards[16];
  int n_host_cards;
  int host_cards_listed;
  struct hct_fleet_pull_s *fleet_pull; /* --fleet-url: daemon/fleet_pull.c */
  /* The cards answered for (daemon/cards.c): this host's, the DB's and the
   * fleet file's, rebuilt whenever a snapshot is put in place. */
  struct hct_card_s *cards;
  int n_cards;
  uint64_t cards_logged;    /* hash of the last "serving N cards" line */
  hct_opset_t *ops;
  int stale;                /* the DB could not be re-read: answers come from the last good one */
  int64_t data_version;
  uint64_t reloads;
  hct_lane_t *lane;         /* DB reads and writes, off the loop thread (snapshot.c) */
  /* connections */
  hct_conn_t *conns;
  int n_conns;
  uint64_t next_serial;
  hct_conn_t *ready_head, *ready_tail;
  /* What a connection does with each request line it reads (server.c sets
   * hct__dispatch_line): conn.c calls up through it, naming nothing above. */
  void (*on_line)(hct_conn_t *c, const char *line, size_t n);
  hct_probe_t *probes;
  int n_probes;
  uint64_t requests;
  int64_t started_at;
  uint64_t started_ns;
  int stopping;
};

/* conn.c: connections and replies.  A reply is one line; `id` is the
 * request's id as JSON text ("" or NULL: none). */
void hct__conn_accept(uv_stream_t *server, int status);
void hct__conn_close(hct_conn_t *c);
/* The open connection of `serial`, or NULL once it is gone. */
hct_conn_t *hct__conn_by_serial(hct_daemon_t *d, uint64_t serial);
/* A request of c served off the loop thread has been answered: c may go
 * on with its next requests. */
void hct__conn_resume(hct_conn_t *c);
/* Something c waited on is done (a probe): serve, read or close as due. */
void hct__conn_update(hct_conn_t *c);
/* The ready list's turn (the idle handle d->pump runs it). */
void hct__conns_pump(uv_idle_t *h);
/* The idle timeout's sweep (server.c starts its timer). */
void hct__conns_sweep(uv_timer_t *t);
/* Writes `body` (a JSON object text) with "id" spliced in first. */
void hct__reply_body(hct_conn_t *c, const char *id, const char *body, size_t len);
/* The same for an answer (choose, module): "stale":true goes in too while
 * the daemon answers from a snapshot it could not refresh. */
void hct__reply_answer(hct_conn_t *c, const char *id, const char *body, size_t len);
/* Writes n bytes ending with a newline, taking `buf` (malloc'd). */
void hct__reply_take(hct_conn_t *c, char *buf, size_t n);
/* Writes a reply object (stolen; NULL: an out-of-memory error reply). */
void hct__reply_json(hct_conn_t *c, const char *id, json_t *obj);
void hct__reply_error(hct_conn_t *c, const char *id, int code, const char *msg);

/* dispatch.c: serves one request line (no newline) of c. */
void hct__dispatch_line(hct_conn_t *c, const char *line, size_t n);

/* The verbs' handlers (rows of verbs.c). */
int hct__req_choose(hct_conn_t *c, hct_req_t *r);  /* answer.c */
int hct__req_module(hct_conn_t *c, hct_req_t *r);  /* answer.c */
int hct__req_list(hct_conn_t *c, hct_req_t *r);    /* report.c */
int hct__req_devices(hct_conn_t *c, hct_req_t *r); /* report.c */
int hct__req_status(hct_conn_t *c, hct_req_t *r);  /* report.c */
int hct__req_pin(hct_conn_t *c, hct_req_t *r);     /* pins.c */
int hct__req_unpin(hct_conn_t *c, hct_req_t *r);   /* pins.c */
int hct__req_probe(hct_conn_t *c, hct_req_t *r);   /* probe.c */

/* softkeys.c: asks this host's cards and compilers once (the software
 * keys' driver and compiler parts), before the first request; loop
 * thread. */
void hct__softkeys_prepare(hct_daemon_t *d);
/* Whether decision `dec`, answered for card `device` (NULL: its own), is
 * stale here; 1 with the reason in why, else 0.  Loop thread. */
int hct__softkeys_stale(hct_daemon_t *d, const hct_db_decision_t *dec, const char *device,
                        char *why, size_t len);

/* answer.c: "hc_read on GPU-8d1c... (NVIDIA H200): v3 for T=1-8, bitwise
 * against v1<how>", the log line of a decision served or recorded. */
void hct__log_decision(hct_daemon_t *d, const char *op, const char *device,
                       const hct_db_decision_t *dec, const char *how);

/* index.c: a params text as JSON (a string when it is not JSON), a pin as
 * its reply object. */
json_t *hct__params_json(const char *text);
json_t *hct__pin_json(const hct_db_pin_t *p);

/* probe.c: SIGTERM to every running probe (the daemon is stopping), and
 * closing a probe's handle found by uv_walk: 1 when h was one. */
void hct__probes_stop(hct_daemon_t *d);
int hct__probe_close_handle(hct_daemon_t *d, uv_handle_t *h);
/* The running probes as a JSON array, for status. */
json_t *hct__probes_json(hct_daemon_t *d);

/* ---- opset.c: the manifests ---------------------------------------------- */

/* Loads every op of kernels_dir into a new opset (refs 1).  An op that
 * does not load is listed in broken[] and logged (once per load, a
 * warning); where `prev` (the opset before, or NULL) holds it, a copy of
 * that manifest is served instead.  Fails only when memory or the folder
 * itself does.  Any thread. */
int hct__opset_load(const char *kernels_dir, const hct_opset_t *prev, hct_opset_t **out);
/* Why op `name` is not served (its folder broke and no manifest read
 * before stands in), or NULL.  Loop thread. */
const char *hct__op_broken(const hct_daemon_t *d, const char *name);
/* The broken ops of `s` as a JSON array of {"op", "why", "kept"}. */
json_t *hct__opset_broken_json(const hct_opset_t *s);
void hct__opset_unref(hct_opset_t *s);
/* The manifest of op `name`, or NULL with the error recorded (no such op).
 * hct__op_get also refuses self-test ops: those exist to exercise the
 * tuner and are never offered to engines. */
const hct_op_t *hct__op_find(hct_daemon_t *d, const char *name);
const hct_op_t *hct__op_get(hct_daemon_t *d, const char *name);
/* Whether a row's (op, variant, params) may be served: 0, or a negative
 * code with the reason (ctx: the opset, a hct_row_check_t for the index).
 * An op without a manifest here cannot be checked: its rows are served as
 * recorded.  Any thread: the opset is not changed while a job holds it. */
int hct__opset_row_check(void *ctx, const char *op_name, const char *variant, const char *params);

/* ---- snapshot.c: the DB snapshot, and the DB lane ------------------------- */

/*
 * The DB lane: every SQLite read and write of the daemon but module's
 * binary reads runs here, one job at a time, on libuv's thread pool, so the
 * loop thread never waits on a lock or a disk.  A job may write (`write`,
 * on a writable connection of its own) and then always refreshes the
 * snapshot: the file is watched by inode as well as by `data_version`, so
 * a DB replaced by rename is opened afresh.  `done` runs on the loop
 * thread after the new snapshot is in place, so a pin is answered only
 * once it is served.
 */
typedef struct hct_dbjob_s hct_dbjob_t;
struct hct_dbjob_s {
  int (*write)(hct_dbjob_t *j, hct_db_t *w); /* thread pool; NULL: a refresh only */
  void (*done)(hct_dbjob_t *j, int rc);     /* loop thread; rc of write, message in err */
  char err[1024];
  /* private to snapshot.c */
  int reopen;        /* SIGHUP: manifests and the DB read afresh */
  int rc;
  hct_dbjob_t *next;
};
/* Starts the lane and loads the first snapshot, waiting for it (start-up). */
int hct__snapshot_start(hct_daemon_t *d);
/* Queues j (the lane runs it after those queued before). */
void hct__snapshot_submit(hct_daemon_t *d, hct_dbjob_t *j);
/* Watches the DB every poll_ms. */
void hct__snapshot_watch(hct_daemon_t *d, int poll_ms);
/* Lists this host's cards (UUID and model key) once, at start: the cards a
 * request may name besides the DB's (daemon/cards.c), and the model of a
 * card the DB has never seen for its fleet answer; a host without a GPU
 * driver has none. */
void hct__snapshot_host_cards(hct_daemon_t *d);

/* ---- the cards answered for (daemon/cards.c) ---------------------------- */

/* Where a card is known from; a card may be known from several. */
enum { HCT_CARD_HOST = 1 << 0, HCT_CARD_DB = 1 << 1, HCT_CARD_FLEET = 1 << 2 };

typedef struct hct_card_s {
  char uuid[64];
  char model[256]; /* its model key, "" when no source says */
  int where;       /* HCT_CARD_* */
} hct_card_t;

/* Rebuilds d->cards from this host's cards, the snapshot (devices,
 * decisions, pins) and the fleet file, and logs "serving N cards: ..."
 * when the set changed.  Loop thread, after a snapshot is put in place. */
void hct__cards_refresh(hct_daemon_t *d);
/*
 * The card a request's `device` names (not NULL): its whole UUID, or a
 * unique prefix of one (hct__uuid_matches: any case, "GPU-" optional).
 * 0 with *out; HCT_ENODEV when it names no card, the message listing a few
 * known ones; HCT_EINVAL when several start with it, naming them.  A
 * model key ("vendor|name|arch|SMs|GiB") is not a card: the caller keeps
 * it as given.  Loop thread.
 */
int hct__cards_resolve(const hct_daemon_t *d, const char *device, const hct_card_t **out);
/* The cards for the status verb: [{"uuid","model","this_host","from"}]. */
json_t *hct__cards_json(const hct_daemon_t *d);
void hct__cards_free(hct_daemon_t *d);

/* fleet_pull.c: starts pulling from o->fleet_url (a no-op without one) on a
 * thread of its own, into the DB that the snapshot reads; end stops it. */
int hct__fleet_pull_begin(hct_daemon_t *d, const hct_daemon_opts_t *o);
void hct__fleet_pull_end(hct_daemon_t *d);
/* The live fleet's connection as the status verb shows it. */
typedef struct hct_fleet_state_s {
  char url[512];          /* without its password */
  char state[16];         /* connecting, connected, unreachable, idle */
  int models;             /* card models pulled */
  int poll_ms;
  int64_t last_pull_at;   /* unix time of the last pull that succeeded; 0 none */
  int64_t revision;       /* the fleet's revision then */
  int decisions;          /* stored by the last pull that changed anything */
  char last_error[512];   /* the last failure, "" none (kept after recovery) */
  int64_t last_error_at;
} hct_fleet_state_t;
/* 1 with *out filled when hctuned runs with --fleet-url, else 0.  Loop
 * thread. */
int hct__fleet_pull_state(const hct_daemon_t *d, hct_fleet_state_t *out);
/* SIGHUP: re-reads the manifests and the DB. */
void hct__snapshot_reread(hct_daemon_t *d);
/* Module's binary read, on any thread: its own read-only connection. */
int hct__snapshot_binary(hct_daemon_t *d, const char *key, void **image, size_t *size,
                         int *is_ptx);
/* Stopping: jobs not started are answered with HCT_EINTERRUPTED. */
void hct__snapshot_stop(hct_daemon_t *d);
/* After the loop: closes the connections, frees the snapshot and opset. */
void hct__snapshot_free(hct_daemon_t *d);

#endif /* HCT_DAEMON_H */
