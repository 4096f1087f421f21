/*
 * test_jit.c: compile cache keys (what changes them and what does not),
 * include scanning and its errors, the option list, the CUDA and NVRTC
 * error-code tables, ptxas resource parsing, NVRTC compiles and the cached
 * parallel compile, and device discovery on a machine without a driver.
 * Tests that need NVRTC skip with a reason where it cannot be loaded.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "jit.h"

/* ---- a kernels folder in /tmp ------------------------------------------- */

static char root[128];

static void put(const char *rel, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  assert_int_equal(hct__mkdir_parents(path), 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char *const template_a =
    "#include \"inc.h\"\n"
    "#include <not_in_any_folder.h>\n" /* a compiler built-in: not an error */
    "extern \"C\" __global__ void k(float *y, const float *x, int n) {\n"
    "  int i = blockIdx.x * B + threadIdx.x;\n"
    "  if (i < n) y[i] = twice(x[i]) + N;\n"
    "}\n";

static int setup_root(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/hct_test_jit_%d", (int)getpid());
  put("common/inc.h", "#pragma once\n#include \"deep.h\"\n"
                      "__device__ inline float twice(float v) { return deeper(v) * 2.0f; }\n");
  put("common/deep.h", "#pragma once\n#include \"inc.h\" /* a cycle must not loop */\n"
                       "__device__ inline float deeper(float v) { return v + 1.0f; }\n");
  put("t/a.cu", template_a);
  /* Would be found by a naive search; the template includes another one. */
  put("t/unused.h", "#error never included\n");
  return 0;
}

static int teardown_root(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s_moved'", root, root);
  return system(cmd) == 0 ? 0 : -1;
}

typedef struct {
  hct_op_t op;
  hct_compile_job_t job;
} fixture_t;

static void fixture(fixture_t *f, const char *kernels) {
  memset(f, 0, sizeof *f);
  hct__strlcpy(f->op.name, "t", sizeof f->op.name);
  snprintf(f->op.dir, sizeof f->op.dir, "%s/t", kernels);
  hct__symtab_set(&f->op.constants, "N", 4);
  hct_variant_t *v = &f->op.variants[0];
  f->op.n_variants = 1;
  hct__strlcpy(v->name, "v1", sizeof v->name);
  hct__strlcpy(v->template_file, "a.cu", sizeof v->template_file);
  hct__strlcpy(v->params[0].name, "B", sizeof v->params[0].name);
  v->params[0].values[0] = 128;
  v->params[0].values[1] = 256;
  v->params[0].n_values = 2;
  v->n_params = 1;
  f->job.backend = HCT_BACKEND_CUDA;
  hct__strlcpy(f->job.arch, "sm_90", sizeof f->job.arch);
  f->job.op = &f->op;
  f->job.variant = v;
  f->job.point.v[0] = 128;
}

/* NVRTC is needed for a key (the options depend on its arch list, and the
 * key covers its version): skip, saying why, where it cannot load. */
static int need_nvrtc(void) {
  char v[64];
  if (hct__compiler_version(HCT_BACKEND_CUDA, v, sizeof v) == 0) return 1;
  printf("SKIP: nvrtc cannot be loaded here: %s\n", hct_last_error());
  return 0;
}

typedef struct {
  char key[33], tmpl[33];
} keys_t;

static keys_t key_of(fixture_t *f) {
  keys_t k;
  int rc = hct__compile_key(&f->job);
  if (rc != 0) fail_msg("hct__compile_key: %d %s", rc, hct_last_error());
  memcpy(k.key, f->job.key, 33);
  memcpy(k.tmpl, f->job.template_hash, 33);
  assert_int_equal(strlen(k.key), 32);
  assert_int_equal(strlen(k.tmpl), 32);
  return k;
}

/* ---- keys --------------------------------------------------------------- */

static void test_key_covers_headers(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  fixture_t f;
  fixture(&f, root);
  keys_t k0 = key_of(&f), again = key_of(&f);
  assert_string_equal(k0.key, again.key);
  assert_string_equal(k0.tmpl, again.tmpl);

  /* A header two levels down changes both hashes; restoring it restores
   * them. */
  put("common/deep.h", "#pragma once\n#include \"inc.h\"\n"
                       "__device__ inline float deeper(float v) { return v + 2.0f; }\n");
  keys_t k1 = key_of(&f);
  assert_string_not_equal(k1.key, k0.key);
  assert_string_not_equal(k1.tmpl, k0.tmpl);
  put("common/deep.h", "#pragma once\n#include \"inc.h\" /* a cycle must not loop */\n"
                       "__device__ inline float deeper(float v) { return v + 1.0f; }\n");
  keys_t k2 = key_of(&f);
  assert_string_equal(k2.key, k0.key);

  /* A header beside the template, never included, changes nothing. */
  put("t/unused.h", "#error never included, changed\n");
  assert_string_equal(key_of(&f).key, k0.key);

  /* The template itself. */
  char changed[1024];
  snprintf(changed, sizeof changed, "// a comment\n%s", template_a);
  put("t/a.cu", changed);
  assert_string_not_equal(key_of(&f).key, k0.key);
  put("t/a.cu", template_a);
  assert_string_equal(key_of(&f).key, k0.key);
}

static void test_key_covers_options(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  fixture_t f;
  fixture(&f, root);
  keys_t k0 = key_of(&f);

  f.job.point.v[0] = 256; /* a parameter: a -D define */
  keys_t k = key_of(&f);
  assert_string_not_equal(k.key, k0.key);
  assert_string_equal(k.tmpl, k0.tmpl);
  f.job.point.v[0] = 128;

  hct__symtab_set(&f.op.constants, "N", 5); /* an op constant */
  k = key_of(&f);
  assert_string_not_equal(k.key, k0.key);
  assert_string_equal(k.tmpl, k0.tmpl);
  hct__symtab_set(&f.op.constants, "N", 4);

  hct__strlcpy(f.job.arch, "sm_80", sizeof f.job.arch); /* the arch */
  k = key_of(&f);
  assert_string_not_equal(k.key, k0.key);
  assert_string_equal(k.tmpl, k0.tmpl);
  hct__strlcpy(f.job.arch, "sm_90", sizeof f.job.arch);

  /* arch_specific: the same card's arch, compiled for sm_90a, is another
   * binary; the option list says -arch=sm_90a (the suffix is added once,
   * also to an arch already suffixed). */
  f.op.variants[0].arch_specific = 1;
  f.op.variants[0].min_arch = 90;
  k = key_of(&f);
  assert_string_not_equal(k.key, k0.key);
  assert_string_equal(k.tmpl, k0.tmpl);
  hct_compile_opts_t *o = calloc(1, sizeof *o);
  assert_non_null(o);
  assert_int_equal(hct__compile_options(hct__backend(f.job.backend), &f.job, o), 0);
  int found = 0;
  for (int i = 0; i < o->n; i++) found += strcmp(o->argv[i], "-arch=sm_90a") == 0;
  assert_int_equal(found, 1);
  hct__strlcpy(f.job.arch, "sm_90a", sizeof f.job.arch);
  assert_string_equal(key_of(&f).key, k.key);
  hct__strlcpy(f.job.arch, "sm_90", sizeof f.job.arch);
  free(o);
  f.op.variants[0].arch_specific = 0;

  assert_string_equal(key_of(&f).key, k0.key);
}

/* The -I paths are not in the key, what they hold is: a kernels folder
 * copied elsewhere keeps its keys. */
static void test_key_ignores_location(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  fixture_t f;
  fixture(&f, root);
  keys_t k0 = key_of(&f);
  char moved[200], cmd[1024];
  snprintf(moved, sizeof moved, "%s_moved", root);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", moved, root, moved);
  assert_int_equal(system(cmd), 0);
  fixture_t g;
  fixture(&g, moved);
  keys_t k1 = key_of(&g);
  assert_string_equal(k1.key, k0.key);
  assert_string_equal(k1.tmpl, k0.tmpl);
}

static void test_key_missing_include(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  put("t/b.cu", "#include \"inc.h\"\n  #  include \"nowhere.h\"\n__global__ void k() {}\n");
  fixture_t f;
  fixture(&f, root);
  hct__strlcpy(f.op.variants[0].template_file, "b.cu", sizeof f.op.variants[0].template_file);
  int rc = hct__compile_key(&f.job);
  assert_int_equal(rc, HCT_ETEMPLATE);
  assert_non_null(strstr(hct_last_error(), "'nowhere.h'"));
  assert_non_null(strstr(hct_last_error(), "t/b.cu"));

  hct__strlcpy(f.op.variants[0].template_file, "absent.cu", sizeof f.op.variants[0].template_file);
  rc = hct__compile_key(&f.job);
  assert_int_equal(rc, HCT_ETEMPLATE);
  assert_non_null(strstr(hct_last_error(), "absent.cu"));
}

/* ---- options ------------------------------------------------------------ */

static int has_opt(const hct_compile_opts_t *o, const char *want) {
  for (int i = 0; i < o->n; i++)
    if (strcmp(o->argv[i], want) == 0) return 1;
  return 0;
}

static void test_options(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  fixture_t f;
  fixture(&f, root);
  hct_compile_opts_t o;
  assert_int_equal(hct__compile_options(hct__backend(f.job.backend), &f.job, &o), 0);
  char inc[300];
  snprintf(inc, sizeof inc, "-I%s/common", root);
  assert_string_equal(o.argv[0], inc);
  snprintf(inc, sizeof inc, "-I%s/t", root);
  assert_string_equal(o.argv[1], inc);
  assert_int_equal(o.n_include, 2);
  static const char *const want[] = {"-std=c++17", "-arch=sm_90", "--ptxas-options=-v",
                                     "-DHCT_WARP=32", "-DHCT_ARCH=90", "-DHCT_CUDA=1",
                                     "-DN=4", "-DB=128"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(want); i++)
    if (!has_opt(&o, want[i])) fail_msg("option '%s' missing", want[i]);
  assert_int_equal(o.is_ptx, 0);
  /* Never the toolkit's headers: the GPU host may have only the libraries. */
  for (int i = 0; i < o.n; i++)
    if (strstr(o.argv[i], "cuda") != NULL && strcmp(o.argv[i], "-DHCT_CUDA=1") != 0)
      fail_msg("option '%s' points into the toolkit", o.argv[i]);

  int num = 0, warp = 0;
  assert_int_equal(hct__arch_check(HCT_BACKEND_CUDA, "sm_90", &num, &warp), 0);
  assert_int_equal(num, 90);
  assert_int_equal(warp, 32);
  assert_int_equal(hct__arch_check(HCT_BACKEND_CUDA, "sm_90a", &num, NULL), 0);
  assert_int_equal(num, 90);
  static const char *const bad[] = {"sm_91", "sm_", "gfx90a", "sm_9x", "90", ""};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    if (hct__arch_check(HCT_BACKEND_CUDA, bad[i], NULL, NULL) != HCT_EINVAL)
      fail_msg("arch '%s' accepted", bad[i]);
    assert_non_null(strstr(hct_last_error(), "unknown arch"));
  }
  /* An arch newer than NVRTC knows: PTX for the newest it knows. */
  hct__strlcpy(f.job.arch, "sm_200", sizeof f.job.arch);
  assert_int_equal(hct__compile_options(hct__backend(f.job.backend), &f.job, &o), 0);
  assert_int_equal(o.is_ptx, 1);
  int found = 0;
  for (int i = 0; i < o.n; i++) found |= strncmp(o.argv[i], "--gpu-architecture=compute_", 27) == 0;
  assert_true(found);
}

/* ---- error codes and logs ----------------------------------------------- */

static void test_result_codes(void **state) {
  (void)state;
  /* CUresult values as cuda.h numbers them. */
  static const struct {
    int native, want;
  } cu[] = {
      {0, 0},                /* CUDA_SUCCESS */
      {700, HCT_EFAULT},     /* ILLEGAL_ADDRESS */
      {716, HCT_EFAULT},     /* MISALIGNED_ADDRESS */
      {719, HCT_EFAULT},     /* LAUNCH_FAILED */
      {715, HCT_EFAULT},     /* ILLEGAL_INSTRUCTION */
      {702, HCT_EHANG},      /* LAUNCH_TIMEOUT */
      {2, HCT_ENOMEM},       /* OUT_OF_MEMORY */
      {100, HCT_ENODEV},     /* NO_DEVICE */
      {34, HCT_ENODRIVER},   /* STUB_LIBRARY */
      {209, HCT_EUNSUPPORTED}, /* NO_BINARY_FOR_GPU */
      {701, HCT_ELAUNCH},    /* LAUNCH_OUT_OF_RESOURCES */
      {1, HCT_EINVAL},       /* INVALID_VALUE */
      {999, HCT_EGPU},       /* UNKNOWN */
      {123456, HCT_EGPU},    /* not a CUresult */
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cu); i++)
    if (hct__cuda_result_code(cu[i].native) != cu[i].want)
      fail_msg("CUresult %d maps to %s, want %s", cu[i].native,
               hct_err_name(hct__cuda_result_code(cu[i].native)), hct_err_name(cu[i].want));
  static const struct {
    int native, want;
  } nv[] = {{0, 0}, {1, HCT_ENOMEM}, {5, HCT_EINVAL}, {6, HCT_ECOMPILE},
            {7, HCT_ENOCOMPILER}, {11, HCT_ECOMPILE}, {4242, HCT_ECOMPILE}};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(nv); i++)
    if (hct__nvrtc_result_code(nv[i].native) != nv[i].want)
      fail_msg("nvrtcResult %d maps to %s, want %s", nv[i].native,
               hct_err_name(hct__nvrtc_result_code(nv[i].native)), hct_err_name(nv[i].want));
}

