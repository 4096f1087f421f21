/*
 * test_child.c: common/child.c, the runner of named handlers in a fresh
 * copy of this executable.  The handlers below run in copies of this very
 * test program: one answers (echoing the request back, large fields
 * included), one prints, one crashes, one exits non-zero, one hangs past
 * the deadline, and three answer wrongly (garbage, a truncated answer,
 * no answer).  Each outcome must be the one named, with a one-line
 * message naming the handler, and this process must live on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "common.h"

/* ---- the handlers, run in the child ------------------------------------- */

/* Answers the request's fields in reverse order, then whether HCT_CHILD
 * was still set in the handler's environment. */
static int echo(const hct_child_msg_t *req) {
  hct_child_field_t *f = calloc((size_t)req->n + 1, sizeof *f);
  if (f == NULL) return 9;
  for (int i = 0; i < req->n; i++) f[i] = req->fields[req->n - 1 - i];
  const char *env = getenv("HCT_CHILD") ? "set" : "unset";
  f[req->n] = (hct_child_field_t){env, strlen(env)};
  hct_child_msg_t answer = {f, req->n + 1};
  return hct__child_answer(&answer) < 0 ? 8 : 0;
}
HCT_CHILD_HANDLER("echo", echo)

static int chatty(const hct_child_msg_t *req) {
  printf("to stdout\n");
  fflush(stdout);
  fprintf(stderr, "to stderr\n");
  hct_child_msg_t answer = {NULL, 0};
  return hct__child_answer(&answer) < 0 ? 8 : 0;
}
HCT_CHILD_HANDLER("chatty", chatty)

static int crash(const hct_child_msg_t *req) {
  abort();
}
HCT_CHILD_HANDLER("crash", crash)

static int fail7(const hct_child_msg_t *req) { return 7; }
HCT_CHILD_HANDLER("fail7", fail7)

static int hang(const hct_child_msg_t *req) {
  sleep(3600);
  return 0;
}
HCT_CHILD_HANDLER("hang", hang)

/* Bytes on the answer descriptor that are not an answer. */
static int garbage(const hct_child_msg_t *req) {
  static const char junk[] = "this is not an answer";
  return write(HCT_CHILD_ANSWER_FD, junk, sizeof junk) < 0 ? 8 : 0;
}
HCT_CHILD_HANDLER("garbage", garbage)

/* A real header announcing one field of 1000 bytes, then 10 of them. */
static int truncated(const hct_child_msg_t *req) {
  char buf[8 + 8 + 10];
  uint32_t head[2] = {0x41544348u /* "HCTA" */, 1};
  uint64_t len = 1000;
  memcpy(buf, head, 8);
  memcpy(buf + 8, &len, 8);
  memset(buf + 16, 'x', 10);
  return write(HCT_CHILD_ANSWER_FD, buf, sizeof buf) < 0 ? 8 : 0;
}
HCT_CHILD_HANDLER("truncated", truncated)

static int silent(const hct_child_msg_t *req) { return 0; }
HCT_CHILD_HANDLER("silent", silent)

/* A handler this process has and its children do not, as when the
 * executable on disk was replaced by another build: the child exits before
 * reading the request. */
__attribute__((constructor(200))) static void register_parent_only(void) {
  if (getenv("HCT_CHILD") == NULL) hct__child_register("parent-only", echo);
}

/* ---- helpers ------------------------------------------------------------ */

static int one_line(const char *s) { return s[0] != '\0' && strchr(s, '\n') == NULL; }

/* Runs `handler` with one small field; checks the outcome and that the
 * message is one line naming the handler. */
static int run_expect(const char *handler, int timeout_ms, int want_rc,
                      hct_child_outcome_t want, hct_child_result_t *res) {
  hct_child_field_t f = {"x", 1};
  hct_child_msg_t req = {&f, 1};
  int rc = hct__child_run(handler, &req, timeout_ms, res);
  print_message("%s: rc %d, outcome %s: %s\n", handler, rc, hct__child_outcome_name(res->outcome),
                rc < 0 ? hct_last_error() : "");
  assert_int_equal(rc, want_rc);
  assert_int_equal(res->outcome, want);
  if (rc < 0) {
    assert_true(one_line(hct_last_error()));
    assert_non_null(strstr(hct_last_error(), handler));
  }
  return rc;
}

/* ---- tests -------------------------------------------------------------- */

static void test_answers(void **state) {
  (void)state;
  /* A field far larger than a pipe's buffer each way: the request is
   * written while the answer is read. */
  size_t big_n = (size_t)4 << 20;
  char *big = malloc(big_n);
  assert_non_null(big);
  for (size_t i = 0; i < big_n; i++) big[i] = (char)(i * 7 + 3);
  /* An empty field may have no bytes at all (NULL). */
  hct_child_field_t f[3] = {{"first", 5}, {NULL, 0}, {big, big_n}};
  hct_child_msg_t req = {f, 3};
  hct_child_result_t res;
  int rc = hct__child_run("echo", &req, 60000, &res);
  if (rc < 0) print_message("echo: %s\n", hct_last_error());
  assert_int_equal(rc, 0);
  assert_int_equal(res.outcome, HCT_CHILD_ANSWERED);
  assert_int_equal(res.answer.n, 4);
  assert_int_equal(res.answer.fields[0].n, big_n);
  assert_memory_equal(res.answer.fields[0].p, big, big_n);
  assert_int_equal(res.answer.fields[1].n, 0);
  assert_int_equal(res.answer.fields[2].n, 5);
  assert_memory_equal(res.answer.fields[2].p, "first", 5);
  /* The child's own children would not be handlers. */
  assert_int_equal(res.answer.fields[3].n, 5);
  assert_memory_equal(res.answer.fields[3].p, "unset", 5);
  assert_null(res.output);
  assert_true(res.ms > 0);
  hct__child_result_free(&res);
  free(big);
}

