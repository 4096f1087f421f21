/*
 * util.c: paths, files, clocks and small string helpers shared by every
 * part of hctune.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

void hct__strlcpy(char *dst, const char *src, size_t len) {
  if (len == 0) return;
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

char *hct__strdup(const char *s) { return s ? strdup(s) : NULL; }

int hct__grow(void *arrp, int *cap, int n, size_t elem, int first) {
  if (n < *cap) return 0;
  int ncap = *cap ? 2 * *cap : first;
  /* The caller's pointer has its own type (hct_timed_row_t *, char *...):
   * read and written by memcpy, which may alias anything. */
  void *old, *na;
  memcpy(&old, arrp, sizeof old);
  if ((na = realloc(old, (size_t)ncap * elem)) == NULL) return HCT_ENOMEM;
  memcpy(arrp, &na, sizeof na);
  *cap = ncap;
  return 0;
}

char *hct__asprintf(const char *fmt, ...) {
  va_list ap;
  char *out = NULL;
  va_start(ap, fmt);
  if (vasprintf(&out, fmt, ap) < 0) out = NULL;
  va_end(ap);
  return out;
}

int hct__mkdir_parents(const char *path) {
  char buf[PATH_MAX];
  hct__strlcpy(buf, path, sizeof buf);
  char *slash = strrchr(buf, '/');
  if (slash == NULL || slash == buf) return 0;
  *slash = '\0';
  for (char *p = buf + 1; ; p++) {
    if (*p == '/' || *p == '\0') {
      char saved = *p;
      *p = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return hct__error(HCT_EIO, "cannot create folder '%s': %s", buf, strerror(errno));
      *p = saved;
      if (saved == '\0') break;
    }
  }
  return 0;
}

int hct__default_db_path(char *buf, size_t len, int create_dirs) {
  const char *env = getenv("HCTUNE_DB");
  int n;
  if (env != NULL && env[0] != '\0') {
    n = snprintf(buf, len, "%s", env);
  } else if ((env = getenv("XDG_STATE_HOME")) != NULL && env[0] == '/') {
    n = snprintf(buf, len, "%s/hctune/hctune.db", env);
  } else {
    const char *home = getenv("HOME");
    if (home == NULL || home[0] == '\0')
      return hct__error(HCT_EINVAL, "cannot place the database: HOME is not set (set HCTUNE_DB)");
    n = snprintf(buf, len, "%s/.local/state/hctune/hctune.db", home);
  }
  if (n < 0 || (size_t)n >= len)
    return hct__error(HCT_ERANGE, "database path is too long");
  return create_dirs ? hct__mkdir_parents(buf) : 0;
}

