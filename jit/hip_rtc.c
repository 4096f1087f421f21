/*
 * hip_rtc.c: compiling for AMD cards with hiprtc: the compile itself, in a
 * child process; whether this hiprtc knows a target at all (probed once
 * per target); and the options that depend on the target.
 *
 * Every hiprtc call runs in a child (common/child.c, handler "hiprtc"):
 * the hiprtc of ROCm 5.2 aborts the whole process (`munmap_chunk():
 * invalid pointer`) for a target it does not know (gfx940, gfx942,
 * gfx1100 ...), so hctune never calls it in its own address space.  A
 * child that crashes becomes a one-line HCT_ECOMPILE ("hiprtc 5.2 crashed
 * compiling for gfx1100 (signal 6)"); one that hangs is killed after
 * HCT_HIPRTC_TIMEOUT_S.  The child's stdout and stderr come back as the
 * tail of the log, so hiprtc's crash text never reaches hctune's stderr.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "hip_internal.h"

/* Seconds a child may take; past it the child is killed.  Generous: the
 * largest hc_read template compiles in well under a second. */
#define HCT_HIPRTC_TIMEOUT_S 300

int hct__hip_compiler_version(char *buf, size_t len) {
  int rc = hct__hiprtc_load();
  if (rc < 0) return rc;
  snprintf(buf, len, "hiprtc %d.%d", hct__hiprtc_major, hct__hiprtc_minor);
  return 0;
}

/* Keeps this thread's last message as the job's one-line error. */
static int job_keep(hct_compile_job_t *job, int code) {
  hct__strlcpy(job->error, hct_last_error(), sizeof job->error);
  job->status = code;
  return code;
}

/* ---- one compile, in a child -------------------------------------------- */

/* The first field of the answer: how far hiprtc got.  The log and the
 * code object follow as fields of their own. */
typedef struct hip_reply_s {
  int32_t stage; /* the hiprtc call that failed, or HIP_STAGE_DONE */
  int32_t result;
} hip_reply_t;

enum { HIP_STAGE_CREATE, HIP_STAGE_COMPILE, HIP_STAGE_CODE, HIP_STAGE_DONE };
static const char *const hip_stage_names[] = {"hiprtcCreateProgram", "hiprtcCompileProgram",
                                              "hiprtcGetCode", "done"};

/*
 * The child side: the request is the program's name, its source, then one
 * field per option.  Compiles, answers {reply, log, code}, and returns the
 * exit status: 5 for a request it cannot read, 6 when hiprtc does not load
 * here (the parent loaded it, so this is a broken install).  Calls nothing
 * but hiprtc, malloc and write.
 */
static int hiprtc_in_child(const hct_child_msg_t *req) {
  if (req->n < 2) return 5;
  /* Fields are not NUL-terminated: copy each to a C string. */
  char **s = calloc((size_t)req->n, sizeof *s);
  if (s == NULL) return 5;
  for (int i = 0; i < req->n; i++) {
    if ((s[i] = malloc(req->fields[i].n + 1)) == NULL) return 5;
    memcpy(s[i], req->fields[i].p, req->fields[i].n);
    s[i][req->fields[i].n] = '\0';
  }
  if (hct__hiprtc_load() < 0) return 6;
  const char *name = s[0], *source = s[1];
  const char **argv = (const char **)s + 2;
  int argc = req->n - 2;

  hip_reply_t r = {HIP_STAGE_CREATE, 0};
  hiprtcProgram prog = NULL;
  char *log = NULL, *code = NULL;
  size_t log_len = 0, code_len = 0;
  hiprtcResult e = hct__hiprtc.hiprtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (e == HIPRTC_SUCCESS) {
    r.stage = HIP_STAGE_COMPILE;
    e = hct__hiprtc.hiprtcCompileProgram(prog, argc, argv);
    size_t n = 0;
    if (hct__hiprtc.hiprtcGetProgramLogSize(prog, &n) == HIPRTC_SUCCESS && n > 0 &&
        (log = malloc(n)) != NULL && hct__hiprtc.hiprtcGetProgramLog(prog, log) == HIPRTC_SUCCESS)
      log_len = strnlen(log, n);
    if (e == HIPRTC_SUCCESS) {
      r.stage = HIP_STAGE_CODE;
      n = 0;
      e = hct__hiprtc.hiprtcGetCodeSize(prog, &n);
      if (e == HIPRTC_SUCCESS && (code = malloc(n ? n : 1)) == NULL)
        e = HIPRTC_ERROR_OUT_OF_MEMORY;
      if (e == HIPRTC_SUCCESS) e = hct__hiprtc.hiprtcGetCode(prog, code);
      if (e == HIPRTC_SUCCESS) {
        r.stage = HIP_STAGE_DONE;
        code_len = n;
      }
    }
  }
  r.result = e;
  hct_child_field_t f[3] = {{(const char *)&r, sizeof r}, {log, log_len}, {code, code_len}};
  hct_child_msg_t answer = {f, 3};
  return hct__child_answer(&answer) < 0 ? 3 : 0;
}

