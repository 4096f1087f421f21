/*
 * child.c: runs a named handler in a fresh copy of this executable, for
 * work that may crash or hang the process doing it: hiprtc of ROCm 5.2
 * aborts the whole process (`munmap_chunk(): invalid pointer`) for a
 * target it does not know, so jit/hip_rtc.c never calls it in hctune's own
 * address space.
 *
 * How: hct__child_run() starts this executable again (hct__exe_path, that
 * is uv_exepath) with posix_spawn and HCT_CHILD=<handler> in its
 * environment.  The constructor child_main() below sees that before main()
 * runs, reads the request on stdin, calls the handler, which answers on
 * fd 3 (hct__child_answer), and exits without returning to main().  The
 * child's stdout and stderr come back to the parent as text, so a crashing
 * library's last words never reach the parent's own stderr.
 *
 * Why a new process image and not a plain fork():
 *   - a forked child of a threaded process inherits the other threads'
 *     locks.  glibc resets its malloc's, but not those of other
 *     allocators: under AddressSanitizer, forked compiles hung (seen in
 *     the test suite), and a forked child would also inherit a GPU runtime
 *     the parent had started (hctune probe opens the card), with its
 *     threads gone and its device state tied to the parent;
 *   - exec gives a fresh image: nothing inherited but the descriptors
 *     passed;
 *   - every program that links libhctune.a carries the constructor, so no
 *     hidden command and no search for a helper executable is needed; the
 *     cost is one exec per call (a few ms).
 * KNOWN-GAP: the path is looked up at each call, so an executable replaced
 * on disk while hctune runs (a rebuild) answers from the new file; the
 * magic numbers of the messages turn a mismatch into a garbled answer.
 *
 * Wire format, both ways: a 32-bit magic (request "HCTQ", answer "HCTA"),
 * a 32-bit field count, then each field as a 64-bit length and its bytes,
 * in host byte order (the same executable reads it), and nothing after.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define CHILD_ENV "HCT_CHILD"
#define REQUEST_MAGIC 0x51544348u /* "HCTQ" */
#define ANSWER_MAGIC 0x41544348u  /* "HCTA" */

/* Bounds on what either side accepts: the largest real message is a code
 * object of a few MB, and a child's chatter is only kept for the log. */
#define REQUEST_MAX ((size_t)1 << 28)
#define ANSWER_MAX ((size_t)1 << 30)
#define OUTPUT_MAX ((size_t)65536)

/* Exit statuses of the child's own failures, before or around a handler. */
enum { EXIT_NO_HANDLER = 120, EXIT_BAD_REQUEST = 121 };

extern char **environ;

/* ---- the handlers of this program --------------------------------------- */

#define MAX_HANDLERS 16

static struct {
  const char *name;
  hct_child_handler_t fn;
} handlers[MAX_HANDLERS];
static int n_handlers;

/* Called by HCT_CHILD_HANDLER's constructors only, before main(): one
 * thread, so no lock.  A seventeenth handler is dropped, and then named
 * by hct__child_run as missing. */
void hct__child_register(const char *name, hct_child_handler_t fn) {
  if (n_handlers < MAX_HANDLERS) {
    handlers[n_handlers].name = name;
    handlers[n_handlers].fn = fn;
    n_handlers++;
  }
}

static hct_child_handler_t handler_find(const char *name) {
  for (int i = 0; i < n_handlers; i++)
    if (strcmp(handlers[i].name, name) == 0) return handlers[i].fn;
  return NULL;
}

/* ---- bytes -------------------------------------------------------------- */

/* A growable byte buffer; bytes past `limit` are dropped and counted in
 * `dropped` (a child's stderr could be endless). */
typedef struct buf_s {
  char *p;
  size_t n, cap, limit, dropped;
} buf_t;

static int buf_put(buf_t *b, const void *p, size_t n) {
  size_t take = HCT_MIN(n, b->limit - b->n);
  b->dropped += n - take;
  if (b->n + take + 1 > b->cap) {
    size_t cap = HCT_MAX(b->cap * 2, b->n + take + 1);
    char *q = realloc(b->p, cap);
    if (q == NULL) return -ENOMEM;
    b->p = q;
    b->cap = cap;
  }
  if (take > 0) memcpy(b->p + b->n, p, take); /* p may be NULL when n is 0 */
  b->n += take;
  b->p[b->n] = '\0';
  return 0;
}

