set terminal pngcairo size 900,600 noenhanced
set output 'qec_latency.png'
set title 'd = 5, 5 rounds, p = 0.001, 1000000 rounds/s over qlink (own daemon, soft+shm)'
set xlabel 'microseconds'
set ylabel 'fraction of calls slower than x'
set logscale x
set logscale y
set format y '%g'
set yrange [1e-5:1]
set grid
set key right top
plot 'qec_latency.dat' index 0 using 1:($4 > 0 ? $4 : 1e-6) with steps lw 2 title 'decode per round (offline)', '' index 1 using 1:($4 > 0 ? $4 : 1e-6) with steps lw 2 title 'handler time in the daemon', '' index 2 using 1:($4 > 0 ? $4 : 1e-6) with steps lw 2 title 'round trip, enqueue_syndromes', '' index 3 using 1:($4 > 0 ? $4 : 1e-6) with steps lw 2 title 'round trip, get_corrections'
set terminal svg size 900,600 noenhanced
set output 'qec_latency.svg'
set title 'd = 5, 5 rounds, p = 0.001, 1000000 rounds/s over qlink (own daemon, soft+shm)'
set xlabel 'microseconds'
set ylabel 'fraction of calls slower than x'
set logscale x
set logscale y
set format y '%g'
set yrange [1e-5:1]
set grid
set key right top
plot 'qec_latency.dat' index 0 using 1:($4 > 0 ? $4 : 1e-6) with steps lw 2 title 'decode per round (offline)', '' index 1 using 1:($4 > 0 ? $4 : 1e-6) with steps lw 2 title 'handler time in the daemon', '' index 2 using 1:($4 > 0 ? $4 : 1e-6) with steps lw 2 title 'round trip, enqueue_syndromes', '' index 3 using 1:($4 > 0 ? $4 : 1e-6) with steps lw 2 title 'round trip, get_corrections'
