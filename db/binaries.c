/*
 * binaries.c: the compile cache, a hct_binary_store_t (jit/jit.h) over the
 * binaries table.  The key already hashes everything a binary depends on
 * (template, includes, params, arch, compiler), so a hit is always usable;
 * the other columns are there for people and for `hctune compile`.
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "db.h"
#include "jit.h"

/* The compiler version is informational here (the key covers it).  Taken
 * weakly so that a program linking the db layer without the jit backends
 * (the db tests) still links; hctune itself has them. */
#pragma weak hct__compiler_version

int hct__db_binary_get(hct_db_t *db, const char *key, void **image, size_t *size, int *is_ptx,
                       char **log) {
  sqlite3_stmt *st;
  *image = NULL;
  *size = 0;
  if (log) *log = NULL;
  int rc = sqlite3_prepare_v2(hct__db_sqlite(db),
                              "SELECT image, is_ptx, log FROM binaries WHERE key = ?", -1, &st,
                              NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "cannot prepare a query");
  sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
  rc = sqlite3_step(st);
  int err = 0;
  if (rc == SQLITE_ROW) {
    const void *blob = sqlite3_column_blob(st, 0);
    size_t n = (size_t)sqlite3_column_bytes(st, 0);
    /* One spare NUL byte: a PTX image is text and its loader wants it
     * terminated. */
    char *copy = malloc(n + 1);
    char *l = NULL;
    const char *logtext = (const char *)sqlite3_column_text(st, 2);
    if (log && logtext) l = strdup(logtext);
    if (copy == NULL || (log && logtext && l == NULL)) {
      free(copy);
      free(l);
      err = hct__error(HCT_ENOMEM, "binary '%s': out of memory", key);
    } else {
      if (n) memcpy(copy, blob, n);
      copy[n] = '\0';
      *image = copy;
      *size = n;
      if (is_ptx) *is_ptx = sqlite3_column_int(st, 1);
      if (log) *log = l;
    }
  } else if (rc == SQLITE_DONE) {
    err = hct__error(HCT_ENOENT, "binary '%s': not in the compile cache of '%s'", key,
                     hct__db_path(db));
  } else {
    err = hct__db_fail(db, rc, "cannot read a binary");
  }
  sqlite3_finalize(st);
  return err;
}

static int store_get(void *ctx, const char *key, void **image, size_t *size, int *is_ptx,
                     char **log) {
  return hct__db_binary_get(ctx, key, image, size, is_ptx, log);
}

/* {"ROWS":4,"TPL":2}: the point in the variant's parameter order. */
static void point_json(const hct_compile_job_t *job, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  if (job->variant == NULL) {
    hct__strlcpy(buf, "{}", len);
    return;
  }
  off += (size_t)snprintf(buf, len, "{");
  for (int i = 0; i < job->variant->n_params && off < len; i++)
    off += (size_t)snprintf(buf + off, len - off, "%s\"%s\":%lld", i ? "," : "",
                            job->variant->params[i].name, (long long)job->point.v[i]);
  if (off < len) snprintf(buf + off, len - off, "}");
}

static int store_put(void *ctx, const hct_compile_job_t *job) {
  hct_db_t *db = ctx;
  if (job->status < 0 || job->image == NULL)
    return hct__error(HCT_EINVAL, "binary '%s': nothing to store (compile failed)", job->key);
  char params[512], compiler[64] = "";
  point_json(job, params, sizeof params);
  if (hct__compiler_version != NULL && hct__compiler_version(job->backend, compiler,
                                                             sizeof compiler) < 0)
    compiler[0] = '\0';
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(
      hct__db_sqlite(db),
      "INSERT OR REPLACE INTO binaries (key, arch, compiler_version, template_hash, op, variant,"
      " params, is_ptx, image, log, regs, spill_bytes, smem_static, stack_bytes, compile_ms,"
      " created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
      -1, &st, NULL);
  if (rc != SQLITE_OK) return hct__db_fail(db, rc, "cannot prepare a query");
  int i = 1;
  sqlite3_bind_text(st, i++, job->key, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, i++, job->arch, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, i++, compiler, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, i++, job->template_hash, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, i++, job->op ? job->op->name : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, i++, job->variant ? job->variant->name : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, i++, params, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, i++, job->is_ptx);
  sqlite3_bind_blob64(st, i++, job->image, job->image_size, SQLITE_STATIC);
  if (job->log) sqlite3_bind_text(st, i, job->log, -1, SQLITE_STATIC);
  i++;
  sqlite3_bind_int(st, i++, job->regs);
  sqlite3_bind_int(st, i++, job->spill_bytes);
  sqlite3_bind_int(st, i++, job->smem_static);
  sqlite3_bind_int(st, i++, job->stack_bytes);
  sqlite3_bind_double(st, i++, job->compile_ms);
  sqlite3_bind_int64(st, i, hct__unix_time());
  rc = sqlite3_step(st);
  int err = rc == SQLITE_DONE ? 0 : hct__db_fail(db, rc, "cannot store a binary");
  sqlite3_finalize(st);
  return err;
}

void hct__db_binary_store(hct_db_t *db, struct hct_binary_store_s *store) {
  store->ctx = db;
  store->get = store_get;
  store->put = store_put;
}
