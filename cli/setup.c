/*
 * setup.c: what every command does before its work: its options parsed
 * with the setup its row of the command table asks for (HCT_SETUP_KERNELS
 * finds the templates folder, HCT_SETUP_DB opens the results database
 * read-only and gives the command --db PATH), each failing with one line;
 * and the failure line itself.
 *
 * The dispatcher (cli/cmd_table.c) hands the running row's setup column
 * down (hct__cli_running) before calling the command, so the commands and
 * this file call down only: nothing here reads the table, which names the
 * commands.  One command runs per process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The setup column of the command being run (hct__cli_main sets it). */
static unsigned running_setup;

void hct__cli_running(unsigned setup) { running_setup = setup; }

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

int hct__cli_setup(unsigned flags, const char *db_path, hct_cli_env_t *env) {
  int rc;
  if ((flags & HCT_SETUP_KERNELS) && (rc = hct__kernels_dir(env->kernels, sizeof env->kernels)) != 0)
    return hct__cli_fail(rc);
  if ((flags & HCT_SETUP_DB) &&
      (rc = hct__cli_open_db(db_path, env->db_path, sizeof env->db_path, &env->db)) != 0)
    return hct__cli_fail(rc);
  return 0;
}

int hct__cli_options(int argc, char **argv, const hct_option_t *opts, const char *usage,
                     hct_cli_env_t *env) {
  const char *cmd = argv[0], *db_path = NULL;
  const unsigned setup = running_setup;
  if (env != NULL) memset(env, 0, sizeof *env);
  if (setup != 0 && env == NULL)
    return hct__usage_error(cmd, "internal: the command's setup has no place");
  /* An HCT_SETUP_DB command takes --db PATH: the rows, and that one. */
  size_t n = 0;
  while (opts[n].name != NULL) n++;
  hct_option_t *all = calloc(n + 2, sizeof *all);
  if (all == NULL) return hct__cli_fail(hct__error(HCT_ENOMEM, "out of memory"));
  memcpy(all, opts, n * sizeof *all);
  if (setup & HCT_SETUP_DB) all[n] = (hct_option_t)HCT_OPT_STRING("db", &db_path);
  int rc = hct__parse_options(argc, argv, cmd, all, usage);
  free(all);
  if (rc != 0 || setup == 0) return rc;
  return hct__cli_setup(setup, db_path, env);
}
