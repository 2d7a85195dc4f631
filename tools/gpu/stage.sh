#!/bin/bash
# Copies what tools/gpu/gpu-check.sh runs out of a build folder into a small, self-contained
# folder, for a GPU machine that has neither the compilers nor Criterion installed. A fat-binary
# build folder holds every object file (hundreds of MiB); the staged folder holds only:
#
#   libmemra.so.1            the library, dereferenced
#   tests/memra_tests        the Criterion suite            (make BUILD=... test-c-build)
#   bench/memra_bench        the benchmark, its fingerprint and per-op modes
#                                                           (make BUILD=... bench-build)
#   rust-gpu/                the Rust GPU bundle, if built  (make BUILD=... rust-gpu-bundle)
#   obj/kernels/cuda/gdn_scan.o   the scan's object, for gpu-check.sh's `sass` step
#   crit/                    libcriterion.so.3 and the libraries it pulls in, except the C and
#                            C++ runtimes every Linux machine has
#
# The binaries find the library one folder up through their $ORIGIN run paths, so the staged
# folder runs from wherever it is copied: on the GPU machine, from a checkout of the same commit,
#   BUILD=STAGE tools/gpu/gpu-check.sh
# (gpu-check.sh puts STAGE/crit on LD_LIBRARY_PATH by itself).
#
# usage: tools/gpu/stage.sh [BUILD [STAGE]]    (defaults build-cuda and gpu-stage)
set -euo pipefail

build=${1:-build-cuda}
stage=${2:-gpu-stage}
if [ ! -e "$build/libmemra.so.1" ]; then
    echo "stage: $build/libmemra.so.1 not found: run make BUILD=$build lib test-c-build" \
        "bench-build first" >&2
    exit 1
fi

rm -rf "$stage"
mkdir -p "$stage"
cp -L "$build/libmemra.so.1" "$stage/"
for f in tests/memra_tests bench/memra_bench obj/kernels/cuda/gdn_scan.o; do
    if [ -e "$build/$f" ]; then
        mkdir -p "$stage/$(dirname "$f")"
        cp -L "$build/$f" "$stage/$f"
    else
        echo "stage: $build/$f not built, left out"
    fi
done
if [ -d "$build/rust-gpu" ]; then
    cp -rL "$build/rust-gpu" "$stage/rust-gpu"
fi

# Criterion, for the test binary (it is linked dynamically against libcriterion.so.3).
crit=$(ldconfig -p | awk '/libcriterion\.so\.3 /{print $NF; exit}')
if [ -n "$crit" ]; then
    mkdir -p "$stage/crit"
    cp -L "$crit" "$stage/crit/"
    ldd "$crit" | awk '/=> \//{print $3}' |
        grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libresolv|libpthread|libdl|librt)\.so|ld-linux' |
        while read -r f; do cp -L "$f" "$stage/crit/"; done
else
    echo "stage: libcriterion.so.3 not found here; the GPU machine must provide Criterion"
fi
echo "staged $build into $stage ($(du -sh "$stage" | cut -f1))"
