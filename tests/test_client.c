/*
 * test_client.c: libhctune without a working daemon: fallback to the
 * baseline when the daemon is absent or stalled, within the timeout;
 * HCTUNE_FORCE; argument errors; the socket path order; and that the
 * shared library pulls in neither SQLite nor libuv.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon_test.h"

static void test_absent(void **state) {
  unsetenv("HCTUNE_FORCE");
  hct_client_t *c = NULL;
  double t0 = dt_now_ms();
  assert_int_equal(hct_connect("/nonexistent/hctune.sock", 50, &c), HCT_FALLBACK);
  assert_non_null(c);
  hct_choice_t ch;
  assert_int_equal(hct_choose(c, "hc_read", 4, NULL, NULL, &ch), HCT_FALLBACK);
  assert_string_equal(ch.variant, "v1");
  assert_string_equal(ch.parity_class, "baseline");
  assert_string_equal(ch.params, "{}");
  assert_int_equal(ch.source, HCT_SOURCE_DEFAULT);
  assert_non_null(strstr(hct_last_error(), "/nonexistent/hctune.sock"));
  assert_int_equal(hct_choose(c, "hc_read_prefill", 64, "GPU-x", "kl", &ch), HCT_FALLBACK);
  assert_string_equal(ch.variant, "pair_simt");
  /* An op with no built-in baseline cannot fall back. */
  assert_int_equal(hct_choose(c, "mystery", 1, NULL, NULL, &ch), HCT_ENOENT);
  assert_non_null(strstr(hct_last_error(), "mystery"));
  assert_true(dt_now_ms() - t0 < 50);
  hct_close(c);
  /* A socket path too long for sockaddr_un: still a client, falling back. */
  char longp[200];
  memset(longp, 'a', sizeof longp - 1);
  longp[0] = '/';
  longp[sizeof longp - 1] = '\0';
  assert_int_equal(hct_connect(longp, 50, &c), HCT_FALLBACK);
  assert_int_equal(hct_choose(c, "hc_read", 1, NULL, NULL, &ch), HCT_FALLBACK);
  hct_close(c);
}

/* A daemon that listens and never answers: connect succeeds (the kernel
 * queues it), the reply never comes. */
static void test_stalled(void **state) {
  unsetenv("HCTUNE_FORCE");
  char dir[] = "/tmp/hct-client-test-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/stalled.sock", dir);
  int ls = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  hct__strlcpy(sa.sun_path, path, sizeof sa.sun_path);
  assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(ls, 16), 0);

  static const int timeouts[] = {50, 20, 5};
  for (size_t k = 0; k < HCT_ARRAY_SIZE(timeouts); k++) {
    int to = timeouts[k];
    /* The least of three tries: a loaded machine may wake any one of them
     * late, while waiting too long in the library would show in all. */
    double best = 1e9, worst = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
      hct_client_t *c;
      assert_int_equal(hct_connect(path, to, &c), 0);
      hct_choice_t ch;
      double t0 = dt_now_ms();
      assert_int_equal(hct_choose(c, "hc_read", 2, "GPU-x", NULL, &ch), HCT_FALLBACK);
      double took = dt_now_ms() - t0;
      best = took < best ? took : best;
      worst = took > worst ? took : worst;
      assert_string_equal(ch.variant, "v1");
      assert_int_equal(ch.source, HCT_SOURCE_DEFAULT);
      assert_non_null(strstr(hct_last_error(), "no answer"));
      /* It waited for the daemon, never less than the timeout. */
      assert_true(took >= to - 0.5);
      /* Within the next second it does not wait again. */
      t0 = dt_now_ms();
      assert_int_equal(hct_choose(c, "hc_read", 2, "GPU-x", NULL, &ch), HCT_FALLBACK);
      assert_true(dt_now_ms() - t0 < 2);
      hct_close(c);
    }
    fprintf(stderr, "stalled daemon, timeout %d ms: fell back after %.1f ms (worst of 3: %.1f)\n",
            to, best, worst);
    assert_true(best <= to + 3);
  }
  /* The daemon's backlog full: connect itself fails, at once. */
  close(ls);
  ls = socket(AF_UNIX, SOCK_STREAM, 0);
  unlink(path);
  assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(ls, 0), 0);
  int fill[8], nf = 0;
  for (; nf < 8; nf++) {
    fill[nf] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (connect(fill[nf], (struct sockaddr *)&sa, sizeof sa) != 0) break;
  }
  hct_client_t *c;
  double t0 = dt_now_ms();
  assert_int_equal(hct_connect(path, 50, &c), HCT_FALLBACK);
  assert_true(dt_now_ms() - t0 <= 65);
  hct_close(c);
  for (int i = 0; i <= nf && i < 8; i++) close(fill[i]);
  close(ls);
  unlink(path);
  rmdir(dir);
}

static void test_force(void **state) {
  hct_client_t *c;
  hct_connect("/nonexistent/hctune.sock", 20, &c);
  hct_choice_t ch;
  setenv("HCTUNE_FORCE", "hc_read=v3,hc_read_prefill=tiled", 1);
  assert_int_equal(hct_choose(c, "hc_read", 4, NULL, NULL, &ch), 0);
  assert_string_equal(ch.variant, "v3");
  assert_int_equal(ch.source, HCT_SOURCE_ENV);
  assert_int_equal(hct_choose(c, "hc_read_prefill", 4, NULL, "kl", &ch), 0);
  assert_string_equal(ch.variant, "tiled");
  /* An op not listed is asked for as usual (here: falls back). */
  assert_int_equal(hct_choose(c, "hc_other", 4, NULL, NULL, &ch), HCT_ENOENT);
  setenv("HCTUNE_FORCE", "hc_read=v3,oops", 1);
  assert_int_equal(hct_choose(c, "hc_read", 4, NULL, NULL, &ch), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "HCTUNE_FORCE"));
  assert_non_null(strstr(hct_last_error(), "'oops'"));
  setenv("HCTUNE_FORCE", "=v3", 1);
  assert_int_equal(hct_choose(c, "hc_read", 4, NULL, NULL, &ch), HCT_EINVAL);
  setenv("HCTUNE_FORCE", "hc_read=", 1);
  assert_int_equal(hct_choose(c, "hc_read", 4, NULL, NULL, &ch), HCT_EINVAL);
  unsetenv("HCTUNE_FORCE");
  hct_close(c);
}

