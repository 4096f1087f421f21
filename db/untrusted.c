/*
 * untrusted.c: reading a fleet file that came from another host.
 *
 * Such a file may be anything: not a database, a database of another
 * program, a truncated copy, or a file built to harm the reader (triggers
 * or views that run SQL, generated columns, indexes on expressions, a
 * schema that makes SQLite parse or allocate without bound, text that is
 * not UTF-8, numbers out of range, NaN).  The order of the checks is what
 * keeps the reader safe:
 *
 *   1. The file is read once, whole, into memory (at most
 *      HCT_FLEET_MAX_BYTES): what is checked is what is used, whatever
 *      happens to the file meanwhile, and SQLite never opens the path, so
 *      no journal or WAL beside it is ever replayed into it.
 *   2. Its 100-byte header is checked by hand before SQLite sees it: the
 *      magic, the fleet application id, the format version, a whole
 *      number of pages that the header's own count agrees with (a
 *      truncated file), rollback-journal mode, UTF-8.
 *   3. SQLite gets the bytes as a read-only in-memory database
 *      (sqlite3_deserialize, SQLITE_DESERIALIZE_READONLY) on a connection
 *      with defensive mode on, trusted_schema, triggers and views off,
 *      tight length limits, and an authorizer that allows reading and
 *      nothing else.
 *   4. The whole sqlite_schema must equal, object by object, what
 *      hct__fleet_schema_sql creates in an empty database: any extra
 *      table, index, view or trigger, any changed column, is refused.
 *   5. PRAGMA quick_check reads every page.
 *   6. Only then are rows read, each value checked against its column
 *      (db/fleet_format.c): SQLite type, size, UTF-8, range, finite.
 *
 * Nothing here ATTACHes the file to another database, and nothing writes.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fleet.h"

#define BE16(p) ((uint32_t)(p)[0] << 8 | (p)[1])
#define BE32(p) ((uint32_t)(p)[0] << 24 | (uint32_t)(p)[1] << 16 | (uint32_t)(p)[2] << 8 | (p)[3])

/* ---- rows ---------------------------------------------------------------- */

static void free_row(const hct_fleet_table_t *T, char *row) {
  for (int c = 0; c < T->ncols; c++)
    if (T->cols[c].heap) {
      free(*(char **)(row + T->cols[c].off));
      *(char **)(row + T->cols[c].off) = NULL;
    }
}

/* A local DB's text that fails a check, made acceptable (export only):
 * bad bytes become '?'. */
static char *sanitized(const char *s, size_t len) {
  char *o = malloc(len + 1);
  if (o == NULL) return NULL;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    o[i] = (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f ? '?' : (char)c;
  }
  o[len] = '\0';
  return o;
}