HCT_CHILD_HANDLER("hiprtc", hiprtc_in_child)

/* What one run of hiprtc in a child gave: the code object, the log (hiprtc's
 * own, then whatever the child printed), and the time it took. */
typedef struct hip_rtc_out_s {
  void *code;
  size_t code_len;
  char *log;
  double ms;
} hip_rtc_out_t;

/*
 * Runs hiprtc on `source` with argv in a child process; 0 with res->code,
 * or a negative code with a one-line message (res->log may be set either
 * way: the caller frees both).
 */
static int hip_rtc_run(const char *source, const char *name, const char *target, int argc,
                       const char *const *argv, hip_rtc_out_t *res) {
  memset(res, 0, sizeof *res);
  hct_child_field_t *f = calloc((size_t)argc + 2, sizeof *f);
  if (f == NULL) return hct__error(HCT_ENOMEM, "hiprtc: out of memory building a compile request");
  f[0] = (hct_child_field_t){name, strlen(name)};
  f[1] = (hct_child_field_t){source, strlen(source)};
  for (int i = 0; i < argc; i++) f[i + 2] = (hct_child_field_t){argv[i], strlen(argv[i])};
  hct_child_msg_t req = {f, argc + 2};
  hct_child_result_t cr;
  int rc = hct__child_run("hiprtc", &req, HCT_HIPRTC_TIMEOUT_S * 1000, &cr);
  free(f);
  res->ms = cr.ms;

  char version[32];
  snprintf(version, sizeof version, "hiprtc %d.%d", hct__hiprtc_major, hct__hiprtc_minor);
  hip_reply_t r = {HIP_STAGE_CREATE, 0};
  int complete = rc == 0 && cr.answer.n == 3 && cr.answer.fields[0].n == sizeof r;
  if (complete) memcpy(&r, cr.answer.fields[0].p, sizeof r);

  /* The log: hiprtc's own, then what the child printed. */
  const char *hlog = complete ? cr.answer.fields[1].p : "";
  size_t hlog_len = complete ? cr.answer.fields[1].n : 0;
  if (hlog_len + cr.output_len > 0 &&
      (res->log = malloc(hlog_len + cr.output_len + 2)) != NULL) {
    memcpy(res->log, hlog, hlog_len);
    size_t at = hlog_len;
    if (hlog_len > 0 && cr.output_len > 0 && hlog[hlog_len - 1] != '\n') res->log[at++] = '\n';
    if (cr.output_len > 0) memcpy(res->log + at, cr.output, cr.output_len);
    res->log[at + cr.output_len] = '\0';
  }

  switch (cr.outcome) {
    case HCT_CHILD_ANSWERED:
      break;
    case HCT_CHILD_TIMED_OUT:
      rc = hct__error(HCT_ECOMPILE, "%s did not finish compiling '%s' for %s in %d s", version,
                      name, target, HCT_HIPRTC_TIMEOUT_S);
      break;
    case HCT_CHILD_CRASHED:
      rc = hct__error(HCT_ECOMPILE, "%s crashed compiling for %s (signal %d)", version, target,
                      cr.signal);
      break;
    case HCT_CHILD_FAILED:
    case HCT_CHILD_GARBLED:
      /* A sanitizer that catches hiprtc's bad free exits rather than
       * letting the abort happen: the same crash. */
      rc = hct__error(HCT_ECOMPILE, "%s crashed compiling for %s (exit status %d)", version,
                      target, cr.exit_status);
      break;
    default: {
      /* Not started, or its pipes failed: keep the runner's reason. */
      char why[400];
      hct__strlcpy(why, hct_last_error(), sizeof why);
      rc = hct__error(rc, "hiprtc: %s", why);
      break;
    }
  }
  if (rc < 0) {
    /* worded above, by outcome */
  } else if (!complete) {
    rc = hct__error(HCT_ECOMPILE, "%s crashed compiling for %s (exit status %d)", version,
                    target, cr.exit_status);
  } else if (r.stage != HIP_STAGE_DONE) {
    char line[301]; /* the first line that says "error", if any */
    if (!hct__log_error_line(res->log, line, sizeof line)) line[0] = '\0';
    rc = hct__error(HCT_ECOMPILE, "%s: '%s' for %s: %s: %s%s%s", version, name, target,
                    r.stage >= 0 && r.stage < HIP_STAGE_DONE ? hip_stage_names[r.stage] : "?",
                    hct__hiprtc.hiprtcGetErrorString((hiprtcResult)r.result),
                    line[0] ? ": " : "", line);
  } else if (cr.answer.fields[2].n == 0) {
    rc = hct__error(HCT_ECOMPILE, "%s: '%s' for %s: empty code object", version, name, target);
  } else if ((res->code = malloc(cr.answer.fields[2].n)) == NULL) {
    rc = hct__error(HCT_ENOMEM, "hiprtc: out of memory for a %zu-byte code object",
                    cr.answer.fields[2].n);
  } else {
    memcpy(res->code, cr.answer.fields[2].p, cr.answer.fields[2].n);
    res->code_len = cr.answer.fields[2].n;
  }
  hct__child_result_free(&cr);
  return rc;
}