static void test_log_resources(void **state) {
  (void)state;
  static const char *const log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
      "ptxas info    : Function properties for a\n"
      "    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
      "ptxas info    : Function properties for b\n"
      "    0 bytes stack frame, 120 bytes spill stores, 120 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 0 barriers, 368 bytes cmem[0]\n";
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  hct__log_resources(log, &job);
  assert_int_equal(job.regs, 255);
  assert_int_equal(job.spill_bytes, 120);
  assert_int_equal(job.smem_static, 1024);
  assert_int_equal(job.stack_bytes, 16);
  hct__log_resources(NULL, &job); /* no log: unchanged */
  assert_int_equal(job.regs, 255);
}

/* ---- compiling ---------------------------------------------------------- */

/* The line quoted in a one-line compile error, for NVRTC and hiprtc
 * alike. */
static void test_log_error_line(void **state) {
  (void)state;
  char buf[32];
  assert_int_equal(hct__log_error_line("warning: x\nk.cu(3): error: bad\nmore error\n", buf,
                                       sizeof buf), 1);
  assert_string_equal(buf, "k.cu(3): error: bad");
  assert_int_equal(hct__log_error_line("\n\nfirst words\nsecond\n", buf, sizeof buf), 0);
  assert_string_equal(buf, "first words");
  assert_int_equal(hct__log_error_line("", buf, sizeof buf), 0);
  assert_string_equal(buf, "");
  assert_int_equal(hct__log_error_line(NULL, buf, sizeof buf), 0);
  assert_string_equal(buf, "");
  /* Cut to the buffer. */
  assert_int_equal(hct__log_error_line("an error on a line longer than the buffer is", buf, 9), 1);
  assert_string_equal(buf, "an error");
}

