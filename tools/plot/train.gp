# ddp_train --metrics CSV (epoch,global_step,train_loss,test_acc,samples_per_s,epoch_s,lr) to
# loss and accuracy curves side by side; several runs overlay (files and labels are
# space-separated lists).
#   gnuplot -e "files='np1.csv np2.csv'; labels='np=1 np=2'; out='train.png'" train.gp
if (!exists("labels")) labels = files
if (!exists("ttl")) ttl = "ddp_train on Fashion-MNIST"
set terminal pngcairo size 1100,460 font "DejaVu Sans,11" noenhanced
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
set datafile separator ","
set key autotitle columnhead
set multiplot layout 1,2 title ttl
set xlabel "epoch"
set xtics 1
set grid
set ylabel "train loss"
set key top right
plot for [i=1:words(files)] word(files, i) using 1:3 with linespoints lw 2 pt 7 dt i title word(labels, i)
set ylabel "test accuracy (%)"
set key bottom right
plot for [i=1:words(files)] word(files, i) using 1:($4 * 100) with linespoints lw 2 pt 7 dt i title word(labels, i)
unset multiplot
