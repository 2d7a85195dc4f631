#!/bin/sh
# Prints the one line that makes programs find the libmemra installed in LIBDIR at run time
# (`make install` runs this after installing). A directory the dynamic loader already searches
# (listed by `ldconfig -v`: its trusted directories and those of /etc/ld.so.conf) needs only its
# cache refreshed; any other directory is found through a run path recorded in each program,
# which memra.pc offers as its `rpath` variable.
#
# usage: abi/loader-hint.sh LIBDIR
set -eu

[ $# -eq 1 ] || { echo "usage: $0 LIBDIR" >&2; exit 2; }
libdir=$1
# Symbolic links (a merged /usr, a lib64 link) must not make a searched directory look foreign.
real=$(realpath -m "$libdir")

ldconfig=$(command -v ldconfig 2>/dev/null || true)
for c in /sbin/ldconfig /usr/sbin/ldconfig; do
    [ -n "$ldconfig" ] || { [ -x "$c" ] && ldconfig=$c; } || true
done

searched=no
if [ -n "$ldconfig" ]; then
    # -N -X: list the directories without touching the cache or the links.
    for d in $("$ldconfig" -v -N -X 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'); do
        if [ "$(realpath -m "$d")" = "$real" ]; then
            searched=yes
        fi
    done
fi

if [ "$searched" = yes ]; then
    echo "libmemra installed in $libdir, which the dynamic loader searches: run \`ldconfig\` (as root) once so that programs find libmemra"
else
    echo "libmemra installed in $libdir, outside the dynamic loader's search path: link programs with -Wl,-rpath,$libdir (\`pkg-config --variable=rpath memra\`; for Rust: RUSTFLAGS=\"-C link-arg=-Wl,-rpath,$libdir\")"
fi
