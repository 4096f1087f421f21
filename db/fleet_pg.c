/*
 * fleet_pg.c: the live fleet on PostgreSQL (libpq): the server's schema and
 * its migrations, pushes of a host's trials, the recompute of a key's
 * decisions, the status, and the daemons' pull.
 *
 * The server holds what hosts push (hosts, devices, trials, faults: rows
 * that never change once written, keyed by the uid the local DB gave them)
 * and what the fleet decided from them (decisions and keys, one set per
 * (card model key, software key), replaced as a whole by each recompute).
 * Everything lives in the schema `hctune`, so that the roles of
 * docs/fleet-live.md can be granted on it alone.
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

#include "db.h"

#ifdef HCT_NO_PG

#define NO_PG()                                                                          \
  hct__error(HCT_EUNSUPPORTED, "fleet: this hctune was built without PostgreSQL (make " \
             "STATIC=1); use a build with libpq for the live fleet")

void hct__fleet_url_shown(const char *url, char *buf, size_t len) {
  (void)url;
  hct__strlcpy(buf, "(fleet URL)", len);
}
int hct__fleet_connect(const char *url, int flags, hct_fleet_t **out) {
  (void)url;
  (void)flags;
  *out = NULL;
  return NO_PG();
}
void hct__fleet_close(hct_fleet_t *f) { (void)f; }
const char *hct__fleet_shown(const hct_fleet_t *f) {
  (void)f;
  return "";
}
struct pg_conn *hct__fleet_pgconn(hct_fleet_t *f) {
  (void)f;
  return NULL;
}
int hct__fleet_init(hct_fleet_t *f, int to_version, int *from) { return NO_PG(); }
int hct__fleet_schema_version(hct_fleet_t *f, int *version) { return NO_PG(); }
int hct__fleet_push(hct_fleet_t *f, hct_db_t *local, hct_fleet_push_t *st) { return NO_PG(); }
int hct__fleet_recompute(hct_fleet_t *f, const char *m, const char *s, double *ms) {
  return NO_PG();
}
int hct__fleet_status(hct_fleet_t *f, json_t **out) { return NO_PG(); }
int hct__fleet_pull(hct_fleet_t *f, const char *const *models, int n, hct_fleet_decision_t **out,
                    int *count) {
  return NO_PG();
}

#else /* with libpq */

#include <libpq-fe.h>
#include <sqlite3.h>

struct hct_fleet_s {
  PGconn *c;
  char shown[512];
};

/* ---- URLs and errors --------------------------------------------------- */

/* What of a URL may be shown: where it points and how, never a secret. */
static const char *const shown_keys[] = {"service", "host", "hostaddr", "port",
                                         "dbname",  "user", "sslmode"};

void hct__fleet_url_shown(const char *url, char *buf, size_t len) {
  char *perr = NULL;
  PQconninfoOption *opts = PQconninfoParse(url ? url : "", &perr);
  /* libpq's parse error may quote the URL, password and all: not shown. */
  PQfreemem(perr);
  if (opts == NULL) {
    hct__strlcpy(buf, "(unparsable URL)", len);
    return;
  }
  size_t o = 0;
  buf[0] = '\0';
  for (size_t k = 0; k < HCT_ARRAY_SIZE(shown_keys); k++)
    for (PQconninfoOption *p = opts; p->keyword != NULL; p++) {
      if (strcmp(p->keyword, shown_keys[k]) != 0 || p->val == NULL || p->val[0] == '\0') continue;
      int w = snprintf(buf + o, len - o, "%s%s=%s", o ? " " : "", p->keyword, p->val);
      if (w < 0 || (size_t)w >= len - o) {
        buf[o] = '\0';
        break;
      }
      o += (size_t)w;
    }
  if (o == 0) hct__strlcpy(buf, "(libpq defaults)", len);
  PQconninfoFree(opts);
}

/* SQLSTATE classes that mean more than "database error". */
static const struct {
  const char *state; /* a full code, or a two-letter class */
  int code;
} state_map[] = {
  {"08", HCT_EIO},      /* connection exception */
  {"57P01", HCT_EIO},   /* admin shutdown: the server is going away */
  {"57P02", HCT_EIO},   /* crash shutdown */
  {"57P03", HCT_EIO},   /* cannot connect now (starting up) */
  {"42501", HCT_EPERM}, /* insufficient privilege: a role that may not */
  {"28", HCT_EPERM},    /* invalid authorization */
  {"40", HCT_EBUSY},    /* serialization failure, deadlock */
  {"23", HCT_EINVAL},   /* a row the schema's checks refused */
  {"22", HCT_EINVAL},   /* a value of the wrong type or range */
  {"3D000", HCT_ENOENT} /* no such database */
};

static int map_state(const char *state) {
  if (state == NULL) return HCT_EIO; /* no result at all: the link broke */
  for (size_t i = 0; i < HCT_ARRAY_SIZE(state_map); i++)
    if (strncmp(state, state_map[i].state, strlen(state_map[i].state)) == 0)
      return state_map[i].code;
  return HCT_EDB;
}

/* libpq's messages end in newlines and may hold several lines: one line. */
static void one_line(const char *in, char *out, size_t len) {
  size_t o = 0;
  for (const char *p = in ? in : ""; *p && o + 1 < len; p++) {
    char ch = (*p == '\n' || *p == '\r' || *p == '\t') ? ' ' : *p;
    if (ch == ' ' && (o == 0 || out[o - 1] == ' ')) continue;
    out[o++] = ch;
  }
  while (o > 0 && out[o - 1] == ' ') o--;
  out[o] = '\0';
}

static int pg_fail(hct_fleet_t *f, const PGresult *r, const char *what) {
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  if (msg == NULL) msg = PQerrorMessage(f->c);
  char line[512];
  one_line(msg, line, sizeof line);
  if (line[0] == '\0') hct__strlcpy(line, "no answer from the server", sizeof line);
  int code = PQstatus(f->c) == CONNECTION_BAD ? HCT_EIO : map_state(state);
  return hct__error(code, "fleet '%s': %s: %s", f->shown, what, line);
}

/* Runs one statement with text parameters; *out (may be NULL) gets the
 * result on success, which the caller clears. */
static int run(hct_fleet_t *f, const char *sql, int n, const char *const *vals, PGresult **out,
               const char *what) {
  PGresult *r = PQexecParams(f->c, sql, n, NULL, vals, NULL, NULL, 0);
  ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    int err = pg_fail(f, r, what);
    PQclear(r);
    return err;
  }
  if (out != NULL) *out = r;
  else PQclear(r);
  return 0;
}

/* A statement, or several separated by semicolons, without parameters. */
static int run0(hct_fleet_t *f, const char *sql, const char *what) {
  PGresult *r = PQexec(f->c, sql);
  ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  int err = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? 0 : pg_fail(f, r, what);
  PQclear(r);
  return err;
}

/* Ends a transaction: COMMIT when rc >= 0, else ROLLBACK keeping rc's
 * message.  A broken link rolls back by itself on the server. */
static int tx_end(hct_fleet_t *f, int rc) {
  if (rc < 0) {
    if (PQstatus(f->c) == CONNECTION_OK && PQtransactionStatus(f->c) != PQTRANS_IDLE) {
      PGresult *r = PQexec(f->c, "ROLLBACK");
      PQclear(r);
    }
    return rc;
  }
  return run0(f, "COMMIT", "cannot commit");
}