static void test_compile_one(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  put("t/a.cu", "#include \"inc.h\"\n"
                "extern \"C\" __global__ void k(float *y, const float *x, int n) {\n"
                "  __shared__ float s[B];\n"
                "  int i = blockIdx.x * B + threadIdx.x;\n"
                "  s[threadIdx.x] = i < n ? x[i] : 0.0f;\n"
                "  __syncthreads();\n"
                "  if (i < n) y[i] = twice(s[B - 1 - threadIdx.x]) + N;\n"
                "}\n");
  fixture_t f;
  fixture(&f, root);
  int rc = hct__compile_one(&f.job);
  if (rc != 0) fail_msg("compile: %s\nlog:\n%s", f.job.error, f.job.log ? f.job.log : "");
  assert_non_null(f.job.image);
  assert_true(f.job.image_size > 4);
  assert_memory_equal(f.job.image, "\177ELF", 4); /* a cubin, not PTX */
  assert_int_equal(f.job.is_ptx, 0);
  assert_true(f.job.regs > 0);
  assert_int_equal(f.job.smem_static, 128 * 4);
  assert_non_null(strstr(f.job.log, "registers"));

  /* PTX for an arch NVRTC does not know; no resources then. */
  hct__strlcpy(f.job.arch, "sm_200", sizeof f.job.arch);
  assert_int_equal(hct__compile_one(&f.job), 0);
  assert_int_equal(f.job.is_ptx, 1);
  assert_non_null(strstr(f.job.image, ".entry k"));
  assert_int_equal(f.job.regs, -1);
  hct__compile_job_clear(&f.job);
  put("t/a.cu", template_a);
}

