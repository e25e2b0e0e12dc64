#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sdr_pair.sh: SDR-RDMA between two processes with `qlink sdr` (the receiver
# forked with --pair, and once as two separately started processes meeting
# on a TCP port): every message of 1 byte to 64 MiB arrives exactly once and
# byte-identical (the receiver checks each byte and the tool fails
# otherwise), for selective repeat and erasure coding, on soft+shm without
# faults and on soft+udp (127.x.y.1 <-> 127.x.y.2) under each injected fault
# of the sender's data QP: drop, duplicate, reorder, corrupt (dropped by the
# receiver's ICRC check). The counters the tool prints must show the fault
# being repaired. Also the baselines (rc, none) and bad usage.
#
#   tests/sdr_pair.sh QLINK [quick]
set -uo pipefail
qlink=$1
quick=${2:-}
fail=0
pid=$$
a=127.$(((pid >> 8) & 255)).$((pid & 255)).1
b=127.$(((pid >> 8) & 255)).$((pid & 255)).2
port=$((22000 + pid % 20000))
udp=(--device "soft+udp://$a:$port" --peer-device "soft+udp://$b:$port")
shm=(--device "soft+shm://sdrpair-$pid")
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# run NAME EXPECT-REGEX... -- qlink sdr args: passes when exit 0 and every
# regex matches the output
run() {
	local name=$1 want=()
	shift
	while [ "$1" != -- ]; do want+=("$1"); shift; done
	shift
	if ! timeout 300 "$qlink" sdr "$@" >"$out" 2>&1; then
		echo "FAIL: $name (exit $?)"
		sed 's/^/    /' "$out"
		fail=1
		return
	fi
	for w in "${want[@]}"; do
		if ! grep -qE -- "$w" "$out"; then
			echo "FAIL: $name: no '$w' in"
			sed 's/^/    /' "$out"
			fail=1
			return
		fi
	done
	echo "ok: $name: $(grep '^completion' "$out")"
}

sizes="1 4097 1M"
[ -z "$quick" ] && sizes="1 4095 4096 4097 100000 1M"
for rel in sr ec; do
	for s in $sizes; do
		run "shm $rel $s" "delivered: 3 of 3 messages complete and byte-identical" -- \
			--pair "${shm[@]}" --reliability $rel --size $s --count 3
	done
	run "shm $rel 64M" "delivered: 2 of 2 " -- --pair "${shm[@]}" --reliability $rel --size 64M --count 2
	for f in "drop=0.05" "dup=0.1" "reorder=0.1" "corrupt=0.05"; do
		for s in $sizes; do
			run "udp $rel $s ${f%=*}" "delivered: 4 of 4 " -- --pair "${udp[@]}" \
				--reliability $rel --size $s --count 4 --fault "$f" --seed 11
		done
	done
	[ -z "$quick" ] && for f in "dup=0.05" "reorder=0.05" "corrupt=0.02"; do
		run "udp $rel 64M ${f%=*}" "delivered: 2 of 2 " -- --pair "${udp[@]}" \
			--reliability $rel --size 64M --count 2 --fault "$f" --seed 16
	done
	run "udp $rel 64M drop 1%" "delivered: 2 of 2 " -- --pair "${udp[@]}" --reliability $rel \
		--size 64M --count 2 --loss 0.01 --seed 15
done
# the repair shows in the counters: SR retransmits, EC rebuilds
run "udp sr repairs" "sender: packets=[0-9]+ retransmits=[1-9]" -- --pair "${udp[@]}" \
	--reliability sr --size 1M --count 3 --loss 0.05 --seed 21
run "udp ec rebuilds" "receiver: packets=[0-9]+ recovered=[1-9]" -- --pair "${udp[@]}" \
	--reliability ec --size 1M --count 3 --loss 0.02 --seed 22
run "udp rc drop" "delivered: 3 of 3 " "retransmits=[1-9]" -- --pair "${udp[@]}" \
	--reliability rc --size 1M --count 3 --loss 0.02 --seed 23
run "udp none drop" "delivered: 0 of 3 messages complete and byte-identical, 3 partial" -- \
	--pair "${udp[@]}" --reliability none --size 1M --count 3 --loss 0.05 --seed 24
run "udp ec delay" "delivered: 2 of 2 " -- --pair "${udp[@]}" --reliability ec --size 1M \
	--count 2 --loss 0.01 --delay-us 200
run "udp ec small window" "delivered: 3 of 3 " "credit_stalls=[1-9]" -- --pair "${udp[@]}" \
	--reliability ec --size 1M --count 3 --loss 0.02 --window 16

# two separately started processes meeting on a TCP port
"$qlink" sdr recv --device "soft+udp://$b:$port" --listen 127.0.0.1:0 >"$out.r" 2>&1 &
rpid=$!
for _ in $(seq 100); do grep -q "listening on port" "$out.r" && break; sleep 0.05; done
tport=$(sed -n 's/^listening on port //p' "$out.r")
run "send/recv processes" "delivered: 3 of 3 " -- send --device "soft+udp://$a:$port" \
	--connect "127.0.0.1:$tport" --reliability ec --size 1M --count 3 --loss 0.02
wait $rpid || { echo "FAIL: the receiver process exited $?"; sed 's/^/    /' "$out.r"; fail=1; }
rm -f "$out.r"

# bad usage is refused with a reason and exit 2
bad() {
	local why=$1
	shift
	"$qlink" sdr "$@" >"$out" 2>&1
	local rc=$?
	if [ $rc -ne 2 ] || ! grep -qE -- "$why" "$out"; then
		echo "FAIL: qlink sdr $* gave $rc:"
		sed 's/^/    /' "$out"
		fail=1
	fi
}
bad "say send, recv or --pair" --device soft+shm://x
bad "--device URI is required" --pair
bad "bad value '0' for --size" --pair "${shm[@]}" --size 0
bad "bad value '2G' for --size" --pair "${shm[@]}" --size 2G
bad "bad value 'tcp' for --reliability" --pair "${shm[@]}" --reliability tcp
bad "need soft\\+udp" --pair "${shm[@]}" --loss 0.1
bad "bad value '0.9'" --pair "${udp[@]}" --loss 0.9
bad "two addresses" --pair --device "soft+udp://$a:$port"
bad "not soft://loop" --pair --device soft://loop
bad "recv needs --listen" recv --device soft+shm://x
bad "bad value '2' for --window" --pair "${shm[@]}" --window 2
bad "bad value '9,1' for --ec|bad value '40,1'" --pair "${shm[@]}" --ec 40,1
"$qlink" sdr --help | grep -q -- "--reliability" || { echo "FAIL: --help"; fail=1; }

[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
