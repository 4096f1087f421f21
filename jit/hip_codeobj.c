/*
 * hip_codeobj.c: the per-kernel resources of an AMDGPU code object, the
 * ELF file hiprtc produces.  hiprtc has no `ptxas -v`: the figures are in
 * the code object's AMDGPU metadata note (ELF note "AMDGPU", type 32), a
 * MessagePack map whose "amdhsa.kernels" entries carry ".vgpr_count",
 * ".group_segment_fixed_size" and so on.
 *
 * The bytes are untrusted (a code object from the cache, or from a
 * compiler in a child that may have died half way), so every offset, size
 * and length is checked against what is left before it is used, nesting
 * is bounded, and every figure is clamped: a hostile file gets an error
 * naming what is wrong, never a read out of bounds.  Needs no ROCm header.
 * Any thread.
 */
#include <stdint.h>
#include <string.h>

#include "jit.h"

/* ---- MessagePack ---------------------------------------------------------- */

/*
 * The keys below are unique to kernel descriptors, so the walk needs no
 * notion of where it is: every such key anywhere in the tree raises the
 * maximum over kernels.
 */
#define MP_MAX_DEPTH 32

typedef struct figures_s {
  int64_t regs, smem_static, stack_bytes, vgpr_spill, sgpr_spill;
} figures_t;

typedef struct mp_s {
  const unsigned char *start, *p, *end;
  figures_t *fig;
  const char *why; /* set where a read fails */
} mp_t;

static int mp_fail(mp_t *m, const char *why) {
  if (m->why == NULL) m->why = why;
  return -1;
}

/* Reads an n-byte big-endian unsigned integer. */
static int mp_uint(mp_t *m, size_t n, uint64_t *out) {
  if ((size_t)(m->end - m->p) < n) return mp_fail(m, "cut short inside a value");
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v = (v << 8) | m->p[i];
  m->p += n;
  *out = v;
  return 0;
}

static int mp_skip(mp_t *m, uint64_t n) {
  if ((uint64_t)(m->end - m->p) < n) return mp_fail(m, "a length runs past the end");
  m->p += n;
  return 0;
}

/* One value as read: an integer, a string (pointing into the buffer), or
 * something else (kind 0). */
typedef struct mp_item_s {
  int kind; /* 0 other, 1 integer, 2 string */
  int64_t ival;
  const char *str;
  size_t slen;
} mp_item_t;

static int mp_value(mp_t *m, int depth, mp_item_t *it);

static void note_key(figures_t *f, const mp_item_t *k, int64_t v) {
  static const struct {
    const char *key;
    size_t off;
  } keys[] = {
    {".vgpr_count", offsetof(figures_t, regs)},
    {".group_segment_fixed_size", offsetof(figures_t, smem_static)},
    {".private_segment_fixed_size", offsetof(figures_t, stack_bytes)},
    {".vgpr_spill_count", offsetof(figures_t, vgpr_spill)},
    {".sgpr_spill_count", offsetof(figures_t, sgpr_spill)},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(keys); i++)
    if (strlen(keys[i].key) == k->slen && memcmp(keys[i].key, k->str, k->slen) == 0) {
      int64_t *field = (int64_t *)(void *)((char *)f + keys[i].off);
      if (v > *field) *field = v;
    }
}

static int mp_container(mp_t *m, int depth, uint64_t n, int is_map) {
  for (uint64_t i = 0; i < n; i++) {
    mp_item_t k, v;
    if (mp_value(m, depth + 1, &k) < 0) return -1;
    if (!is_map) continue;
    if (mp_value(m, depth + 1, &v) < 0) return -1;
    if (k.kind == 2 && v.kind == 1) note_key(m->fig, &k, v.ival);
  }
  return 0;
}

/* Every read consumes at least one byte, so a count of a billion elements
 * ends at the buffer's end, not after a billion steps. */
