/*
 * cmdline.h: the command line of every hctune program and command (the
 * hctune commands through hct__cli_options, hctuned too): the exit statuses,
 * the one-line usage error, and the option parser (common/cmdline.c), in
 * common/ so that cli/ and daemon/ share it without one including the
 * other.
 */
#ifndef HCT_CMDLINE_H
#define HCT_CMDLINE_H

#include "common.h"

/* Exit statuses: 0 success, 1 the work failed, 2 bad usage. */
enum { HCT_EXIT_OK = 0, HCT_EXIT_FAIL = 1, HCT_EXIT_USAGE = 2 };

/*
 * Prints "hctune <cmd>: <message> (see 'hctune <cmd> --help')" for a usage
 * error and returns HCT_EXIT_USAGE, so commands write `return
 * hct__usage_error("probe", "unknown option '%s'", arg);`.
 */
int hct__usage_error(const char *cmd, const char *fmt, ...) HCT_PRINTF(2, 3);

/*
 * A command's options: a table of rows made with the macros below and
 * ending in HCT_OPT_END, each a long name (without "--") and where its
 * value goes.  Every option takes `--name value` and `--name=value`.
 */
typedef enum {
  HCT_OPTK_FLAG,   /* no value: *(int *)value = 1 */
  HCT_OPTK_STRING, /* *(const char **)value = the argument */
  HCT_OPTK_INT,    /* a whole number from min to max: *(int *)value */
  HCT_OPTK_NUMBER, /* a number from min to max: *(double *)value */
  HCT_OPTK_CALL,   /* call(argument, value): 0, or a negative code with the reason set */
} hct_opt_kind_t;
typedef struct hct_option_s {
  const char *name;
  hct_opt_kind_t kind;
  void *value;
  double min, max; /* HCT_OPTK_INT, HCT_OPTK_NUMBER */
  int (*call)(const char *arg, void *value);
} hct_option_t;
/* The destination's type is checked (_Generic): a flag or whole number
 * goes into an int, a string into a const char *, a number into a double. */
#define HCT_OPT_FLAG(n, dst) {.name = (n), .kind = HCT_OPTK_FLAG, .value = _Generic((dst), int *: (dst))}
#define HCT_OPT_STRING(n, dst) \
  {.name = (n), .kind = HCT_OPTK_STRING, .value = _Generic((dst), const char **: (dst))}
#define HCT_OPT_INT(n, dst, lo, hi) \
  {.name = (n), .kind = HCT_OPTK_INT, .value = _Generic((dst), int *: (dst)), .min = (lo), .max = (hi)}
#define HCT_OPT_NUMBER(n, dst, lo, hi)                                                   \
  {.name = (n), .kind = HCT_OPTK_NUMBER, .value = _Generic((dst), double *: (dst)), .min = (lo), \
   .max = (hi)}
#define HCT_OPT_CALL(n, dst, fn) {.name = (n), .kind = HCT_OPTK_CALL, .value = (dst), .call = (fn)}
#define HCT_OPT_END {.name = NULL}

/* hct__parse_options() printed the usage for --help: the command returns
 * HCT_EXIT_OK. */
#define HCT_OPTS_HELP (-1)

/*
 * Parses argv[1..] of command `cmd` against opts: `--name value`,
 * `--name=value`, --help and -h (prints `usage` on stdout), names matched
 * whole (a prefix is not an abbreviation, so a new option never changes
 * what an old command line means), "--" ending the options.  Every bad
 * argument is one line through hct__usage_error:
 *   unknown option '--bogus'          option '--db' needs a value
 *   option '--json' takes no value    unexpected argument 'extra'
 *   option '--db' needs a value, not ''
 *   --jobs '0': want a whole number from 1 to 256
 *   --backend 'metal': <the callback's reason>
 * Returns 0, HCT_OPTS_HELP, or HCT_EXIT_USAGE.
 */
int hct__parse_options(int argc, char **argv, const char *cmd, const hct_option_t *opts,
                       const char *usage);

#endif /* HCT_CMDLINE_H */
