/*
 * results.c: devices, runs, trials, decisions, faults and pins.
 *
 * Every function prepares its statements, runs them and finalizes them
 * before returning: a hct_db_t holds no statement between calls, so closing
 * never waits and a failed call leaves nothing behind.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "db.h"

#define KEY_COLS "host, uuid, model_key, driver_version, compiler_version, hctune_version"
#define NEW_UID "lower(hex(randomblob(16)))"

static int prepare(hct_db_t *db, const char *sql, sqlite3_stmt **st) {
  int rc = sqlite3_prepare_v2(hct__db_sqlite(db), sql, -1, st, NULL);
  return rc == SQLITE_OK ? 0 : hct__db_fail(db, rc, "cannot prepare a query");
}

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
  sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_TRANSIENT);
}

/* Binds the six keys at i .. i+5 in the order of KEY_COLS; returns i+6. */
static int bind_keys(sqlite3_stmt *st, int i, const hct_db_keys_t *k) {
  bind_text(st, i++, k->host);
  bind_text(st, i++, k->uuid);
  bind_text(st, i++, k->model_key);
  bind_text(st, i++, k->driver_version);
  bind_text(st, i++, k->compiler_version);
  bind_text(st, i++, k->hctune_version);
  return i;
}

static void col_copy(sqlite3_stmt *st, int i, char *dst, size_t len) {
  const char *s = (const char *)sqlite3_column_text(st, i);
  hct__strlcpy(dst, s ? s : "", len);
}

#define COL_COPY(st, i, field) col_copy(st, i, field, sizeof(field))

static char *col_dup(sqlite3_stmt *st, int i) {
  const char *s = (const char *)sqlite3_column_text(st, i);
  return s ? strdup(s) : NULL;
}

static int read_keys(sqlite3_stmt *st, int i, hct_db_keys_t *k) {
  COL_COPY(st, i++, k->host);
  COL_COPY(st, i++, k->uuid);
  COL_COPY(st, i++, k->model_key);
  COL_COPY(st, i++, k->driver_version);
  COL_COPY(st, i++, k->compiler_version);
  COL_COPY(st, i++, k->hctune_version);
  return i;
}

/* Steps a statement that returns no rows, then finalizes it. */
static int step_done(hct_db_t *db, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  int err = rc == SQLITE_DONE ? 0 : hct__db_fail(db, rc, what);
  sqlite3_finalize(st);
  return err;
}

/*
 * Runs a SELECT and appends each row to a growing array of `size`-byte
 * elements with `read_row`.  Frees nothing on error but the array.
 */
/*
 * Runs a query and reads every row into a growing array of `size`-byte
 * elements (zeroed before read_row fills one).  On error every element
 * read so far, the one that failed included, goes to free_rows (NULL: a
 * plain free of the array) and *out, *n come back NULL and 0.  The one way
 * every list call below reads its rows.
 */
static int list_rows(hct_db_t *db, const char *sql, size_t size,
                     int (*read_row)(sqlite3_stmt *st, void *elem),
                     void (*free_rows)(void *arr, int n), void **out, int *n, const char *what) {
  *out = NULL;
  *n = 0;
  sqlite3_stmt *st;
  int err = prepare(db, sql, &st);
  if (err) return err;
  char *arr = NULL;
  int count = 0, cap = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (hct__grow(&arr, &cap, count, size, 16) != 0) {
      err = hct__error(HCT_ENOMEM, "database '%s': out of memory", hct__db_path(db));
      break;
    }
    memset(arr + (size_t)count * size, 0, size);
    err = read_row(st, arr + (size_t)count * size);
    count++;
    if (err) break;
  }
  if (!err && rc != SQLITE_DONE) err = hct__db_fail(db, rc, what);
  sqlite3_finalize(st);
  if (err) {
    if (free_rows) free_rows(arr, count);
    else free(arr);
    return err;
  }
  *out = arr;
  *n = count;
  return 0;
}

/* ---- devices ------------------------------------------------------------ */

/* The new fingerprint, keeping the copy bandwidth measured before
 * (hct__db_device_copy_bw_set) unless the new one brings its own: a probe
 * records the fingerprint first and measures after, and one that could not
 * measure keeps the last figure. */
#define KEEP_COPY_BW                                                                          \
  "CASE WHEN json_valid(excluded.fingerprint_json) AND json_valid(devices.fingerprint_json)"  \
  " AND json_extract(excluded.fingerprint_json, '$.copy_bytes_per_s') IS NULL"                \
  " AND json_extract(devices.fingerprint_json, '$.copy_bytes_per_s') IS NOT NULL"             \
  " THEN json_set(excluded.fingerprint_json,"                                                 \
  " '$.copy_bytes_per_s', json_extract(devices.fingerprint_json, '$.copy_bytes_per_s'),"      \
  " '$.copy_measured_at', json_extract(devices.fingerprint_json, '$.copy_measured_at'))"      \
  " ELSE excluded.fingerprint_json END"

