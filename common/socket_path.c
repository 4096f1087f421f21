/*
 * socket_path.c: where the daemon's socket is, the one search that hctuned
 * (where it binds) and libhctune (where it connects) both follow.  Here,
 * below both, so that neither calls the other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common.h"

#define SOCK_LEN sizeof(((struct sockaddr_un *)0)->sun_path)

int hct__socket_paths(const char *explicit_path, char paths[][108], int max) {
  const char *one = explicit_path;
  if (one == NULL || one[0] == '\0') one = getenv("HCTUNE_SOCKET");
  char tmp[4096];
  const char *cand[HCT_MAX_SOCKETS];
  int n = 0;
  if (one != NULL && one[0] != '\0') {
    cand[n++] = one;
  } else {
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x != NULL && x[0] != '\0') {
      snprintf(tmp, sizeof tmp, "%s/hctune.sock", x);
      cand[n++] = tmp;
    }
    cand[n++] = "/run/hctune/hctune.sock";
  }
  if (n > max) n = max;
  for (int i = 0; i < n; i++) {
    if (strlen(cand[i]) >= SOCK_LEN)
      return hct__error(HCT_ERANGE, "socket path '%s': longer than %zu bytes", cand[i],
                        SOCK_LEN - 1);
    hct__strlcpy(paths[i], cand[i], SOCK_LEN);
  }
  return n;
}

int hct__socket_path(const char *explicit_path, char *buf, size_t len) {
  char paths[HCT_MAX_SOCKETS][SOCK_LEN];
  int n = hct__socket_paths(explicit_path, paths, HCT_MAX_SOCKETS);
  if (n < 0) return n;
  if (strlen(paths[0]) >= len)
    return hct__error(HCT_ERANGE, "socket path '%s': longer than %zu bytes", paths[0], len - 1);
  hct__strlcpy(buf, paths[0], len);
  return 0;
}
