#!/bin/sh
# Draws DIR/bench.png from DIR/bench.csv and DIR/bench.json (written by memra_bench) with
# bench/plot.gp: time per verify against T, one panel per shape and B that has results, then
# summary panels (speedup, floor fraction, spread) so that every cell of the grid is filled.
# Usage: sh bench/plot.sh [DIR] (default results). Without gnuplot it says so and draws nothing
# (the GPU machine may lack it): fetch the results and run `make bench-plot` where gnuplot is.
set -eu
dir=${1:-results}
csv="$dir/bench.csv"
json="$dir/bench.json"
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

# Column numbers by name, from the header.
col() {
    awk -F, -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) print i; exit }' "$csv"
}
c_shape=$(col shape)
c_b=$(col b)
c_status=$(col status)

# Panels with at least one timed configuration, in the order the sweep ran them (gnuplot stops
# on a panel without a single valid point).
panels=$(awk -F, -v s="$c_shape" -v b="$c_b" -v st="$c_status" \
    'NR > 1 && $st == "ok" && !seen[$s ":" $b]++ { printf "%s:%s ", $s, $b }' "$csv")
if [ -z "$panels" ]; then
    echo "bench/plot.sh: no timed configuration in $csv, $png not drawn" >&2
    exit 1
fi
pshapes=$(for p in $panels; do printf '%s ' "${p%%:*}"; done)
pbs=$(for p in $panels; do printf '%s ' "${p##*:}"; done)
n=$(echo $panels | wc -w)

# Every variant's CSV key and plot title, in the order of bench/variants.def (the list the bench
# itself is generated from): the second and fourth '"'-delimited strings of its X( lines.
vkeys=$(awk -F'"' '/^X\(/ { printf "%s ", $2 }' "$here/variants.def")
vnames=$(awk -F'"' '/^X\(/ { printf "\"%s\" ", $6 }' "$here/variants.def")
if [ -z "$vkeys" ]; then
    echo "bench/plot.sh: no variant in $here/variants.def" >&2
    exit 1
fi

# Variants timed in at least one configuration (a column that FAILED everywhere is left out
# rather than drawn empty, and so is a variant that an older run's file does not have).
present=" "
for v in $vkeys; do
    c=$(col "${v}_status")
    [ -n "$c" ] || continue
    if awk -F, -v c="$c" 'NR > 1 && $c == "ok" { found = 1 } END { exit !found }' "$csv"; then
        present="$present$v "
    fi
done

# Grid: n data panels plus 1 to 3 summary panels, so that rows x columns is filled exactly.
if [ $((n + 1)) -le 3 ]; then
    extra=1 cols=$((n + 1))
elif [ $((n + 1)) -eq 4 ]; then
    extra=1 cols=2
else
    extra=1
    while [ $(((n + extra) % 3)) -ne 0 ]; do extra=$((extra + 1)); done
    cols=3
fi
rows=$(((n + extra) / cols))

# The title: library version, commit, date, backend and device from bench.json.
field() {
    [ -f "$json" ] || return 0
    grep -o "\"$1\": \"[^\"]*\"" "$json" | head -n 1 | sed 's/^"[^"]*": "//; s/"$//' | tr -d "'\\\\"
}
version=$(field version)
[ -n "$version" ] || version=$(field library_version)
commit=$(field commit)
date=$(field date)
backend=$(field backend)
device=$(field device)
quick=""
if [ -f "$json" ] && grep -q '"quick": true' "$json"; then quick=", quick sweep"; fi
title="libmemra ${version:-?} (${commit:-?}), ${date:-?}, backend ${backend:-?}: ${device:-?}$quick"
noisy=$(grep -o '"noisy_spread": [0-9.]*' "$json" 2>/dev/null | head -n 1 | sed 's/.*: //')

gnuplot -e "csv='$csv'; png='$png'; pshapes='$pshapes'; pbs='$pbs'; present='$present'; \
vkeys='$vkeys'; vnames='$vnames'; rows=$rows; cols=$cols; extra=$extra; title='$title'; noisy=${noisy:-0.1}" "$here/plot.gp"
echo "bench/plot.sh: wrote $png"
