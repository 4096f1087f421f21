/*
 * fleet_pg.c: the live fleet on PostgreSQL (libpq): connections, the
 * server's errors as one line, statements run (hct__pg_run), and the
 * server's schema and its migrations.  What travels over a connection,
 * pushes of a host's trials, the recompute of a key's decisions, the
 * status and the daemons' pull, is db/fleet_pg_sync.c's.
 *
 * The server holds what hosts push (hosts, devices, variants, trials,
 * faults: trials and faults never change once written, keyed by the uid
 * the local DB gave them) and what the fleet decided from them (keys,
 * decisions, flags: one set per key, a merge group of db/merge.c, (card
 * model key, driver, compiler, hctune version), replaced as a whole by
 * each recompute; each decision carries its candidate's software key).
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

#include "fleet_pg.h"

#ifdef HCT_NO_PG

#define NO_PG()                                                                          \
  hct__error(HCT_EUNSUPPORTED, "fleet: this hctune was built without PostgreSQL (make " \
             "STATIC=1); use a build with libpq for the live fleet")

void hct__pg_url_shown(const char *url, char *buf, size_t len) {
  (void)url;
  hct__strlcpy(buf, "(fleet URL)", len);
}
int hct__pg_connect(const char *url, int flags, hct_pg_t **out) {
  (void)url;
  (void)flags;
  *out = NULL;
  return NO_PG();
}
void hct__pg_close(hct_pg_t *p) { (void)p; }
const char *hct__pg_shown(const hct_pg_t *p) {
  (void)p;
  return "";
}
struct pg_conn *hct__pg_conn(hct_pg_t *p) {
  (void)p;
  return NULL;
}
void hct__pg_conn_error(hct_pg_t *p, char *buf, size_t len) {
  (void)p;
  hct__strlcpy(buf, "", len);
}
int hct__pg_init(hct_pg_t *p, int to_version, int *from) { return NO_PG(); }
int hct__pg_schema_version(hct_pg_t *p, int *version) { return NO_PG(); }

#else /* with libpq */

#include "fleet_pg_internal.h"

struct hct_pg_s {
  PGconn *c;
  char shown[512];
};

/* ---- URLs and errors --------------------------------------------------- */

/* What of a URL may be shown: where it points and how, never a secret. */
static const char *const shown_keys[] = {"service", "host", "hostaddr", "port",
                                         "dbname",  "user", "sslmode"};

