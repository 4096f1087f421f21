/*
 * cmd_compile.c: `hctune compile`: compiles every variant of an op at every
 * point of its parameter space for one arch, with no GPU, and prints what
 * each binary uses (registers, spills, shared memory, stack).  It is how a
 * template change is checked on a development machine before a probe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "db.h"
#include "jit.h"

static const char usage[] =
    "usage: hctune compile --arch ARCH [--backend cuda|hip] [--op NAME] [--variant V,..]\n"
    "                      [--first-point | --edge-points] [--jobs N] [--json] [--db PATH]\n"
    "\n"
    "Compiles every variant of the op (default: every op under the kernels folder)\n"
    "at every point of its parameter space for ARCH (sm_90, gfx90a ...), without a\n"
    "GPU, and prints per binary: variant, parameters, registers, spill bytes, static\n"
    "shared memory, stack bytes, compile time, and ok or the error.  Points that\n"
    "fail a constraint not involving the card (SMEM_OPTIN, SM_COUNT) or T are skipped.\n"
    "\n"
    "  --arch ARCH     target, e.g. sm_90 (required)\n"
    "  --backend B     cuda (default) or hip\n"
    "  --op NAME       one op only\n"
    "  --variant V,..  these variants only, comma-separated (with --op)\n"
    "  --first-point   the first point of each variant that is not skipped, not\n"
    "                  every point: each template once (the test suite's matrix)\n"
    "  --edge-points   each variant's first and last point, and for every parameter\n"
    "                  the first point at its first and at its last value: every\n"
    "                  extreme of the space, a few binaries instead of all\n"
    "  --jobs N        parallel compiles (default: the CPU count)\n"
    "  --json          a JSON array, one object per binary\n"
    "  --db PATH       use the compile cache of this database\n"
    "\n"
    "Exit status: 0 when every binary compiled, 1 otherwise, 2 for bad usage.\n";

typedef struct {
  const char *arch, *op, *variant, *db;
  hct_backend_kind_t backend;
  int jobs, json, first_point, edge_points;
} args_t;

/* --backend: a backend's name. */
static int backend_arg(const char *arg, void *value) {
  for (int b = 0; b < HCT_BACKEND_COUNT; b++)
    if (strcmp(arg, hct__backend((hct_backend_kind_t)b)->name) == 0) {
      *(hct_backend_kind_t *)value = hct__backend((hct_backend_kind_t)b)->kind;
      return 0;
    }
  return hct__error(HCT_EINVAL, "unknown backend: expected cuda or hip");
}

static int parse_args(int argc, char **argv, args_t *a, hct_cli_env_t *env) {
  memset(a, 0, sizeof *a);
  a->backend = HCT_BACKEND_CUDA;
  const hct_option_t opts[] = {
      HCT_OPT_STRING("arch", &a->arch),
      HCT_OPT_CALL("backend", &a->backend, backend_arg),
      HCT_OPT_STRING("op", &a->op),
      HCT_OPT_STRING("variant", &a->variant),
      HCT_OPT_FLAG("first-point", &a->first_point),
      HCT_OPT_FLAG("edge-points", &a->edge_points),
      HCT_OPT_INT("jobs", &a->jobs, 1, 256),
      HCT_OPT_FLAG("json", &a->json),
      HCT_OPT_STRING("db", &a->db),
      HCT_OPT_END,
  };
  int rc = hct__cli_options(argc, argv, opts, usage, env);
  if (rc != 0) return rc;
  if (a->arch == NULL) return hct__usage_error(argv[0], "--arch is required (e.g. --arch sm_90)");
  if (a->variant && a->op == NULL) return hct__usage_error(argv[0], "--variant needs --op");
  return 0;
}

/* Is the point ruled out by a constraint that can be decided without a
 * card?  One naming a device-only value (SMEM_OPTIN, SM_COUNT) or T is
 * undecided here and left to the probe (hct__constraints_hold, partial). */
static int point_excluded(const hct_op_t *op, const hct_variant_t *v, const hct_point_t *p,
                          int arch_num, int warp, int hip) {
  hct_symtab_t syms;
  char why[256];
  hct__point_symtab(op, v, p, &syms);
  hct__symtab_set(&syms, "ARCH", arch_num);
  hct__symtab_set(&syms, "WARP", warp);
  hct__symtab_set(&syms, "HIP", hip);
  return !hct__constraints_hold(v, &syms, 1, why, sizeof why);
}

