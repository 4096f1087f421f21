/*
 * fuzz_request.c: libFuzzer target of the daemon's request parser
 * (daemon/proto.c), built and run by `make fuzz` with clang's
 * -fsanitize=fuzzer,address,undefined.
 *
 * Besides "never crashes, never leaks", it checks what the daemon relies
 * on: an accepted request names a verb with its required fields, an op
 * that stays inside kernels-src, a parity an engine may ask for, token counts
 * in range; a refused one leaves a one-line message; and the fast scanner
 * and jansson read every line alike.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_request: broken: %s\n", what);
    abort();
  }
}

static void check_request(const hct_req_t *r) {
  check(r->cmd != NULL && strcmp(r->cmd, hct__verb_name(r->verb)) == 0, "verb name");
  check(hct__parity_asked_ok(r->parity) == 0, "parity");
  if (r->op != NULL) {
    check(r->op[0] != '\0' && strlen(r->op) < 32, "op length");
    check(strchr(r->op, '/') == NULL && strchr(r->op, '.') == NULL, "op escapes kernels-src");
  }
  if (r->verb == HCT_REQ_CHOOSE || r->verb == HCT_REQ_MODULE)
    check(r->op != NULL && r->tokens >= 1 && r->tokens <= HCT_MAX_TOKENS, "choose fields");
  if (r->verb == HCT_REQ_PIN) check(r->device && r->op && r->variant, "pin fields");
  if (r->tmin != 0) check(1 <= r->tmin && r->tmin <= r->tmax && r->tmax <= HCT_MAX_TOKENS, "range");
  check(r->until >= 0, "until");
  check(strlen(r->id) < sizeof r->id, "id text");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > HCT_MAX_LINE) return 0;
  hct_req_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  hct__error_clear();
  int rc = hct__req_parse((const char *)data, size, a);
  if (rc == 0) check_request(a);
  else check(rc < 0 && hct_last_error()[0] != '\0' && strchr(hct_last_error(), '\n') == NULL,
             "error message");
  /* The same line through jansson alone: the same answer. */
  hct__req_fast = 0;
  int rc2 = hct__req_parse((const char *)data, size, b);
  hct__req_fast = 1;
  check(rc == rc2, "fast scanner and jansson give the same code");
  if (rc == 0) {
    check(a->verb == b->verb && a->tokens == b->tokens && a->tmin == b->tmin &&
              a->tmax == b->tmax && a->until == b->until && (a->id[0] != 0) == (b->id[0] != 0),
          "fast scanner and jansson read the same request");
    check(strcmp(a->parity, b->parity) == 0, "same parity");
    check((a->op == NULL) == (b->op == NULL) && (!a->op || strcmp(a->op, b->op) == 0), "same op");
    check((a->device == NULL) == (b->device == NULL) &&
              (!a->device || strcmp(a->device, b->device) == 0),
          "same device");
  }
  hct__req_free(a);
  hct__req_free(b);
  free(a);
  free(b);
  return 0;
}
