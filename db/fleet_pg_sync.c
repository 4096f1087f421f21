/*
 * fleet_pg_sync.c: what travels between hosts and the live fleet's server
 * (db/fleet_pg.c connects and runs the statements): rows of fleet files
 * to and from the server, a host's pushes, the recompute of a key's
 * decisions, the daemons' pull and the status.
 *
 * Rows travel as one JSON array a statement (json_to_recordset on the
 * server): one round trip per table whatever the row count, and no value
 * is ever spliced into SQL text.  Rows coming back are checked like rows of
 * an imported file before anything uses them.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleet_pg.h"

#ifdef HCT_NO_PG

#define NO_PG()                                                                          \
  hct__error(HCT_EUNSUPPORTED, "fleet: this hctune was built without PostgreSQL (make " \
             "STATIC=1); use a build with libpq for the live fleet")

int hct__pg_push(hct_pg_t *p, hct_db_t *local, const char *kernels_dir, hct_pg_push_t *st) {
  return NO_PG();
}
int hct__pg_recompute(hct_pg_t *p, const char *model_key, const char *driver,
                      const char *compiler, const char *hctune, double *ms) {
  return NO_PG();
}
int hct__pg_status(hct_pg_t *p, json_t **out) { return NO_PG(); }
int hct__pg_pull(hct_pg_t *p, const char *const *models, int n, hct_fleet_t *out,
                 int64_t *revision) {
  memset(out, 0, sizeof *out);
  return NO_PG();
}

#else /* with libpq */

#include "fleet_pg_internal.h"

/* ---- rows: fleet file rows to and from the server ------------------------- */

/* A column's SQL type in json_to_recordset's definition list. */
static const char *sql_type(const hct_fleet_col_t *c) {
  return c->kind == 'i' ? "bigint" : c->kind == 'r' ? "float8" : "text";
}

static const char *col_text(const hct_fleet_col_t *c, const char *row) {
  const void *p = row + c->off;
  const char *s = c->heap ? *(const char *const *)p : (const char *)p;
  return s ? s : "";
}

/* n rows of table T as one JSON array of objects, a member per column. */
static char *rows_json(const hct_fleet_table_t *T, const void *arr, int n) {
  json_t *a = json_array();
  for (int r = 0; a != NULL && r < n; r++) {
    const char *row = (const char *)arr + (size_t)r * T->row_size;
    json_t *o = json_object();
    for (int c = 0; o != NULL && c < T->ncols; c++) {
      const hct_fleet_col_t *C = &T->cols[c];
      json_t *v = C->kind == 'i'   ? json_integer(*(const int64_t *)(row + C->off))
                  : C->kind == 'r' ? json_real(*(const double *)(row + C->off))
                                   : json_string(col_text(C, row));
      /* json_string refuses text that is not UTF-8: rows of an export
       * were checked, so this is out of memory. */
      if (v == NULL || json_object_set_new(o, C->name, v) != 0) {
        json_decref(o);
        o = NULL;
      }
    }
    if (o == NULL || json_array_append_new(a, o) != 0) {
      json_decref(a);
      a = NULL;
    }
  }
  char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  return s;
}

/* "c1, c2, ..." (quoted names) and "c1 type, c2 type, ..." of table T. */
static void col_lists(const hct_fleet_table_t *T, char *names, size_t nlen, char *defs,
                      size_t dlen) {
  size_t a = 0, b = 0;
  names[0] = defs[0] = '\0';
  for (int c = 0; c < T->ncols; c++) {
    a += (size_t)snprintf(names + a, a < nlen ? nlen - a : 0, "%s\"%s\"", c ? ", " : "",
                          T->cols[c].name);
    b += (size_t)snprintf(defs + b, b < dlen ? dlen - b : 0, "%s\"%s\" %s", c ? ", " : "",
                          T->cols[c].name, sql_type(&T->cols[c]));
  }
}

/* Reads one value of a server row into `dst` by its column's rules; 0, or
 * HCT_EINVAL with "why" set.  Text goes through hct__fleet_check_text, the
 * check of a fleet file's values; numbers get the same ranges as there. */
