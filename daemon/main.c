/* main.c: the hctuned executable: `hctune daemon` under its own name. */
#include "daemon.h"

int main(int argc, char **argv) { return hct__daemon_main(argc, argv); }
