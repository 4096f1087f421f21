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

#include "daemon.h"

/* Exit statuses, as cli/cli.h has them: 0 success, 1 failed, 2 bad usage. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

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
    "  --fleet-db PATH      a fleet file (hctune db merge) whose decisions answer for\n"
    "                       cards and models the database has none for (docs/fleet.md)\n"
    "  --quiet              log errors and warnings only\n"
    "  --verbose            log debug lines too\n";

static int usage_error(const char *cmd, const char *fmt, ...) HCT_PRINTF(2, 3);
static int usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "hctune %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see 'hctune %s --help')\n", cmd);
  return EXIT_USAGE;
}

typedef enum { O_FLAG, O_STR, O_INT } opt_kind_t;

typedef struct opt_s {
  const char *name;
  opt_kind_t kind;
  void *dst;          /* O_STR: const char **; O_INT: int *; O_FLAG: int * set to min */
  long min, max;      /* O_INT bounds; O_FLAG: the value stored */
} opt_t;

int hct__daemon_main(int argc, char **argv) {
  const char *cmd = "daemon";
  hct_daemon_opts_t o = {0};
  int quiet = 0, verbose = 0;
  const opt_t opts[] = {
      {"--socket", O_STR, &o.socket_path, 0, 0},
      {"--db", O_STR, &o.db_path, 0, 0},
      {"--kernels", O_STR, &o.kernels_dir, 0, 0},
      {"--admin-group", O_STR, &o.admin_group, 0, 0},
      {"--socket-group", O_STR, &o.socket_group, 0, 0},
      {"--poll-ms", O_INT, &o.poll_ms, 10, 3600000},
      {"--fleet-db", O_STR, &o.fleet_db, 0, 0},
      {"--quiet", O_FLAG, &quiet, 1, 0},
      {"--verbose", O_FLAG, &verbose, 1, 0},
  };
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return EXIT_OK;
    }
    const char *eq = strchr(a, '=');
    size_t nlen = eq != NULL ? (size_t)(eq - a) : strlen(a);
    const opt_t *opt = NULL;
    for (size_t k = 0; k < HCT_ARRAY_SIZE(opts); k++)
      if (strlen(opts[k].name) == nlen && strncmp(a, opts[k].name, nlen) == 0) opt = &opts[k];
    if (opt == NULL) return usage_error(cmd, "unknown option '%s'", a);
    if (opt->kind == O_FLAG) {
      if (eq != NULL) return usage_error(cmd, "option '%s' takes no value", opt->name);
      *(int *)opt->dst = (int)opt->min;
      continue;
    }
    const char *val = eq != NULL ? eq + 1 : NULL;
    if (val == NULL) {
      if (i + 1 >= argc) return usage_error(cmd, "option '%s' needs a value", a);
      val = argv[++i];
    }
    if (val[0] == '\0') return usage_error(cmd, "option '%s' needs a value, not ''", opt->name);
    if (opt->kind == O_STR) {
      *(const char **)opt->dst = val;
      continue;
    }
    char *end;
    long v = strtol(val, &end, 10);
    if (*end != '\0' || v < opt->min || v > opt->max)
      return usage_error(cmd, "%s '%s': want %ld to %ld", opt->name, val, opt->min, opt->max);
    *(int *)opt->dst = (int)v;
  }
  if (quiet) hct__log_level = HCT_LOG_WARN;
  if (verbose) hct__log_level = HCT_LOG_DEBUG;
  int rc = hct__daemon_run(&o);
  if (rc < 0) {
    hct__error_print("hctune", rc);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}
