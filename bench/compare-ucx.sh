#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compare-ucx.sh: qlink's verbs benchmark against UCX (ucx_perftest) on the
# same machine, the same core pinning and the same message size, in short
# alternating rounds; prints per-test medians, the ratio qlink/UCX and the
# verdict against the targets:
#
#   write-lat  p50 RTT  <= 1.2 x UCX ucp_put_lat (RTT = 2 x UCX's one-way figure)
#   send-lat   p50 RTT  <= 1.0 x UCX tag_lat
#   write-bw   msg/s    >= 1.0 x UCX tag_bw
#   send-bw    msg/s    >= 1.0 x UCX tag_bw      (ucp_am_bw shown for reference)
#
# usage: bench/compare-ucx.sh [--rounds N] [--size N] [--client-cpu N]
#                             [--server-cpu N] [--strict] [--help]
#
# Each run is short (well under a second) and UCX and qlink alternate within
# every round (the order flips each round), because on small VMs the host
# steals time from vCPUs that spin for long. Medians are over rounds of the
# per-run medians (latency) or overall rates (message rate). --strict exits 2
# when a target is missed. Needs ucx_perftest (apt-get install ucx-utils).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=5
size=8
ccpu=0
scpu=1
strict=0
ucx_lat_iters=100000
ucx_bw_iters=1000000

usage() {
	sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
	--size) size=${2:?--size needs a number}; shift 2 ;;
	--client-cpu) ccpu=${2:?}; shift 2 ;;
	--server-cpu) scpu=${2:?}; shift 2 ;;
	--strict) strict=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "compare-ucx.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
done
for v in "$rounds" "$size" "$ccpu" "$scpu"; do
	case "$v" in '' | *[!0-9]*) echo "compare-ucx.sh: '$v' is not a number" >&2; exit 2 ;; esac
done
if [ "$rounds" -lt 1 ] || [ "$size" -lt 8 ]; then
	echo "compare-ucx.sh: need --rounds >= 1 and --size >= 8" >&2
	exit 2
fi

if ! command -v ucx_perftest >/dev/null 2>&1; then
	echo "compare-ucx.sh: ucx_perftest not found; install it with:" >&2
	echo "    apt-get install -y ucx-utils" >&2
	exit 1
fi

bin=build-release/bench/qlink-bench-verbs
if [ ! -x "$bin" ]; then
	echo "compare-ucx.sh: building $bin" >&2
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DQLINK_BUILD_TESTS=OFF >&2
	cmake --build build-release -j"$(nproc 2>/dev/null || echo 2)" --target qlink-bench-verbs >&2
fi

prog=compare-ucx.sh
# shellcheck source=bench/ucx-lib.sh
. bench/ucx-lib.sh

tmp=$(mktemp -d)
srv_pid=
# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
	if [ -n "$srv_pid" ]; then kill "$srv_pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 20000))