/* ---- the schema ---------------------------------------------------------- */

/*
 * migrations[N - 1] takes the server from version N - 1 to N.  Append only:
 * servers in the field ran the released steps.  The checks are the
 * server's own line of defence against a host that pushes hostile rows;
 * every row read back is checked again in C (check_* below) because a
 * server is not to be trusted either.
 */
#define HEX32 "'^[0-9a-f]{32}$'"
static const char *const migrations[] = {
  /* 1: what hosts push. */
  "CREATE TABLE hctune.hosts ("
  "  host TEXT PRIMARY KEY CHECK (octet_length(host) BETWEEN 1 AND 127),"
  "  hctune_version TEXT NOT NULL DEFAULT '' CHECK (octet_length(hctune_version) < 16),"
  "  first_push BIGINT NOT NULL, last_push BIGINT NOT NULL, pushes BIGINT NOT NULL DEFAULT 0);"
  "CREATE TABLE hctune.devices ("
  "  uuid TEXT NOT NULL CHECK (octet_length(uuid) BETWEEN 1 AND 63),"
  "  host TEXT NOT NULL CHECK (octet_length(host) BETWEEN 1 AND 127),"
  "  model_key TEXT NOT NULL CHECK (octet_length(model_key) BETWEEN 1 AND 255),"
  "  name TEXT NOT NULL DEFAULT '' CHECK (octet_length(name) < 128),"
  "  arch TEXT NOT NULL DEFAULT '' CHECK (octet_length(arch) < 64),"
  "  fingerprint_json TEXT CHECK (octet_length(fingerprint_json) < 16384),"
  "  first_seen BIGINT NOT NULL, last_seen BIGINT NOT NULL, PRIMARY KEY (uuid, host));"
  "CREATE TABLE hctune.trials ("
  "  uid TEXT PRIMARY KEY CHECK (uid ~ " HEX32 "),"
  "  host TEXT NOT NULL CHECK (octet_length(host) BETWEEN 1 AND 127),"
  "  uuid TEXT NOT NULL CHECK (octet_length(uuid) BETWEEN 1 AND 63),"
  "  model_key TEXT NOT NULL CHECK (octet_length(model_key) BETWEEN 1 AND 255),"
  "  software_key TEXT NOT NULL DEFAULT '' CHECK (software_key ~ '^([0-9a-f]{32})?$'),"
  "  software_json TEXT NOT NULL DEFAULT '{}' CHECK (octet_length(software_json) < 4096),"
  "  driver_version TEXT NOT NULL CHECK (octet_length(driver_version) < 32),"
  "  compiler_version TEXT NOT NULL CHECK (octet_length(compiler_version) < 32),"
  "  hctune_version TEXT NOT NULL CHECK (octet_length(hctune_version) < 16),"
  "  run_id TEXT NOT NULL DEFAULT '' CHECK (run_id ~ '^([0-9a-f]{32})?$'),"
  "  op TEXT NOT NULL CHECK (op ~ '^[a-z0-9_]{1,31}$'),"
  "  variant TEXT NOT NULL CHECK (variant ~ '^[A-Za-z0-9_.-]{1,31}$'),"
  "  params TEXT NOT NULL DEFAULT '{}' CHECK (octet_length(params) < 256),"
  "  template_hash TEXT NOT NULL DEFAULT '' CHECK (template_hash ~ '^([0-9a-f]{32})?$'),"
  "  binary_key TEXT NOT NULL DEFAULT '' CHECK (binary_key ~ '^([0-9a-f]{32})?$'),"
  "  tokens INTEGER NOT NULL CHECK (tokens BETWEEN 0 AND 1048576),"
  "  pending INTEGER NOT NULL DEFAULT 0 CHECK (pending IN (0, 1)),"
  "  kind TEXT NOT NULL CHECK (kind IN ('compile', 'parity', 'timing')),"
  "  status TEXT NOT NULL CHECK (status ~ '^[a-z]{1,15}$'),"
  "  seed BIGINT NOT NULL DEFAULT 0,"
  "  samples INTEGER NOT NULL DEFAULT 0 CHECK (samples >= 0),"
  "  median_us DOUBLE PRECISION NOT NULL DEFAULT 0,"
  "  min_us DOUBLE PRECISION NOT NULL DEFAULT 0, p10_us DOUBLE PRECISION NOT NULL DEFAULT 0,"
  "  p90_us DOUBLE PRECISION NOT NULL DEFAULT 0, ci_lo_us DOUBLE PRECISION NOT NULL DEFAULT 0,"
  "  ci_hi_us DOUBLE PRECISION NOT NULL DEFAULT 0,"
  "  converged INTEGER NOT NULL DEFAULT 0, throttled INTEGER NOT NULL DEFAULT 0,"
  "  cold INTEGER NOT NULL DEFAULT 0,"
  "  figures_json TEXT CHECK (octet_length(figures_json) < 65536),"
  "  log TEXT CHECK (octet_length(log) < 1048576),"
  "  created_at BIGINT NOT NULL, pushed_at BIGINT NOT NULL,"
  "  CHECK (median_us >= 0 AND median_us < 'Infinity' AND min_us >= 0 AND min_us < 'Infinity'"
  "    AND p10_us >= 0 AND p10_us < 'Infinity' AND p90_us >= 0 AND p90_us < 'Infinity'"
  "    AND ci_lo_us >= 0 AND ci_lo_us < 'Infinity' AND ci_hi_us >= 0"
  "    AND ci_hi_us < 'Infinity'));"
  "CREATE INDEX trials_key ON hctune.trials (model_key, software_key);"
  "CREATE INDEX trials_host ON hctune.trials (host);"
  "CREATE TABLE hctune.faults ("
  "  uid TEXT PRIMARY KEY CHECK (uid ~ " HEX32 "),"
  "  host TEXT NOT NULL CHECK (octet_length(host) BETWEEN 1 AND 127),"
  "  uuid TEXT NOT NULL CHECK (octet_length(uuid) BETWEEN 1 AND 63),"
  "  model_key TEXT NOT NULL CHECK (octet_length(model_key) BETWEEN 1 AND 255),"
  "  driver_version TEXT NOT NULL CHECK (octet_length(driver_version) < 32),"
  "  compiler_version TEXT NOT NULL CHECK (octet_length(compiler_version) < 32),"
  "  hctune_version TEXT NOT NULL CHECK (octet_length(hctune_version) < 16),"
  "  op TEXT NOT NULL CHECK (op ~ '^[a-z0-9_]{1,31}$'),"
  "  variant TEXT NOT NULL CHECK (variant ~ '^[A-Za-z0-9_.-]{1,31}$'),"
  "  params TEXT NOT NULL DEFAULT '{}' CHECK (octet_length(params) < 256),"
  "  template_hash TEXT NOT NULL DEFAULT '' CHECK (template_hash ~ '^([0-9a-f]{32})?$'),"
  "  tokens INTEGER NOT NULL DEFAULT 0 CHECK (tokens BETWEEN 0 AND 1048576),"
  "  reason TEXT NOT NULL CHECK (reason ~ '^[a-z]{1,15}$'),"
  "  log TEXT CHECK (octet_length(log) < 1048576),"
  "  created_at BIGINT NOT NULL, pushed_at BIGINT NOT NULL);",

  /* 2: what the recomputes write, and the revision counter daemons and
   * `fleet status` read. */
  "CREATE SEQUENCE hctune.revisions;"
  "CREATE TABLE hctune.keys ("
  "  model_key TEXT NOT NULL, software_key TEXT NOT NULL,"
  "  revision BIGINT NOT NULL, recomputed_at BIGINT NOT NULL,"
  "  trials INTEGER NOT NULL DEFAULT 0, hosts INTEGER NOT NULL DEFAULT 0,"
  "  cards INTEGER NOT NULL DEFAULT 0, decisions INTEGER NOT NULL DEFAULT 0,"
  "  outliers TEXT NOT NULL DEFAULT '[]', conflicts TEXT NOT NULL DEFAULT '[]',"
  "  PRIMARY KEY (model_key, software_key));"
  "CREATE TABLE hctune.decisions ("
  "  model_key TEXT NOT NULL CHECK (octet_length(model_key) BETWEEN 1 AND 255),"
  "  software_key TEXT NOT NULL CHECK (software_key ~ '^([0-9a-f]{32})?$'),"
  "  host TEXT NOT NULL DEFAULT '', uuid TEXT NOT NULL DEFAULT '',"
  "  driver_version TEXT NOT NULL DEFAULT '', compiler_version TEXT NOT NULL DEFAULT '',"
  "  hctune_version TEXT NOT NULL DEFAULT '',"
  "  op TEXT NOT NULL, parity TEXT NOT NULL CHECK (parity IN ('bitwise', 'kl')),"
  "  tmin INTEGER NOT NULL, tmax INTEGER NOT NULL,"
  "  variant TEXT NOT NULL, params TEXT NOT NULL DEFAULT '{}',"
  "  variant_class TEXT NOT NULL DEFAULT '', template_hash TEXT NOT NULL DEFAULT '',"
  "  binary_key TEXT NOT NULL DEFAULT '',"
  "  median_us DOUBLE PRECISION NOT NULL DEFAULT 0,"
  "  baseline_us DOUBLE PRECISION NOT NULL DEFAULT 0,"
  "  ci_lo_us DOUBLE PRECISION NOT NULL DEFAULT 0, ci_hi_us DOUBLE PRECISION NOT NULL DEFAULT 0,"
  "  samples INTEGER NOT NULL DEFAULT 0, hosts INTEGER NOT NULL DEFAULT 0,"
  "  cards INTEGER NOT NULL DEFAULT 0, decided_at BIGINT NOT NULL,"
  "  run_id TEXT NOT NULL DEFAULT '', evidence_json TEXT NOT NULL DEFAULT '{}',"
  "  revision BIGINT NOT NULL,"
  "  CHECK (tmin >= 1 AND tmax >= tmin AND tmax <= 1048576),"
  "  PRIMARY KEY (model_key, software_key, op, parity, tmin));",
};

