/*
 * producer.c: the kernel that runs before a candidate in the producer check,
 * standing for what an engine runs before the read: a kernel that writes
 * the read's inputs (R, pending) and lets dependents launch early.
 *
 * It triggers its dependents first (griddepcontrol.launch_dependents), then
 * spins for spin_ns on the global timer, then copies each input from a
 * staging copy into the buffer the candidate reads, which held poison until
 * then.  A candidate whose first launch is programmatic (PDL) may start
 * during the spin; one that loads its inputs before griddepcontrol.wait
 * loads the poison and fails, one that waits sees the inputs the producer
 * wrote (the wait covers the whole producer grid and its memory).
 *
 * The kernel is PTX written here and JIT-compiled by the driver when the
 * worker first needs it: no NVRTC compile, no cache entry, the same for
 * every op.  sm_90 and newer only (PDL); HIP has no such launch.
 *
 * Thread of the GPU only.
 */
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

/* hct_producer(table, count, spin_ns): table holds count (src, dst, words)
 * triples of u64; every thread of the grid copies words src -> dst with a
 * grid stride, after the spin.  Checked with ptxas -arch=sm_90. */
static const char producer_ptx[] =
    ".version 7.8\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry hct_producer(.param .u64 hct_producer_table, .param .u32 hct_producer_count,\n"
    "                             .param .u32 hct_producer_spin_ns)\n"
    "{\n"
    "  .reg .pred %p<4>;\n"
    "  .reg .b32 %r<10>;\n"
    "  .reg .b64 %rd<24>;\n"
    "  griddepcontrol.launch_dependents;\n"
    "  ld.param.u64 %rd1, [hct_producer_table];\n"
    "  ld.param.u32 %r1, [hct_producer_count];\n"
    "  ld.param.u32 %r2, [hct_producer_spin_ns];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  cvt.u64.u32 %rd3, %r2;\n"
    "  mov.u64 %rd4, %globaltimer;\n"
    "$SPIN:\n"
    "  mov.u64 %rd5, %globaltimer;\n"
    "  sub.u64 %rd6, %rd5, %rd4;\n"
    "  setp.lt.u64 %p1, %rd6, %rd3;\n"
    "  @%p1 bra $SPIN;\n"
    "  mov.u32 %r3, %ctaid.x;\n"
    "  mov.u32 %r4, %ntid.x;\n"
    "  mov.u32 %r5, %tid.x;\n"
    "  mov.u32 %r6, %nctaid.x;\n"
    "  mul.wide.u32 %rd7, %r3, %r4;\n"
    "  cvt.u64.u32 %rd8, %r5;\n"
    "  add.u64 %rd9, %rd7, %rd8;\n"
    "  mul.wide.u32 %rd10, %r6, %r4;\n"
    "  mov.u32 %r7, 0;\n"
    "$ENTRY:\n"
    "  setp.ge.u32 %p2, %r7, %r1;\n"
    "  @%p2 bra $DONE;\n"
    "  mul.wide.u32 %rd11, %r7, 24;\n"
    "  add.u64 %rd12, %rd2, %rd11;\n"
    "  ld.global.u64 %rd13, [%rd12];\n"
    "  ld.global.u64 %rd14, [%rd12+8];\n"
    "  ld.global.u64 %rd15, [%rd12+16];\n"
    "  cvta.to.global.u64 %rd20, %rd13;\n"
    "  cvta.to.global.u64 %rd21, %rd14;\n"
    "  mov.u64 %rd16, %rd9;\n"
    "$COPY:\n"
    "  setp.ge.u64 %p3, %rd16, %rd15;\n"
    "  @%p3 bra $NEXT;\n"
    "  shl.b64 %rd17, %rd16, 2;\n"
    "  add.u64 %rd18, %rd20, %rd17;\n"
    "  ld.global.u32 %r8, [%rd18];\n"
    "  add.u64 %rd19, %rd21, %rd17;\n"
    "  st.global.u32 [%rd19], %r8;\n"
    "  add.u64 %rd16, %rd16, %rd10;\n"
    "  bra.uni $COPY;\n"
    "$NEXT:\n"
    "  add.u32 %r7, %r7, 1;\n"
    "  bra.uni $ENTRY;\n"
    "$DONE:\n"
    "  ret;\n"
    "}\n";

