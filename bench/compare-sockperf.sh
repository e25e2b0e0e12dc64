#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compare-sockperf.sh: soft+udp (RoCEv2 over UDP, issue 12) against plain UDP
# sockets (sockperf) on loopback, the same cores, in alternating rounds; and
# the goodput of 1 MiB RDMA WRITEs under injected loss. Prints per-round
# figures, medians, the ratios and the verdicts against issue 12's targets:
#
#   write-lat  qlink WRITE ping-pong p50 RTT  <= 1.3 x sockperf ping-pong p50 RTT
#   send-lat   qlink SEND/RECV ping-pong      <= 1.3 x sockperf ping-pong
#   write-bw   8-byte WRITEs, msg/s           >= 0.8 x sockperf throughput (received)
#   goodput    1 MiB WRITEs, RC, at 0 %, 0.1 % and 1 % injected loss (reported)
#
# usage: bench/compare-sockperf.sh [--rounds N] [--client-cpu N|-1] [--server-cpu N|-1]
#                                  [--client-nic-cpu N] [--server-nic-cpu N]
#                                  [--modes "caller thread"] [--query Q] [--time SEC]
#                                  [--iters LAT,BW] [--no-goodput] [--quick] [--strict]
#
# Both progress modes of soft+udp (docs/progress.md) are measured in every
# round, alternating with sockperf: `caller` (progress=caller: no NIC
# thread, the benchmark's own polls run the NIC; the two processes on the
# client and server CPUs only, what a 2-core host has) and `thread`
# (progress=thread&poll=busy: a spinning NIC thread per device; with 4 or
# more CPUs and no --*-nic-cpu given, the NIC threads are pinned to CPUs 2
# and 3, the wider set; with fewer, they share the two and the output says
# so). --modes picks one or both, or `auto`: the default options (no
# progress= in the URIs, QLINK_PROGRESS unset: the auto rule of
# docs/progress.md §2 decides), what issue 24's targets are about.
# --no-goodput skips the 1 MiB goodput runs. --iters: the qlink runs'
# iterations (latency, 8-byte rate; default 100000,1000000).
#
# sockperf sends UDP payloads of the size of the RoCEv2 packet qlink puts on
# the wire for the same 8-byte message (WRITE_ONLY: BTH 12 + RETH 16 + 8 +
# ICRC 4 = 40 bytes; SEND_ONLY: 12 + 8 + 4 = 24), busy-polls a non-blocking
# socket (--nonblocked --timeout 0) and reports round trips (--full-rtt).
# sockperf's throughput is the server's count of messages received over the
# run time (what arrived, as qlink's write-bw counts at the receiver).
# qlink: qlink-bench-verbs between soft+udp://127.0.0.1:PORT and
# soft+udp://127.0.0.2:PORT (two addresses, one port: the RoCEv2 way),
# each URI with the mode's query and Q (default empty). Loss
# for the goodput runs is the fault-injection option drop=P&seed=7 on both
# devices (docs/soft-udp.md). --client-nic-cpu/--server-nic-cpu pin each
# device's NIC thread (its URI's cpu=N; unpinned by default): on an idle
# machine with 4 cores, --client-cpu 0 --server-cpu 1 --client-nic-cpu 2
# --server-nic-cpu 3. --quick: 1 round, short runs (a check that it
# works, not a measurement). CPU -1: no pinning, for either tool. --strict
# exits 2 when a target is missed.
# Needs sockperf (apt-get install sockperf).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=5
ccpu=0
scpu=1
query=
modes="caller thread"
secs=2
quick=0
strict=0
goodput=1
cnic=
snic=
lat_iters=100000
bw_iters=1000000
gp_iters=1000

usage() {
	sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
	--client-cpu) ccpu=${2:?}; shift 2 ;;
	--server-cpu) scpu=${2:?}; shift 2 ;;
	--query) query=${2?}; shift 2 ;;
	--modes) modes=${2:?--modes needs caller, thread or both}; shift 2 ;;
	--client-nic-cpu) cnic=${2:?}; shift 2 ;;
	--server-nic-cpu) snic=${2:?}; shift 2 ;;
	--time) secs=${2:?}; shift 2 ;;
	--quick) quick=1; shift ;;
	--no-goodput) goodput=0; shift ;;
	--iters) iters=${2:?--iters needs LAT,BW}; shift 2 ;;
	--strict) strict=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "compare-sockperf.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
