/*
 * db.c: opening hctune's SQLite database, its schema and migrations, and the
 * mapping of SQLite result codes to HCT codes.
 *
 * Opening is careful not to write anything before the file is known to be a
 * database of a version this hctune understands: a garbage, truncated or
 * newer file is refused with its bytes untouched.  Only then is WAL mode
 * switched on and the schema migrated.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "db.h"

struct hct_db_s {
  sqlite3 *h;
  int flags;
  int savepoints; /* depth of hct__db_tx_begin inside a caller's transaction */
  char path[PATH_MAX];
};

/*
 * Migrations: migrations[N - 1] takes a database from user_version N - 1 to
 * N, in one transaction.  Append only: a released step is never edited,
 * since databases in the field already ran it; change the schema with a new
 * step and raise HCT_DB_SCHEMA_VERSION.
 *
 * Fleet merging: rows that travel between hosts (trials, decisions, faults,
 * pins, runs) carry a random 32-hex `uid` or a natural unique key, never an
 * autoincrement id, so the union of two databases has no collisions.  The
 * trials' rowid is a local handle only.
 */
static const char *const migrations[] = {
  /* 1: the first schema. */
  "CREATE TABLE devices ("
  "  uuid TEXT NOT NULL, host TEXT NOT NULL, model_key TEXT NOT NULL,"
  "  name TEXT NOT NULL DEFAULT '', arch TEXT NOT NULL DEFAULT '',"
  "  driver_version TEXT NOT NULL DEFAULT '', compiler_version TEXT NOT NULL DEFAULT '',"
  "  hctune_version TEXT NOT NULL DEFAULT '', fingerprint_json TEXT,"
  "  first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL,"
  "  PRIMARY KEY (uuid, host));"
  "CREATE TABLE runs ("
  "  id TEXT PRIMARY KEY, host TEXT NOT NULL, uuid TEXT NOT NULL, model_key TEXT NOT NULL,"
  "  driver_version TEXT NOT NULL, compiler_version TEXT NOT NULL,"
  "  hctune_version TEXT NOT NULL, op TEXT NOT NULL, args TEXT,"
  "  status TEXT NOT NULL DEFAULT 'running', started_at INTEGER NOT NULL, ended_at INTEGER);"
  "CREATE TABLE trials ("
  "  id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE,"
  "  host TEXT NOT NULL, uuid TEXT NOT NULL, model_key TEXT NOT NULL,"
  "  driver_version TEXT NOT NULL, compiler_version TEXT NOT NULL,"
  "  hctune_version TEXT NOT NULL, run_id TEXT NOT NULL DEFAULT '',"
  "  op TEXT NOT NULL, variant TEXT NOT NULL, params TEXT NOT NULL DEFAULT '{}',"
  "  template_hash TEXT NOT NULL DEFAULT '', binary_key TEXT NOT NULL DEFAULT '',"
  "  tokens INTEGER NOT NULL, pending INTEGER NOT NULL DEFAULT 0,"
  "  kind TEXT NOT NULL, status TEXT NOT NULL, seed INTEGER NOT NULL DEFAULT 0,"
  "  samples INTEGER NOT NULL DEFAULT 0, median_us REAL NOT NULL DEFAULT 0,"
  "  min_us REAL NOT NULL DEFAULT 0, p10_us REAL NOT NULL DEFAULT 0,"
  "  p90_us REAL NOT NULL DEFAULT 0, ci_lo_us REAL NOT NULL DEFAULT 0,"
  "  ci_hi_us REAL NOT NULL DEFAULT 0, converged INTEGER NOT NULL DEFAULT 0,"
  "  throttled INTEGER NOT NULL DEFAULT 0, cold INTEGER NOT NULL DEFAULT 0,"
  "  figures_json TEXT, log TEXT, created_at INTEGER NOT NULL);"
  "CREATE INDEX trials_lookup ON trials (uuid, op, variant, tokens);"
  "CREATE INDEX trials_run ON trials (run_id);"
  "CREATE TABLE decisions ("
  "  uid TEXT NOT NULL UNIQUE,"
  "  host TEXT NOT NULL, uuid TEXT NOT NULL, model_key TEXT NOT NULL,"
  "  driver_version TEXT NOT NULL, compiler_version TEXT NOT NULL,"
  "  hctune_version TEXT NOT NULL, op TEXT NOT NULL, parity TEXT NOT NULL,"
  "  tmin INTEGER NOT NULL, tmax INTEGER NOT NULL, variant TEXT NOT NULL,"
  "  params TEXT NOT NULL DEFAULT '{}', variant_class TEXT NOT NULL DEFAULT '',"
  "  template_hash TEXT NOT NULL DEFAULT '', binary_key TEXT NOT NULL DEFAULT '',"
  "  source TEXT NOT NULL DEFAULT 'probe', median_us REAL NOT NULL DEFAULT 0,"
  "  baseline_us REAL NOT NULL DEFAULT 0, ci_lo_us REAL NOT NULL DEFAULT 0,"
  "  ci_hi_us REAL NOT NULL DEFAULT 0, samples INTEGER NOT NULL DEFAULT 0,"
  "  decided_at INTEGER NOT NULL, run_id TEXT NOT NULL DEFAULT '',"
  "  evidence_json TEXT NOT NULL DEFAULT '{}',"
  "  PRIMARY KEY (uuid, op, parity, tmin)) WITHOUT ROWID;"
  "CREATE INDEX decisions_model ON decisions (model_key, op, parity);"
  "CREATE TABLE faults ("
  "  uid TEXT PRIMARY KEY,"
  "  host TEXT NOT NULL, uuid TEXT NOT NULL, model_key TEXT NOT NULL,"
  "  driver_version TEXT NOT NULL, compiler_version TEXT NOT NULL,"
  "  hctune_version TEXT NOT NULL, op TEXT NOT NULL, variant TEXT NOT NULL,"
  "  params TEXT NOT NULL DEFAULT '{}', template_hash TEXT NOT NULL DEFAULT '',"
  "  tokens INTEGER NOT NULL DEFAULT 0, reason TEXT NOT NULL, log TEXT,"
  "  created_at INTEGER NOT NULL);"
  "CREATE INDEX faults_lookup ON faults"
  "  (uuid, driver_version, op, template_hash, variant, params);"
  "CREATE TABLE pins ("
  "  uid TEXT PRIMARY KEY, uuid TEXT NOT NULL, op TEXT NOT NULL,"
  "  tmin INTEGER NOT NULL, tmax INTEGER NOT NULL, variant TEXT NOT NULL,"
  "  params TEXT NOT NULL DEFAULT '{}', until INTEGER NOT NULL DEFAULT 0,"
  "  created_at INTEGER NOT NULL);"
  "CREATE INDEX pins_lookup ON pins (uuid, op, tmin);"
  "CREATE TABLE binaries ("
  "  key TEXT PRIMARY KEY, arch TEXT NOT NULL, compiler_version TEXT NOT NULL DEFAULT '',"
  "  template_hash TEXT NOT NULL DEFAULT '', op TEXT NOT NULL DEFAULT '',"
  "  variant TEXT NOT NULL DEFAULT '', params TEXT NOT NULL DEFAULT '{}',"
  "  is_ptx INTEGER NOT NULL DEFAULT 0, image BLOB NOT NULL, log TEXT,"
  "  regs INTEGER NOT NULL DEFAULT 0, spill_bytes INTEGER NOT NULL DEFAULT 0,"
  "  smem_static INTEGER NOT NULL DEFAULT 0, stack_bytes INTEGER NOT NULL DEFAULT 0,"
  "  compile_ms REAL NOT NULL DEFAULT 0, created_at INTEGER NOT NULL);",
  /* 2: the software key of decisions and trials (jit/softkey.c): what
   * shaped the binary and its figures.  NULL in rows written before. */
  "ALTER TABLE decisions ADD COLUMN software_key TEXT;"
  "ALTER TABLE decisions ADD COLUMN software_json TEXT;"
  "ALTER TABLE trials ADD COLUMN software_key TEXT;"
  "ALTER TABLE trials ADD COLUMN software_json TEXT;"
  "CREATE INDEX decisions_software ON decisions (model_key, op, software_key);",
};

