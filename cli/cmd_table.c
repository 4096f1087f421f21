/*
 * cmd_table.c: the hctune command table and its dispatcher, which hands
 * the row's setup column to cli/setup.c before calling the command.
 *
 * To add a command: write cli/cmd_NAME.c with `int cmd_NAME(int argc,
 * char **argv)` (argv[0] is the command's name) that begins with
 * hct__cli_options() (its options through common/cmdline.c, --help, and the setup
 * in cli/setup.c), declare it in cli.h, and add a row below.  The rows are kept in
 * the order `hctune --help` prints them.  The setup column, as git's
 * RUN_SETUP: HCT_SETUP_KERNELS finds the templates folder, HCT_SETUP_DB
 * opens the results database read-only (and gives the command --db PATH),
 * each failing with one line before the command's work begins.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const hct_cmd_t commands[] = {
  {"probe", cmd_probe, 0, "compile, check and time an op's variants on a card; record the winners"},
  {"devices", cmd_devices, 0, "list the cards found and their fingerprints"},
  {"list", cmd_list, HCT_SETUP_DB, "show the recorded decisions (--faults: quarantined candidates)"},
  {"show", cmd_show, HCT_SETUP_DB, "show the trials and figures behind decisions"},
  {"report", cmd_report, HCT_SETUP_DB, "write the results as an HTML page with plots"},
  {"compile", cmd_compile, HCT_SETUP_KERNELS,
   "compile every variant for an arch, no GPU needed; print resources"},
  {"bench", cmd_bench, 0, "time chosen variants side by side"},
  {"verify-decisions", cmd_verify_decisions, HCT_SETUP_KERNELS | HCT_SETUP_DB,
   "re-time recorded decisions and report their ratios"},
  {"db", cmd_db, 0, "share results across a fleet: export, merge, import fleet files"},
  {"query", cmd_query, 0, "ask the daemon which variant to run (through libhctune)"},
  {"fleet", cmd_fleet, 0, "the live fleet on PostgreSQL: init, push trials, status"},
  {"pin", cmd_pin, 0, "tell the daemon to answer a variant ahead of the decisions (admin)"},
  {"unpin", cmd_unpin, 0, "remove pins (admin)"},
  {"status", cmd_status, 0, "the daemon's status: database, clients, limits, probes"},
  {"daemon", cmd_daemon, 0, "run the daemon in the foreground (same as hctuned)"},
  {"worker", cmd_worker, 0, "internal: check and time candidates for a probe, over a pipe"},
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
    if (strcmp(argv[0], commands[i].name) == 0) {
      hct__cli_running(commands[i].setup);
      return commands[i].fn(argc, argv);
    }
  fprintf(stderr, "hctune: '%s' is not a command (see 'hctune --help')\n", argv[0]);
  return HCT_EXIT_USAGE;
}
