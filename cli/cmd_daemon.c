/*
 * cmd_daemon.c: `hctune daemon` (also the hctuned executable): answers
 * engines over a Unix socket which variant to run (daemon/server.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "daemon.h"

static const char usage[] =
    "usage: hctune daemon [options]     (or: hctuned [options])\n"
    "\n"
    "Serves the decisions of the database to engines over a Unix socket, one\n"
    "JSON request per line (docs/protocol.md).  Runs in the foreground until\n"
    "SIGTERM or SIGINT, then removes its socket.\n"
    "\n"
    "options:\n"
    "  --socket PATH        socket (default: $HCTUNE_SOCKET, else\n"
    "                       $XDG_RUNTIME_DIR/hctune.sock, else /run/hctune/hctune.sock)\n"
    "  --db PATH            database (default: $HCTUNE_DB, else\n"
    "                       ~/.local/state/hctune/hctune.db)\n"
    "  --kernels DIR        op manifests (default: $HCTUNE_KERNELS, else kernels-src)\n"
    "  --admin-group NAME   members may also probe, pin and unpin\n"
    "  --socket-group NAME  group of the socket (mode 0660), so its members may connect\n"
    "  --poll-ms N          how often to look for database changes (default 500)\n"
    "  --quiet              log errors and warnings only\n"
    "  --verbose            log debug lines too\n";

int cmd_daemon(int argc, char **argv) {
  hct_daemon_opts_t o = {0};
  /* Each option with a value: its name and where the value goes. */
  const struct {
    const char *name;
    const char **dst;
  } opts[] = {
      {"--socket", &o.socket_path},        {"--db", &o.db_path},
      {"--kernels", &o.kernels_dir},       {"--admin-group", &o.admin_group},
      {"--socket-group", &o.socket_group},
  };
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return HCT_EXIT_OK;
    }
    if (strcmp(a, "--quiet") == 0) {
      hct__log_level = HCT_LOG_WARN;
      continue;
    }
    if (strcmp(a, "--verbose") == 0) {
      hct__log_level = HCT_LOG_DEBUG;
      continue;
    }
    if (strcmp(a, "--poll-ms") == 0) {
      char *end;
      if (i + 1 >= argc) return hct__usage_error(argv[0], "option '%s' needs a value", a);
      long v = strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 10 || v > 3600000)
        return hct__usage_error(argv[0], "--poll-ms '%s': want 10 to 3600000", argv[i]);
      o.poll_ms = (int)v;
      continue;
    }
    size_t k;
    for (k = 0; k < HCT_ARRAY_SIZE(opts); k++)
      if (strcmp(a, opts[k].name) == 0) break;
    if (k == HCT_ARRAY_SIZE(opts)) return hct__usage_error(argv[0], "unknown option '%s'", a);
    if (i + 1 >= argc) return hct__usage_error(argv[0], "option '%s' needs a value", a);
    *opts[k].dst = argv[++i];
  }
  int rc = hct__daemon_run(&o);
  if (rc < 0) return hct__cli_fail(rc);
  return HCT_EXIT_OK;
}
