/*
 * names.c: the names hctune writes on the wire and in the DB for two small
 * vocabularies, each written once: the parity class of a variant
 * ("baseline", "bitwise", "kl": manifests, decisions, replies) and the
 * source of an answer ("probe", "fleet", "pin", "env", "default": replies
 * and hct_choice_t).  libhctune.so links this file beside common/error.c
 * (Makefile CLIENT_SRC), so the daemon and the client read and write the
 * same table.
 */
#include <string.h>

#include "common.h"

static const char *const parity_names[] = {
    [HCT_PARITY_BASELINE] = "baseline",
    [HCT_PARITY_BITWISE] = "bitwise",
    [HCT_PARITY_KL] = "kl",
};

static const char *const source_names[] = {
    [HCT_SOURCE_PROBE] = "probe", [HCT_SOURCE_FLEET] = "fleet", [HCT_SOURCE_PIN] = "pin",
    [HCT_SOURCE_ENV] = "env",     [HCT_SOURCE_DEFAULT] = "default",
};

const char *hct__parity_name(hct_parity_t p) {
  return (unsigned)p < HCT_ARRAY_SIZE(parity_names) ? parity_names[p] : "unknown";
}

int hct__parity_from_name(const char *s, hct_parity_t *out) {
  for (size_t i = 0; s != NULL && i < HCT_ARRAY_SIZE(parity_names); i++)
    if (strcmp(parity_names[i], s) == 0) {
      *out = (hct_parity_t)i;
      return 0;
    }
  return hct__error(HCT_EINVAL, "parity class '%.32s': want 'baseline', 'bitwise' or 'kl'",
                    s != NULL ? s : "(none)");
}

const char *hct__parity_family(const char *s) {
  size_t n = sizeof HCT_FAMILY_PREFIX - 1;
  return s != NULL && strncmp(s, HCT_FAMILY_PREFIX, n) == 0 ? s + n : NULL;
}

/* The characters of a variant's name in a family parity: what manifests
 * name their variants with, nothing that needs quoting anywhere. */
static int name_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == '-';
}

int hct__parity_asked_ok(const char *s) {
  hct_parity_t cls;
  const char *head = hct__parity_family(s);
  if (head == NULL) {
    if (s != NULL && hct__parity_from_name(s, &cls) == 0 && cls != HCT_PARITY_BASELINE) return 0;
    return hct__error(HCT_EINVAL, "parity '%.48s': want 'bitwise', 'kl' or 'bits:<variant>'",
                      s != NULL ? s : "(none)");
  }
  size_t n = 0;
  while (head[n] != '\0' && name_char(head[n])) n++;
  if (n == 0 || head[n] != '\0' || n > 31)
    return hct__error(HCT_EINVAL,
                      "parity '%.48s': a family is 'bits:' and a variant's name (1 to 31 "
                      "letters, digits, '_', '.' or '-')",
                      s);
  return 0;
}

const char *hct_source_name(hct_source_t s) {
  return (unsigned)s < HCT_ARRAY_SIZE(source_names) ? source_names[s] : "unknown";
}

int hct__source_from_name(const char *s, hct_source_t *out) {
  for (size_t i = 0; s != NULL && i < HCT_ARRAY_SIZE(source_names); i++)
    if (strcmp(source_names[i], s) == 0) {
      *out = (hct_source_t)i;
      return 0;
    }
  return hct__error(HCT_EPROTO,
                    "answer source '%.32s': want 'probe', 'fleet', 'pin', 'env' or 'default'",
                    s != NULL ? s : "(none)");
}
