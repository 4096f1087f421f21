/*
 * cmd_daemon.c: `hctune daemon` (also the hctuned executable): answers
 * engines over a Unix socket which variant to run.  The daemon owns its
 * command line (daemon/options.c), as git's builtin/upload-pack.c calls
 * upload_pack(): this file only routes the command there.
 */
#include "cli.h"
#include "daemon.h"

int cmd_daemon(int argc, char **argv) { return hct__daemon_main(argc, argv); }