/* Reads one value of row `r` into `dst`; 0, or a code with "why" set. */
static int read_value(sqlite3_stmt *st, int i, const hct_fleet_col_t *C, int repair, char *dst,
                      char *why, size_t wlen) {
  int type = sqlite3_column_type(st, i);
  if (C->kind == 'i') {
    if (type != SQLITE_INTEGER) {
      snprintf(why, wlen, "not an integer");
      return HCT_EINVAL;
    }
    int64_t v = sqlite3_column_int64(st, i);
    if (v < C->lo || v > C->hi) {
      snprintf(why, wlen, "%lld is outside %lld..%lld", (long long)v, (long long)C->lo,
               (long long)C->hi);
      return HCT_EINVAL;
    }
    *(int64_t *)dst = v;
    return 0;
  }
  if (C->kind == 'r') {
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT) {
      snprintf(why, wlen, "not a number");
      return HCT_EINVAL;
    }
    double v = sqlite3_column_double(st, i);
    if (!isfinite(v) || v < 0 || v > 1e12) {
      snprintf(why, wlen, "%g is not a finite figure in 0..1e12", v);
      return HCT_EINVAL;
    }
    *(double *)dst = v;
    return 0;
  }
  if (type != SQLITE_TEXT) {
    snprintf(why, wlen, "not text");
    return HCT_EINVAL;
  }
  const char *s = (const char *)sqlite3_column_text(st, i);
  size_t len = (size_t)sqlite3_column_bytes(st, i);
  if (s == NULL) return hct__error(HCT_ENOMEM, "out of memory reading a fleet file");
  char *fixed = NULL;
  int err = hct__fleet_check_text(C, s, len, why, wlen);
  if (err != 0 && repair && len < C->size) {
    /* Only JSON and free text are repaired; a bad name or key is not. */
    if (C->kind == 'j' || C->kind == 'J') fixed = hct__fleet_json_or_wrapped(s, C->size - 1);
    else if (C->kind == 't' || C->kind == 'l') fixed = sanitized(s, len);
    if (fixed != NULL) {
      s = fixed;
      len = strlen(fixed);
      err = hct__fleet_check_text(C, s, len, why, wlen);
    }
  }
  if (err == 0) {
    if (C->heap) {
      char *p = malloc(len + 1);
      if (p == NULL) err = hct__error(HCT_ENOMEM, "out of memory reading a fleet file");
      else {
        memcpy(p, s, len);
        p[len] = '\0';
        *(char **)dst = p;
      }
    } else {
      memcpy(dst, s, len);
      dst[len] = '\0';
    }
  }
  free(fixed);
  return err;
}

int hct__fleet_read_rows(sqlite3 *h, const char *sql, const char *bind_prefix,
                         const hct_fleet_table_t *T, const char *file, int repair, void **out,
                         int *nout) {
  *out = NULL;
  *nout = 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
    return hct__error(HCT_EINVAL, "fleet file '%s': cannot read table %s: %s", file, T->name,
                      sqlite3_errmsg(h));
  if (bind_prefix != NULL) sqlite3_bind_text(st, 1, bind_prefix, -1, SQLITE_STATIC);
  char *arr = NULL;
  int n = 0, cap = 0, rc, err = 0;
  while (err == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == T->max_rows) {
      err = hct__error(HCT_ERANGE, "fleet file '%s': table %s has more than %d rows", file,
                       T->name, T->max_rows);
      break;
    }
    if (n == cap) {
      int ncap = cap ? cap * 2 : 64;
      char *na = realloc(arr, (size_t)ncap * T->row_size);
      if (na == NULL) {
        err = hct__error(HCT_ENOMEM, "fleet file '%s': out of memory", file);
        break;
      }
      arr = na;
      cap = ncap;
    }
    char *row = arr + (size_t)n * T->row_size;
    memset(row, 0, T->row_size);
    for (int c = 0; c < T->ncols; c++) {
      char why[160];
      const hct_fleet_col_t *C = &T->cols[c];
      int e = read_value(st, c, C, repair, row + C->off, why, sizeof why);
      if (e != 0) {
        err = e == HCT_ENOMEM ? e
                              : hct__error(e, "fleet file '%s': table %s, row %d: column '%s': %s",
                                           file, T->name, n + 1, C->name, why);
        free_row(T, row);
        break;
      }
    }
    if (err == 0) n++;
  }
  if (err == 0 && rc != SQLITE_DONE)
    err = hct__error((rc & 0xff) == SQLITE_CORRUPT ? HCT_EDBCORRUPT : HCT_EDB,
                     "fleet file '%s': cannot read table %s: %s", file, T->name,
                     sqlite3_errmsg(h));
  sqlite3_finalize(st);
  if (err != 0) {
    for (int r = 0; r < n; r++) free_row(T, arr + (size_t)r * T->row_size);
    free(arr);
    return err;
  }
  *out = arr;
  *nout = n;
  return 0;
}

/* ---- the file's bytes ---------------------------------------------------- */