_Static_assert(HCT_ARRAY_SIZE(migrations) == HCT_DB_SCHEMA_VERSION,
               "one migration per schema version");

/* SQLite's primary result codes that mean more than "database error". */
static const struct {
  int sqlite;
  int hct;
} code_map[] = {
  {SQLITE_NOTADB, HCT_EDBCORRUPT},
  {SQLITE_CORRUPT, HCT_EDBCORRUPT},
  {SQLITE_READONLY, HCT_EDBREADONLY},
  {SQLITE_BUSY, HCT_EBUSY},
  {SQLITE_LOCKED, HCT_EBUSY},
  {SQLITE_NOMEM, HCT_ENOMEM},
};

static int map_code(int rc) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(code_map); i++)
    if (code_map[i].sqlite == (rc & 0xff)) return code_map[i].hct;
  return HCT_EDB;
}

struct sqlite3 *hct__db_sqlite(hct_db_t *db) { return db->h; }

const char *hct__db_path(const hct_db_t *db) { return db->path; }

int hct__db_fail(hct_db_t *db, int rc, const char *what) {
  const char *msg = db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc);
  return hct__error(map_code(rc), "database '%s': %s: %s", db->path, what, msg);
}

static int exec(hct_db_t *db, const char *sql, const char *what) {
  int rc = sqlite3_exec(db->h, sql, NULL, NULL, NULL);
  return rc == SQLITE_OK ? 0 : hct__db_fail(db, rc, what);
}

