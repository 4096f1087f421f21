/*
 * cmd_worker.c: `hctune worker`, the process that runs candidates on a GPU
 * for a probe.  The serving loop is the tuner's (tuner/worker_serve.c,
 * hct__worker_serve; tuner/worker.h has the design and the protocol): this
 * command parses its options and sets up the process around it.
 */
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cli.h"
#include "tuner.h"

static const char usage[] =
    "usage: hctune worker\n\n"
    "Internal: started by 'hctune probe' to run candidates on a GPU in a\n"
    "process of their own.  Reads JSON requests on stdin, one per line,\n"
    "and writes one reply per line on stdout (see tuner/worker.h).\n";

int cmd_worker(int argc, char **argv) {
  const hct_option_t opts[] = {HCT_OPT_END};
  int parsed = hct__cli_options(argc, argv, opts, usage, NULL);
  if (parsed != 0) return parsed == HCT_OPTS_HELP ? HCT_EXIT_OK : parsed;
  /* Ctrl-C in a terminal reaches the whole process group: the probe
   * decides what an interrupt means (it stops between candidates), and a
   * worker dying of it mid-request would look like the candidate's fault. */
  signal(SIGINT, SIG_IGN);
  /* A worker must not outlive its probe: one killed (SIGKILL, say) while
   * this process spins in a hung kernel would leave it holding the GPU
   * forever.  The kernel kills us when the parent goes; the check after
   * covers a parent that went before the call. */
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return HCT_EXIT_FAIL;
  int rc = hct__worker_serve();
  if (rc == HCT_EFAULT) {
    /* The context is poisoned: release nothing, on the GPU or off it (the
     * driver cleans up when the process ends), and leave at once: no
     * exit handlers that might touch the context. */
    _exit(HCT_EXIT_FAIL);
  }
  return rc == 0 ? HCT_EXIT_OK : hct__cli_fail(rc);
}