_Static_assert(HCT_ARRAY_SIZE(migrations) == HCT_FLEET_SCHEMA_VERSION,
               "one migration per fleet schema version");

/* Taken by every init, so that two at once do not both create tables. */
#define INIT_LOCK "SELECT pg_advisory_xact_lock(7526466916043845633)"

static int read_version(hct_fleet_t *f, int *version) {
  PGresult *r;
  int err = run(f,
                "SELECT to_regclass('hctune.schema') IS NOT NULL AND has_table_privilege("
                "'hctune.schema', 'SELECT')",
                0, NULL, &r, "cannot look for the hctune schema");
  if (err) return err;
  int present = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
  PQclear(r);
  if (!present) {
    *version = 0;
    return 0;
  }
  err = run(f, "SELECT max(version) FROM hctune.schema", 0, NULL, &r,
            "cannot read the schema version");
  if (err) return err;
  *version = PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) ? atoi(PQgetvalue(r, 0, 0)) : 0;
  PQclear(r);
  return 0;
}

int hct__fleet_schema_version(hct_fleet_t *f, int *version) { return read_version(f, version); }

int hct__fleet_init(hct_fleet_t *f, int to_version, int *from) {
  if (to_version <= 0) to_version = HCT_FLEET_SCHEMA_VERSION;
  if (to_version > HCT_FLEET_SCHEMA_VERSION)
    return hct__error(HCT_EINVAL, "fleet '%s': schema version %d is beyond this hctune's %d",
                      f->shown, to_version, HCT_FLEET_SCHEMA_VERSION);
  int err = run0(f, "BEGIN", "cannot begin");
  if (err) return err;
  err = run0(f, INIT_LOCK, "cannot lock the schema");
  if (err == 0)
    err = run0(f,
               "CREATE SCHEMA IF NOT EXISTS hctune;"
               "CREATE TABLE IF NOT EXISTS hctune.schema (version INTEGER NOT NULL,"
               " migrated_at BIGINT NOT NULL)",
               "cannot create the schema");
  int v = 0;
  if (err == 0) err = read_version(f, &v);
  if (err == 0 && from != NULL) *from = v;
  if (err == 0 && v > HCT_FLEET_SCHEMA_VERSION)
    err = hct__error(HCT_EDBVERSION, "fleet '%s': schema version %d is newer than %d (upgrade "
                     "hctune)", f->shown, v, HCT_FLEET_SCHEMA_VERSION);
  for (int next = v + 1; err == 0 && next <= to_version; next++) {
    err = run0(f, migrations[next - 1], "cannot migrate the schema");
    char num[16];
    snprintf(num, sizeof num, "%d", next);
    const char *vals[] = {num};
    if (err == 0)
      err = run(f,
                "INSERT INTO hctune.schema VALUES ($1::int,"
                " extract(epoch FROM now())::bigint)",
                1, vals, NULL, "cannot record the schema version");
  }
  return tx_end(f, err);
}

/* ---- connections --------------------------------------------------------- */