/*
 * Compiles job->variant's template (`source`) with hiprtc in a child
 * process (hip_rtc_run); thread-safe.  Headers come through the -I options
 * of hct__compile_options.  The code object (an ELF file that
 * hipModuleLoadData takes) goes to job->image, its resources to job.
 */
int hct__hip_compile(const hct_backend_ops_t *ops, hct_compile_job_t *job, const char *source,
                     const char *include_dir) {
  (void)include_dir; /* in the option list already */
  int rc = hct__hiprtc_load();
  if (rc < 0) return job_keep(job, rc);
  hct_compile_opts_t *o = malloc(sizeof *o);
  if (o == NULL)
    return job_keep(job, hct__error(HCT_ENOMEM, "hiprtc: out of memory building options"));
  rc = hct__compile_options(ops, job, o);
  if (rc < 0) {
    free(o);
    return job_keep(job, rc);
  }
  const char *name = job->variant != NULL && job->variant->template_file[0]
                         ? job->variant->template_file
                         : "kernel.hip";
  hip_rtc_out_t res;
  rc = hip_rtc_run(source, name, job->arch, o->n, o->argv, &res);
  free(o);
  job->compile_ms = res.ms;
  job->log = res.log;
  if (rc < 0) {
    free(res.code);
    return job_keep(job, rc);
  }
  job->image = res.code;
  job->image_size = res.code_len;
  job->is_ptx = 0;
  job->status = 0;
  job->error[0] = '\0';
  /* Unreadable metadata leaves the figures at -1 (unknown); the compile
   * itself succeeded. */
  if (hct__hip_code_resources(job->image, job->image_size, &job->regs, &job->spill_bytes,
                              &job->smem_static, &job->stack_bytes) < 0)
    hct__error_clear();
  return 0;
}

/* ---- targets ------------------------------------------------------------ */

/*
 * A gfx target as hiprtc takes it: "gfx" and hex digits, then any number of
 * ":feature+" / ":feature-" (sramecc, xnack).  Anything else is refused
 * before hiprtc sees it.
 */
static int hip_target_valid(const char *t) {
  if (strncmp(t, "gfx", 3) != 0) return 0;
  const char *p = t + 3;
  if (!isxdigit((unsigned char)*p)) return 0;
  while (isxdigit((unsigned char)*p)) p++;
  while (*p == ':') {
    const char *f = ++p;
    while (isalnum((unsigned char)*p)) p++;
    if (p == f || (*p != '+' && *p != '-')) return 0;
    p++;
  }
  return *p == '\0';
}

/* The wave size the compiled code assumes: GCN and CDNA (gfx6 to gfx9)
 * run 64-wide waves only; RDNA (gfx10 and later) compiles for wave32 unless
 * told otherwise, and we never tell it otherwise.  The major version is
 * every digit but the last two: gfx90a -> 9, gfx1030 -> 10. */
static int hip_target_warp(const char *t) {
  size_t digits = strspn(t + 3, "0123456789abcdefABCDEF");
  char major[8] = {0};
  if (digits > 2) memcpy(major, t + 3, HCT_MIN(digits - 2, sizeof major - 1));
  return atoi(major) >= 10 ? 32 : 64;
}