int hct__db_device_copy_bw_set(hct_db_t *db, const char *uuid, const char *host,
                               double bytes_per_s) {
  if (!(bytes_per_s > 0) || bytes_per_s > 1e16)
    return hct__error(HCT_ERANGE, "card '%s': copy bandwidth %g bytes/s is not a measurement",
                      uuid, bytes_per_s);
  char when[40];
  hct__iso_time(hct__unix_time(), when, sizeof when);
  sqlite3_stmt *st;
  int err = prepare(db,
                    "UPDATE devices SET fingerprint_json = json_set(CASE WHEN"
                    " json_valid(fingerprint_json) THEN fingerprint_json ELSE '{}' END,"
                    " '$.copy_bytes_per_s', ?1, '$.copy_measured_at', ?2)"
                    " WHERE uuid = ?3 AND host = ?4",
                    &st);
  if (err) return err;
  sqlite3_bind_double(st, 1, bytes_per_s);
  bind_text(st, 2, when);
  bind_text(st, 3, uuid);
  bind_text(st, 4, host);
  err = step_done(db, st, "cannot record the copy bandwidth");
  if (err == 0 && sqlite3_changes(hct__db_sqlite(db)) == 0)
    return hct__error(HCT_ENOENT, "card '%s' on host '%s': not recorded (probe it first)", uuid,
                      host);
  return err;
}

int hct__db_device_upsert(hct_db_t *db, const hct_db_keys_t *k, const char *name,
                          const char *arch, const char *fingerprint_json) {
  sqlite3_stmt *st;
  int err = prepare(db,
                    "INSERT INTO devices (" KEY_COLS ", name, arch, fingerprint_json,"
                    " first_seen, last_seen) VALUES (?,?,?,?,?,?,?,?,?,?10,?10)"
                    " ON CONFLICT (uuid, host) DO UPDATE SET model_key = excluded.model_key,"
                    " driver_version = excluded.driver_version,"
                    " compiler_version = excluded.compiler_version,"
                    " hctune_version = excluded.hctune_version, name = excluded.name,"
                    " arch = excluded.arch, fingerprint_json = " KEEP_COPY_BW ","
                    " last_seen = excluded.last_seen",
                    &st);
  if (err) return err;
  int i = bind_keys(st, 1, k);
  bind_text(st, i++, name);
  bind_text(st, i++, arch);
  if (fingerprint_json) bind_text(st, i, fingerprint_json);
  sqlite3_bind_int64(st, 10, hct__unix_time());
  return step_done(db, st, "cannot record a device");
}

static int read_device(sqlite3_stmt *st, void *elem) {
  hct_db_device_t *d = elem;
  COL_COPY(st, 0, d->uuid);
  COL_COPY(st, 1, d->host);
  COL_COPY(st, 2, d->model_key);
  COL_COPY(st, 3, d->name);
  COL_COPY(st, 4, d->arch);
  d->fingerprint_json = col_dup(st, 5);
  d->first_seen = sqlite3_column_int64(st, 6);
  d->last_seen = sqlite3_column_int64(st, 7);
  if (sqlite3_column_type(st, 5) != SQLITE_NULL && d->fingerprint_json == NULL)
    return hct__error(HCT_ENOMEM, "out of memory reading devices");
  return 0;
}

static void free_devices(void *arr, int n) { hct__db_devices_free(arr, n); }

int hct__db_devices_list(hct_db_t *db, hct_db_device_t **out, int *n) {
  return list_rows(db,
                   "SELECT uuid, host, model_key, name, arch, fingerprint_json, first_seen,"
                   " last_seen FROM devices ORDER BY uuid, host",
                   sizeof(hct_db_device_t), read_device, free_devices, (void **)out, n,
                   "cannot list devices");
}

void hct__db_devices_free(hct_db_device_t *d, int n) {
  if (d == NULL) return;
  for (int i = 0; i < n; i++) free(d[i].fingerprint_json);
  free(d);
}

/* ---- runs ------------------------------------------------------------- */

