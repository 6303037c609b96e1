# gpt_train's table (step, train loss averaged over the --log-every interval, validation loss
# where computed; tools/plot/plot.sh gpt extracts it from gpt_train's output) to a loss curve:
# train loss as lines, validation loss as points, several runs overlaid (files and labels are
# space-separated lists).
#   gnuplot -e "files='a.dat b.dat'; labels='np=1 np=2'; out='gpt.png'" gpt.gp
if (!exists("labels")) labels = files
if (!exists("ttl")) ttl = "gpt_train: loss per step"
set terminal pngcairo size 800,500 font "DejaVu Sans,11" noenhanced
set output out
set linetype 1 lc rgb "#1f77b4"
set linetype 2 lc rgb "#d62728"
set linetype 3 lc rgb "#2ca02c"
set linetype 4 lc rgb "#ff7f0e"
set linetype cycle 4
set title ttl
set xlabel "step"
set ylabel "loss (nats per byte)"
set grid
set key top right
plot for [i=1:words(files)] word(files, i) using 1:2 with lines lw 2 lt i title word(labels, i)." train", \
     for [i=1:words(files)] word(files, i) using 1:3 with points pt 7 ps 1.2 lt i title word(labels, i)." validation"
