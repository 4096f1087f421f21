/*
 * options.c: hctuned's command line, shared by the hctuned executable
 * (daemon/main.c) and `hctune daemon` (cli/cmd_daemon.c), so that the
 * daemon's options live with the daemon.  Options are a table: a name,
 * where its value goes, and its bounds; `--opt value` and `--opt=value`
 * both work, and a usage error is one line as every hctune command writes
 * it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "daemon.h"

static const char usage[] =
    "usage: hctune daemon [options]     (or: hctuned [options])\n"
    "\n"
    "Serves the decisions of the database to engines over a Unix socket, one\n"
    "JSON request per line (docs/protocol.md).  Runs in the foreground until\n"
    "SIGTERM, SIGINT or SIGQUIT, then removes its socket; SIGHUP re-reads the\n"
    "manifests and the database, SIGUSR1 logs a status line.  Started by\n"
    "systemd's hctuned.socket, it serves the socket it is given.\n"
    "\n"
    "options:\n"
    "  --socket PATH        socket (default: $HCTUNE_SOCKET, else\n"
    "                       $XDG_RUNTIME_DIR/hctune.sock, else /run/hctune/hctune.sock)\n"
    "  --db PATH            database (default: $HCTUNE_DB, else\n"
    "                       ~/.local/state/hctune/hctune.db)\n"
    "  --kernels DIRS       op manifests, one folder or DIR:DIR... (default:\n"
    "                       $HCTUNE_KERNELS, else kernels-src)\n"
    "  --admin-group NAME   members may also probe, pin and unpin\n"
    "  --socket-group NAME  group of the socket (mode 0660), so its members may connect\n"
    "  --poll-ms N          how often to look for database changes (default 500)\n"
    "  --fleet-db PATH      a fleet file (hctune db merge) whose decisions answer for\n"
    "                       cards and models the database has none for (docs/fleet.md)\n"
    "  --fleet-url URL      a live fleet server (default $HCTUNE_FLEET_URL): its\n"
    "                       decisions for this host's card models, pulled into the\n"
    "                       database at start and on every change (docs/fleet-live.md)\n"
    "  --fleet-model KEY    a card model key to pull besides this host's cards'\n"
    "                       (repeatable; for hosts without a GPU driver)\n"
    "  --fleet-poll-ms N    pull at least this often, and retry a server that is down\n"
    "                       as often (default 30000)\n"
    "  --max-clients N      connections at once; more are refused (default 1024)\n"
    "  --max-queued MB      replies waiting for all clients together; past it the\n"
    "                       slowest readers are dropped (default 64)\n"
    "  --idle-timeout S     close a connection silent this long (default 300, 0: never)\n"
    "  --quiet              log errors and warnings only\n"
    "  --verbose            log debug lines too\n";

/* --fleet-model, repeatable: each one appended to the options' list. */
static int add_fleet_model(const char *arg, void *value) {
  hct_daemon_opts_t *o = value;
  if (o->n_fleet_models >= HCT_MAX_FLEET_MODELS)
    return hct__error(HCT_ERANGE, "at most %d card models", HCT_MAX_FLEET_MODELS);
  o->fleet_models[o->n_fleet_models++] = arg;
  return 0;
}

int hct__daemon_main(int argc, char **argv) {
  const char *cmd = "daemon";
  hct_daemon_opts_t o = {0};
  int quiet = 0, verbose = 0, idle = -1;
  const hct_option_t opts[] = {
      HCT_OPT_STRING("socket", &o.socket_path),
      HCT_OPT_STRING("db", &o.db_path),
      HCT_OPT_STRING("kernels", &o.kernels_dir),
      HCT_OPT_STRING("admin-group", &o.admin_group),
      HCT_OPT_STRING("socket-group", &o.socket_group),
      HCT_OPT_INT("poll-ms", &o.poll_ms, 10, 3600000),
      HCT_OPT_STRING("fleet-db", &o.fleet_db),
      HCT_OPT_STRING("fleet-url", &o.fleet_url),
      HCT_OPT_CALL("fleet-model", &o, add_fleet_model),
      HCT_OPT_INT("fleet-poll-ms", &o.fleet_poll_ms, 100, 3600000),
      HCT_OPT_INT("max-clients", &o.max_clients, 1, 1000000),
      HCT_OPT_INT("max-queued", &o.max_queued_mb, 1, 65536),
      HCT_OPT_INT("idle-timeout", &idle, 0, 86400 * 365),
      HCT_OPT_FLAG("quiet", &quiet),
      HCT_OPT_FLAG("verbose", &verbose),
      HCT_OPT_END,
  };
  int parsed = hct__parse_options(argc, argv, cmd, opts, usage);
  if (parsed != 0) return parsed == HCT_OPTS_HELP ? HCT_EXIT_OK : parsed;
  /* A URL in the environment (a systemd EnvironmentFile) stays out of the
   * process list, which --fleet-url does not. */
  if (o.fleet_url == NULL) o.fleet_url = getenv("HCTUNE_FLEET_URL");
  /* 0 on the command line is "never", which the options struct spells -1. */
  if (idle >= 0) o.idle_timeout_s = idle == 0 ? -1 : idle;
  if (quiet) hct__log_level = HCT_LOG_WARN;
  if (verbose) hct__log_level = HCT_LOG_DEBUG;
  int rc = hct__daemon_run(&o);
  if (rc < 0) {
    hct__error_print("hctune", rc);
    return HCT_EXIT_FAIL;
  }
  return HCT_EXIT_OK;
}