typedef struct {
  hct_op_t *ops[64];
  int n_ops;
  hct_compile_job_t *jobs;
  int n_jobs, cap;
} plan_t;

static int plan_add(plan_t *pl, const args_t *a, const hct_op_t *op, const hct_variant_t *v,
                    const hct_point_t *p) {
  if (pl->n_jobs == pl->cap) {
    int cap = pl->cap ? pl->cap * 2 : 64;
    hct_compile_job_t *nj = realloc(pl->jobs, (size_t)cap * sizeof *nj);
    if (nj == NULL) return hct__error(HCT_ENOMEM, "out of memory planning compiles");
    pl->jobs = nj;
    pl->cap = cap;
  }
  hct_compile_job_t *job = &pl->jobs[pl->n_jobs++];
  memset(job, 0, sizeof *job);
  job->backend = a->backend;
  hct__strlcpy(job->arch, a->arch, sizeof job->arch);
  job->op = op;
  job->variant = v;
  job->point = *p;
  return 0;
}

/* Is `name` in the comma-separated list? */
static int in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",");
    if (len == n && strncmp(p, name, n) == 0) return 1;
    p += len + (p[len] == ',');
  }
  return 0;
}

/* Of the allowed points (keep[k] set), keeps only the edges of the space:
 * the first and the last, and for every parameter the first point whose
 * value is that parameter's first, and the first whose value is its last
 * (the largest tiles, stages and warps are where registers and shared
 * memory run out). */
static void edge_pick(const hct_variant_t *v, const hct_point_t *pts, int n, unsigned char *keep) {
  int first = -1, last = -1;
  unsigned char *edge = calloc((size_t)(n > 0 ? n : 1), 1);
  if (edge == NULL) return; /* keep every allowed point: more work, nothing missed */
  for (int k = 0; k < n; k++)
    if (keep[k]) {
      if (first < 0) first = k;
      last = k;
    }
  if (first >= 0) edge[first] = edge[last] = 1;
  for (int p = 0; p < v->n_params; p++)
    for (int end = 0; end < 2; end++) {
      const int64_t want = v->params[p].values[end ? v->params[p].n_values - 1 : 0];
      for (int k = 0; k < n; k++)
        if (keep[k] && pts[k].v[p] == want) {
          edge[k] = 1;
          break;
        }
    }
  for (int k = 0; k < n; k++) keep[k] = keep[k] && edge[k];
  free(edge);
}

/* Jobs for every variant and point of op that this arch can run. */
static int plan_op(plan_t *pl, const args_t *a, const hct_op_t *op, int arch_num, int warp) {
  for (int i = 0; i < op->n_variants; i++) {
    const hct_variant_t *v = &op->variants[i];
    if (a->variant && !in_list(a->variant, v->name)) continue;
    char why[256];
    if (!hct__variant_fits(v, a->backend, arch_num, warp, why, sizeof why)) {
      fprintf(stderr, "hctune: note: %s %s %s, skipped for %s\n", op->name, v->name, why, a->arch);
      continue;
    }
    hct_point_t *points = malloc(4096 * sizeof *points);
    if (points == NULL) return hct__error(HCT_ENOMEM, "out of memory planning compiles");
    int n = hct__param_points(v, points, 4096);
    /* The points compiled: every one, or (--edge-points) those edge_pick
     * marks, or (--first-point) the first allowed. */
    unsigned char *keep = calloc((size_t)(n > 0 ? n : 1), 1);
    if (keep == NULL) {
      free(points);
      return hct__error(HCT_ENOMEM, "out of memory planning compiles");
    }
    for (int k = 0; k < n; k++)
      keep[k] = !point_excluded(op, v, &points[k], arch_num, warp, a->backend == HCT_BACKEND_HIP);
    if (a->edge_points) edge_pick(v, points, n, keep);
    for (int k = 0; k < n; k++) {
      if (!keep[k]) continue;
      int rc = plan_add(pl, a, op, v, &points[k]);
      if (rc < 0) {
        free(keep);
        free(points);
        return rc;
      }
      if (a->first_point) break;
    }
    free(keep);
    free(points);
  }
  for (const char *p = a->variant; p && *p;) {
    char name[64];
    size_t len = strcspn(p, ",");
    hct__strlcpy(name, p, HCT_MIN(sizeof name, len + 1));
    if (hct__variant_find(op, name) == NULL)
      return hct__error(HCT_ENOENT, "variant '%s': not in op '%s'", name, op->name);
    p += len + (p[len] == ',');
  }
  return 0;
}

