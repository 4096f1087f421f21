/*
 * fleet.h: a private sub-header of db/: result files that travel between
 * hosts (docs/fleet.md).
 *
 * Files:
 *   db/fleet_format.c  the fleet file format (its SQLite schema, format
 *                  marker and columns), a value checked against its
 *                  column, a fleet decision as a local row
 *   db/export.c    writing a fleet set to a new file, and `db export`:
 *                  the local DB's rows as a fleet set
 *   db/untrusted.c reading a fleet file that came from elsewhere: its bytes
 *                  checked before SQLite sees them, its whole schema
 *                  against the expected one, then every row validated
 *   db/merge.c     `db merge`: trials pooled by (card model, software),
 *                  outlier cards and conflicting variants left out,
 *                  decisions recomputed with the probe's winner rule
 *   db/import.c    `db import`: a fleet set into the local DB, in one
 *                  transaction
 *
 * A fleet file is a self-contained SQLite file (rollback journal, no WAL)
 * whose header carries application_id HCT_FLEET_APP_ID and user_version
 * HCT_FLEET_FORMAT_VERSION, with a meta table naming the format again.  It
 * holds trials, decisions, faults, the cards they came from (provenance)
 * and the classes of the variants, never a compiled binary: binaries are
 * always compiled locally from local templates.
 *
 * Every file is read the same way whatever its use (import, merge, the
 * daemon's --fleet-db): hct__fleet_read either returns a set whose every
 * field was checked (type, size, UTF-8, range) or refuses the whole file
 * with one line; nothing is read from a file before its schema is known to
 * be exactly the expected one.
 */
#ifndef HCT_FLEET_H
#define HCT_FLEET_H

#include <stdint.h>

#include "db.h"

#define HCT_FLEET_APP_ID 0x48435446 /* "HCTF" */
#define HCT_FLEET_FORMAT_VERSION 1
#define HCT_FLEET_FORMAT "hctune-fleet"
/* A fleet file larger than this is refused unread. */
#define HCT_FLEET_MAX_BYTES (256LL << 20)
/* Rows of the largest table (trials), at most; the others take a fifth.
 * A row costs about 1 KB in memory: this bounds what a hostile file can
 * make a reader allocate to about a gigabyte. */
#define HCT_FLEET_MAX_ROWS 500000
/* The default --outlier-pct of a merge. */
#define HCT_FLEET_OUTLIER_PCT 10.0

typedef struct hct_fleet_meta_s {
  char kind[16];            /* "export" or "merge" */
  char host[128];           /* where the file was written */
  char hctune_version[16];
  int64_t created_at;
  int64_t inputs;           /* merge: files merged; export: 1 */
  double outlier_pct;       /* merge: the threshold used; export: 0 */
} hct_fleet_meta_t;

/* A card the rows came from: provenance. */
typedef struct hct_fleet_device_s {
  char uuid[64];
  char host[128];
  char model_key[256];
  char name[128];
  char arch[64];
  char driver_version[32];
  char compiler_version[32];
  char hctune_version[16];
  int64_t first_seen, last_seen;
} hct_fleet_device_t;

/* The class of each variant of an op ("baseline", "bitwise", "kl"), from
 * the exporting host's manifest: trials do not carry it, and a merge must
 * know which candidate is the incumbent and which compete in each class. */
typedef struct hct_fleet_variant_s {
  char op[32];
  char variant[32];
  char vclass[16];
} hct_fleet_variant_t;

typedef struct hct_fleet_trial_s {
  char uid[33];
  char host[128], uuid[64], model_key[256];
  char driver_version[32], compiler_version[32], hctune_version[16];
  char software_key[33];    /* "" until the software key exists */
  char *software_json;      /* malloc'd, never NULL */
  char run_id[33];
  char op[32], variant[32], params[256];
  char template_hash[33], binary_key[33];
  int64_t tokens, pending;
  char kind[16], status[16];
  int64_t seed, samples;
  double median_us, min_us, p10_us, p90_us, ci_lo_us, ci_hi_us;
  int64_t converged, throttled, cold;
  char *figures_json;       /* malloc'd, never NULL ("" when none) */
  int64_t created_at;
} hct_fleet_trial_t;