static void test_compile_error(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  put("t/bad.cu", "#include \"inc.h\"\n"
                  "extern \"C\" __global__ void k(float *y) {\n"
                  "  y[0] = undefined_name;\n"
                  "}\n");
  fixture_t f;
  fixture(&f, root);
  hct__strlcpy(f.op.variants[0].template_file, "bad.cu", sizeof f.op.variants[0].template_file);
  int rc = hct__compile_one(&f.job);
  assert_int_equal(rc, HCT_ECOMPILE);
  assert_int_equal(f.job.status, HCT_ECOMPILE);
  assert_null(f.job.image);
  assert_non_null(f.job.log);
  assert_non_null(strstr(f.job.error, "t/bad.cu"));
  assert_non_null(strstr(f.job.error, "undefined_name"));
  assert_null(strchr(f.job.error, '\n'));
  hct__compile_job_clear(&f.job);
}

/* A store in memory, counting its calls. */
typedef struct {
  char keys[8][33];
  void *images[8];
  size_t sizes[8];
  char *logs[8];
  int n, gets, puts;
} mem_store_t;

static int mem_get(void *ctx, const char *key, void **image, size_t *size, int *is_ptx,
                   char **log) {
  mem_store_t *s = ctx;
  s->gets++;
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->keys[i], key) == 0) {
      *image = malloc(s->sizes[i]);
      memcpy(*image, s->images[i], s->sizes[i]);
      *size = s->sizes[i];
      *is_ptx = 0;
      *log = hct__strdup(s->logs[i]);
      return 0;
    }
  return HCT_ENOENT;
}

