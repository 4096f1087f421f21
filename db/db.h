/*
 * db.h: the private header of db/: hctune's results in SQLite.
 *
 * Files:
 *   db/db.c       open (WAL, busy timeout, integrity), schema and migrations
 *                 (PRAGMA user_version), error mapping of SQLite codes
 *   db/results.c  devices, trials, decisions, faults, pins, runs
 *   db/binaries.c the compile cache (a hct_binary_store_t over SQLite)
 *   db/fleet_pg.c the live fleet: a PostgreSQL server that hosts push
 *                 trials to and daemons pull decisions from (libpq)
 *
 * Design for fleets: every trial and decision row carries the card model key
 * (vendor|name|arch|SMs|GiB), the software key (driver, compiler, template
 * hash, hctune version), the host and the card UUID, so databases of many
 * hosts can be merged without losing where a figure came from.
 *
 * Each write is its own transaction unless a caller brackets several with
 * hct__db_begin/commit: a probe killed at any moment keeps every trial it
 * finished.  A hct_db_t is used by one thread at a time.
 */
#ifndef HCT_DB_H
#define HCT_DB_H

#include <stdint.h>

#include <jansson.h>

#include "common.h"

typedef struct hct_db_s hct_db_t;

#define HCT_DB_SCHEMA_VERSION 1

enum {
  HCT_DB_READONLY = 1 << 0, /* open existing, never write */
  HCT_DB_NOCREATE = 1 << 1  /* fail with HCT_ENOENT when the file is absent */
};

/*
 * Opens (creating and migrating when writable) the database at `path`.
 * Errors name the file and the cause: HCT_EDBCORRUPT for a file that is not
 * a database or fails its quick check, HCT_EDBREADONLY when it cannot be
 * written, HCT_EDBVERSION when its schema is newer than this hctune.
 */
int hct__db_open(const char *path, int flags, hct_db_t **out);
void hct__db_close(hct_db_t *db);
const char *hct__db_path(const hct_db_t *db);
int hct__db_user_version(hct_db_t *db, int *version);
/* PRAGMA data_version: changes when another connection commits. */
int hct__db_data_version(hct_db_t *db, int64_t *v);
int hct__db_begin(hct_db_t *db);
int hct__db_commit(hct_db_t *db);
int hct__db_rollback(hct_db_t *db);
/* PRAGMA integrity_check; 0 when "ok". */
int hct__db_integrity_check(hct_db_t *db);

/* Keys every row carries. */
typedef struct hct_db_keys_s {
  char host[128];
  char uuid[64];
  char model_key[256];
  char driver_version[32];
  char compiler_version[32];
  char hctune_version[16];
} hct_db_keys_t;

/* ---- devices ------------------------------------------------------------ */

/* Records (or refreshes last_seen of) a card; fingerprint_json is the whole
 * fingerprint as a JSON object. */
int hct__db_device_upsert(hct_db_t *db, const hct_db_keys_t *k, const char *name,
                          const char *arch, const char *fingerprint_json);

typedef struct hct_db_device_s {
  char uuid[64];
  char host[128];
  char model_key[256];
  char name[128];
  char arch[64];
  char *fingerprint_json; /* malloc'd */
  int64_t first_seen, last_seen;
} hct_db_device_t;
int hct__db_devices_list(hct_db_t *db, hct_db_device_t **out, int *n);
void hct__db_devices_free(hct_db_device_t *d, int n);

/* ---- runs: one probe ---------------------------------------------------- */

/* Starts a run and returns its id (a random 32-hex text) in run_id. */
int hct__db_run_begin(hct_db_t *db, const hct_db_keys_t *k, const char *op,
                      const char *args, char run_id[33]);
/* status: "done", "failed", "interrupted". */
int hct__db_run_end(hct_db_t *db, const char *run_id, const char *status);

/* ---- trials ------------------------------------------------------------- */

typedef struct hct_db_trial_s {
  hct_db_keys_t keys;
  char run_id[33];
  char op[32];
  char variant[32];
  char params[256];        /* JSON object text */
  char template_hash[33];
  char binary_key[33];
  int tokens;
  int pending;             /* 1 with the pending write */
  char kind[16];           /* "compile", "parity", "timing" */
  char status[16];         /* "pass", or a reason: "compile", "launch",
                              "fault", "hang", "parity", "unwritten",
                              "pruned", "unsupported" */
  uint64_t seed;
  /* timing figures (0 when kind is not "timing") */
  int samples;
  double median_us, min_us, p10_us, p90_us, ci_lo_us, ci_hi_us;
  int converged;
  int throttled;           /* samples discarded for low SM clock */
  int cold;
  /* everything else: parity metrics, resources, as a JSON object text */
  const char *figures_json;
  const char *log;         /* compiler log or fault detail, may be NULL */
} hct_db_trial_t;

