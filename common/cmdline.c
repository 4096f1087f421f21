/*
 * cmdline.c: the one option parser of hctune's programs and commands
 * (common/cmdline.h), and their one-line usage error.  A command describes
 * its options in a table (HCT_OPT_FLAG, _STRING, _INT, _NUMBER, _CALL
 * rows) and calls hct__parse_options; the hctune commands do it through
 * hct__cli_options (cli/cmd_table.c), which adds the command table's
 * setup.  Here so that cli/ and daemon/ share it.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"

int hct__usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "hctune %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see 'hctune %s --help')\n", cmd);
  return HCT_EXIT_USAGE;
}

/* The row of opts (ending in HCT_OPT_END) named by the len bytes at
 * `name`, whole (not a prefix), or NULL. */
static const hct_option_t *find(const hct_option_t *opts, const char *name, size_t len) {
  for (const hct_option_t *o = opts; o != NULL && o->name != NULL; o++)
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) return o;
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

int hct__parse_options(int argc, char **argv, const char *cmd, const hct_option_t *opts,
                       const char *usage) {
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
    if (value != NULL && value[0] == '\0')
      return hct__usage_error(cmd, "option '--%s' needs a value, not ''", o->name);
    int rc = apply(cmd, o, value);
    if (rc != 0) return rc;
  }
  if (i < argc) return hct__usage_error(cmd, "unexpected argument '%s'", argv[i]);
  return 0;
}