int hct__db_run_begin(hct_db_t *db, const hct_db_keys_t *k, const char *op, const char *args,
                      char run_id[33]) {
  /* The id is drawn first rather than RETURNING'd, which SQLite before 3.35
   * lacks. */
  sqlite3_stmt *st;
  int err = prepare(db, "SELECT " NEW_UID, &st);
  if (err) return err;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) col_copy(st, 0, run_id, 33);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return hct__db_fail(db, rc, "cannot draw a run id");
  err = prepare(db,
                "INSERT INTO runs (id, " KEY_COLS ", op, args, started_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                &st);
  if (err) return err;
  bind_text(st, 1, run_id);
  int i = bind_keys(st, 2, k);
  bind_text(st, i++, op);
  if (args) bind_text(st, i, args);
  i++;
  sqlite3_bind_int64(st, i, hct__unix_time());
  return step_done(db, st, "cannot start a run");
}

int hct__db_run_end(hct_db_t *db, const char *run_id, const char *status) {
  sqlite3_stmt *st;
  int err = prepare(db, "UPDATE runs SET status = ?, ended_at = ? WHERE id = ?", &st);
  if (err) return err;
  bind_text(st, 1, status);
  sqlite3_bind_int64(st, 2, hct__unix_time());
  bind_text(st, 3, run_id);
  err = step_done(db, st, "cannot end a run");
  if (err == 0 && sqlite3_changes(hct__db_sqlite(db)) == 0)
    return hct__error(HCT_ENOENT, "database '%s': run '%s': no such run", hct__db_path(db),
                      run_id);
  return err;
}

int hct__db_run_set_parent(hct_db_t *db, const char *run_id, const char *parent_run) {
  sqlite3_stmt *st;
  /* args is the probe's own JSON object; anything else is kept under
   * "args" rather than lost. */
  int err = prepare(db,
                    "UPDATE runs SET args = json_set(CASE WHEN json_valid(args) AND"
                    " json_type(args) = 'object' THEN args WHEN args IS NULL THEN '{}'"
                    " ELSE json_object('args', args) END, '$.parent_run', ?) WHERE id = ?",
                    &st);
  if (err) return err;
  bind_text(st, 1, parent_run);
  bind_text(st, 2, run_id);
  err = step_done(db, st, "cannot tie a run to its parent");
  if (err == 0 && sqlite3_changes(hct__db_sqlite(db)) == 0)
    return hct__error(HCT_ENOENT, "database '%s': run '%s': no such run", hct__db_path(db),
                      run_id);
  return err;
}

int hct__db_run_set_breakdown(hct_db_t *db, const char *run_id, const char *breakdown_json) {
  sqlite3_stmt *st;
  /* As parent_run: args kept an object, the breakdown stored as JSON (a
   * text that is not JSON is refused by json() rather than stored). */
  int err = prepare(db,
                    "UPDATE runs SET args = json_set(CASE WHEN json_valid(args) AND"
                    " json_type(args) = 'object' THEN args WHEN args IS NULL THEN '{}'"
                    " ELSE json_object('args', args) END, '$.breakdown', json(?)) WHERE id = ?",
                    &st);
  if (err) return err;
  bind_text(st, 1, breakdown_json);
  bind_text(st, 2, run_id);
  err = step_done(db, st, "cannot record where the run's time went");
  if (err == 0 && sqlite3_changes(hct__db_sqlite(db)) == 0)
    return hct__error(HCT_ENOENT, "database '%s': run '%s': no such run", hct__db_path(db),
                      run_id);
  return err;
}

int hct__db_run_breakdown(hct_db_t *db, const char *uuid, const char *op, char **json,
                          char run_id[33], int64_t *started_at) {
  *json = NULL;
  run_id[0] = '\0';
  *started_at = 0;
  sqlite3_stmt *st;
  int err = prepare(db,
                    "SELECT id, started_at, json_extract(args, '$.breakdown') FROM runs"
                    " WHERE uuid = ? AND op = ? AND json_valid(args) AND"
                    " json_type(args, '$.breakdown') = 'object'"
                    " ORDER BY started_at DESC, rowid DESC LIMIT 1",
                    &st);
  if (err) return err;
  bind_text(st, 1, uuid);
  bind_text(st, 2, op);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    col_copy(st, 0, run_id, 33);
    *started_at = sqlite3_column_int64(st, 1);
    const char *j = (const char *)sqlite3_column_text(st, 2);
    *json = j ? strdup(j) : NULL;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return hct__db_fail(db, rc, "cannot read runs");
  if (rc == SQLITE_ROW && *json == NULL) return hct__error(HCT_ENOMEM, "out of memory reading a run");
  return 0;
}

