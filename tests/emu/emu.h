/*
 * emu.h: runs kernel templates on the CPU, for checking their indexing and
 * summation order without a GPU.  Each GPU thread of a block is a fiber
 * (ucontext); __syncthreads and the warp shuffles are barriers between
 * fibers, so the kernels run unchanged, one block after another.
 *
 * Include this first, then the templates.  It poses as HIP (HCT_HIP, so
 * the plain-copy path of hct_cp_async16 is used) with 32-wide warps, and
 * defines rsqrtf as 1/sqrtf so results can be compared bit for bit with a
 * host emulation of the canonical order.  A shuffle or barrier that not
 * every live thread of its warp or block reaches is reported as a deadlock:
 * on a GPU it would be a bug too.
 */
#ifndef HCT_EMU_H
#define HCT_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#define HCT_HIP 1
#ifndef HCT_WARP
#define HCT_WARP 32
#endif
#define HCT_ARCH 0

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace emu {

struct Barrier {
  int count = 0, expected = 0;
  unsigned gen = 0;
};

struct Fiber {
  ucontext_t ctx;
  dim3 tid;
  bool done = false;
  std::vector<char> stack;
};

inline ucontext_t sched_ctx;
inline std::vector<Fiber> fibers;
inline Fiber *cur = nullptr;
inline dim3 block_idx, block_dim, grid_dim;
inline Barrier block_bar;
inline std::vector<Barrier> warp_bar;
inline std::vector<float> warp_buf;
inline unsigned long progress = 0;
inline std::function<void()> body;
inline std::vector<char> dyn_smem;

inline void yield() { swapcontext(&cur->ctx, &sched_ctx); }

inline void arrive(Barrier &b) {
  const unsigned g = b.gen;
  progress++;
  if (++b.count >= b.expected) {
    b.count = 0;
    b.gen++;
    return;
  }
  while (b.gen == g) yield();
}

/* A thread that ends no longer holds back its block or warp. */
inline void leave(Barrier &b) {
  b.expected--;
  if (b.count > 0 && b.count >= b.expected) {
    b.count = 0;
    b.gen++;
  }
}

inline int lin(const Fiber *f) { return (int)f->tid.x; }

inline void fiber_main() {
  body();
  cur->done = true;
  progress++;
  leave(block_bar);
  leave(warp_bar[lin(cur) / 32]);
  swapcontext(&cur->ctx, &sched_ctx);
}

inline void sync_block() { arrive(block_bar); }

inline float shfl_xor(float v, int mask) {
  const int t = lin(cur), w = t / 32, lane = t % 32;
  warp_buf[(size_t)w * 32 + lane] = v;
  arrive(warp_bar[w]);
  const float r = warp_buf[(size_t)w * 32 + (lane ^ (mask & 31))];
  arrive(warp_bar[w]);
  return r;
}

/* Lane src's value of v, across the warp (__shfl). */
inline float shfl_idx(float v, int src) {
  const int t = lin(cur), w = t / 32, lane = t % 32;
  warp_buf[(size_t)w * 32 + lane] = v;
  arrive(warp_bar[w]);
  const float r = warp_buf[(size_t)w * 32 + (src & 31)];
  arrive(warp_bar[w]);
  return r;
}

/* Runs one block to the end; aborts on a deadlock. */
inline void run_block() {
  const int n = (int)(block_dim.x * block_dim.y * block_dim.z);
  fibers.resize((size_t)n);
  block_bar = Barrier{0, n, 0};
  warp_bar.assign((size_t)(n + 31) / 32, Barrier{});
  for (int w = 0; w < (n + 31) / 32; w++) warp_bar[(size_t)w].expected = n - 32 * w < 32 ? n - 32 * w : 32;
  warp_buf.assign((size_t)(n + 31) / 32 * 32, 0.0f);
  for (int i = 0; i < n; i++) {
    Fiber &f = fibers[(size_t)i];
    f.done = false;
    f.tid = dim3{(unsigned)i, 1, 1};
    f.stack.resize(256 * 1024);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = f.stack.size();
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, (void (*)())fiber_main, 0);
  }
  for (;;) {
    int live = 0;
    const unsigned long before = progress;
    for (int i = 0; i < n; i++) {
      if (fibers[(size_t)i].done) continue;
      live++;
      cur = &fibers[(size_t)i];
      swapcontext(&sched_ctx, &cur->ctx);
    }
    if (live == 0) break;
    if (progress == before) {
      fprintf(stderr, "emu: deadlock in block (%u,%u,%u): a barrier or shuffle not reached by all\n",
              block_idx.x, block_idx.y, block_idx.z);
      exit(3);
    }
  }
}

/* Launches f(args...) over a grid of 1-D blocks. */
template <class F, class... A>
void launch(dim3 grid, dim3 block, size_t smem, F f, A... args) {
  if (block.y != 1 || block.z != 1) {
    fprintf(stderr, "emu: only 1-D blocks\n");
    exit(3);
  }
  grid_dim = grid;
  block_dim = block;
  dyn_smem.assign(smem, (char)0x5a); /* exact size, so ASan sees overruns */
  body = [=]() { f(args...); };
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        block_idx = dim3{x, y, z};
        run_block();
      }
}

inline void *dyn_base() {
  if (((uintptr_t)dyn_smem.data() & 15) != 0) {
    fprintf(stderr, "emu: dynamic shared memory not 16-byte aligned\n");
    exit(3);
  }
  return dyn_smem.data();
}

}  // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define __syncthreads() emu::sync_block()
#define HCT_DYN_SHARED(type, name) type *name = (type *)emu::dyn_base()

inline float __shfl_xor(float v, int mask) { return emu::shfl_xor(v, mask); }
inline float __shfl(float v, int src, int width) {
  (void)width;
  return emu::shfl_idx(v, src);
}
inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

#endif /* HCT_EMU_H */