/*
 * Whether this hiprtc compiles for `target` at all, asked once per target
 * by compiling a small kernel (shuffles, expf, rsqrtf) in a child.  A
 * hiprtc that does not know a target aborts rather than saying so, and no
 * call lists the targets it knows; trying is the only reliable check, and
 * it lets `hctune compile --arch gfx1100` fail with one line before any
 * variant is tried.  Only definite answers are kept (not a timeout).
 */
#define HCT_HIP_PROBED_MAX 32

typedef struct hip_probe_s {
  char target[64];
  int rc;
  char msg[400];
} hip_probe_t;

static uv_once_t probe_once = UV_ONCE_INIT;
static uv_mutex_t probe_mutex;
static hip_probe_t probed[HCT_HIP_PROBED_MAX];
static int n_probed;

static void probe_init(void) {
  if (uv_mutex_init(&probe_mutex) != 0) abort();
}

static const char hip_probe_source[] =
  "extern \"C\" __global__ void hct_probe(float *x) {\n"
  "  float v = x[threadIdx.x];\n"
  "  v += __shfl_xor(v, 1);\n"
  "  x[threadIdx.x] = rsqrtf(expf(v));\n"
  "}\n";

static int hip_target_probe(const char *target) {
  uv_once(&probe_once, probe_init);
  /* One probe at a time: the compile pool's threads all ask about the
   * same target at first, and one child answers them all. */
  uv_mutex_lock(&probe_mutex);
  for (int i = 0; i < n_probed; i++)
    if (strcmp(probed[i].target, target) == 0) {
      int rc = probed[i].rc < 0 ? hct__error(probed[i].rc, "%s", probed[i].msg) : 0;
      uv_mutex_unlock(&probe_mutex);
      return rc;
    }
  char arch_opt[96];
  snprintf(arch_opt, sizeof arch_opt, "--offload-arch=%s", target);
  const char *argv[] = {arch_opt, "-O3"};
  hip_rtc_out_t res;
  int rc = hip_rtc_run(hip_probe_source, "hct_probe.hip", target, 2, argv, &res);
  int definite = rc == 0 || rc == HCT_ECOMPILE;
  if (rc == HCT_ECOMPILE) {
    char cause[300];
    hct__strlcpy(cause, hct_last_error(), sizeof cause);
    rc = hct__error(HCT_EUNSUPPORTED, "arch '%s' is not supported by this hiprtc: %s", target,
                    cause);
  }
  free(res.code);
  free(res.log);
  if (definite && n_probed < HCT_HIP_PROBED_MAX) {
    hip_probe_t *p = &probed[n_probed++];
    hct__strlcpy(p->target, target, sizeof p->target);
    p->rc = rc;
    hct__strlcpy(p->msg, rc < 0 ? hct_last_error() : "", sizeof p->msg);
  }
  uv_mutex_unlock(&probe_mutex);
  return rc;
}

/*
 * The options that depend on the target, for hct__compile_options():
 * --offload-arch, HCT_HIP, HCT_WARP (the target's wave size) and HCT_ARCH
 * (the gfx number read as hex: 0x90a for gfx90a, 0x1030 for gfx1030; it
 * only matters inside HIP guards).  A malformed name is HCT_EINVAL; a name
 * this hiprtc cannot compile for is HCT_EUNSUPPORTED.  Without hiprtc the
 * name is only checked for form, so cache keys can still be computed.
 */
int hct__hip_target_options(const char *arch, hct_compile_opts_t *o) {
  if (!hip_target_valid(arch))
    return hct__error(HCT_EINVAL,
                      "unknown arch '%s': expected a gfx target such as gfx90a, gfx1030 or "
                      "gfx90a:sramecc+:xnack-",
                      arch);
  if (hct__hiprtc_load() == 0) {
    int rc = hip_target_probe(arch);
    if (rc < 0) return rc;
  }
  hct__error_clear();
  o->is_ptx = 0;
  o->warp = hip_target_warp(arch);
  o->arch_num = (int)strtol(arch + 3, NULL, 16);
  int rc = hct__compile_opt_add(o, "--offload-arch=%s", arch);
  if (rc == 0) rc = hct__compile_opt_add(o, "-O3");
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_WARP=%d", o->warp);
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_ARCH=0x%x", (unsigned)o->arch_num);
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_HIP=1");
  return rc;
}

