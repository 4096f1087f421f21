/*
 * probe_interrupt.c: an interrupted probe: the flag SIGINT and SIGTERM set
 * (hct__probe installs the handler), asked by every stage between
 * candidates (hct__probe_check_interrupt).  Below the stages and the
 * driver alike, so that the stages need not call back into probe.c.
 *
 * The handler runs in a signal context; everything else on the loop
 * thread.
 */
#include <signal.h>

#include "probe_internal.h"

/*
 * Ctrl-C (or SIGTERM) during a probe: the probe stops at the next
 * candidate, marks its run "interrupted" and keeps every trial recorded so
 * far; a second one ends the process at once (the database stays sound:
 * every trial is its own transaction, and the worker dies with us).
 */
static volatile sig_atomic_t probe_interrupted;

void hct__probe_on_interrupt(int sig) {
  if (probe_interrupted) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  probe_interrupted = 1;
}

int hct__probe_check_interrupt(const probe_t *P) {
  if (!probe_interrupted) return 0;
  return hct__error(HCT_EINTERRUPTED, "probe interrupted: the trials recorded so far are kept in '%s'",
                    P->dbpath);
}

void hct__probe_interrupt_clear(void) { probe_interrupted = 0; }
