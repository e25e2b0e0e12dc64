#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cudaq-udp-vs-sockperf.sh: an RPC round trip over CUDA-Q Realtime's UDP
# transport on loopback (qlink serve --transport=udp answering rpc_increment,
# qlink vppu --transport udp calling it closed loop, window 1) against the
# floor of the same wire: sockperf UDP ping-pong with busy polling
# (--nonblocked: both ends spin on recvfrom), same cores (taskset), same
# datagram size both ways. Short alternating runs (the order flips each
# round); medians over rounds of the per-run p50 round trips; the ratio
# qlink/sockperf against the target <= 1.1. Then qlink's rate with a window
# of calls in flight (--window).
#
# usage: bench/cudaq-udp-vs-sockperf.sh [--rounds N] [--seconds S] [--size N]
#            [--window N] [--client-cpu N] [--server-cpu N] [--qlink PATH]
#            [--strict] [--help]
#
#   --size N     datagram bytes = the slot stride (default 64): qlink sends
#                and answers whole strides (a 16-byte rpc_increment frame of
#                40 bytes, zero-filled), sockperf -m N
#   --seconds S  length of each run (default 1; sockperf adds its 0.4 s warm-up)
#   --window N   calls in flight for the rate (default 16)
#   --strict     exit 2 when the round trip target is missed
#
# Needs sockperf (apt-get install sockperf; scripts/deps.sh bench) and a
# Release build of qlink (made in build-release if --qlink is not given).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=5
secs=1
size=64
window=16
ccpu=0
scpu=1
strict=0
qlink=

usage() {
	sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
	--seconds) secs=${2:?--seconds needs a number}; shift 2 ;;
	--size) size=${2:?--size needs a number}; shift 2 ;;
	--window) window=${2:?--window needs a number}; shift 2 ;;
	--client-cpu) ccpu=${2:?}; shift 2 ;;
	--server-cpu) scpu=${2:?}; shift 2 ;;
	--qlink) qlink=${2:?}; shift 2 ;;
	--strict) strict=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "cudaq-udp-vs-sockperf.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
done
for v in "$rounds" "$secs" "$size" "$window" "$ccpu" "$scpu"; do
	case "$v" in '' | *[!0-9]*) echo "cudaq-udp-vs-sockperf.sh: '$v' is not a whole number" >&2; exit 2 ;; esac
done
if [ "$rounds" -lt 1 ] || [ "$secs" -lt 1 ] || [ "$size" -lt 40 ] || [ "$window" -lt 1 ]; then
	echo "cudaq-udp-vs-sockperf.sh: need --rounds >= 1, --seconds >= 1, --size >= 40, --window >= 1" >&2
	exit 2
fi
if ! command -v sockperf >/dev/null 2>&1; then
	echo "cudaq-udp-vs-sockperf.sh: sockperf not found; install it with:" >&2
	echo "    apt-get install -y sockperf      (or scripts/deps.sh bench)" >&2
	exit 1
fi
if [ -z "$qlink" ]; then
	qlink=build-release/tools/qlink
	if [ ! -x "$qlink" ]; then
		echo "cudaq-udp-vs-sockperf.sh: building $qlink" >&2
		cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DQLINK_BUILD_TESTS=OFF >&2
		cmake --build build-release -j"$(nproc 2>/dev/null || echo 2)" --target qlink-cli >&2
	fi
fi

tmp=$(mktemp -d)
srv=
# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
	if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

stop_server() {
	kill -TERM "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	srv=
}