static int mem_put(void *ctx, const hct_compile_job_t *job) {
  mem_store_t *s = ctx;
  s->puts++;
  if (s->n == 8) return HCT_ENOMEM;
  hct__strlcpy(s->keys[s->n], job->key, 33);
  s->images[s->n] = malloc(job->image_size);
  memcpy(s->images[s->n], job->image, job->image_size);
  s->sizes[s->n] = job->image_size;
  s->logs[s->n] = hct__strdup(job->log);
  s->n++;
  return 0;
}

static void count_progress(void *arg, const hct_compile_job_t *job, int done, int total) {
  int *calls = arg;
  assert_non_null(job);
  assert_int_equal(done, *calls + 1);
  assert_int_equal(total, 3);
  (*calls)++;
}

static void test_compile_all_cached(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  put("t/c.cu", "#include \"inc.h\"\n"
                "extern \"C\" __global__ void k(float *y) { y[threadIdx.x] = twice(B + N); }\n");
  fixture_t f;
  fixture(&f, root);
  hct__strlcpy(f.op.variants[0].template_file, "c.cu", sizeof f.op.variants[0].template_file);
  hct_compile_job_t jobs[3];
  for (int i = 0; i < 3; i++) jobs[i] = f.job;
  jobs[1].point.v[0] = 256;
  hct__strlcpy(jobs[2].arch, "sm_80", sizeof jobs[2].arch);
  mem_store_t mem = {0};
  hct_binary_store_t store = {&mem, mem_get, mem_put};

  int calls = 0;
  assert_int_equal(hct__compile_all(jobs, 3, &store, count_progress, &calls), 0);
  assert_int_equal(calls, 3);
  for (int i = 0; i < 3; i++)
    if (jobs[i].status != 0) fail_msg("job %d: %s", i, jobs[i].error);
  assert_int_equal(mem.puts, 3);
  int regs[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(jobs[i].cache_hit, 0);
    regs[i] = jobs[i].regs;
  }
  assert_string_not_equal(jobs[0].key, jobs[1].key);
  assert_string_not_equal(jobs[0].key, jobs[2].key);

  /* Again: every binary from the store, resources read back from its log. */
  calls = 0;
  assert_int_equal(hct__compile_all(jobs, 3, &store, count_progress, &calls), 0);
  assert_int_equal(calls, 3);
  assert_int_equal(mem.puts, 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(jobs[i].status, 0);
    assert_int_equal(jobs[i].cache_hit, 1);
    assert_int_equal(jobs[i].regs, regs[i]);
    /* The store's entries are in the order the compiles finished (they run
     * in parallel): find this job's by its key. */
    int k = 0;
    while (k < mem.n && strcmp(mem.keys[k], jobs[i].key) != 0) k++;
    assert_true(k < mem.n);
    assert_int_equal(jobs[i].image_size, mem.sizes[k]);
    hct__compile_job_clear(&jobs[i]);
  }
  for (int i = 0; i < mem.n; i++) {
    free(mem.images[i]);
    free(mem.logs[i]);
  }
}

