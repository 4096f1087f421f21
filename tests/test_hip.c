/*
 * test_hip.c: the HIP backend (jit/hip*.c) on a machine without an AMD GPU:
 * target names, hiprtc compiles of a small template (test_compile's
 * matrix compiles every HIP-capable variant for gfx906, gfx908, gfx90a and
 * gfx1030), a target this hiprtc does not know (it aborts: hctune must
 * not), compiles
 * from several threads at once, and `hctune devices` with no driver.
 *
 * Tests that need hiprtc skip with a reason when it cannot be loaded; CI
 * has Debian's libamdhip64-dev (ROCm 5.2), so there they run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <uv.h>

#include "jit.h"

/* ---- helpers ------------------------------------------------------------ */

static int have_hiprtc(char *why, size_t len) {
  char v[64];
  if (hct__hip_backend.compiler_version(v, sizeof v) == 0) return 1;
  snprintf(why, len, "hiprtc cannot be loaded: %s", hct_last_error());
  return 0;
}

#define NEED_HIPRTC()                                   \
  do {                                                  \
    char why_[512];                                     \
    if (!have_hiprtc(why_, sizeof why_)) {              \
      print_message("skipped: %s\n", why_);             \
      skip();                                           \
    }                                                   \
  } while (0)

/* A scratch kernels folder: <root>/common/tiny_common.h and
 * <root>/tiny/tiny.hip, so the -I of kernels-src/common is exercised. */
static char root[256];

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
}

static const char tiny_header[] =
  "#pragma once\n"
  "#define TINY_SCALE 3.0f\n";

/* Checks the defines the backend must give: HCT_HIP, HCT_WARP matching
 * EXPECT_WARP (a parameter), and the op constant N. */
static const char tiny_source[] =
  "#include \"tiny_common.h\"\n"
  "#if !defined(HCT_HIP) || defined(HCT_CUDA)\n"
  "#error \"HCT_HIP must be defined, HCT_CUDA not\"\n"
  "#endif\n"
  "#if HCT_WARP != EXPECT_WARP\n"
  "#error \"HCT_WARP differs from EXPECT_WARP\"\n"
  "#endif\n"
  "static_assert(N == 7, \"constant N\");\n"
  "extern \"C\" __global__ void tiny(float *x) {\n"
  "  __shared__ float buf[64];\n"
  "  int i = threadIdx.x;\n"
  "  buf[i & 63] = x[i];\n"
  "  __syncthreads();\n"
  "  float v = buf[(i + 1) & 63] * TINY_SCALE;\n"
  "  v += __shfl_xor(v, 1);\n"
  "  x[i] = rsqrtf(expf(v)) + (float)N;\n"
  "}\n";

static int setup_root(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/hct-test-hip-XXXXXX");
  if (mkdtemp(root) == NULL) return -1;
  char p[512];
  snprintf(p, sizeof p, "%s/common", root);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/tiny", root);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/common/tiny_common.h", root);
  write_text(p, tiny_header);
  snprintf(p, sizeof p, "%s/tiny/tiny.hip", root);
  write_text(p, tiny_source);
  return 0;
}

static int teardown_root(void **state) {
  (void)state;
  char p[512];
  snprintf(p, sizeof p, "%s/common/tiny_common.h", root);
  unlink(p);
  snprintf(p, sizeof p, "%s/tiny/tiny.hip", root);
  unlink(p);
  snprintf(p, sizeof p, "%s/common", root);
  rmdir(p);
  snprintf(p, sizeof p, "%s/tiny", root);
  rmdir(p);
  rmdir(root);
  return 0;
}

/* The tiny op: constant N = 7, one variant with EXPECT_WARP = expect. */
static hct_op_t *tiny_op(int expect_warp) {
  hct_op_t *op = calloc(1, sizeof *op);
  assert_non_null(op);
  hct__strlcpy(op->name, "tiny", sizeof op->name);
  snprintf(op->dir, sizeof op->dir, "%s/tiny", root);
  hct__symtab_set(&op->constants, "N", 7);
  op->n_variants = 1;
  hct_variant_t *v = &op->variants[0];
  hct__strlcpy(v->name, "t1", sizeof v->name);
  hct__strlcpy(v->template_file, "tiny.hip", sizeof v->template_file);
  v->hip = v->wave64 = 1;
  v->n_params = 1;
  hct__strlcpy(v->params[0].name, "EXPECT_WARP", sizeof v->params[0].name);
  v->params[0].values[0] = expect_warp;
  v->params[0].n_values = 1;
  return op;
}

