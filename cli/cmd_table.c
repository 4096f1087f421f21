/*
 * cmd_table.c: the hctune command table and its dispatcher.
 *
 * To add a command: write cli/cmd_NAME.c with `int cmd_NAME(int argc,
 * char **argv)` (argv[0] is the command's name; handle --help), declare it
 * in cli.h, and add a row below.  The rows are kept in the order `hctune
 * --help` prints them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const hct_cmd_t commands[] = {
  {"probe", cmd_probe, "compile, check and time an op's variants on a card; record the winners"},
  {"devices", cmd_devices, "list the cards found and their fingerprints"},
  {"list", cmd_list, "show the recorded decisions (--faults: quarantined candidates)"},
  {"show", cmd_show, "show the trials and figures behind decisions"},
  {"report", cmd_report, "write the results as an HTML page with plots"},
  {"compile", cmd_compile, "compile every variant for an arch, no GPU needed; print resources"},
  {"bench", cmd_bench, "time chosen variants side by side"},
  {"verify-decisions", cmd_verify_decisions, "re-time recorded decisions and report their ratios"},
  {"db", cmd_db, "share results across a fleet: export, merge, import fleet files"},
  {"query", cmd_query, "ask the daemon which variant to run (through libhctune)"},
  {"daemon", cmd_daemon, "run the daemon in the foreground (same as hctuned)"},
  {"worker", cmd_worker, "internal: check and time candidates for a probe, over a pipe"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: hctune <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < HCT_ARRAY_SIZE(commands); i++)
    fprintf(f, "  %-17s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n'hctune <command> --help' describes a command.\n"
             "Environment: HCTUNE_DB (database path), HCTUNE_KERNELS (templates),\n"
             "HCTUNE_SOCKET (daemon socket).\n");
}

int hct__cli_main(int argc, char **argv) {
  if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
      strcmp(argv[0], "help") == 0) {
    usage(argc < 1 ? stderr : stdout);
    return argc < 1 ? HCT_EXIT_USAGE : HCT_EXIT_OK;
  }
  if (strcmp(argv[0], "--version") == 0 || strcmp(argv[0], "version") == 0) {
    printf("hctune %s\n", HCT_VERSION_STRING);
    return HCT_EXIT_OK;
  }
  for (size_t i = 0; i < HCT_ARRAY_SIZE(commands); i++)
    if (strcmp(argv[0], commands[i].name) == 0) return commands[i].fn(argc, argv);
  fprintf(stderr, "hctune: '%s' is not a command (see 'hctune --help')\n", argv[0]);
  return HCT_EXIT_USAGE;
}

int hct__usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "hctune %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see 'hctune %s --help')\n", cmd);
  return HCT_EXIT_USAGE;
}

int hct__cli_fail(int code) {
  hct__error_print("hctune", code);
  return HCT_EXIT_FAIL;
}

int hct__cli_open_db(const char *db_path, char *path, size_t len, hct_db_t **db) {
  if (db_path != NULL)
    hct__strlcpy(path, db_path, len);
  else {
    int rc = hct__default_db_path(path, len, 0);
    if (rc != 0) return rc;
  }
  return hct__db_open(path, HCT_DB_NOCREATE | HCT_DB_READONLY, db);
}
