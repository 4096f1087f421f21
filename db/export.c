/*
 * export.c: the fleet file's writer (hct__fleet_write), and `db export`:
 * the local DB's rows as a fleet set.  The format itself (schema, column
 * tables, value checks) is db/fleet_format.c's: the writer binds from its
 * tables and the export reads the local DB through them, so whatever
 * hctune writes, hctune accepts.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fleet.h"
#include "jit.h"

/* ---- writing --------------------------------------------------------------- */

static int wfail(sqlite3 *h, const char *path, const char *what) {
  return hct__error(HCT_EDB, "fleet file '%s': %s: %s", path, what,
                    h ? sqlite3_errmsg(h) : "cannot open");
}

static int write_table(sqlite3 *h, const char *path, const hct_fleet_t *f,
                       const hct_fleet_table_t *T) {
  char sql[2048];
  size_t o = (size_t)snprintf(sql, sizeof sql, "INSERT INTO %s (", T->name);
  for (int c = 0; c < T->ncols; c++)
    o += (size_t)snprintf(sql + o, sizeof sql - o, "%s%s", c ? ", " : "", T->cols[c].name);
  o += (size_t)snprintf(sql + o, sizeof sql - o, ") VALUES (");
  for (int c = 0; c < T->ncols; c++) o += (size_t)snprintf(sql + o, sizeof sql - o, "%s?", c ? "," : "");
  snprintf(sql + o, sizeof sql - o, ")");
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) return wfail(h, path, "cannot prepare");
  const char *arr = *(char *const *)((const char *)f + T->arr_off);
  int n = *(const int *)((const char *)f + T->n_off);
  int err = 0;
  for (int r = 0; err == 0 && r < n; r++) {
    const char *row = arr + (size_t)r * T->row_size;
    for (int c = 0; c < T->ncols; c++) {
      const hct_fleet_col_t *C = &T->cols[c];
      const void *p = row + C->off;
      if (C->kind == 'i') sqlite3_bind_int64(st, c + 1, *(const int64_t *)p);
      else if (C->kind == 'r') sqlite3_bind_double(st, c + 1, *(const double *)p);
      else {
        const char *s = C->heap ? *(const char *const *)p : (const char *)p;
        sqlite3_bind_text(st, c + 1, s ? s : "", -1, SQLITE_STATIC);
      }
    }
    if (sqlite3_step(st) != SQLITE_DONE) err = wfail(h, path, T->name);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  return err;
}

static int write_meta(sqlite3 *h, const char *path, const hct_fleet_meta_t *m) {
  char created[24], inputs[24], pct[32];
  snprintf(created, sizeof created, "%lld", (long long)m->created_at);
  snprintf(inputs, sizeof inputs, "%lld", (long long)m->inputs);
  snprintf(pct, sizeof pct, "%.17g", m->outlier_pct);
  const char *kv[][2] = {{"format", HCT_FLEET_FORMAT},
                         {"format_version", "1"},
                         {"kind", m->kind},
                         {"host", m->host},
                         {"hctune_version", m->hctune_version},
                         {"created_at", created},
                         {"inputs", inputs},
                         {"outlier_pct", pct}};
  _Static_assert(HCT_FLEET_FORMAT_VERSION == 1, "format_version above");
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, "INSERT INTO meta (key, value) VALUES (?, ?)", -1, &st, NULL) != SQLITE_OK)
    return wfail(h, path, "cannot prepare");
  int err = 0;
  for (size_t i = 0; err == 0 && i < HCT_ARRAY_SIZE(kv); i++) {
    sqlite3_bind_text(st, 1, kv[i][0], -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kv[i][1], -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) err = wfail(h, path, "meta");
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  return err;
}

/* 1 when `path` holds a fleet file (by its header), 0 when not, -1 when
 * it cannot be read. */
