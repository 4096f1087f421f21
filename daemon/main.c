/* main.c: the hctuned executable: `hctune daemon` under its own name. */
#include "cli.h"

int main(int argc, char **argv) {
  argv[0] = "daemon";
  return cmd_daemon(argc, argv);
}