int hct__db_run_children(hct_db_t *db, const char *parent, hct_db_run_t **out, int *n) {
  *out = NULL;
  *n = 0;
  sqlite3_stmt *st;
  int err = prepare(db,
                    "SELECT id, uuid, model_key, status, started_at, coalesce(ended_at, 0)"
                    " FROM runs WHERE CASE WHEN json_valid(args) AND json_type(args) = 'object'"
                    " THEN json_extract(args, '$.parent_run') END = ?1 AND ?1 != ''"
                    " ORDER BY uuid, started_at",
                    &st);
  if (err) return err;
  bind_text(st, 1, parent);
  int cap = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 8;
      hct_db_run_t *nr = realloc(*out, (size_t)cap * sizeof *nr);
      if (nr == NULL) {
        sqlite3_finalize(st);
        free(*out);
        *out = NULL;
        *n = 0;
        return hct__error(HCT_ENOMEM, "out of memory reading runs");
      }
      *out = nr;
    }
    hct_db_run_t *r = &(*out)[(*n)++];
    memset(r, 0, sizeof *r);
    col_copy(st, 0, r->id, sizeof r->id);
    col_copy(st, 1, r->uuid, sizeof r->uuid);
    col_copy(st, 2, r->model_key, sizeof r->model_key);
    col_copy(st, 3, r->status, sizeof r->status);
    r->started_at = sqlite3_column_int64(st, 4);
    r->ended_at = sqlite3_column_int64(st, 5);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    free(*out);
    *out = NULL;
    *n = 0;
    return hct__db_fail(db, rc, "cannot read runs");
  }
  return 0;
}

/* ---- trials ------------------------------------------------------------- */

int hct__db_trial_add(hct_db_t *db, const hct_db_trial_t *t, int64_t *id) {
  sqlite3_stmt *st;
  int err = prepare(db,
                    "INSERT INTO trials (uid, " KEY_COLS ", run_id, op, variant, params,"
                    " template_hash, binary_key, tokens, pending, kind, status, seed, samples,"
                    " median_us, min_us, p10_us, p90_us, ci_lo_us, ci_hi_us, converged,"
                    " throttled, cold, figures_json, log, created_at, software_key, software_json)"
                    " VALUES (" NEW_UID ",?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                    "?,?,?,?)",
                    &st);
  if (err) return err;
  int i = bind_keys(st, 1, &t->keys);
  bind_text(st, i++, t->run_id);
  bind_text(st, i++, t->op);
  bind_text(st, i++, t->variant);
  bind_text(st, i++, t->params[0] ? t->params : "{}");
  bind_text(st, i++, t->template_hash);
  bind_text(st, i++, t->binary_key);
  sqlite3_bind_int(st, i++, t->tokens);
  sqlite3_bind_int(st, i++, t->pending);
  bind_text(st, i++, t->kind);
  bind_text(st, i++, t->status);
  /* SQLite integers are signed: the seed's bits travel as int64. */
  sqlite3_bind_int64(st, i++, (int64_t)t->seed);
  sqlite3_bind_int(st, i++, t->samples);
  sqlite3_bind_double(st, i++, t->median_us);
  sqlite3_bind_double(st, i++, t->min_us);
  sqlite3_bind_double(st, i++, t->p10_us);
  sqlite3_bind_double(st, i++, t->p90_us);
  sqlite3_bind_double(st, i++, t->ci_lo_us);
  sqlite3_bind_double(st, i++, t->ci_hi_us);
  sqlite3_bind_int(st, i++, t->converged);
  sqlite3_bind_int(st, i++, t->throttled);
  sqlite3_bind_int(st, i++, t->cold);
  if (t->figures_json) bind_text(st, i, t->figures_json);
  i++;
  if (t->log) bind_text(st, i, t->log);
  i++;
  sqlite3_bind_int64(st, i++, hct__unix_time());
  if (t->software_key[0]) bind_text(st, i, t->software_key);
  i++;
  if (t->software_json[0]) bind_text(st, i, t->software_json);
  err = step_done(db, st, "cannot add a trial");
  if (err == 0 && id) *id = sqlite3_last_insert_rowid(hct__db_sqlite(db));
  return err;
}

/* Columns of a trial as JSON: name, and whether it is text, integer or
 * real.  The seed is an integer whose bits are a uint64. */
static const struct {
  const char *name;
  char type; /* 't' text, 'i' integer, 'r' real, 'u' uint64, 'j' JSON text */
} trial_cols[] = {
  {"id", 'i'}, {"uid", 't'}, {"host", 't'}, {"uuid", 't'}, {"model_key", 't'},
  {"driver_version", 't'}, {"compiler_version", 't'}, {"hctune_version", 't'},
  {"run_id", 't'}, {"op", 't'}, {"variant", 't'}, {"params", 'j'}, {"template_hash", 't'},
  {"binary_key", 't'}, {"tokens", 'i'}, {"pending", 'i'}, {"kind", 't'}, {"status", 't'},
  {"seed", 'u'}, {"samples", 'i'}, {"median_us", 'r'}, {"min_us", 'r'}, {"p10_us", 'r'},
  {"p90_us", 'r'}, {"ci_lo_us", 'r'}, {"ci_hi_us", 'r'}, {"converged", 'i'},
  {"throttled", 'i'}, {"cold", 'i'}, {"figures_json", 'j'}, {"log", 't'}, {"created_at", 'i'},
  {"software_key", 't'}, {"software_json", 'j'},
};