int hct__fleet_connect(const char *url, int flags, hct_fleet_t **out) {
  *out = NULL;
  if (url == NULL || url[0] == '\0') return hct__error(HCT_EINVAL, "fleet URL is empty");
  hct_fleet_t *f = calloc(1, sizeof *f);
  if (f == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  hct__fleet_url_shown(url, f->shown, sizeof f->shown);
  char *perr = NULL;
  PQconninfoOption *check = PQconninfoParse(url, &perr);
  PQfreemem(perr);
  if (check == NULL) {
    free(f);
    return hct__error(HCT_EINVAL, "fleet URL: cannot parse it (a postgresql:// URI or "
                      "libpq's key=value pairs; not shown, it may hold a password)");
  }
  PQconninfoFree(check);
  /* Defaults first: what the URL says wins over them (expand_dbname
   * applies the URL's values in the place of dbname, later ones last). */
  const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
  const char *vals[] = {"10", "hctune", url, NULL};
  f->c = PQconnectdbParams(keys, vals, 1);
  if (f->c == NULL) {
    free(f);
    return hct__error(HCT_ENOMEM, "fleet: out of memory connecting");
  }
  if (PQstatus(f->c) != CONNECTION_OK) {
    char line[512];
    one_line(PQerrorMessage(f->c), line, sizeof line);
    int err = hct__error(strstr(line, "authentication") || strstr(line, "password")
                             ? HCT_EPERM : HCT_EIO,
                         "fleet '%s': cannot connect: %s", f->shown, line);
    hct__fleet_close(f);
    return err;
  }
  /* Messages of the server in English and without notices on stderr. */
  PQsetNoticeProcessor(f->c, NULL, NULL);
  int err = run0(f, "SET client_min_messages = warning; SET lc_messages = 'C'",
                 "cannot set the session up");
  /* lc_messages needs a superuser: without it keep the server's. */
  if (err) {
    PGresult *r = PQexec(f->c, "SET client_min_messages = warning");
    PQclear(r);
    err = 0;
  }
  if (!(flags & HCT_FLEET_NO_SCHEMA_CHECK)) {
    int v;
    err = read_version(f, &v);
    if (err == 0 && v == 0)
      err = hct__error(HCT_ENOENT, "fleet '%s': no hctune schema there (run 'hctune fleet "
                       "init --url ...' once, as the fleet's owner)", f->shown);
    else if (err == 0 && v > HCT_FLEET_SCHEMA_VERSION)
      err = hct__error(HCT_EDBVERSION, "fleet '%s': schema version %d is newer than %d "
                       "(upgrade hctune)", f->shown, v, HCT_FLEET_SCHEMA_VERSION);
    else if (err == 0 && v < HCT_FLEET_SCHEMA_VERSION)
      err = hct__error(HCT_EDBVERSION, "fleet '%s': schema version %d is older than %d (run "
                       "'hctune fleet init' to migrate it)", f->shown, v,
                       HCT_FLEET_SCHEMA_VERSION);
  }
  if (err) {
    hct__fleet_close(f);
    return err;
  }
  *out = f;
  return 0;
}

void hct__fleet_close(hct_fleet_t *f) {
  if (f == NULL) return;
  PQfinish(f->c);
  free(f);
}

const char *hct__fleet_shown(const hct_fleet_t *f) { return f->shown; }

struct pg_conn *hct__fleet_pgconn(hct_fleet_t *f) { return f->c; }

/* ---- checks of rows read back -------------------------------------------- */

/* Well-formed UTF-8 (no overlongs, surrogates or code points past
 * U+10FFFF) without control characters: what any text of a row must be. */
static const char *text_problem(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  while (p < end) {
    unsigned c = *p;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return "holds a control character";
      p++;
      continue;
    }
    int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (len == 0 || c > 0xf4 || end - p < len) return "is not valid UTF-8";
    unsigned cp = c & (0x3f >> (len - 1));
    for (int i = 1; i < len; i++) {
      if ((p[i] & 0xc0) != 0x80) return "is not valid UTF-8";
      cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return "is not valid UTF-8";
    p += len;
  }
  return NULL;
}

/* A row being read: where it came from, for the one line of a refusal. */
typedef struct row_s {
  hct_fleet_t *f;
  const PGresult *r;
  const char *table;
  int row;
  int err;
} row_t;

static int row_refuse(row_t *rw, const char *col, const char *why) {
  if (rw->err == 0)
    rw->err = hct__error(HCT_EPROTO, "fleet '%s': row %d of %s: column '%s' %s (refused; "
                         "nothing of this answer is used)",
                         rw->f->shown, rw->row + 1, rw->table, col, why);
  return rw->err;
}

static const char *col_raw(row_t *rw, const char *col, int *len) {
  int c = PQfnumber(rw->r, col);
  if (c < 0) {
    row_refuse(rw, col, "is missing");
    return NULL;
  }
  if (PQgetisnull(rw->r, rw->row, c)) {
    *len = -1;
    return NULL;
  }
  *len = PQgetlength(rw->r, rw->row, c);
  return PQgetvalue(rw->r, rw->row, c);
}

/* Text into dst[cap]: too long, not UTF-8 or NULL is a refusal unless
 * nullable.  `pattern` (may be 0) names a shape: 'h' 32 hex or empty. */
static void take_text(row_t *rw, const char *col, char *dst, size_t cap, char pattern) {
  int n;
  const char *s = col_raw(rw, col, &n);
  dst[0] = '\0';
  if (rw->err) return;
  if (s == NULL) {
    row_refuse(rw, col, "is NULL");
    return;
  }
  if ((size_t)n >= cap) {
    char why[64];
    snprintf(why, sizeof why, "is %d bytes long (at most %zu)", n, cap - 1);
    row_refuse(rw, col, why);
    return;
  }
  const char *bad = text_problem(s, (size_t)n);
  if (bad) {
    row_refuse(rw, col, bad);
    return;
  }
  if (pattern == 'h' && n != 0 && n != 32) {
    row_refuse(rw, col, "is not 32 hex digits");
    return;
  }
  if (pattern == 'h')
    for (int i = 0; i < n; i++)
      if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
        row_refuse(rw, col, "is not 32 hex digits");
        return;
      }
  memcpy(dst, s, (size_t)n);
  dst[n] = '\0';
}

/* Text that must hold a JSON object (params, evidence, software). */
static void take_json_object(row_t *rw, const char *col, char *dst, size_t cap) {
  take_text(rw, col, dst, cap, 0);
  if (rw->err) return;
  json_error_t je;
  json_t *j = json_loads(dst, JSON_REJECT_DUPLICATES, &je);
  int ok = j != NULL && json_is_object(j);
  json_decref(j);
  if (!ok) row_refuse(rw, col, "is not a JSON object");
}

static int64_t take_int(row_t *rw, const char *col, int64_t lo, int64_t hi) {
  int n;
  const char *s = col_raw(rw, col, &n);
  if (rw->err) return 0;
  if (s == NULL) {
    row_refuse(rw, col, "is NULL");
    return 0;
  }
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') {
    row_refuse(rw, col, "is not an integer");
    return 0;
  }
  if (v < lo || v > hi) {
    char why[96];
    snprintf(why, sizeof why, "is %lld, outside %lld..%lld", v, (long long)lo, (long long)hi);
    row_refuse(rw, col, why);
    return 0;
  }
  return v;
}

/* A time in microseconds or similar figure: finite and not negative. */
static double take_figure(row_t *rw, const char *col) {
  int n;
  const char *s = col_raw(rw, col, &n);
  if (rw->err) return 0;
  if (s == NULL) {
    row_refuse(rw, col, "is NULL");
    return 0;
  }
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 1e12) {
    row_refuse(rw, col, "is not a finite time of 0 or more");
    return 0;
  }
  return v;
}

static void take_one_of(row_t *rw, const char *col, char *dst, size_t cap,
                        const char *const *allowed) {
  take_text(rw, col, dst, cap, 0);
  if (rw->err) return;
  for (const char *const *a = allowed; *a; a++)
    if (strcmp(dst, *a) == 0) return;
  row_refuse(rw, col, "is not one of the values hctune writes");
}

#define TAKE(rw, col, field, pat) take_text(rw, col, field, sizeof(field), pat)

static const char *const parities[] = {"bitwise", "kl", NULL};
static const char *const classes[] = {"baseline", "bitwise", "kl", NULL};
static const char *const kinds[] = {"compile", "parity", "timing", NULL};

