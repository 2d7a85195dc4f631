#!/bin/bash
# Everything the CUDA backend must prove on a GPU machine, in one command (the device tool's
# `run`, from the repository root): the Criterion suite, the four compute-sanitizer tools over
# the suite's CUDA tests, the CUDA engineer's probe (bit identity + timings), and the bench.
# Logs go to $OUT (the device tool's result folder; /tmp/memra-gpu-check elsewhere). Each step
# runs under its own time limit; the whole list can exceed the tool's 10 minutes (the full
# suite alone took about 3 minutes on 2026-11-30), so name the steps a call needs.
#
# usage: tools/device/gpu-check.sh [STEP...]
#   steps: info hash suite sanitize probe-sanitize probe bench sass (default: all, in that order)
#   hash compares the probe's fingerprints of every packed output with those of libmemra 1.0.0
#   (tools/device/hash-1.0.0.txt): a kernel change must not change a bit.
# Built here first (see kernels/cuda/NOTES.md, "Running on the GPU machine"):
#   make BUILD=build-cuda lib test-c-build bench-build; tools/device/build-probe.sh build-cuda
#   /work/shared/tools/bundle-criterion-libs .device/crit
# and carried: the binaries staged in .device/stage (the fat-binary build folder is over the
# 64 MiB a call can carry; NOTES.md says how to stage), and .device/crit.
#   BUILD            the build or staging folder (default build-cuda)
#   CRITERION_LIBS   the bundled Criterion libraries (default .device/crit)
#   SANITIZE_FILTER  Criterion --filter of the sanitizers' first pass (see sanitize-suite.sh)
#   BENCH_ARGS       options for memra_bench (default: the full sweep)
#   SUITE_TIMEOUT    seconds for the whole Criterion suite (default 400)
#   SANITIZE_TIMEOUT seconds for each sanitizer tool (default 120)
set -u -o pipefail

build=${BUILD:-build-cuda}
crit=${CRITERION_LIBS:-.device/crit}
out=${OUT:-/tmp/memra-gpu-check}
steps=${*:-info hash suite sanitize probe-sanitize probe bench sass}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/$crit${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"
rc=0

step() {
    echo "=== $1 ($(date +%T))"
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
        if "$build/tools/probe" hash >"$out/hash.txt" 2>&1 &&
            diff tools/device/hash-1.0.0.txt "$out/hash.txt"; then
            echo "hash: the same bits as libmemra 1.0.0"
        else
            echo "hash: FAILED (fingerprints differ from tools/device/hash-1.0.0.txt)"
            rc=1
        fi
        ;;
    suite)
        step suite
        timeout "${SUITE_TIMEOUT:-400}" tests/run-criterion.sh "$build/tests/memra_tests" >"$out/suite.log" 2>&1
        st=$?
        sed 's/\x1b\[[0-9;]*m//g' "$out/suite.log" | grep -E 'Synthesis|run-criterion|SKIP|FAIL|\[FAIL\]' | tail -20
        [ $st -eq 0 ] || { echo "suite: FAILED ($st)"; rc=1; }
        ;;
    sanitize)
        step sanitize
        SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-120} tools/device/sanitize-suite.sh \
            "$build/tests/memra_tests" "$out/sanitize" || { echo "sanitize: FAILED"; rc=1; }
        # Only eight files come back: fold the four logs into one.
        for f in "$out"/sanitize/*.log; do
            echo "##### $f"
            cat "$f"
        done >>"$out/sanitizers.log" 2>/dev/null
        rm -rf "$out/sanitize"
        ;;
    probe-sanitize)
        # The probe is one process running every kernel (both shapes, every d_conv, in place):
        # the sanitizers watch it directly, next to the Criterion children.
        step probe-sanitize
        SANITIZE_PLAIN=1 SANITIZE_TAG=probe SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-120} \
            tools/device/sanitize.sh \
            "$build/tools/probe" "$out/sanitize-probe" check || { echo "probe-sanitize: FAILED"; rc=1; }
        for f in "$out"/sanitize-probe/*.log; do
            echo "##### $f"
            cat "$f"
        done >>"$out/sanitizers.log" 2>/dev/null
        rm -rf "$out/sanitize-probe"
        ;;
    probe)
        step probe
        if [ -x "$build/tools/probe" ]; then
            timeout 200 "$build/tools/probe" 2>&1 | tee -a "$out/probe.log" || rc=1
        else
            echo "probe: $build/tools/probe not built"
        fi
        ;;
    bench)
        step bench
        if [ -x "$build/bench/memra_bench" ]; then
            # shellcheck disable=SC2086
            timeout 240 "$build/bench/memra_bench" --out "$out" ${BENCH_ARGS:-} 2>&1 |
                tee "$out/bench.log" || rc=1
        else
            echo "bench: $build/bench/memra_bench not built"
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
    *)
        echo "unknown step $s" >&2
        rc=2
        ;;
    esac
done
echo "=== done ($(date +%T)), status $rc"
exit $rc