done
if [ -n "${iters:-}" ]; then
	lat_iters=${iters%,*}
	bw_iters=${iters#*,}
fi
for m in $modes; do
	case "$m" in caller | thread | auto) ;; *) echo "compare-sockperf.sh: mode '$m' is not caller, thread or auto" >&2; exit 2 ;; esac
done
for v in "$rounds" "$lat_iters" "$bw_iters" "${ccpu#-}" "${scpu#-}" "$secs" ${cnic:+"$cnic"} ${snic:+"$snic"}; do
	case "$v" in '' | *[!0-9]*) echo "compare-sockperf.sh: '$v' is not a number" >&2; exit 2 ;; esac
done
# thread mode on a wider set: the NIC threads on CPUs of their own when there are
wide=""
if [ -z "$cnic" ] && [ -z "$snic" ] && [ "$(nproc)" -ge 4 ] && [ "$ccpu" -ge 0 ] && [ "$scpu" -ge 0 ]; then
	cnic=2
	snic=3
	wide=" (NIC threads on CPUs 2, 3)"
elif [ -z "$cnic" ] && [ -z "$snic" ]; then
	wide=" (NIC threads unpinned: $(nproc) CPUs, they share them with the benchmark)"
fi
# cpu -1: no pinning (qlink-bench-verbs' convention; sockperf then runs without taskset)
spin=() # sockperf server's prefix
cpin=() # client's
if [ "$scpu" -ge 0 ]; then spin=(taskset -c "$scpu"); fi
if [ "$ccpu" -ge 0 ]; then cpin=(taskset -c "$ccpu"); fi
if [ "$quick" = 1 ]; then
	rounds=1
	secs=1
	lat_iters=1000
	bw_iters=20000
	gp_iters=1000 # fewer: write-bw cannot time 1 MiB messages (docs/benchmarks.md)
fi

if ! command -v sockperf >/dev/null 2>&1; then
	echo "compare-sockperf.sh: sockperf not found; install it with:" >&2
	echo "    apt-get install -y sockperf" >&2
	exit 1
fi

bin=${QLINK_BENCH_VERBS:-build-release/bench/qlink-bench-verbs}
if [ ! -x "$bin" ]; then
	echo "compare-sockperf.sh: building $bin" >&2
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DQLINK_BUILD_TESTS=OFF >&2
	cmake --build build-release -j"$(nproc 2>/dev/null || echo 2)" --target qlink-bench-verbs >&2
fi

prog=compare-sockperf.sh
# shellcheck source=bench/ucx-lib.sh
. bench/ucx-lib.sh # median, range

tmp=$(mktemp -d)
srv_pid=
# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
	if [ -n "$srv_pid" ]; then kill "$srv_pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 20000))
sp_port=$((port + 1))

mode=caller
mode_query() { # the query of $mode (auto: none, the defaults)
	case "$mode" in
	caller) echo "progress=caller" ;;
	thread) echo "progress=thread&poll=busy" ;;
	esac
}
unset QLINK_PROGRESS # the modes say what they run

uri() { # ADDR [EXTRA-QUERY]
	local q nic=$cnic
	q=$(mode_query)${query:+&$query}
	if [ "$1" = 127.0.0.2 ]; then nic=$snic; fi
	if [ -n "$nic" ] && [ "$mode" = thread ]; then q=${q:+$q&}cpu=$nic; fi
	if [ -n "${2:-}" ]; then q=${q:+$q&}$2; fi
	echo "soft+udp://$1:$port${q:+?$q}"
}