static int read_whole(const char *path, unsigned char **buf, size_t *size) {
  *buf = NULL;
  /* Non-blocking open: a FIFO given as the file must not hang the reader
   * before fstat can say it is not a regular file. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (fp == NULL) {
    int e = errno;
    if (fd >= 0) close(fd);
    return hct__error(e == ENOENT ? HCT_ENOENT : e == EACCES ? HCT_EPERM : HCT_EIO,
                      "fleet file '%s': cannot open it: %s", path, strerror(e));
  }
  struct stat sb;
  int err = 0;
  if (fstat(fileno(fp), &sb) != 0)
    err = hct__error(HCT_EIO, "fleet file '%s': cannot stat it: %s", path, strerror(errno));
  else if (!S_ISREG(sb.st_mode) || fcntl(fd, F_SETFL, 0) != 0)
    err = hct__error(HCT_EINVAL, "fleet file '%s': not a regular file", path);
  else if (sb.st_size > HCT_FLEET_MAX_BYTES)
    err = hct__error(HCT_ERANGE, "fleet file '%s': %lld bytes, more than the %lld a fleet file "
                     "may have", path, (long long)sb.st_size, (long long)HCT_FLEET_MAX_BYTES);
  else if (sb.st_size < 512)
    err = hct__error(HCT_EINVAL, "fleet file '%s': %lld bytes: too short to be an hctune fleet "
                     "file", path, (long long)sb.st_size);
  if (err == 0) {
    *size = (size_t)sb.st_size;
    *buf = sqlite3_malloc64(*size);
    if (*buf == NULL) err = hct__error(HCT_ENOMEM, "fleet file '%s': out of memory", path);
    else if (fread(*buf, 1, *size, fp) != *size || fgetc(fp) != EOF)
      err = hct__error(HCT_EIO, "fleet file '%s': changed while being read", path);
  }
  fclose(fp);
  if (err != 0) {
    sqlite3_free(*buf);
    *buf = NULL;
  }
  return err;
}

static int check_header(const char *path, const unsigned char *h, size_t size) {
  if (memcmp(h, "SQLite format 3", 16) != 0)
    return hct__error(HCT_EINVAL, "fleet file '%s': not an hctune fleet file (not an SQLite "
                      "database)", path);
  uint32_t app = BE32(h + 68);
  if (app != HCT_FLEET_APP_ID)
    return hct__error(HCT_EINVAL, "fleet file '%s': not an hctune fleet file (application id "
                      "0x%08x, want 0x%08x; 'hctune db export' writes them)", path, app,
                      HCT_FLEET_APP_ID);
  uint32_t version = BE32(h + 60);
  if (version != HCT_FLEET_FORMAT_VERSION)
    return hct__error(HCT_EDBVERSION, "fleet file '%s': format version %u, this hctune reads "
                      "version %d", path, version, HCT_FLEET_FORMAT_VERSION);
  uint32_t page = BE16(h + 16);
  if (page == 1) page = 65536;
  if (page < 512 || page > 65536 || (page & (page - 1)) != 0)
    return hct__error(HCT_EDBCORRUPT, "fleet file '%s': corrupt header (page size %u)", path,
                      page);
  if (size % page != 0)
    return hct__error(HCT_EDBCORRUPT, "fleet file '%s': truncated or padded (%zu bytes is not "
                      "a whole number of %u-byte pages)", path, size, page);
  if (h[18] != 1 || h[19] != 1)
    return hct__error(HCT_EINVAL, "fleet file '%s': in WAL mode: not a self-contained fleet "
                      "file", path);
  if (h[20] != 0 || h[21] != 64 || h[22] != 32 || h[23] != 32)
    return hct__error(HCT_EDBCORRUPT, "fleet file '%s': corrupt header (page layout)", path);
  uint32_t change = BE32(h + 24), pages = BE32(h + 28), valid_for = BE32(h + 92);
  if (change != valid_for || (uint64_t)pages * page != size)
    return hct__error(HCT_EDBCORRUPT, "fleet file '%s': truncated or not closed cleanly (the "
                      "header counts %u pages, the file holds %zu)", path, pages, size / page);
  if (BE32(h + 56) != 1)
    return hct__error(HCT_EINVAL, "fleet file '%s': text encoding is not UTF-8", path);
  if (BE32(h + 44) != 4)
    return hct__error(HCT_EINVAL, "fleet file '%s': schema format %u, not 4", path,
                      BE32(h + 44));
  return 0;
}

/* ---- the connection ----------------------------------------------------- */

/* Reading only: SELECT, reading columns, and the one PRAGMA. */
static int authorize(void *arg, int action, const char *a, const char *b, const char *db,
                     const char *trigger) {
  (void)arg;
  (void)b;
  (void)db;
  if (trigger != NULL) return SQLITE_DENY;
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ: return SQLITE_OK;
    case SQLITE_PRAGMA: return a != NULL && strcmp(a, "quick_check") == 0 ? SQLITE_OK : SQLITE_DENY;
    default: return SQLITE_DENY;
  }
}

