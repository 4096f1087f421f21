/* hip.c: placeholder HIP backend until jit/hip.c is written: reports that
 * the HIP driver is not available. */
#include "jit.h"

static int hip_load(void) {
  return hct__error(HCT_ENODRIVER, "hip driver: backend not built yet");
}

const hct_backend_ops_t hct__hip_backend = {
  .name = "hip",
  .kind = HCT_BACKEND_HIP,
  .load = hip_load,
};