void hct__pg_url_shown(const char *url, char *buf, size_t len) {
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

/* libpq's messages end in newlines and may hold several lines: one line.
 * A server's text is not trusted either: other control characters (a
 * terminal's escapes) become '?'. */
static void one_line(const char *in, char *out, size_t len) {
  size_t o = 0;
  for (const char *p = in ? in : ""; *p && o + 1 < len; p++) {
    unsigned char u = (unsigned char)*p;
    char ch = (u == '\n' || u == '\r' || u == '\t') ? ' ' : (u < 0x20 || u == 0x7f) ? '?' : *p;
    if (ch == ' ' && (o == 0 || out[o - 1] == ' ')) continue;
    out[o++] = ch;
  }
  while (o > 0 && out[o - 1] == ' ') o--;
  out[o] = '\0';
}

static int pg_fail(hct_pg_t *f, const PGresult *r, const char *what) {
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
int hct__pg_run(hct_pg_t *f, const char *sql, int n, const char *const *vals, PGresult **out,
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
int hct__pg_run0(hct_pg_t *f, const char *sql, const char *what) {
  PGresult *r = PQexec(f->c, sql);
  ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  int err = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? 0 : pg_fail(f, r, what);
  PQclear(r);
  return err;
}

/* Ends a transaction: COMMIT when rc >= 0, else ROLLBACK keeping rc's
 * message.  A broken link rolls back by itself on the server. */
int hct__pg_tx_end(hct_pg_t *f, int rc) {
  if (rc < 0) {
    if (PQstatus(f->c) == CONNECTION_OK && PQtransactionStatus(f->c) != PQTRANS_IDLE) {
      PGresult *r = PQexec(f->c, "ROLLBACK");
      PQclear(r);
    }
    return rc;
  }
  return hct__pg_run0(f, "COMMIT", "cannot commit");
}

/* ---- the schema ---------------------------------------------------------- */

/*
 * migrations[N - 1] takes the server from version N - 1 to N.  Append only:
 * servers in the field ran the released steps; change the schema with a
 * new step.  Tables and columns are those of a fleet file (db/fleet_format.c),
 * plus when a row was pushed.  The checks are the server's own line of
 * defence against a host that pushes hostile rows; every row read back is
 * checked again against the fleet file's column tables, because a server
 * is not to be trusted either.
 */
#define HEX32(c) "CHECK (" c " ~ '^[0-9a-f]{32}$')"
#define HEX32_OR_EMPTY(c) "CHECK (" c " ~ '^([0-9a-f]{32})?$')"
#define NAME(c) "CHECK (" c " ~ '^[A-Za-z0-9_.-]{1,31}$')"
#define BYTES(c, lo, max) "CHECK (octet_length(" c ") BETWEEN " #lo " AND " #max ")"
#define FIGURE(c) "DOUBLE PRECISION NOT NULL CHECK (" c " BETWEEN 0 AND 1e12)"
#define KEY_COLS                                                                   \
  " host TEXT NOT NULL " BYTES("host", 1, 127) ","                                 \
  " uuid TEXT NOT NULL " BYTES("uuid", 1, 63) ","                                  \
  " model_key TEXT NOT NULL " BYTES("model_key", 1, 255) ","                       \
  " driver_version TEXT NOT NULL " BYTES("driver_version", 0, 31) ","              \
  " compiler_version TEXT NOT NULL " BYTES("compiler_version", 0, 31) ","          \
  " hctune_version TEXT NOT NULL " BYTES("hctune_version", 0, 15) ","
static const char *const migrations[] = {
  /* 1: what hosts push. */
  "CREATE TABLE hctune.hosts ("
  " host TEXT PRIMARY KEY " BYTES("host", 1, 127) ","
  " hctune_version TEXT NOT NULL DEFAULT '' " BYTES("hctune_version", 0, 15) ","
  " first_push BIGINT NOT NULL, last_push BIGINT NOT NULL, pushes BIGINT NOT NULL DEFAULT 0);"
  "CREATE TABLE hctune.devices ("
  " uuid TEXT NOT NULL " BYTES("uuid", 1, 63) ","
  " host TEXT NOT NULL " BYTES("host", 1, 127) ","
  " model_key TEXT NOT NULL " BYTES("model_key", 1, 255) ","
  " name TEXT NOT NULL " BYTES("name", 0, 127) ","
  " arch TEXT NOT NULL " BYTES("arch", 0, 63) ","
  " driver_version TEXT NOT NULL " BYTES("driver_version", 0, 31) ","
  " compiler_version TEXT NOT NULL " BYTES("compiler_version", 0, 31) ","
  " hctune_version TEXT NOT NULL " BYTES("hctune_version", 0, 15) ","
  " first_seen BIGINT NOT NULL, last_seen BIGINT NOT NULL, PRIMARY KEY (uuid, host));"
  "CREATE TABLE hctune.variants ("
  " op TEXT NOT NULL " NAME("op") ", variant TEXT NOT NULL " NAME("variant") ","
  " class TEXT NOT NULL CHECK (class IN ('baseline', 'bitwise', 'kl')),"
  " PRIMARY KEY (op, variant));"
  "CREATE TABLE hctune.trials ("
  " uid TEXT PRIMARY KEY " HEX32("uid") "," KEY_COLS
  " software_key TEXT NOT NULL " HEX32_OR_EMPTY("software_key") ","
  " software_json TEXT NOT NULL " BYTES("software_json", 0, 4095) ","
  " run_id TEXT NOT NULL " HEX32_OR_EMPTY("run_id") ","
  " op TEXT NOT NULL " NAME("op") ", variant TEXT NOT NULL " NAME("variant") ","
  " params TEXT NOT NULL " BYTES("params", 2, 255) ","
  " template_hash TEXT NOT NULL " HEX32_OR_EMPTY("template_hash") ","
  " binary_key TEXT NOT NULL " HEX32_OR_EMPTY("binary_key") ","
  " tokens BIGINT NOT NULL CHECK (tokens BETWEEN 0 AND 65536),"
  " pending BIGINT NOT NULL CHECK (pending IN (0, 1)),"
  " kind TEXT NOT NULL CHECK (kind IN ('compile', 'parity', 'timing')),"
  " status TEXT NOT NULL CHECK (status ~ '^[a-z]{1,15}$'),"
  " seed BIGINT NOT NULL, samples BIGINT NOT NULL CHECK (samples BETWEEN 0 AND 100000000),"
  " median_us " FIGURE("median_us") ", min_us " FIGURE("min_us") ","
  " p10_us " FIGURE("p10_us") ", p90_us " FIGURE("p90_us") ","
  " ci_lo_us " FIGURE("ci_lo_us") ", ci_hi_us " FIGURE("ci_hi_us") ","
  " converged BIGINT NOT NULL CHECK (converged IN (0, 1)),"
  " throttled BIGINT NOT NULL CHECK (throttled BETWEEN 0 AND 100000000),"
  " cold BIGINT NOT NULL CHECK (cold IN (0, 1)),"
  " figures_json TEXT NOT NULL " BYTES("figures_json", 0, 8191) ","
  " created_at BIGINT NOT NULL CHECK (created_at >= 0), pushed_at BIGINT NOT NULL);"
  "CREATE INDEX trials_key ON hctune.trials"
  " (model_key, driver_version, compiler_version, hctune_version);"
  "CREATE TABLE hctune.faults ("
  " uid TEXT PRIMARY KEY " HEX32("uid") "," KEY_COLS
  " op TEXT NOT NULL " NAME("op") ", variant TEXT NOT NULL " NAME("variant") ","
  " params TEXT NOT NULL " BYTES("params", 2, 255) ","
  " template_hash TEXT NOT NULL " HEX32_OR_EMPTY("template_hash") ","
  " tokens BIGINT NOT NULL CHECK (tokens BETWEEN 0 AND 1048576),"
  " reason TEXT NOT NULL CHECK (reason ~ '^[a-z]{1,15}$'),"
  " log TEXT NOT NULL " BYTES("log", 0, 32767) ","
  " created_at BIGINT NOT NULL CHECK (created_at >= 0), pushed_at BIGINT NOT NULL);"
  "CREATE INDEX faults_key ON hctune.faults"
  " (model_key, driver_version, compiler_version, hctune_version);",

  /* 2: what the recomputes write: per key its state (keys), its decisions
   * and what the merge left out (flags), and the revision counter daemons
   * and `fleet status` read. */
  "CREATE SEQUENCE hctune.revisions;"
  "CREATE TABLE hctune.keys ("
  " model_key TEXT NOT NULL, driver_version TEXT NOT NULL, compiler_version TEXT NOT NULL,"
  " hctune_version TEXT NOT NULL, revision BIGINT NOT NULL, recomputed_at BIGINT NOT NULL,"
  " trials BIGINT NOT NULL, hosts BIGINT NOT NULL, cards BIGINT NOT NULL,"
  " decisions BIGINT NOT NULL, outliers BIGINT NOT NULL, conflicts BIGINT NOT NULL,"
  " PRIMARY KEY (model_key, driver_version, compiler_version, hctune_version));"
  "CREATE TABLE hctune.decisions ("
  " uid TEXT NOT NULL UNIQUE " HEX32("uid") "," KEY_COLS
  " software_key TEXT NOT NULL " HEX32_OR_EMPTY("software_key") ","
  " software_json TEXT NOT NULL " BYTES("software_json", 0, 4095) ","
  " op TEXT NOT NULL " NAME("op") ","
  " parity TEXT NOT NULL CHECK (parity IN ('bitwise', 'kl')),"
  " tmin BIGINT NOT NULL, tmax BIGINT NOT NULL,"
  " variant TEXT NOT NULL " NAME("variant") ","
  " params TEXT NOT NULL " BYTES("params", 2, 255) ","
  " variant_class TEXT NOT NULL CHECK (variant_class IN ('baseline', 'bitwise', 'kl')),"
  " template_hash TEXT NOT NULL " HEX32_OR_EMPTY("template_hash") ","
  " binary_key TEXT NOT NULL " HEX32_OR_EMPTY("binary_key") ","
  " source TEXT NOT NULL CHECK (source = 'fleet'),"
  " median_us " FIGURE("median_us") ", baseline_us " FIGURE("baseline_us") ","
  " ci_lo_us " FIGURE("ci_lo_us") ", ci_hi_us " FIGURE("ci_hi_us") ","
  " samples BIGINT NOT NULL CHECK (samples BETWEEN 0 AND 100000000),"
  " decided_at BIGINT NOT NULL CHECK (decided_at >= 0),"
  " run_id TEXT NOT NULL " HEX32_OR_EMPTY("run_id") ","
  " evidence_json TEXT NOT NULL " BYTES("evidence_json", 2, 1023) ","
  " revision BIGINT NOT NULL,"
  " CHECK (tmin >= 1 AND tmax >= tmin AND tmax <= 1048576),"
  " PRIMARY KEY (uuid, op, parity, tmin));"
  "CREATE INDEX decisions_model ON hctune.decisions (model_key);"
  "CREATE TABLE hctune.flags ("
  " kind TEXT NOT NULL CHECK (kind IN ('outlier', 'conflict')),"
  " model_key TEXT NOT NULL, env TEXT NOT NULL, uuid TEXT NOT NULL, host TEXT NOT NULL,"
  " op TEXT NOT NULL, variant TEXT NOT NULL, params TEXT NOT NULL,"
  " template_hash TEXT NOT NULL, detail TEXT NOT NULL,"
  " key_driver TEXT NOT NULL, key_compiler TEXT NOT NULL, key_hctune TEXT NOT NULL);"
  "CREATE INDEX flags_key ON hctune.flags (model_key, key_driver, key_compiler, key_hctune);",
  /* 3: bit families (issue 29): a decision's parity may also be
   * "bits:<variant>", the rule of hct__parity_asked_ok. */
  "ALTER TABLE hctune.decisions DROP CONSTRAINT IF EXISTS decisions_parity_check;"
  "ALTER TABLE hctune.decisions ADD CONSTRAINT decisions_parity_check CHECK"
  " (parity IN ('bitwise', 'kl') OR parity ~ '^bits:[A-Za-z0-9_.-]{1,31}$');",
};

_Static_assert(HCT_ARRAY_SIZE(migrations) == HCT_PG_SCHEMA_VERSION,
               "one migration per fleet schema version");

/* Taken by every init, so that two at once do not both create tables. */
#define INIT_LOCK "SELECT pg_advisory_xact_lock(7526466916043845633)"

static int read_version(hct_pg_t *f, int *version) {
  PGresult *r;
  int err = hct__pg_run(f,
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
  err = hct__pg_run(f, "SELECT max(version) FROM hctune.schema", 0, NULL, &r,
            "cannot read the schema version");
  if (err) return err;
  *version = PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) ? atoi(PQgetvalue(r, 0, 0)) : 0;
  PQclear(r);
  return 0;
}

int hct__pg_schema_version(hct_pg_t *f, int *version) { return read_version(f, version); }

int hct__pg_init(hct_pg_t *f, int to_version, int *from) {
  if (to_version <= 0) to_version = HCT_PG_SCHEMA_VERSION;
  if (to_version > HCT_PG_SCHEMA_VERSION)
    return hct__error(HCT_EINVAL, "fleet '%s': schema version %d is beyond this hctune's %d",
                      f->shown, to_version, HCT_PG_SCHEMA_VERSION);
  int err = hct__pg_run0(f, "BEGIN", "cannot begin");
  if (err) return err;
  err = hct__pg_run0(f, INIT_LOCK, "cannot lock the schema");
  if (err == 0)
    err = hct__pg_run0(f,
               "CREATE SCHEMA IF NOT EXISTS hctune;"
               "CREATE TABLE IF NOT EXISTS hctune.schema (version INTEGER NOT NULL,"
               " migrated_at BIGINT NOT NULL)",
               "cannot create the schema");
  int v = 0;
  if (err == 0) err = read_version(f, &v);
  if (err == 0 && from != NULL) *from = v;
  if (err == 0 && v > HCT_PG_SCHEMA_VERSION)
    err = hct__error(HCT_EDBVERSION, "fleet '%s': schema version %d is newer than %d (upgrade "
                     "hctune)", f->shown, v, HCT_PG_SCHEMA_VERSION);
  for (int next = v + 1; err == 0 && next <= to_version; next++) {
    err = hct__pg_run0(f, migrations[next - 1], "cannot migrate the schema");
    char num[16];
    snprintf(num, sizeof num, "%d", next);
    const char *vals[] = {num};
    if (err == 0)
      err = hct__pg_run(f,
                "INSERT INTO hctune.schema VALUES ($1::int,"
                " extract(epoch FROM now())::bigint)",
                1, vals, NULL, "cannot record the schema version");
  }
  return hct__pg_tx_end(f, err);
}

/* ---- connections --------------------------------------------------------- */

static void quiet(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

int hct__pg_connect(const char *url, int flags, hct_pg_t **out) {
  *out = NULL;
  if (url == NULL || url[0] == '\0') return hct__error(HCT_EINVAL, "fleet URL is empty");
  hct_pg_t *f = calloc(1, sizeof *f);
  if (f == NULL) return hct__error(HCT_ENOMEM, "fleet: out of memory");
  hct__pg_url_shown(url, f->shown, sizeof f->shown);
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
    hct__pg_close(f);
    return err;
  }
  /* The server's notices (a shutdown's warning) would reach stderr as
   * lines of their own: the error that follows says it in one. */
  PQsetNoticeProcessor(f->c, quiet, NULL);
  int err = hct__pg_run0(f, "SET client_min_messages = warning; SET lc_messages = 'C'",
                 "cannot set the session up");
  /* lc_messages needs a superuser: without it keep the server's. */
  if (err) {
    PGresult *r = PQexec(f->c, "SET client_min_messages = warning");
    PQclear(r);
    err = 0;
  }
  if (!(flags & HCT_PG_NO_SCHEMA_CHECK)) {
    int v;
    err = read_version(f, &v);
    if (err == 0 && v == 0)
      err = hct__error(HCT_ENOENT, "fleet '%s': no hctune schema there (run 'hctune fleet "
                       "init --url ...' once, as the fleet's owner)", f->shown);
    else if (err == 0 && v > HCT_PG_SCHEMA_VERSION)
      err = hct__error(HCT_EDBVERSION, "fleet '%s': schema version %d is newer than %d "
                       "(upgrade hctune)", f->shown, v, HCT_PG_SCHEMA_VERSION);
    else if (err == 0 && v < HCT_PG_SCHEMA_VERSION)
      err = hct__error(HCT_EDBVERSION, "fleet '%s': schema version %d is older than %d (run "
                       "'hctune fleet init' to migrate it)", f->shown, v,
                       HCT_PG_SCHEMA_VERSION);
  }
  if (err) {
    hct__pg_close(f);
    return err;
  }
  *out = f;
  return 0;
}

void hct__pg_close(hct_pg_t *f) {
  if (f == NULL) return;
  PQfinish(f->c);
  free(f);
}

const char *hct__pg_shown(const hct_pg_t *f) { return f->shown; }

struct pg_conn *hct__pg_conn(hct_pg_t *f) { return f->c; }

void hct__pg_conn_error(hct_pg_t *f, char *buf, size_t len) {
  one_line(PQerrorMessage(f->c), buf, len);
}

#endif /* HCT_NO_PG */