# qlink_run TEST SIZE ITERS [EXTRA-QUERY]: sets ql_p50 (p50 RTT, ns), ql_rate (msg/s);
# a run that fails (thread mode on too few cores: a starved NIC thread can
# exhaust RC's retries) says so and counts as nan, left out of the medians
qlink_run() {
	local out vals
	ql_p50=nan
	ql_rate=nan
	if ! out=$("$bin" --test "$1" --size "$2" --iters "$3" --warmup $(($3 / 10 + 1)) \
		--uri "$(uri 127.0.0.1 "${4:-}")" --server-uri "$(uri 127.0.0.2 "${4:-}")" \
		--client-cpu "$ccpu" --server-cpu "$scpu" --timeout 30 --json 2>"$tmp/ql.err"); then
		echo "$prog: $mode: $bin --test $1 --size $2 failed (counted as nan):" >&2
		cat "$tmp/ql.err" >&2
		return 0
	fi
	if ! vals=$(echo "$out" | awk '
		match($0, /"p50":[0-9.eE+-]+/) { p = substr($0, RSTART + 6, RLENGTH - 6) }
		match($0, /"msg_per_s":[0-9.eE+-]+/) { r = substr($0, RSTART + 12, RLENGTH - 12) }
		END { if (p == "" || r == "") exit 1; print p, r }'); then
		echo "$prog: cannot parse: $out" >&2
		exit 1
	fi
	read -r ql_p50 ql_rate <<<"$vals"
}

sp_server_start() {
	"${spin[@]}" sockperf sr -i 127.0.0.2 -p "$sp_port" --nonblocked --timeout 0 \
		>"$tmp/sp_srv.log" 2>&1 &
	srv_pid=$!
	sleep 0.5
}
sp_server_stop() { # -> sp_received (messages the server handled)
	kill -INT "$srv_pid" 2>/dev/null || true
	wait "$srv_pid" 2>/dev/null || true
	srv_pid=
	sp_received=$(awk '/Total [0-9]+ messages received/ { for (i = 1; i <= NF; i++) if ($i == "Total") print $(i + 1) }' \
		"$tmp/sp_srv.log" | tail -1)
	sp_received=${sp_received:-0}
}

# sp_pp SIZE: sets sp_p50 (p50 RTT, us)
sp_pp() {
	sp_server_start
	if ! "${cpin[@]}" sockperf pp -i 127.0.0.2 -p "$sp_port" -m "$1" -t "$secs" --full-rtt \
		--nonblocked --timeout 0 >"$tmp/sp.log" 2>&1; then
		echo "$prog: sockperf ping-pong failed:" >&2
		cat "$tmp/sp.log" >&2
		exit 1
	fi
	sp_server_stop
	sp_p50=$(sed 's/\x1b\[[0-9;]*m//g' "$tmp/sp.log" | awk '/percentile 50.000 =/ { print $NF }')
	if [ -z "$sp_p50" ]; then
		echo "$prog: no median in sockperf's output:" >&2
		cat "$tmp/sp.log" >&2
		exit 1
	fi
}

# sp_tp SIZE: sets sp_rate (messages received per second)
sp_tp() {
	sp_server_start
	if ! "${cpin[@]}" sockperf tp -i 127.0.0.2 -p "$sp_port" -m "$1" -t "$secs" \
		--nonblocked --timeout 0 >"$tmp/sp.log" 2>&1; then
		echo "$prog: sockperf throughput failed:" >&2
		cat "$tmp/sp.log" >&2
		exit 1
	fi
	sp_server_stop
	sp_rate=$(awk -v n="$sp_received" -v t="$secs" 'BEGIN { printf "%.0f", n / t }')
}

declare -a s_wlat s_slat s_tp
declare -A q_wlat q_slat q_wbw # mode -> values, space-separated

ns_us() { if [ "$1" = nan ]; then echo nan; else awk -v v="$1" 'BEGIN { printf "%.3f", v / 1e3 }'; fi; }
mega() { if [ "$1" = nan ]; then echo nan; else awk -v v="$1" 'BEGIN { printf "%.3f", v / 1e6 }'; fi; }

round_sockperf() {
	sp_pp 40
	s_wlat+=("$sp_p50")
	sp_pp 24
	s_slat+=("$sp_p50")
	sp_tp 40
	s_tp+=("$(mega "$sp_rate")")
}

round_qlink() { # every mode, in the order given
	for mode in $modes; do
		qlink_run write-lat 8 "$lat_iters"
		q_wlat[$mode]+=" $(ns_us "$ql_p50")"
		qlink_run send-lat 8 "$lat_iters"
		q_slat[$mode]+=" $(ns_us "$ql_p50")"
		qlink_run write-bw 8 "$bw_iters"
		q_wbw[$mode]+=" $(mega "$ql_rate")"
	done
}

last() { echo "${1##* }"; }

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)
echo "compare-sockperf: $rounds rounds, client cpu $ccpu, server cpu $scpu, $(nproc) CPUs ($cpu)," \
	"load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
for mode in $modes; do
	echo "qlink $mode: $bin, $(uri 127.0.0.1) <-> $(uri 127.0.0.2), 8-byte messages$([ "$mode" = thread ] && echo "$wide")"
