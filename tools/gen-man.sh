#!/bin/sh
# Writes a man page on stdout from the programs' own --help texts, so that
# the page cannot drift from the program: make runs it at build time.
#   tools/gen-man.sh hctune  BIN   hctune(1): `hctune --help`, then a
#                                  section per command of its list, from
#                                  `hctune CMD --help`
#   tools/gen-man.sh hctuned BIN   hctuned(8): `hctuned --help`
# The help texts are laid out for an 80-column terminal, so they go in
# no-fill blocks (.nf) as they are; roff's escape character and lines
# beginning with a control character are escaped.
set -e
page=$1 bin=$2
[ -x "$bin/hctune" ] || { echo "gen-man.sh: '$bin/hctune' is not an executable (build it: make)" >&2; exit 1; }
version=$("$bin/hctune" --version | awk '{print $2}')

# roff-safe text: \ -> \e, a leading . or ' -> \&., - -> \- (a minus: what
# one types, and what man's search finds).
roff() {
  sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
}

block() {
  echo ".nf"
  roff
  echo ".fi"
}

case $page in
  hctune)
    cat <<HEAD
.TH HCTUNE 1 "" "hctune $version" "hctune manual"
.SH NAME
hctune \\- pick GPU kernel variants per card for inference engines
.SH SYNOPSIS
.B hctune
.I command
.RI [ options ]
.SH DESCRIPTION
hctune compiles an op's kernel variants at run time, checks their outputs
against a reference, times those that pass and records the winner per card,
op and token count; the daemon
.BR hctuned (8)
answers engines from those records.
Every command takes
.B \\-\\-help
and
.B \\-\\-opt value
or
.BR \\-\\-opt=value .
.PP
HEAD
    "$bin/hctune" --help | block
    echo ".SH COMMANDS"
    # The command list as the program prints it: the lines between
    # "commands:" and the next blank line, the first word of each.
    for cmd in $("$bin/hctune" --help | awk '/^commands:/ {f = 1; next} f && /^$/ {exit} f {print $1}'); do
      echo ".SS $(printf '%s\n' "$cmd" | sed 's/-/\\-/g')"
      "$bin/hctune" "$cmd" --help | block
    done
    cat <<TAIL
.SH FILES
.TP
.I PREFIX/share/hctune/kernels\\-src
the ops' manifests and templates
.TP
.I ~/.local/state/hctune/hctune.db
the results database (see
.BR \\-\\-db )
.SH SEE ALSO
.BR hctuned (8)
TAIL
    ;;
  hctuned)
    [ -x "$bin/hctuned" ] || { echo "gen-man.sh: '$bin/hctuned' is not an executable (build it: make)" >&2; exit 1; }
    cat <<HEAD
.TH HCTUNED 8 "" "hctune $version" "hctune manual"
.SH NAME
hctuned \\- the hctune daemon: answers engines which kernel variant to run
.SH SYNOPSIS
.B hctuned
.RI [ options ]
.SH DESCRIPTION
HEAD
    "$bin/hctuned" --help | block
    cat <<TAIL
.SH SEE ALSO
.BR hctune (1),
the unit files hctuned.service and hctuned.socket
TAIL
    ;;
  *)
    echo "gen-man.sh: '$page' is not a page this script writes (hctune or hctuned)" >&2
    exit 2 ;;
esac