static int harden(sqlite3 *h) {
  static const struct {
    int op, value;
  } cfg[] = {
      {SQLITE_DBCONFIG_DEFENSIVE, 1},      {SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0},
      {SQLITE_DBCONFIG_ENABLE_TRIGGER, 0}, {SQLITE_DBCONFIG_ENABLE_VIEW, 0},
      {SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cfg); i++) {
    int got = -1;
    if (sqlite3_db_config(h, cfg[i].op, cfg[i].value, &got) != SQLITE_OK || got != cfg[i].value)
      return -1;
  }
  /* Longest value and statement: far above any legitimate fleet row, far
   * below what would hurt. */
  sqlite3_limit(h, SQLITE_LIMIT_LENGTH, 1 << 20);
  sqlite3_limit(h, SQLITE_LIMIT_SQL_LENGTH, 1 << 16);
  sqlite3_limit(h, SQLITE_LIMIT_COLUMN, 64);
  sqlite3_limit(h, SQLITE_LIMIT_EXPR_DEPTH, 64);
  sqlite3_limit(h, SQLITE_LIMIT_ATTACHED, 0);
  return 0;
}

typedef struct schema_obj_s {
  char type[16], name[64], tbl[64];
  char *sql;
} schema_obj_t;

static void schema_free(schema_obj_t *o, int n) {
  for (int i = 0; i < n; i++) free(o[i].sql);
  free(o);
}

/* Every object of `h`'s main schema, sorted by name. */
static int schema_read(sqlite3 *h, const char *file, schema_obj_t **out, int *n) {
  *out = NULL;
  *n = 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name",
                         -1, &st, NULL) != SQLITE_OK)
    return hct__error(HCT_EDBCORRUPT, "fleet file '%s': cannot read its schema: %s", file,
                      sqlite3_errmsg(h));
  int rc, err = 0, cap = 0;
  schema_obj_t *o = NULL;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == 256) {
      err = hct__error(HCT_EINVAL, "fleet file '%s': more than 256 schema objects", file);
      break;
    }
    if (*n == cap) {
      cap = cap ? cap * 2 : 32;
      schema_obj_t *no = realloc(o, (size_t)cap * sizeof *o);
      if (no == NULL) {
        err = hct__error(HCT_ENOMEM, "out of memory");
        break;
      }
      o = no;
    }
    schema_obj_t *x = &o[*n];
    memset(x, 0, sizeof *x);
    const char *s[4];
    for (int c = 0; c < 4; c++) s[c] = (const char *)sqlite3_column_text(st, c);
    hct__strlcpy(x->type, s[0] ? s[0] : "", sizeof x->type);
    hct__strlcpy(x->name, s[1] ? s[1] : "", sizeof x->name);
    hct__strlcpy(x->tbl, s[2] ? s[2] : "", sizeof x->tbl);
    x->sql = strdup(s[3] ? s[3] : "");
    (*n)++;
    if (x->sql == NULL) {
      err = hct__error(HCT_ENOMEM, "out of memory");
      break;
    }
  }
  if (err == 0 && rc != SQLITE_DONE)
    err = hct__error(HCT_EDBCORRUPT, "fleet file '%s': cannot read its schema: %s", file,
                     sqlite3_errmsg(h));
  sqlite3_finalize(st);
  *out = o;
  return err;
}