static void tiny_job(hct_compile_job_t *job, const hct_op_t *op, const char *arch) {
  memset(job, 0, sizeof *job);
  job->backend = HCT_BACKEND_HIP;
  hct__strlcpy(job->arch, arch, sizeof job->arch);
  job->op = op;
  job->variant = &op->variants[0];
  job->point.v[0] = op->variants[0].params[0].values[0];
}

static int compile_tiny(hct_compile_job_t *job, const hct_op_t *op, const char *arch) {
  tiny_job(job, op, arch);
  return hct__hip_backend.compile(&hct__hip_backend, job, tiny_source, NULL);
}

static int one_line(const char *s) { return s[0] != '\0' && strchr(s, '\n') == NULL; }

/* ---- target names ------------------------------------------------------- */

static void test_target_names(void **state) {
  (void)state;
  static const char *const bad[] = {"sm_90", "gfx", "gfxzz", "90a", "gfx90a:xnack",
                                    "gfx90a:+", "gfx90a xnack-", ""};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    int arch_num = -1, warp = -1;
    int rc = hct__arch_check(HCT_BACKEND_HIP, bad[i], &arch_num, &warp);
    if (rc != HCT_EINVAL) print_message("arch '%s' gave %d: %s\n", bad[i], rc, hct_last_error());
    assert_int_equal(rc, HCT_EINVAL);
    assert_true(one_line(hct_last_error()));
    assert_non_null(strstr(hct_last_error(), "unknown arch"));
  }
}

static void test_target_warp(void **state) {
  (void)state;
  NEED_HIPRTC();
  static const struct {
    const char *arch;
    int warp, arch_num;
  } good[] = {
    {"gfx906", 64, 0x906}, {"gfx908", 64, 0x908}, {"gfx90a", 64, 0x90a},
    {"gfx90a:sramecc+:xnack-", 64, 0x90a}, {"gfx1030", 32, 0x1030},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(good); i++) {
    int arch_num = -1, warp = -1;
    int rc = hct__arch_check(HCT_BACKEND_HIP, good[i].arch, &arch_num, &warp);
    if (rc != 0) print_message("arch '%s': %s\n", good[i].arch, hct_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(warp, good[i].warp);
    assert_int_equal(arch_num, good[i].arch_num);
  }
}

/* ---- compiles ----------------------------------------------------------- */

static void test_compile_tiny(void **state) {
  (void)state;
  NEED_HIPRTC();
  static const struct {
    const char *arch;
    int warp;
  } targets[] = {{"gfx90a", 64}, {"gfx1030", 32}};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(targets); i++) {
    hct_op_t *op = tiny_op(targets[i].warp);
    hct_compile_job_t job;
    int rc = compile_tiny(&job, op, targets[i].arch);
    if (rc != 0) print_message("%s: %s\nlog: %s\n", targets[i].arch, job.error,
                               job.log ? job.log : "(none)");
    assert_int_equal(rc, 0);
    assert_int_equal(job.status, 0);
    assert_true(job.image_size > 64);
    assert_memory_equal(job.image, "\177ELF", 4);
    assert_int_equal(job.is_ptx, 0);
    /* Resources from the code object's metadata: the kernel uses VGPRs
     * and exactly 256 bytes of static LDS. */
    assert_true(job.regs > 0);
    assert_int_equal(job.smem_static, 256);
    assert_true(job.stack_bytes >= 0);
    assert_true(job.compile_ms > 0);
    hct__compile_job_clear(&job);
    free(op);
  }
}

/* The wrong wave size for the target trips the template's #error: a
 * compile error, reported in one line with the log kept. */
static void test_compile_error(void **state) {
  (void)state;
  NEED_HIPRTC();
  hct_op_t *op = tiny_op(64);
  hct_compile_job_t job;
  int rc = compile_tiny(&job, op, "gfx1030");
  assert_int_equal(rc, HCT_ECOMPILE);
  assert_int_equal(job.status, HCT_ECOMPILE);
  assert_true(one_line(job.error));
  assert_non_null(strstr(job.error, "HCT_WARP differs"));
  assert_null(job.image);
  assert_non_null(job.log);
  assert_non_null(strstr(job.log, "HCT_WARP differs from EXPECT_WARP"));
  hct__compile_job_clear(&job);
  free(op);
}

/* gfx1100 makes this hiprtc (ROCm 5.2) abort.  The test process must live
 * on, with a one-line error that names the target, twice (the second
 * answer comes from the probe cache). */
