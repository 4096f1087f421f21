/*
 * test_module_transport.c: the three ways a module's binary could travel
 * from hctuned to libhctune, timed on this machine at the sizes of real
 * cubins (docs/protocol.md, verb module, says which was chosen and why):
 *
 *   inline  base64 in the JSON reply line, dumped and parsed by jansson
 *   spliced the same line, the base64 text spliced in by hand and scanned
 *           out by the client (what hctuned and libhctune do)
 *   path    a cache file's path in the reply; the client opens and reads it
 *           (timed with the file already written, and with the write)
 *   fd      a memfd passed with SCM_RIGHTS beside the reply line; the
 *           client reads it
 *
 * Each transfer runs over a Unix socket pair with the sender on its own
 * thread, from the image in the sender's memory to the image in the
 * receiver's, and is checked byte for byte.  The medians are printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon.h"

typedef enum { T_INLINE, T_SPLICED, T_PATH, T_PATH_WRITE, T_FD } transport_t;
static const char *const names[] = {"inline, jansson", "inline, spliced", "cache file path",
                                     "file written + path", "memfd over SCM_RIGHTS"};

typedef struct {
  int sock;
  transport_t t;
  const unsigned char *image;
  size_t size;
  const char *path;
  int rounds;
} sender_t;

static void send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) abort();
    p += k;
    n -= (size_t)k;
  }
}

static void send_line(int fd, json_t *obj, int pass_fd) {
  char *s = json_dumps(obj, JSON_COMPACT);
  size_t n = strlen(s);
  s = realloc(s, n + 2);
  s[n++] = '\n';
  if (pass_fd >= 0) {
    /* The descriptor rides with the line's first byte. */
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = {s, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                       .msg_controllen = sizeof cbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    if (sendmsg(fd, &m, MSG_NOSIGNAL) != 1) abort();
    send_all(fd, s + 1, n - 1);
  } else {
    send_all(fd, s, n);
  }
  free(s);
}

static void *sender(void *arg) {
  sender_t *S = arg;
  for (int r = 0; r < S->rounds; r++) {
    char go;
    if (recv(S->sock, &go, 1, 0) != 1) abort(); /* the request */
    json_t *o = json_pack("{s:b, s:s, s:I}", "ok", 1, "variant", "persist", "size", (json_int_t)S->size);
    int fd = -1;
    if (S->t == T_INLINE) {
      size_t n;
      char *b64 = hct__base64_encode(S->image, S->size, &n);
      json_object_set_new(o, "image", json_stringn(b64, n));
      free(b64);
    } else if (S->t == T_PATH || S->t == T_PATH_WRITE) {
      if (S->t == T_PATH_WRITE) {
        int w = open(S->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (w < 0 || write(w, S->image, S->size) != (ssize_t)S->size) abort();
        close(w);
      }
      json_object_set_new(o, "path", json_string(S->path));
    } else {
      fd = memfd_create("hctune-module", MFD_CLOEXEC);
      if (fd < 0 || write(fd, S->image, S->size) != (ssize_t)S->size) abort();
    }
    if (S->t == T_SPLICED) {
      size_t n;
      char *b64 = hct__base64_encode(S->image, S->size, &n);
      char *head = json_dumps(o, JSON_COMPACT);
      size_t h = strlen(head) - 1;
      char *line = malloc(h + n + 16);
      memcpy(line, head, h);
      memcpy(line + h, ",\"image\":\"", 10);
      memcpy(line + h + 10, b64, n);
      memcpy(line + h + 10 + n, "\"}\n", 3);
      send_all(S->sock, line, h + n + 13);
      free(line);
      free(head);
      free(b64);
    } else {
      send_line(S->sock, o, fd);
    }
    if (fd >= 0) close(fd);
    json_decref(o);
  }
  return NULL;
}

/* Receives one reply: the line (and a passed descriptor), then the image. */
static unsigned char *receive(int sock, transport_t t, size_t *len) {
  static char *buf;
  static size_t cap;
  size_t n = 0;
  int fd = -1;
  for (;;) {
    if (cap - n < 65536) buf = realloc(buf, cap = cap ? cap * 2 : 1 << 20);
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {buf + n, cap - n};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                       .msg_controllen = sizeof cbuf};
    ssize_t k = recvmsg(sock, &m, 0);
    if (k <= 0) abort();
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c != NULL && c->cmsg_type == SCM_RIGHTS) memcpy(&fd, CMSG_DATA(c), sizeof fd);
    n += (size_t)k;
    if (buf[n - 1] == '\n') break;
  }
  unsigned char *img = NULL;
  if (t == T_SPLICED) {
    buf[n - 1] = '\0';
    char *v = strstr(buf, "\"image\":\"") + 9, *q = strchr(v, '"');
    if (hct__base64_decode(v, (size_t)(q - v), &img, len) != 0) abort();
    memmove(v, q, strlen(q) + 1);
    n = strlen(buf);
  }
  json_t *o = json_loadb(buf, n, 0, NULL);
  if (o == NULL) abort();
  if (t == T_INLINE) {
    json_t *s = json_object_get(o, "image");
    if (hct__base64_decode(json_string_value(s), json_string_length(s), &img, len) != 0) abort();
  } else if (t == T_SPLICED) {
  } else {
    if (t != T_FD) fd = open(json_string_value(json_object_get(o, "path")), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) abort();
    img = malloc((size_t)st.st_size);
    if (pread(fd, img, (size_t)st.st_size, 0) != st.st_size) abort();
    *len = (size_t)st.st_size;
    close(fd);
  }
  json_decref(o);
  return img;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median_us(transport_t t, const unsigned char *image, size_t size, const char *path) {
  enum { ROUNDS = 60 };
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  sender_t S = {sv[1], t, image, size, path, ROUNDS};
  pthread_t th;
  pthread_create(&th, NULL, sender, &S);
  double us[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    uint64_t t0 = hct__now_ns();
    send_all(sv[0], "m", 1);
    size_t len = 0;
    unsigned char *img = receive(sv[0], t, &len);
    us[r] = (double)(hct__now_ns() - t0) / 1e3;
    assert_int_equal(len, size);
    assert_memory_equal(img, image, size);
    free(img);
  }
  pthread_join(th, NULL);
  close(sv[0]);
  close(sv[1]);
  qsort(us, ROUNDS, sizeof *us, cmp);
  return us[ROUNDS / 2];
}

static void test_transports(void **state) {
  /* persist's cubin for sm_90 (the largest of hc_read's, 154,168 bytes in
   * `hctune compile --arch sm_90 --op hc_read`), and 1 MiB. */
  static const size_t sizes[] = {154168, 1 << 20};
  char dir[] = "/tmp/hct-transport-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[64];
  snprintf(path, sizeof path, "%s/module.bin", dir);
  for (size_t s = 0; s < HCT_ARRAY_SIZE(sizes); s++) {
    size_t size = sizes[s];
    unsigned char *image = malloc(size);
    for (size_t i = 0; i < size; i++) image[i] = (unsigned char)(i * 2654435761u >> 13);
    int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(w >= 0 && write(w, image, size) == (ssize_t)size);
    close(w);
    for (int t = T_INLINE; t <= T_FD; t++)
      printf("%8zu bytes  %-22s %8.1f us (median of 60)\n", size, names[t],
             median_us((transport_t)t, image, size, path));
    free(image);
  }
  unlink(path);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_transports)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
