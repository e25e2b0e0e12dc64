#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compare-ucx-rpc.sh: qlink's RPC round trip (qlink bench, latency phase)
# against UCX's active-message round trip (ucx_perftest -t ucp_am_lat) on
# the same cores, in short alternating rounds; prints the medians and the
# ratio qlink / UCX, and the issue's target (RPC p50 <= 0.8 us).
#
# usage: bench/compare-ucx-rpc.sh [--rounds N] [--size N] [--help]
#
# qlink's call is a full RPC: a 72-byte request (slot header, RPCHeader,
# 32-byte syndrome) written into the ring, a handler computing parity and
# weight, a 29-byte response SENT back and checked. UCX's am_lat moves one
# active message each way (default --size 64 here, close to the request).
# Needs ucx_perftest (apt-get install ucx-utils).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=5
size=64
ccpu=0
scpu=1
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift ;;
	--size) size=$2; shift ;;
	-h | --help) sed -n '3,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
	*) echo "compare-ucx-rpc.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
	shift
done
if ! command -v ucx_perftest >/dev/null 2>&1; then
	echo "compare-ucx-rpc.sh: ucx_perftest not found; install it with:" >&2
	echo "  apt-get install -y ucx-utils" >&2
	exit 1
fi
bin=build-release/tools/qlink
if [ ! -x "$bin" ]; then
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DQLINK_BUILD_TESTS=OFF >&2
	cmake --build build-release -j"$(nproc 2>/dev/null || echo 2)" --target qlink-cli >&2
fi

prog=compare-ucx-rpc.sh
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

declare -a u q
for r in $(seq "$rounds"); do
	for who in ucx qlink; do
		# alternate the order each round
		if [ $((r % 2)) -eq 0 ]; then who=$([ "$who" = ucx ] && echo qlink || echo ucx); fi
		if [ "$who" = ucx ]; then
			ucx_run ucp_am_lat 100000
			u+=("$(awk -v v="$ucx_p50" 'BEGIN { printf "%.4f", v * 2 }')")
		else
			out=$("$bin" bench --json --client-cpu "$ccpu" --server-cpu "$scpu" \
				--latency-calls 100000 --rate-seconds 0.05 --paced-seconds 0)
			p50=$(echo "$out" | sed -n 's/.*"rtt_ns":{"p50":\([0-9]*\).*/\1/p' | head -n 1)
			lost=$(echo "$out" | sed -n 's/.*"lost":\([0-9]*\).*/\1/p' | head -n 1)
			[ -n "$p50" ] || { echo "$prog: cannot parse: $out" >&2; exit 1; }
			[ "$lost" = 0 ] || { echo "$prog: qlink bench lost $lost calls" >&2; exit 1; }
			q+=("$(awk -v v="$p50" 'BEGIN { printf "%.4f", v / 1e3 }')")
		fi
	done
	printf 'round %d: UCX ucp_am_lat RTT %s us, qlink RPC RTT %s us\n' "$r" "${u[-1]}" "${q[-1]}"
done
um=$(median "${u[@]}")
qm=$(median "${q[@]}")
ratio=$(awk -v a="$qm" -v b="$um" 'BEGIN { printf "%.2f", a / b }')
verdict=$(awk -v a="$qm" 'BEGIN { print (a <= 0.8) ? "met" : "MISSED" }')
printf '\nmedians over %d rounds: UCX ucp_am_lat (%d B) RTT %s us (%s), qlink RPC RTT %s us (%s)\n' \
	"$rounds" "$size" "$um" "$(range %.3f "${u[@]}")" "$qm" "$(range %.3f "${q[@]}")"
printf 'ratio qlink / UCX = %s; target qlink p50 <= 0.8 us: %s\n' "$ratio" "$verdict"
