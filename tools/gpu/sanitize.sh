#!/bin/sh
# Runs a Criterion test binary under each of compute-sanitizer's four tools (memcheck with leak
# checking, racecheck, initcheck, synccheck) and fails unless every tool reports 0 errors in
# every process it watched and the suite itself passed (tests/run-criterion.sh checks the
# Synthesis line). Needs a CUDA device: on a machine without one the CUDA tests skip and the
# sanitizers have nothing to watch.
#
# usage: tools/gpu/sanitize.sh BINARY LOGDIR [arguments...]
#   the arguments go to BINARY (Criterion options for a test binary)
#   SANITIZER   the compute-sanitizer executable (default: from PATH or $CUDA_HOME/bin)
#   SANITIZER_TOOLS   the tools to run (default: "memcheck racecheck initcheck synccheck")
#   SANITIZE_PLAIN=1  BINARY is not a Criterion binary (memra_bench): run it as is (its exit
#                     status counts)
#   SANITIZE_TAG      prefix of the log names (default: the tool name alone)
#   SANITIZE_TIMEOUT  seconds each tool may run (default 0: no limit); a tool that runs out
#                     fails, and the next one still runs
#   SANITIZE_MEMCHECK_FLAGS  extra options for memcheck (default none; the bad-input sweep
#                     needs --report-api-errors no, see sanitize-suite.sh)
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 BINARY LOGDIR [arguments...]" >&2
    exit 2
fi
bin=$1
logdir=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
runner="$here/../../tests/run-criterion.sh"

san=${SANITIZER:-$(command -v compute-sanitizer 2>/dev/null ||
    echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")}
if [ ! -x "$san" ]; then
    echo "sanitize: compute-sanitizer not found (set SANITIZER)" >&2
    exit 2
fi
tools=${SANITIZER_TOOLS:-memcheck racecheck initcheck synccheck}
mkdir -p "$logdir"

failed=0
for tool in $tools; do
    case $tool in
    memcheck) extra="--leak-check full ${SANITIZE_MEMCHECK_FLAGS:-}" ;;
    *) extra="" ;;
    esac
    log="$logdir/${SANITIZE_TAG:+$SANITIZE_TAG-}$tool.log"
    if [ "${SANITIZE_PLAIN:-0}" = 1 ]; then
        wrap=""
    else
        wrap=$runner
    fi
    # Criterion runs every test in a child process: --target-processes all follows them, and
    # --error-exitcode makes a child with findings fail its test as well. A tool busy inside a
    # kernel does not stop on SIGTERM (racecheck over the large verify grid ran on for minutes
    # past its limit), hence the SIGKILL 15 seconds after the limit.
    # shellcheck disable=SC2086
    timeout --kill-after=15 "${SANITIZE_TIMEOUT:-0}" $wrap "$san" --tool "$tool" $extra --target-processes all --error-exitcode 86 \
        --print-limit 20 "$bin" "$@" >"$log" 2>&1
    status=$?
    # memcheck, initcheck and synccheck end with "ERROR SUMMARY: N errors", racecheck with
    # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)".
    summaries=$(grep -cE '(ERROR|RACECHECK) SUMMARY:' "$log")
    bad=$(grep -E '(ERROR|RACECHECK) SUMMARY:' "$log" |
        grep -vcE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards')
    synthesis=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep 'Synthesis: Tested:' | tail -n 1)
    echo "sanitize: $tool: $summaries summary line(s), $bad with findings; $synthesis"
    if [ "$status" -ne 0 ] || [ "$summaries" -eq 0 ] || [ "$bad" -ne 0 ]; then
        echo "sanitize: $tool FAILED (runner status $status); see $log" >&2
        grep -B2 -A12 '^========= [A-Z]' "$log" | grep -v 'ERROR SUMMARY: 0' | head -40 >&2
        failed=1
    fi
done
exit $failed
