/*
 * softkeys.c: whether a decision's software key is what this host would
 * compile now (jit/softkey.c's check, with this host's cards and compilers
 * asked once), remembered per snapshot.  The answer policy
 * (daemon/answer.c) serves a stale decision's default instead; the
 * snapshot (daemon/snapshot.c) asks the host before the first request.
 * Loop thread only.
 */
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include "daemon.h"

/*
 * Whether decision `dec`, answered for card `device`, is stale here: its
 * software key is not the one this host would compile now (the card's
 * backend and arch from its fingerprint, else from the model key; its
 * driver from this host's cards, asked once).  A decision recorded before
 * software keys (schema 1, no key) is served as it was then; `hctune probe
 * --stale` replaces it.  The answer is kept per snapshot: the template
 * files are read once per reload (KNOWN-GAP: a template edited under a
 * running daemon counts from the next reload).
 */
static struct {
  const hct_index_t *ix;
  int n;
  struct {
    uint64_t key;
    int stale;
    char why[256];
  } e[512];
  int live_n;                    /* this host's cards; -1 until asked */
  hct_device_t live[16];
} keys_seen = {NULL, 0, {{0, 0, ""}}, -1, {{0}}};

void hct__softkeys_prepare(hct_daemon_t *d) {
  (void)d;
  if (keys_seen.live_n >= 0) return;
  /* Asked before the first request, not during it: starting a driver
   * (cuInit) and loading the compiler take longer than a client waits. */
  keys_seen.live_n = hct__devices(keys_seen.live, (int)HCT_ARRAY_SIZE(keys_seen.live));
  if (keys_seen.live_n < 0) keys_seen.live_n = 0; /* no driver here: drivers not compared */
  char ver[64];
  for (int k = 0; k < HCT_BACKEND_COUNT; k++) hct__compiler_version((hct_backend_kind_t)k, ver, sizeof ver);
  hct__error_clear();
}

int hct__softkeys_stale(hct_daemon_t *d, const hct_db_decision_t *dec, const char *device, char *why,
                     size_t len) {
  if (dec->software_json[0] == '\0') return 0;
  if (keys_seen.ix != d->ix) {
    keys_seen.ix = d->ix;
    keys_seen.n = 0;
  }
  char id[600];
  int n = snprintf(id, sizeof id, "%s\x1f%s\x1f%s\x1f%s\x1f%d\x1f%s", device ? device : "",
                   dec->keys.uuid, dec->op, dec->parity, dec->tmin, dec->software_key);
  uint64_t key = XXH3_64bits(id, n > 0 && (size_t)n < sizeof id ? (size_t)n : sizeof id - 1);
  for (int i = 0; i < keys_seen.n; i++)
    if (keys_seen.e[i].key == key) {
      hct__strlcpy(why, keys_seen.e[i].why, len);
      return keys_seen.e[i].stale;
    }
  hct__softkeys_prepare(d);
  const char *card = device != NULL ? device : dec->keys.uuid;
  const hct_db_device_t *row = hct__index_device(d->ix, card);
  if (row == NULL) row = hct__index_device(d->ix, dec->keys.uuid);
  hct_backend_kind_t backend = HCT_BACKEND_CUDA;
  char arch[64] = "";
  if (row == NULL || hct__softkey_card(row->fingerprint_json, &backend, arch, sizeof arch) != 0) {
    /* "vendor|name|arch|SMs|GiB" */
    const char *m = dec->keys.model_key, *a = strchr(m, '|');
    a = a ? strchr(a + 1, '|') : NULL;
    if (a != NULL) snprintf(arch, sizeof arch, "%.*s", (int)strcspn(a + 1, "|"), a + 1);
    backend = strncmp(m, "amd|", 4) == 0 ? HCT_BACKEND_HIP : HCT_BACKEND_CUDA;
  }
  const char *driver = NULL;
  for (int i = 0; i < keys_seen.live_n; i++)
    if (strcmp(keys_seen.live[i].uuid, card) == 0) driver = keys_seen.live[i].driver_version;
  const hct_op_t *op = hct__op_get(d, dec->op);
  int stale = hct__softkey_check(op, dec->variant, dec->params, backend, arch, driver,
                                 dec->software_json, why, len) != 0;
  hct__error_clear();
  if (keys_seen.n < (int)HCT_ARRAY_SIZE(keys_seen.e)) {
    keys_seen.e[keys_seen.n].key = key;
    keys_seen.e[keys_seen.n].stale = stale;
    hct__strlcpy(keys_seen.e[keys_seen.n].why, stale ? why : "", sizeof keys_seen.e[0].why);
    keys_seen.n++;
  }
  return stale;
}
