/*
 * fleet_pg.h: a private sub-header of db/: the live fleet on a PostgreSQL
 * server (docs/fleet-live.md).
 *
 * Files:
 *   db/fleet_pg.c  the server's schema and migrations, pushes of a host's
 *                  trials, the recompute of a key's decisions, the status,
 *                  and the daemons' pull (libpq)
 *
 * The rows are those of a fleet file (db/fleet.h): a push uploads the set
 * that `db export` makes of the local DB (hct__fleet_export), a recompute
 * hands a key's pooled rows to the rule of `db merge` (hct__fleet_merge),
 * and every row read back from the server is checked against the fleet
 * file's column tables (hct__fleet_check_text), as a row of an imported
 * file is.  A key is what one merge group is: (card model key, driver,
 * compiler, hctune version); each decision carries its candidate's
 * software key.
 *
 * URLs are whatever libpq takes: a postgresql:// URI, "key=value" pairs,
 * "service=NAME" (PGSERVICEFILE), passwords from ~/.pgpass (PGPASSFILE),
 * TLS as the URL says (sslmode=verify-full).  A URL is never printed as
 * given: messages show hct__pg_shown(), which keeps service, host,
 * hostaddr, port, dbname, user and sslmode only.
 *
 * A hct_pg_t belongs to one thread at a time; calls block (the daemon runs
 * them on a thread of their own, daemon/fleet_pull.c).  Built with
 * HCT_NO_PG (make STATIC=1) every call returns HCT_EUNSUPPORTED.
 */
#ifndef HCT_FLEET_PG_H
#define HCT_FLEET_PG_H

#include <jansson.h>

#include "fleet.h"

typedef struct hct_pg_s hct_pg_t;

/* Schema versions of the server (table hctune.schema); the migrations are
 * in db/fleet_pg.c, append only. */
#define HCT_PG_SCHEMA_VERSION 3
/* The channel a recompute announces on; the payload is the card model key
 * whose decisions changed. */
#define HCT_PG_CHANNEL "hctune_decisions"
/* The lock a recompute of one key holds until its transaction ends: `fn`
 * is pg_advisory_xact_lock, or pg_advisory_lock for a test that holds it
 * from outside.  $1 model key, $2 driver, $3 compiler, $4 hctune version. */
#define HCT_PG_KEY_LOCK_SQL(fn) \
  "SELECT " fn "(hashtextextended(concat_ws(chr(31), $1::text, $2::text, $3::text, $4::text), 7))"

/* The URL without its password, for messages (always terminated). */
void hct__pg_url_shown(const char *url, char *buf, size_t len);

enum {
  HCT_PG_NO_SCHEMA_CHECK = 1 << 0 /* connect only (fleet init) */
};

/* Connects (connect_timeout 10 s unless the URL says otherwise) and checks
 * that the server's schema is the one this hctune writes (HCT_ENOENT when
 * there is none, HCT_EDBVERSION when newer or older, saying what to do).
 * HCT_EIO: unreachable; HCT_EPERM: refused. */
int hct__pg_connect(const char *url, int flags, hct_pg_t **out);
void hct__pg_close(hct_pg_t *p);
const char *hct__pg_shown(const hct_pg_t *p);
/* libpq's connection, for the daemon's listener (PQsocket, PQnotifies). */
struct pg_conn;
struct pg_conn *hct__pg_conn(hct_pg_t *p);
/* libpq's last message on the connection as one line, control characters
 * replaced: what a log may show of it. */
void hct__pg_conn_error(hct_pg_t *p, char *buf, size_t len);

/* Creates or migrates the schema up to `to_version` (0: the latest) in one
 * transaction under a lock, so concurrent inits are safe; *from (may be
 * NULL) gets the version found.  HCT_EDBVERSION when the server's is newer. */
int hct__pg_init(hct_pg_t *p, int to_version, int *from);
/* 0 when there is no hctune schema. */
int hct__pg_schema_version(hct_pg_t *p, int *version);

typedef struct hct_pg_push_s {
  int devices, trials, faults;   /* rows of the local DB */
  int trials_new, faults_new;    /* rows the server did not have */
  int keys;                      /* keys recomputed */
  double upload_ms, recompute_ms, total_ms;
} hct_pg_push_t;

/*
 * Uploads the local DB's devices, trials and faults, and the classes of
 * their ops' variants (from the manifests in kernels_dir), in one
 * transaction: rows the server has are skipped by their uid, so pushing
 * twice adds nothing.  Then, in the same transaction, recomputes every key
 * that gained rows under HCT_PG_KEY_LOCK_SQL, in key order (two pushers
 * lock shared keys in the same order and cannot deadlock), and announces
 * each on HCT_PG_CHANNEL.  A push killed at any point leaves nothing of
 * itself; two pushers never recompute one key at once.
 */
int hct__pg_push(hct_pg_t *p, hct_db_t *local, const char *kernels_dir, hct_pg_push_t *st);

/* Recomputes one key in a transaction of its own; *ms (may be NULL) gets
 * the time it took. */
int hct__pg_recompute(hct_pg_t *p, const char *model_key, const char *driver,
                      const char *compiler, const char *hctune, double *ms);

/* The fleet as JSON: the server (shown), schema version, counts of hosts,
 * devices, trials, faults, decisions and keys, and per key its trials,
 * hosts, cards, decisions, revision, outliers and conflicts (the merge's
 * flags). */
int hct__pg_status(hct_pg_t *p, json_t **out);

/*
 * The fleet's decisions for the n card model keys (every model when models
 * is NULL), as a fleet set holding decisions only (*out zeroed first; free
 * it with hct__fleet_free, also after an error).  Every row is checked as a
 * row of an imported file is: one bad row fails the whole pull with one
 * line naming it, and nothing is returned.  *revision (may be NULL) gets
 * the highest revision among the models' keys (0: none), which changes
 * with every recompute of them.
 */
int hct__pg_pull(hct_pg_t *p, const char *const *models, int n, hct_fleet_t *out,
                 int64_t *revision);

#endif /* HCT_FLEET_PG_H */