/* ---- devices without a driver ------------------------------------------- */

static void test_no_driver(void **state) {
  (void)state;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib != NULL) {
    dlclose(lib);
    printf("SKIP: libcuda.so.1 is present on this machine\n");
    skip();
  }
  const hct_backend_ops_t *cuda = hct__backend(HCT_BACKEND_CUDA);
  assert_non_null(cuda);
  assert_string_equal(cuda->name, "cuda");
  assert_int_equal(cuda->load(), HCT_ENODRIVER);
  assert_non_null(strstr(hct_last_error(), "libcuda.so.1"));

  hct_device_t devs[4];
  int n = hct__devices(devs, 4);
  if (n >= 0) {
    /* Another vendor's driver loaded: none of its cards is CUDA's. */
    for (int i = 0; i < n; i++) assert_int_not_equal(devs[i].backend, HCT_BACKEND_CUDA);
    printf("note: a non-cuda driver loaded and listed %d card(s)\n", n);
    return;
  }
  assert_int_equal(n, HCT_ENODRIVER);
  const char *msg = hct_last_error();
  assert_non_null(strstr(msg, "no gpu driver found"));
  assert_non_null(strstr(msg, "cuda: cannot load libcuda.so.1"));
  assert_non_null(strstr(msg, "hip"));
  assert_null(strchr(msg, '\n'));

  hct_device_t d;
  assert_int_equal(hct__device_find("0", &d), HCT_ENODRIVER);
}

/*
 * NVRTC that cannot be loaded at all: nv_open used to keep dlerror()'s
 * text across the later dlopen calls, which free it (a heap use after
 * free under ASan, garbage in the message otherwise).  A user and mount
 * namespace hides /usr/local (the toolkit) and the loader's cache, so
 * every dlopen of `hctune compile --backend cuda` fails; the one line on
 * stderr must end with the loader's own reason, intact.
 */
static void test_nvrtc_missing(void **state) {
  (void)state;
  const char *bin = getenv("HCT_BIN");
  if (bin == NULL) {
    print_message("skipped: HCT_BIN is not set (run through tests/run.sh)\n");
    skip();
  }
  if (system("unshare -rm true 2>/dev/null") != 0) {
    print_message("skipped: no user namespaces here (unshare -rm) to hide NVRTC in\n");
    skip();
  }
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd,
           "unshare -rm sh -c 'mount -t tmpfs none /usr/local && "
           "mount --bind /dev/null /etc/ld.so.cache && "
           "CUDA_HOME=/nonexistent HCTUNE_DB=%s/nvrtc-missing.db exec %s/hctune compile "
           "--backend cuda --arch sm_90 --op selftest' 2>&1",
           root, bin);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  print_message("status %d: %s", st, out);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 1);
  /* One line: the attempts, then the last loader message, unmangled. */
  assert_true(n > 0 && out[n - 1] == '\n');
  assert_ptr_equal(strchr(out, '\n'), out + n - 1);
  assert_non_null(strstr(out, "nvrtc: cannot load the library (tried libnvrtc.so.13"));
  assert_non_null(strstr(out, "; libnvrtc.so: cannot open shared object file: No such file or "
                              "directory)\n"));
}

static void test_model_key(void **state) {
  (void)state;
  hct_device_t d;
  memset(&d, 0, sizeof d);
  hct__strlcpy(d.vendor, "nvidia", sizeof d.vendor);
  hct__strlcpy(d.name, "NVIDIA H200", sizeof d.name);
  hct__strlcpy(d.arch, "sm_90", sizeof d.arch);
  d.sm_count = 132;
  d.mem_bytes = 150754820096LL; /* 143771 MiB */
  char key[256];
  hct__device_model_key(&d, key, sizeof key);
  assert_string_equal(key, "nvidia|NVIDIA H200|sm_90|132|140");
  d.mem_bytes -= 64LL << 20; /* a few MiB less on another host: same model */
  char key2[256];
  hct__device_model_key(&d, key2, sizeof key2);
  assert_string_equal(key, key2);
}