static void test_output_comes_back(void **state) {
  (void)state;
  hct_child_result_t res;
  run_expect("chatty", 60000, 0, HCT_CHILD_ANSWERED, &res);
  assert_int_equal(res.answer.n, 0);
  assert_non_null(res.output);
  assert_non_null(strstr(res.output, "to stdout\n"));
  assert_non_null(strstr(res.output, "to stderr\n"));
  assert_int_equal(strlen(res.output), res.output_len);
  hct__child_result_free(&res);
}

static void test_crash(void **state) {
  (void)state;
  hct_child_result_t res;
  run_expect("crash", 60000, HCT_EWORKER, HCT_CHILD_CRASHED, &res);
  assert_int_equal(res.signal, SIGABRT);
  assert_non_null(strstr(hct_last_error(), "crashed (signal 6)"));
  assert_int_equal(res.answer.n, 0);
  hct__child_result_free(&res);
}

static void test_exit_status(void **state) {
  (void)state;
  hct_child_result_t res;
  run_expect("fail7", 60000, HCT_EWORKER, HCT_CHILD_FAILED, &res);
  assert_int_equal(res.exit_status, 7);
  assert_non_null(strstr(hct_last_error(), "exit status 7"));
  hct__child_result_free(&res);
}

static void test_hang_past_deadline(void **state) {
  (void)state;
  hct_child_result_t res;
  uint64_t t0 = hct__now_ns();
  run_expect("hang", 400, HCT_ETIMEDOUT, HCT_CHILD_TIMED_OUT, &res);
  double s = (double)(hct__now_ns() - t0) / 1e9;
  print_message("hang: killed after %.2f s\n", s);
  assert_true(s >= 0.4);
  assert_true(s < 10);
  assert_non_null(strstr(hct_last_error(), "400 ms"));
  hct__child_result_free(&res);
}

static void test_garbled_answers(void **state) {
  (void)state;
  static const char *const bad[] = {"garbage", "truncated", "silent"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    hct_child_result_t res;
    run_expect(bad[i], 60000, HCT_EPROTO, HCT_CHILD_GARBLED, &res);
    assert_int_equal(res.answer.n, 0);
    assert_null(res.answer.fields);
    hct__child_result_free(&res);
  }
  /* The reasons differ: a wrong magic, a field past the end, nothing. */
  hct_child_result_t res;
  run_expect("truncated", 60000, HCT_EPROTO, HCT_CHILD_GARBLED, &res);
  assert_non_null(strstr(hct_last_error(), "past the end"));
  hct__child_result_free(&res);
  run_expect("silent", 60000, HCT_EPROTO, HCT_CHILD_GARBLED, &res);
  assert_non_null(strstr(hct_last_error(), "without answering"));
  hct__child_result_free(&res);
}

static void test_unknown_handler(void **state) {
  (void)state;
  hct_child_result_t res;
  run_expect("no-such-handler", 60000, HCT_EINVAL, HCT_CHILD_NOT_STARTED, &res);
  hct__child_result_free(&res);
}

/* The child exits unread while a request far larger than the socket's
 * buffer is still being sent: an error, not a SIGPIPE for this process. */
static void test_child_without_the_handler(void **state) {
  (void)state;
  size_t big_n = (size_t)8 << 20;
  char *big = calloc(1, big_n);
  assert_non_null(big);
  hct_child_field_t f = {big, big_n};
  hct_child_msg_t req = {&f, 1};
  hct_child_result_t res;
  int rc = hct__child_run("parent-only", &req, 60000, &res);
  print_message("parent-only: %s\n", hct_last_error());
  assert_int_equal(rc, HCT_EWORKER);
  assert_int_equal(res.outcome, HCT_CHILD_FAILED);
  assert_non_null(strstr(hct_last_error(), "no such handler"));
  hct__child_result_free(&res);
  free(big);
}

typedef struct {
  int rc, ok;
} thread_run_t;

static void echo_thread(void *arg) {
  thread_run_t *t = arg;
  char text[32];
  snprintf(text, sizeof text, "thread %p", (void *)t);
  for (int i = 0; i < 3 && t->rc == 0; i++) {
    hct_child_field_t f = {text, strlen(text)};
    hct_child_msg_t req = {&f, 1};
    hct_child_result_t res;
    t->rc = hct__child_run("echo", &req, 60000, &res);
    t->ok += t->rc == 0 && res.answer.n == 2 && res.answer.fields[0].n == strlen(text) &&
             memcmp(res.answer.fields[0].p, text, strlen(text)) == 0;
    hct__child_result_free(&res);
  }
}

/* Callers on several threads at once (the compile pool does this): each
 * gets its own answer. */
static void test_threads(void **state) {
  (void)state;
  thread_run_t runs[4];
  uv_thread_t th[4];
  memset(runs, 0, sizeof runs);
  for (int i = 0; i < 4; i++) assert_int_equal(uv_thread_create(&th[i], echo_thread, &runs[i]), 0);
  for (int i = 0; i < 4; i++) assert_int_equal(uv_thread_join(&th[i]), 0);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(runs[i].rc, 0);
    assert_int_equal(runs[i].ok, 3);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_answers),
    cmocka_unit_test(test_output_comes_back),
    cmocka_unit_test(test_crash),
    cmocka_unit_test(test_exit_status),
    cmocka_unit_test(test_hang_past_deadline),
    cmocka_unit_test(test_garbled_answers),
    cmocka_unit_test(test_unknown_handler),
    cmocka_unit_test(test_child_without_the_handler),
    cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