static json_t *trial_value(sqlite3_stmt *st, int i, char type) {
  if (sqlite3_column_type(st, i) == SQLITE_NULL) return json_null();
  switch (type) {
    case 'i': return json_integer(sqlite3_column_int64(st, i));
    case 'r': return json_real(sqlite3_column_double(st, i));
    case 'u': {
      /* JSON readers lose bits past 2^53: the seed goes out as text. */
      char buf[24];
      snprintf(buf, sizeof buf, "%llu", (unsigned long long)(uint64_t)sqlite3_column_int64(st, i));
      return json_string(buf);
    }
    case 'j': {
      const char *s = (const char *)sqlite3_column_text(st, i);
      json_t *v = json_loads(s, JSON_DECODE_ANY, NULL);
      /* A row written by hand or by a buggy writer still shows. */
      return v ? v : json_string(s);
    }
    default: {
      const char *s = (const char *)sqlite3_column_text(st, i);
      return json_string(s ? s : "");
    }
  }
}

int hct__db_trials_json(hct_db_t *db, const char *uuid, const char *op, const char *variant,
                        int tokens, char **json) {
  char sql[2048];
  size_t off = (size_t)snprintf(sql, sizeof sql, "SELECT ");
  for (size_t c = 0; c < HCT_ARRAY_SIZE(trial_cols); c++)
    off += (size_t)snprintf(sql + off, sizeof sql - off, "%s%s", c ? ", " : "", trial_cols[c].name);
  snprintf(sql + off, sizeof sql - off,
           " FROM trials WHERE (?1 = '' OR substr(uuid, 1, length(?1)) = ?1)"
           " AND (?2 = '' OR op = ?2) AND (?3 = '' OR variant = ?3)"
           " AND (?4 <= 0 OR tokens = ?4) ORDER BY created_at DESC, id DESC");
  sqlite3_stmt *st;
  *json = NULL;
  int err = prepare(db, sql, &st);
  if (err) return err;
  bind_text(st, 1, uuid);
  bind_text(st, 2, op);
  bind_text(st, 3, variant);
  sqlite3_bind_int(st, 4, tokens);
  json_t *arr = json_array();
  int rc = SQLITE_DONE;
  while (arr && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    json_t *o = json_object();
    if (o == NULL) break;
    for (size_t c = 0; c < HCT_ARRAY_SIZE(trial_cols); c++) {
      const char *name = trial_cols[c].name;
      /* "figures" reads better than the column's name in the output. */
      if (strcmp(name, "figures_json") == 0) name = "figures";
      json_object_set_new(o, name, trial_value(st, (int)c, trial_cols[c].type));
    }
    json_array_append_new(arr, o);
  }
  if (arr == NULL)
    err = hct__error(HCT_ENOMEM, "database '%s': out of memory", hct__db_path(db));
  else if (rc != SQLITE_DONE)
    err = rc == SQLITE_ROW ? hct__error(HCT_ENOMEM, "out of memory listing trials")
                           : hct__db_fail(db, rc, "cannot list trials");
  sqlite3_finalize(st);
  if (err == 0) {
    *json = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (*json == NULL) err = hct__error(HCT_ENOMEM, "out of memory writing trials as JSON");
  }
  json_decref(arr);
  return err;
}

/* ---- decisions ---------------------------------------------------------- */

#define DECISION_COLS                                                             \
  KEY_COLS ", op, parity, tmin, tmax, variant, params, variant_class, template_hash," \
           " binary_key, source, median_us, baseline_us, ci_lo_us, ci_hi_us, samples,"  \
           " decided_at, run_id, evidence_json, software_key, software_json"

static int same_group(const hct_db_decision_t *a, const hct_db_decision_t *b) {
  return strcmp(a->keys.uuid, b->keys.uuid) == 0 && strcmp(a->op, b->op) == 0 &&
         strcmp(a->parity, b->parity) == 0;
}

