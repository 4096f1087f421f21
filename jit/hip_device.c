/*
 * hip_device.c: the AMD cards, as hct_device_t: the full gfx target name,
 * the attributes of the fingerprint, a UUID that survives reboots, and the
 * driver and compiler versions.  Any thread; the runtime is loaded first
 * (hct__hip_load).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

int hct__hip_device_count(int *n) {
  int rc = hct__hip_load();
  if (rc < 0) return rc;
  hipError_t e = hct__hip.hipGetDeviceCount(n);
  if (e == hipErrorNoDevice) {
    *n = 0;
    return 0;
  }
  return hct__hip_fail(e, "hipGetDeviceCount");
}

/*
 * The full target name ("gfx90a:sramecc+:xnack-") exists only in
 * hipDeviceProp_t.gcnArchName, and that struct's layout differs between
 * ROCm versions: ROCm 6 put fields before gcnArchName (uuid, luid, ...) and
 * renamed the entry point to hipGetDevicePropertiesR0600, keeping the old
 * layout as hipGetDevicePropertiesR0000 (ROCm 5's plain
 * hipGetDeviceProperties).  Since we are built against one ROCm's headers
 * but run against whatever ROCm is installed, we never read the struct
 * through a C type: we pass a zeroed buffer far larger than any layout,
 * pick the offset that matches the symbol we called (R0600: 1160 bytes on
 * LP64, counted from ROCm 6.0's hip_runtime_api.h; R0000: offsetof from the
 * ROCm 5 header we build with), and check that a "gfx" name is there.  If
 * it is not (a future layout), we scan the buffer for the one string that
 * starts with "gfx".  Numeric fields come from hipDeviceGetAttribute, whose
 * numbering is stable.
 */
#define HCT_HIP_PROPS_BYTES 16384
#define HCT_HIP_R0600_GCN_OFFSET 1160

static int looks_like_gfx(const char *s, size_t room) {
  if (room < 5 || strncmp(s, "gfx", 3) != 0 || !isxdigit((unsigned char)s[3])) return 0;
  for (size_t i = 0; i < room && i < 256; i++) {
    if (s[i] == '\0') return 1;
    if (!isprint((unsigned char)s[i])) return 0;
  }
  return 0;
}

static int hip_gcn_arch_name(int ordinal, char *out, size_t len) {
  static const struct {
    size_t sym_offset;
    const char *name;
    size_t gcn_offset;
  } getters[] = {
    {offsetof(hip_api_t, hipGetDevicePropertiesR0600), "hipGetDevicePropertiesR0600",
     HCT_HIP_R0600_GCN_OFFSET},
    {offsetof(hip_api_t, hipGetDevicePropertiesR0000), "hipGetDevicePropertiesR0000",
     offsetof(hipDeviceProp_t, gcnArchName)},
    {offsetof(hip_api_t, hipGetDeviceProperties), "hipGetDeviceProperties",
     offsetof(hipDeviceProp_t, gcnArchName)},
  };
  char *buf = calloc(1, HCT_HIP_PROPS_BYTES);
  if (buf == NULL) return hct__error(HCT_ENOMEM, "hip: out of memory reading device properties");
  int rc = hct__error(HCT_ENOSYM, "hip: '%s' has none of hipGetDeviceProperties{R0600,R0000,}",
                      hct__hip_lib_name);
  for (size_t i = 0; i < HCT_ARRAY_SIZE(getters); i++) {
    hipError_t (*fn)(void *, int);
    memcpy(&fn, (char *)&hct__hip + getters[i].sym_offset, sizeof fn);
    if (fn == NULL) continue;
    hipError_t e = fn(buf, ordinal);
    if (e != hipSuccess) {
      rc = hct__hip_fail(e, getters[i].name);
      break;
    }
    const char *name = NULL;
    if (looks_like_gfx(buf + getters[i].gcn_offset, HCT_HIP_PROPS_BYTES - getters[i].gcn_offset))
      name = buf + getters[i].gcn_offset;
    for (size_t off = 256; name == NULL && off + 5 < HCT_HIP_PROPS_BYTES; off += 8)
      if (looks_like_gfx(buf + off, HCT_HIP_PROPS_BYTES - off)) name = buf + off;
    if (name == NULL) {
      rc = hct__error(HCT_EGPU, "hip: %s gave no gfx target name for device %d",
                      getters[i].name, ordinal);
    } else {
      hct__strlcpy(out, name, len);
      rc = 0;
    }
    break;
  }
  free(buf);
  return rc;
}

static int hip_attr(int ordinal, hipDeviceAttribute_t a, const char *what, int *out) {
  *out = 0;
  hipError_t e = hct__hip.hipDeviceGetAttribute(out, a, ordinal);
  return e == hipSuccess ? 0 : hct__hip_fail(e, what);
}

