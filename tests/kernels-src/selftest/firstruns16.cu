/*
 * firstruns16: (8) firstruns with FIRST_RUNS 16: right on every run of
 * every check (a check makes at most five runs of an allocation), wrong
 * from its 17th run in an allocation, so only the launches it makes while
 * being timed are wrong, and they are what an engine would get: it returns
 * at once, so it times fastest of all.  The verification after timing (its
 * timed launches' outputs) must record "timed", and it must not be chosen.
 */
#define FIRST_RUNS 16
#include "firstruns.cu"