/* ---- the pull --------------------------------------------------------------- */

#define PULL_COLS                                                                         \
  "model_key, software_key, host, uuid, driver_version, compiler_version, hctune_version," \
  " op, parity, tmin, tmax, variant, params, variant_class, template_hash, binary_key,"    \
  " median_us, baseline_us, ci_lo_us, ci_hi_us, samples, hosts, cards, decided_at, run_id," \
  " evidence_json, revision"

static void read_decision(row_t *rw, hct_fleet_decision_t *x) {
  hct_db_decision_t *d = &x->d;
  TAKE(rw, "model_key", d->keys.model_key, 0);
  if (rw->err == 0 && d->keys.model_key[0] == '\0') row_refuse(rw, "model_key", "is empty");
  TAKE(rw, "software_key", x->software_key, 'h');
  TAKE(rw, "host", d->keys.host, 0);
  TAKE(rw, "uuid", d->keys.uuid, 0);
  TAKE(rw, "driver_version", d->keys.driver_version, 0);
  TAKE(rw, "compiler_version", d->keys.compiler_version, 0);
  TAKE(rw, "hctune_version", d->keys.hctune_version, 0);
  TAKE(rw, "op", d->op, 0);
  if (rw->err == 0 && d->op[0] == '\0') row_refuse(rw, "op", "is empty");
  take_one_of(rw, "parity", d->parity, sizeof d->parity, parities);
  d->tmin = (int)take_int(rw, "tmin", 1, HCT_MAX_TOKENS);
  d->tmax = (int)take_int(rw, "tmax", 1, HCT_MAX_TOKENS);
  if (rw->err == 0 && d->tmax < d->tmin) row_refuse(rw, "tmax", "is below tmin");
  TAKE(rw, "variant", d->variant, 0);
  if (rw->err == 0 && d->variant[0] == '\0') row_refuse(rw, "variant", "is empty");
  take_json_object(rw, "params", d->params, sizeof d->params);
  take_one_of(rw, "variant_class", d->variant_class, sizeof d->variant_class, classes);
  TAKE(rw, "template_hash", d->template_hash, 'h');
  TAKE(rw, "binary_key", d->binary_key, 'h');
  d->median_us = take_figure(rw, "median_us");
  d->baseline_us = take_figure(rw, "baseline_us");
  d->ci_lo_us = take_figure(rw, "ci_lo_us");
  d->ci_hi_us = take_figure(rw, "ci_hi_us");
  d->samples = (int)take_int(rw, "samples", 0, INT32_MAX);
  x->hosts = (int)take_int(rw, "hosts", 0, INT32_MAX);
  x->cards = (int)take_int(rw, "cards", 0, INT32_MAX);
  d->decided_at = take_int(rw, "decided_at", 0, INT64_MAX);
  TAKE(rw, "run_id", d->run_id, 'h');
  take_json_object(rw, "evidence_json", d->evidence_json, sizeof d->evidence_json);
  x->revision = take_int(rw, "revision", 0, INT64_MAX);
  hct__strlcpy(d->source, "fleet", sizeof d->source);
}

int hct__fleet_pull(hct_fleet_t *f, const char *const *models, int n,
                    hct_fleet_decision_t **out, int *count) {
  *out = NULL;
  *count = 0;
  json_t *arr = json_array();
  for (int i = 0; arr && i < n; i++) json_array_append_new(arr, json_string(models[i]));
  char *list = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
  json_decref(arr);
  if (list == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  const char *vals[] = {list, n > 0 ? "f" : "t"};
  PGresult *r;
  int err = run(f,
                "SELECT " PULL_COLS " FROM hctune.decisions WHERE $2::boolean OR model_key IN"
                " (SELECT json_array_elements_text($1::json))"
                " ORDER BY model_key, software_key, op, parity, tmin",
                2, vals, &r, "cannot read the decisions");
  free(list);
  if (err) return err;
  int rows = PQntuples(r);
  hct_fleet_decision_t *d = rows ? calloc((size_t)rows, sizeof *d) : NULL;
  if (rows && d == NULL) {
    PQclear(r);
    return hct__error(HCT_ENOMEM, "fleet: out of memory for %d decisions", rows);
  }
  row_t rw = {f, r, "hctune.decisions", 0, 0};
  for (int i = 0; i < rows && rw.err == 0; i++) {
    rw.row = i;
    read_decision(&rw, &d[i]);
    /* Ranges of one key never overlap: rows sorted by tmin show it. */
    if (rw.err == 0 && i > 0 && strcmp(d[i].d.keys.model_key, d[i - 1].d.keys.model_key) == 0 &&
        strcmp(d[i].software_key, d[i - 1].software_key) == 0 &&
        strcmp(d[i].d.op, d[i - 1].d.op) == 0 && strcmp(d[i].d.parity, d[i - 1].d.parity) == 0 &&
        d[i].d.tmin <= d[i - 1].d.tmax)
      row_refuse(&rw, "tmin", "overlaps the range of the row before it");
  }
  PQclear(r);
  if (rw.err) {
    free(d);
    return rw.err;
  }
  *out = d;
  *count = rows;
  return 0;
}

/* ---- the recompute ----------------------------------------------------------- */

#define TRIAL_COLS                                                                         \
  "uid, host, uuid, model_key, software_key, software_json, driver_version,"              \
  " compiler_version, hctune_version, run_id, op, variant, params, template_hash,"        \
  " binary_key, tokens, pending, kind, status, seed, samples, median_us, min_us, p10_us," \
  " p90_us, ci_lo_us, ci_hi_us, converged, throttled, cold, figures_json"

/* A key's pool as the merge rule takes it. */
typedef struct pool_s {
  hct_db_trial_t *t;
  int n;
  int hosts, cards;
} pool_t;

static void read_trial(row_t *rw, hct_db_trial_t *t, char *software_key) {
  TAKE(rw, "host", t->keys.host, 0);
  TAKE(rw, "uuid", t->keys.uuid, 0);
  TAKE(rw, "model_key", t->keys.model_key, 0);
  take_text(rw, "software_key", software_key, 33, 'h');
  TAKE(rw, "driver_version", t->keys.driver_version, 0);
  TAKE(rw, "compiler_version", t->keys.compiler_version, 0);
  TAKE(rw, "hctune_version", t->keys.hctune_version, 0);
  TAKE(rw, "run_id", t->run_id, 'h');
  TAKE(rw, "op", t->op, 0);
  TAKE(rw, "variant", t->variant, 0);
  take_json_object(rw, "params", t->params, sizeof t->params);
  TAKE(rw, "template_hash", t->template_hash, 'h');
  TAKE(rw, "binary_key", t->binary_key, 'h');
  t->tokens = (int)take_int(rw, "tokens", 0, HCT_MAX_TOKENS);
  t->pending = (int)take_int(rw, "pending", 0, 1);
  take_one_of(rw, "kind", t->kind, sizeof t->kind, kinds);
  TAKE(rw, "status", t->status, 0);
  t->seed = (uint64_t)take_int(rw, "seed", INT64_MIN, INT64_MAX);
  t->samples = (int)take_int(rw, "samples", 0, INT32_MAX);
  t->median_us = take_figure(rw, "median_us");
  t->min_us = take_figure(rw, "min_us");
  t->p10_us = take_figure(rw, "p10_us");
  t->p90_us = take_figure(rw, "p90_us");
  t->ci_lo_us = take_figure(rw, "ci_lo_us");
  t->ci_hi_us = take_figure(rw, "ci_hi_us");
  t->converged = (int)take_int(rw, "converged", 0, 1);
  t->throttled = (int)take_int(rw, "throttled", 0, INT32_MAX);
  t->cold = (int)take_int(rw, "cold", 0, 1);
  int n;
  const char *figs = col_raw(rw, "figures_json", &n);
  if (rw->err == 0 && figs != NULL) {
    const char *bad = text_problem(figs, (size_t)n);
    if (bad) row_refuse(rw, "figures_json", bad);
  }
  t->figures_json = figs; /* lives as long as the result */
  t->log = NULL;          /* logs stay on the server: no rule reads them */
}

/*
 * The merge rule of `hctune db merge` (issue 17), applied to one key's
 * pooled trials.  KNOWN-GAP: until that rule is in this tree the pool is
 * read, checked and counted, but decides nothing.
 */
typedef struct verdict_s {
  hct_db_decision_t *dec;
  int n_dec;
  json_t *outliers, *conflicts; /* arrays */
} verdict_t;

static int decide_pool(const pool_t *p, verdict_t *v) {
  (void)p;
  v->dec = NULL;
  v->n_dec = 0;
  v->outliers = json_array();
  v->conflicts = json_array();
  return v->outliers && v->conflicts ? 0 : hct__error(HCT_ENOMEM, "fleet: out of memory");
}

static void verdict_free(verdict_t *v) {
  free(v->dec);
  json_decref(v->outliers);
  json_decref(v->conflicts);
}

static json_t *decision_row(const hct_db_decision_t *d, const pool_t *p) {
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:s, s:s,"
                   " s:f, s:f, s:f, s:f, s:i, s:i, s:i, s:I, s:s, s:s}",
                   "host", d->keys.host, "uuid", d->keys.uuid, "driver_version",
                   d->keys.driver_version, "compiler_version", d->keys.compiler_version,
                   "hctune_version", d->keys.hctune_version, "op", d->op, "parity", d->parity,
                   "tmin", d->tmin, "tmax", d->tmax, "variant", d->variant, "params",
                   d->params[0] ? d->params : "{}", "variant_class", d->variant_class,
                   "template_hash", d->template_hash, "binary_key", d->binary_key,
                   "median_us", d->median_us, "baseline_us", d->baseline_us, "ci_lo_us",
                   d->ci_lo_us, "ci_hi_us", d->ci_hi_us, "samples", d->samples, "hosts",
                   p->hosts, "cards", p->cards, "decided_at",
                   (json_int_t)(d->decided_at ? d->decided_at : hct__unix_time()), "run_id",
                   d->run_id, "evidence_json", d->evidence_json[0] ? d->evidence_json : "{}");
}