/* Reads what is there; 1 when more may come, 0 at EOF, negative on error. */
static int buf_read(buf_t *b, int fd) {
  char tmp[65536];
  ssize_t r = read(fd, tmp, sizeof tmp);
  if (r < 0) return errno == EINTR || errno == EAGAIN ? 1 : -errno;
  if (r == 0) return 0;
  return buf_put(b, tmp, (size_t)r) < 0 ? -ENOMEM : 1;
}

static int encode(buf_t *b, uint32_t magic, const hct_child_msg_t *m) {
  uint32_t head[2] = {magic, (uint32_t)m->n};
  if (m->n < 0 || m->n > HCT_CHILD_MAX_FIELDS || buf_put(b, head, sizeof head) < 0) return -1;
  for (int i = 0; i < m->n; i++) {
    uint64_t len = m->fields[i].n;
    if (buf_put(b, &len, sizeof len) < 0 || buf_put(b, m->fields[i].p, m->fields[i].n) < 0)
      return -1;
  }
  return b->dropped == 0 ? 0 : -1;
}

/* Parses `len` bytes into m, whose fields point into the bytes; the
 * array is malloc'd.  Every length is checked against what is left, and
 * nothing may follow the last field.  0, or -1 with `why` set. */
static int decode(const char *p, size_t len, uint32_t magic, hct_child_msg_t *m,
                  const char **why) {
  const char *end = p + len;
  uint32_t head[2];
  m->fields = NULL;
  m->n = 0;
  if (len < sizeof head) return *why = "shorter than its header", -1;
  memcpy(head, p, sizeof head);
  p += sizeof head;
  if (head[0] != magic) return *why = "wrong magic number", -1;
  if (head[1] > HCT_CHILD_MAX_FIELDS) return *why = "too many fields", -1;
  m->fields = calloc(head[1] + 1, sizeof *m->fields);
  if (m->fields == NULL) return *why = "out of memory", -1;
  for (uint32_t i = 0; i < head[1]; i++) {
    uint64_t n;
    if ((size_t)(end - p) < sizeof n) return *why = "cut short in a field's length", -1;
    memcpy(&n, p, sizeof n);
    p += sizeof n;
    if ((uint64_t)(end - p) < n) return *why = "a field runs past the end", -1;
    m->fields[i].p = p;
    m->fields[i].n = (size_t)n;
    p += n;
    m->n++;
  }
  if (p != end) return *why = "bytes after the last field", -1;
  return 0;
}

/* ---- the child side ----------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

int hct__child_answer(const hct_child_msg_t *answer) {
  buf_t b = {NULL, 0, 0, ANSWER_MAX, 0};
  int rc = encode(&b, ANSWER_MAGIC, answer) < 0 || write_all(HCT_CHILD_ANSWER_FD, b.p, b.n) < 0
               ? -1
               : 0;
  free(b.p);
  return rc;
}

/* Closes every descriptor from `from` up: other threads' pipes must not
 * stay open in the child, or their readers would wait for it too. */
static void close_from(int from) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)from, ~0u, 0u) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (int fd = from; fd < max; fd++) close(fd);
}

/*
 * Runs before main() in every program that links this file, after the
 * handlers registered themselves (priority 200 < 300), and does nothing
 * unless HCT_CHILD is set and fd 3 is a pipe.  Then it serves the request
 * on stdin and exits with the handler's status, never returning.
 */
