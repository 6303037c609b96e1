# Columns of a bench/results study table against its first numeric column, one line each
# (bench/results/render.py --plots writes the data: one block per line, "x y" rows).
#   gnuplot -e "datafile='x.dat'; out='a.png'; ttl='...'; titles='a|b'; xlab='bytes'; ylab='us'; logy=1" table.gp
if (!exists("ttl")) ttl = ""
if (!exists("logy")) logy = 0
set terminal pngcairo size 900,560 font "DejaVu Sans,11" noenhanced
set output out
set linetype 1 lc rgb "#1f77b4"
set linetype 2 lc rgb "#d62728"
set linetype 3 lc rgb "#2ca02c"
set linetype 4 lc rgb "#ff7f0e"
set linetype 5 lc rgb "#9467bd"
set linetype 6 lc rgb "#8c564b"
set linetype cycle 6
set title ttl
set logscale x 2
if (logy) set logscale y 10
set xlabel xlab
set ylabel ylab
set grid xtics ytics
set key top left
set xtics ("8B" 8, "64B" 64, "512B" 512, "4K" 4096, "32K" 32768, "256K" 262144, \
           "2M" 2097152, "16M" 16777216, "128M" 134217728)
# titles: the line names separated by '|'
n = 0
title_of(i) = system(sprintf("printf '%%s' '%s' | cut -d'|' -f%d", titles, i))
n = int(system(sprintf("printf '%%s' '%s' | awk -F'|' '{print NF}'", titles)))
plot for [i=1:n] datafile index (i-1) using 1:2 with linespoints lw 2 pt 7 ps 0.7 title title_of(i)