done
echo "sockperf $(sockperf --version 2>&1 | awk '/version/ { print $NF; exit }'), UDP payload 40 (write) / 24 (send) bytes, ${secs}s runs"
echo "round  mode    sp-pp40 write-lat  sp-pp24 send-lat   sp-tp40 write-bw"
echo "               RTT us  RTT us     RTT us  RTT us     M/s     M/s"
for ((k = 1; k <= rounds; k++)); do
	if ((k % 2)); then
		round_sockperf
		round_qlink
	else
		round_qlink
		round_sockperf
	fi
	i=$((k - 1))
	for mode in $modes; do
		printf '%5d  %-6s  %7.3f %9.3f  %7.3f %8.3f  %7.3f %8.3f\n' "$k" "$mode" \
			"${s_wlat[$i]}" "$(last "${q_wlat[$mode]}")" "${s_slat[$i]}" \
			"$(last "${q_slat[$mode]}")" "${s_tp[$i]}" "$(last "${q_wbw[$mode]}")"
	done
done

missed=0
# row NAME PEER PEER_VALUES QLINK_VALUES KIND(lat|bw) LIMIT UNIT
row() {
	local name=$1 peer=$2 pvals=$3 qvals=$4 kind=$5 limit=$6 unit=$7 pm qm ratio verdict target
	qvals=$(tr ' ' '\n' <<<"$qvals" | grep -v '^nan$' | tr '\n' ' ' || true)
	# shellcheck disable=SC2086
	pm=$(median $pvals)
	# shellcheck disable=SC2086
	qm=$(median $qvals)
	if [ -z "${qvals// /}" ]; then qm=nan; fi
	ratio=$(awk -v q="$qm" -v u="$pm" 'BEGIN { if (q != "nan" && u > 0) printf "%.2f", q / u; else print "nan" }')
	if [ "$kind" = lat ]; then
		target="<= $limit x"
		verdict=$(awk -v r="$ratio" -v l="$limit" 'BEGIN { print (r != "nan" && r <= l) ? "met" : "MISSED" }')
	else
		target=">= $limit x"
		verdict=$(awk -v r="$ratio" -v l="$limit" 'BEGIN { print (r != "nan" && r >= l) ? "met" : "MISSED" }')
	fi
	if [ "$verdict" = MISSED ]; then missed=1; fi
	# shellcheck disable=SC2086
	printf "%-17s %-14s %9.3f %-3s %-19s %9.3f %-3s %-19s %5s  %-9s %s\n" "$name" "$peer" \
		"$pm" "$unit" "($(range %.3f $pvals))" "$qm" "$unit" "($([ -n "${qvals// /}" ] && range %.3f $qvals || echo "all failed"))" \
		"$ratio" "$target" "$verdict"
}

echo
echo "medians over $rounds rounds (min-max in parentheses)"
printf '%-17s %-14s %-29s %-29s %5s  %-9s %s\n' "qlink" "sockperf" "sockperf median (range)" \
	"qlink median (range)" "ratio" "target" "verdict"
for mode in $modes; do
	row "write-lat $mode" "pp -m 40" "${s_wlat[*]}" "${q_wlat[$mode]}" lat 1.3 "us"
	row "send-lat $mode" "pp -m 24" "${s_slat[*]}" "${q_slat[$mode]}" lat 1.3 "us"
	row "write-bw $mode" "tp -m 40" "${s_tp[*]}" "${q_wbw[$mode]}" bw 0.8 "M/s"
done
echo "ratio = qlink median / sockperf median (latency: round-trip p50; rate: messages/s received)"

[ "$goodput" = 1 ] && echo && echo "goodput of 1 MiB RDMA WRITEs (RC, write-bw, $gp_iters messages a run), loss injected on both devices" &&
	echo "mode    loss     msg/s     Gbit/s   MiB/s"
for mode in $([ "$goodput" = 1 ] && echo "$modes"); do
	for loss in 0 0.001 0.01; do
		extra=""
		if [ "$loss" != 0 ]; then extra="drop=$loss&seed=7"; fi
		qlink_run write-bw 1048576 "$gp_iters" "$extra"
		awk -v m="$mode" -v l="$loss" -v r="$ql_rate" 'BEGIN { if (r == "nan") printf "%-7s %-6s %8s\n", m, l * 100 "%", "fail"; else printf "%-7s %-6s %8.1f %9.3f %8.1f\n", m, l * 100 "%", r, r * 1048576 * 8 / 1e9, r }'
	done
done

if [ "$strict" = 1 ] && [ "$missed" = 1 ]; then
	exit 2
fi
