# Time per verify against T for every variant timed and the two memory floors, one panel per
# shape and B (pshapes and pbs list them, pairwise), then `extra` summary panels over all of
# them: speedup of packed over per-row, the packed graph's floor fraction, the spread. Called by
# bench/plot.sh with csv, png, pshapes, pbs, vkeys and vnames (the variants' keys and titles,
# from bench/variants.def), present (" key ... " of the variants with results), rows, cols,
# extra, title and noisy (the spread threshold). bench.csv columns are read by name.

set datafile separator ','
set datafile columnheaders
npanel = words(pshapes)
set terminal pngcairo size 520 * cols, 400 * rows + 40 font 'sans,9'
set output png
set multiplot layout rows, cols title title font 'sans,11'

set logscale x 2
set xtics (1, 2, 4, 8, 16, 32, 64)
set offsets graph 0.04, graph 0.04, 0, 0
set xlabel 'T (rows per verify)'
set grid xtics ytics mytics lc rgb '#dddddd'
set bars small

# One style per variant, in the order of vkeys (bench/variants.def's keys, with their plot
# titles in vnames); 11 and 12 are the floors.
set style line 1 lc rgb '#d95f02' lw 1.5 pt 7 ps 0.6 dt 2
set style line 2 lc rgb '#d95f02' lw 2 pt 7 ps 0.6
set style line 3 lc rgb '#1b9e77' lw 1.5 pt 5 ps 0.6 dt 2
set style line 4 lc rgb '#1b9e77' lw 2 pt 5 ps 0.6
set style line 5 lc rgb '#386cb0' lw 2 pt 9 ps 0.7
set style line 6 lc rgb '#386cb0' lw 1.5 pt 8 ps 0.7 dt 4
set style line 7 lc rgb '#7570b3' lw 2 pt 13 ps 0.7
set style line 8 lc rgb '#7570b3' lw 1.5 pt 12 ps 0.7 dt 2
set style line 9 lc rgb '#666666' lw 1.5 pt 3 ps 0.6
set style line 10 lc rgb '#e7298a' lw 1.5 pt 11 ps 0.7
set style line 11 lc rgb '#000000' lw 1.5 dt 3
set style line 12 lc rgb '#000000' lw 1 dt 5

# Column c of the rows of the current panel (shape s, B = b) that were checked, NaN elsewhere.
sel(c) = (strcol('shape') eq s && column('b') == b && strcol('status') eq 'ok') ? column(c) : NaN
# The same for row i's shape and B of the summary panels.
seli(i, c) = (strcol('shape') eq word(pshapes, i) && column('b') == word(pbs, i) + 0 && \
              strcol('status') eq 'ok') ? column(c) : NaN

do for [pi = 1:npanel] {
    s = word(pshapes, pi)
    b = word(pbs, pi) + 0
    set title sprintf('%s, B = %d', s, b)
    set logscale y 10
    set autoscale y
    set format y '10^{%L}'
    set ylabel 'time per verify (us)'
    # The key goes below the plot, where it covers no point; every time panel keeps the same
    # bottom margin so that their plot areas stay the same size with or without one.
    set bmargin 7
    if (pi == 1) {
        set key below horizontal maxrows 4 font 'sans,7' spacing 0.85 samplen 2 width -2
    } else {
        unset key
    }
    cmd = ''
    do for [vi = 1:words(vkeys)] {
        k = word(vkeys, vi)
        if (strstrt(present, ' '.k.' ') > 0) {
            cmd = cmd.sprintf("csv using (sel('t')):(sel('%s_med_us')):(sel('%s_min_us')):(sel('%s_max_us')) with yerrorlines ls %d title '%s', ", \
                              k, k, k, vi, word(vnames, vi))
        }
    }
    cmd = cmd."csv using (sel('t')):(sel('floor_us')) with lines ls 11 title 'floor, snapshots', "
    cmd = cmd."csv using (sel('t')):(sel('fused_nosnap_floor_us')) with lines ls 12 title 'floor, no snapshots'"
    eval('plot '.cmd)
}

unset logscale y
set format y '%g'
# Outside the data too: the summary panels name every panel below their plot.
set key below horizontal maxrows 4 font 'sans,7' spacing 0.85 samplen 2 width -2
if (extra >= 1) {
    set title 'speedup: per-row graph / packed graph'
    set ylabel 'speedup (x)'
    set yrange [0:*]
    plot for [i = 1:npanel] csv using (seli(i, 't')):(seli(i, 'speedup_graph')) with linespoints \
             lw 1.5 pt 7 ps 0.6 title sprintf('%s, B = %s', word(pshapes, i), word(pbs, i)), \
         1 with lines ls 11 notitle
}
if (extra >= 2) {
    set title 'packed graph: floor / median'
    set ylabel 'floor fraction (%)'
    # Scaled to the data: the CPU backend reaches a few percent, a GPU up to about 90.
    set yrange [0:*]
    plot for [i = 1:npanel] csv using (seli(i, 't')):(100 * seli(i, 'packed_graph_floor_frac')) \
             with linespoints lw 1.5 pt 7 ps 0.6 title sprintf('%s, B = %s', word(pshapes, i), word(pbs, i))
}
if (extra >= 3) {
    set title sprintf('spread: largest (max - min) / median (noisy above %.0f%%)', 100 * noisy)
    set ylabel 'spread (%)'
    set yrange [0:*]
    plot for [i = 1:npanel] csv using (seli(i, 't')):(100 * seli(i, 'spread')) with linespoints \
             lw 1.5 pt 7 ps 0.6 title sprintf('%s, B = %s', word(pshapes, i), word(pbs, i)), \
         100 * noisy with lines ls 11 notitle
}
unset multiplot
