#!/bin/sh
# Installs the Debian packages hctune builds with, when run as root; as any
# other user, prints the apt-get line and stops.  `install-deps.sh check`
# adds what only the tests need, which machines running make probe do not:
# clang (with its recommended libclang-rt, libFuzzer's runtime) for the
# fuzzer, chromium for tests/test_report.c's headless browser, and
# postgresql for the throwaway server of tests/test_fleet_pg.c.
set -e
pkgs="build-essential libuv1-dev libsqlite3-dev libjansson-dev libxxhash-dev libcmocka-dev libamdhip64-dev libsystemd-dev"
# libpq-dev: the live fleet's client (hctune fleet, hctuned --fleet-url).
pkgs="$pkgs libpq-dev"
[ "$1" = check ] && pkgs="$pkgs clang chromium postgresql"
# tests/test_install.c: python3-venv for a fresh venv that pip installs
# ./python into with no index (its ensurepip brings pip), man-db and
# groff-base to render the man pages with warnings on, pkgconf for
# pkg-config --cflags --libs hctune against the installed tree.
[ "$1" = check ] && pkgs="$pkgs python3-venv man-db groff-base pkgconf"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "hctune: missing packages:$missing" >&2
  echo "hctune: run as root: apt-get install -y$missing" >&2
  exit 1
fi
echo "hctune: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q || true
apt-get install -y -q $missing
