/*
 * import.c: `hctune db import`: a fleet set (already read and checked by
 * db/untrusted.c) into the local DB, in one transaction.
 *
 * Trials and faults are added when their uid is new: importing the same
 * file twice adds nothing the second time.  Rows that claim one of this
 * DB's own cards are left out: a file from elsewhere cannot quarantine a
 * variant on this card (a fault) or put figures under its name (a trial);
 * this host's own rows, exported and imported back, are already here.  Decisions arrive as source
 * "fleet"; each (card, op, parity) group of the file replaces the same
 * group's rows, so a newer fleet file supersedes an older one, but a group
 * of one of this DB's own cards (its devices table) is left alone: local
 * decisions win.  The file's devices are not added to the devices table,
 * which lists the cards probed here (the daemon answers for them first);
 * where a fleet row came from is in its own host and uuid columns.
 *
 * Columns are those the local tables have: a local DB that predates the
 * software key takes the rest of each row.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "fleet.h"

static int local_has(sqlite3 *h, const char *table, const char *col) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", -1, &st,
                         NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, col, -1, SQLITE_STATIC);
  int r = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return r;
}

typedef struct inserter_s {
  sqlite3_stmt *st;
  const hct_fleet_table_t *T;
  int col_param[64]; /* parameter number of column c, 0 when the local table lacks it */
} inserter_t;

static int inserter_init(hct_db_t *db, const char *table, const char *verb, inserter_t *ins) {
  sqlite3 *h = hct__db_sqlite(db);
  memset(ins, 0, sizeof *ins);
  ins->T = hct__fleet_table(table);
  char sql[4096];
  size_t o = (size_t)snprintf(sql, sizeof sql, "%s INTO %s (", verb, table);
  int np = 0;
  for (int c = 0; c < ins->T->ncols; c++) {
    if (!local_has(h, table, ins->T->cols[c].name)) continue;
    ins->col_param[c] = ++np;
    o += (size_t)snprintf(sql + o, sizeof sql - o, "%s%s", np > 1 ? ", " : "",
                          ins->T->cols[c].name);
  }
  o += (size_t)snprintf(sql + o, sizeof sql - o, ") VALUES (");
  for (int p = 1; p <= np; p++) o += (size_t)snprintf(sql + o, sizeof sql - o, "%s?", p > 1 ? "," : "");
  snprintf(sql + o, sizeof sql - o, ")");
  int rc = sqlite3_prepare_v2(h, sql, -1, &ins->st, NULL);
  return rc == SQLITE_OK ? 0 : hct__db_fail(db, rc, "cannot prepare an import");
}

/* Inserts one row; returns 1 when added, 0 when ignored, or an error. */
static int inserter_run(hct_db_t *db, inserter_t *ins, const char *row, const char *source) {
  const hct_fleet_table_t *T = ins->T;
  for (int c = 0; c < T->ncols; c++) {
    int p = ins->col_param[c];
    if (p == 0) continue;
    const hct_fleet_col_t *C = &T->cols[c];
    const char *v = row + C->off;
    if (C->kind == 'i') sqlite3_bind_int64(ins->st, p, *(const int64_t *)v);
    else if (C->kind == 'r') sqlite3_bind_double(ins->st, p, *(const double *)v);
    else {
      const char *s = C->heap ? *(const char *const *)v : v;
      if (source != NULL && strcmp(C->name, "source") == 0) s = source;
      sqlite3_bind_text(ins->st, p, s ? s : "", -1, SQLITE_STATIC);
    }
  }
  int rc = sqlite3_step(ins->st);
  sqlite3_reset(ins->st);
  if (rc != SQLITE_DONE) return hct__db_fail(db, rc, T->name);
  return sqlite3_changes(hct__db_sqlite(db)) > 0;
}

