/*
 * db.h: the private header of db/: hctune's results in SQLite.
 *
 * Files:
 *   db/db.c       open (WAL, busy timeout, integrity), schema and migrations
 *                 (PRAGMA user_version), error mapping of SQLite codes
 *   db/results.c  devices, trials, decisions, faults, pins, runs
 *   db/binaries.c the compile cache (a hct_binary_store_t over SQLite)
 *
 * Design for fleets: every trial and decision row carries the card model key
 * (vendor|name|arch|SMs|GiB), the software it was made with (driver,
 * compiler, template hash, hctune version, and from schema 2 the software
 * key: software_key and software_json, jit/softkey.c), the host and the
 * card UUID, so databases of many hosts can be merged without losing where
 * a figure came from.
 *
 * Each write is its own transaction unless a caller brackets several with
 * hct__db_begin/commit: a probe killed at any moment keeps every trial it
 * finished.  A hct_db_t is used by one thread at a time.
 */
#ifndef HCT_DB_H
#define HCT_DB_H

#include <stdint.h>

#include "common.h"

typedef struct hct_db_s hct_db_t;

#define HCT_DB_SCHEMA_VERSION 2

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
 * fingerprint as a JSON object.  A copy bandwidth recorded before is kept
 * in it unless the new fingerprint has one. */
/* Records the device-to-device copy bandwidth the probe measured on a
 * card already recorded (bytes per second, read + write counted once, as
 * the report's floors use it), with the time, in its fingerprint
 * ("copy_bytes_per_s", "copy_measured_at").  HCT_ENOENT for a card not
 * recorded. */
int hct__db_device_copy_bw_set(hct_db_t *db, const char *uuid, const char *host,
                               double bytes_per_s);
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
/* Ties run_id to the run of a probe of several cards: "parent_run" in the
 * run's args (a JSON object), so the schema stays as it is and a DB of an
 * older hctune reads the same. */
int hct__db_run_set_parent(hct_db_t *db, const char *run_id, const char *parent_run);
/* Where the run's time went (tuner/probe_clock.c's breakdown, a JSON
 * object as text): "breakdown" in the run's args, as parent_run is. */
int hct__db_run_set_breakdown(hct_db_t *db, const char *run_id, const char *breakdown_json);
/* The breakdown of the newest run of `op` on card `uuid` that has one:
 * *json malloc'd (NULL when none), with the run's id and start. */
int hct__db_run_breakdown(hct_db_t *db, const char *uuid, const char *op, char **json,
                          char run_id[33], int64_t *started_at);

/* A run as `hctune probe --device all` reads back its cards' runs. */
typedef struct hct_db_run_s {
  char id[33];
  char uuid[64];
  char model_key[256];
  char status[16];
  int64_t started_at, ended_at;
} hct_db_run_t;
/* The runs whose args name `parent` as their parent_run, by uuid; *out is
 * malloc'd. */
int hct__db_run_children(hct_db_t *db, const char *parent, hct_db_run_t **out, int *n);

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
  /* the software key (jit/softkey.c): "" / "" when not known */
  char software_key[33];
  char software_json[320];
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
  char parity[HCT_PARITY_LEN]; /* "bitwise", "kl" or "bits:<head>": what was asked for */
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
  /* the software key it was decided under (jit/softkey.c); "" for a
   * decision recorded before schema 2 */
  char software_key[33];
  char software_json[320];
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
/* 1 when some decision carries a software key, 0 when none, or negative. */
int hct__db_decisions_keyed(hct_db_t *db);

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