# qlink_run TEST: sets ql_p50 (p50 RTT, ns) and ql_rate (msg/s)
qlink_run() {
	local out vals
	if ! out=$("$bin" --test "$1" --size "$size" --client-cpu "$ccpu" --server-cpu "$scpu" \
		--json 2>"$tmp/ql.err"); then
		echo "compare-ucx.sh: $bin --test $1 failed:" >&2
		cat "$tmp/ql.err" >&2
		exit 1
	fi
	if ! vals=$(echo "$out" | awk '
		match($0, /"p50":[0-9.eE+-]+/) { p = substr($0, RSTART + 6, RLENGTH - 6) }
		match($0, /"msg_per_s":[0-9.eE+-]+/) { r = substr($0, RSTART + 12, RLENGTH - 12) }
		END { if (p == "" || r == "") exit 1; print p, r }'); then
		echo "compare-ucx.sh: cannot parse: $out" >&2
		exit 1
	fi
	read -r ql_p50 ql_rate <<<"$vals"
}

declare -a u_put u_tag u_tagbw u_ambw q_wlat q_slat q_wbw q_sbw

rtt_us() { awk -v v="$1" 'BEGIN { printf "%.4f", v * 2 }'; } # UCX one-way us -> RTT us
ns_us() { awk -v v="$1" 'BEGIN { printf "%.4f", v / 1e3 }'; }
mega() { awk -v v="$1" 'BEGIN { printf "%.3f", v / 1e6 }'; }

round_ucx() {
	ucx_run ucp_put_lat "$ucx_lat_iters"
	u_put+=("$(rtt_us "$ucx_p50")")
	ucx_run tag_lat "$ucx_lat_iters"
	u_tag+=("$(rtt_us "$ucx_p50")")
	ucx_run tag_bw "$ucx_bw_iters"
	u_tagbw+=("$(mega "$ucx_rate")")
	ucx_run ucp_am_bw "$ucx_bw_iters"
	u_ambw+=("$(mega "$ucx_rate")")
}

round_qlink() {
	qlink_run write-lat
	q_wlat+=("$(ns_us "$ql_p50")")
	qlink_run send-lat
	q_slat+=("$(ns_us "$ql_p50")")
	qlink_run write-bw
	q_wbw+=("$(mega "$ql_rate")")
	qlink_run send-bw
	q_sbw+=("$(mega "$ql_rate")")
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)
echo "compare-ucx: $rounds rounds, $size-byte messages, client cpu $ccpu, server cpu $scpu," \
	"$(nproc) CPUs ($cpu), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "UCX: UCX_TLS=sm,self, $(ucx_info -v 2>/dev/null | awk '/Version/ { print "version " $3 }')," \
	"-n $ucx_lat_iters (lat) / $ucx_bw_iters (bw); qlink: $bin --json, default iterations"
echo "round  put_lat write-lat  tag_lat send-lat   tag_bw am_bw write-bw send-bw"
echo "       RTT us   RTT us    RTT us  RTT us     M/s    M/s   M/s     M/s"
for ((k = 1; k <= rounds; k++)); do
	if ((k % 2)); then
		round_ucx
		round_qlink
	else
		round_qlink
		round_ucx
	fi
	i=$((k - 1))
	printf '%5d  %7.3f %9.3f  %7.3f %8.3f  %7.2f %5.2f %8.2f %7.2f\n' "$k" \
		"${u_put[$i]}" "${q_wlat[$i]}" "${u_tag[$i]}" "${q_slat[$i]}" \
		"${u_tagbw[$i]}" "${u_ambw[$i]}" "${q_wbw[$i]}" "${q_sbw[$i]}"
done

missed=0
# row NAME PEER UCX_VALUES QLINK_VALUES KIND(lat|bw) LIMIT UNIT
row() {
	local name=$1 peer=$2 uvals=$3 qvals=$4 kind=$5 limit=$6 unit=$7 um qm ratio pratio verdict
	local target f
	f="%.3f"
	if [ "$unit" != us ]; then f="%.1f"; fi
	# shellcheck disable=SC2086
	um=$(median $uvals)
	# shellcheck disable=SC2086
	qm=$(median $qvals)
	ratio=$(awk -v q="$qm" -v u="$um" 'BEGIN { if (u > 0) printf "%.2f", q / u; else print "nan" }')
	# the same ratio round by round (UCX and qlink ran seconds apart), then its median:
	# steadier when the host moves the vCPUs between runs
	# shellcheck disable=SC2086,SC2046
	pratio=$(median $(paste -d' ' <(printf '%s\n' $qvals) <(printf '%s\n' $uvals) |
		awk '{ if ($2 > 0) printf "%.3f\n", $1 / $2 }'))
	pratio=$(awk -v r="$pratio" 'BEGIN { printf "%.2f", r }')
	if [ "$kind" = lat ]; then
		target="<= $limit x"
		verdict=$(awk -v r="$ratio" -v l="$limit" 'BEGIN { print (r != "nan" && r <= l) ? "met" : "MISSED" }')
	elif [ "$kind" = bw ]; then
		target=">= $limit x"
		verdict=$(awk -v r="$ratio" -v l="$limit" 'BEGIN { print (r != "nan" && r >= l) ? "met" : "MISSED" }')
	else
		target="(reference)"
		verdict="-"
	fi
	if [ "$verdict" = MISSED ]; then missed=1; fi
	# shellcheck disable=SC2086
	printf "%-10s %-12s $f %-3s %-15s $f %-3s %-15s %5s %7s  %-11s %s\n" "$name" "$peer" \
		"$um" "$unit" "($(range "$f" $uvals))" "$qm" "$unit" "($(range "$f" $qvals))" \
		"$ratio" "$pratio" "$target" "$verdict"
}

echo
echo "medians over $rounds rounds (min-max in parentheses)"
printf '%-10s %-12s %-25s %-25s %5s %7s  %-11s %s\n' "qlink" "UCX peer" "UCX median (range)" \
	"qlink median (range)" "ratio" "rounds" "target" "verdict"
row write-lat ucp_put_lat "${u_put[*]}" "${q_wlat[*]}" lat 1.2 "us"
row send-lat tag_lat "${u_tag[*]}" "${q_slat[*]}" lat 1.0 "us"
row write-bw tag_bw "${u_tagbw[*]}" "${q_wbw[*]}" bw 1.0 "M/s"
row send-bw tag_bw "${u_tagbw[*]}" "${q_sbw[*]}" bw 1.0 "M/s"
row send-bw ucp_am_bw "${u_ambw[*]}" "${q_sbw[*]}" ref 1.0 "M/s"
echo "ratio = qlink median / UCX median (latency: round-trip p50, UCX's one-way figure doubled;"
echo "rate: messages/s); rounds = median of the per-round ratios. The verdict uses ratio."
if [ "$strict" = 1 ] && [ "$missed" = 1 ]; then
	exit 2
fi
exit 0
