/*
 * error.c: the error list of include/hctune.h turned into names and
 * messages, and the per-thread detail message behind hct_last_error().
 */
#include <stdio.h>
#include <string.h>

#include "common.h"

#define HCT__ERR_NAME(name, msg) case HCT_E##name: return "E" #name;
#define HCT__ERR_MSG(name, msg) case HCT_E##name: return msg;

const char *hct_err_name(int err) {
  switch (err) {
    case HCT_OK: return "OK";
    HCT_ERRNO_MAP(HCT__ERR_NAME)
    default: return "EUNKNOWN";
  }
}

const char *hct_strerror(int err) {
  switch (err) {
    case HCT_OK: return "success";
    HCT_ERRNO_MAP(HCT__ERR_MSG)
    default: return "unknown error";
  }
}

int hct_err_from_name(const char *name) {
#define HCT__ERR_CMP(n, msg) if (strcmp(name, "E" #n) == 0) return HCT_E##n;
  if (name == NULL) return HCT_EINVAL;
  HCT_ERRNO_MAP(HCT__ERR_CMP)
#undef HCT__ERR_CMP
  return HCT_EINVAL;
}

/* One message per thread: the worker threads of the compile pool and the
 * loop thread of the daemon each keep their own. */
static _Thread_local char last_error[1024];

const char *hct_last_error(void) { return last_error; }

void hct__error_clear(void) { last_error[0] = '\0'; }

int hct__verror(int code, const char *fmt, va_list ap) {
  /* Through a copy: callers wrap the last message in a new one
   * (hct__error(rc, "op '%s': %s", name, hct_last_error())), and
   * vsnprintf into the buffer it reads from garbles it (overlapping
   * arguments are undefined; glibc kept fragments of the message before). */
  char msg[sizeof last_error];
  vsnprintf(msg, sizeof msg, fmt, ap);
  memcpy(last_error, msg, sizeof last_error);
  /* Keep it one line: the CLI prints it as is. */
  for (char *p = last_error; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  return code;
}

int hct__error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hct__verror(code, fmt, ap);
  va_end(ap);
  return code;
}

void hct__error_print(const char *prog, int code) {
  if (last_error[0] != '\0')
    fprintf(stderr, "%s: %s\n", prog, last_error);
  else
    fprintf(stderr, "%s: %s\n", prog, hct_strerror(code));
}

int hct__error_prefixed(int code, const char *prefix) {
  char why[1024];
  snprintf(why, sizeof why, "%s", hct_last_error());
  return hct__error(code, "%s: %s", prefix, why);
}

int hct__code_map(const hct_code_map_t *map, size_t n, int native, int otherwise) {
  for (size_t i = 0; i < n; i++)
    if (map[i].native == native) return map[i].code;
  return otherwise;
}