__attribute__((constructor(300))) static void child_main(void) {
  const char *env = getenv(CHILD_ENV);
  struct stat st;
  if (env == NULL || fstat(HCT_CHILD_ANSWER_FD, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  char name[64];
  hct__strlcpy(name, env, sizeof name);
  unsetenv(CHILD_ENV); /* its own children are not handlers */
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core); /* a known crash is not worth a core file */
  close_from(HCT_CHILD_ANSWER_FD + 1);
  hct_child_handler_t fn = handler_find(name);
  if (fn == NULL) _exit(EXIT_NO_HANDLER);
  buf_t in = {NULL, 0, 0, REQUEST_MAX, 0};
  int r;
  while ((r = buf_read(&in, 0)) > 0) {
  }
  hct_child_msg_t req;
  const char *why;
  if (r < 0 || in.dropped > 0 || decode(in.p ? in.p : "", in.n, REQUEST_MAGIC, &req, &why) < 0)
    _exit(EXIT_BAD_REQUEST);
  _exit(fn(&req) & 0xff);
}

/* ---- the parent side ---------------------------------------------------- */

static const char *outcome_names[] = {
  [HCT_CHILD_ANSWERED] = "answered",   [HCT_CHILD_NOT_STARTED] = "not started",
  [HCT_CHILD_TIMED_OUT] = "timed out", [HCT_CHILD_IO_ERROR] = "i/o error",
  [HCT_CHILD_CRASHED] = "crashed",     [HCT_CHILD_FAILED] = "failed",
  [HCT_CHILD_GARBLED] = "garbled",
};

const char *hct__child_outcome_name(hct_child_outcome_t o) {
  return (int)o >= 0 && (size_t)o < HCT_ARRAY_SIZE(outcome_names) ? outcome_names[o] : "?";
}

void hct__child_result_free(hct_child_result_t *res) {
  free(res->answer.fields);
  free(res->answer_bytes);
  free(res->output);
  memset(res, 0, sizeof *res);
}

/* Starts the child with its stdin on q, stdout and stderr on e and fd 3
 * on r; 0 or an errno value. */
static int spawn(const char *exe, const char *handler, int q, int e, int r, pid_t *pid) {
  size_t n_env = 0;
  while (environ != NULL && environ[n_env] != NULL) n_env++;
  char **envp = malloc((n_env + 2) * sizeof *envp);
  char *mine = hct__asprintf(CHILD_ENV "=%s", handler);
  char *argv0 = hct__asprintf("hctune-%s", handler); /* what ps shows */
  int err = 0;
  if (envp == NULL || mine == NULL || argv0 == NULL) err = ENOMEM;
  if (err == 0) {
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++)
      if (strncmp(environ[i], CHILD_ENV "=", sizeof CHILD_ENV) != 0) envp[k++] = environ[i];
    envp[k++] = mine;
    envp[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    /* The parent may ignore or catch these; the child must die of them,
     * so that a crash reads as one. */
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGABRT);
    sigaddset(&dfl, SIGSEGV);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, q, 0);
    posix_spawn_file_actions_adddup2(&fa, e, 1);
    posix_spawn_file_actions_adddup2(&fa, e, 2);
    posix_spawn_file_actions_adddup2(&fa, r, HCT_CHILD_ANSWER_FD);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *child_argv[] = {argv0, NULL};
    err = posix_spawn(pid, exe, &fa, &attr, child_argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
  }
  free(envp);
  free(mine);
  free(argv0);
  return err;
}