/* Commits one trial; *id (may be NULL) gets its rowid. */
int hct__db_trial_add(hct_db_t *db, const hct_db_trial_t *t, int64_t *id);

/* Trials matching uuid (or a prefix of it)/op/variant (NULL or "" matches
 * all) and tokens (<= 0 matches all), newest first,
 * as a JSON array (malloc'd text) for `hctune show`. */
int hct__db_trials_json(hct_db_t *db, const char *uuid, const char *op, const char *variant,
                        int tokens, char **json);

/* ---- decisions ---------------------------------------------------------- */

typedef struct hct_db_decision_s {
  hct_db_keys_t keys;
  char op[32];
  char parity[16];         /* "bitwise" or "kl": the class asked for */
  int tmin, tmax;          /* token range, inclusive */
  char variant[32];
  char params[256];
  char variant_class[16];  /* "baseline", "bitwise", "kl" */
  char template_hash[33];
  char binary_key[33];
  char source[16];         /* "probe", "fleet" */
  double median_us, baseline_us, ci_lo_us, ci_hi_us;
  int samples;
  int64_t decided_at;
  char run_id[33];
  char evidence_json[1024];/* parity figures and the rest */
} hct_db_decision_t;

/*
 * Replaces the decisions of (uuid, op, parity) for every token count in the
 * n ranges of `d` (sorted, disjoint, one uuid/op/parity) in one
 * transaction.  An old range overlapping a new one is cut back to the part
 * outside it; token counts outside the new ranges keep their decisions.
 */
int hct__db_decisions_replace(hct_db_t *db, const hct_db_decision_t *d, int n);
/* All decisions, sorted by uuid, op, parity, tmin.  *out is malloc'd. */
int hct__db_decisions_list(hct_db_t *db, hct_db_decision_t **out, int *n);

/* ---- faults (quarantine) ------------------------------------------------- */

typedef struct hct_db_fault_s {
  hct_db_keys_t keys;
  char op[32];
  char variant[32];
  char params[256];
  char template_hash[33];
  int tokens;              /* 0: every token count */
  char reason[16];         /* "compile", "launch", "fault", "hang", "parity",
                              "unwritten", "timeout" */
  char *log;               /* malloc'd in lists; may be NULL */
  int64_t created_at;
} hct_db_fault_t;

int hct__db_fault_add(hct_db_t *db, const hct_db_fault_t *f);
/* 1 when (uuid, driver, template hash, variant, params, tokens) is
 * quarantined (a fault at tokens 0 or at any count <= tokens for
 * "timeout"), 0 when not, negative on error. */
int hct__db_fault_check(hct_db_t *db, const hct_db_keys_t *k, const char *op,
                        const char *variant, const char *params, const char *template_hash,
                        int tokens);
int hct__db_faults_list(hct_db_t *db, hct_db_fault_t **out, int *n);
void hct__db_faults_free(hct_db_fault_t *f, int n);

/* ---- pins ---------------------------------------------------------------- */

typedef struct hct_db_pin_s {
  char uuid[64];           /* "*" for every card */
  char op[32];
  int tmin, tmax;
  char variant[32];
  char params[256];
  int64_t until;           /* 0: no end */
  int64_t created_at;
} hct_db_pin_t;

/* Adds a pin; pins of the same (uuid, op) overlapping [tmin, tmax] are
 * removed first, in the same transaction, so ranges never conflict. */
int hct__db_pin_add(hct_db_t *db, const hct_db_pin_t *p);
/* Removes pins of (uuid, op) overlapping [tmin, tmax]; returns the count. */
int hct__db_pin_remove(hct_db_t *db, const char *uuid, const char *op, int tmin, int tmax);
int hct__db_pins_list(hct_db_t *db, hct_db_pin_t **out, int *n);

/* ---- compile cache ------------------------------------------------------- */

struct hct_binary_store_s;
/* A binary store (jit/jit.h) backed by the binaries table of `db`. */
void hct__db_binary_store(hct_db_t *db, struct hct_binary_store_s *store);
/* Stored binary by key, for the daemon's `module` verb. */
int hct__db_binary_get(hct_db_t *db, const char *key, void **image, size_t *size, int *is_ptx,
                       char **log);

/* ---- the live fleet on PostgreSQL (db/fleet_pg.c) ----------------------- */

/*
 * A connection to a fleet server.  URLs are whatever libpq takes: a
 * postgresql:// URI, "key=value" pairs, "service=NAME" (PGSERVICEFILE),
 * with passwords from ~/.pgpass (PGPASSFILE) and TLS as in the URL
 * (sslmode=verify-full).  A URL is never printed as given: messages show
 * hct__fleet_shown(), which keeps host, port, dbname, user, service and
 * sslmode only.  A hct_fleet_t belongs to one thread at a time.  Built with
 * HCT_NO_PG (make STATIC=1) every call returns HCT_EUNSUPPORTED.
 */
typedef struct hct_fleet_s hct_fleet_t;

