/*
 * base64.c: Base64 (RFC 4648, with padding), both ways: the daemon sends a
 * module image in its reply line (daemon/answer.c), the client library
 * reads it back (client/kernel.c).  Here, below both, so that neither
 * calls the other.
 */
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

char *hct__base64_encode(const void *data, size_t len, size_t *out_len) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const unsigned char *p = data;
  size_t n = 4 * ((len + 2) / 3);
  char *out = malloc(n + 1);
  if (out == NULL) return NULL;
  size_t o = 0, i = 0;
  for (; i + 2 < len; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    out[o++] = tab[v >> 18];
    out[o++] = tab[(v >> 12) & 63];
    out[o++] = tab[(v >> 6) & 63];
    out[o++] = tab[v & 63];
  }
  if (i < len) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
    out[o++] = tab[v >> 18];
    out[o++] = tab[(v >> 12) & 63];
    out[o++] = i + 1 < len ? tab[(v >> 6) & 63] : '=';
    out[o++] = '=';
  }
  out[o] = '\0';
  if (out_len != NULL) *out_len = o;
  return out;
}

static int b64_value(int ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

int hct__base64_decode(const char *s, size_t n, unsigned char **out, size_t *out_len) {
  if (n % 4 != 0) return hct__error(HCT_EPROTO, "module image: base64 length %zu is not a multiple of 4", n);
  unsigned char *b = malloc(n / 4 * 3 + 1);
  if (b == NULL) return hct__error(HCT_ENOMEM, "module image: out of memory");
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int v[4];
    for (int k = 0; k < 4; k++) {
      v[k] = s[i + k] == '=' && i + 4 == n && k >= 2 ? 0 : b64_value((unsigned char)s[i + k]);
      if (v[k] < 0) {
        free(b);
        return hct__error(HCT_EPROTO, "module image: bad base64 at byte %zu", i + (size_t)k);
      }
    }
    uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    b[o++] = (unsigned char)(x >> 16);
    if (!(i + 4 == n && s[i + 2] == '=')) b[o++] = (unsigned char)(x >> 8);
    if (!(i + 4 == n && s[i + 3] == '=')) b[o++] = (unsigned char)x;
  }
  *out = b;
  *out_len = o;
  return 0;
}