/* Under the key's lock, inside the caller's transaction. */
static int recompute_locked(hct_fleet_t *f, const char *model, const char *sw) {
  const char *key[] = {model, sw};
  int err = run(f, HCT_FLEET_KEY_LOCK_SQL("pg_advisory_xact_lock"), 2, key, NULL,
                "cannot lock a key");
  if (err) return err;
  /* READ COMMITTED: this statement sees every push committed before the
   * lock was granted, so the last recompute of a key has seen all of it. */
  PGresult *r;
  err = run(f,
            "SELECT " TRIAL_COLS " FROM hctune.trials WHERE model_key = $1 AND software_key = $2"
            " ORDER BY uid",
            2, key, &r, "cannot read a key's trials");
  if (err) return err;
  pool_t p = {0};
  p.n = PQntuples(r);
  p.t = p.n ? calloc((size_t)p.n, sizeof *p.t) : NULL;
  if (p.n && p.t == NULL) {
    PQclear(r);
    return hct__error(HCT_ENOMEM, "fleet: out of memory for %d trials", p.n);
  }
  row_t rw = {f, r, "hctune.trials", 0, 0};
  for (int i = 0; i < p.n && rw.err == 0; i++) {
    char swk[33];
    rw.row = i;
    read_trial(&rw, &p.t[i], swk);
  }
  err = rw.err;
  PGresult *counts = NULL;
  if (err == 0)
    err = run(f,
              "SELECT count(DISTINCT host), count(DISTINCT uuid) FROM hctune.trials"
              " WHERE model_key = $1 AND software_key = $2",
              2, key, &counts, "cannot count a key's hosts");
  if (err == 0) {
    p.hosts = atoi(PQgetvalue(counts, 0, 0));
    p.cards = atoi(PQgetvalue(counts, 0, 1));
    PQclear(counts);
  }
  verdict_t v = {0};
  if (err == 0) err = decide_pool(&p, &v);
  json_t *rows = err == 0 ? json_array() : NULL;
  for (int i = 0; rows && i < v.n_dec; i++) json_array_append_new(rows, decision_row(&v.dec[i], &p));
  char *rows_text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
  char *out_text = err == 0 ? json_dumps(v.outliers, JSON_COMPACT) : NULL;
  char *conf_text = err == 0 ? json_dumps(v.conflicts, JSON_COMPACT) : NULL;
  json_decref(rows);
  if (err == 0 && (rows_text == NULL || out_text == NULL || conf_text == NULL))
    err = hct__error(HCT_ENOMEM, "fleet: out of memory");
  char ntr[16], nh[16], nc[16], nd[16];
  snprintf(ntr, sizeof ntr, "%d", p.n);
  snprintf(nh, sizeof nh, "%d", p.hosts);
  snprintf(nc, sizeof nc, "%d", p.cards);
  snprintf(nd, sizeof nd, "%d", v.n_dec);
  if (err == 0)
    err = run(f, "DELETE FROM hctune.decisions WHERE model_key = $1 AND software_key = $2", 2,
              key, NULL, "cannot replace a key's decisions");
  if (err == 0) {
    const char *kv[] = {model, sw, ntr, nh, nc, nd, out_text, conf_text};
    err = run(f,
              "INSERT INTO hctune.keys (model_key, software_key, revision, recomputed_at, trials,"
              " hosts, cards, decisions, outliers, conflicts)"
              " VALUES ($1, $2, nextval('hctune.revisions'), extract(epoch FROM now())::bigint,"
              " $3::int, $4::int, $5::int, $6::int, $7, $8)"
              " ON CONFLICT (model_key, software_key) DO UPDATE SET revision = excluded.revision,"
              " recomputed_at = excluded.recomputed_at, trials = excluded.trials,"
              " hosts = excluded.hosts, cards = excluded.cards, decisions = excluded.decisions,"
              " outliers = excluded.outliers, conflicts = excluded.conflicts",
              8, kv, NULL, "cannot record a key");
  }
  if (err == 0 && v.n_dec > 0) {
    const char *dv[] = {model, sw, rows_text};
    err = run(f,
              "INSERT INTO hctune.decisions (" PULL_COLS ")"
              " SELECT $1, $2, host, uuid, driver_version, compiler_version, hctune_version, op,"
              " parity, tmin, tmax, variant, params, variant_class, template_hash, binary_key,"
              " median_us, baseline_us, ci_lo_us, ci_hi_us, samples, hosts, cards, decided_at,"
              " run_id, evidence_json,"
              " (SELECT revision FROM hctune.keys k WHERE k.model_key = $1"
              "   AND k.software_key = $2)"
              " FROM json_to_recordset($3::json) AS x(host text, uuid text, driver_version text,"
              " compiler_version text, hctune_version text, op text, parity text, tmin int,"
              " tmax int, variant text, params text, variant_class text, template_hash text,"
              " binary_key text, median_us float8, baseline_us float8, ci_lo_us float8,"
              " ci_hi_us float8, samples int, hosts int, cards int, decided_at bigint,"
              " run_id text, evidence_json text)",
              3, dv, NULL, "cannot write a key's decisions");
  }
  /* Delivered at commit, and only if it commits. */
  if (err == 0) {
    const char *nv[] = {model};
    err = run(f, "SELECT pg_notify('" HCT_FLEET_CHANNEL "', $1)", 1, nv, NULL,
              "cannot announce a key's decisions");
  }
  free(rows_text);
  free(out_text);
  free(conf_text);
  verdict_free(&v);
  free(p.t);
  PQclear(r);
  return err;
}

