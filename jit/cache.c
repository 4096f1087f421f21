/*
 * cache.c: compile cache keys and the parallel compile of a set of jobs.
 *
 * A key is XXH3-128 over everything that shapes a binary: the template,
 * every header it includes, the compiler's option list, the arch, the
 * backend and the compiler's version.  The option list comes from
 * hct__compile_options() (jit/options.c), the one function the backends
 * call too, so a key can never miss an option the compiler was given.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <uv.h>
#include <xxhash.h>

#include "jit.h"

/* Bumped when the key's layout changes, so old cache rows stop matching. */
#define KEY_VERSION "hctune-compile-key-1"

void hct__compile_job_clear(hct_compile_job_t *job) {
  free(job->image);
  free(job->log);
  job->image = NULL;
  job->log = NULL;
  job->image_size = 0;
  job->is_ptx = 0;
  job->status = 0;
  job->error[0] = '\0';
  job->key[0] = '\0';
  job->template_hash[0] = '\0';
  job->compile_ms = 0;
  job->cache_hit = 0;
  job->regs = job->spill_bytes = job->smem_static = job->stack_bytes = 0;
}

int hct__arch_check(hct_backend_kind_t b, const char *arch, int *arch_num, int *warp) {
  const hct_backend_ops_t *ops = hct__backend(b);
  if (ops == NULL) return hct__error(HCT_EINVAL, "backend %d: no such backend", (int)b);
  if (ops->target_options == NULL)
    return hct__error(HCT_EUNSUPPORTED, "backend '%s' cannot compile yet", ops->name);
  hct_compile_opts_t *o = calloc(1, sizeof *o);
  if (o == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  int rc = ops->target_options(arch, o);
  if (rc == 0 && arch_num) *arch_num = o->arch_num;
  if (rc == 0 && warp) *warp = o->warp;
  free(o);
  return rc;
}

/* ---- keys --------------------------------------------------------------- */

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The files already hashed, so that a header included twice (or in a
 * cycle) is hashed once, in the order first met. */
typedef struct {
  char paths[64][PATH_MAX];
  int n;
  const char *template_name; /* "hc_read/v1.cu", for messages */
} seen_t;

static void dirname_of(const char *path, char *buf, size_t len) {
  hct__strlcpy(buf, path, len);
  char *slash = strrchr(buf, '/');
  if (slash == NULL)
    hct__strlcpy(buf, ".", len);
  else if (slash == buf)
    buf[1] = '\0';
  else
    *slash = '\0';
}

/*
 * Hashes `path` (named `name` as its includer wrote it) and, depth first,
 * the headers it includes.  "x.h" is looked up as the compiler does: beside
 * the includer, then in the -I folders; not found is an error.  <x.h> is
 * looked up in the -I folders only; not found means a header built into
 * the compiler, which the compiler version covers.
 */
static int hash_file(XXH3_state_t *st, seen_t *seen, const char *path, const char *name,
                     const char *const *dirs, int n_dirs, int depth) {
  for (int i = 0; i < seen->n; i++)
    if (strcmp(seen->paths[i], path) == 0) return 0;
  if (seen->n == (int)HCT_ARRAY_SIZE(seen->paths) || depth > 32)
    return hct__error(HCT_ETEMPLATE, "template '%s': too many nested includes at '%s'",
                      seen->template_name, name);
  hct__strlcpy(seen->paths[seen->n++], path, PATH_MAX);

  char *text;
  size_t len;
  int rc = hct__read_regular(path, HCT_TEMPLATE_MAX, &text, &len);
  if (rc < 0)
    return hct__error(HCT_ETEMPLATE, "template '%s': cannot read '%s': %s", seen->template_name,
                      path, hct_last_error());
  uint64_t n64 = len;
  XXH3_128bits_update(st, name, strlen(name) + 1);
  XXH3_128bits_update(st, &n64, sizeof n64);
  XXH3_128bits_update(st, text, len);

  char here[PATH_MAX];
  dirname_of(path, here, sizeof here);
  for (char *line = text; rc == 0 && *line;) {
    char *eol = strchr(line, '\n');
    if (eol) *eol = '\0';
    char *p = line + strspn(line, " \t");
    if (*p == '#') {
      p += 1 + strspn(p + 1, " \t");
      if (strncmp(p, "include", 7) == 0) {
        p += 7 + strspn(p + 7, " \t");
        char close = *p == '"' ? '"' : *p == '<' ? '>' : 0;
        char *end = close ? strchr(p + 1, close) : NULL;
        if (end != NULL) {
          char inc[256];
          hct__strlcpy(inc, p + 1, HCT_MIN(sizeof inc, (size_t)(end - p)));
          char found[PATH_MAX + 300] = "";
          if (close == '"') {
            snprintf(found, sizeof found, "%s/%s", here, inc);
            if (!is_file(found)) found[0] = '\0';
          }
          for (int d = 0; found[0] == '\0' && d < n_dirs; d++) {
            snprintf(found, sizeof found, "%s/%s", dirs[d], inc);
            if (!is_file(found)) found[0] = '\0';
          }
          if (found[0] != '\0')
            rc = hash_file(st, seen, found, inc, dirs, n_dirs, depth + 1);
          else if (close == '"')
            rc = hct__error(HCT_ETEMPLATE,
                            "template '%s': included header '%s' not found (in '%s' or the "
                            "-I folders '%s', '%s')",
                            seen->template_name, inc, here, dirs[0], dirs[1]);
        }
      }
    }
    line = eol ? eol + 1 : line + strlen(line);
  }
  free(text);
  return rc;
}

static void hex_of(XXH128_hash_t h, char out[33]) {
  hct_hash_t hh = {h.low64, h.high64};
  hct__hash_hex(hh, out);
}

int hct__compile_key(hct_compile_job_t *job) {
  const hct_backend_ops_t *ops = hct__backend(job->backend);
  if (ops == NULL) return hct__error(HCT_EINVAL, "backend %d: no such backend", (int)job->backend);
  hct_compile_opts_t *o = malloc(sizeof *o);
  seen_t *seen = malloc(sizeof *seen);
  XXH3_state_t *st = XXH3_createState();
  int rc = (o && seen && st) ? 0 : hct__error(HCT_ENOMEM, "out of memory hashing a template");
  if (rc == 0) rc = hct__compile_options(ops, job, o);

  char name[128], path[PATH_MAX];
  snprintf(name, sizeof name, "%s/%s", job->op->name, job->variant->template_file);
  snprintf(path, sizeof path, "%s/%s", job->op->dir, job->variant->template_file);
  if (rc == 0) {
    seen->n = 0;
    seen->template_name = name;
    const char *dirs[2];
    for (int i = 0; i < 2; i++) dirs[i] = o->argv[i] + 2; /* past "-I" */
    XXH3_128bits_reset(st);
    if (!is_file(path))
      rc = hct__error(HCT_ETEMPLATE, "template '%s': no such file '%s'", name, path);
    else
      rc = hash_file(st, seen, path, job->variant->template_file, dirs, o->n_include, 0);
  }
  XXH128_hash_t tmpl = {0, 0};
  if (rc == 0) {
    tmpl = XXH3_128bits_digest(st);
    hex_of(tmpl, job->template_hash);
  }

  char version[64];
  if (rc == 0) rc = hct__compiler_version(job->backend, version, sizeof version);
  if (rc == 0) {
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, KEY_VERSION, sizeof KEY_VERSION);
    XXH3_128bits_update(st, &tmpl, sizeof tmpl);
    XXH3_128bits_update(st, ops->name, strlen(ops->name) + 1);
    char arch[sizeof job->arch + 2];
    hct__compile_arch(job, arch, sizeof arch); /* "sm_90a" for arch_specific */
    XXH3_128bits_update(st, arch, strlen(arch) + 1);
    XXH3_128bits_update(st, version, strlen(version) + 1);
    /* The -I paths are left out: what they hold is in tmpl. */
    for (int i = o->n_include; i < o->n; i++)
      XXH3_128bits_update(st, o->argv[i], strlen(o->argv[i]) + 1);
    hex_of(XXH3_128bits_digest(st), job->key);
  }
  XXH3_freeState(st);
  free(seen);
  free(o);
  return rc;
}

