/*
 * plan.c: a variant's launch plan for one T on one card, the one
 * evaluation of the manifest's launch expressions that the tuner
 * (tuner/run.c) and the client library (client/kernel.c) both use: the
 * names the expressions see (constants, the point, the card's figures, T)
 * and the first point whose constraints hold (the daemon's baseline answer
 * and the library's own fallback).
 */
#include <string.h>

#include "jit.h"

void hct__card_symbols(hct_symtab_t *syms, int arch_num, int sm_count, int64_t smem_optin,
                       int warp, int hip) {
  hct__symtab_set(syms, "SMEM_OPTIN", smem_optin);
  hct__symtab_set(syms, "SM_COUNT", sm_count);
  hct__symtab_set(syms, "WARP", warp);
  hct__symtab_set(syms, "ARCH", arch_num);
  hct__symtab_set(syms, "HIP", hip);
}

int hct__point_default(const hct_op_t *op, const hct_variant_t *v, const hct_symtab_t *card,
                       int tokens, hct_point_t *pt) {
  hct_point_t pts[64];
  int n = hct__param_points(v, pts, (int)HCT_ARRAY_SIZE(pts));
  for (int i = 0; i < n; i++) {
    hct_symtab_t syms;
    hct__point_symtab(op, v, &pts[i], &syms);
    for (int k = 0; card != NULL && k < card->n; k++)
      hct__symtab_set(&syms, card->syms[k].name, card->syms[k].value);
    hct__symtab_set(&syms, "T", tokens);
    /* The one constraint rule, partial: a figure not given (no card) leaves
     * its constraint undecided, which does not refuse; an evaluation error
     * fails the point. */
    char why[256];
    if (hct__constraints_hold(v, &syms, 1, why, sizeof why)) {
      *pt = pts[i];
      hct__error_clear();
      return 0;
    }
  }
  return hct__error(HCT_ENOENT, "variant '%s' of '%s': no parameter point fits T=%d here",
                    v->name, op->name, tokens);
}
