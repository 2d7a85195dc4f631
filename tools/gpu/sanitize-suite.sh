#!/bin/sh
# The sanitizer runs over the Criterion suite's CUDA tests, shared by `make memcheck` and
# tools/gpu/gpu-check.sh: sanitize.sh (each of compute-sanitizer's four tools, or those
# SANITIZER_TOOLS names) over one of two scopes.
#
# grid (the default): the kernel grid, suite kernel_grid (tests/test_sanitize_grid.c), in one
#   pass with memcheck's API-error reports on. It launches every CUDA kernel of the library in
#   every template instantiation (tools/gpu/kernel-coverage.sh proves it) on grids small enough
#   for racecheck, so all four tools finish in a few minutes.
#
# suite: every CUDA test, in two passes. racecheck does not finish this scope in minutes (over
#   the suite's large verify grids it ran on for minutes without an end): run it with
#   SANITIZER_TOOLS=memcheck, as gpu-check.sh's `sanitize-suite` step does.
#   1. Every CUDA test (SANITIZE_FILTER) except two kinds, with memcheck's API-error reports on.
#   2. The bad-input cases. Each sanitized process costs seconds to start, so instead of the
#      separate bad_input/cuda and bad_input_verify/cuda processes they run in one each,
#      bad_input/cuda_sweep and bad_input_verify/cuda_sweep (MEMRA_TEST_SWEEP=1), and so do
#      the copies' cases (bad_input_copy/cuda_sweep). Two of them ask for more memory than any
#      device has, to check the OUT_OF_MEMORY status, and memcheck would report the cudaMalloc
#      failure they provoke as an API error: this pass runs memcheck with --report-api-errors no
#      (memory access and leak checking stay on).
#   Left out of both: engine/explicit_cuda_without_device_is_no_device, which hides every device
#   from its process, so it runs nothing on a GPU for the tools to watch, and its deliberate
#   cudaErrorNoDevice would count as an API error.
#
# usage: tools/gpu/sanitize-suite.sh BINARY LOGDIR [grid|suite]
#   SANITIZE_FILTER   Criterion --filter of the (first) pass (default: kernel_grid/*_cuda for
#                     grid; every CUDA test but the above for suite)
#   Logs: LOGDIR/<tool>.log (the grid, or pass 1) and LOGDIR/sweep-<tool>.log (pass 2).
#   sanitize.sh's variables (SANITIZER, SANITIZER_TOOLS, SANITIZE_TIMEOUT) apply to every pass.
set -u

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: $0 BINARY LOGDIR [grid|suite]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
scope=${3:-grid}

failed=0
case $scope in
grid)
    "$here/sanitize.sh" "$1" "$2" --filter="${SANITIZE_FILTER:-kernel_grid/*_cuda}" || failed=1
    ;;
suite)
    filter=${SANITIZE_FILTER:-'@(*/*_cuda|bad_input/cuda_good*|bad_input_verify/cuda_good*|engine/auto_*cuda*|engine/env_cuda_*|bad_input_copy/cuda_good*)'}
    "$here/sanitize.sh" "$1" "$2" --filter="$filter" || failed=1
    MEMRA_TEST_SWEEP=1 SANITIZE_TAG=sweep SANITIZE_MEMCHECK_FLAGS='--report-api-errors no' \
        "$here/sanitize.sh" "$1" "$2" --filter='@(bad_input/cuda_sweep|bad_input_verify/cuda_sweep|bad_input_copy/cuda_sweep)' ||
        failed=1
    ;;
*)
    echo "$0: unknown scope '$scope' (grid or suite)" >&2
    exit 2
    ;;
esac
exit $failed
