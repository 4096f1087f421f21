/*
 * options.c: the compiler's option list of a compile job, and what the
 * compiler's log says back (the error line to quote, ptxas's resource
 * figures).  Apart from jit/cache.c (keys and the compile pool, on libuv
 * and xxHash) because the client library compiles its fallback with these
 * alone, on libc.  The backend is passed in, never looked up in the table
 * of jit/backend.c: the library carries the CUDA backend only.
 */
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

/* ---- the option list ---------------------------------------------------- */

int hct__compile_opt_add(hct_compile_opts_t *o, const char *fmt, ...) {
  if (o->n >= HCT_MAX_COMPILE_OPTS)
    return hct__error(HCT_ERANGE, "more than %d compiler options", HCT_MAX_COMPILE_OPTS);
  va_list ap;
  va_start(ap, fmt);
  size_t room = sizeof o->text - o->used;
  int n = vsnprintf(o->text + o->used, room, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= room)
    return hct__error(HCT_ERANGE, "compiler options longer than %zu bytes", sizeof o->text);
  o->argv[o->n++] = o->text + o->used;
  o->used += (size_t)n + 1;
  return 0;
}

void hct__common_include_dir(const hct_op_t *op, char *buf, size_t len) {
  char dir[sizeof op->dir];
  hct__strlcpy(dir, op->dir, sizeof dir);
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
  char *slash = strrchr(dir, '/');
  if (slash == NULL)
    snprintf(buf, len, "common");
  else if (slash == dir)
    snprintf(buf, len, "/common");
  else {
    *slash = '\0';
    snprintf(buf, len, "%s/common", dir);
  }
}

void hct__compile_arch(const hct_compile_job_t *job, char *buf, size_t len) {
  size_t n = strlen(job->arch);
  int suffixed = n > 0 && (job->arch[n - 1] == 'a' || job->arch[n - 1] == 'f');
  snprintf(buf, len, "%s%s", job->arch,
           job->backend == HCT_BACKEND_CUDA && job->variant->arch_specific && !suffixed ? "a" : "");
}

int hct__compile_options(const hct_backend_ops_t *ops, const hct_compile_job_t *job,
                         hct_compile_opts_t *o) {
  if (ops == NULL) return hct__error(HCT_EINVAL, "backend %d: no such backend", (int)job->backend);
  if (ops->target_options == NULL)
    return hct__error(HCT_EUNSUPPORTED, "backend '%s' cannot compile yet", ops->name);
  memset(o, 0, offsetof(hct_compile_opts_t, text));
  char common[sizeof job->op->dir + 16];
  hct__common_include_dir(job->op, common, sizeof common);
  int rc = hct__compile_opt_add(o, "-I%s", common);
  if (rc == 0) rc = hct__compile_opt_add(o, "-I%s", job->op->dir);
  o->n_include = o->n;
  if (rc == 0) rc = hct__compile_opt_add(o, "-std=c++17");
  char arch[sizeof job->arch + 2];
  hct__compile_arch(job, arch, sizeof arch);
  if (rc == 0) rc = ops->target_options(arch, o);
  const hct_symtab_t *k = &job->op->constants;
  for (int i = 0; rc == 0 && i < k->n; i++)
    rc = hct__compile_opt_add(o, "-D%s=%lld", k->syms[i].name, (long long)k->syms[i].value);
  const hct_variant_t *v = job->variant;
  for (int i = 0; rc == 0 && i < v->n_params; i++)
    rc = hct__compile_opt_add(o, "-D%s=%lld", v->params[i].name, (long long)job->point.v[i]);
  return rc;
}

/* ---- resources from the log --------------------------------------------- */

/* ptxas -v prints "Used 40 registers, used 1 barriers, 1024 bytes smem" and
 * "16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" per
 * kernel: a number followed by one of these names a resource. */
static const struct {
  const char *suffix;
  size_t offset;
} resources[] = {
    {" registers", offsetof(hct_compile_job_t, regs)},
    {" bytes spill stores", offsetof(hct_compile_job_t, spill_bytes)},
    {" bytes smem", offsetof(hct_compile_job_t, smem_static)},
    {" bytes stack frame", offsetof(hct_compile_job_t, stack_bytes)},
};

int hct__log_error_line(const char *log, char *buf, size_t len) {
  const char *pick = NULL;
  size_t pick_n = 0;
  int is_error = 0;
  for (const char *line = log ? log : ""; *line;) {
    const char *eol = strchr(line, '\n');
    size_t n = eol ? (size_t)(eol - line) : strlen(line);
    if (memmem(line, n, "error", 5) != NULL) {
      pick = line, pick_n = n, is_error = 1;
      break;
    }
    if (pick == NULL && n > 0) pick = line, pick_n = n;
    line += n + (eol ? 1 : 0);
  }
  if (len == 0) return is_error;
  pick_n = HCT_MIN(pick_n, len - 1);
  if (pick_n > 0) memcpy(buf, pick, pick_n);
  buf[pick_n] = '\0';
  return is_error;
}

void hct__log_resources(const char *log, hct_compile_job_t *job) {
  if (log == NULL) return;
  for (const char *p = log; *p; p++) {
    if (*p < '0' || *p > '9' || (p > log && p[-1] >= '0' && p[-1] <= '9')) continue;
    char *end;
    long v = strtol(p, &end, 10);
    for (size_t i = 0; i < HCT_ARRAY_SIZE(resources); i++) {
      size_t n = strlen(resources[i].suffix);
      if (strncmp(end, resources[i].suffix, n) != 0) continue;
      int *field = (int *)(void *)((char *)job + resources[i].offset);
      if (v > *field) *field = (int)HCT_MIN(v, INT_MAX);
    }
    p = end - 1;
  }
}
