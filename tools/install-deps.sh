#!/usr/bin/env bash
# Installs the Debian packages that `make test` (or, with `bench`, `make bench`) needs and are
# missing, so that both commands work on a fresh machine. As root it runs apt-get; otherwise it
# names the packages and the command to run, and fails. cargo is taken from rustup's
# ~/.cargo/bin when present, else from Debian.
#
# usage: tools/install-deps.sh test|bench
set -euo pipefail

mode=${1:-test}
case "$mode" in
bench) packages="build-essential gnuplot-nox" ;;
test)
    # The C toolchain, Criterion, the header/bindings generators, the ABI checker, the plotter,
    # the sanitizer/fuzzer runtimes, and jemalloc (the bad-input suite and the fuzz corpus also
    # run with it preloaded: an allocator that does not scribble over freed blocks the way
    # glibc's does).
    packages="build-essential pkg-config libcriterion-dev cbindgen bindgen abigail-tools
              gnuplot-nox valgrind clang libclang-rt-14-dev libjemalloc2"
    # clang-format for `make format-check`.
    packages="$packages clang-format"
    ;;
*)
    echo "usage: $0 test|bench" >&2
    exit 2
    ;;
esac

missing=$(for p in $packages; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
done)
if [ "$mode" = test ] && ! command -v cargo >/dev/null && [ ! -x "$HOME/.cargo/bin/cargo" ] &&
    [ ! -x ~root/.cargo/bin/cargo ]; then
    missing="$missing cargo rustc"
fi
missing=$(echo $missing)
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages: $missing" >&2
    echo "install-deps: run: sudo apt-get install -y $missing" >&2
    exit 1
fi
echo "install-deps: installing $missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