# qlink WINDOW: one run; "p50_ns rpc_per_s" into $tmp/qres (no subshell:
# the EXIT trap must see the server)
run_qlink() {
	local port=
	: >"$tmp/srv" # emptied here, not by the child: no stale READY from the last run
	taskset -c "$scpu" "$qlink" serve --transport=udp --dispatch=ring --cpu "$scpu" --timeout=600 \
		-- --port=0 --num-slots=64 --slot-size="$size" >"$tmp/srv" 2>&1 &
	srv=$!
	for _ in $(seq 200); do
		port=$(sed -n 's/^CUDAQ_REALTIME_SERVER_READY .* port=\([0-9]*\) .*/\1/p' "$tmp/srv")
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { cat "$tmp/srv" >&2; echo "qlink serve did not start" >&2; exit 1; }
	taskset -c "$ccpu" "$qlink" vppu --transport udp --connect "127.0.0.1:$port" \
		--function rpc_increment --arg-len 16 --slot-size "$size" --cpu "$ccpu" \
		--window "$1" --seconds "$secs" --json >"$tmp/cli" 2>&1 ||
		{ cat "$tmp/cli" >&2; echo "qlink vppu failed" >&2; exit 1; }
	stop_server
	grep -q '"wrong":0,' "$tmp/cli" && grep -q '"lost":0,' "$tmp/cli" ||
		{ cat "$tmp/cli" >&2; echo "qlink vppu: wrong or lost answers" >&2; exit 1; }
	echo "$(sed -n 's/.*"p50":\([0-9]*\).*/\1/p' "$tmp/cli") $(sed -n 's/.*"rpc_per_s":\([0-9.]*\).*/\1/p' "$tmp/cli")" >"$tmp/qres"
}

# sockperf: one ping-pong run; the p50 round trip in ns into $tmp/sres.
# A run that yields no percentiles (starved until no valid sample fell in
# its measured window) is run again, up to three times.
run_sockperf() {
	for _ in 1 2 3; do
		sockperf_once
		[ -s "$tmp/sres" ] && return 0
		echo "cudaq-udp-vs-sockperf.sh: sockperf gave no p50; again" >&2
	done
	cat "$tmp/spc" >&2
	echo "cudaq-udp-vs-sockperf.sh: sockperf gave no p50 three times" >&2
	exit 1
}

sockperf_once() {
	local sp=$((20000 + RANDOM % 20000))
	: >"$tmp/sps"
	taskset -c "$scpu" sockperf server -i 127.0.0.1 -p "$sp" --nonblocked >"$tmp/sps" 2>&1 &
	srv=$!
	for _ in $(seq 100); do grep -q 'using recvfrom' "$tmp/sps" && break; sleep 0.05; done
	taskset -c "$ccpu" sockperf ping-pong -i 127.0.0.1 -p "$sp" -m "$size" -t "$secs" --full-rtt \
		--nonblocked >"$tmp/spc" 2>&1 || { cat "$tmp/spc" >&2; echo "sockperf failed" >&2; exit 1; }
	stop_server
	awk '/percentile 50.000 =/ { printf "%.0f\n", $NF * 1000 }' "$tmp/spc" >"$tmp/sres"
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# CUDA-Q UDP RPC (qlink serve + qlink vppu, rpc_increment, ${size}-byte datagrams) vs sockperf UDP ping-pong (-m $size, --nonblocked)"
echo "# client cpu $ccpu, server cpu $scpu, $rounds round(s) of $secs s per run; round trips in us"
printf '%-6s %12s %14s %16s\n' round "qlink p50" "sockperf p50" "qlink RPC/s w$window"
: >"$tmp/q" ; : >"$tmp/s" ; : >"$tmp/r"
for r in $(seq "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then
		run_qlink 1; run_sockperf
	else
		run_sockperf; run_qlink 1
	fi
	q=$(cat "$tmp/qres") s=$(cat "$tmp/sres")
	run_qlink "$window"
	rate=$(awk '{ print $2 }' "$tmp/qres")
	echo "${q%% *}" >>"$tmp/q"
	echo "$s" >>"$tmp/s"
	echo "$rate" >>"$tmp/r"
	printf '%-6s %12.3f %14.3f %16.0f\n' "$r" "$(echo "${q%% *}" | awk '{ print $1 / 1000 }')" \
		"$(echo "$s" | awk '{ print $1 / 1000 }')" "$rate"
done
mq=$(median <"$tmp/q")
ms=$(median <"$tmp/s")
mr=$(median <"$tmp/r")
ratio=$(awk -v a="$mq" -v b="$ms" 'BEGIN { printf "%.2f", a / b }')
met=$(awk -v x="$ratio" 'BEGIN { print (x <= 1.1) ? "met" : "MISSED" }')
printf '%-6s %12.3f %14.3f %16.0f\n' median "$(awk -v a="$mq" 'BEGIN { print a / 1000 }')" \
	"$(awk -v a="$ms" 'BEGIN { print a / 1000 }')" "$mr"
echo "round trip qlink/sockperf = $ratio (target <= 1.1: $met)"
[ "$strict" = 1 ] && [ "$met" != met ] && exit 2
exit 0
