#!/bin/sh
# Runs a Criterion test binary, shows its output, and fails unless its summary proves that tests
# actually ran and all passed. Criterion exits 0 when a filter matches nothing, so the exit
# status alone cannot be trusted: the "Synthesis: Tested: N | Passing: P | Failing: F |
# Crashing: C" line must be present with N > 0 and F = C = 0.
#
# usage: tests/run-criterion.sh BINARY [criterion options...]
set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 BINARY [criterion options...]" >&2
    exit 2
fi
bin=$1
shift
if [ ! -x "$bin" ]; then
    echo "run-criterion: $bin is not an executable" >&2
    exit 2
fi

log=$(mktemp "${TMPDIR:-/tmp}/memra-criterion.XXXXXX") || exit 2
trap 'rm -f "$log"' EXIT INT TERM

# Criterion reports on stderr; show both streams live and keep them in the log. POSIX sh has
# no pipefail, so the binary's exit status travels on its own descriptor: fd 4 is this
# script's stdout (where tee shows the output), fd 3 the command substitution that captures
# only the status.
exec 4>&1
status=$( { { "$bin" "$@" 2>&1; echo $? >&3; } | tee "$log" >&4; } 3>&1 )
exec 4>&-

synthesis=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep 'Synthesis: Tested:' | tail -n 1)
if [ -z "$synthesis" ]; then
    echo "run-criterion: FAIL: no 'Synthesis: Tested:' line in the output of $bin (exit $status)" >&2
    exit 1
fi

field() {
    printf '%s\n' "$synthesis" | sed -n "s/.*$1: *\([0-9][0-9]*\).*/\1/p"
}
tested=$(field Tested)
failing=$(field Failing)
crashing=$(field Crashing)

if [ -z "$tested" ] || [ -z "$failing" ] || [ -z "$crashing" ]; then
    echo "run-criterion: FAIL: cannot parse '$synthesis'" >&2
    exit 1
fi
if [ "$tested" -eq 0 ]; then
    echo "run-criterion: FAIL: no test ran (Tested: 0); check the --filter pattern" >&2
    exit 1
fi
if [ "$failing" -ne 0 ] || [ "$crashing" -ne 0 ]; then
    echo "run-criterion: FAIL: $failing failing, $crashing crashing of $tested" >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    echo "run-criterion: FAIL: $bin exited with status $status" >&2
    exit 1
fi
echo "run-criterion: OK: $tested tests passed"
