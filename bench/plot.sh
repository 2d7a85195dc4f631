#!/bin/sh
# Draws DIR/bench.png from DIR/bench.csv (written by memra_bench) with bench/plot.gp: time per
# verify against T, one panel per shape and B. Usage: sh bench/plot.sh [DIR] (default results).
# Without gnuplot it says so and draws nothing (the GPU machine may lack it): fetch the results
# and run `make bench-plot` where gnuplot is installed.
set -eu
dir=${1:-results}
csv="$dir/bench.csv"
png="$dir/bench.png"
here=$(dirname "$0")

if [ ! -f "$csv" ]; then
    echo "bench/plot.sh: $csv not found (run make bench first)" >&2
    exit 1
fi
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "bench/plot.sh: gnuplot not found, $png not drawn (install gnuplot-nox, then make bench-plot)"
    exit 0
fi

# Shapes and B values in the order the sweep ran them; panels with at least one timed row
# (gnuplot stops on a panel without a single valid point). Column numbers: see plot.gp.
shapes=$(awk -F, 'NR > 1 && !seen[$1]++ { printf "%s ", $1 }' "$csv")
bvals=$(awk -F, 'NR > 1 { print $5 }' "$csv" | sort -n -u | tr '\n' ' ')
panels=$(awk -F, 'NR > 1 && $8 == "ok" && !seen[$1 ":" $5]++ { printf "%s:%s ", $1, $5 }' "$csv")
title=$(awk -F, 'NR == 2 { print $6 ": " $7 }' "$csv" | tr -d "'\\\\")
if [ -z "$panels" ]; then
    echo "bench/plot.sh: no timed configuration in $csv, $png not drawn" >&2
    exit 1
fi

gnuplot -e "csv='$csv'; png='$png'; shapes='$shapes'; bvals='$bvals'; panels=' $panels'; title='$title'" \
    "$here/plot.gp"
echo "bench/plot.sh: wrote $png"