/* The file's schema must be the format's, object for object. */
static int schema_check(sqlite3 *h, const char *file) {
  sqlite3 *ref = NULL;
  schema_obj_t *want = NULL, *got = NULL;
  int nw = 0, ng = 0;
  int err = 0;
  if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
      sqlite3_exec(ref, hct__fleet_schema_sql, NULL, NULL, NULL) != SQLITE_OK)
    err = hct__error(HCT_EDB, "fleet format: cannot build the reference schema: %s",
                     ref ? sqlite3_errmsg(ref) : "out of memory");
  if (err == 0) err = schema_read(ref, "(reference)", &want, &nw);
  if (err == 0) err = schema_read(h, file, &got, &ng);
  int i = 0, j = 0;
  while (err == 0 && (i < nw || j < ng)) {
    int c = i == nw ? 1 : j == ng ? -1 : strcmp(want[i].name, got[j].name);
    if (c > 0) {
      err = hct__error(HCT_EINVAL, "fleet file '%s': unexpected %s '%s' in its schema (not "
                       "part of the fleet format)", file, got[j].type, got[j].name);
    } else if (c < 0) {
      err = hct__error(HCT_EINVAL, "fleet file '%s': its schema lacks %s '%s'", file,
                       want[i].type, want[i].name);
    } else if (strcmp(want[i].type, got[j].type) != 0 || strcmp(want[i].tbl, got[j].tbl) != 0 ||
               strcmp(want[i].sql, got[j].sql) != 0) {
      err = hct__error(HCT_EINVAL, "fleet file '%s': %s '%s' differs from the fleet format's",
                       file, got[j].type, got[j].name);
    } else {
      i++;
      j++;
    }
  }
  schema_free(want, nw);
  schema_free(got, ng);
  if (ref != NULL) sqlite3_close(ref);
  return err;
}

static int quick_check(sqlite3 *h, const char *file) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, "PRAGMA quick_check(1)", -1, &st, NULL) != SQLITE_OK)
    return hct__error(HCT_EDBCORRUPT, "fleet file '%s': quick check: %s", file, sqlite3_errmsg(h));
  int rc = sqlite3_step(st), err = 0;
  const char *r = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
  if (r == NULL || strcmp(r, "ok") != 0)
    err = hct__error(HCT_EDBCORRUPT, "fleet file '%s': corrupt (quick check: %.200s)", file,
                     r ? r : sqlite3_errmsg(h));
  sqlite3_finalize(st);
  return err;
}

/* ---- meta ------------------------------------------------------------------ */

