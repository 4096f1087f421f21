/*
 * options.c: the one option parser of every hctune command, so that all of
 * them take `--opt value` and `--opt=value`, answer --help (and -h) with
 * their usage text, and word a bad argument the same way (one line through
 * hct__usage_error, exit status 2):
 *
 *   unknown option '--bogus'          option '--db' needs a value
 *   option '--json' takes no value    unexpected argument 'extra'
 *   --jobs '0': want a whole number from 1 to 256
 *   --tokens '0': <the callback's reason>
 *
 * A command describes its options in a table (cli.h: HCT_OPT_FLAG,
 * HCT_OPT_STRING, HCT_OPT_INT, HCT_OPT_NUMBER, HCT_OPT_CALL rows) and
 * calls hct__cli_options(), which parses, then runs the setup the command
 * table names for the command (open the database, find the kernels: as
 * git's RUN_SETUP), so no command repeats either.  Names are matched
 * whole: a prefix is not an abbreviation, so adding an option never
 * changes what an old command line means.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The --db option that HCT_SETUP_DB gives a command. */
static const hct_option_t db_option = {.name = "db", .kind = HCT_OPTK_STRING};

/* Is `opt` the option named by the len bytes at `name` (whole, not a
 * prefix)? */
static int named(const hct_option_t *opt, const char *name, size_t len) {
  return strlen(opt->name) == len && strncmp(opt->name, name, len) == 0;
}

/* The row of opts (ending in HCT_OPT_END) with that name, or NULL. */
static const hct_option_t *find(const hct_option_t *opts, const char *name, size_t len) {
  for (const hct_option_t *o = opts; o != NULL && o->name != NULL; o++)
    if (named(o, name, len)) return o;
  return NULL;
}

/* A whole number (HCT_OPTK_INT) or any number (HCT_OPTK_NUMBER) in the
 * option's range, or the usage error. */
static int parse_number(const char *cmd, const hct_option_t *o, const char *value) {
  char *end;
  errno = 0;
  double v = o->kind == HCT_OPTK_INT ? (double)strtoll(value, &end, 10) : strtod(value, &end);
  if (end == value || *end != '\0' || errno != 0 || isnan(v) || v < o->min || v > o->max)
    return hct__usage_error(cmd, "--%s '%s': want %s from %.15g to %.15g", o->name, value,
                            o->kind == HCT_OPTK_INT ? "a whole number" : "a number", o->min,
                            o->max);
  if (o->kind == HCT_OPTK_INT)
    *(int *)o->value = (int)v;
  else
    *(double *)o->value = v;
  return 0;
}

/* Stores one option's value (NULL for a flag). */
static int apply(const char *cmd, const hct_option_t *o, const char *value) {
  switch (o->kind) {
    case HCT_OPTK_FLAG: *(int *)o->value = 1; return 0;
    case HCT_OPTK_STRING: *(const char **)o->value = value; return 0;
    case HCT_OPTK_INT:
    case HCT_OPTK_NUMBER: return parse_number(cmd, o, value);
    case HCT_OPTK_CALL:
      if (o->call(value, o->value) == 0) return 0;
      return hct__usage_error(cmd, "--%s '%s': %s", o->name, value, hct_last_error());
  }
  return hct__usage_error(cmd, "--%s: option of unknown kind %d", o->name, (int)o->kind);
}

int hct__cli_options(int argc, char **argv, const hct_option_t *opts, const char *usage,
                     hct_cli_env_t *env) {
  const char *cmd = argv[0];
  const unsigned setup = hct__cli_setup_flags(cmd);
  const char *db_path = NULL;
  hct_option_t db = db_option;
  db.value = &db_path;
  if (env != NULL) memset(env, 0, sizeof *env);
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return HCT_OPTS_HELP;
    }
    if (a[0] == '-' && a[1] != '-' && a[1] != '\0')
      return hct__usage_error(cmd, "unknown option '%s'", a);
    if (strncmp(a, "--", 2) != 0) break;
    const char *name = a + 2, *eq = strchr(name, '=');
    const size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const hct_option_t *o = find(opts, name, len);
    if (o == NULL && (setup & HCT_SETUP_DB) && named(&db, name, len)) o = &db;
    if (o == NULL) return hct__usage_error(cmd, "unknown option '--%.*s'", (int)len, name);
    const char *value = NULL;
    if (o->kind == HCT_OPTK_FLAG) {
      if (eq) return hct__usage_error(cmd, "option '--%s' takes no value", o->name);
    } else if (eq) {
      value = eq + 1;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return hct__usage_error(cmd, "option '--%s' needs a value", o->name);
    }
    int rc = apply(cmd, o, value);
    if (rc != 0) return rc;
  }
  if (i < argc) return hct__usage_error(cmd, "unexpected argument '%s'", argv[i]);
  if (setup == 0) return 0;
  if (env == NULL) return hct__usage_error(cmd, "internal: the command's setup has no place");
  return hct__cli_setup(setup, db_path, env);
}
