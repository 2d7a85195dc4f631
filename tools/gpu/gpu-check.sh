#!/bin/bash
# Everything the CUDA backend must prove on a machine with a GPU, in one command run from the
# repository root: the Criterion suite, the four compute-sanitizer tools over the kernel grid
# (every CUDA kernel of the library in every template instantiation, on small grids) and over one
# bench process, the proof that the grid launches every kernel, the bench's fingerprints and its
# per-operation timings, the bench, and the scan's machine code. Each step runs under its own
# time limit and logs to OUT; name the steps you want, or run them all.
#
# usage: tools/gpu/gpu-check.sh [STEP...]
#   steps: info hash suite sanitize coverage bench-sanitize per-op bench sass copy (default: all,
#   in that order), and sanitize-suite (only when named)
#   suite runs every test of the Criterion suite, with the generated CUDA bad-input cases
#   (bad_input*/cuda) in their one-process sweeps (bad_input*/cuda_sweep, MEMRA_TEST_SWEEP=1)
#   rather than as a test process each: a CUDA test process spends most of its time creating its
#   CUDA context, and those 2,000 cases took 60 s for every 255 on an H100 with Criterion's 16
#   processes at once, against 4 s for the sweep of the largest suite. SUITE_SEPARATE=1 runs them
#   as separate tests too (give it SUITE_TIMEOUT=900 or more).
#   hash compares the fingerprints of every output of the packed verify (memra_bench --mode
#   hash) with those of libmemra 1.0.0, recorded on an H200 (tools/gpu/hash-1.0.0.txt): a
#   kernel change must not change a single bit.
#   sanitize runs memcheck (with leak checking), racecheck, initcheck and synccheck over the
#   kernel grid, suite kernel_grid of tests/test_sanitize_grid.c (tools/gpu/sanitize-suite.sh,
#   scope grid).
#   coverage proves that the kernel grid launches every kernel the library contains, and fails
#   naming any it does not (tools/gpu/kernel-coverage.sh: Nsight Compute against cuobjdump).
#   sanitize-suite runs memcheck alone over every CUDA test of the suite, the bad-input sweeps
#   included (sanitize-suite.sh, scope suite); racecheck does not finish that scope in minutes.
#   per-op times each operation of the packed program alone (memra_bench --mode per-op).
#   copy times the 1.2 batched state copy against one copy per layer and the bandwidth floor
#   (memra_bench --mode copy).
#
# Build first, on the GPU machine or on any machine with nvcc:
#   make BUILD=build-cuda lib test-c-build bench-build
# and run either from that build folder (BUILD=build-cuda, the default), or from a compact copy
# made by tools/gpu/stage.sh build-cuda gpu-stage and copied to the GPU machine (BUILD=gpu-stage);
# the staged copy carries Criterion's libraries in gpu-stage/crit.
#
#   BUILD            the build or staged folder (default build-cuda)
#   OUT              where the logs go (default /tmp/memra-gpu-check)
#   CRITERION_LIBS   a folder of Criterion libraries for the test binary (default BUILD/crit
#                    when it exists; none is needed where libcriterion is installed)
#   CUDA_HOME        the CUDA toolkit, for compute-sanitizer, ncu and cuobjdump (default
#                    /usr/local/cuda)
#   SANITIZE_FILTER  Criterion --filter of the sanitizers' (first) pass (see sanitize-suite.sh)
#   SUITE_SANITIZER_TOOLS  the tools of sanitize-suite (default memcheck)
#   BENCH_ARGS       options for memra_bench (default: the full sweep)
#   PER_OP_ARGS      options for memra_bench --mode per-op (default: the ornith shape, T 1, 2,
#                    4, 8 and 16, B 1 and 32)
#   SUITE_SEPARATE   1: the suite step also runs each generated CUDA bad-input case as a test
#   SUITE_TIMEOUT    seconds for the whole Criterion suite (default 400); like every limit here,
#                    a hard one: what still runs 15 s after it is killed
#   SANITIZE_TIMEOUT seconds for each sanitizer tool (default 120; sanitize-suite 400)
#   COVERAGE_TIMEOUT seconds for the profiled run of the coverage step (default 300)
set -u -o pipefail

build=${BUILD:-build-cuda}
out=${OUT:-/tmp/memra-gpu-check}
steps=${*:-info hash suite sanitize coverage bench-sanitize per-op bench sass copy}
bench=$build/bench/memra_bench
crit=${CRITERION_LIBS:-}
if [ -z "$crit" ] && [ -d "$build/crit" ]; then
    crit=$build/crit
fi
mkdir -p "$out"
if [ -n "$crit" ]; then
    export LD_LIBRARY_PATH="$(cd "$crit" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"
rc=0

step() {
    echo "=== $1 ($(date +%T))"
}