/* ---- the GPU runtime (skips without a card) ----------------------------- */

static void test_gpu_runtime(void **state) {
  (void)state;
  hct_device_t devs[8];
  int n = hct__devices(devs, 8);
  int cuda = -1;
  for (int i = 0; i < n; i++)
    if (devs[i].backend == HCT_BACKEND_CUDA && cuda < 0) cuda = i;
  if (cuda < 0) {
    printf("SKIP: no cuda card here (%s)\n", n < 0 ? hct_last_error() : "none listed");
    skip();
  }
  if (!need_nvrtc()) skip();
  hct_device_t *d = &devs[cuda];
  printf("card: %s %s %s, %d SMs, driver %s, %s\n", d->name, d->uuid, d->arch, d->sm_count,
         d->driver_version, d->compiler_version);
  assert_int_equal(strncmp(d->uuid, "GPU-", 4), 0);
  assert_int_equal(strlen(d->uuid), 40);
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d", d->arch_num);
  assert_string_equal(d->arch, arch);
  assert_true(d->sm_count > 0 && d->warp_size == 32 && d->mem_bytes > 0 && d->l2_bytes > 0);
  assert_true(d->smem_optin >= 48 * 1024);
  assert_true(d->driver_version[0] != '\0' && d->pci_bus_id[0] != '\0');
  hct_device_t found;
  char prefix[16];
  hct__strlcpy(prefix, d->uuid, sizeof prefix);
  assert_int_equal(hct__device_find(prefix, &found), 0);
  assert_string_equal(found.uuid, d->uuid);

  put("t/g.cu", "#include \"inc.h\"\n"
                "extern \"C\" __global__ void k(float *y, const float *x, int n) {\n"
                "  int i = blockIdx.x * B + threadIdx.x;\n"
                "  if (i < n) y[i] = twice(x[i]) + N;\n"
                "}\n"
                "extern \"C\" __global__ void acc(float *y, int n) {\n"
                "  extern __shared__ float s[];\n"
                "  int i = blockIdx.x * B + threadIdx.x;\n"
                "  s[threadIdx.x] = 1.0f;\n"
                "  __syncthreads();\n"
                "  if (i < n) y[i] += s[threadIdx.x];\n"
                "}\n");
  fixture_t f;
  fixture(&f, root);
  hct__strlcpy(f.op.variants[0].template_file, "g.cu", sizeof f.op.variants[0].template_file);
  hct__strlcpy(f.job.arch, d->arch, sizeof f.job.arch);
  if (hct__compile_one(&f.job) != 0) fail_msg("compile: %s", f.job.error);

  hct_gpu_t *g;
  if (hct__gpu_open(d, &g) != 0) fail_msg("open: %s", hct_last_error());
  assert_string_equal(hct__gpu_device(g)->uuid, d->uuid);
  enum { COUNT = 1000 };
  hct_dptr_t x, y;
  assert_int_equal(hct__gpu_alloc(g, COUNT * 4, &x), 0);
  assert_int_equal(hct__gpu_alloc(g, COUNT * 4, &y), 0);
  assert_int_equal(hct__gpu_fill32(g, x, 0x3f800000u, COUNT), 0); /* 1.0f */
  assert_int_equal(hct__gpu_fill32(g, y, 0, COUNT), 0);
  static float host[COUNT];
  static uint16_t h16[COUNT];
  assert_int_equal(hct__gpu_download(g, host, x, sizeof host), 0);
  for (int i = 0; i < COUNT; i++) assert_true(host[i] == 1.0f);

  hct_module_t *m;
  if (hct__gpu_module_load(g, f.job.image, f.job.image_size, &m) != 0)
    fail_msg("module: %s", hct_last_error());
  hct_function_t *k, *acc, *none;
  assert_int_equal(hct__gpu_function(m, "k", &k), 0);
  assert_int_equal(hct__gpu_function(m, "acc", &acc), 0);
  assert_int_equal(hct__gpu_function(m, "nope", &none), HCT_ENOENT);
  assert_int_equal(hct__gpu_function_smem(acc, 64 * 1024), 0);

  int count = COUNT;
  unsigned grid[3] = {(COUNT + 127) / 128, 1, 1}, block[3] = {128, 1, 1};
  void *kargs[] = {&y, &x, &count};
  assert_int_equal(hct__gpu_launch(g, k, grid, block, 0, kargs), 0);
  assert_int_equal(hct__gpu_sync(g), 0);
  assert_int_equal(hct__gpu_download(g, host, y, sizeof host), 0);
  for (int i = 0; i < COUNT; i++) /* (1 + 1) * 2 + N */
    if (host[i] != 8.0f) fail_msg("y[%d] = %g, want 8", i, host[i]);

  /* Ten launches captured, then the graph replayed twice between events. */
  void *aargs[] = {&y, &count};
  assert_int_equal(hct__gpu_capture_begin(g), 0);
  for (int r = 0; r < 10; r++)
    assert_int_equal(hct__gpu_launch(g, acc, grid, block, 128 * 4, aargs), 0);
  hct_graph_t *graph;
  if (hct__gpu_capture_end(g, &graph) != 0) fail_msg("capture: %s", hct_last_error());
  assert_int_equal(hct__gpu_download(g, host, y, 4), 0);
  assert_true(host[0] == 8.0f); /* captured, not run */
  hct_event_t *e0, *e1;
  assert_int_equal(hct__gpu_event_create(g, &e0), 0);
  assert_int_equal(hct__gpu_event_create(g, &e1), 0);
  assert_int_equal(hct__gpu_event_record(g, e0), 0);
  assert_int_equal(hct__gpu_graph_launch(g, graph), 0);
  assert_int_equal(hct__gpu_graph_launch(g, graph), 0);
  assert_int_equal(hct__gpu_event_record(g, e1), 0);
  float ms = -1;
  assert_int_equal(hct__gpu_event_elapsed(g, e0, e1, &ms), 0);
  assert_true(ms > 0 && ms < 1000);
  assert_int_equal(hct__gpu_download(g, host, y, sizeof host), 0);
  for (int i = 0; i < COUNT; i++)
    if (host[i] != 28.0f) fail_msg("after 20 adds y[%d] = %g, want 28", i, host[i]);

  assert_int_equal(hct__gpu_fill16(g, x, 0xbeef, COUNT), 0);
  assert_int_equal(hct__gpu_download(g, h16, x, sizeof h16), 0);
  for (int i = 0; i < COUNT; i++) assert_int_equal(h16[i], 0xbeef);

  int mhz = 0;
  int rc = hct__gpu_sm_clock(g, &mhz);
  if (rc == 0)
    assert_true(mhz > 100 && mhz < 5000);
  else
    assert_int_equal(rc, HCT_ENODRIVER); /* no NVML on this host */
  printf("sm clock: %d MHz (rc %d), graph of 10 launches x2: %.3f ms\n", mhz, rc, ms);

  hct__gpu_event_destroy(g, e0);
  hct__gpu_event_destroy(g, e1);
  hct__gpu_graph_destroy(g, graph);
  hct__gpu_module_unload(g, m);
  hct__gpu_free(g, x);
  hct__gpu_free(g, y);
  hct__gpu_close(g);
  hct__compile_job_clear(&f.job);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key_covers_headers),
      cmocka_unit_test(test_key_covers_options),
      cmocka_unit_test(test_key_ignores_location),
      cmocka_unit_test(test_key_missing_include),
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_result_codes),
      cmocka_unit_test(test_log_resources),
      cmocka_unit_test(test_log_error_line),
      cmocka_unit_test(test_compile_one),
      cmocka_unit_test(test_compile_error),
      cmocka_unit_test(test_compile_all_cached),
      cmocka_unit_test(test_no_driver),
      cmocka_unit_test(test_nvrtc_missing),
      cmocka_unit_test(test_model_key),
      cmocka_unit_test(test_gpu_runtime),
  };
  int rc = cmocka_run_group_tests(tests, setup_root, teardown_root);
  uv_library_shutdown(); /* the pool threads that ran NVRTC end before exit (cli/main.c) */
  return rc;
}
