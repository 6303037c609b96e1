# One DDP step of ddp_bench, every rank: main thread and progress thread lanes, GEMM phases,
# the reducer's exposed wait, the allreduce and its reduction work and sleeps (timeline.py dat).
#   gnuplot -e "datafile='x.dat'; kinds='a|b'; colours='#..|#..'; ranks=2; out='t.png'; ttl='...'" timeline.gp
if (!exists("ttl")) ttl = "ddp_bench step"
set terminal pngcairo size 1200,360+110*ranks font "DejaVu Sans,11" noenhanced
set output out
set title ttl
set xlabel "ms from the step's start (each rank's own start; ranks begin the step after a barrier)"
set yrange [-0.7:2*ranks-0.3] reverse
set ytics ()
do for [r=0:ranks-1] {
  set ytics add (sprintf("rank %d main", r) 2*r, sprintf("rank %d progress", r) 2*r+1)
}
set grid xtics
set key outside below horizontal maxcols 4
set style fill solid 0.9 noborder
n = strlen(kinds) > 0 ? words(system("echo '".kinds."' | tr ' |' '_ '")) : 0
kind(i) = system(sprintf("echo '%s' | cut -d'|' -f%d", kinds, i))
colour(i) = system(sprintf("echo '%s' | cut -d'|' -f%d", colours, i))
plot for [i=1:n] datafile index (i-1) using (($1+$2)/2):(($3+$4)/2):(($2-$1)/2):(($4-$3)/2) \
       with boxxyerror lc rgb colour(i) title kind(i), \
     datafile index n using 1:2 with points pt 9 ps 1.3 lc rgb "black" title "bucket launch"
