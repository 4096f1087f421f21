/*
 * fingerprint.c: a card's fingerprint as JSON, the one rendering of a
 * hct_device_t: what `hctune devices --json` prints and what the probe
 * stores in the devices table (db/results.c), so the two never disagree on
 * which fields identify a card.  Any thread.
 */
#include <jansson.h>

#include "jit.h"

json_t *hct__device_json(const hct_device_t *d) {
  const hct_backend_ops_t *ops = hct__backend(d->backend);
  char model[256];
  hct__device_model_key(d, model, sizeof model);
  return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:i, s:s, "
                   "s:s, s:s}",
                   "backend", ops ? ops->name : "unknown", "ordinal", d->ordinal, "vendor",
                   d->vendor, "name", d->name, "uuid", d->uuid, "pci_bus_id", d->pci_bus_id, "arch",
                   d->arch, "arch_num", d->arch_num, "sm_count", d->sm_count, "warp_size",
                   d->warp_size, "l2_bytes", (json_int_t)d->l2_bytes, "smem_optin",
                   (json_int_t)d->smem_optin, "mem_bytes", (json_int_t)d->mem_bytes, "clock_khz",
                   d->clock_khz, "driver_version", d->driver_version, "compiler_version",
                   d->compiler_version, "model_key", model);
}