static int check_ranges(hct_db_t *db, const hct_db_decision_t *d, int n) {
  for (int i = 0; i < n; i++) {
    if (!same_group(&d[0], &d[i]))
      return hct__error(HCT_EINVAL, "decisions for '%s': every range must share uuid, op and "
                        "parity", hct__db_path(db));
    if (d[i].tmin < 1 || d[i].tmax < d[i].tmin)
      return hct__error(HCT_EINVAL, "decision of '%s' on '%s': bad token range %d-%d", d[i].op,
                        d[i].keys.uuid, d[i].tmin, d[i].tmax);
    if (i > 0 && d[i].tmin <= d[i - 1].tmax)
      return hct__error(HCT_EINVAL, "decision of '%s' on '%s': range %d-%d overlaps or precedes "
                        "%d-%d", d[i].op, d[i].keys.uuid, d[i].tmin, d[i].tmax, d[i - 1].tmin,
                        d[i - 1].tmax);
  }
  return 0;
}

/* One statement of the replacement, bound with (uuid, op, parity, lo, hi)
 * as ?1..?5. */
static int run_group_sql(hct_db_t *db, const char *sql, const hct_db_decision_t *d, int lo,
                         int hi) {
  sqlite3_stmt *st;
  int err = prepare(db, sql, &st);
  if (err) return err;
  bind_text(st, 1, d->keys.uuid);
  bind_text(st, 2, d->op);
  bind_text(st, 3, d->parity);
  sqlite3_bind_int(st, 4, lo);
  sqlite3_bind_int(st, 5, hi);
  return step_done(db, st, "cannot replace decisions");
}

/*
 * The ranges of one (uuid, op, parity) never overlap.  An old range that
 * sticks out of a new range [lo, hi] keeps its outside part: tokens the
 * new probe did not measure keep their old answer.
 */
static const char *const trim_sql[] = {
  /* The part of a range past hi, as a new row. */
  "INSERT INTO decisions (uid, " DECISION_COLS ") SELECT " NEW_UID ", " KEY_COLS ", op, parity,"
  " ?5 + 1, tmax, variant, params, variant_class, template_hash, binary_key, source,"
  " median_us, baseline_us, ci_lo_us, ci_hi_us, samples, decided_at, run_id, evidence_json,"
  " software_key, software_json FROM decisions WHERE uuid = ?1 AND op = ?2 AND parity = ?3 AND tmin <= ?5 AND tmax > ?5",
  /* The part before lo stays in place. */
  "UPDATE decisions SET tmax = ?4 - 1 WHERE uuid = ?1 AND op = ?2 AND parity = ?3"
  " AND tmin < ?4 AND tmax >= ?4",
  /* What is left starts inside [lo, hi]. */
  "DELETE FROM decisions WHERE uuid = ?1 AND op = ?2 AND parity = ?3 AND tmin >= ?4"
  " AND tmin <= ?5",
};