static int take_value(const PGresult *r, int row, int col, const hct_fleet_col_t *C, char *dst,
                      char *why, size_t wlen) {
  if (PQgetisnull(r, row, col)) {
    snprintf(why, wlen, "NULL");
    return HCT_EINVAL;
  }
  const char *s = PQgetvalue(r, row, col);
  size_t len = (size_t)PQgetlength(r, row, col);
  if (C->kind == 'i') {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
      snprintf(why, wlen, "not an integer");
      return HCT_EINVAL;
    }
    if (v < C->lo || v > C->hi) {
      snprintf(why, wlen, "%lld is outside %lld..%lld", v, (long long)C->lo, (long long)C->hi);
      return HCT_EINVAL;
    }
    *(int64_t *)dst = v;
    return 0;
  }
  if (C->kind == 'r') {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 1e12) {
      snprintf(why, wlen, "'%.24s' is not a finite figure in 0..1e12", s);
      return HCT_EINVAL;
    }
    *(double *)dst = v;
    return 0;
  }
  int err = hct__fleet_check_text(C, s, len, why, wlen);
  if (err != 0) return err;
  if (C->heap) {
    char *p = malloc(len + 1);
    if (p == NULL) return HCT_ENOMEM;
    memcpy(p, s, len + 1);
    *(char **)dst = p;
  } else {
    memcpy(dst, s, len + 1);
  }
  return 0;
}

static void free_rows(const hct_fleet_table_t *T, char *arr, int n) {
  for (int r = 0; arr != NULL && r < n; r++)
    for (int c = 0; c < T->ncols; c++)
      if (T->cols[c].heap) free(*(char **)(arr + (size_t)r * T->row_size + T->cols[c].off));
  free(arr);
}

/*
 * Runs `where` (a condition on table T with parameters vals) and reads the
 * rows into the set's array of that table, each value checked; any bad
 * value refuses the whole read with one line naming table, row and column.
 */
static int read_table(hct_pg_t *f, const char *table, const char *where, int nvals,
                      const char *const *vals, hct_fleet_t *set) {
  const hct_fleet_table_t *T = hct__fleet_table(table);
  char names[2048], defs[4096], sql[16384];
  col_lists(T, names, sizeof names, defs, sizeof defs);
  snprintf(sql, sizeof sql, "SELECT %s FROM hctune.%s WHERE %s ORDER BY %s", names, table,
           where, T->order);
  PGresult *r;
  char what[64];
  snprintf(what, sizeof what, "cannot read %s", table);
  int err = hct__pg_run(f, sql, nvals, vals, &r, what);
  if (err) return err;
  int n = PQntuples(r);
  /* The limit of a fleet file's table: what a reader allocates for. */
  if (n > T->max_rows) {
    PQclear(r);
    return hct__error(HCT_ERANGE, "fleet '%s': more than %d %s in one answer", hct__pg_shown(f),
                      T->max_rows, table);
  }
  char *arr = calloc((size_t)n + 1, T->row_size);
  if (arr == NULL) {
    PQclear(r);
    return hct__error(HCT_ENOMEM, "fleet: out of memory for %d %s", n, table);
  }
  int done = 0;
  for (int i = 0; err == 0 && i < n; i++, done = i)
    for (int c = 0; c < T->ncols; c++) {
      char why[160];
      int e = take_value(r, i, c, &T->cols[c], arr + (size_t)i * T->row_size + T->cols[c].off,
                         why, sizeof why);
      if (e == HCT_ENOMEM) err = hct__error(e, "fleet: out of memory reading %s", table);
      else if (e != 0)
        err = hct__error(HCT_EPROTO, "fleet '%s': table %s, row %d: column '%s': %s (the "
                         "answer is refused, nothing of it used)",
                         hct__pg_shown(f), table, i + 1, T->cols[c].name, why);
      if (err) {
        done = i + 1; /* this row's heap values too */
        break;
      }
    }
  PQclear(r);
  if (err) {
    free_rows(T, arr, done);
    return err;
  }
  /* Appended to what the set holds already (none, in every use here). */
  free_rows(T, *(char **)((char *)set + T->arr_off), *(int *)((char *)set + T->n_off));
  *(char **)((char *)set + T->arr_off) = arr;
  *(int *)((char *)set + T->n_off) = n;
  return 0;
}