/* Runs a PRAGMA (or any one-row query) returning one integer. */
static int query_int(hct_db_t *db, const char *sql, int64_t *out) {
  /* The first read of a file is where a bad one shows: say so plainly. */
  const char *what = strstr(sql, "user_version") ? "cannot read it" : sql;
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, what);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *out = sqlite3_column_int64(st, 0);
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    *out = 0;
    rc = SQLITE_OK;
  }
  int err = rc == SQLITE_OK ? 0 : hct__db_fail(db, rc, what);
  sqlite3_finalize(st);
  return err;
}

int hct__db_user_version(hct_db_t *db, int *version) {
  int64_t v;
  int err = query_int(db, "PRAGMA user_version", &v);
  if (err == 0) *version = (int)v;
  return err;
}

int hct__db_data_version(hct_db_t *db, int64_t *v) {
  return query_int(db, "PRAGMA data_version", v);
}

int hct__db_begin(hct_db_t *db) { return exec(db, "BEGIN IMMEDIATE", "cannot begin a transaction"); }

int hct__db_commit(hct_db_t *db) { return exec(db, "COMMIT", "cannot commit"); }

int hct__db_rollback(hct_db_t *db) { return exec(db, "ROLLBACK", "cannot roll back"); }

int hct__db_tx_begin(hct_db_t *db) {
  /* A deferred transaction that later writes can fail at once with
   * SQLITE_BUSY when another connection wrote meanwhile (the busy handler
   * cannot help a snapshot that is stale), hence IMMEDIATE. */
  if (sqlite3_get_autocommit(db->h)) return hct__db_begin(db);
  int err = exec(db, "SAVEPOINT hct_call", "cannot open a savepoint");
  if (err == 0) db->savepoints++;
  return err;
}

