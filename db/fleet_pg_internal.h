/*
 * fleet_pg_internal.h: what the two files of the live fleet share, and
 * nothing else includes: statements run on a connection, with the
 * server's error as one line naming the fleet.  It needs libpq's header,
 * which only db/fleet_pg*.o are built with (-I$(PG_INCLUDE)).
 *
 * Files:
 *   db/fleet_pg.c       connections, errors, statements, the schema
 *   db/fleet_pg_sync.c  rows to and from the server: push, recompute,
 *                       pull, status
 */
#ifndef HCT_FLEET_PG_INTERNAL_H
#define HCT_FLEET_PG_INTERNAL_H

#include <libpq-fe.h>
#include <sqlite3.h>

#include "fleet_pg.h"

/* Runs one statement with text parameters; *out (may be NULL) gets the
 * result on success, which the caller clears.  `what` begins the error. */
int hct__pg_run(hct_pg_t *f, const char *sql, int n, const char *const *vals, PGresult **out,
                const char *what);
/* A statement, or several separated by semicolons, without parameters. */
int hct__pg_run0(hct_pg_t *f, const char *sql, const char *what);
/* Ends a transaction: COMMIT when rc >= 0, else ROLLBACK keeping rc's
 * message.  A broken link rolls back by itself on the server. */
int hct__pg_tx_end(hct_pg_t *f, int rc);

#endif /* HCT_FLEET_PG_INTERNAL_H */