/* hipDriverGetVersion's 50221153 as "5.2.21153". */
static void hip_version_text(int v, char *buf, size_t len) {
  snprintf(buf, len, "%d.%d.%d", v / 10000000, (v / 100000) % 100, v % 100000);
}

/*
 * A UUID that stays the same across reboots.  ROCm fills hipUUID with the
 * 16 hex digits of the card's unique id as text (rocm-smi shows them as
 * "GPU-<hex>"); cards without one (older parts, some drivers) give zeros,
 * and then the PCI bus id, stable on a host, stands in: "AMD-PCI-<busid>".
 */
static void hip_uuid(int ordinal, const char *pci_bus_id, char *out, size_t len) {
  hipUUID u;
  memset(&u, 0, sizeof u);
  if (hct__hip.hipDeviceGetUuid != NULL && hct__hip.hipDeviceGetUuid(&u, ordinal) == hipSuccess) {
    int hex = 1, zero = 1;
    for (int i = 0; i < 16; i++) {
      if (!isxdigit((unsigned char)u.bytes[i])) hex = 0;
      if (u.bytes[i] != 0 && u.bytes[i] != '0') zero = 0;
    }
    if (hex && !zero) {
      snprintf(out, len, "GPU-%.16s", u.bytes);
      for (char *p = out + 4; *p; p++) *p = (char)tolower((unsigned char)*p);
      return;
    }
    if (!zero) {
      const unsigned char *b = (const unsigned char *)u.bytes;
      snprintf(out, len,
               "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
               b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
               b[12], b[13], b[14], b[15]);
      return;
    }
  }
  snprintf(out, len, "AMD-PCI-%s", pci_bus_id);
}

int hct__hip_device_get(int ordinal, hct_device_t *d) {
  int rc = hct__hip_load();
  if (rc < 0) return rc;
  memset(d, 0, sizeof *d);
  d->backend = HCT_BACKEND_HIP;
  d->ordinal = ordinal;
  hct__strlcpy(d->vendor, "amd", sizeof d->vendor);

  if ((rc = hip_gcn_arch_name(ordinal, d->arch, sizeof d->arch)) < 0) return rc;
  HIP_TRY(hipDeviceGetName(d->name, (int)sizeof d->name, ordinal));
  /* Some ROCm versions leave the marketing name empty. */
  if (d->name[0] == '\0') snprintf(d->name, sizeof d->name, "AMD %.100s", d->arch);
  HIP_TRY(hipDeviceGetPCIBusId(d->pci_bus_id, (int)sizeof d->pci_bus_id, ordinal));
  for (char *p = d->pci_bus_id; *p; p++) *p = (char)tolower((unsigned char)*p);
  hip_uuid(ordinal, d->pci_bus_id, d->uuid, sizeof d->uuid);

  size_t mem = 0;
  HIP_TRY(hipDeviceTotalMem(&mem, ordinal));
  d->mem_bytes = (int64_t)mem;

  int cus, warp, l2, smem, optin, clock;
  if ((rc = hip_attr(ordinal, hipDeviceAttributeMultiprocessorCount, "cu count", &cus)) < 0 ||
      (rc = hip_attr(ordinal, hipDeviceAttributeWarpSize, "warp size", &warp)) < 0 ||
      (rc = hip_attr(ordinal, hipDeviceAttributeL2CacheSize, "l2 size", &l2)) < 0 ||
      (rc = hip_attr(ordinal, hipDeviceAttributeMaxSharedMemoryPerBlock, "lds per block",
                     &smem)) < 0 ||
      (rc = hip_attr(ordinal, hipDeviceAttributeClockRate, "clock rate", &clock)) < 0)
    return rc;
  /* AMD has no opt-in above the default: the whole LDS (64 KB on most
   * parts) is open to one block.  Take whichever figure is larger. */
  if (hip_attr(ordinal, hipDeviceAttributeSharedMemPerBlockOptin, "lds opt-in", &optin) < 0)
    optin = 0;
  hct__error_clear();
  d->sm_count = cus;
  d->warp_size = warp;
  d->l2_bytes = l2;
  d->smem_optin = HCT_MAX(smem, optin);
  d->clock_khz = clock;
  /* The gfx number read as hex (0x90a), the same as HCT_ARCH and the ARCH
   * of constraints when compiling; min_arch (NVIDIA) is not applied to HIP. */
  d->arch_num = (int)strtol(d->arch + 3, NULL, 16);

  int v = 0;
  HIP_TRY(hipDriverGetVersion(&v));
  hip_version_text(v, d->driver_version, sizeof d->driver_version);
  if (hct__hiprtc_load() == 0)
    snprintf(d->compiler_version, sizeof d->compiler_version, "hiprtc %d.%d", hct__hiprtc_major,
             hct__hiprtc_minor);
  else
    hct__strlcpy(d->compiler_version, "none", sizeof d->compiler_version);
  hct__error_clear();
  return 0;
}

