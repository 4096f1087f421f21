/*
 * log.c: one line per event on stderr, prefixed with the program name.
 * Thread-safe because each message is formatted first and written with one
 * fputs, which stdio locks.
 */
#include <stdarg.h>
#include <stdio.h>

#include "common.h"

int hct__log_level = HCT_LOG_INFO;

void hct__log(hct_log_level_t lvl, const char *fmt, ...) {
  static const char *const prefix[] = {"error: ", "warning: ", "", "debug: "};
  char line[2048];
  va_list ap;
  if ((int)lvl > hct__log_level) return;
  va_start(ap, fmt);
  int n = snprintf(line, sizeof line, "hctune: %s", prefix[lvl]);
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", line);
}