static void fmt_res(char *buf, size_t len, int v) {
  if (v < 0)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%d", v);
}

static void print_table(const plan_t *pl) {
  int wo = 2, wv = 7, wp = 6;
  for (int i = 0; i < pl->n_jobs; i++) {
    char params[256];
    hct__point_json(pl->jobs[i].variant, &pl->jobs[i].point, params, sizeof params);
    wo = HCT_MAX(wo, (int)strlen(pl->jobs[i].op->name));
    wv = HCT_MAX(wv, (int)strlen(pl->jobs[i].variant->name));
    wp = HCT_MAX(wp, (int)strlen(params));
  }
  printf("%-*s  %-*s  %-*s %5s %6s %6s %6s %9s  %s\n", wo, "op", wv, "variant", wp, "params",
         "regs", "spill", "smem", "stack", "ms", "result");
  for (int i = 0; i < pl->n_jobs; i++) {
    const hct_compile_job_t *j = &pl->jobs[i];
    char params[256], r[4][16];
    hct__point_json(j->variant, &j->point, params, sizeof params);
    fmt_res(r[0], sizeof r[0], j->regs);
    fmt_res(r[1], sizeof r[1], j->spill_bytes);
    fmt_res(r[2], sizeof r[2], j->smem_static);
    fmt_res(r[3], sizeof r[3], j->stack_bytes);
    for (int k = 0; j->status < 0 && k < 4; k++) snprintf(r[k], sizeof r[k], "-");
    printf("%-*s  %-*s  %-*s %5s %6s %6s %6s %9.1f  ", wo, j->op->name, wv, j->variant->name, wp,
           params, r[0], r[1], r[2], r[3], j->compile_ms);
    if (j->status < 0)
      printf("FAILED: %s\n", j->error);
    else
      printf("ok%s%s\n", j->is_ptx ? " (ptx)" : "", j->cache_hit ? " (cached)" : "");
  }
}

static int print_json(const plan_t *pl) {
  json_t *arr = json_array();
  for (int i = 0; arr && i < pl->n_jobs; i++) {
    const hct_compile_job_t *j = &pl->jobs[i];
    json_t *params = json_object();
    for (int p = 0; p < j->variant->n_params; p++)
      json_object_set_new(params, j->variant->params[p].name, json_integer(j->point.v[p]));
    json_t *o = json_pack("{s:s, s:s, s:o, s:s, s:s, s:b}", "op", j->op->name, "variant",
                          j->variant->name, "params", params, "arch", j->arch, "status",
                          j->status < 0 ? "failed" : "ok", "cached", j->cache_hit);
    if (o == NULL) continue;
    if (j->status < 0) {
      json_object_set_new(o, "error", json_string(j->error));
    } else {
      json_object_set_new(o, "is_ptx", json_boolean(j->is_ptx));
      json_object_set_new(o, "image_bytes", json_integer((json_int_t)j->image_size));
      json_object_set_new(o, "key", json_string(j->key));
      json_object_set_new(o, "template_hash", json_string(j->template_hash));
      if (!j->is_ptx) {
        json_object_set_new(o, "regs", json_integer(j->regs));
        json_object_set_new(o, "spill_bytes", json_integer(j->spill_bytes));
        json_object_set_new(o, "smem_static", json_integer(j->smem_static));
        json_object_set_new(o, "stack_bytes", json_integer(j->stack_bytes));
      }
    }
    json_object_set_new(o, "compile_ms", json_real(j->compile_ms));
    json_array_append_new(arr, o);
  }
  if (arr == NULL || json_dumpf(arr, stdout, JSON_INDENT(2)) != 0) {
    json_decref(arr);
    return hct__error(HCT_EIO, "cannot write json to stdout");
  }
  fputc('\n', stdout);
  json_decref(arr);
  return 0;
}

/* Progress on a terminal only, so logs and pipes stay clean. */
static void progress(void *arg, const hct_compile_job_t *job, int done, int total) {
  (void)job;
  if (*(int *)arg) fprintf(stderr, "\rcompiling %d/%d", done, total);
}

static void plan_free(plan_t *pl) {
  for (int i = 0; i < pl->n_jobs; i++) hct__compile_job_clear(&pl->jobs[i]);
  free(pl->jobs);
  for (int i = 0; i < pl->n_ops; i++) hct__manifest_free(pl->ops[i]);
}