const char *hct__producer_ptx(void) { return producer_ptx; }

int hct__producer_applies(const hct_device_t *dev, char *why, size_t len) {
  if (dev->backend != HCT_BACKEND_CUDA || dev->arch_num < 90) {
    snprintf(why, len, "no programmatic dependent launch on %s", dev->arch);
    return 0;
  }
  return 1;
}

int hct__producer_load(hct_gpu_t *g, hct_producer_t *p) {
  memset(p, 0, sizeof *p);
  /* Long enough that a dependent launched at the trigger runs its code
   * before the wait while the inputs still hold poison. */
  p->spin_ns = 20000;
  int rc = hct__gpu_module_load(g, producer_ptx, sizeof producer_ptx, &p->mod);
  if (rc == 0) rc = hct__gpu_function(p->mod, "hct_producer", &p->fn);
  if (rc != 0) {
    hct__producer_unload(g, p);
    return hct__error(rc, "the producer kernel: %s", hct_last_error());
  }
  return 0;
}

void hct__producer_unstage(hct_gpu_t *g, hct_producer_t *p) {
  hct__devset_free(g, &p->stage);
  if (p->table) hct__gpu_free(g, p->table);
  p->table = 0;
  p->count = 0;
}

void hct__producer_unload(hct_gpu_t *g, hct_producer_t *p) {
  hct__producer_unstage(g, p);
  if (p->mod) hct__gpu_module_unload(g, p->mod);
  p->mod = NULL;
  p->fn = NULL;
}

int hct__producer_stage(hct_gpu_t *g, hct_producer_t *p, const hct_hostset_t *hs,
                        const hct_devset_t *d) {
  hct__producer_unstage(g, p);
  uint64_t table[HCT_MAX_BUFFERS * 3];
  int rc = 0;
  for (int i = 0; rc == 0 && i < hs->n; i++) {
    hct_buf_role_t r = hs->bufs[i].spec->role;
    if (d->ptr[i] == 0 || !(r == HCT_BUF_INPUT || r == HCT_BUF_INOUT || r == HCT_BUF_OPTIONAL))
      continue;
    if (d->bytes[i] % 4 != 0)
      rc = hct__error(HCT_EUNSUPPORTED, "producer: input '%s' is not a whole number of words",
                      hs->bufs[i].spec->name);
    if (rc == 0) rc = hct__gpu_alloc(g, d->bytes[i], &p->stage.ptr[i]);
    if (rc == 0) {
      p->stage.bytes[i] = d->bytes[i];
      rc = hct__gpu_upload(g, p->stage.ptr[i], hs->bufs[i].data, d->bytes[i]);
    }
    if (rc == 0) {
      table[p->count * 3] = p->stage.ptr[i];
      table[p->count * 3 + 1] = d->ptr[i];
      table[p->count * 3 + 2] = d->bytes[i] / 4;
      p->count++;
    }
  }
  if (rc == 0 && p->count > 0) rc = hct__gpu_alloc(g, sizeof(uint64_t) * 3 * (size_t)p->count, &p->table);
  if (rc == 0 && p->count > 0)
    rc = hct__gpu_upload(g, p->table, table, sizeof(uint64_t) * 3 * (size_t)p->count);
  if (rc != 0) hct__producer_unstage(g, p);
  return rc;
}

int hct__producer_enqueue(hct_gpu_t *g, const hct_producer_t *p) {
  /* A few blocks: the candidate's blocks must find room beside them. */
  unsigned grid[3] = {8, 1, 1}, block[3] = {256, 1, 1};
  hct_dptr_t table = p->table;
  unsigned count = (unsigned)p->count, spin = p->spin_ns;
  void *args[] = {&table, &count, &spin};
  return hct__gpu_launch(g, p->fn, grid, block, 0, args);
}
