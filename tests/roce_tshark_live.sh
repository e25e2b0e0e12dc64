#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# roce_tshark_live.sh: a real soft+udp verbs run, recorded by the devices'
# pcap=FILE option (src/providers/sudp/pcap.c; no root needed) and, when run as root,
# also captured on the loopback interface by tshark; every file decoded by
# tests/roce_tshark.sh (no expert info, every frame InfiniBand, each ICRC
# recomputed from the decoded fields). The run: qlink-bench-verbs between
# soft+udp://127.0.0.1:PORT and 127.0.0.2:PORT, WRITE ping-pong
# (RDMA_WRITE_ONLY, ACKNOWLEDGE), SEND/RECV ping-pong (SEND_ONLY) and 4 KiB
# WRITEs (RDMA_WRITE_FIRST/MIDDLE/LAST on a 1024-byte path MTU), with 1 % of
# the packets dropped on each side so that NAKs and retransmissions are on
# the wire too.
#
#   tests/roce_tshark_live.sh BENCH GEN
#
# Exit 77 (skipped) without tshark.
set -euo pipefail
bench=$1
gen=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v tshark >/dev/null 2>&1; then
	echo "SKIP: tshark is not installed"
	exit 77
fi
dir=$(mktemp -d)
cap_pid=
cleanup() {
	if [ -n "$cap_pid" ]; then kill "$cap_pid" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT
export HOME=$dir XDG_CONFIG_HOME=$dir
port=$((30000 + RANDOM % 20000))
live=0
if [ "$(id -u)" = 0 ]; then
	tshark -i lo -f "udp port $port" -w "$dir/live.pcap" -q >"$dir/cap.log" 2>&1 &
	cap_pid=$!
	for _ in $(seq 1 100); do # until the capture runs
		grep -q "Capturing on" "$dir/cap.log" 2>/dev/null && break
		sleep 0.1
	done
	if grep -q "Capturing on" "$dir/cap.log"; then
		live=1
	else
		echo "note: tshark cannot capture on lo; the devices' pcap files only"
		kill "$cap_pid" 2>/dev/null || true
		cap_pid=
	fi
fi
q="mtu=1024&drop=0.01&seed=5"
n=0
run() {
	n=$((n + 1))
	"$bench" --uri "soft+udp://127.0.0.1:$port?$q&pcap=$dir/client-$n.pcap" \
		--server-uri "soft+udp://127.0.0.2:$port?$q&pcap=$dir/server-$n.pcap" \
		--client-cpu -1 --server-cpu -1 --timeout 30 "$@" >"$dir/bench.log" 2>&1 || {
		echo "FAIL: qlink-bench-verbs $*"
		cat "$dir/bench.log"
		exit 1
	}
}
run --test write-lat --iters 100 --warmup 10
run --test send-lat --iters 100 --warmup 10
run --test write-bw --size 4096 --iters 200 --warmup 20
files=()
for k in $(seq 1 $n); do files+=("$dir/client-$k.pcap" "$dir/server-$k.pcap"); done
for f in "${files[@]}"; do
	[ -s "$f" ] || { echo "FAIL: $f is missing or empty"; exit 1; }
	# our own framing: IP and UDP checksums are valid and checked
	"$here/roce_tshark.sh" "$gen" "$f" "$port"
done
if [ "$live" = 1 ]; then
	sleep 1
	kill -INT "$cap_pid"
	wait "$cap_pid" 2>/dev/null || true
	cap_pid=
	# the kernel leaves loopback checksums to an offload that never happens
	CHECKSUMS=0 "$here/roce_tshark.sh" "$gen" "$dir/live.pcap" "$port"
	files+=("$dir/live.pcap")
fi
ops=$(for f in "${files[@]}"; do
	tshark -r "$f" -o "infiniband.rroce.port:$port" -T fields -e infiniband.bth.opcode 2>/dev/null
done | sort -n | uniq | tr '\n' ' ')
echo "opcodes on the wire: $ops"
for want in 4 6 7 8 10 17; do
	case " $ops " in *" $want "*) ;; *) echo "FAIL: opcode $want never seen"; exit 1 ;; esac
done
echo "PASS: a live soft+udp run decodes cleanly ($([ "$live" = 1 ] && echo "pcap option and lo capture" || echo "pcap option"))"
