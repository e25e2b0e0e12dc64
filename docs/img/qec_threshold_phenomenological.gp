set terminal pngcairo size 900,600 noenhanced
set output 'qec_threshold_phenomenological.png'
set title 'Rotated surface code, phenomenological noise, union-find decoder, 20000 shots per point'
set xlabel 'physical error rate p'
set ylabel 'logical error rate per shot'
set logscale y
set format y '%.0e'
set key left top
set grid
plot 'qec_threshold_phenomenological.dat' index 0 using 2:7:8:9 with yerrorlines title 'd = 3', 'qec_threshold_phenomenological.dat' index 1 using 2:7:8:9 with yerrorlines title 'd = 5', 'qec_threshold_phenomenological.dat' index 2 using 2:7:8:9 with yerrorlines title 'd = 7', 'qec_threshold_phenomenological.dat' index 3 using 2:7:8:9 with yerrorlines title 'd = 9'
set terminal svg size 900,600 noenhanced
set output 'qec_threshold_phenomenological.svg'
set title 'Rotated surface code, phenomenological noise, union-find decoder, 20000 shots per point'
set xlabel 'physical error rate p'
set ylabel 'logical error rate per shot'
set logscale y
set format y '%.0e'
set key left top
set grid
plot 'qec_threshold_phenomenological.dat' index 0 using 2:7:8:9 with yerrorlines title 'd = 3', 'qec_threshold_phenomenological.dat' index 1 using 2:7:8:9 with yerrorlines title 'd = 5', 'qec_threshold_phenomenological.dat' index 2 using 2:7:8:9 with yerrorlines title 'd = 7', 'qec_threshold_phenomenological.dat' index 3 using 2:7:8:9 with yerrorlines title 'd = 9'
