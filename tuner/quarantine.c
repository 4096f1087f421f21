/*
 * quarantine.c: the quarantine policy: which errors are a candidate's fault,
 * for which token counts a fault holds, and whether the probe skips a
 * candidate that an earlier probe recorded a fault for (db/results.c keeps
 * the faults table; this file decides what goes in and what it means).
 */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "tuner.h"

/* Error codes to fault reasons; codes not here are not the candidate's
 * fault and are never quarantined. */
static const struct {
  int code;
  const char *reason;
} reasons[] = {
    {HCT_ECOMPILE, "compile"},   {HCT_ETEMPLATE, "compile"}, {HCT_ELAUNCH, "launch"},
    {HCT_EFAULT, "fault"},       {HCT_EGPU, "fault"},        {HCT_EWORKER, "fault"},
    {HCT_EPROTO, "fault"},       {HCT_EHANG, "hang"},        {HCT_EPARITY, "parity"},
    {HCT_EUNWRITTEN, "unwritten"}, {HCT_ETIMEDOUT, "timeout"},
};

const char *hct__fault_reason(int code) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(reasons); i++)
    if (reasons[i].code == code) return reasons[i].reason;
  return NULL;
}

/* Which token counts a reason holds for: its own T and up ("timeout": the
 * work grows with T), or every count. */
static int reason_from_T(const char *reason) { return strcmp(reason, "timeout") == 0; }

int hct__quarantine_add(hct_db_t *db, const hct_qcand_t *c, int tokens, const char *reason,
                        const char *log) {
  hct_db_fault_t f;
  memset(&f, 0, sizeof f);
  f.keys = *c->keys;
  hct__strlcpy(f.op, c->op, sizeof f.op);
  hct__strlcpy(f.variant, c->variant, sizeof f.variant);
  hct__strlcpy(f.params, c->params ? c->params : "", sizeof f.params);
  hct__strlcpy(f.template_hash, c->template_hash, sizeof f.template_hash);
  hct__strlcpy(f.reason, reason, sizeof f.reason);
  f.tokens = reason_from_T(reason) ? tokens : 0;
  char *text = NULL;
  if (!reason_from_T(reason) && tokens > 0) {
    text = hct__asprintf("at T=%d: %s", tokens, log ? log : reason);
    if (text == NULL) return hct__error(HCT_ENOMEM, "out of memory recording a fault");
    f.log = text;
  } else {
    f.log = (char *)log;
  }
  int rc = hct__db_fault_add(db, &f);
  free(text);
  return rc;
}

int hct__quarantine_skip(hct_db_t *db, const hct_qcand_t *c, int tokens, int retry_quarantined) {
  if (retry_quarantined) return 0;
  int q = hct__db_fault_check(db, c->keys, c->op, c->variant, c->params ? c->params : "",
                              c->template_hash, tokens);
  return q < 0 ? q : q != 0;
}