static void test_unknown_target_survives(void **state) {
  (void)state;
  NEED_HIPRTC();
  char version[64];
  assert_int_equal(hct__hip_backend.compiler_version(version, sizeof version), 0);
  hct_op_t *op = tiny_op(32);
  for (int round = 0; round < 2; round++) {
    hct_compile_job_t job;
    int rc = compile_tiny(&job, op, "gfx1100");
    if (rc == 0) {
      /* A newer hiprtc knows gfx1100: then it must have compiled it. */
      print_message("%s compiles for gfx1100: nothing to survive\n", version);
      assert_memory_equal(job.image, "\177ELF", 4);
    } else {
      print_message("gfx1100 with %s: %s\n", version, job.error);
      assert_int_equal(rc, HCT_EUNSUPPORTED);
      assert_true(one_line(job.error));
      assert_non_null(strstr(job.error, "gfx1100"));
      assert_non_null(strstr(job.error, "crashed"));
      assert_null(job.image);
    }
    hct__compile_job_clear(&job);
  }
  free(op);
}

typedef struct {
  const char *arch;
  int warp;
  int rc;
  char error[512];
  size_t size;
  int elf;
} thread_job_t;

static void compile_thread(void *arg) {
  thread_job_t *t = arg;
  hct_op_t *op = tiny_op(t->warp);
  hct_compile_job_t job;
  for (int i = 0; i < 3 && t->rc == 0; i++) {
    t->rc = compile_tiny(&job, op, t->arch);
    hct__strlcpy(t->error, job.error, sizeof t->error);
    t->size = job.image_size;
    t->elf = job.image != NULL && memcmp(job.image, "\177ELF", 4) == 0;
    hct__compile_job_clear(&job);
  }
  free(op);
}

/* The compile pool calls compile from several threads at once. */
static void test_compile_threads(void **state) {
  (void)state;
  NEED_HIPRTC();
  thread_job_t jobs[] = {
    {"gfx906", 64, 0, "", 0, 0}, {"gfx908", 64, 0, "", 0, 0},
    {"gfx90a", 64, 0, "", 0, 0}, {"gfx1030", 32, 0, "", 0, 0},
  };
  uv_thread_t th[HCT_ARRAY_SIZE(jobs)];
  for (size_t i = 0; i < HCT_ARRAY_SIZE(jobs); i++)
    assert_int_equal(uv_thread_create(&th[i], compile_thread, &jobs[i]), 0);
  for (size_t i = 0; i < HCT_ARRAY_SIZE(jobs); i++) assert_int_equal(uv_thread_join(&th[i]), 0);
  for (size_t i = 0; i < HCT_ARRAY_SIZE(jobs); i++) {
    if (jobs[i].rc != 0) print_message("%s: %s\n", jobs[i].arch, jobs[i].error);
    assert_int_equal(jobs[i].rc, 0);
    assert_true(jobs[i].size > 64);
    assert_true(jobs[i].elf);
  }
}

/* ---- the hctune command ------------------------------------------------- */

typedef struct {
  int status; /* as from waitpid */
  char out[65536], err[65536];
} run_t;

static void read_fd(int fd, char *buf, size_t len) {
  size_t n = 0;
  lseek(fd, 0, SEEK_SET);
  for (;;) {
    ssize_t r = read(fd, buf + n, len - 1 - n);
    if (r <= 0) break;
    n += (size_t)r;
    if (n == len - 1) break;
  }
  buf[n] = '\0';
}

/* Runs $HCT_BIN/hctune with argv, a scratch database and the kernels of
 * the tree; returns 0, or -1 (with a reason) when hctune is not there. */
static int run_hctune_env(const char *const *args, const char *ld_path, run_t *r, char *why,
                          size_t why_len) {
  const char *bin = getenv("HCT_BIN");
  if (bin == NULL) {
    snprintf(why, why_len, "HCT_BIN is not set (run through tests/run.sh)");
    return -1;
  }
  char exe[400];
  snprintf(exe, sizeof exe, "%s/hctune", bin);
  if (access(exe, X_OK) != 0) {
    snprintf(why, why_len, "'%s' is not there", exe);
    return -1;
  }
  char outp[] = "/tmp/hct-test-hip-out-XXXXXX", errp[] = "/tmp/hct-test-hip-err-XXXXXX";
  int ofd = mkstemp(outp), efd = mkstemp(errp);
  assert_true(ofd >= 0 && efd >= 0);
  unlink(outp);
  unlink(errp);
  char db[300];
  snprintf(db, sizeof db, "%s/hctune.db", root);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(ofd, 1);
    dup2(efd, 2);
    setenv("HCTUNE_DB", db, 1);
    if (ld_path != NULL) setenv("LD_LIBRARY_PATH", ld_path, 1);
    char *argv[16];
    int n = 0;
    argv[n++] = exe;
    for (int i = 0; args[i] != NULL && n < 15; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    execv(exe, argv);
    _exit(127);
  }
  while (waitpid(pid, &r->status, 0) < 0 && errno == EINTR) {
  }
  read_fd(ofd, r->out, sizeof r->out);
  read_fd(efd, r->err, sizeof r->err);
  close(ofd);
  close(efd);
  return 0;
}