# Appends every file of the folder $1 to the file $2, each under its name, and removes the
# folder: one file per kind of log, the easier to collect from OUT.
collect() {
    for f in "$1"/*; do
        [ -f "$f" ] || continue
        echo "##### $f"
        cat "$f"
    done >>"$2"
    rm -rf "$1"
}

for s in $steps; do
    case $s in
    info)
        step info
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used \
            --format=csv
        ldd "$build/libmemra.so.1" | grep -E 'cuda|criterion' || echo "libmemra: no CUDA library linked dynamically"
        ;;
    hash)
        step hash
        if "$bench" --mode hash --backend cuda >"$out/hash.txt" 2>&1 &&
            diff tools/gpu/hash-1.0.0.txt "$out/hash.txt"; then
            echo "hash: the same bits as libmemra 1.0.0"
        else
            echo "hash: FAILED (fingerprints differ from tools/gpu/hash-1.0.0.txt)"
            rc=1
        fi
        ;;
    suite)
        step suite
        if [ "${SUITE_SEPARATE:-0}" = 1 ]; then
            suite_filter='*'
        else
            suite_filter='!(bad_input*/cuda)'
        fi
        MEMRA_TEST_SWEEP=1 timeout --kill-after=15 "${SUITE_TIMEOUT:-400}" tests/run-criterion.sh \
            "$build/tests/memra_tests" --filter="$suite_filter" >"$out/suite.log" 2>&1
        st=$?
        sed 's/\x1b\[[0-9;]*m//g' "$out/suite.log" | grep -E 'Synthesis|run-criterion|SKIP|FAIL|\[FAIL\]' | tail -20
        case $st in
        0) ;;
        124 | 137) echo "suite: FAILED: not done within SUITE_TIMEOUT (${SUITE_TIMEOUT:-400} s)"; rc=1 ;;
        *) echo "suite: FAILED ($st)"; rc=1 ;;
        esac
        ;;
    sanitize)
        step sanitize
        SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-120} tools/gpu/sanitize-suite.sh \
            "$build/tests/memra_tests" "$out/sanitize" grid || { echo "sanitize: FAILED"; rc=1; }
        collect "$out/sanitize" "$out/sanitizers.log"
        ;;
    coverage)
        step coverage
        COVERAGE_TIMEOUT=${COVERAGE_TIMEOUT:-300} tools/gpu/kernel-coverage.sh \
            "$build/tests/memra_tests" "$build/libmemra.so.1" "$out/coverage" ||
            { echo "coverage: FAILED"; rc=1; }
        collect "$out/coverage" "$out/coverage.log"
        ;;
    sanitize-suite)
        step sanitize-suite
        SANITIZER_TOOLS=${SUITE_SANITIZER_TOOLS:-memcheck} \
            SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-400} tools/gpu/sanitize-suite.sh \
            "$build/tests/memra_tests" "$out/sanitize-suite" suite ||
            { echo "sanitize-suite: FAILED"; rc=1; }
        collect "$out/sanitize-suite" "$out/sanitizers.log"
        ;;
    bench-sanitize)
        # The fingerprint run is one process running the packed program's kernels on both
        # shapes: the sanitizers watch it directly, next to the Criterion children.
        step bench-sanitize
        SANITIZE_PLAIN=1 SANITIZE_TAG=bench SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-120} \
            tools/gpu/sanitize.sh "$bench" "$out/sanitize-bench" --mode hash --backend cuda ||
            { echo "bench-sanitize: FAILED"; rc=1; }
        collect "$out/sanitize-bench" "$out/sanitizers.log"
        ;;
    per-op)
        step per-op
        if [ -x "$bench" ]; then
            # shellcheck disable=SC2086
            timeout --kill-after=15 300 "$bench" --mode per-op --backend cuda \
                ${PER_OP_ARGS:---shape ornith --t 1,2,4,8,16 --b 1,32} 2>&1 |
                tee "$out/per-op.log" || rc=1
        else
            echo "per-op: $bench not built"
        fi
        ;;
    bench)
        step bench
        if [ -x "$bench" ]; then
            # shellcheck disable=SC2086
            timeout --kill-after=15 240 "$bench" --out "$out" ${BENCH_ARGS:-} 2>&1 |
                tee "$out/bench.log" || rc=1
        else
            echo "bench: $bench not built"
        fi
        ;;
    sass)
        step sass
        # The scan's machine code, to read which multiply-adds ptxas fused.
        cuobjdump --dump-sass --gpu-architecture sm_90 "$build/obj/kernels/cuda/gdn_scan.o" \
            >"$out/scan.sass" 2>&1 || echo "sass: cuobjdump failed"
        cuobjdump --dump-resource-usage "$build/libmemra.so.1" 2>&1 | grep -E 'Function|REG' |
            head -40
        ;;
    copy)
        step copy
        if [ -x "$bench" ]; then
            timeout --kill-after=15 300 "$bench" --mode copy --backend cuda 2>&1 | tee "$out/copy.log" || rc=1
        else
            echo "copy: $bench not built"
        fi
        ;;
    *)
        echo "unknown step $s" >&2
        rc=2
        ;;
    esac
done
echo "=== done ($(date +%T)), status $rc"
exit $rc