typedef struct hct_fleet_decision_s {
  char uid[33];
  char host[128], uuid[64], model_key[256];
  char driver_version[32], compiler_version[32], hctune_version[16];
  char software_key[33];
  char *software_json;      /* malloc'd, never NULL */
  char op[32], parity[HCT_PARITY_LEN];
  int64_t tmin, tmax;
  char variant[32], params[256], variant_class[16];
  char template_hash[33], binary_key[33], source[16];
  double median_us, baseline_us, ci_lo_us, ci_hi_us;
  int64_t samples, decided_at;
  char run_id[33];
  char evidence_json[1024];
} hct_fleet_decision_t;

typedef struct hct_fleet_fault_s {
  char uid[33];
  char host[128], uuid[64], model_key[256];
  char driver_version[32], compiler_version[32], hctune_version[16];
  char op[32], variant[32], params[256], template_hash[33];
  int64_t tokens;
  char reason[16];
  char *log;                /* malloc'd, never NULL */
  int64_t created_at;
} hct_fleet_fault_t;

/* What a merge left out, and why: an outlier card of a (model, software)
 * group, or a variant that passed on one card and failed on an identical
 * one. */
typedef struct hct_fleet_flag_s {
  char kind[16];            /* "outlier", "conflict" */
  char model_key[256];
  char env[128];            /* driver|compiler|hctune of the group */
  char uuid[64], host[128]; /* outlier: the card; conflict: "" */
  char op[32], variant[32], params[256], template_hash[33];
  char detail[1024];        /* a JSON object: figures, cards */
} hct_fleet_flag_t;

typedef struct hct_fleet_s {
  hct_fleet_meta_t meta;
  hct_fleet_device_t *devices;
  int n_devices;
  hct_fleet_variant_t *variants;
  int n_variants;
  hct_fleet_trial_t *trials;
  int n_trials;
  hct_fleet_decision_t *decisions;
  int n_decisions;
  hct_fleet_fault_t *faults;
  int n_faults;
  hct_fleet_flag_t *flags;
  int n_flags;
} hct_fleet_t;

void hct__fleet_free(hct_fleet_t *f);

/* ---- the format (db/fleet_format.c) ---------------------------------------- */

/* The schema of a fleet file, as SQL run on an empty database. */
extern const char hct__fleet_schema_sql[];

/* One column of a fleet table: its name, how it is checked and where it
 * lives in the row struct.  Kinds:
 *   'h' 32 lowercase hex digits      'H' the same, or ""
 *   'n' a name: [A-Za-z0-9_.-]+      't' printable UTF-8 text, no control
 *   'l' UTF-8 text, newlines and tabs allowed (logs)
 *   'j' a JSON object                'J' a JSON object, or ""
 *   'e' one of `choices` (a NULL-terminated list)
 *   'p' a decision's parity: "bitwise", "kl" or "bits:<variant>"
 *   'i' an integer in [lo, hi]       'r' a finite real in [0, 1e12]
 * Text goes into a char[size] at `off` (size = its capacity, the longest
 * accepted text is size - 1), or, when `heap`, into a malloc'd char * at
 * `off` whose longest text is `size` - 1. */
typedef struct hct_fleet_col_s {
  const char *name;
  char kind;
  int heap;
  size_t off, size;
  int64_t lo, hi;
  const char *const *choices;
} hct_fleet_col_t;

typedef struct hct_fleet_table_s {
  const char *name;
  const hct_fleet_col_t *cols;
  int ncols;
  size_t row_size;
  size_t arr_off, n_off;    /* where the array and its count are in hct_fleet_t */
  const char *order;        /* ORDER BY of a read: the table's key */
  int max_rows;             /* a file with more is refused */
} hct_fleet_table_t;

/* devices, variants, trials, decisions, faults, flags. */
extern const hct_fleet_table_t hct__fleet_tables[];
extern const int hct__fleet_n_tables;
const hct_fleet_table_t *hct__fleet_table(const char *name);

/* Checks one text or integer value against its column (for values that
 * arrive other than from a fleet file); 0 or HCT_EINVAL with "why" set. */
int hct__fleet_check_text(const hct_fleet_col_t *c, const char *s, size_t len, char *why,
                          size_t wlen);

/* ---- writing and exporting (db/export.c) ----------------------------------- */

/*
 * Writes `f` to a new fleet file at `path`: built in "<path>.tmp-<pid>"
 * and renamed over `path` once complete, so a failed write leaves no file
 * and an existing one untouched.  meta.kind must be set.
 */
int hct__fleet_write(const hct_fleet_t *f, const char *path);

/* Reads the local DB's rows of cards matching `device` (a UUID prefix; NULL
 * or "" for all) as a fleet set of kind "export"; the variants' classes
 * come from the manifests in kernels_dir.  Every row is checked as an
 * incoming one would be, so an export is readable by every hctune of this
 * format. */