static int run_hctune(const char *const *args, run_t *r, char *why, size_t why_len) {
  return run_hctune_env(args, NULL, r, why, why_len);
}

static int hc_read_manifest(char *why, size_t len) {
  char p[400];
  snprintf(p, sizeof p, "%s/kernels-src/hc_read/manifest.json", hct_test_root());
  if (access(p, R_OK) == 0) return 1;
  snprintf(why, len, "no hc_read manifest at '%s'", p);
  return 0;
}

/* A target this hiprtc aborts on: a normal exit, non-zero, and exactly one
 * line on stderr. */
static void test_cli_unknown_target(void **state) {
  (void)state;
  NEED_HIPRTC();
  char why[512];
  if (!hc_read_manifest(why, sizeof why)) {
    print_message("skipped: %s\n", why);
    skip();
  }
  static run_t r;
  const char *args[] = {"compile", "--backend", "hip", "--arch", "gfx1100", "--op", "hc_read",
                        NULL};
  if (run_hctune(args, &r, why, sizeof why) < 0) {
    print_message("skipped: %s\n", why);
    skip();
  }
  char version[64];
  assert_int_equal(hct__hip_backend.compiler_version(version, sizeof version), 0);
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) {
    print_message("%s compiles for gfx1100: nothing to refuse\n", version);
    return;
  }
  if (WIFSIGNALED(r.status)) print_message("hctune died of signal %d\n", WTERMSIG(r.status));
  assert_true(WIFEXITED(r.status));
  assert_int_equal(WEXITSTATUS(r.status), 1);
  size_t len = strlen(r.err);
  int lines = 0;
  for (size_t i = 0; i < len; i++) lines += r.err[i] == '\n';
  if (lines != 1 || r.err[len - 1] != '\n') print_message("stderr:\n%s\n", r.err);
  assert_int_equal(lines, 1);
  assert_int_equal(r.err[len - 1], '\n');
  assert_non_null(strstr(r.err, "gfx1100"));
}

/* With neither an NVIDIA nor an AMD GPU: exit 1, and the message says
 * that neither driver was found. */
static void test_cli_devices_none(void **state) {
  (void)state;
  if (access("/dev/kfd", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0 ||
      access("/dev/nvidia0", F_OK) == 0) {
    print_message("skipped: this machine has a GPU device node\n");
    skip();
  }
  static run_t r;
  char why[512];
  const char *args[] = {"devices", NULL};
  if (run_hctune(args, &r, why, sizeof why) < 0) {
    print_message("skipped: %s\n", why);
    skip();
  }
  if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1))
    print_message("status %d\nstdout:\n%s\nstderr:\n%s\n", r.status, r.out, r.err);
  assert_true(WIFEXITED(r.status));
  assert_int_equal(WEXITSTATUS(r.status), 1);
  /* Each backend says why it has no card. */
  assert_non_null(strstr(r.err, "cuda"));
  assert_non_null(strstr(r.err, "hip"));
  assert_non_null(strstr(r.err, "driver"));
}

/* ---- device discovery against a fake runtime ----------------------------- */

/* Builds tests/fake/fake_amdhip64.c for ROCm `rocm` (5 or 6) into
 * <root>/fake<rocm>/libamdhip64.so.<rocm>; 0, or -1 with a reason. */
static int build_fake(int rocm, char *dir, size_t dir_len, char *why, size_t why_len) {
  char src[512];
  snprintf(src, sizeof src, "%s/tests/fake/fake_amdhip64.c", hct_test_root());
  if (access(src, R_OK) != 0) {
    snprintf(why, why_len, "no fake runtime source at '%.400s'", src);
    return -1;
  }
  if (access("/usr/include/hip/hip_runtime_api.h", R_OK) != 0) {
    snprintf(why, why_len, "no HIP headers in /usr/include/hip (libamdhip64-dev)");
    return -1;
  }
  snprintf(dir, dir_len, "%s/fake%d", root, rocm);
  mkdir(dir, 0755);
  char cmd[1400];
  snprintf(cmd, sizeof cmd,
           "cc -shared -fPIC -w -D__HIP_PLATFORM_AMD__ -DFAKE_ROCM=%d -o '%s/libamdhip64.so.%d' "
           "'%s' 2>&1",
           rocm, dir, rocm, src);
  int st = system(cmd);
  if (st != 0) {
    snprintf(why, why_len, "cannot build the fake runtime (cc status %d)", st);
    return -1;
  }
  return 0;
}

