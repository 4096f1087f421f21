/* main.c: the hctune executable; everything else is in libhctune.a. */
#include "cli.h"

int main(int argc, char **argv) { return hct__cli_main(argc - 1, argv + 1); }
