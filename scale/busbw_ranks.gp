# Bus bandwidth against the number of simulated ranks at one message size, one line per
# algorithm (scale/report.py dat ... ranks), drawn by scale/plot.sh.
#   gnuplot -e "datafile='x.dat'; algos='ring rhd'; out='o.png'; ttl='...'" busbw_ranks.gp
if (!exists("ttl")) ttl = "allreduce bus bandwidth against ranks"
set terminal pngcairo size 900,560 font "DejaVu Sans,11" noenhanced
set output out
set linetype 1 lc rgb "#1f77b4"
set linetype 2 lc rgb "#d62728"
set linetype 3 lc rgb "#2ca02c"
set linetype 4 lc rgb "#ff7f0e"
set linetype 5 lc rgb "#9467bd"
set linetype 6 lc rgb "#8c564b"
set linetype 7 lc rgb "#e377c2"
set linetype 8 lc rgb "#17becf"
set linetype 9 lc rgb "#7f7f7f"
set linetype cycle 9
set title ttl
set logscale x 2
set xlabel "simulated ranks (8 per node)"
set ylabel "busbw (GB/s)"
set grid xtics ytics
set key outside right
set yrange [0:*]
n = words(algos)
plot for [i=1:n] datafile index (i-1) using 1:2 with linespoints lw 2 pt 7 ps 0.7 title word(algos, i)