int hct__fleet_export(hct_db_t *db, const char *device, const char *kernels_dir,
                      hct_fleet_t *out);

/* ---- reading untrusted files (db/untrusted.c) ------------------------------ */

/* What hct__fleet_read_some reads beyond meta, devices and variants. */
enum {
  HCT_FLEET_TRIALS = 1 << 0,
  HCT_FLEET_DECISIONS = 1 << 1,
  HCT_FLEET_FAULTS = 1 << 2,
  HCT_FLEET_FLAGS = 1 << 3,
  HCT_FLEET_ALL = 0xf
};

/* Reads the fleet file at `path` into *out (zeroed first; free it with
 * hct__fleet_free, also after an error).  Errors: one line naming the file
 * and the cause, HCT_EINVAL (not a fleet file, bad rows or schema),
 * HCT_EDBVERSION (another format version), HCT_EDBCORRUPT (truncated or
 * corrupt), HCT_ERANGE (too large), HCT_ENOENT, HCT_EPERM. */
int hct__fleet_read(const char *path, hct_fleet_t *out);
/* The same, with only the tables of `tables` read (the header, schema,
 * quick check and meta always checked whole): the daemon and
 * --verify-fleet need the decisions alone. */
int hct__fleet_read_some(const char *path, int tables, hct_fleet_t *out);

/* ---- for the files of db/ only ------------------------------------------- */

struct sqlite3;
/* Reads the rows of `sql` (db/untrusted.c; its columns in the order of T->cols; ?1 bound to
 * bind_prefix when not NULL) into a malloc'd array of checked rows.  With
 * `repair` (the local DB's own rows, for an export) JSON that does not
 * parse is wrapped as {"text": ...} and control characters become '?';
 * without it any bad value refuses the whole read, naming row and column. */
int hct__fleet_read_rows(struct sqlite3 *h, const char *sql, const char *bind_prefix,
                         const hct_fleet_table_t *T, const char *file, int repair, void **arr,
                         int *n);
/* `s` when it is a JSON object text, else {"text": s} cut to fit in max
 * bytes (malloc'd; NULL on out of memory; db/fleet_format.c). */
char *hct__fleet_json_or_wrapped(const char *s, size_t max);

/* ---- merging (db/merge.c) ------------------------------------------------- */

typedef struct hct_fleet_merge_opts_s {
  double outlier_pct;       /* <= 0: HCT_FLEET_OUTLIER_PCT */
  double min_margin;        /* <= 0: the probe's HCT_MIN_MARGIN_DEFAULT */
} hct_fleet_merge_opts_t;

/*
 * Merges n fleet sets into *out (kind "merge"): identical rows once (a row
 * whose uid repeats with other content refuses the merge), the inputs'
 * decisions dropped and recomputed from the pooled trials of each (card
 * model, driver, compiler, hctune version, op) group, with its outlier
 * cards and conflicting variants left out and listed in out->flags.  The
 * result does not depend on the order of the inputs, and merging it again
 * with any of them gives the same decisions.
 */
int hct__fleet_merge(const hct_fleet_t *in, int n, const hct_fleet_merge_opts_t *opts,
                     hct_fleet_t *out);

/* The decisions of a set, sorted by (uuid, op, parity, tmin): each range
 * in order, and a group's ranges never overlapping.  `source` names where
 * the set came from in the message; `code` is returned on a failure. */
int hct__fleet_check_ranges(const hct_fleet_t *f, const char *source, int code);

/* ---- importing (db/import.c) ---------------------------------------------- */

typedef struct hct_fleet_import_stats_s {
  int trials, faults, decisions;       /* rows added */
  int trials_known, faults_known;      /* already there */
  int trials_local, faults_local, decisions_local; /* left out: rows
                                          naming a card of this DB */
} hct_fleet_import_stats_t;

/* Adds a fleet set to the local DB in one transaction: trials and faults
 * not already there, and its decisions as source "fleet" (each (card, op,
 * parity) group replacing the same group's rows), except rows naming one
 * of this DB's own cards: local results win.  Nothing is written on
 * error. */
int hct__fleet_import(hct_db_t *db, const hct_fleet_t *f, hct_fleet_import_stats_t *stats);

/* A fleet decision as the daemon's and the probe's decision row
 * (db/fleet_format.c). */
void hct__fleet_decision_to_db(const hct_fleet_decision_t *fd, hct_db_decision_t *d);

#endif /* HCT_FLEET_H */