int hct__child_run(const char *handler, const hct_child_msg_t *req, int timeout_ms,
                   hct_child_result_t *res) {
  memset(res, 0, sizeof *res);
  res->outcome = HCT_CHILD_NOT_STARTED;
  if (handler_find(handler) == NULL)
    return hct__error(HCT_EINVAL, "child '%s': no handler of that name in this program",
                      handler);
  char exe[PATH_MAX];
  int rc = hct__exe_path(exe, sizeof exe);
  if (rc < 0) return rc;
  buf_t request = {NULL, 0, 0, REQUEST_MAX, 0};
  if (encode(&request, REQUEST_MAGIC, req) < 0) {
    free(request.p);
    return hct__error(HCT_ERANGE, "child '%s': request too large (%d fields, at most %zu bytes)",
                      handler, req->n, REQUEST_MAX);
  }

  /* The request goes over a socket pair rather than a pipe so that it can
   * be sent with MSG_NOSIGNAL: a child that dies before reading it (an
   * executable replaced on disk has other handlers) must cost an EPIPE,
   * not a SIGPIPE that kills this process.  Every end is moved to 10 and
   * up (and close-on-exec) first, so that the dup2 calls into 0..3 in the
   * child never overwrite one another. */
  int qp[2] = {-1, -1}, rp[2] = {-1, -1}, ep[2] = {-1, -1}, err = 0;
  int *ends[6] = {&qp[0], &qp[1], &rp[0], &rp[1], &ep[0], &ep[1]};
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qp) < 0 || pipe2(rp, O_CLOEXEC) < 0 ||
      pipe2(ep, O_CLOEXEC) < 0)
    err = errno;
  for (int i = 0; i < 6 && err == 0; i++) {
    int fd = fcntl(*ends[i], F_DUPFD_CLOEXEC, 10);
    if (fd < 0) {
      err = errno;
      break;
    }
    close(*ends[i]);
    *ends[i] = fd;
  }
  pid_t pid = -1;
  uint64_t t0 = hct__now_ns();
  if (err == 0) err = spawn(exe, handler, qp[0], ep[1], rp[1], &pid);
  for (int i = 0; i < 6; i++)
    if (*ends[i] >= 0 && (err != 0 || ends[i] == &qp[0] || ends[i] == &rp[1] || ends[i] == &ep[1]))
      close(*ends[i]);
  if (err != 0) {
    free(request.p);
    return hct__error(HCT_EIO, "child '%s': cannot start '%s': %s", handler, exe, strerror(err));
  }

  buf_t answer = {NULL, 0, 0, ANSWER_MAX, 0}, output = {NULL, 0, 0, OUTPUT_MAX, 0};
  /* The request goes in as the child reads it, while its output is read:
   * neither side can fill a pipe and wait on the other. */
  struct pollfd pf[3] = {{rp[0], POLLIN, 0}, {ep[0], POLLIN, 0}, {qp[1], POLLOUT, 0}};
  size_t sent = 0;
  int open_fds = 2, timed_out = 0, read_error = 0;
  uint64_t deadline = t0 + (uint64_t)timeout_ms * 1000000ull;
  while (open_fds > 0 && !read_error) {
    uint64_t now = hct__now_ns();
    if (now >= deadline) {
      timed_out = 1;
      break;
    }
    int n = poll(pf, 3, (int)HCT_MIN((deadline - now) / 1000000ull + 1, 1000ull));
    if (n < 0 && errno != EINTR) read_error = errno;
    if (n > 0 && pf[2].fd >= 0 && pf[2].revents != 0) {
      ssize_t w = -1;
      int werr = EPIPE; /* an error or hang-up without room to write */
      if (pf[2].revents & POLLOUT) {
        w = send(pf[2].fd, request.p + sent, request.n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        werr = errno;
      }
      if (w > 0) sent += (size_t)w;
      /* Done, or the child stopped reading (it died: its status says why). */
      if (sent == request.n || (w < 0 && werr != EAGAIN && werr != EINTR)) {
        close(pf[2].fd);
        pf[2].fd = -1;
      }
    }
    for (int i = 0; i < 2 && n > 0; i++) {
      if (pf[i].fd < 0 || pf[i].revents == 0) continue;
      int r = buf_read(i == 0 ? &answer : &output, pf[i].fd);
      if (r < 0) read_error = -r;
      if (r <= 0) {
        close(pf[i].fd);
        pf[i].fd = -1;
        open_fds--;
      }
    }
  }
  free(request.p);
  if (timed_out || read_error) kill(pid, SIGKILL);
  for (int i = 0; i < 3; i++)
    if (pf[i].fd >= 0) close(pf[i].fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  res->ms = (double)(hct__now_ns() - t0) / 1e6;
  res->output = output.p;
  res->output_len = output.n;

  const char *why = NULL;
  if (timed_out) {
    res->outcome = HCT_CHILD_TIMED_OUT;
    rc = hct__error(HCT_ETIMEDOUT, "child '%s': no answer in %d ms: killed", handler,
                    timeout_ms);
  } else if (read_error) {
    res->outcome = HCT_CHILD_IO_ERROR;
    rc = hct__error(HCT_EIO, "child '%s': cannot read its answer: %s", handler,
                    strerror(read_error));
  } else if (WIFSIGNALED(status)) {
    res->outcome = HCT_CHILD_CRASHED;
    res->signal = WTERMSIG(status);
    rc = hct__error(HCT_EWORKER, "child '%s' crashed (signal %d)", handler, res->signal);
  } else if (WEXITSTATUS(status) != 0) {
    res->outcome = HCT_CHILD_FAILED;
    res->exit_status = WEXITSTATUS(status);
    rc = hct__error(HCT_EWORKER, "child '%s' failed (exit status %d%s)", handler,
                    res->exit_status,
                    res->exit_status == EXIT_NO_HANDLER    ? ": it has no such handler"
                    : res->exit_status == EXIT_BAD_REQUEST ? ": it could not read the request"
                                                           : "");
  } else if (answer.n == 0) {
    res->outcome = HCT_CHILD_GARBLED;
    rc = hct__error(HCT_EPROTO, "child '%s' exited without answering", handler);
  } else if (answer.dropped > 0 ||
             decode(answer.p, answer.n, ANSWER_MAGIC, &res->answer, &why) < 0) {
    res->outcome = HCT_CHILD_GARBLED;
    free(res->answer.fields);
    res->answer.fields = NULL;
    res->answer.n = 0;
    rc = hct__error(HCT_EPROTO, "child '%s': garbled answer (%zu bytes): %s", handler,
                    answer.n + answer.dropped, why ? why : "larger than the limit");
  } else {
    res->outcome = HCT_CHILD_ANSWERED;
    res->answer_bytes = answer.p;
    answer.p = NULL;
    rc = 0;
  }
  free(answer.p);
  return rc;
}