int hct__db_tx_end(hct_db_t *db, int rc) {
  if (db->savepoints > 0) {
    db->savepoints--;
    if (rc < 0) {
      sqlite3_exec(db->h, "ROLLBACK TO hct_call; RELEASE hct_call", NULL, NULL, NULL);
      return rc;
    }
    return exec(db, "RELEASE hct_call", "cannot release a savepoint");
  }
  if (rc < 0) {
    /* Keep the first error's message: the rollback's own is of no use. */
    if (!sqlite3_get_autocommit(db->h)) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  return hct__db_commit(db);
}

int hct__db_integrity_check(hct_db_t *db) {
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db->h, "PRAGMA integrity_check", -1, &st, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "integrity check");
  int err = 0;
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const char *r = (const char *)sqlite3_column_text(st, 0);
    if (r == NULL || strcmp(r, "ok") != 0)
      err = hct__error(HCT_EDBCORRUPT, "database '%s': integrity check: %s", db->path,
                       r ? r : "no answer");
  } else {
    err = hct__db_fail(db, rc, "integrity check");
  }
  sqlite3_finalize(st);
  return err;
}

/*
 * A truncated file keeps a header that promises more pages than it holds;
 * SQLite would only notice on reading a missing page.  The header's page
 * count is trusted only when its "version-valid-for" matches the change
 * counter, as SQLite itself does.  With a non-empty WAL beside it the
 * check is skipped: a checkpoint killed midway leaves the header of the new
 * size on a file not yet grown, which the WAL repairs on the next open.
 */
static int check_size(hct_db_t *db) {
  char wal[PATH_MAX + 8];
  struct stat ws;
  snprintf(wal, sizeof wal, "%s-wal", db->path);
  if (stat(wal, &ws) == 0 && ws.st_size > 0) return 0;
  /* Read through SQLite's own descriptor: opening and closing another one
   * would drop every POSIX lock this process holds on the file (close()
   * releases them all), and a process with other connections open (the
   * daemon) would then look gone to the others, which checkpoint and reset
   * the WAL under it. */
  sqlite3_file *f = NULL;
  if (sqlite3_file_control(db->h, "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK ||
      f == NULL || f->pMethods == NULL)
    return 0;
  unsigned char h[100];
  sqlite3_int64 fsize = 0;
  if (f->pMethods->xRead(f, h, (int)sizeof h, 0) != SQLITE_OK ||
      f->pMethods->xFileSize(f, &fsize) != SQLITE_OK)
    return 0; /* SQLite reports why, on the first read */
  if (memcmp(h, "SQLite format 3", 16) != 0) return 0;
  uint32_t page_size = (uint32_t)h[16] << 8 | h[17];
  if (page_size == 1) page_size = 65536;
#define BE32(p) ((uint32_t)(p)[0] << 24 | (uint32_t)(p)[1] << 16 | (uint32_t)(p)[2] << 8 | (p)[3])
  uint32_t change = BE32(h + 24), pages = BE32(h + 28), valid_for = BE32(h + 92);
#undef BE32
  if (pages == 0 || change != valid_for) return 0;
  int64_t want = (int64_t)pages * page_size;
  if ((int64_t)fsize < want)
    return hct__error(HCT_EDBCORRUPT, "database '%s': file is truncated (%lld of %lld bytes)",
                      db->path, (long long)fsize, (long long)want);
  return 0;
}

static int dir_writable(const char *path) {
  char dir[PATH_MAX];
  hct__strlcpy(dir, path, sizeof dir);
  char *slash = strrchr(dir, '/');
  if (slash == NULL) hct__strlcpy(dir, ".", sizeof dir);
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
  return access(dir, W_OK) == 0;
}

/*
 * A reader of a WAL database needs its "-shm" index, which it creates when
 * absent: a user who may read the file but not write its folder (the
 * daemon's database, read by `hctune list`) cannot.  When no WAL is pending
 * the file alone is complete and nobody is writing (a writer keeps a WAL),
 * so it is opened immutable: no lock, no index.
 */
static int reopen_immutable(hct_db_t *db) {
  char wal[PATH_MAX + 8];
  struct stat ws;
  snprintf(wal, sizeof wal, "%s-wal", db->path);
  if (stat(wal, &ws) == 0 && ws.st_size > 0)
    return hct__error(HCT_EDBREADONLY, "database '%s': cannot read it: its folder is not "
                      "writable and a write is pending in '%s' (run hctune once as the "
                      "database's owner)", db->path, wal);
  /* URI form: the path is percent-encoded where a URI would misread it. */
  char uri[3 * PATH_MAX + 32];
  size_t o = (size_t)snprintf(uri, sizeof uri, "file:");
  for (const unsigned char *p = (const unsigned char *)db->path; *p && o + 4 < sizeof uri; p++) {
    if (*p == '%' || *p == '?' || *p == '#' || *p <= ' ' || *p >= 0x7f)
      o += (size_t)snprintf(uri + o, sizeof uri - o, "%%%02X", *p);
    else
      uri[o++] = (char)*p;
  }
  snprintf(uri + o, sizeof uri - o, "?immutable=1");
  sqlite3_close_v2(db->h);
  db->h = NULL;
  int rc = sqlite3_open_v2(uri, &db->h,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "cannot open");
  sqlite3_extended_result_codes(db->h, 1);
  return 0;
}

static int migrate(hct_db_t *db, int from) {
  for (int v = from + 1; v <= HCT_DB_SCHEMA_VERSION; v++) {
    int err = hct__db_begin(db);
    if (err) return err;
    /* Another process may have migrated while this one waited for the
     * write lock: read the version again under it. */
    int now;
    err = hct__db_user_version(db, &now);
    if (err == 0 && now < v) {
      err = exec(db, migrations[v - 1], "cannot migrate the schema");
      if (err == 0) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
        err = exec(db, sql, "cannot set the schema version");
      }
    }
    err = hct__db_tx_end(db, err);
    if (err) return err;
  }
  return 0;
}

