# Bus bandwidth against message size, one line per algorithm (allreduce_bench -J output,
# converted by bench2dat.py into one data block per algorithm).
#   gnuplot -e "datafile='x.dat'; algos='mpi ring auto'; out='busbw.png'; ttl='...'" busbw.gp
if (!exists("ttl")) ttl = "allreduce bus bandwidth"
set terminal pngcairo size 900,560 font "DejaVu Sans,11" noenhanced
set output out
# Distinct, print-friendly colours (gnuplot's default 5th colour is a pale yellow).
set linetype 1 lc rgb "#1f77b4"
set linetype 2 lc rgb "#d62728"
set linetype 3 lc rgb "#2ca02c"
set linetype 4 lc rgb "#ff7f0e"
set linetype 5 lc rgb "#9467bd"
set linetype 6 lc rgb "#8c564b"
set linetype 7 lc rgb "#e377c2"
set linetype 8 lc rgb "#17becf"
set linetype cycle 8
set title ttl
set logscale x 2
set xlabel "message size"
set ylabel "busbw (GB/s)"
set grid xtics ytics
set key top left
set yrange [0:*]
# Size tics at powers of 4 with K/M/G suffixes.
set xtics ("8B" 8, "32B" 32, "128B" 128, "512B" 512, "2K" 2048, "8K" 8192, "32K" 32768, \
           "128K" 131072, "512K" 524288, "2M" 2097152, "8M" 8388608, "32M" 33554432, \
           "128M" 134217728, "512M" 536870912, "2G" 2147483648.)
n = words(algos)
plot for [i=1:n] datafile index (i-1) using 1:2 with linespoints lw 2 pt 7 ps 0.7 title word(algos, i)
