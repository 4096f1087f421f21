/* cmd_daemon.c: placeholder until the command is written. */
#include "cli.h"

int cmd_daemon(int argc, char **argv) {
  (void)argc;
  return hct__usage_error(argv[0], "not built yet");
}