/* The decisions' token ranges of one (card, op, parity) follow each other
 * and never overlap (rows sorted as the table's order says): the fleet
 * file reader's rule. */
static int check_ranges(hct_pg_t *f, const hct_fleet_t *set) {
  char source[600];
  snprintf(source, sizeof source, "fleet '%s' (refused)", hct__pg_shown(f));
  return hct__fleet_check_ranges(set, source, HCT_EPROTO);
}

/* ---- the pull --------------------------------------------------------------- */

int hct__pg_pull(hct_pg_t *f, const char *const *models, int n, hct_fleet_t *out,
                 int64_t *revision) {
  memset(out, 0, sizeof *out);
  if (revision != NULL) *revision = 0;
  json_t *arr = json_array();
  for (int i = 0; arr && i < n; i++)
    if (json_array_append_new(arr, json_string(models[i])) != 0) {
      json_decref(arr);
      arr = NULL;
    }
  char *list = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
  json_decref(arr);
  if (list == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  const char *vals[] = {list, models == NULL ? "t" : "f"};
  /* One snapshot for the revision and the rows, so the two agree. */
  int err = hct__pg_run0(f, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "cannot begin");
  PGresult *r = NULL;
  if (err == 0)
    err = hct__pg_run(f,
              "SELECT coalesce(max(revision), 0) FROM hctune.keys WHERE $2::boolean OR model_key"
              " IN (SELECT json_array_elements_text($1::json))",
              2, vals, &r, "cannot read the revision");
  if (err == 0) {
    if (revision != NULL) *revision = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    err = read_table(f, "decisions",
                     "$2::boolean OR model_key IN (SELECT json_array_elements_text($1::json))", 2,
                     vals, out);
  }
  if (err == 0) err = check_ranges(f, out);
  err = hct__pg_tx_end(f, err);
  free(list);
  if (err) hct__fleet_free(out);
  return err;
}

/* ---- the recompute ----------------------------------------------------------- */

#define KEY_WHERE \
  "model_key = $1 AND driver_version = $2 AND compiler_version = $3 AND hctune_version = $4"

/* Inserts n rows of table T from `arr` with extra columns: `extra_names`
 * (", a, b"), their values `extra_sql` (", $2, $3") and parameters. */
static int insert_rows(hct_pg_t *f, const char *table, const void *arr, int n,
                       const char *extra_names, const char *extra_sql, int nextra,
                       const char *const *extra, const char *conflict) {
  if (n == 0) return 0;
  const hct_fleet_table_t *T = hct__fleet_table(table);
  char *rows = rows_json(T, arr, n);
  if (rows == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  char names[2048], defs[4096], sql[16384];
  col_lists(T, names, sizeof names, defs, sizeof defs);
  snprintf(sql, sizeof sql,
           "INSERT INTO hctune.%s (%s%s) SELECT %s%s FROM json_to_recordset($1::json) AS x(%s)"
           " %s",
           table, names, extra_names, names, extra_sql, defs, conflict);
  const char *vals[8] = {rows};
  for (int i = 0; i < nextra && i < 7; i++) vals[i + 1] = extra[i];
  char what[64];
  snprintf(what, sizeof what, "cannot write %s", table);
  int err = hct__pg_run(f, sql, 1 + nextra, vals, NULL, what);
  free(rows);
  return err;
}

/* Under the key's lock, inside the caller's transaction. */
static int recompute_locked(hct_pg_t *f, const char *const key[4]) {
  int err = hct__pg_run(f, HCT_PG_KEY_LOCK_SQL("pg_advisory_xact_lock"), 4, key, NULL,
                "cannot lock a key");
  if (err) return err;
  /* READ COMMITTED: each statement below sees every push committed before
   * the lock was granted, so the last recompute of a key has seen all of
   * its rows. */
  hct_fleet_t in, out;
  memset(&in, 0, sizeof in);
  memset(&out, 0, sizeof out);
  err = read_table(f, "trials", KEY_WHERE " AND kind <> 'compile'", 4, key, &in);
  if (err == 0) err = read_table(f, "faults", KEY_WHERE, 4, key, &in);
  if (err == 0)
    err = read_table(f, "variants",
                     "op IN (SELECT DISTINCT op FROM hctune.trials WHERE " KEY_WHERE ")", 4, key,
                     &in);
  /* The rule of `db merge`, on this key's pool alone: its groups are the
   * key's ops. */
  if (err == 0) err = hct__fleet_merge(&in, 1, NULL, &out);
  int outliers = 0, conflicts = 0;
  for (int i = 0; err == 0 && i < out.n_flags; i++) {
    outliers += strcmp(out.flags[i].kind, "outlier") == 0;
    conflicts += strcmp(out.flags[i].kind, "conflict") == 0;
  }
  int hosts = 0, cards = 0;
  PGresult *r = NULL;
  if (err == 0)
    err = hct__pg_run(f, "SELECT count(DISTINCT host), count(DISTINCT (uuid, host)) FROM hctune.trials"
                 " WHERE " KEY_WHERE, 4, key, &r, "cannot count a key's cards");
  if (err == 0) {
    hosts = atoi(PQgetvalue(r, 0, 0));
    cards = atoi(PQgetvalue(r, 0, 1));
    PQclear(r);
  }
  char num[6][24];
  snprintf(num[0], sizeof num[0], "%d", in.n_trials);
  snprintf(num[1], sizeof num[1], "%d", hosts);
  snprintf(num[2], sizeof num[2], "%d", cards);
  snprintf(num[3], sizeof num[3], "%d", out.n_decisions);
  snprintf(num[4], sizeof num[4], "%d", outliers);
  snprintf(num[5], sizeof num[5], "%d", conflicts);
  if (err == 0) {
    const char *kv[] = {key[0], key[1], key[2], key[3], num[0], num[1], num[2], num[3], num[4],
                        num[5]};
    err = hct__pg_run(f,
              "INSERT INTO hctune.keys (model_key, driver_version, compiler_version,"
              " hctune_version, revision, recomputed_at, trials, hosts, cards, decisions,"
              " outliers, conflicts) VALUES ($1, $2, $3, $4, nextval('hctune.revisions'),"
              " extract(epoch FROM now())::bigint, $5::bigint, $6::bigint, $7::bigint,"
              " $8::bigint, $9::bigint, $10::bigint)"
              " ON CONFLICT (model_key, driver_version, compiler_version, hctune_version)"
              " DO UPDATE SET revision = excluded.revision, recomputed_at = excluded.recomputed_at,"
              " trials = excluded.trials, hosts = excluded.hosts, cards = excluded.cards,"
              " decisions = excluded.decisions, outliers = excluded.outliers,"
              " conflicts = excluded.conflicts",
              10, kv, NULL, "cannot record a key");
  }
  if (err == 0)
    err = hct__pg_run(f, "DELETE FROM hctune.decisions WHERE " KEY_WHERE, 4, key, NULL,
              "cannot replace a key's decisions");
  if (err == 0)
    err = hct__pg_run(f,
              "DELETE FROM hctune.flags WHERE model_key = $1 AND key_driver = $2 AND"
              " key_compiler = $3 AND key_hctune = $4",
              4, key, NULL, "cannot replace a key's flags");
  if (err == 0)
    err = insert_rows(f, "decisions", out.decisions, out.n_decisions, ", revision",
                      ", (SELECT revision FROM hctune.keys WHERE model_key = $2 AND"
                      " driver_version = $3 AND compiler_version = $4 AND hctune_version = $5)",
                      4, key, "");
  if (err == 0)
    err = insert_rows(f, "flags", out.flags, out.n_flags, ", key_driver, key_compiler, key_hctune",
                      ", $2, $3, $4", 3, key + 1, "");
  /* Delivered at commit, and only if it commits. */
  if (err == 0) {
    const char *nv[] = {key[0]};
    err = hct__pg_run(f, "SELECT pg_notify('" HCT_PG_CHANNEL "', $1)", 1, nv, NULL,
              "cannot announce a key's decisions");
  }
  hct__fleet_free(&in);
  hct__fleet_free(&out);
  return err;
}

int hct__pg_recompute(hct_pg_t *f, const char *model_key, const char *driver,
                      const char *compiler, const char *hctune, double *ms) {
  uint64_t t0 = hct__now_ns();
  const char *key[4] = {model_key, driver ? driver : "", compiler ? compiler : "",
                        hctune ? hctune : ""};
  int err = hct__pg_run0(f, "BEGIN", "cannot begin");
  if (err) return err;
  err = recompute_locked(f, key);
  err = hct__pg_tx_end(f, err);
  if (ms != NULL) *ms = (double)(hct__now_ns() - t0) / 1e6;
  return err;
}

/* ---- the push ----------------------------------------------------------------- */

/* The keys a statement's new rows touched, sorted, with their counts. */
#define TOUCHED                                                                        \
  " RETURNING model_key, driver_version, compiler_version, hctune_version)"            \
  " SELECT model_key, driver_version, compiler_version, hctune_version, count(*)"      \
  " FROM ins GROUP BY 1, 2, 3, 4"

/* New trials and faults (by uid), with when they arrived; $2 is the time. */
static int push_touching(hct_pg_t *f, const char *table, const void *arr, int n,
                         const char *now, PGresult **touched) {
  const hct_fleet_table_t *T = hct__fleet_table(table);
  char *rows = rows_json(T, arr, n);
  if (rows == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  char names[2048], defs[4096], sql[16384];
  col_lists(T, names, sizeof names, defs, sizeof defs);
  snprintf(sql, sizeof sql,
           "WITH ins AS (INSERT INTO hctune.%s (%s, pushed_at) SELECT %s, $2::bigint FROM"
           " json_to_recordset($1::json) AS x(%s) ON CONFLICT (uid) DO NOTHING" TOUCHED,
           table, names, names, defs);
  const char *vals[] = {rows, now};
  char what[64];
  snprintf(what, sizeof what, "cannot push %s", table);
  int err = hct__pg_run(f, sql, 2, vals, touched, what);
  free(rows);
  return err;
}

static const char push_hosts_sql[] =
    "INSERT INTO hctune.hosts (host, hctune_version, first_push, last_push, pushes)"
    " SELECT host, max(hctune_version), $2::bigint, $2::bigint, 1"
    " FROM json_to_recordset($1::json) AS x(host text, hctune_version text) GROUP BY host"
    " ON CONFLICT (host) DO UPDATE SET last_push = excluded.last_push,"
    " hctune_version = excluded.hctune_version, pushes = hctune.hosts.pushes + 1";

typedef struct fleet_key_s {
  char model[256], driver[32], compiler[32], hctune[16];
} fleet_key_t;

static int cmp_key(const void *a, const void *b) {
  const fleet_key_t *x = a, *y = b;
  int c = strcmp(x->model, y->model);
  if (c == 0) c = strcmp(x->driver, y->driver);
  if (c == 0) c = strcmp(x->compiler, y->compiler);
  if (c == 0) c = strcmp(x->hctune, y->hctune);
  return c;
}

/* Adds the keys of a TOUCHED result to keys[] (room for every row); returns
 * the rows' total count. */
static int add_keys(const PGresult *r, fleet_key_t *keys, int *nk) {
  int total = 0;
  for (int i = 0; r != NULL && i < PQntuples(r); i++) {
    fleet_key_t k;
    hct__strlcpy(k.model, PQgetvalue(r, i, 0), sizeof k.model);
    hct__strlcpy(k.driver, PQgetvalue(r, i, 1), sizeof k.driver);
    hct__strlcpy(k.compiler, PQgetvalue(r, i, 2), sizeof k.compiler);
    hct__strlcpy(k.hctune, PQgetvalue(r, i, 3), sizeof k.hctune);
    total += atoi(PQgetvalue(r, i, 4));
    int seen = 0;
    for (int j = 0; j < *nk && !seen; j++) seen = cmp_key(&keys[j], &k) == 0;
    if (!seen) keys[(*nk)++] = k;
  }
  return total;
}

int hct__pg_push(hct_pg_t *f, hct_db_t *local, const char *kernels_dir, hct_pg_push_t *st) {
  memset(st, 0, sizeof *st);
  uint64_t t0 = hct__now_ns();
  hct_fleet_t set;
  /* The rows as `db export` takes them: checked, the software key always
   * present, the variants' classes from the manifests. */
  int err = hct__fleet_export(local, NULL, kernels_dir, &set);
  if (err) {
    hct__fleet_free(&set);
    return err;
  }
  st->devices = set.n_devices;
  st->trials = set.n_trials;
  st->faults = set.n_faults;
  char now[24];
  snprintf(now, sizeof now, "%lld", (long long)hct__unix_time());
  PGresult *tk = NULL, *fk = NULL;
  fleet_key_t *keys = NULL;
  int nk = 0;
  char *hosts = rows_json(hct__fleet_table("devices"), set.devices, set.n_devices);
  if (hosts == NULL) err = hct__error(HCT_ENOMEM, "fleet: out of memory");
  if (err == 0) err = hct__pg_run0(f, "BEGIN", "cannot begin");
  if (err == 0) {
    const char *hv[] = {hosts, now};
    err = hct__pg_run(f, push_hosts_sql, 2, hv, NULL, "cannot record the hosts");
  }
  if (err == 0)
    err = insert_rows(f, "devices", set.devices, set.n_devices, "", "", 0, NULL,
                      "ON CONFLICT (uuid, host) DO UPDATE SET model_key = excluded.model_key,"
                      " name = excluded.name, arch = excluded.arch,"
                      " driver_version = excluded.driver_version,"
                      " compiler_version = excluded.compiler_version,"
                      " hctune_version = excluded.hctune_version,"
                      " first_seen = LEAST(hctune.devices.first_seen, excluded.first_seen),"
                      " last_seen = GREATEST(hctune.devices.last_seen, excluded.last_seen)");
  /* KNOWN-GAP: a variant's class is the first one any host pushed; a
   * manifest that moves a variant to another class needs a new name. */
  if (err == 0)
    err = insert_rows(f, "variants", set.variants, set.n_variants, "", "", 0, NULL,
                      "ON CONFLICT (op, variant) DO NOTHING");
  if (err == 0) err = push_touching(f, "trials", set.trials, set.n_trials, now, &tk);
  if (err == 0) err = push_touching(f, "faults", set.faults, set.n_faults, now, &fk);
  uint64_t t1 = hct__now_ns();
  st->upload_ms = (double)(t1 - t0) / 1e6;
  if (err == 0) {
    keys = calloc((size_t)(PQntuples(tk) + PQntuples(fk)) + 1, sizeof *keys);
    if (keys == NULL) err = hct__error(HCT_ENOMEM, "fleet: out of memory");
  }
  if (err == 0) {
    st->trials_new = add_keys(tk, keys, &nk);
    st->faults_new = add_keys(fk, keys, &nk);
    /* Sorted: two pushers lock the keys they share in the same order and
     * cannot deadlock. */
    qsort(keys, (size_t)nk, sizeof *keys, cmp_key);
  }
  for (int i = 0; err == 0 && i < nk; i++) {
    const char *key[4] = {keys[i].model, keys[i].driver, keys[i].compiler, keys[i].hctune};
    err = recompute_locked(f, key);
    if (err == 0) st->keys++;
  }
  err = hct__pg_tx_end(f, err);
  st->recompute_ms = (double)(hct__now_ns() - t1) / 1e6;
  PQclear(tk);
  PQclear(fk);
  free(keys);
  free(hosts);
  hct__fleet_free(&set);
  st->total_ms = (double)(hct__now_ns() - t0) / 1e6;
  return err;
}

/* ---- the status ------------------------------------------------------------------ */

static json_int_t int_at(const PGresult *r, int row, int col) {
  return (json_int_t)atoll(PQgetvalue(r, row, col));
}

int hct__pg_status(hct_pg_t *f, json_t **out) {
  *out = NULL;
  int v;
  int err = hct__pg_schema_version(f, &v);
  if (err) return err;
  PGresult *r;
  err = hct__pg_run(f,
            "SELECT (SELECT count(*) FROM hctune.hosts), (SELECT count(*) FROM hctune.devices),"
            " (SELECT count(*) FROM hctune.trials), (SELECT count(*) FROM hctune.faults),"
            " (SELECT count(*) FROM hctune.decisions), (SELECT count(*) FROM hctune.keys),"
            " (SELECT count(*) FROM hctune.flags WHERE kind = 'outlier'),"
            " (SELECT count(*) FROM hctune.flags WHERE kind = 'conflict')",
            0, NULL, &r, "cannot count the fleet");
  if (err) return err;
  json_t *j = json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "server",
                        hct__pg_shown(f), "schema_version", v, "hosts", int_at(r, 0, 0), "cards",
                        int_at(r, 0, 1), "trials", int_at(r, 0, 2), "faults", int_at(r, 0, 3),
                        "decisions", int_at(r, 0, 4), "key_count", int_at(r, 0, 5), "outliers",
                        int_at(r, 0, 6), "conflicts", int_at(r, 0, 7));
  PQclear(r);
  if (j == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  err = hct__pg_run(f,
            "SELECT model_key, driver_version, compiler_version, hctune_version, trials, hosts,"
            " cards, decisions, outliers, conflicts, revision, recomputed_at FROM hctune.keys"
            " ORDER BY 1, 2, 3, 4",
            0, NULL, &r, "cannot list the keys");
  json_t *keys = err == 0 ? json_array() : NULL;
  for (int i = 0; keys != NULL && i < PQntuples(r); i++) {
    json_t *k = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                          "model_key", PQgetvalue(r, i, 0), "driver_version",
                          PQgetvalue(r, i, 1), "compiler_version", PQgetvalue(r, i, 2),
                          "hctune_version", PQgetvalue(r, i, 3), "trials", int_at(r, i, 4),
                          "hosts", int_at(r, i, 5), "cards", int_at(r, i, 6), "decisions",
                          int_at(r, i, 7), "outliers", int_at(r, i, 8), "conflicts",
                          int_at(r, i, 9), "revision", int_at(r, i, 10), "recomputed_at",
                          int_at(r, i, 11));
    /* json_pack refuses text that is not UTF-8: a key the server made up. */
    if (k == NULL || json_array_append_new(keys, k) != 0) {
      json_decref(keys);
      keys = NULL;
      err = hct__error(HCT_EPROTO, "fleet '%s': hctune.keys row %d is not UTF-8 text "
                       "(refused)", hct__pg_shown(f), i + 1);
    }
  }
  if (err == 0) PQclear(r);
  /* What the merges left out, as they said it: the flags, checked as a
   * fleet file's. */
  hct_fleet_t flags;
  memset(&flags, 0, sizeof flags);
  if (err == 0) err = read_table(f, "flags", "true", 0, NULL, &flags);
  json_t *fl = err == 0 ? json_array() : NULL;
  for (int i = 0; fl != NULL && i < flags.n_flags; i++) {
    const hct_fleet_flag_t *x = &flags.flags[i];
    json_t *detail = json_loads(x->detail, 0, NULL);
    json_array_append_new(fl, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "kind",
                                        x->kind, "model_key", x->model_key, "env", x->env,
                                        "uuid", x->uuid, "host", x->host, "op", x->op,
                                        "variant", x->variant, "params", x->params, "detail",
                                        detail ? detail : json_object()));
  }
  hct__fleet_free(&flags);
  if (err) {
    json_decref(keys);
    json_decref(fl);
    json_decref(j);
    return err;
  }
  json_object_set_new(j, "keys", keys);
  json_object_set_new(j, "flags", fl);
  *out = j;
  return 0;
}

#endif /* HCT_NO_PG */
