/*
 * hostbuf.c: a cache of the large host buffers a check downloads outputs
 * into.  At T = 32768 one run's outputs are 2 GB, and the first touch of
 * freshly mapped memory costs the kernel a page fault per 4 KB: 1.5 s per
 * 2 GB on the test machine, single-threaded inside the driver's copy, for
 * each of the five runs of every candidate's check.  Buffers given back
 * are kept (up to a quarter of the host's memory) and handed out again for
 * the same size, filled with 0xff bytes (a NaN in every float format) on
 * every core first, so a buffer never shows an earlier run's outputs.
 * Small buffers are plain malloc and free.
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
  uint64_t last_used;
} slots[HOSTBUF_SLOTS];
static uint64_t clock_;

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
  void *p = malloc(bytes);
  for (int i = 0; p != NULL && i < HOSTBUF_SLOTS; i++)
    if (slots[i].p == NULL) {
      slots[i].p = p;
      slots[i].bytes = bytes;
      slots[i].in_use = 1;
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
    free(slots[oldest].p);
    memset(&slots[oldest], 0, sizeof slots[oldest]);
  }
}

void hct__hostbuf_release(void) {
  for (int i = 0; i < HOSTBUF_SLOTS; i++)
    if (slots[i].p != NULL && !slots[i].in_use) {
      free(slots[i].p);
      memset(&slots[i], 0, sizeof slots[i]);
    }
}
