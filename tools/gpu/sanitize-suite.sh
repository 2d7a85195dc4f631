#!/bin/sh
# The sanitizer run over the Criterion suite's CUDA tests, shared by `make memcheck` and
# tools/gpu/gpu-check.sh: sanitize.sh (each of compute-sanitizer's four tools) in two passes.
#
#   1. Every CUDA test (SANITIZE_FILTER) except two kinds, with memcheck's API-error reports on.
#   2. The bad-input cases. Each sanitized process costs seconds to start, so instead of the
#      separate bad_input/cuda and bad_input_verify/cuda processes they run in one each,
#      bad_input/cuda_sweep and bad_input_verify/cuda_sweep (MEMRA_TEST_SWEEP=1), and so do
#      the copies' cases (bad_input_copy/cuda_sweep). Two of them ask for more memory than any device has, to check the
#      OUT_OF_MEMORY status, and memcheck would report the cudaMalloc failure they provoke as an
#      API error: this pass runs memcheck with --report-api-errors no (memory access and leak
#      checking stay on).
#
# Left out of both: engine/explicit_cuda_without_device_is_no_device, which hides every device
# from its process, so it runs nothing on a GPU for the tools to watch, and its deliberate
# cudaErrorNoDevice would count as an API error.
#
# usage: tools/gpu/sanitize-suite.sh BINARY LOGDIR
#   SANITIZE_FILTER   Criterion --filter of pass 1 (default: every CUDA test but the above)
#   Logs: LOGDIR/<tool>.log (pass 1) and LOGDIR/sweep-<tool>.log (pass 2). sanitize.sh's
#   variables (SANITIZER, SANITIZER_TOOLS, SANITIZE_TIMEOUT) apply to both passes.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 BINARY LOGDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
filter=${SANITIZE_FILTER:-'@(*/*_cuda|bad_input/cuda_good*|bad_input_verify/cuda_good*|engine/auto_*cuda*|engine/env_cuda_*|bad_input_copy/cuda_good*)'}

failed=0
"$here/sanitize.sh" "$1" "$2" --filter="$filter" || failed=1
MEMRA_TEST_SWEEP=1 SANITIZE_TAG=sweep SANITIZE_MEMCHECK_FLAGS='--report-api-errors no' \
    "$here/sanitize.sh" "$1" "$2" --filter='@(bad_input/cuda_sweep|bad_input_verify/cuda_sweep|bad_input_copy/cuda_sweep)' ||
    failed=1
exit $failed