static int meta_number(const char *file, const char *key, const char *v, double lo, double hi,
                       double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (v[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(x) || x < lo || x > hi)
    return hct__error(HCT_EINVAL, "fleet file '%s': meta '%s': '%.40s' is not a number in "
                      "%g..%g", file, key, v, lo, hi);
  *out = x;
  return 0;
}

static int read_meta(sqlite3 *h, const char *file, hct_fleet_meta_t *m) {
  static const char *const keys[] = {"created_at", "format", "format_version", "host",
                                     "hctune_version", "inputs", "kind", "outlier_pct"};
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, "SELECT key, value FROM meta ORDER BY key", -1, &st, NULL) != SQLITE_OK)
    return hct__error(HCT_EINVAL, "fleet file '%s': cannot read meta: %s", file, sqlite3_errmsg(h));
  unsigned seen = 0;
  int rc, err = 0;
  while (err == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (sqlite3_column_type(st, 0) != SQLITE_TEXT || sqlite3_column_type(st, 1) != SQLITE_TEXT) {
      err = hct__error(HCT_EINVAL, "fleet file '%s': meta holds a value that is not text", file);
      break;
    }
    const char *k = (const char *)sqlite3_column_text(st, 0);
    const char *v = (const char *)sqlite3_column_text(st, 1);
    size_t vlen = (size_t)sqlite3_column_bytes(st, 1);
    size_t ki = 0;
    while (ki < HCT_ARRAY_SIZE(keys) && strcmp(keys[ki], k) != 0) ki++;
    if (ki == HCT_ARRAY_SIZE(keys)) {
      err = hct__error(HCT_EINVAL, "fleet file '%s': unexpected meta key '%.40s'", file, k);
      break;
    }
    hct_fleet_col_t text = {"meta", 't', 0, 0, 128, 0, 0, NULL};
    char why[160];
    if (hct__fleet_check_text(&text, v, vlen, why, sizeof why) != 0) {
      err = hct__error(HCT_EINVAL, "fleet file '%s': meta '%s': %s", file, k, why);
      break;
    }
    seen |= 1u << ki;
    double x;
    if (strcmp(k, "format") == 0) {
      if (strcmp(v, HCT_FLEET_FORMAT) != 0)
        err = hct__error(HCT_EINVAL, "fleet file '%s': not an hctune fleet file (format '%s')",
                         file, v);
    } else if (strcmp(k, "format_version") == 0) {
      if (strcmp(v, "1") != 0)
        err = hct__error(HCT_EDBVERSION, "fleet file '%s': format version '%s', this hctune "
                         "reads 1", file, v);
    } else if (strcmp(k, "kind") == 0) {
      if (strcmp(v, "export") != 0 && strcmp(v, "merge") != 0)
        err = hct__error(HCT_EINVAL, "fleet file '%s': kind '%s' is neither export nor merge",
                         file, v);
      else hct__strlcpy(m->kind, v, sizeof m->kind);
    } else if (strcmp(k, "host") == 0) {
      hct__strlcpy(m->host, v, sizeof m->host);
    } else if (strcmp(k, "hctune_version") == 0) {
      if (vlen >= sizeof m->hctune_version)
        err = hct__error(HCT_EINVAL, "fleet file '%s': meta 'hctune_version' is too long", file);
      else hct__strlcpy(m->hctune_version, v, sizeof m->hctune_version);
    } else if (strcmp(k, "created_at") == 0) {
      if ((err = meta_number(file, k, v, 0, 1099511627776.0, &x)) == 0) m->created_at = (int64_t)x;
    } else if (strcmp(k, "inputs") == 0) {
      if ((err = meta_number(file, k, v, 1, 1e6, &x)) == 0) m->inputs = (int64_t)x;
    } else if (strcmp(k, "outlier_pct") == 0) {
      if ((err = meta_number(file, k, v, 0, 1000, &x)) == 0) m->outlier_pct = x;
    }
  }
  if (err == 0 && rc != SQLITE_DONE)
    err = hct__error(HCT_EDBCORRUPT, "fleet file '%s': cannot read meta: %s", file,
                     sqlite3_errmsg(h));
  sqlite3_finalize(st);
  for (size_t ki = 0; err == 0 && ki < HCT_ARRAY_SIZE(keys); ki++)
    if (!(seen & (1u << ki)))
      err = hct__error(HCT_EINVAL, "fleet file '%s': meta lacks '%s'", file, keys[ki]);
  return err;
}

/* ---- rows that must agree with each other --------------------------------- */

int hct__fleet_check_ranges(const hct_fleet_t *f, const char *source, int code) {
  for (int i = 0; i < f->n_decisions; i++) {
    const hct_fleet_decision_t *d = &f->decisions[i];
    if (d->tmax < d->tmin)
      return hct__error(code, "%s: decision of '%s' on '%s': range %lld-%lld ends before it "
                        "starts", source, d->op, d->uuid, (long long)d->tmin, (long long)d->tmax);
    /* Sorted by (uuid, op, parity, tmin): a group's ranges follow each
     * other and must not overlap. */
    if (i > 0) {
      const hct_fleet_decision_t *p = &f->decisions[i - 1];
      if (strcmp(p->uuid, d->uuid) == 0 && strcmp(p->op, d->op) == 0 &&
          strcmp(p->parity, d->parity) == 0 && d->tmin <= p->tmax)
        return hct__error(code, "%s: decisions of '%s' on '%s' overlap at T=%lld", source, d->op,
                          d->uuid, (long long)d->tmin);
    }
  }
  return 0;
}

