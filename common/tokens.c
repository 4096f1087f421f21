/*
 * tokens.c: token counts as users and requests write them: a range "1-8"
 * (decisions, pins, queries) and a list "1-4,8" (what a probe or bench
 * covers), both bounded by the one ceiling HCT_MAX_TOKENS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

int hct__token_range(const char *s, int *lo, int *hi) {
  char *end;
  errno = 0;
  long a = strtol(s, &end, 10);
  long b = a;
  if (end == s || errno != 0) goto bad;
  if (*end == '-') {
    const char *p = end + 1;
    b = strtol(p, &end, 10);
    if (end == p || errno != 0) goto bad;
  }
  if (*end != '\0') goto bad;
  if (a < 1 || b < a || b > HCT_MAX_TOKENS)
    return hct__error(HCT_ERANGE, "token range '%s': want 1 <= lo <= hi <= %d", s,
                      HCT_MAX_TOKENS);
  *lo = (int)a;
  *hi = (int)b;
  return 0;
bad:
  return hct__error(HCT_EINVAL, "token range '%s': want a count such as 8 or a range such as 1-8",
                    s);
}

int hct__parse_token_list(const char *s, int max, uint8_t *present) {
  if (max < 1 || max > HCT_MAX_TOKENS)
    return hct__error(HCT_EINVAL, "token list: ceiling %d is outside 1..%d", max, HCT_MAX_TOKENS);
  memset(present, 0, (size_t)max + 1);
  if (s == NULL || *s == '\0') return hct__error(HCT_EINVAL, "token list is empty");
  const char *p = s;
  int count = 0;
  while (*p) {
    char *end;
    errno = 0;
    long a = strtol(p, &end, 10), b;
    if (end == p || errno) return hct__error(HCT_EINVAL, "token list '%s': '%s' is not a number", s, p);
    p = end;
    b = a;
    if (*p == '-') {
      p++;
      b = strtol(p, &end, 10);
      if (end == p) return hct__error(HCT_EINVAL, "token list '%s': range has no end", s);
      p = end;
    }
    if (a < 1 || b > max || a > b)
      return hct__error(HCT_ERANGE, "token list '%s': %ld-%ld is outside 1..%d", s, a, b, max);
    for (long t = a; t <= b; t++)
      if (!present[t]) {
        present[t] = 1;
        count++;
      }
    if (*p == ',') p++;
    else if (*p != '\0') return hct__error(HCT_EINVAL, "token list '%s': unexpected '%c'", s, *p);
  }
  return count;
}