int hct__fleet_recompute(hct_fleet_t *f, const char *model_key, const char *software_key,
                         double *ms) {
  uint64_t t0 = hct__now_ns();
  int err = run0(f, "BEGIN", "cannot begin");
  if (err) return err;
  err = recompute_locked(f, model_key, software_key ? software_key : "");
  err = tx_end(f, err);
  if (ms != NULL) *ms = (double)(hct__now_ns() - t0) / 1e6;
  return err;
}

/* ---- the push ----------------------------------------------------------------- */

/*
 * A table of the local DB as one JSON array of row objects, every column
 * by its own name and type (SQLite's json_object), so that params and
 * figures travel as the text they are, byte for byte.  Columns come from
 * the table itself: a local schema with more columns sends them too.
 */
static int local_rows_json(hct_db_t *db, const char *table, char **out) {
  sqlite3 *h = hct__db_sqlite(db);
  char sql[4096];
  int o = snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%s')", table);
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "cannot read a table's columns");
  o = snprintf(sql, sizeof sql, "SELECT coalesce(json_group_array(json_object(");
  int ncol = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    /* Column names are the schema's own (letters and underscores). */
    if (name == NULL || strspn(name, "abcdefghijklmnopqrstuvwxyz_") != strlen(name)) continue;
    o += snprintf(sql + o, sizeof sql - (size_t)o, "%s'%s', %s", ncol++ ? ", " : "", name, name);
    if ((size_t)o >= sizeof sql - 64) break;
  }
  sqlite3_finalize(st);
  if (ncol == 0)
    return hct__error(HCT_EDB, "database '%s': no table '%s'", hct__db_path(db), table);
  snprintf(sql + o, sizeof sql - (size_t)o, ")), '[]') FROM %s", table);
  rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "cannot read rows to push");
  rc = sqlite3_step(st);
  int err = 0;
  if (rc == SQLITE_ROW) {
    const char *s = (const char *)sqlite3_column_text(st, 0);
    *out = hct__strdup(s ? s : "[]");
    if (*out == NULL) err = hct__error(HCT_ENOMEM, "out of memory reading rows to push");
  } else {
    err = hct__db_fail(db, rc, "cannot read rows to push");
  }
  sqlite3_finalize(st);
  return err;
}

static int json_count(const char *text) {
  json_t *j = json_loads(text, 0, NULL);
  int n = j ? (int)json_array_size(j) : 0;
  json_decref(j);
  return n;
}

/* The statements of a push, in order; $1 is the table's rows as JSON, $2
 * the push's time.  Trials and faults return the keys they touched. */
static const char push_hosts_sql[] =
    "INSERT INTO hctune.hosts (host, hctune_version, first_push, last_push, pushes)"
    " SELECT host, max(hctune_version), $2::bigint, $2::bigint, 1 FROM"
    " (SELECT host, hctune_version FROM json_to_recordset($1::json) AS x(host text,"
    "   hctune_version text)"
    "  UNION ALL SELECT host, hctune_version FROM json_to_recordset($3::json) AS y(host text,"
    "   hctune_version text)) AS h GROUP BY host"
    " ON CONFLICT (host) DO UPDATE SET last_push = excluded.last_push,"
    " hctune_version = excluded.hctune_version, pushes = hctune.hosts.pushes + 1";

static const char push_devices_sql[] =
    "INSERT INTO hctune.devices (uuid, host, model_key, name, arch, fingerprint_json,"
    " first_seen, last_seen)"
    " SELECT uuid, host, model_key, coalesce(name, ''), coalesce(arch, ''), fingerprint_json,"
    " first_seen, last_seen FROM json_to_recordset($1::json) AS x(uuid text, host text,"
    " model_key text, name text, arch text, fingerprint_json text, first_seen bigint,"
    " last_seen bigint)"
    " ON CONFLICT (uuid, host) DO UPDATE SET model_key = excluded.model_key,"
    " name = excluded.name, arch = excluded.arch, fingerprint_json = excluded.fingerprint_json,"
    " last_seen = GREATEST(hctune.devices.last_seen, excluded.last_seen)";

static const char push_trials_sql[] =
    "WITH ins AS (INSERT INTO hctune.trials (uid, host, uuid, model_key, software_key,"
    " software_json, driver_version, compiler_version, hctune_version, run_id, op, variant,"
    " params, template_hash, binary_key, tokens, pending, kind, status, seed, samples,"
    " median_us, min_us, p10_us, p90_us, ci_lo_us, ci_hi_us, converged, throttled, cold,"
    " figures_json, log, created_at, pushed_at)"
    " SELECT uid, host, uuid, model_key, coalesce(software_key, ''),"
    " coalesce(software_json, '{}'), driver_version, compiler_version, hctune_version,"
    " coalesce(run_id, ''), op, variant, coalesce(params, '{}'), coalesce(template_hash, ''),"
    " coalesce(binary_key, ''), tokens, coalesce(pending, 0), kind, status, coalesce(seed, 0),"
    " coalesce(samples, 0), coalesce(median_us, 0), coalesce(min_us, 0), coalesce(p10_us, 0),"
    " coalesce(p90_us, 0), coalesce(ci_lo_us, 0), coalesce(ci_hi_us, 0),"
    " coalesce(converged, 0), coalesce(throttled, 0), coalesce(cold, 0), figures_json, log,"
    " created_at, $2::bigint"
    " FROM json_to_recordset($1::json) AS x(uid text, host text, uuid text, model_key text,"
    " software_key text, software_json text, driver_version text, compiler_version text,"
    " hctune_version text, run_id text, op text, variant text, params text,"
    " template_hash text, binary_key text, tokens int, pending int, kind text, status text,"
    " seed bigint, samples int, median_us float8, min_us float8, p10_us float8,"
    " p90_us float8, ci_lo_us float8, ci_hi_us float8, converged int, throttled int, cold int,"
    " figures_json text, log text, created_at bigint)"
    " ON CONFLICT (uid) DO NOTHING RETURNING model_key, software_key)"
    " SELECT model_key, software_key, count(*) FROM ins GROUP BY 1, 2 ORDER BY 1, 2";