int cmd_compile(int argc, char **argv) {
  args_t a;
  hct_cli_env_t env;
  int rc = parse_args(argc, argv, &a, &env);
  if (rc != 0) return rc == HCT_OPTS_HELP ? HCT_EXIT_OK : rc;

  int arch_num = 0, warp = 32;
  rc = hct__arch_check(a.backend, a.arch, &arch_num, &warp);
  if (rc == HCT_EINVAL) return hct__usage_error(argv[0], "%s", hct_last_error());
  if (rc < 0) return hct__cli_fail(rc);

  /* libuv sizes its pool once, at first use: set it before any compile. */
  if (a.jobs > 0 || getenv("UV_THREADPOOL_SIZE") == NULL) {
    long n = a.jobs > 0 ? a.jobs : sysconf(_SC_NPROCESSORS_ONLN);
    char buf[24];
    snprintf(buf, sizeof buf, "%ld", n > 0 ? HCT_MIN(n, 256) : 1);
    setenv("UV_THREADPOOL_SIZE", buf, 1);
  }

  const char *kdir = env.kernels;
  char names[64][32];
  int n_names;
  if (a.op) {
    hct__strlcpy(names[0], a.op, sizeof names[0]);
    n_names = 1;
  } else {
    n_names = hct__manifest_list(kdir, names, 64);
    if (n_names < 0) return hct__cli_fail(n_names);
    if (n_names == 0) {
      hct__error(HCT_ENOENT, "kernel templates '%s': no op folder holds a manifest.json", kdir);
      return hct__cli_fail(HCT_ENOENT);
    }
  }

  /* Every op is loaded before anything is compiled, and each broken one
   * is said on its own line: the load refuses what a probe would. */
  plan_t pl = {0};
  int broken = 0;
  for (int i = 0; i < n_names; i++) {
    hct_op_t *op = NULL;
    int lrc = hct__manifest_load(kdir, names[i], &op);
    if (lrc < 0) {
      hct__error_print("hctune", lrc);
      broken++;
      continue;
    }
    pl.ops[pl.n_ops++] = op;
  }
  if (broken > 0) {
    plan_free(&pl);
    return HCT_EXIT_FAIL;
  }
  for (int i = 0; i < pl.n_ops && rc == 0; i++) rc = plan_op(&pl, &a, pl.ops[i], arch_num, warp);
  if (rc < 0) {
    hct__cli_fail(rc);
    plan_free(&pl);
    return HCT_EXIT_FAIL;
  }

  hct_db_t *db = NULL;
  hct_binary_store_t store, *storep = NULL;
  if (a.db) {
    rc = hct__db_open(a.db, 0, &db);
    if (rc < 0) {
      hct__cli_fail(rc);
      plan_free(&pl);
      return HCT_EXIT_FAIL;
    }
    hct__db_binary_store(db, &store);
    storep = &store;
  }

  int tty = isatty(2) && !a.json;
  uint64_t t0 = hct__now_ns();
  rc = hct__compile_all(pl.jobs, pl.n_jobs, storep, progress, &tty);
  double secs = (double)(hct__now_ns() - t0) / 1e9;
  if (tty) fputc('\n', stderr);
  if (db) hct__db_close(db);
  if (rc < 0) {
    hct__cli_fail(rc);
    plan_free(&pl);
    return HCT_EXIT_FAIL;
  }

  int failed = 0, cached = 0;
  for (int i = 0; i < pl.n_jobs; i++) {
    if (pl.jobs[i].status < 0) failed++;
    cached += pl.jobs[i].cache_hit;
  }
  if (a.json) {
    rc = print_json(&pl);
    if (rc < 0) hct__cli_fail(rc);
  } else {
    print_table(&pl);
    printf("%d binaries for %s: %d ok (%d from the cache), %d failed in %.1f s (%s threads)\n",
           pl.n_jobs, a.arch, pl.n_jobs - failed, cached, failed, secs,
           getenv("UV_THREADPOOL_SIZE"));
  }
  /* Each failure once more on stderr, one line each, for scripts and logs. */
  for (int i = 0; i < pl.n_jobs; i++)
    if (pl.jobs[i].status < 0) fprintf(stderr, "hctune: %s\n", pl.jobs[i].error);
  int status = (failed == 0 && rc == 0 && pl.n_jobs > 0) ? HCT_EXIT_OK : HCT_EXIT_FAIL;
  if (pl.n_jobs == 0) fprintf(stderr, "hctune: nothing to compile for %s\n", a.arch);
  plan_free(&pl);
  return status;
}
