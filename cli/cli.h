/*
 * cli.h: the private header of cli/: the hctune command table and what the
 * commands share.  One file per command (cli/cmd_probe.c ...), each
 * exporting `int cmd_NAME(int argc, char **argv)` that returns the process
 * exit status and prints its own errors as one line on stderr.
 */
#ifndef HCT_CLI_H
#define HCT_CLI_H

#include "common.h"
#include "db.h"
#include "cmdline.h"
#include "stats.h"

/*
 * What a command needs before its work, done by hct__cli_options() after
 * its options are parsed (the command table's setup column, as git's
 * RUN_SETUP): HCT_SETUP_KERNELS finds the templates folder
 * (hct__kernels_dir), HCT_SETUP_DB opens the results database read-only
 * (the command then takes --db PATH; default $HCTUNE_DB ...).
 */
enum { HCT_SETUP_KERNELS = 1u << 0, HCT_SETUP_DB = 1u << 1 };

typedef struct hct_cmd_s {
  const char *name;
  int (*fn)(int argc, char **argv);
  unsigned setup; /* HCT_SETUP_ flags */
  const char *summary;
} hct_cmd_t;

/* What the setup gives a command. */
typedef struct hct_cli_env_s {
  hct_db_t *db;        /* HCT_SETUP_DB: open read-only; the command closes it */
  char db_path[4096];  /* its path, for messages */
  char kernels[4096];  /* HCT_SETUP_KERNELS: the templates folder */
} hct_cli_env_t;

/*
 * hct__parse_options (common/cmdline.h) for the command argv[0], then the
 * setup its row of the command table names, into *env (may be NULL for a
 * command without setup); an HCT_SETUP_DB command also takes --db PATH.
 * Returns 0; HCT_OPTS_HELP after printing `usage` on stdout (--help, -h);
 * HCT_EXIT_USAGE after one line on stderr for a bad argument;
 * HCT_EXIT_FAIL after one line when the setup failed.  So a command
 * begins:
 *   int rc = hct__cli_options(argc, argv, opts, usage, &env);
 *   if (rc != 0) return rc == HCT_OPTS_HELP ? HCT_EXIT_OK : rc;
 */
int hct__cli_options(int argc, char **argv, const hct_option_t *opts, const char *usage,
                     hct_cli_env_t *env);
/* The dispatcher (cli/cmd_table.c) names the setup column of the command
 * it is about to run; hct__cli_options then does that setup. */
void hct__cli_running(unsigned setup);
/* Runs that setup: db_path is --db's value (NULL: the default). */
int hct__cli_setup(unsigned flags, const char *db_path, hct_cli_env_t *env);


int cmd_probe(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_verify_decisions(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_fleet(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_pin(int argc, char **argv);
int cmd_unpin(int argc, char **argv);
int cmd_status(int argc, char **argv);

/* Runs the command named argv[0] from the table; 2 for an unknown one. */
int hct__cli_main(int argc, char **argv);

/* Prints the last error of this thread (or the code's text) and returns
 * HCT_EXIT_FAIL. */
int hct__cli_fail(int code);

/* Opens an existing results database read-only: `db_path`, or the default
 * one ($HCTUNE_DB, ...) when NULL; the path used goes to path[len] for
 * messages.  An error code with the thread's message set. */
int hct__cli_open_db(const char *db_path, char *path, size_t len, hct_db_t **db);

/*
 * An aligned text table (cli/cmd_list.c), for any command that prints rows:
 * columns sized to their widest cell, two spaces apart, a header line.
 * align holds 'l' or 'r' per column (NULL: all left).
 */
typedef struct hct_table_s {
  int ncols, nrows, cap;
  const char *const *head;
  const char *align;
  char **cells; /* nrows * ncols, malloc'd */
} hct_table_t;
void hct__table_init(hct_table_t *t, int ncols, const char *const *head, const char *align);
/* Appends a row of ncols cells (copied; NULL prints as "-"). */
int hct__table_add(hct_table_t *t, const char *const *cells);
void hct__table_print(const hct_table_t *t, FILE *f);
void hct__table_free(hct_table_t *t);

/*
 * The rows a probe reports through its on_timed callback (cli/cmd_bench.c),
 * for the commands that re-time and print (bench, verify-decisions): pass
 * hct__timed_rows_add as on_timed and a hct_timed_rows_t as its argument.
 * The array grows as needed; when it cannot, `oom` is set and later rows
 * are dropped, so the caller fails instead of printing a partial table.
 */
typedef struct hct_timed_row_s {
  int T;
  char variant[32];
  char params[256];
  hct_summary_t s;
  int pruned;
} hct_timed_row_t;
typedef struct hct_timed_rows_s {
  hct_timed_row_t *r;
  int n, cap, oom;
} hct_timed_rows_t;
void hct__timed_rows_add(void *rows, int T, const char *variant, const char *params,
                         const hct_summary_t *s, int pruned);
void hct__timed_rows_free(hct_timed_rows_t *rows);

#endif /* HCT_CLI_H */
