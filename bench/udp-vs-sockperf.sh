#!/bin/sh
# SPDX-License-Identifier: MIT
# soft+udp over loopback against sockperf (UDP, busy polling) on the same
# cores, alternating, ROUNDS rounds (docs/benchmarks.md, "soft+udp").
#   bench/udp-vs-sockperf.sh BUILD_DIR [ROUNDS] [SECONDS]
# Prints one line per measurement; the medians and ratios are left to the
# reader (docs/benchmarks.md says how they were taken).
set -eu
B=${1:?build dir}
R=${2:-3}
T=${3:-3}
V="$B/bench/qlink-bench-verbs"
C="--uri soft+udp://127.0.9.2 --server-uri soft+udp://127.0.9.1 --client-cpu 0 --server-cpu 1"
N=$((T * 20000))
command -v sockperf >/dev/null || { echo "sockperf not installed"; exit 77; }
for r in $(seq 1 "$R"); do
	echo "== round $r"
	$V --test write-lat --size 8 --iters $N --warmup $((N / 10)) $C | grep '^write-lat'
	$V --test send-lat --size 8 --iters $N --warmup $((N / 10)) $C | grep '^send-lat'
	taskset -c 1 sockperf server -i 127.0.9.1 -p 11111 -F r --nonblocked >/dev/null 2>&1 &
	S=$!
	sleep 0.5
	taskset -c 0 sockperf ping-pong -i 127.0.9.1 -p 11111 -m 14 -t "$T" -F r --nonblocked \
		--full-rtt 2>&1 | grep -E 'avg-rtt|percentile 50.000' | sed 's/^/sockperf pp: /'
	taskset -c 0 sockperf throughput -i 127.0.9.1 -p 11111 -m 14 -t "$T" 2>&1 |
		grep -E 'Summary: Message Rate' | sed 's/^/sockperf tp: /'
	kill "$S" 2>/dev/null || true
	wait "$S" 2>/dev/null || true
	$V --test write-bw --size 8 --iters $((N * 10)) $C | grep '^write-bw'
	for loss in 0 0.001 0.01; do
		$V --test write-bw --size 1048576 --iters 200 --warmup 20 \
			--uri "soft+udp://127.0.9.2?drop=$loss&seed=$r" \
			--server-uri "soft+udp://127.0.9.1?drop=$loss&seed=$((r + 100))" \
			--client-cpu 0 --server-cpu 1 | grep '^write-bw' | sed "s/^/loss $loss: /"
	done
done
