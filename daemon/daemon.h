/*
 * daemon.h: the private header of daemon/: hctuned and the client library.
 *
 * Files:
 *   daemon/proto.c   the request parser: one JSON line in, a checked
 *                    hct_req_t out, against the verb table (libc + jansson
 *                    only, so the fuzz target links it alone)
 *   daemon/index.c   decisions, pins and devices of the DB in memory: a hash
 *                    of (card UUID, op, parity) to sorted token ranges, and
 *                    the same by card model for fleet answers
 *   daemon/server.c  the libuv loop: socket, connections, verbs, reloads,
 *                    probes run as child processes
 *   daemon/client.c  libhctune's client (include/hctune.h): libc, jansson
 *                    and common/error.c only, as lib/libhctune.so is built
 *                    from it alone
 *   daemon/fuzz_request.c  libFuzzer target of the parser (`make fuzz`)
 *
 * One request's path: server.c reads a line, proto.c parses it into a
 * hct_req_t, the verb table of server.c checks the peer's rights and calls
 * req_<verb>, which answers from the index (never from SQLite on the hot
 * path) and writes one line back.
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

/* ---- socket path (daemon/client.c) --------------------------------------- */

/* The socket path: `explicit_path` when not NULL/empty, else $HCTUNE_SOCKET,
 * else $XDG_RUNTIME_DIR/hctune.sock, else /run/hctune/hctune.sock.  HCT_ERANGE
 * when it does not fit a sockaddr_un. */
int hct__socket_path(const char *explicit_path, char *buf, size_t len);

/* The op's baseline variant known without the daemon (the client's built-in
 * table), or NULL. */
const char *hct__builtin_baseline(const char *op);

/* Sends one raw request line (no newline) and returns the first reply line
 * that is not a progress line (malloc'd), waiting at most timeout_ms;
 * progress lines before it go to `progress` (may be NULL).  For `hctune
 * query --raw`. */
int hct__client_request(hct_client_t *c, const char *line, int timeout_ms, char **reply,
                        void (*progress)(const char *line, void *ctx), void *ctx);

/* ---- requests (daemon/proto.c) ------------------------------------------- */

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
const char *hct__verb_name(hct_verb_t v);


/* Base64 (RFC 4648, with padding): malloc'd NUL-terminated text. */
char *hct__base64_encode(const void *data, size_t len, size_t *out_len);

/* ---- decisions in memory (daemon/index.c) -------------------------------- */

/*
 * A snapshot of the DB's decisions, pins and devices, read once and then
 * only looked up: the loop thread swaps in a new one on reload.  Choose
 * replies of a card's own decisions are rendered once at load, so a
 * `choose` costs a hash lookup, a binary search and one write.
 */
typedef struct hct_index_s hct_index_t;

int hct__index_load(hct_db_t *db, hct_index_t **out);
void hct__index_free(hct_index_t *ix);

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

/* A decision as a reply object: ok, variant, params, class, source, ... */
json_t *hct__decision_json(const hct_db_decision_t *d, const char *source);

/* ---- the daemon (daemon/server.c) ---------------------------------------- */

typedef struct hct_daemon_opts_s {
  const char *socket_path;   /* NULL: hct__socket_path's order */
  const char *db_path;       /* NULL: hct__default_db_path */
  const char *kernels_dir;   /* NULL: hct__kernels_dir */
  const char *admin_group;   /* NULL: none */
  const char *socket_group;  /* NULL: the daemon's group */
  int poll_ms;               /* data_version poll period; <= 0: 500 */
} hct_daemon_opts_t;

/* Runs the daemon until SIGTERM or SIGINT; returns 0, or a negative code
 * when it cannot start (the message says why). */
int hct__daemon_run(const hct_daemon_opts_t *opts);

#endif /* HCT_DAEMON_H */