static int check_decisions(const hct_fleet_t *f, const char *file) {
  char source[600];
  snprintf(source, sizeof source, "fleet file '%s'", file);
  return hct__fleet_check_ranges(f, source, HCT_EINVAL);
}

int hct__fleet_read(const char *path, hct_fleet_t *out) {
  return hct__fleet_read_some(path, HCT_FLEET_ALL, out);
}

/* The bit of hct__fleet_read_some's `tables` that asks for table T (0:
 * always read). */
static int table_bit(const hct_fleet_table_t *T) {
  static const struct {
    const char *name;
    int bit;
  } bits[] = {{"trials", HCT_FLEET_TRIALS},
              {"decisions", HCT_FLEET_DECISIONS},
              {"faults", HCT_FLEET_FAULTS},
              {"flags", HCT_FLEET_FLAGS}};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bits); i++)
    if (strcmp(bits[i].name, T->name) == 0) return bits[i].bit;
  return 0;
}

int hct__fleet_read_some(const char *path, int tables, hct_fleet_t *out) {
  memset(out, 0, sizeof *out);
  unsigned char *buf = NULL;
  size_t size = 0;
  int err = read_whole(path, &buf, &size);
  if (err != 0) return err;
  if ((err = check_header(path, buf, size)) != 0) {
    sqlite3_free(buf);
    return err;
  }
  sqlite3 *h = NULL;
  if (sqlite3_open_v2(":memory:", &h, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK || harden(h) != 0) {
    err = hct__error(HCT_EDB, "fleet file '%s': cannot set up a hardened reader: %s", path,
                     h ? sqlite3_errmsg(h) : "out of memory");
    sqlite3_free(buf);
    goto out;
  }
  /* From here SQLite owns the buffer and frees it with the connection. */
  if (sqlite3_deserialize(h, "main", buf, (sqlite3_int64)size, (sqlite3_int64)size,
                          SQLITE_DESERIALIZE_READONLY | SQLITE_DESERIALIZE_FREEONCLOSE) !=
      SQLITE_OK) {
    err = hct__error(HCT_EDBCORRUPT, "fleet file '%s': cannot read it: %s", path,
                     sqlite3_errmsg(h));
    goto out;
  }
  sqlite3_set_authorizer(h, authorize, NULL);
  if ((err = schema_check(h, path)) != 0) goto out;
  if ((err = quick_check(h, path)) != 0) goto out;
  if ((err = read_meta(h, path, &out->meta)) != 0) goto out;
  for (int t = 0; t < hct__fleet_n_tables; t++) {
    const hct_fleet_table_t *T = &hct__fleet_tables[t];
    if (table_bit(T) != 0 && !(tables & table_bit(T))) continue;
    char sql[1024];
    size_t o = (size_t)snprintf(sql, sizeof sql, "SELECT ");
    for (int c = 0; c < T->ncols; c++)
      o += (size_t)snprintf(sql + o, sizeof sql - o, "%s%s", c ? ", " : "", T->cols[c].name);
    snprintf(sql + o, sizeof sql - o, " FROM %s ORDER BY %s", T->name, T->order);
    void *arr;
    int n;
    if ((err = hct__fleet_read_rows(h, sql, NULL, T, path, 0, &arr, &n)) != 0) goto out;
    *(void **)((char *)out + T->arr_off) = arr;
    *(int *)((char *)out + T->n_off) = n;
  }
  err = check_decisions(out, path);
out:
  if (h != NULL) sqlite3_close(h);
  if (err != 0) hct__fleet_free(out);
  return err;
}