static int local_card(hct_db_t *db, const char *uuid) {
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(hct__db_sqlite(db), "SELECT 1 FROM devices WHERE uuid = ?", -1,
                              &st, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "cannot read devices");
  sqlite3_bind_text(st, 1, uuid, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return 1;
  return rc == SQLITE_DONE ? 0 : hct__db_fail(db, rc, "cannot read devices");
}

/* Inserts n rows of one table (each `stride` bytes, its card's UUID at
 * `uuid_at`), leaving out those of this database's own cards; counts the
 * rows added, those already there and those left out. */
static int insert_rows(hct_db_t *db, inserter_t *ins, const char *rows, size_t stride, int n,
                       size_t uuid_at, int *added, int *known, int *local_rows) {
  for (int i = 0; i < n; i++) {
    const char *row = rows + (size_t)i * stride;
    int local = local_card(db, row + uuid_at);
    if (local < 0) return local;
    if (local) {
      (*local_rows)++;
      continue;
    }
    int r = inserter_run(db, ins, row, NULL);
    if (r < 0) return r;
    if (r) (*added)++;
    else (*known)++;
  }
  return 0;
}


static int delete_group(hct_db_t *db, const hct_fleet_decision_t *d) {
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(hct__db_sqlite(db),
                              "DELETE FROM decisions WHERE uuid = ? AND op = ? AND parity = ?", -1,
                              &st, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "cannot prepare an import");
  sqlite3_bind_text(st, 1, d->uuid, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, d->op, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, d->parity, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : hct__db_fail(db, rc, "cannot replace fleet decisions");
}

static int import_rows(hct_db_t *db, const hct_fleet_t *f, hct_fleet_import_stats_t *s) {
  inserter_t trials, faults, decisions;
  memset(&trials, 0, sizeof trials);
  memset(&faults, 0, sizeof faults);
  memset(&decisions, 0, sizeof decisions);
  int err = inserter_init(db, "trials", "INSERT OR IGNORE", &trials);
  if (err == 0) err = inserter_init(db, "faults", "INSERT OR IGNORE", &faults);
  if (err == 0) err = inserter_init(db, "decisions", "INSERT", &decisions);
  if (err == 0)
    err = insert_rows(db, &trials, (const char *)f->trials, sizeof f->trials[0], f->n_trials,
                      offsetof(hct_fleet_trial_t, uuid), &s->trials, &s->trials_known,
                      &s->trials_local);
  if (err == 0)
    err = insert_rows(db, &faults, (const char *)f->faults, sizeof f->faults[0], f->n_faults,
                      offsetof(hct_fleet_fault_t, uuid), &s->faults, &s->faults_known,
                      &s->faults_local);
  /* Decisions come sorted by (uuid, op, parity, tmin): a group's rows are
   * adjacent. */
  int skip = 0;
  for (int i = 0; err == 0 && i < f->n_decisions; i++) {
    const hct_fleet_decision_t *d = &f->decisions[i];
    const hct_fleet_decision_t *p = i > 0 ? &f->decisions[i - 1] : NULL;
    int first = p == NULL || strcmp(p->uuid, d->uuid) != 0 || strcmp(p->op, d->op) != 0 ||
                strcmp(p->parity, d->parity) != 0;
    if (first) {
      int local = local_card(db, d->uuid);
      if (local < 0) {
        err = local;
        break;
      }
      skip = local;
      if (!skip && (err = delete_group(db, d)) != 0) break;
    }
    if (skip) {
      s->decisions_local++;
      continue;
    }
    int r = inserter_run(db, &decisions, (const char *)d, "fleet");
    if (r < 0) err = r;
    else s->decisions += r;
  }
  sqlite3_finalize(trials.st);
  sqlite3_finalize(faults.st);
  sqlite3_finalize(decisions.st);
  return err;
}

int hct__fleet_import(hct_db_t *db, const hct_fleet_t *f, hct_fleet_import_stats_t *stats) {
  hct_fleet_import_stats_t s;
  memset(&s, 0, sizeof s);
  int err = hct__db_tx_begin(db);
  if (err != 0) return err;
  err = import_rows(db, f, &s);
  err = hct__db_tx_end(db, err);
  if (err == 0 && stats != NULL) *stats = s;
  return err;
}