static int is_fleet_file(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (fp == NULL) return -1;
  unsigned char h[100];
  size_t n = fread(h, 1, sizeof h, fp);
  fclose(fp);
  if (n < sizeof h || memcmp(h, "SQLite format 3", 16) != 0) return 0;
  uint32_t app = (uint32_t)h[68] << 24 | (uint32_t)h[69] << 16 | (uint32_t)h[70] << 8 | h[71];
  return app == HCT_FLEET_APP_ID;
}

int hct__fleet_write(const hct_fleet_t *f, const char *path) {
  struct stat sb;
  /* Replacing a file that is not a fleet file (the local DB given by
   * mistake) would lose it: refuse. */
  if (stat(path, &sb) == 0) {
    if (!S_ISREG(sb.st_mode))
      return hct__error(HCT_EINVAL, "fleet file '%s': exists and is not a regular file", path);
    if (sb.st_size > 0 && is_fleet_file(path) != 1)
      return hct__error(HCT_EEXIST, "fleet file '%s': exists and is not a fleet file: refusing "
                        "to replace it", path);
  }
  char *tmp = hct__asprintf("%s.tmp-%ld", path, (long)getpid());
  if (tmp == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  unlink(tmp);
  sqlite3 *h = NULL;
  int err = 0;
  if (sqlite3_open_v2(tmp, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    err = hct__error(HCT_EIO, "fleet file '%s': cannot create '%s': %s", path, tmp,
                     h ? sqlite3_errmsg(h) : "out of memory");
    goto out;
  }
  char pragmas[128];
  snprintf(pragmas, sizeof pragmas, "PRAGMA application_id = %d; PRAGMA user_version = %d;",
           (int)HCT_FLEET_APP_ID, HCT_FLEET_FORMAT_VERSION);
  if (sqlite3_exec(h, "PRAGMA journal_mode = DELETE; BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(h, hct__fleet_schema_sql, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(h, pragmas, NULL, NULL, NULL) != SQLITE_OK) {
    err = wfail(h, path, "cannot create the schema");
    goto out;
  }
  err = write_meta(h, path, &f->meta);
  for (int t = 0; err == 0 && t < hct__fleet_n_tables; t++)
    err = write_table(h, path, f, &hct__fleet_tables[t]);
  if (err == 0 && sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    err = wfail(h, path, "cannot commit");
out:
  if (h != NULL && sqlite3_close(h) != SQLITE_OK && err == 0)
    err = hct__error(HCT_EDB, "fleet file '%s': cannot close", path);
  if (err == 0 && rename(tmp, path) != 0)
    err = hct__error(HCT_EIO, "fleet file '%s': cannot rename '%s' to it: %s", path, tmp,
                     strerror(errno));
  if (err != 0) {
    unlink(tmp);
    char *j = hct__asprintf("%s-journal", tmp);
    if (j != NULL) unlink(j);
    free(j);
  }
  free(tmp);
  return err;
}

/* ---- export: the local DB's rows ------------------------------------------ */

/* 1 when the local table has the column: the local schema grows with
 * migrations (the software key), older DBs lack the newer columns. */
static int local_has(sqlite3 *h, const char *table, const char *col) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT 1 FROM pragma_table_info('%s') WHERE name = ?", table);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) return 0;
  sqlite3_bind_text(st, 1, col, -1, SQLITE_STATIC);
  int r = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return r;
}

static int export_table(hct_db_t *db, const char *table, const char *device, hct_fleet_t *out) {
  sqlite3 *h = hct__db_sqlite(db);
  const hct_fleet_table_t *T = hct__fleet_table(table);
  char sql[4096];
  size_t o = (size_t)snprintf(sql, sizeof sql, "SELECT ");
  for (int c = 0; c < T->ncols; c++) {
    const hct_fleet_col_t *C = &T->cols[c];
    const char *sep = c ? ", " : "";
    if (!local_has(h, table, C->name))
      o += (size_t)snprintf(sql + o, sizeof sql - o, "%s%s", sep,
                            C->kind == 'i' || C->kind == 'r' ? "0" : "''");
    else if (strcmp(C->name, "log") == 0)
      o += (size_t)snprintf(sql + o, sizeof sql - o, "%ssubstr(coalesce(log, ''), 1, 8000)", sep);
    else if (C->kind == 'i' || C->kind == 'r')
      o += (size_t)snprintf(sql + o, sizeof sql - o, "%s%s", sep, C->name);
    else
      o += (size_t)snprintf(sql + o, sizeof sql - o, "%scoalesce(%s, '')", sep, C->name);
  }
  snprintf(sql + o, sizeof sql - o,
           " FROM %s WHERE substr(uuid, 1, length(?1)) = ?1 ORDER BY %s", table, T->order);
  void *arr = NULL;
  int n = 0;
  int err = hct__fleet_read_rows(h, sql, device ? device : "", T, hct__db_path(db), 1, &arr, &n);
  *(void **)((char *)out + T->arr_off) = arr;
  *(int *)((char *)out + T->n_off) = n;
  return err;
}

/* Adds the classes of every variant of `op` from its manifest. */
static int export_variants(hct_fleet_t *out, const char *kernels_dir, const char *op) {
  for (int i = 0; i < out->n_variants; i++)
    if (strcmp(out->variants[i].op, op) == 0) return 0;
  hct_op_t *m;
  int err = hct__manifest_load(kernels_dir, op, &m);
  if (err != 0)
    return hct__error(err, "op '%s': cannot record its variants' classes: %s", op,
                      hct_last_error());
  hct_fleet_variant_t *nv = realloc(out->variants, (size_t)(out->n_variants + m->n_variants) *
                                                       sizeof *nv);
  if (nv == NULL) {
    hct__manifest_free(m);
    return hct__error(HCT_ENOMEM, "out of memory");
  }
  out->variants = nv;
  for (int v = 0; v < m->n_variants; v++) {
    hct_fleet_variant_t *x = &out->variants[out->n_variants++];
    memset(x, 0, sizeof *x);
    hct__strlcpy(x->op, op, sizeof x->op);
    hct__strlcpy(x->variant, m->variants[v].name, sizeof x->variant);
    hct__strlcpy(x->vclass, hct__parity_name(m->variants[v].parity), sizeof x->vclass);
  }
  hct__manifest_free(m);
  return 0;
}

static int cmp_variant(const void *a, const void *b) {
  const hct_fleet_variant_t *x = a, *y = b;
  int c = strcmp(x->op, y->op);
  return c ? c : strcmp(x->variant, y->variant);
}

int hct__fleet_export(hct_db_t *db, const char *device, const char *kernels_dir,
                      hct_fleet_t *out) {
  memset(out, 0, sizeof *out);
  static const char *const tables[] = {"devices", "trials", "decisions", "faults"};
  int err = 0;
  for (size_t t = 0; err == 0 && t < HCT_ARRAY_SIZE(tables); t++)
    err = export_table(db, tables[t], device, out);
  for (int i = 0; err == 0 && i < out->n_trials; i++)
    err = export_variants(out, kernels_dir, out->trials[i].op);
  for (int i = 0; err == 0 && i < out->n_decisions; i++)
    err = export_variants(out, kernels_dir, out->decisions[i].op);
  for (int i = 0; err == 0 && i < out->n_faults; i++)
    err = export_variants(out, kernels_dir, out->faults[i].op);
  if (err != 0) return err;
  if (out->n_variants > 1)
    qsort(out->variants, (size_t)out->n_variants, sizeof *out->variants, cmp_variant);
  hct__strlcpy(out->meta.kind, "export", sizeof out->meta.kind);
  hct__hostname(out->meta.host, sizeof out->meta.host);
  hct__strlcpy(out->meta.hctune_version, HCT_VERSION_STRING, sizeof out->meta.hctune_version);
  out->meta.created_at = hct__unix_time();
  out->meta.inputs = 1;
  return 0;
}
