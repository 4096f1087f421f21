/*
 * cmd_devices.c: `hctune devices`: the cards every loadable driver finds,
 * with the fingerprint that decisions are keyed by (UUID for this card,
 * model key for every card of its kind).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "jit.h"

static const char usage[] =
    "usage: hctune devices [--json]\n"
    "\n"
    "Lists the cards found by every GPU driver that loads (CUDA, HIP) and their\n"
    "fingerprints: name, UUID, PCI bus, arch, SMs, warp size, L2, opt-in shared\n"
    "memory, memory, clock, driver and compiler versions, model key.\n"
    "Exit status: 0 with at least one card, 1 with no driver or no card (--json\n"
    "then prints [] on stdout).\n";

static const char *backend_name(const hct_device_t *d) {
  const hct_backend_ops_t *ops = hct__backend(d->backend);
  return ops ? ops->name : "unknown";
}

static void print_text(const hct_device_t *devs, int n) {
  for (int i = 0; i < n; i++) {
    const hct_device_t *d = &devs[i];
    char model[256];
    hct__device_model_key(d, model, sizeof model);
    printf("%d: %s  %s  %s\n", i, d->name, d->uuid, d->arch);
    printf("   backend %s, ordinal %d, pci %s\n", backend_name(d), d->ordinal, d->pci_bus_id);
    printf("   %d SMs, warp %d, L2 %.1f MiB, smem opt-in %lld KiB, memory %.1f GiB, clock %d MHz\n",
           d->sm_count, d->warp_size, (double)d->l2_bytes / (1 << 20),
           (long long)(d->smem_optin / 1024), (double)d->mem_bytes / (1 << 30),
           d->clock_khz / 1000);
    printf("   driver %s, compiler %s\n", d->driver_version,
           d->compiler_version[0] ? d->compiler_version : "none");
    printf("   model %s\n", model);
  }
}

/* Each card's fingerprint (hct__device_json, what the probe stores too)
 * with its index in this listing. */
static int print_json(const hct_device_t *devs, int n) {
  json_t *arr = json_array();
  for (int i = 0; arr && i < n; i++) {
    json_t *o = hct__device_json(&devs[i]);
    if (o == NULL) continue;
    json_object_set_new(o, "index", json_integer(i));
    json_array_append_new(arr, o);
  }
  int bad = arr == NULL || json_dumpf(arr, stdout, JSON_INDENT(2)) != 0;
  json_decref(arr);
  if (bad) return hct__error(HCT_EIO, "cannot write json to stdout");
  fputc('\n', stdout);
  return 0;
}

int cmd_devices(int argc, char **argv) {
  int json = 0;
  const hct_option_t opts[] = {HCT_OPT_FLAG("json", &json), HCT_OPT_END};
  int parsed = hct__cli_options(argc, argv, opts, usage, NULL);
  if (parsed != 0) return parsed == HCT_OPTS_HELP ? HCT_EXIT_OK : parsed;
  hct_device_t *devs = calloc(64, sizeof *devs);
  if (devs == NULL) return hct__cli_fail(hct__error(HCT_ENOMEM, "out of memory listing cards"));
  int n = hct__devices(devs, 64);
  int status = HCT_EXIT_OK;
  /* A script reads --json's stdout whatever the exit status: no card is
   * an empty array there, and the reason still goes to stderr. */
  if (json && n <= 0) print_json(devs, 0);
  if (n < 0) {
    status = hct__cli_fail(n);
  } else if (n == 0) {
    status = hct__cli_fail(hct__error(HCT_ENODEV, "no gpu found: the drivers loaded but list no card"));
  } else if (json) {
    int rc = print_json(devs, n);
    if (rc < 0) status = hct__cli_fail(rc);
  } else {
    print_text(devs, n);
  }
  free(devs);
  return status;
}
