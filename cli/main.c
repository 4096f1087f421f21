/* main.c: the hctune executable; everything else is in libhctune.a. */
#include <uv.h>

#include "cli.h"

int main(int argc, char **argv) {
  int rc = hct__cli_main(argc - 1, argv + 1);
  /* Compiles ran on libuv's thread pool; end its threads before exit, so
   * nothing (LeakSanitizer's exit-time scan included, which crashed on the
   * dynamic TLS NVRTC left in a live pool thread) meets them half torn
   * down.  Every loop is closed by now. */
  uv_library_shutdown();
  return rc;
}