static int insert_decision(hct_db_t *db, const hct_db_decision_t *d) {
  sqlite3_stmt *st;
  int err = prepare(db,
                    "INSERT INTO decisions (uid, " DECISION_COLS ") VALUES (" NEW_UID
                    ",?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    &st);
  if (err) return err;
  int i = bind_keys(st, 1, &d->keys);
  bind_text(st, i++, d->op);
  bind_text(st, i++, d->parity);
  sqlite3_bind_int(st, i++, d->tmin);
  sqlite3_bind_int(st, i++, d->tmax);
  bind_text(st, i++, d->variant);
  bind_text(st, i++, d->params[0] ? d->params : "{}");
  bind_text(st, i++, d->variant_class);
  bind_text(st, i++, d->template_hash);
  bind_text(st, i++, d->binary_key);
  bind_text(st, i++, d->source[0] ? d->source : "probe");
  sqlite3_bind_double(st, i++, d->median_us);
  sqlite3_bind_double(st, i++, d->baseline_us);
  sqlite3_bind_double(st, i++, d->ci_lo_us);
  sqlite3_bind_double(st, i++, d->ci_hi_us);
  sqlite3_bind_int(st, i++, d->samples);
  sqlite3_bind_int64(st, i++, d->decided_at ? d->decided_at : hct__unix_time());
  bind_text(st, i++, d->run_id);
  bind_text(st, i++, d->evidence_json[0] ? d->evidence_json : "{}");
  if (d->software_key[0]) bind_text(st, i, d->software_key);
  i++;
  if (d->software_json[0]) bind_text(st, i, d->software_json);
  return step_done(db, st, "cannot insert a decision");
}

int hct__db_decisions_replace(hct_db_t *db, const hct_db_decision_t *d, int n) {
  if (n <= 0) return 0;
  int err = check_ranges(db, d, n);
  if (err) return err;
  err = hct__db_tx_begin(db);
  if (err) return err;
  /* Range by range: token counts between the new ranges were not measured
   * by this probe and keep their old answer. */
  for (int i = 0; err == 0 && i < n; i++) {
    for (size_t s = 0; err == 0 && s < HCT_ARRAY_SIZE(trim_sql); s++)
      err = run_group_sql(db, trim_sql[s], &d[i], d[i].tmin, d[i].tmax);
    if (err == 0) err = insert_decision(db, &d[i]);
  }
  return hct__db_tx_end(db, err);
}

static int read_decision(sqlite3_stmt *st, void *elem) {
  hct_db_decision_t *d = elem;
  int i = read_keys(st, 0, &d->keys);
  COL_COPY(st, i++, d->op);
  COL_COPY(st, i++, d->parity);
  d->tmin = sqlite3_column_int(st, i++);
  d->tmax = sqlite3_column_int(st, i++);
  COL_COPY(st, i++, d->variant);
  COL_COPY(st, i++, d->params);
  COL_COPY(st, i++, d->variant_class);
  COL_COPY(st, i++, d->template_hash);
  COL_COPY(st, i++, d->binary_key);
  COL_COPY(st, i++, d->source);
  d->median_us = sqlite3_column_double(st, i++);
  d->baseline_us = sqlite3_column_double(st, i++);
  d->ci_lo_us = sqlite3_column_double(st, i++);
  d->ci_hi_us = sqlite3_column_double(st, i++);
  d->samples = sqlite3_column_int(st, i++);
  d->decided_at = sqlite3_column_int64(st, i++);
  COL_COPY(st, i++, d->run_id);
  COL_COPY(st, i++, d->evidence_json);
  COL_COPY(st, i++, d->software_key);
  COL_COPY(st, i++, d->software_json);
  return 0;
}

int hct__db_decisions_keyed(hct_db_t *db) {
  sqlite3_stmt *st;
  int err = prepare(db, "SELECT EXISTS (SELECT 1 FROM decisions WHERE software_key IS NOT NULL)", &st);
  if (err) return err;
  int rc = sqlite3_step(st), keyed = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? keyed : hct__db_fail(db, rc, "cannot look for software keys");
}

int hct__db_decisions_list(hct_db_t *db, hct_db_decision_t **out, int *n) {
  return list_rows(db, "SELECT " DECISION_COLS " FROM decisions ORDER BY uuid, op, parity, tmin",
                   sizeof(hct_db_decision_t), read_decision, NULL, (void **)out, n,
                   "cannot list decisions");
}

/* ---- faults ------------------------------------------------------------- */

int hct__db_fault_add(hct_db_t *db, const hct_db_fault_t *f) {
  sqlite3_stmt *st;
  int err = prepare(db,
                    "INSERT INTO faults (uid, " KEY_COLS ", op, variant, params, template_hash,"
                    " tokens, reason, log, created_at) VALUES (" NEW_UID
                    ",?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    &st);
  if (err) return err;
  int i = bind_keys(st, 1, &f->keys);
  bind_text(st, i++, f->op);
  bind_text(st, i++, f->variant);
  bind_text(st, i++, f->params[0] ? f->params : "{}");
  bind_text(st, i++, f->template_hash);
  sqlite3_bind_int(st, i++, f->tokens);
  bind_text(st, i++, f->reason);
  if (f->log) bind_text(st, i, f->log);
  i++;
  sqlite3_bind_int64(st, i, f->created_at ? f->created_at : hct__unix_time());
  return step_done(db, st, "cannot record a fault");
}

int hct__db_fault_check(hct_db_t *db, const hct_db_keys_t *k, const char *op,
                        const char *variant, const char *params, const char *template_hash,
                        int tokens) {
  /* A fault at T = 0 holds for every T.  A timeout at T means the kernel
   * was too slow there, and work grows with T: larger counts are out too.
   * Any other fault holds for its own T only. */
  sqlite3_stmt *st;
  int err = prepare(db,
                    "SELECT EXISTS (SELECT 1 FROM faults WHERE uuid = ?1 AND driver_version = ?2"
                    " AND op = ?3 AND template_hash = ?4 AND variant = ?5 AND params = ?6"
                    " AND (tokens = 0 OR tokens = ?7 OR (reason = 'timeout' AND tokens <= ?7)))",
                    &st);
  if (err) return err;
  bind_text(st, 1, k->uuid);
  bind_text(st, 2, k->driver_version);
  bind_text(st, 3, op);
  bind_text(st, 4, template_hash);
  bind_text(st, 5, variant);
  bind_text(st, 6, params && params[0] ? params : "{}");
  sqlite3_bind_int(st, 7, tokens);
  int rc = sqlite3_step(st);
  int r = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : hct__db_fail(db, rc, "cannot check faults");
  sqlite3_finalize(st);
  return r;
}

static int read_fault(sqlite3_stmt *st, void *elem) {
  hct_db_fault_t *f = elem;
  int i = read_keys(st, 0, &f->keys);
  COL_COPY(st, i++, f->op);
  COL_COPY(st, i++, f->variant);
  COL_COPY(st, i++, f->params);
  COL_COPY(st, i++, f->template_hash);
  f->tokens = sqlite3_column_int(st, i++);
  COL_COPY(st, i++, f->reason);
  f->log = col_dup(st, i);
  if (sqlite3_column_type(st, i++) != SQLITE_NULL && f->log == NULL)
    return hct__error(HCT_ENOMEM, "out of memory reading faults");
  f->created_at = sqlite3_column_int64(st, i);
  return 0;
}

static void free_faults(void *arr, int n) { hct__db_faults_free(arr, n); }

int hct__db_faults_list(hct_db_t *db, hct_db_fault_t **out, int *n) {
  return list_rows(db,
                   "SELECT " KEY_COLS ", op, variant, params, template_hash, tokens, reason,"
                   " log, created_at FROM faults ORDER BY uuid, op, variant, params, tokens,"
                   " created_at",
                   sizeof(hct_db_fault_t), read_fault, free_faults, (void **)out, n,
                   "cannot list faults");
}

void hct__db_faults_free(hct_db_fault_t *f, int n) {
  if (f == NULL) return;
  for (int i = 0; i < n; i++) free(f[i].log);
  free(f);
}

/* ---- pins --------------------------------------------------------------- */

static int pin_delete(hct_db_t *db, const char *uuid, const char *op, int tmin, int tmax) {
  sqlite3_stmt *st;
  int err = prepare(db,
                    "DELETE FROM pins WHERE uuid = ? AND op = ? AND tmin <= ? AND tmax >= ?",
                    &st);
  if (err) return err;
  bind_text(st, 1, uuid);
  bind_text(st, 2, op);
  sqlite3_bind_int(st, 3, tmax);
  sqlite3_bind_int(st, 4, tmin);
  err = step_done(db, st, "cannot remove pins");
  return err ? err : sqlite3_changes(hct__db_sqlite(db));
}

int hct__db_pin_add(hct_db_t *db, const hct_db_pin_t *p) {
  if (p->tmin < 1 || p->tmax < p->tmin)
    return hct__error(HCT_EINVAL, "pin of '%s': bad token range %d-%d", p->op, p->tmin, p->tmax);
  int err = hct__db_tx_begin(db);
  if (err) return err;
  err = pin_delete(db, p->uuid, p->op, p->tmin, p->tmax);
  if (err >= 0) {
    sqlite3_stmt *st;
    err = prepare(db,
                  "INSERT INTO pins (uid, uuid, op, tmin, tmax, variant, params, until,"
                  " created_at) VALUES (" NEW_UID ",?,?,?,?,?,?,?,?)",
                  &st);
    if (err == 0) {
      bind_text(st, 1, p->uuid[0] ? p->uuid : "*");
      bind_text(st, 2, p->op);
      sqlite3_bind_int(st, 3, p->tmin);
      sqlite3_bind_int(st, 4, p->tmax);
      bind_text(st, 5, p->variant);
      bind_text(st, 6, p->params[0] ? p->params : "{}");
      sqlite3_bind_int64(st, 7, p->until);
      sqlite3_bind_int64(st, 8, p->created_at ? p->created_at : hct__unix_time());
      err = step_done(db, st, "cannot add a pin");
    }
  }
  return hct__db_tx_end(db, err < 0 ? err : 0);
}

int hct__db_pin_remove(hct_db_t *db, const char *uuid, const char *op, int tmin, int tmax) {
  return pin_delete(db, uuid, op, tmin, tmax);
}

static int read_pin(sqlite3_stmt *st, void *elem) {
  hct_db_pin_t *p = elem;
  COL_COPY(st, 0, p->uuid);
  COL_COPY(st, 1, p->op);
  p->tmin = sqlite3_column_int(st, 2);
  p->tmax = sqlite3_column_int(st, 3);
  COL_COPY(st, 4, p->variant);
  COL_COPY(st, 5, p->params);
  p->until = sqlite3_column_int64(st, 6);
  p->created_at = sqlite3_column_int64(st, 7);
  return 0;
}

int hct__db_pins_list(hct_db_t *db, hct_db_pin_t **out, int *n) {
  return list_rows(db,
                   "SELECT uuid, op, tmin, tmax, variant, params, until, created_at FROM pins"
                   " ORDER BY uuid, op, tmin",
                   sizeof(hct_db_pin_t), read_pin, NULL, (void **)out, n, "cannot list pins");
}