static void remove_fake(const char *dir, int rocm) {
  char p[600];
  snprintf(p, sizeof p, "%s/libamdhip64.so.%d", dir, rocm);
  unlink(p);
  rmdir(dir);
}

static const char *jstr(json_t *o, const char *k) {
  const char *v = json_string_value(json_object_get(o, k));
  return v ? v : "(missing)";
}

/* `hctune devices --json` against a fake ROCm 6 (R0600 properties) and a
 * fake ROCm 5 (hipGetDeviceProperties): the full gfx target name, the
 * attributes, the UUID and its PCI fallback, the marketing-name fallback,
 * the driver version; all cards of the HIP backend are listed. */
static void test_devices_fake_runtime(void **state) {
  (void)state;
  for (int rocm = 6; rocm >= 5; rocm--) {
    char dir[400], why[512];
    if (build_fake(rocm, dir, sizeof dir, why, sizeof why) < 0) {
      print_message("skipped: %s\n", why);
      skip();
    }
    static run_t r;
    const char *args[] = {"devices", "--json", NULL};
    if (run_hctune_env(args, dir, &r, why, sizeof why) < 0) {
      remove_fake(dir, rocm);
      print_message("skipped: %s\n", why);
      skip();
    }
    remove_fake(dir, rocm);
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0))
      print_message("rocm %d: status %d\nstdout:\n%s\nstderr:\n%s\n", rocm, r.status, r.out,
                    r.err);
    assert_true(WIFEXITED(r.status));
    assert_int_equal(WEXITSTATUS(r.status), 0);
    json_error_t jerr;
    json_t *all = json_loads(r.out, 0, &jerr);
    assert_non_null(all);
    json_t *hip[4];
    size_t n = 0, i;
    json_t *d;
    json_array_foreach(all, i, d) {
      if (strcmp(jstr(d, "backend"), "hip") == 0 && n < 4) hip[n++] = d;
    }
    assert_int_equal(n, 2);
    assert_string_equal(jstr(hip[0], "vendor"), "amd");
    assert_string_equal(jstr(hip[0], "name"), "AMD Instinct MI210");
    assert_string_equal(jstr(hip[0], "arch"), "gfx90a:sramecc+:xnack-");
    assert_string_equal(jstr(hip[0], "uuid"), "GPU-0123456789abcdef");
    assert_string_equal(jstr(hip[0], "pci_bus_id"), "0000:c1:00.0");
    assert_int_equal(json_integer_value(json_object_get(hip[0], "arch_num")), 0x90a);
    assert_int_equal(json_integer_value(json_object_get(hip[0], "sm_count")), 104);
    assert_int_equal(json_integer_value(json_object_get(hip[0], "warp_size")), 64);
    assert_int_equal(json_integer_value(json_object_get(hip[0], "l2_bytes")), 8 << 20);
    assert_int_equal(json_integer_value(json_object_get(hip[0], "smem_optin")), 65536);
    assert_int_equal(json_integer_value(json_object_get(hip[0], "mem_bytes")), 64LL << 30);
    assert_int_equal(json_integer_value(json_object_get(hip[0], "clock_khz")), 1700000);
    assert_string_equal(jstr(hip[0], "driver_version"), rocm == 6 ? "6.1.40091" : "5.2.21153");
    assert_string_equal(jstr(hip[0], "model_key"),
                        "amd|AMD Instinct MI210|gfx90a:sramecc+:xnack-|104|64");
    /* No marketing name, no UUID. */
    assert_string_equal(jstr(hip[1], "name"), "AMD gfx1030");
    assert_string_equal(jstr(hip[1], "arch"), "gfx1030");
    assert_string_equal(jstr(hip[1], "uuid"), "AMD-PCI-0000:03:00.0");
    assert_int_equal(json_integer_value(json_object_get(hip[1], "warp_size")), 32);
    assert_int_equal(json_integer_value(json_object_get(hip[1], "ordinal")), 1);
    json_decref(all);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_target_names),
    cmocka_unit_test(test_target_warp),
    cmocka_unit_test(test_compile_tiny),
    cmocka_unit_test(test_compile_error),
    cmocka_unit_test(test_unknown_target_survives),
    cmocka_unit_test(test_compile_threads),
    cmocka_unit_test(test_cli_unknown_target),
    cmocka_unit_test(test_cli_devices_none),
    cmocka_unit_test(test_devices_fake_runtime),
  };
  return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
