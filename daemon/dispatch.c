/*
 * dispatch.c: one request line, as Redis's processCommand does it: parse it
 * against the verb table (daemon/proto.c, daemon/verbs.c), check the
 * peer's rights for the verb's flags, call its handler, and turn a failure
 * into the error reply.  Loop thread only.
 */
#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

/* Whether the peer may run an admin verb; the error says why not. */
static int check_admin(hct_conn_t *c, const char *verb) {
  hct_daemon_t *d = c->d;
  if (c->uid == 0 || c->uid == geteuid()) return 0;
  if (d->have_admin_gid) {
    if (c->gid == d->admin_gid) return 0;
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(c->uid, &pw, buf, sizeof buf, &res) == 0 && res != NULL) {
      gid_t groups[256];
      int ng = (int)HCT_ARRAY_SIZE(groups);
      if (getgrouplist(res->pw_name, res->pw_gid, groups, &ng) >= 0)
        for (int i = 0; i < ng; i++)
          if (groups[i] == d->admin_gid) return 0;
    }
    return hct__error(HCT_EPERM,
                      "'%s' is for uid %u (the daemon's), root, or group '%s': peer uid %u is "
                      "none of them",
                      verb, (unsigned)geteuid(), d->admin_group, (unsigned)c->uid);
  }
  return hct__error(HCT_EPERM,
                    "'%s' is for uid %u (the daemon's) or root, and no --admin-group is set: "
                    "peer uid %u is neither",
                    verb, (unsigned)geteuid(), (unsigned)c->uid);
}

void hct__dispatch_line(hct_conn_t *c, const char *line, size_t n) {
  c->d->requests++;
  hct_req_t r;
  int rc = hct__req_parse(line, n, &r);
  if (rc >= 0 && (r.flags & HCT_REQ_ADMIN)) rc = check_admin(c, r.cmd);
  if (rc >= 0) {
    hct__error_clear();
    rc = r.spec->fn(c, &r);
  }
  if (rc < 0)
    hct__reply_error(c, r.id, rc, hct_last_error()[0] ? hct_last_error() : hct_strerror(rc));
  hct__req_free(&r);
}