/* Faults carry no uid locally: theirs is the hash of what they say. */
static const char push_faults_sql[] =
    "WITH ins AS (INSERT INTO hctune.faults (uid, host, uuid, model_key, driver_version,"
    " compiler_version, hctune_version, op, variant, params, template_hash, tokens, reason,"
    " log, created_at, pushed_at)"
    " SELECT md5(concat_ws(chr(31), host, uuid, driver_version, op, variant, params,"
    " template_hash, tokens, reason, created_at)), host, uuid, model_key, driver_version,"
    " compiler_version, hctune_version, op, variant, coalesce(params, '{}'),"
    " coalesce(template_hash, ''), coalesce(tokens, 0), reason, log, created_at, $2::bigint"
    " FROM json_to_recordset($1::json) AS x(host text, uuid text, model_key text,"
    " driver_version text, compiler_version text, hctune_version text, op text, variant text,"
    " params text, template_hash text, tokens int, reason text, log text, created_at bigint)"
    " ON CONFLICT (uid) DO NOTHING RETURNING model_key)"
    " SELECT count(*) FROM ins";

int hct__fleet_push(hct_fleet_t *f, hct_db_t *local, hct_fleet_push_t *st) {
  memset(st, 0, sizeof *st);
  uint64_t t0 = hct__now_ns();
  char *devices = NULL, *trials = NULL, *faults = NULL;
  int err = local_rows_json(local, "devices", &devices);
  if (err == 0) err = local_rows_json(local, "trials", &trials);
  if (err == 0) err = local_rows_json(local, "faults", &faults);
  if (err) goto out;
  st->devices = json_count(devices);
  st->trials = json_count(trials);
  st->faults = json_count(faults);

  char now[24];
  snprintf(now, sizeof now, "%lld", (long long)hct__unix_time());
  PGresult *keys = NULL, *r = NULL;
  err = run0(f, "BEGIN", "cannot begin");
  if (err) goto out;
  const char *dv[] = {devices, now}, *tv[] = {trials, now}, *fv[] = {faults, now};
  const char *hv[] = {trials, now, devices};
  err = run(f, push_hosts_sql, 3, hv, NULL, "cannot record the hosts");
  if (err == 0) err = run(f, push_devices_sql, 1, dv, NULL, "cannot push devices");
  if (err == 0) err = run(f, push_trials_sql, 2, tv, &keys, "cannot push trials");
  if (err == 0) err = run(f, push_faults_sql, 2, fv, &r, "cannot push faults");
  if (err == 0) {
    st->faults_new = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  uint64_t t1 = hct__now_ns();
  st->upload_ms = (double)(t1 - t0) / 1e6;
  /* Keys in sorted order (the query's ORDER BY): two pushers lock the keys
   * they share in the same order and cannot deadlock. */
  for (int i = 0; err == 0 && keys != NULL && i < PQntuples(keys); i++) {
    st->trials_new += atoi(PQgetvalue(keys, i, 2));
    err = recompute_locked(f, PQgetvalue(keys, i, 0), PQgetvalue(keys, i, 1));
    if (err == 0) st->keys++;
  }
  PQclear(keys);
  err = tx_end(f, err);
  st->recompute_ms = (double)(hct__now_ns() - t1) / 1e6;
out:
  free(devices);
  free(trials);
  free(faults);
  st->total_ms = (double)(hct__now_ns() - t0) / 1e6;
  return err;
}

/* ---- the status ------------------------------------------------------------------ */

int hct__fleet_status(hct_fleet_t *f, json_t **out) {
  *out = NULL;
  int v;
  int err = read_version(f, &v);
  if (err) return err;
  PGresult *r;
  err = run(f,
            "SELECT (SELECT count(*) FROM hctune.hosts), (SELECT count(*) FROM hctune.devices),"
            " (SELECT count(*) FROM hctune.trials), (SELECT count(*) FROM hctune.faults),"
            " (SELECT count(*) FROM hctune.decisions), (SELECT count(*) FROM hctune.keys)",
            0, NULL, &r, "cannot count the fleet");
  if (err) return err;
  json_t *j = json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I}", "server", f->shown,
                        "schema_version", v, "hosts", (json_int_t)atoll(PQgetvalue(r, 0, 0)),
                        "devices", (json_int_t)atoll(PQgetvalue(r, 0, 1)), "trials",
                        (json_int_t)atoll(PQgetvalue(r, 0, 2)), "faults",
                        (json_int_t)atoll(PQgetvalue(r, 0, 3)), "decisions",
                        (json_int_t)atoll(PQgetvalue(r, 0, 4)), "key_count",
                        (json_int_t)atoll(PQgetvalue(r, 0, 5)));
  PQclear(r);
  if (j == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  err = run(f,
            "SELECT model_key, software_key, trials, hosts, cards, decisions, revision,"
            " recomputed_at, outliers, conflicts FROM hctune.keys ORDER BY model_key,"
            " software_key",
            0, NULL, &r, "cannot list the keys");
  if (err) {
    json_decref(j);
    return err;
  }
  json_t *keys = json_array();
  row_t rw = {f, r, "hctune.keys", 0, 0};
  for (int i = 0; keys && i < PQntuples(r) && rw.err == 0; i++) {
    rw.row = i;
    char model[256], sw[33];
    TAKE(&rw, "model_key", model, 0);
    TAKE(&rw, "software_key", sw, 'h');
    int64_t ntr = take_int(&rw, "trials", 0, INT32_MAX), nh = take_int(&rw, "hosts", 0, INT32_MAX);
    int64_t nc = take_int(&rw, "cards", 0, INT32_MAX), nd = take_int(&rw, "decisions", 0, INT32_MAX);
    int64_t rev = take_int(&rw, "revision", 0, INT64_MAX);
    int64_t at = take_int(&rw, "recomputed_at", 0, INT64_MAX);
    int n;
    const char *os = col_raw(&rw, "outliers", &n), *cs = col_raw(&rw, "conflicts", &n);
    if (rw.err) break;
    json_t *oj = os ? json_loads(os, 0, NULL) : NULL, *cj = cs ? json_loads(cs, 0, NULL) : NULL;
    if (!json_is_array(oj)) row_refuse(&rw, "outliers", "is not a JSON array");
    else if (!json_is_array(cj)) row_refuse(&rw, "conflicts", "is not a JSON array");
    if (rw.err) {
      json_decref(oj);
      json_decref(cj);
      break;
    }
    json_array_append_new(keys, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}",
                                          "model_key", model, "software_key", sw, "trials",
                                          (json_int_t)ntr, "hosts", (json_int_t)nh, "cards",
                                          (json_int_t)nc, "decisions", (json_int_t)nd,
                                          "revision", (json_int_t)rev, "recomputed_at",
                                          (json_int_t)at, "outliers", oj, "conflicts", cj));
  }
  PQclear(r);
  if (rw.err || keys == NULL) {
    json_decref(keys);
    json_decref(j);
    return rw.err ? rw.err : hct__error(HCT_ENOMEM, "fleet: out of memory");
  }
  json_object_set_new(j, "keys", keys);
  *out = j;
  return 0;
}

#endif /* HCT_NO_PG */