static void test_force_wins_over_daemon(void **state) {
  dt_env_t e;
  dt_env_init(&e);
  dt_seed(&e);
  dt_start(&e, NULL);
  hct_client_t *c;
  assert_int_equal(hct_connect(e.sock, 2000, &c), 0);
  hct_choice_t ch;
  assert_int_equal(hct_choose(c, "hc_read", 2, DT_CARD, NULL, &ch), 0);
  assert_string_equal(ch.variant, "v2");
  assert_int_equal(ch.source, HCT_SOURCE_PROBE);
  setenv("HCTUNE_FORCE", "hc_read=v1", 1);
  assert_int_equal(hct_choose(c, "hc_read", 2, DT_CARD, NULL, &ch), 0);
  assert_string_equal(ch.variant, "v1");
  assert_int_equal(ch.source, HCT_SOURCE_ENV);
  unsetenv("HCTUNE_FORCE");
  /* The daemon restarting under a client: it reconnects within the call. */
  assert_int_equal(dt_stop(&e), 0);
  assert_int_equal(hct_choose(c, "hc_read", 2, DT_CARD, NULL, &ch), HCT_FALLBACK);
  dt_start(&e, NULL);
  usleep(1100 * 1000); /* past the client's retry pause */
  assert_int_equal(hct_choose(c, "hc_read", 2, DT_CARD, NULL, &ch), 0);
  assert_string_equal(ch.variant, "v2");
  dt_stop(&e);
  dt_start(&e, NULL);
  assert_int_equal(hct_choose(c, "hc_read", 2, DT_CARD, NULL, &ch), 0);
  hct_close(c);
  dt_stop(&e);
  dt_env_remove(&e);
}

static void test_bad_args(void **state) {
  hct_client_t *c;
  hct_connect("/nonexistent/hctune.sock", 20, &c);
  hct_choice_t ch;
  assert_int_equal(hct_choose(c, "hc_read", 0, NULL, NULL, &ch), HCT_EINVAL);
  assert_int_equal(hct_choose(c, NULL, 1, NULL, NULL, &ch), HCT_EINVAL);
  assert_int_equal(hct_choose(c, "hc_read", 1, NULL, "fast", &ch), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "'fast'"));
  assert_int_equal(hct_choose(NULL, "hc_read", 1, NULL, NULL, &ch), HCT_EINVAL);
  hct_close(c);
  hct_close(NULL);
  assert_string_equal(hct_source_name(HCT_SOURCE_FLEET), "fleet");
  assert_string_equal(hct_source_name(HCT_SOURCE_ENV), "env");
  assert_string_equal(hct_err_name(HCT_ENODAEMON), "ENODAEMON");
  assert_string_equal(hct_strerror(HCT_ETOOLONG), "request line too long");
}

static void test_socket_path(void **state) {
  char buf[108];
  unsetenv("HCTUNE_SOCKET");
  unsetenv("XDG_RUNTIME_DIR");
  assert_int_equal(hct__socket_path(NULL, buf, sizeof buf), 0);
  assert_string_equal(buf, "/run/hctune/hctune.sock");
  setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
  assert_int_equal(hct__socket_path(NULL, buf, sizeof buf), 0);
  assert_string_equal(buf, "/run/user/7/hctune.sock");
  setenv("HCTUNE_SOCKET", "/tmp/h.sock", 1);
  assert_int_equal(hct__socket_path("", buf, sizeof buf), 0);
  assert_string_equal(buf, "/tmp/h.sock");
  assert_int_equal(hct__socket_path("/x/y.sock", buf, sizeof buf), 0);
  assert_string_equal(buf, "/x/y.sock");
  char longp[300];
  memset(longp, 'a', sizeof longp - 1);
  longp[sizeof longp - 1] = '\0';
  assert_int_equal(hct__socket_path(longp, buf, sizeof buf), HCT_ERANGE);
  unsetenv("HCTUNE_SOCKET");
  unsetenv("XDG_RUNTIME_DIR");
}

/* lib/libhctune.so needs jansson and libc, never SQLite or libuv. */
static void test_shared_library_deps(void **state) {
  const char *bin = getenv("HCT_BIN");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "readelf -d '%s/../lib/libhctune.so' 2>&1", bin ? bin : "bin");
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char out[8192];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  pclose(p);
  if (strstr(out, "NEEDED") == NULL) skip(); /* no readelf, or no library built */
  assert_non_null(strstr(out, "libjansson"));
  assert_null(strstr(out, "sqlite"));
  assert_null(strstr(out, "libuv"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_absent),        cmocka_unit_test(test_stalled),
      cmocka_unit_test(test_force),         cmocka_unit_test(test_force_wins_over_daemon),
      cmocka_unit_test(test_bad_args),      cmocka_unit_test(test_socket_path),
      cmocka_unit_test(test_shared_library_deps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
