/*
 * stale.c: what `hctune probe --stale` re-probes: of the token counts asked
 * for, those where this card has no decision of a class, or has one whose
 * software key (jit/softkey.c) is not what this host would compile now.
 *
 * A card without a decision of its own at T, whose model has decisions
 * there from other cards, is "stale" when none of those keys is current
 * here (the model was seen, but not with this software), "missing"
 * otherwise; both are re-probed.  Loop thread only (it reads the DB).
 */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "tuner.h"

/* Appends one printf-formatted line to the report. */
static void say(char *buf, size_t len, size_t *off, const char *fmt, ...) HCT_PRINTF(4, 5);
static void say(char *buf, size_t len, size_t *off, const char *fmt, ...) {
  if (*off >= len) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *off, len - *off, fmt, ap);
  va_end(ap);
  if (n > 0) *off = HCT_MIN(len, *off + (size_t)n);
}

/* The reason T needs a probe for class `parity`, or NULL when this card's
 * decision there is current. */
static const char *needs_probe(const hct_db_decision_t *d, int nd, const hct_op_t *op,
                               const hct_device_t *dev, const char *model, const char *parity,
                               int T, char *why, size_t len) {
  const hct_db_decision_t *own = NULL;
  int fleet = 0, fleet_current = 0;
  char fleet_why[256] = "";
  for (int i = 0; i < nd; i++) {
    const hct_db_decision_t *x = &d[i];
    if (strcmp(x->op, op->name) != 0 || strcmp(x->parity, parity) != 0 || T < x->tmin ||
        T > x->tmax)
      continue;
    if (strcmp(x->keys.uuid, dev->uuid) == 0) {
      own = x;
    } else if (strcmp(x->keys.model_key, model) == 0 && !fleet_current) {
      fleet = 1;
      char w[256];
      if (hct__softkey_check(op, x->variant, x->params, dev->backend, dev->arch,
                             dev->driver_version, x->software_json, w, sizeof w) == 0)
        fleet_current = 1;
      else if (fleet_why[0] == '\0')
        hct__strlcpy(fleet_why, w, sizeof fleet_why);
    }
  }
  if (own != NULL) {
    char w[256];
    if (hct__softkey_check(op, own->variant, own->params, dev->backend, dev->arch,
                           dev->driver_version, own->software_json, w, sizeof w) == 0)
      return NULL;
    /* Truncation only shortens the report line. */
    size_t n = (size_t)snprintf(why, len, "stale: %s %s: ", own->variant, own->params);
    if (n < len) hct__strlcpy(why + n, w, len - n);
    return why;
  }
  if (fleet && !fleet_current)
    snprintf(why, len, "stale: no decision of this card, and this model's are not current (%s)",
             fleet_why);
  else
    snprintf(why, len, "missing");
  return why;
}

int hct__stale_tokens(hct_db_t *db, const hct_op_t *op, const hct_device_t *dev,
                      const hct_tokens_t *asked, hct_tokens_t *out, char *report, size_t len) {
  memset(out, 0, sizeof *out);
  size_t off = 0;
  if (len > 0) report[0] = '\0';
  hct_db_decision_t *d = NULL;
  int nd = 0;
  int rc = hct__db_decisions_list(db, &d, &nd);
  if (rc != 0) return rc;
  char model[256];
  hct__device_model_key(dev, model, sizeof model);
  static const hct_parity_t classes[] = {HCT_PARITY_BITWISE, HCT_PARITY_KL};
  for (int k = 0; rc == 0 && k < asked->n; k++) {
    const int T = asked->t[k];
    int need = 0;
    for (size_t c = 0; c < HCT_ARRAY_SIZE(classes); c++) {
      char why[512];
      const char *cls = hct__parity_name(classes[c]);
      if (needs_probe(d, nd, op, dev, model, cls, T, why, sizeof why) == NULL) continue;
      need = 1;
      say(report, len, &off, "T=%d %s: %s\n", T, cls, why);
    }
    if (need) rc = hct__tokens_add(out, T);
  }
  free(d);
  return rc;
}
