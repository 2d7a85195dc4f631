# Time per verify against T for the four variants and the memory-bandwidth floor, one panel per
# shape (rows) and B (columns). Called by bench/plot.sh with the variables csv, png, shapes,
# bvals, panels (" shape:B ..." with data) and title.
#
# bench.csv columns: 1 shape, 4 t, 5 b, 8 status, 11 floor_us, then median/min/max per variant:
# 13-15 row_eager, 16-18 row_graph, 19-21 packed_eager, 22-24 packed_graph.

set datafile separator ','
nshape = words(shapes)
nb = words(bvals)
set terminal pngcairo size 460 * nb, 360 * nshape + 30 font 'sans,9'
set output png
set multiplot layout nshape, nb title title font 'sans,11'

set logscale x 2
set logscale y 10
set format y '10^{%L}'
set xtics (1, 2, 4, 8, 16, 32, 64)
set offsets graph 0.04, graph 0.04, 0, 0
set xlabel 'T (rows per verify)'
set ylabel 'time per verify (us)'
set grid xtics ytics mytics lc rgb '#dddddd'
set key top left font 'sans,8' spacing 0.9 box opaque
set bars small

set style line 1 lc rgb '#d95f02' lw 1.5 pt 7 ps 0.6 dt 2
set style line 2 lc rgb '#d95f02' lw 2 pt 7 ps 0.6
set style line 3 lc rgb '#1b9e77' lw 1.5 pt 5 ps 0.6 dt 2
set style line 4 lc rgb '#1b9e77' lw 2 pt 5 ps 0.6
set style line 5 lc rgb '#000000' lw 1.5 dt 3

# Column c of the rows of the current panel (shape s, B = b), NaN elsewhere (incl. the header).
sel(c) = (strcol(1) eq s && column(5) == b && strcol(8) eq 'ok') ? column(c) : NaN

do for [si = 1:nshape] {
    do for [bi = 1:nb] {
        s = word(shapes, si)
        b = word(bvals, bi) + 0
        if (strstrt(panels, sprintf(' %s:%d ', s, b)) == 0) {
            set multiplot next
        } else {
            set title sprintf('%s, B = %d', s, b)
            plot csv using (sel(4)):(sel(13)):(sel(14)):(sel(15)) with yerrorlines ls 1 title 'per-row eager', \
                 '' using (sel(4)):(sel(16)):(sel(17)):(sel(18)) with yerrorlines ls 2 title 'per-row graph', \
                 '' using (sel(4)):(sel(19)):(sel(20)):(sel(21)) with yerrorlines ls 3 title 'packed eager', \
                 '' using (sel(4)):(sel(22)):(sel(23)):(sel(24)) with yerrorlines ls 4 title 'packed graph', \
                 '' using (sel(4)):(sel(11)) with lines ls 5 title 'memory floor'
        }
    }
}
unset multiplot