static int mp_value(mp_t *m, int depth, mp_item_t *it) {
  it->kind = 0;
  if (depth > MP_MAX_DEPTH) return mp_fail(m, "nested too deep");
  if (m->p >= m->end) return mp_fail(m, "cut short before a value");
  unsigned c = *m->p++;
  uint64_t n = 0;
  if (c <= 0x7f || c >= 0xe0) { /* positive and negative fixint */
    it->kind = 1;
    it->ival = c <= 0x7f ? (int64_t)c : (int64_t)(int8_t)c;
    return 0;
  }
  if (c <= 0x8f) return mp_container(m, depth, c & 0x0f, 1); /* fixmap */
  if (c <= 0x9f) return mp_container(m, depth, c & 0x0f, 0); /* fixarray */
  if (c <= 0xbf || (c >= 0xd9 && c <= 0xdb)) {               /* strings */
    if (c <= 0xbf)
      n = c & 0x1f;
    else if (mp_uint(m, (size_t)1 << (c - 0xd9), &n) < 0)
      return -1;
    const unsigned char *s = m->p;
    if (mp_skip(m, n) < 0) return -1;
    it->kind = 2;
    it->str = (const char *)s;
    it->slen = (size_t)n;
    return 0;
  }
  if (c >= 0xcc && c <= 0xd3) { /* uint8..64, int8..64 */
    size_t w = (size_t)1 << ((c - 0xcc) & 3);
    if (mp_uint(m, w, &n) < 0) return -1;
    it->kind = 1;
    if (c <= 0xcf)
      it->ival = (int64_t)HCT_MIN(n, (uint64_t)INT64_MAX);
    else
      it->ival = w == 1 ? (int8_t)n : w == 2 ? (int16_t)n : w == 4 ? (int32_t)n : (int64_t)n;
    return 0;
  }
  switch (c) {
    case 0xc0: case 0xc2: case 0xc3: return 0;  /* nil, false, true */
    case 0xca: return mp_skip(m, 4);            /* float32 */
    case 0xcb: return mp_skip(m, 8);            /* float64 */
    case 0xc4: case 0xc5: case 0xc6:            /* bin */
    case 0xc7: case 0xc8: case 0xc9: {          /* ext: length, type, data */
      size_t w = (size_t)1 << ((c - 0xc4) % 3);
      if (mp_uint(m, w, &n) < 0) return -1;
      return mp_skip(m, n + (c >= 0xc7));
    }
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext: type, data */
      return mp_skip(m, 1 + ((uint64_t)1 << (c - 0xd4)));
    case 0xdc: case 0xdd:
      if (mp_uint(m, c == 0xdc ? 2 : 4, &n) < 0) return -1;
      return mp_container(m, depth, n, 0);
    case 0xde: case 0xdf:
      if (mp_uint(m, c == 0xde ? 2 : 4, &n) < 0) return -1;
      return mp_container(m, depth, n, 1);
    default: return mp_fail(m, "the never-used type byte 0xc1");
  }
}

/* ---- ELF ------------------------------------------------------------------ */

#define ELF_SHT_NOTE 7
#define HCT_NT_AMDGPU_METADATA 32

static int32_t clamp(int64_t v) { return (int32_t)(v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : v); }

/* Little-endian reads at an offset the caller has checked: the file is
 * ELFDATA2LSB, and so are the hosts hctune runs on. */
static uint64_t rd(const unsigned char *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

int hct__hip_code_resources(const void *image, size_t size, int *regs, int *spill_bytes,
                            int *smem_static, int *stack_bytes) {
  const unsigned char *img = image;
  *regs = *spill_bytes = *smem_static = *stack_bytes = -1;
  /* ELF64, little-endian: the section headers, then every SHT_NOTE. */
  if (img == NULL || size < 64 || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2 || img[5] != 1)
    return hct__error(HCT_EINVAL, "code object: not a 64-bit little-endian ELF file (%zu bytes)",
                      size);
  uint64_t shoff = rd(img + 0x28, 8), shentsize = rd(img + 0x3a, 2), shnum = rd(img + 0x3c, 2);
  if (shentsize < 64)
    return hct__error(HCT_EINVAL, "code object: section header entries of %llu bytes, under 64",
                      (unsigned long long)shentsize);
  if (shoff > size || shnum * shentsize > size - shoff)
    return hct__error(HCT_EINVAL,
                      "code object: %llu section headers of %llu bytes at offset %llu run past "
                      "the end of the file (%zu bytes)",
                      (unsigned long long)shnum, (unsigned long long)shentsize,
                      (unsigned long long)shoff, size);
  for (uint64_t i = 0; i < shnum; i++) {
    const unsigned char *sh = img + shoff + i * shentsize;
    uint64_t type = rd(sh + 4, 4), off = rd(sh + 0x18, 8), len = rd(sh + 0x20, 8);
    /* A section out of range is skipped, like a reader that only wants
     * the notes; overlapping sections are harmless: nothing is written. */
    if (type != ELF_SHT_NOTE || off > size || len > size - off) continue;
    const unsigned char *sec = img + off;
    for (uint64_t at = 0; len >= 12 && at <= len - 12;) {
      uint64_t namesz = rd(sec + at, 4), descsz = rd(sec + at + 4, 4),
               ntype = rd(sec + at + 8, 4);
      uint64_t name_at = at + 12, desc_at = name_at + ((namesz + 3) & ~3ull);
      if (desc_at > len || descsz > len - desc_at) break;
      if (ntype == HCT_NT_AMDGPU_METADATA && namesz == 7 &&
          memcmp(sec + name_at, "AMDGPU", 7) == 0) {
        figures_t f = {0, 0, 0, 0, 0};
        mp_t m = {sec + desc_at, sec + desc_at, sec + desc_at + descsz, &f, NULL};
        mp_item_t top;
        if (mp_value(&m, 0, &top) < 0)
          return hct__error(HCT_EINVAL, "code object: AMDGPU metadata: %s at byte %zu of %llu",
                            m.why, (size_t)(m.p - m.start), (unsigned long long)descsz);
        *regs = clamp(f.regs);
        *smem_static = clamp(f.smem_static);
        *stack_bytes = clamp(f.stack_bytes);
        /* Spilled registers are 4 bytes each. */
        *spill_bytes = clamp(4 * (int64_t)HCT_MIN(clamp(f.vgpr_spill) + (int64_t)clamp(f.sgpr_spill),
                                                  (int64_t)INT32_MAX));
        return 0;
      }
      at = desc_at + ((descsz + 3) & ~3ull);
    }
  }
  return hct__error(HCT_EINVAL, "code object: no AMDGPU metadata note (%zu bytes)", size);
}