int hct__compiler_version(hct_backend_kind_t b, char *buf, size_t len) {
  const hct_backend_ops_t *ops = hct__backend(b);
  if (ops == NULL) return hct__error(HCT_EINVAL, "backend %d: no such backend", (int)b);
  if (ops->compiler_version == NULL)
    return hct__error(HCT_ENOCOMPILER, "backend '%s' has no compiler yet", ops->name);
  return ops->compiler_version(buf, len);
}

/* ---- compiling ---------------------------------------------------------- */

/* Sets the job's status and a one-line error naming the template, the
 * point and the arch, from this thread's last message. */
static void job_fail(hct_compile_job_t *job, int code) {
  char params[256];
  hct__point_json(job->variant, &job->point, params, sizeof params);
  job->status = code;
  const char *why = hct_last_error();
  if (strncmp(why, "template '", 10) == 0)
    snprintf(job->error, sizeof job->error, "%s (%s, %s)", why, params, job->arch);
  else
    snprintf(job->error, sizeof job->error, "template '%s/%s' %s for %s: %s", job->op->name,
             job->variant->template_file, params, job->arch, why[0] ? why : hct_strerror(code));
}

/* Compiles a job whose key is known; any thread.  The outcome is in job. */
static void compile_keyed(hct_compile_job_t *job) {
  const hct_backend_ops_t *ops = hct__backend(job->backend);
  uint64_t t0 = hct__now_ns();
  char path[PATH_MAX], common[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", job->op->dir, job->variant->template_file);
  hct__common_include_dir(job->op, common, sizeof common);
  char *source = NULL;
  /* Checked at load, but the folder may change since: a FIFO put in the
   * template's place is refused, never waited on. */
  int rc = hct__read_regular(path, HCT_TEMPLATE_MAX, &source, NULL);
  if (rc < 0)
    rc = hct__error(HCT_ETEMPLATE, "template '%s/%s': %s", job->op->name,
                    job->variant->template_file, hct_last_error());
  else if (ops->compile == NULL)
    rc = hct__error(HCT_EUNSUPPORTED, "backend '%s' cannot compile yet", ops->name);
  else
    rc = ops->compile(ops, job, source, common);
  free(source);
  job->compile_ms = (double)(hct__now_ns() - t0) / 1e6;
  if (rc < 0) {
    free(job->image);
    job->image = NULL;
    job->image_size = 0;
    job_fail(job, rc);
  } else {
    job->status = 0;
  }
}

static void job_reset(hct_compile_job_t *job) {
  hct__compile_job_clear(job);
  hct__error_clear();
}

int hct__compile_one(hct_compile_job_t *job) {
  job_reset(job);
  int rc = hct__compile_key(job);
  if (rc < 0) {
    job_fail(job, rc);
    return rc;
  }
  compile_keyed(job);
  if (job->status < 0) hct__error(job->status, "%s", job->error);
  return job->status;
}

typedef struct {
  hct_compile_job_t *jobs;
  int n, done;
  const hct_binary_store_t *store;
  void (*progress)(void *arg, const hct_compile_job_t *job, int done, int total);
  void *arg;
} batch_t;

typedef struct {
  uv_work_t req;
  batch_t *batch;
  hct_compile_job_t *job;
} work_t;

static void finished(batch_t *b, hct_compile_job_t *job) {
  b->done++;
  if (b->progress) b->progress(b->arg, job, b->done, b->n);
}

static void work_cb(uv_work_t *req) {
  work_t *w = req->data;
  hct__error_clear();
  compile_keyed(w->job);
}

/* Back on the calling thread: store the new binary, report progress. */
static void after_cb(uv_work_t *req, int status) {
  work_t *w = req->data;
  hct_compile_job_t *job = w->job;
  if (status != 0 && job->status == 0) {
    job->status = HCT_EINTERRUPTED;
    snprintf(job->error, sizeof job->error, "compile of '%s' cancelled", job->variant->name);
  }
  if (job->status == 0 && w->batch->store && w->batch->store->put) {
    int rc = w->batch->store->put(w->batch->store->ctx, job);
    /* A full disk loses the cache, not the binary in hand. */
    if (rc < 0)
      hct__log(HCT_LOG_WARN, "cannot store binary %s of '%s': %s", job->key, job->variant->name,
               hct_last_error());
  }
  finished(w->batch, job);
}

/* Loads job from the store when its key is there; returns 1 on a hit. */
static int cache_lookup(const hct_binary_store_t *store, hct_compile_job_t *job) {
  if (store == NULL || store->get == NULL) return 0;
  void *image = NULL;
  size_t size = 0;
  int is_ptx = 0;
  char *log = NULL;
  uint64_t t0 = hct__now_ns();
  int rc = store->get(store->ctx, job->key, &image, &size, &is_ptx, &log);
  if (rc < 0) {
    if (rc != HCT_ENOENT)
      hct__log(HCT_LOG_WARN, "compile cache: cannot read %s: %s", job->key, hct_last_error());
    free(image);
    free(log);
    return 0;
  }
  job->image = image;
  job->image_size = size;
  job->is_ptx = is_ptx;
  job->log = log;
  job->cache_hit = 1;
  job->status = 0;
  job->compile_ms = (double)(hct__now_ns() - t0) / 1e6;
  if (is_ptx)
    job->regs = job->spill_bytes = job->smem_static = job->stack_bytes = -1;
  else
    hct__log_resources(log, job);
  return 1;
}

int hct__compile_all(hct_compile_job_t *jobs, int n, const hct_binary_store_t *store,
                     void (*progress)(void *arg, const hct_compile_job_t *job, int done,
                                      int total),
                     void *arg) {
  if (n <= 0) return 0;
  work_t *work = calloc((size_t)n, sizeof *work);
  uv_loop_t *loop = malloc(sizeof *loop);
  if (work == NULL || loop == NULL) {
    free(work);
    free(loop);
    return hct__error(HCT_ENOMEM, "out of memory for %d compile jobs", n);
  }
  int rc = uv_loop_init(loop);
  if (rc != 0) {
    free(work);
    free(loop);
    return hct__error(HCT_EIO, "cannot start a compile loop: %s", uv_strerror(rc));
  }
  batch_t b = {jobs, n, 0, store, progress, arg};

  /* Keys and cache hits first, on this thread: they are cheap, and the
   * pool then holds only real compiles. */
  for (int i = 0; i < n; i++) {
    hct_compile_job_t *job = &jobs[i];
    job_reset(job);
    int krc = hct__compile_key(job);
    if (krc < 0) {
      job_fail(job, krc);
      finished(&b, job);
      continue;
    }
    if (cache_lookup(store, job)) {
      finished(&b, job);
      continue;
    }
    work[i].batch = &b;
    work[i].job = job;
    work[i].req.data = &work[i];
    int qrc = uv_queue_work(loop, &work[i].req, work_cb, after_cb);
    if (qrc != 0) {
      hct__error(HCT_EIO, "cannot queue a compile: %s", uv_strerror(qrc));
      job_fail(job, HCT_EIO);
      finished(&b, job);
    }
  }
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  free(loop);
  free(work);
  return 0;
}
