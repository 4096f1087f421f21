/*
 * hostbuf.c: a cache of the large host buffers a check downloads outputs
 * into.  At T = 32768 one run's outputs are 2 GB, and the first touch of
 * freshly mapped memory costs the kernel a page fault per 4 KB: 1.5 s per
 * 2 GB on the test machine, single-threaded inside the driver's copy, for
 * each of the five runs of every candidate's check.  Buffers given back
 * are kept (up to a quarter of the host's memory) and handed out again for
 * the same size, filled with 0xff bytes (a NaN in every float format) on
 * every core first, so a buffer never shows an earlier run's outputs.
 * Small buffers are plain malloc and free.  With a pinning hook
 * (hct__hostbuf_pin: the worker's GPU), each kept buffer is page-locked
 * once when made and unlocked before it is freed: a download into
 * pageable memory goes through the driver's staging buffer at a fraction
 * of the bus's rate (10-20 GB/s against about 50 on an H200's PCIe 5).
 *
 * Loop thread only (the worker answers one request at a time).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuner.h"

#define HOSTBUF_MIN (64u << 20) /* smaller ones are not worth keeping */
#define HOSTBUF_SLOTS 64

static struct {
  void *p;
  size_t bytes;
  int in_use;
  int pinned;
  uint64_t last_used;
} slots[HOSTBUF_SLOTS];
static uint64_t clock_;
static hct_hostbuf_pin_fn pin_fn;
static hct_hostbuf_unpin_fn unpin_fn;
static void *pin_arg;
static int pin_failed; /* said once: the rest stay pageable */

void hct__hostbuf_pin(hct_hostbuf_pin_fn pin, hct_hostbuf_unpin_fn unpin, void *arg) {
  pin_fn = pin;
  unpin_fn = unpin;
  pin_arg = arg;
  pin_failed = 0;
}

static void slot_free(int i) {
  if (slots[i].pinned && unpin_fn) unpin_fn(pin_arg, slots[i].p);
  free(slots[i].p);
  memset(&slots[i], 0, sizeof slots[i]);
}

#define FILL_CHUNK ((size_t)32 << 20)

typedef struct fill_s {
  char *p;
  size_t bytes;
} fill_t;

static void fill_chunks(void *arg, int begin, int end) {
  fill_t *f = arg;
  for (int ch = begin; ch < end; ch++) {
    size_t off = (size_t)ch * FILL_CHUNK;
    memset(f->p + off, 0xff, HCT_MIN(FILL_CHUNK, f->bytes - off));
  }
}

static size_t idle_cap(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (size_t)pages * (size_t)size / 4 : (size_t)8 << 30;
}

void *hct__hostbuf_get(size_t bytes) {
  if (bytes < HOSTBUF_MIN) return malloc(bytes);
  for (int i = 0; i < HOSTBUF_SLOTS; i++) {
    if (slots[i].p == NULL || slots[i].in_use || slots[i].bytes != bytes) continue;
    slots[i].in_use = 1;
    fill_t f = {slots[i].p, bytes};
    hct__par_for((int)((bytes + FILL_CHUNK - 1) / FILL_CHUNK), fill_chunks, &f);
    return slots[i].p;
  }
  /* Page-aligned, as pinning wants. */
  void *p = NULL;
  if (posix_memalign(&p, 4096, bytes) != 0) p = NULL;
  for (int i = 0; p != NULL && i < HOSTBUF_SLOTS; i++)
    if (slots[i].p == NULL) {
      slots[i].p = p;
      slots[i].bytes = bytes;
      slots[i].in_use = 1;
      if (pin_fn != NULL && !pin_failed) {
        slots[i].pinned = pin_fn(pin_arg, p, bytes) == 0;
        if (!slots[i].pinned) {
          pin_failed = 1;
          hct__log(HCT_LOG_WARN, "output buffers stay pageable (slower downloads): %s", hct_last_error());
          hct__error_clear();
        }
      }
      break;
    }
  return p; /* with every slot taken: an ordinary buffer, freed by put */
}

void hct__hostbuf_put(void *p) {
  if (p == NULL) return;
  int mine = -1;
  for (int i = 0; i < HOSTBUF_SLOTS && mine < 0; i++)
    if (slots[i].p == p) mine = i;
  if (mine < 0) {
    free(p);
    return;
  }
  slots[mine].in_use = 0;
  slots[mine].last_used = ++clock_;
  /* Over the cap: the least recently given back go first. */
  for (;;) {
    size_t idle = 0;
    int oldest = -1;
    for (int i = 0; i < HOSTBUF_SLOTS; i++) {
      if (slots[i].p == NULL || slots[i].in_use) continue;
      idle += slots[i].bytes;
      if (oldest < 0 || slots[i].last_used < slots[oldest].last_used) oldest = i;
    }
    if (idle <= idle_cap() || oldest < 0) break;
    slot_free(oldest);
  }
}

void hct__hostbuf_release(void) {
  for (int i = 0; i < HOSTBUF_SLOTS; i++)
    if (slots[i].p != NULL && !slots[i].in_use) slot_free(i);
}
