/*
 * copy_bw.c: the card's device-to-device copy bandwidth, the rate `hctune
 * report` measures each winner's floor against (docs/report.md).
 *
 * Two buffers of 256 MiB (less on a card without the room), the source
 * filled, one copy to warm up, then 20 copies queued between two events;
 * the rate counts each copy's bytes twice (read and written), as the
 * floor counts an op's reads and writes.  The best of 3 such rounds: a
 * copy is never faster than the card, only slower when something else
 * shares it.  Errors are values; nothing is left allocated.
 *
 * Measured by `hctune probe` in its worker once every count is probed
 * (hct__copy_bw_on, the worker's 'copy_bw': its context is open and the
 * card idle, issue 34), or here where the worker cannot (a card of its
 * own opened after the worker exited).  KNOWN-GAP: written without a GPU
 * at hand (issue 30), tested on the fake driver only (test_kernel_fake);
 * not yet run on a card.
 */
#include <math.h>
#include <string.h>

#include "tuner.h"

enum { COPIES = 20, ROUNDS = 3 };
#define COPY_BYTES ((size_t)256 << 20)

/* One round: COPIES copies of n bytes between events; bytes per second. */
static int round_rate(hct_gpu_t *g, hct_dptr_t dst, hct_dptr_t src, size_t n, hct_event_t *a,
                      hct_event_t *b, double *rate) {
  int rc = hct__gpu_event_record(g, a);
  for (int i = 0; rc == 0 && i < COPIES; i++) rc = hct__gpu_copy(g, dst, src, n);
  if (rc == 0) rc = hct__gpu_event_record(g, b);
  float ms = 0;
  if (rc == 0) rc = hct__gpu_event_elapsed(g, a, b, &ms);
  if (rc == 0 && !(ms > 0))
    rc = hct__error(HCT_EGPU, "copy bandwidth: %d copies timed at %g ms", COPIES, (double)ms);
  if (rc == 0) *rate = 2.0 * (double)n * COPIES / (ms / 1e3);
  return rc;
}

/* The size to copy: COPY_BYTES, or a quarter of the free memory each. */
static size_t copy_size(hct_gpu_t *g) {
  size_t free_b = 0, total = 0, n = COPY_BYTES;
  if (hct__gpu_mem_info(g, &free_b, &total) == 0 && free_b / 4 < n) n = free_b / 4;
  hct__error_clear();
  return n & ~(size_t)4095;
}

int hct__copy_bw_measure(const hct_device_t *dev, double *bytes_per_s) {
  *bytes_per_s = 0;
  hct_gpu_t *g = NULL;
  int rc = hct__gpu_open(dev, &g);
  if (rc == 0) rc = hct__copy_bw_on(g, bytes_per_s);
  if (g != NULL) hct__gpu_close(g);
  return rc;
}

int hct__copy_bw_on(hct_gpu_t *g, double *bytes_per_s) {
  *bytes_per_s = 0;
  hct_dptr_t src = 0, dst = 0;
  hct_event_t *a = NULL, *b = NULL;
  int rc = 0;
  size_t n = copy_size(g);
  if (n < ((size_t)16 << 20))
    rc = hct__error(HCT_ENOMEM, "copy bandwidth: under 16 MiB to copy on '%s'", hct__gpu_device(g)->name);
  if (rc == 0) rc = hct__gpu_alloc(g, n, &src);
  if (rc == 0) rc = hct__gpu_alloc(g, n, &dst);
  if (rc == 0) rc = hct__gpu_fill32(g, src, 0x3f800000u, n / 4);
  if (rc == 0) rc = hct__gpu_copy(g, dst, src, n); /* warm-up */
  if (rc == 0) rc = hct__gpu_sync(g);
  if (rc == 0) rc = hct__gpu_event_create(g, &a);
  if (rc == 0) rc = hct__gpu_event_create(g, &b);
  for (int r = 0; rc == 0 && r < ROUNDS; r++) {
    double rate = 0;
    rc = round_rate(g, dst, src, n, a, b, &rate);
    if (rc == 0 && rate > *bytes_per_s) *bytes_per_s = rate;
  }
  if (a != NULL) hct__gpu_event_destroy(g, a);
  if (b != NULL) hct__gpu_event_destroy(g, b);
  if (dst != 0) hct__gpu_free(g, dst);
  if (src != 0) hct__gpu_free(g, src);
  if (rc != 0) *bytes_per_s = 0;
  return rc;
}