static int open_checked(hct_db_t *db) {
  int readonly = db->flags & HCT_DB_READONLY;
  struct stat st;
  int exists = stat(db->path, &st) == 0;

  struct stat lst;
  if (!exists && lstat(db->path, &lst) == 0 && S_ISLNK(lst.st_mode))
    return hct__error(HCT_ENOENT, "database '%s': a symbolic link to nothing", db->path);
  if (!exists && (db->flags & (HCT_DB_NOCREATE | HCT_DB_READONLY)))
    return hct__error(HCT_ENOENT, "database '%s': no such file", db->path);
  if (exists && S_ISDIR(st.st_mode))
    return hct__error(HCT_EINVAL, "database '%s': is a folder", db->path);
  /* SQLite would block forever reading a FIFO, and a device or socket is
   * never a database. */
  if (exists && !S_ISREG(st.st_mode))
    return hct__error(HCT_EINVAL, "database '%s': not a regular file (%s)", db->path,
                      S_ISFIFO(st.st_mode)   ? "a FIFO"
                      : S_ISSOCK(st.st_mode) ? "a socket"
                      : S_ISCHR(st.st_mode)  ? "a character device"
                      : S_ISBLK(st.st_mode)  ? "a block device"
                                             : "not a plain file");
  if (!exists) {
    int err = hct__mkdir_parents(db->path);
    if (err) return err;
    if (!dir_writable(db->path))
      return hct__error(HCT_EDBREADONLY, "database '%s': cannot create it: folder is read-only",
                        db->path);
  }

  int oflags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(db->path, &db->h, oflags | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    if ((rc & 0xff) == SQLITE_CANTOPEN && exists && access(db->path, R_OK) != 0)
      return hct__error(HCT_EPERM, "database '%s': cannot read it: %s", db->path, strerror(errno));
    return hct__db_fail(db, rc, "cannot open");
  }
  sqlite3_extended_result_codes(db->h, 1);
  sqlite3_busy_timeout(db->h, 5000);

  /* Read-only checks first: nothing is written until the file is known
   * good. */
  int err = check_size(db);
  if (err) return err;
  int64_t v;
  err = query_int(db, "PRAGMA user_version", &v);
  if (err && readonly && (err == HCT_EDBREADONLY || err == HCT_EDB) &&
      (sqlite3_extended_errcode(db->h) & 0xff) != SQLITE_NOTADB) {
    err = reopen_immutable(db);
    if (err == 0) err = query_int(db, "PRAGMA user_version", &v);
  }
  if (err) return err;
  if (v > HCT_DB_SCHEMA_VERSION)
    return hct__error(HCT_EDBVERSION, "database '%s': schema version %lld is newer than %d "
                      "(upgrade hctune)", db->path, (long long)v, HCT_DB_SCHEMA_VERSION);
  /* quick_check reads every page but skips the index cross-checks of
   * integrity_check; it is what tells a half-overwritten file apart. */
  err = query_int(db, "SELECT count(*) FROM sqlite_master", &v);
  if (err) return err;
  sqlite3_stmt *qc;
  rc = sqlite3_prepare_v2(db->h, "PRAGMA quick_check(1)", -1, &qc, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "quick check");
  rc = sqlite3_step(qc);
  if (rc == SQLITE_ROW) {
    const char *r = (const char *)sqlite3_column_text(qc, 0);
    if (r == NULL || strcmp(r, "ok") != 0)
      err = hct__error(HCT_EDBCORRUPT, "database '%s': quick check: %s", db->path,
                       r ? r : "no answer");
  } else {
    err = hct__db_fail(db, rc, "quick check");
  }
  sqlite3_finalize(qc);
  if (err) return err;

  if (!readonly && sqlite3_db_readonly(db->h, "main") == 1)
    return hct__error(HCT_EDBREADONLY, "database '%s': file is read-only (open it read-only "
                      "or fix its permissions)", db->path);
  if (!readonly && !dir_writable(db->path))
    return hct__error(HCT_EDBREADONLY, "database '%s': folder is read-only (its journal "
                      "cannot be created)", db->path);

  err = exec(db, "PRAGMA foreign_keys = ON", "cannot enable foreign keys");
  if (err) return err;
  if (readonly) {
    int64_t uv;
    err = query_int(db, "PRAGMA user_version", &uv);
    if (err) return err;
    if (uv < HCT_DB_SCHEMA_VERSION)
      return hct__error(HCT_EDBVERSION, "database '%s': schema version %lld is older than %d "
                        "and a read-only open cannot upgrade it (run a writing command once)",
                        db->path, (long long)uv, HCT_DB_SCHEMA_VERSION);
    return 0;
  }
  /* WAL: readers (the daemon) never block the writer (a probe).  NORMAL
   * sync keeps every commit across a killed process; a power cut may lose
   * the last commits but never corrupts. */
  /* Switching a new file to WAL takes an exclusive lock, and SQLite answers
   * BUSY at once, without its busy handler, when another process (a probe
   * and its worker, the daemon) opens the same fresh file at that moment:
   * retry for as long as the busy timeout. */
  for (int tries = 0;; tries++) {
    err = exec(db, "PRAGMA journal_mode = WAL", "cannot enable WAL");
    if (err != HCT_EBUSY || tries == 500) break;
    usleep(10000);
  }
  if (err) return err;
  err = exec(db, "PRAGMA synchronous = NORMAL", "cannot set synchronous");
  if (err) return err;
  int uv;
  err = hct__db_user_version(db, &uv);
  if (err) return err;
  return uv < HCT_DB_SCHEMA_VERSION ? migrate(db, uv) : 0;
}

int hct__db_open(const char *path, int flags, hct_db_t **out) {
  *out = NULL;
  if (path == NULL || path[0] == '\0') return hct__error(HCT_EINVAL, "database path is empty");
  hct_db_t *db = calloc(1, sizeof *db);
  if (db == NULL) return hct__error(HCT_ENOMEM, "database '%s': out of memory", path);
  if (strlen(path) >= sizeof db->path) {
    free(db);
    return hct__error(HCT_ERANGE, "database '%s': path is too long", path);
  }
  hct__strlcpy(db->path, path, sizeof db->path);
  db->flags = flags;
  int err = open_checked(db);
  if (err) {
    hct__db_close(db);
    return err;
  }
  *out = db;
  return 0;
}

void hct__db_close(hct_db_t *db) {
  if (db == NULL) return;
  /* sqlite3_close_v2 defers while statements are open; every function of
   * db/ finalizes its own, so this closes at once. */
  sqlite3_close_v2(db->h);
  free(db);
}