int hct__read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return hct__error(errno == ENOENT ? HCT_ENOENT : HCT_EIO, "cannot open '%s': %s", path,
                      strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (buf == NULL) {
    fclose(f);
    return hct__error(HCT_ENOMEM, "out of memory reading '%s'", path);
  }
  for (;;) {
    if (cap - n < 2) {
      char *nb = realloc(buf, cap * 2);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return hct__error(HCT_ENOMEM, "out of memory reading '%s'", path);
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return hct__error(HCT_EIO, "cannot read '%s'", path);
  }
  buf[n] = '\0';
  *out = buf;
  if (len) *len = n;
  return 0;
}

/* File types that are not regular files, by what they are called in an
 * error. */
static const struct {
  mode_t type;
  const char *name;
} file_types[] = {{S_IFIFO, "a FIFO"},        {S_IFCHR, "a character device"},
                  {S_IFBLK, "a block device"}, {S_IFDIR, "a folder"},
                  {S_IFSOCK, "a socket"},      {S_IFLNK, "a symlink"}};

int hct__read_regular(const char *path, size_t max, char **out, size_t *len) {
  /* O_NONBLOCK: opening a FIFO with no writer would wait forever. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return hct__error(errno == ENOENT ? HCT_ENOENT : HCT_EIO, "cannot open '%s': %s", path,
                      strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return hct__error(HCT_EIO, "cannot stat '%s': %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    const char *what = "not a plain file";
    for (size_t i = 0; i < HCT_ARRAY_SIZE(file_types); i++)
      if ((st.st_mode & S_IFMT) == file_types[i].type) what = file_types[i].name;
    close(fd);
    return hct__error(HCT_EINVAL, "'%s' is %s, not a regular file", path, what);
  }
  if ((uint64_t)st.st_size > max) {
    close(fd);
    return hct__error(HCT_ERANGE, "'%s' is %lld bytes, over the limit of %zu", path,
                      (long long)st.st_size, max);
  }
  if (out == NULL) {
    close(fd);
    return 0;
  }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *buf = malloc(cap);
  if (buf == NULL) {
    close(fd);
    return hct__error(HCT_ENOMEM, "out of memory reading '%s'", path);
  }
  /* A file that grows while read is cut at the size fstat saw. */
  while (n < cap - 1) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return hct__error(HCT_EIO, "cannot read '%s': %s", path, strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  *out = buf;
  if (len) *len = n;
  return 0;
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int hct__exe_path(char *buf, size_t len) {
  ssize_t n = readlink("/proc/self/exe", buf, len);
  if (n < 0)
    return hct__error(HCT_EIO, "cannot find this executable's path: %s", strerror(errno));
  if ((size_t)n >= len) return hct__error(HCT_ERANGE, "this executable's path: longer than %zu bytes", len - 1);
  buf[n] = '\0';
  return 0;
}

/* The file this code was loaded from: lib/libhctune.so.0 in an engine
 * that loads the library (so the templates are found beside lib/, not
 * beside the engine's executable), the executable itself in the programs
 * and in an engine linked with libhctune.a (the main program's link map
 * has an empty name). */
static int code_path(char *buf, size_t len) {
  Dl_info info;
  struct link_map *map = NULL;
  if (dladdr1((void *)&code_path, &info, (void **)&map, RTLD_DL_LINKMAP) == 0 || map == NULL ||
      map->l_name == NULL || map->l_name[0] == '\0')
    return hct__exe_path(buf, len);
  char real[PATH_MAX];
  if (realpath(map->l_name, real) == NULL)
    return hct__error(HCT_EIO, "cannot resolve '%s': %s", map->l_name, strerror(errno));
  hct__strlcpy(buf, real, len);
  return 0;
}

int hct__kernels_dir(char *buf, size_t len) {
  const char *env = getenv("HCTUNE_KERNELS");
  if (env != NULL && env[0] != '\0') {
    for (const char *p = env; *p != '\0';) {
      size_t n = strcspn(p, ":");
      char one[PATH_MAX];
      snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), p);
      if (n > 0 && !is_dir(one))
        return hct__error(HCT_ENOENT, "kernel templates '%s' (HCTUNE_KERNELS): no such folder",
                          one);
      p += n + (p[n] == ':');
    }
    if (strlen(env) >= len)
      return hct__error(HCT_ERANGE, "kernel templates (HCTUNE_KERNELS): longer than %zu bytes",
                        len - 1);
    hct__strlcpy(buf, env, len);
    return 0;
  }
  /* The build tree: <root>/bin/hctune (or <root>/lib/libhctune.so.0) next
   * to <root>/kernels-src. */
  char exe[PATH_MAX];
  if (code_path(exe, sizeof exe) == 0) {
    for (int up = 0; up < 3; up++) {
      char *slash = strrchr(exe, '/');
      if (slash == NULL) break;
      *slash = '\0';
      char cand[PATH_MAX + 64];
      snprintf(cand, sizeof cand, "%s/kernels-src", exe);
      if (is_dir(cand)) {
        hct__strlcpy(buf, cand, len);
        return 0;
      }
      snprintf(cand, sizeof cand, "%s/share/hctune/kernels-src", exe);
      if (is_dir(cand)) {
        hct__strlcpy(buf, cand, len);
        return 0;
      }
    }
  }
  if (is_dir("kernels-src")) {
    hct__strlcpy(buf, "kernels-src", len);
    return 0;
  }
  return hct__error(HCT_ENOENT, "kernel templates: no kernels-src folder found (set HCTUNE_KERNELS)");
}

void hct__hostname(char *buf, size_t len) {
  if (gethostname(buf, len) != 0 || buf[0] == '\0') hct__strlcpy(buf, "unknown", len);
  buf[len - 1] = '\0';
}

uint64_t hct__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t hct__unix_time(void) { return (int64_t)time(NULL); }

void hct__iso_time(int64_t t, char *buf, size_t len) {
  time_t tt = (time_t)t;
  struct tm tm;
  /* gmtime_r fails for years it cannot hold (t near 7e16): leave an empty
   * text rather than format an uninitialised struct. */
  if (len > 0) buf[0] = '\0';
  if (gmtime_r(&tt, &tm) == NULL) return;
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void hct__hash_hex(hct_hash_t h, char out[33]) {
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
}