/* Schema versions of the server side (table hctune.schema); migrations in
 * db/fleet_pg.c, append only. */
#define HCT_FLEET_SCHEMA_VERSION 2
/* The channel decisions' changes are announced on; the payload is the card
 * model key whose decisions changed. */
#define HCT_FLEET_CHANNEL "hctune_decisions"
/* The lock a recompute of one (model key, software key) holds until its
 * transaction ends: `fn` is pg_advisory_xact_lock, or pg_advisory_lock for
 * a test that holds it from outside.  $1 model key, $2 software key. */
#define HCT_FLEET_KEY_LOCK_SQL(fn) "SELECT " fn "(hashtextextended($1 || chr(31) || $2, 7))"

/* The URL with its password left out, for messages (always terminated). */
void hct__fleet_url_shown(const char *url, char *buf, size_t len);

enum {
  HCT_FLEET_NO_SCHEMA_CHECK = 1 << 0 /* connect only (fleet init) */
};
/* Connects (blocking, connect_timeout 10 s unless the URL says) and checks
 * that the schema is the one this hctune writes (HCT_EDBVERSION when newer
 * or older, with what to do).  Errors name the shown URL. */
int hct__fleet_connect(const char *url, int flags, hct_fleet_t **out);
void hct__fleet_close(hct_fleet_t *f);
const char *hct__fleet_shown(const hct_fleet_t *f);
/* libpq's connection, for the daemon's listener (PQsocket, notifies). */
struct pg_conn;
struct pg_conn *hct__fleet_pgconn(hct_fleet_t *f);

/* Creates or migrates the schema up to `to_version` (0: the latest) in one
 * transaction under a lock, so concurrent inits are safe; *from (may be
 * NULL) gets the version found.  HCT_EDBVERSION when the server's is newer. */
int hct__fleet_init(hct_fleet_t *f, int to_version, int *from);
int hct__fleet_schema_version(hct_fleet_t *f, int *version);

typedef struct hct_fleet_push_s {
  int devices, trials, faults;         /* rows read from the local DB */
  int trials_new, faults_new;          /* rows the server did not have */
  int keys;                            /* (model, software) keys recomputed */
  double upload_ms, recompute_ms, total_ms;
} hct_fleet_push_t;

/*
 * Uploads every device, trial and fault of `local` in one transaction
 * (rows the server has are skipped by their uid: pushing twice adds
 * nothing), then recomputes the decisions of every (card model key,
 * software key) that gained rows, each under HCT_FLEET_KEY_LOCK_SQL, in
 * key order, inside the same transaction: a push killed at any point
 * leaves nothing of itself, and two pushers never recompute one key at
 * once.  Announces each recomputed model on HCT_FLEET_CHANNEL.
 */
int hct__fleet_push(hct_fleet_t *f, hct_db_t *local, hct_fleet_push_t *st);

/* Recomputes one key in a transaction of its own (fleet status --recompute,
 * the tests' timing); *ms (may be NULL) gets the time it took. */
int hct__fleet_recompute(hct_fleet_t *f, const char *model_key, const char *software_key,
                         double *ms);

/* The fleet as JSON: schema version, counts of hosts, devices, trials,
 * faults, decisions, and per key its trials, hosts, cards, decisions,
 * revision, outliers and conflicts. */
int hct__fleet_status(hct_fleet_t *f, json_t **out);

/* A decision pulled from the fleet: the local row plus what only the
 * fleet has. */
typedef struct hct_fleet_decision_s {
  hct_db_decision_t d;     /* d.source is "fleet" */
  char software_key[33];
  int hosts, cards;        /* how many contributed to the pool */
  int64_t revision;
} hct_fleet_decision_t;

/*
 * The fleet's decisions for the n card model keys (all of them when n is
 * 0 and models NULL), every row checked as a row of an imported file is
 * (types, sizes, UTF-8, ranges): one bad row fails the whole pull with a
 * line naming it, and nothing is returned.  *out is malloc'd.
 */
int hct__fleet_pull(hct_fleet_t *f, const char *const *models, int n,
                    hct_fleet_decision_t **out, int *count);

/* ---- for the files of db/ only ---------------------------------------- */

struct sqlite3;
struct sqlite3 *hct__db_sqlite(hct_db_t *db);
/* Records "database '<path>': <what>: <sqlite message>" with the HCT code
 * that SQLite's result code `rc` maps to, and returns that code. */
int hct__db_fail(hct_db_t *db, int rc, const char *what);
/* Opens a transaction for one API call: BEGIN IMMEDIATE in autocommit
 * mode, a savepoint inside a caller's hct__db_begin.  tx_end commits (or
 * releases) when rc >= 0, rolls back otherwise, and returns rc (or the
 * commit's error). */
int hct__db_tx_begin(hct_db_t *db);
int hct__db_tx_end(hct_db_t *db, int rc);

#endif /* HCT_DB_H */
