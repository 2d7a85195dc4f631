#!/bin/sh
# The public header must compile warning-free for every consumer it promises to serve: C99, C11,
# C++11 and C++17, with -Wall -Wextra -Werror -pedantic (and a few more warnings that a strict
# consumer may turn on), with CC/CXX and, where installed, clang. It is included twice to prove the include guard, and first, to prove
# it is self-contained. The C++17 translation unit is also linked against the library: without
# extern "C" around the declarations it would reference mangled names and fail to link.
#
# usage: abi/check-header.sh INCLUDE_DIR LIBRARY WORKDIR
# CC and CXX are taken from the environment.
set -eu

if [ $# -ne 3 ]; then
    echo "usage: $0 INCLUDE_DIR LIBRARY WORKDIR" >&2
    exit 2
fi
incdir=$1 lib=$2 work=$3
cc=${CC:-cc}
cxx=${CXX:-c++}
mkdir -p "$work"

cat >"$work/header_tu.c" <<'EOF'
#include "memra.h"
#include "memra.h"

/* Every type the header declares is complete (or an opaque handle) where a consumer needs it. */
int memra_header_tu_sizes(void);
int memra_header_tu_sizes(void)
{
    MemraEngineOptions options;
    MemraSliceF32 a;
    MemraSliceMutF32 b;
    MemraSliceU64 c;
    MemraSliceMutU64 d;
    MemraStepFn step = 0;
    MemraEngine *engine = 0;
    MemraGraph *graph = 0;
    (void)step;
    (void)engine;
    (void)graph;
    return (int)(sizeof options + sizeof a + sizeof b + sizeof c + sizeof d) + MEMRA_ABI_VERSION;
}
EOF

cat >"$work/header_tu.cpp" <<'EOF'
#include "memra.h"
#include "memra.h"

int main()
{
    // Calls through the C linkage the header promises; the values are irrelevant here.
    MemraEngineOptions options;
    if (memra_engine_options_init(&options) != MEMRA_STATUS_OK) {
        return 1;
    }
    return memra_abi_version() >> 16 == MEMRA_VERSION_MAJOR ? 0 : 1;
}
EOF

# $cc, $cxx (which may be "ccache gcc") and $warn are word lists, hence unquoted below.
warn="-Wall -Wextra -Werror -pedantic -Wshadow -Wundef -Wcast-qual"
compile_all() {
    c_compiler=$1 cxx_compiler=$2 tag=$3
    for std in c99 c11; do
        echo "check-header: $c_compiler -std=$std"
        # shellcheck disable=SC2086
        $c_compiler -std=$std $warn -Wstrict-prototypes -Wmissing-prototypes -I"$incdir" \
            -c "$work/header_tu.c" -o "$work/header_tu_${tag}_$std.o"
    done
    for std in c++11 c++17; do
        echo "check-header: $cxx_compiler -std=$std"
        # shellcheck disable=SC2086
        $cxx_compiler -std=$std $warn -Wold-style-cast -I"$incdir" -c "$work/header_tu.cpp" \
            -o "$work/header_tu_${tag}_$std.o"
    done
}

compile_all "$cc" "$cxx" default
# Hosts also build with clang (CI installs it); its -pedantic differs from gcc's in places.
if command -v clang >/dev/null && command -v clang++ >/dev/null; then
    compile_all clang clang++ clang
else
    echo "check-header: clang not installed here, so the header was checked with $cc/$cxx only"
fi
echo "check-header: linking the C++17 unit against $lib"
$cxx -o "$work/header_tu_cxx" "$work/header_tu_default_c++17.o" "$lib"
echo "check-header: abi/memra.h is clean as C99, C11, C++11 and C++17"
