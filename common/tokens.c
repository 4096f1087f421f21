/*
 * tokens.c: token counts as users and requests write them: a range "1-8"
 * (decisions, pins, queries) and a list "1-4,8" (what a probe or bench
 * covers) into a token set, both bounded by the one ceiling HCT_MAX_TOKENS.
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

int hct__tokens_index(const hct_tokens_t *set, int T) {
  int lo = 0, hi = set->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (set->t[mid] == T) return mid;
    if (set->t[mid] < T) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

int hct__tokens_add(hct_tokens_t *set, int T) {
  if (T < 1 || T > HCT_MAX_TOKENS)
    return hct__error(HCT_ERANGE, "token count %d is outside 1..%d", T, HCT_MAX_TOKENS);
  if (hct__tokens_index(set, T) >= 0) return 0;
  if (set->n == HCT_MAX_TOKEN_LIST)
    return hct__error(HCT_ERANGE, "more than %d token counts in one list", HCT_MAX_TOKEN_LIST);
  int i = set->n;
  while (i > 0 && set->t[i - 1] > T) {
    set->t[i] = set->t[i - 1];
    i--;
  }
  set->t[i] = T;
  set->n++;
  return 0;
}

int hct__parse_token_list(const char *s, hct_tokens_t *out) {
  memset(out, 0, sizeof *out);
  if (s == NULL || *s == '\0') return hct__error(HCT_EINVAL, "token list is empty");
  const char *p = s;
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
    if (a < 1 || b > HCT_MAX_TOKENS || a > b)
      return hct__error(HCT_ERANGE, "token list '%s': %ld-%ld is outside 1..%d", s, a, b, HCT_MAX_TOKENS);
    if (b - a >= HCT_MAX_TOKEN_LIST)
      return hct__error(HCT_ERANGE, "token list '%s': more than %d token counts", s, HCT_MAX_TOKEN_LIST);
    for (long t = a; t <= b; t++)
      if (hct__tokens_add(out, (int)t) != 0)
        return hct__error(HCT_ERANGE, "token list '%s': more than %d token counts", s, HCT_MAX_TOKEN_LIST);
    if (*p == ',') p++;
    else if (*p != '\0') return hct__error(HCT_EINVAL, "token list '%s': unexpected '%c'", s, *p);
  }
  return out->n;
}
