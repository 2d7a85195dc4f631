#!/bin/sh
# Proves that the kernel grid (tests/test_sanitize_grid.c, suite kernel_grid) launches every CUDA
# kernel the library contains, so that the sanitizers' run over it (gpu-check.sh's `sanitize`
# step) has watched every one: fails naming each kernel that no test launched.
#
# The kernels the library contains: every entry function (STO_ENTRY) of the ELF images in its
# fat binary (cuobjdump -symbols), and every .entry of its PTX (cuobjdump -ptx), by mangled
# name, so that every template instantiation counts on its own. The kernels launched: Nsight
# Compute (ncu) runs the grid's CUDA tests, following Criterion's worker processes, and prints
# the mangled name of every launch it profiles. It collects one launch statistic only, which
# needs no hardware counter and no replay, and leaves the clocks alone (--clock-control none),
# so it works without changing the device's settings.
#
# usage: tools/gpu/kernel-coverage.sh BINARY LIBRARY LOGDIR [criterion options...]
#   BINARY    the Criterion test binary (BUILD/tests/memra_tests)
#   LIBRARY   the library it loads (BUILD/libmemra.so.1)
#   the options go to BINARY (default: --filter='kernel_grid/*_cuda' --jobs=1: one profiled
#   worker at a time, as the profiler serialises them anyway)
#   NCU        the Nsight Compute CLI (default: from PATH or $CUDA_HOME/bin)
#   CUOBJDUMP  cuobjdump (default: from PATH or $CUDA_HOME/bin)
#   COVERAGE_TIMEOUT  seconds the profiled run may take (default 0: no limit)
#   Logs: LOGDIR/kernels.txt (contained), LOGDIR/launched.txt, LOGDIR/ncu.log.
set -u
# One collation for sort and comm.
export LC_ALL=C

if [ $# -lt 3 ]; then
    echo "usage: $0 BINARY LIBRARY LOGDIR [criterion options...]" >&2
    exit 2
fi
bin=$1
lib=$2
logdir=$3
shift 3
if [ $# -eq 0 ]; then
    set -- --filter='kernel_grid/*_cuda' --jobs=1
fi
here=$(cd "$(dirname "$0")" && pwd)
runner="$here/../../tests/run-criterion.sh"

tool() {
    command -v "$1" 2>/dev/null || echo "${CUDA_HOME:-/usr/local/cuda}/bin/$1"
}
ncu=${NCU:-$(tool ncu)}
cuobjdump=${CUOBJDUMP:-$(tool cuobjdump)}
for t in "$ncu" "$cuobjdump"; do
    if [ ! -x "$t" ]; then
        echo "coverage: $t not found (set NCU, CUOBJDUMP or CUDA_HOME)" >&2
        exit 2
    fi
done
# Demangled names in the report when a demangler is there; mangled ones otherwise.
demangle() {
    if command -v c++filt >/dev/null 2>&1; then
        c++filt
    else
        cat
    fi
}
mkdir -p "$logdir"

# STO_ENTRY marks a kernel among the symbols of an ELF image; a PTX image declares each kernel
# as ".entry NAME(" (a build for PTX alone has no ELF image until the driver compiles it).
{
    "$cuobjdump" -symbols "$lib" 2>/dev/null | awk '/STO_ENTRY/ { print $NF }'
    "$cuobjdump" -ptx "$lib" 2>/dev/null | sed -n 's/.*\.entry[[:space:]]\{1,\}\([A-Za-z_][A-Za-z0-9_$]*\).*/\1/p'
} | sort -u >"$logdir/kernels.txt"
contained=$(wc -l <"$logdir/kernels.txt")
if [ "$contained" -eq 0 ]; then
    echo "coverage: cuobjdump lists no kernel in $lib" >&2
    exit 1
fi

# The run must pass as well (run-criterion.sh checks its summary): a test that failed before its
# launches would leave kernels out for the wrong reason.
timeout --kill-after=15 "${COVERAGE_TIMEOUT:-0}" "$runner" "$ncu" --clock-control none \
    --target-processes all --print-kernel-base mangled --metrics launch__grid_size \
    "$bin" "$@" >"$logdir/ncu.log" 2>&1
status=$?
grep -oE '_Z[A-Za-z0-9_]+' "$logdir/ncu.log" | sort -u >"$logdir/launched.txt"
launched=$(comm -12 "$logdir/kernels.txt" "$logdir/launched.txt" | wc -l)
missing=$(comm -23 "$logdir/kernels.txt" "$logdir/launched.txt")
echo "coverage: $launched of the $contained kernels of $lib launched by $bin $*"
failed=0
if [ "$status" -ne 0 ]; then
    echo "coverage: the profiled run FAILED (status $status); see $logdir/ncu.log" >&2
    grep -E '==(ERROR|WARNING)==|run-criterion' "$logdir/ncu.log" | head -20 >&2
    failed=1
fi
if [ -n "$missing" ]; then
    echo "coverage: FAILED: never launched:" >&2
    printf '%s\n' "$missing" | demangle | sed 's/^/    /' >&2
    failed=1
fi
exit $failed
