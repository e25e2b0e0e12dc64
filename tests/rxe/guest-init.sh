#!/bin/sh
# SPDX-License-Identifier: MIT
# guest-init.sh: /init of the rxe test guest (see tests/rxe/run.sh).
#
# Runs inside qemu on Debian's own kernel, with busybox. Brings up Linux
# Soft-RoCE on a veth pair (rxe0 on veth0 = 198.18.0.1, rxe1 on veth1 =
# 198.18.0.2, both in the one network namespace, with policy routing so that
# traffic between the two addresses crosses the veth wire instead of lo),
# shows the devices with `qlink info`, runs the verbs test programs with the
# ibv parametrisation (end a on ibv://rxe0, end b on ibv://rxe1), then the
# RPC layer (qlink bench, and qlinkd driven through its control plane by
# qlink vppu, on RC and UC rings), then the latency benchmark pairs
# (perftest, qlink-bench-verbs and the RPC round trip, alternately), and
# powers off. Results go to the 9p share mounted at /mnt/share:
#   results.txt   one line per step: "test NAME rc=N seconds=S" / "rpc ..." /
#                 "bench ..."
#   NAME.log      the output of each step
# The host (run.sh) reads them; the console shows progress.
export PATH=/usr/sbin:/usr/bin:/bb
/usr/bin/busybox --install -s /bb
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run

ip() { /usr/sbin/ip "$@"; } # busybox sh prefers its own applets: force iproute2
up() { cut -d' ' -f1 /proc/uptime; }
mark() { echo "@@MARK $1 uptime=$(up)"; }
bye() {
	mark poweroff
	sync
	umount /mnt/share 2>/dev/null
	poweroff -f
	sleep 10
	echo "poweroff failed" >&2
	exit 1
}

. /rxe.conf
mark init
for ko in $(cat /modules.list); do
	insmod "$ko" || echo "insmod FAILED: $ko"
done
mkdir -p /mnt/share
if ! mount -t 9p -o trans=virtio,version=9p2000.L share /mnt/share; then
	echo "@@FATAL cannot mount the 9p share"
	bye
fi
R=/mnt/share/results.txt
: >"$R"
res() {
	echo "$*" >>"$R"
	echo "@@RESULT $*"
}
since() { echo "$(up) $1" | awk '{printf "%.1f", $1 - $2}'; }

# ---- network: veth0 = 198.18.0.1, veth1 = 198.18.0.2, same namespace ----
ip link set lo up
ip link add veth0 type veth peer name veth1
ip addr add 198.18.0.1/24 dev veth0
ip addr add 198.18.0.2/24 dev veth1
for k in all default veth0 veth1; do
	sysctl -qw net.ipv4.conf.$k.accept_local=1 net.ipv4.conf.$k.rp_filter=0
done
ip link set veth0 up
ip link set veth1 up
# locally generated traffic to the other address goes out the veth, not lo
ip route add 198.18.0.2 dev veth0 src 198.18.0.1 table 100
ip route add 198.18.0.1 dev veth1 src 198.18.0.2 table 101
ip rule add pref 10 to 198.18.0.2 iif lo lookup 100
ip rule add pref 11 to 198.18.0.1 iif lo lookup 101
ip rule add pref 1000 lookup local
ip rule del pref 0
ping -c 1 -W 2 198.18.0.2 >/dev/null || echo "warning: ping 198.18.0.2 failed"

# ---- Soft-RoCE ----------------------------------------------------------
rc=0
rdma link add rxe0 type rxe netdev veth0 || rc=1
rdma link add rxe1 type rxe netdev veth1 || rc=1
# The IPv4-mapped RoCE v2 GID of a device (its index on port 1), once the
# kernel has added it.
gid_index() {
	# shellcheck disable=SC2046,SC2183 # the four octets, split on purpose
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo "$2" | tr . ' '))
	for g in /sys/class/infiniband/$1/ports/1/gids/*; do
		i=${g##*/}
		if [ "$(cat "$g" 2>/dev/null)" = "$want" ] &&
			[ "$(cat /sys/class/infiniband/$1/ports/1/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ]; then
			echo "$i"
			return 0
		fi
	done
	return 1
}
n=0
until G0=$(gid_index rxe0 198.18.0.1) && G1=$(gid_index rxe1 198.18.0.2); do
	n=$((n + 1))
	if [ $n -gt 50 ]; then
		rc=1
		break
	fi
	sleep 0.2
done
rdma link show
echo "rxe0 GID[$G0] rxe1 GID[$G1]"
res "setup rxe rc=$rc seconds=$(since 0)"
if [ $rc -ne 0 ]; then
	echo "@@FATAL Soft-RoCE did not come up"
	dmesg | tail -20
	bye
fi
mark rxe_ready

cd /qlink || bye
s=$(up)
bin/qlink info >/mnt/share/qlink-info.log 2>&1
rc=$?
cat /mnt/share/qlink-info.log
res "info qlink-info rc=$rc seconds=$(since "$s")"

# ---- the verbs test suite on ibv://rxe0 (end a) and ibv://rxe1 (end b) ----
export QLINK_TEST_IBV_A=ibv://rxe0 QLINK_TEST_IBV_B=ibv://rxe1 QLINK_TEST_SOFT="$QL_SOFT"
for t in $QL_TESTS; do
	mark "test_$t"
	s=$(up)
	timeout "$QL_TEST_TIMEOUT" "bin/$t" >"/mnt/share/$t.log" 2>&1
	rc=$?
	# cmocka's per-test verdicts, for the console
	grep -E '^\[ *(PASSED|FAILED|SKIPPED|  ERROR) *\]|^\[==========\]' "/mnt/share/$t.log" |
		grep -vE '^\[==========\] Running' | sed "s/^/  $t: /"
	res "test $t rc=$rc seconds=$(since "$s")"
done

# ---- ksoftirqd at real-time priority --------------------------------------
# The RPC cases and the benchmarks busy-poll on both vCPUs while rxe does
# its work in softirq context; softirq work that spills over to ksoftirqd
# would wait behind a spinner's time slice. ksoftirqd runs at real-time
# priority, as on hosts tuned for busy polling, the same for every benchmark.
for c in /proc/[0-9]*/comm; do
	case "$(cat "$c" 2>/dev/null)" in
	ksoftirqd/*)
		p=${c#/proc/}
		p=${p%/comm}
		chrt -f -p 50 "$p" >/dev/null 2>&1 || echo "chrt $p failed"
		echo "ksoftirqd pid $p: $(chrt -p "$p" 2>&1 | tr '\n' ' ')"
		;;
	esac
done

# ---- the RPC layer over rxe ----------------------------------------------
# qlink bench (the daemon process on ibv://rxe0, the VPPU on ibv://rxe1) and
# qlinkd (device ibv://rxe0, control plane on 198.18.0.1) driven by
# `qlink vppu --connect --device ibv://rxe1`, on RC and UC rings. Nothing is
# pinned (2 vCPUs). One case is one line:
#   rpc_case NAME CHECK COMMAND...
# runs COMMAND (bounded by its own `timeout`) with its output in
# rpc-NAME.log, then CHECK LOG, which prints the figures for results.txt and
# fails when an answer was wrong or lost; the result line is
#   "rpc NAME rc=N seconds=S FIGURES" (rc=99: the command passed, CHECK did
#   not; rc=98: both did, but a kernel error counter moved)
# A new transport (hsb) is one more rpc_case line. The interop cases
# (further down) are `ix_case NAME CHECK COMMAND...` lines, the same with
# results "interop NAME ..." in interop-NAME.log. Around each case the
# kernel's counters (every rxe device's hw_counters, this namespace's UDP
# counters) are read and judged (kctr_judge, rpc-checks.sh); QL_LOSSY=1
# around a case whose wire loses packets on purpose.
QL_LOSSY=0
run_case() { # KIND NAME CHECK COMMAND...
	kind=$1 name=$2 check=$3
	shift 3
	log=/mnt/share/$kind-$name.log
	mark "${kind}_$name"
	s=$(up)
	kctr_snapshot >/tmp/kctr.before
	klines=$(dmesg | wc -l)
	"$@" >"$log" 2>&1
	rc=$?
	kctr_snapshot >/tmp/kctr.after
	# what the kernel logged meanwhile about rxe (rdma_rxe prints only
	# warnings and errors unless dynamic debug is on)
	dmesg | tail -n +$((klines + 1)) | grep -iE 'rxe|infiniband|rdma' | sed 's/^/kernel: /' >>"$log"
	kdetail=$(kctr_judge /tmp/kctr.before /tmp/kctr.after "$QL_LOSSY")
	krc=$?
	echo "$kdetail" >>"$log"
	detail=$($check "$log" 2>>"$log")
	crc=$?
	[ $rc -eq 0 ] && [ $crc -ne 0 ] && rc=99
	[ $rc -eq 0 ] && [ $krc -ne 0 ] && rc=98
	echo "  $kind $name: rc=$rc $detail"
	[ $krc -ne 0 ] && echo "  $kind $name: $kdetail"
	res "$kind $name rc=$rc seconds=$(since "$s") $detail"
}
rpc_case() { run_case rpc "$@"; }
ix_case() { run_case interop "$@"; }
# The checks (bench_check, qlinkd_check) are in rpc-checks.sh, which the
# host's tests run against sample logs (tests/rxe_checks.sh).
. /rpc-checks.sh
# A VPPU program for qlinkd: the built-in function and the example plugin's,
# every answer compared with the expected one.
cat >/tmp/program.yaml <<'YAML'
calls:
  - function: qlink_parity
    args:
      - { type: bits, n: 256, gen: ones }
    expect:
      - { type: u8, value: 0 }
      - { type: i32, value: 256 }
    repeat: 4000
    window: 8
  - function: repcode_decode
    args:
      - { type: bits, n: 63, pattern: "00001100" }
    expect:
      - { type: bits, n: 64, pattern: "000001" }
      - { type: i32, value: 1 }
    repeat: 1000
YAML
# shellcheck disable=SC2034 # read by qlinkd_check (rpc-checks.sh)
QL_RPC_CALLS=5000 # the program's calls
# $(nsx NS) COMMAND...: COMMAND in network namespace NS ("-": this one).
# A word prefix, not a function: a function run with & would be a subshell
# and $! its pid; `ip netns exec` execs COMMAND, so $! is COMMAND's pid.
nsx() {
	[ "$1" = - ] || echo "/usr/sbin/ip netns exec $1"
}
# qlinkd_session QP [QLINKD-URI CONTROL-ADDRESS QLINKD-NS VPPU-URI VPPU-NS]:
# qlinkd on QLINKD-URI (default ibv://rxe0, control plane on 198.18.0.1, in
# this namespace; ring.qp QP) with the example plugin; the program through
# its control plane from VPPU-URI (default ibv://rxe1); then SIGTERM. Its
# output: the VPPU's report, qlinkd's log, "qlinkd exit=N".
qlinkd_session() {
	qd_uri=${2:-ibv://rxe0} qd_addr=${3:-198.18.0.1} qd_ns=${4:--}
	vp_uri=${5:-ibv://rxe1} vp_ns=${6:--}
	cat >/tmp/qlinkd-$1.yaml <<YAML
device: $qd_uri
control:
  address: $qd_addr
  port: 7700
dispatcher:
  cpu: -1
ring:
  slots: 64
  slot_size: 256
  qp: $1
max_sessions: 2
plugins:
  - path: /qlink/lib/plugin_decoder.so
    config: max_weight=8
YAML
	rm -f /tmp/qlinkd-$1.err
	$(nsx "$qd_ns") bin/qlinkd --config /tmp/qlinkd-$1.yaml 2>/tmp/qlinkd-$1.err &
	qp=$!
	n=0
	until grep -q listening /tmp/qlinkd-$1.err || [ $n -ge 300 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	$(nsx "$vp_ns") timeout "$QL_RPC_TIMEOUT" bin/qlink vppu --connect "$qd_addr:7700" \
		--device "$vp_uri" --qp "$1" --cpu -1 --timeout 60 --program /tmp/program.yaml
	vrc=$?
	echo "vppu exit=$vrc"
	kill -TERM $qp
	n=0
	while kill -0 $qp 2>/dev/null && [ $n -lt 300 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	kill -9 $qp 2>/dev/null
	wait $qp
	echo "qlinkd exit=$?"
	echo "== qlinkd log"
	cat /tmp/qlinkd-$1.err
	return $vrc
}
# hsb_board_session [BOARD-URI BOARD-ADDRESS BOARD-NS QLINKD-URI
# CONTROL-ADDRESS QLINKD-NS]: the FPGA's side is `qlink vppu --hsb-listen`
# on BOARD-URI (default ibv://rxe1; the emulated board's register server on
# BOARD-ADDRESS:8193, default 198.18.0.2, its UC QP on that device);
# qlinkd on QLINKD-URI (default ibv://rxe0, control plane on 198.18.0.1)
# with `transport: hsb` and a qcs entry for the board programs its
# data-plane registers over UDP, reads them back, enables the VP; the board
# then streams QL_HSB_CALLS frames as a board does (the frame by WRITE ONLY
# packets, then its metadata by WRITE WITH IMMEDIATE, immediate = page |
# PSN << 12); qlinkd's hsb counters must show every frame and no refusal.
QL_HSB_CALLS=5000
hsb_board_session() {
	bd_uri=${1:-ibv://rxe1} bd_addr=${2:-198.18.0.2} bd_ns=${3:--}
	qd_uri=${4:-ibv://rxe0} qd_addr=${5:-198.18.0.1} qd_ns=${6:--}
	rm -f /tmp/hsbb-vppu.out # a stale file would be read before the new one is made
	$(nsx "$bd_ns") bin/qlink vppu --hsb-listen "$bd_addr:8193" --device "$bd_uri" \
		--count $QL_HSB_CALLS --window 4 --cpu -1 --timeout 60 --call-timeout 20 \
		>/tmp/hsbb-vppu.out 2>&1 &
	vp=$!
	n=0
	until grep -q '^hsb: data plane qpn' /tmp/hsbb-vppu.out || [ $n -ge 300 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	bqpn=$(sed -n 's/^hsb: data plane qpn 0x[0-9a-f]* (\([0-9]*\)) gid .*$/\1/p' /tmp/hsbb-vppu.out)
	cat >/tmp/qlinkd-hsb.yaml <<YAML
device: $qd_uri
control:
  address: $qd_addr
  port: 7701
dispatcher:
  cpu: -1
transport: hsb
hsb:
  pages: 32
  page_size: 256
max_sessions: 2
qcs:
  - kind: hsb
    address: $bd_addr
    port: 8193
    vp: 0
    qp: ${bqpn:-0}
YAML
	$(nsx "$qd_ns") bin/qlinkd --config /tmp/qlinkd-hsb.yaml >/tmp/qlinkd-hsb.out 2>/tmp/qlinkd-hsb.err &
	qp=$!
	timeout "$QL_RPC_TIMEOUT" sh -c "while kill -0 $vp 2>/dev/null; do sleep 0.1; done"
	wait $vp
	vrc=$?
	echo "vppu exit=$vrc"
	kill -TERM $qp
	n=0
	while kill -0 $qp 2>/dev/null && [ $n -lt 300 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	kill -9 $qp $vp 2>/dev/null
	wait $qp
	echo "qlinkd exit=$?"
	echo "== board (qlink vppu --hsb-listen)"
	cat /tmp/hsbb-vppu.out
	echo "== qlinkd log"
	cat /tmp/qlinkd-hsb.err /tmp/qlinkd-hsb.out
	return $vrc
}
# netem_loss P COMMAND...: COMMAND with P of the packets leaving each veth
# dropped (both directions of the rxe wire: requests and responses), then
# the wire restored. The qdiscs are shown in the log.
netem_loss() {
	loss=$1
	shift
	/usr/sbin/tc qdisc add dev veth0 root netem loss "$loss" &&
		/usr/sbin/tc qdisc add dev veth1 root netem loss "$loss" || {
		echo "netem: cannot add the qdiscs"
		return 98
	}
	"$@"
	crc=$?
	/usr/sbin/tc -s qdisc show dev veth0
	/usr/sbin/tc -s qdisc show dev veth1
	/usr/sbin/tc qdisc del dev veth0 root
	/usr/sbin/tc qdisc del dev veth1 root
	return $crc
}
# The endpoint service (docs/endpoint.md): `qlink ep serve` on ibv://rxe0
# and `qlink ep call` on ibv://rxe1, every type, answers compared, then a
# timed write and read (--repeat); ep_check prints their medians.
ep_session() {
	printf 'version: 1\nendpoints:\n' >/tmp/ep.yaml
	for t in send receive write read; do
		printf '  - path: /e\n    type: %s\n    buffer:\n      size: 65536\n' "$t" >>/tmp/ep.yaml
	done
	bin/qlink ep serve /tmp/ep.yaml --device ibv://rxe0 --listen 198.18.0.1:7471 &
	es=$!
	sleep 1
	c="timeout 60 bin/qlink ep call --device ibv://rxe1 --connect 198.18.0.1:7471"
	erc=0
	$c --type send /e --data "over rxe" || erc=1
	[ "$($c --type receive /e)" = "over rxe" ] || { echo "receive: wrong answer"; erc=1; }
	head -c 65536 /dev/urandom >/tmp/ep.in
	$c /e --file /tmp/ep.in || erc=1
	$c /e --out /tmp/ep.out || erc=1
	cmp /tmp/ep.in /tmp/ep.out || { echo "read: wrong bytes"; erc=1; }
	$c /e --data x --repeat 2000 || erc=1
	$c /e --len 64 --repeat 2000 >/dev/null || erc=1
	kill -TERM $es
	wait $es || erc=1
	[ $erc -eq 0 ] && echo "ep: every type over rxe OK"
	return $erc
}
ep_check() { # LOG: the timed medians; fails without the OK line
	grep -q '^ep: every type over rxe OK' "$1" || return 1
	w=$(sed -n 's/.*write \/e 1 bytes x 2000: median \([0-9.]*\) us.*/\1/p' "$1")
	r=$(sed -n 's/.*read \/e 64 bytes x 2000: median \([0-9.]*\) us.*/\1/p' "$1")
	echo "write_median_us=$w read64_median_us=$r"
}
if [ "$QL_RPC" -eq 1 ]; then
	T=$QL_RPC_TIMEOUT
	B="bin/qlink bench --device ibv://rxe1 --server-device ibv://rxe0 --client-cpu -1 --server-cpu -1
		--warmup-calls $QL_RPC_WARMUP --latency-calls 3000 --rate-seconds 0.3 --paced-seconds 0 --json"
	rpc_case bench-ring-rc bench_check timeout "$T" $B --qp rc
	rpc_case bench-ring-uc bench_check timeout "$T" $B --qp uc
	rpc_case bench-hsb bench_check timeout "$T" $B --transport hsb
	QL_LOSSY=1
	rpc_case bench-ring-uc-netem bench_loss_check netem_loss 2% timeout "$T" $B --qp uc
	QL_LOSSY=0
	rpc_case qlinkd-ring-rc qlinkd_check qlinkd_session rc
	rpc_case qlinkd-ring-uc qlinkd_check qlinkd_session uc
	rpc_case qlinkd-hsb-board hsb_board_check hsb_board_session
	rpc_case ep-cli ep_check ep_session
fi

# ---- latency: perftest and qlink-bench-verbs, alternately --------------
# Server on rxe0 (cpu 1), client on rxe1 (cpu 0), 8-byte messages, RC.
pair() { # name server-cmd client-cmd
	s=$(up)
	taskset -c 1 $2 >"/mnt/share/$1.server.log" 2>&1 &
	sp=$!
	# perftest's client does not retry: wait until the server listens on
	# TCP 18515 (0x4853)
	n=0
	until grep -q ':4853 00000000:0000 0A' /proc/net/tcp || [ $n -ge 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	timeout 120 taskset -c 0 $3 >"/mnt/share/$1.log" 2>&1
	crc=$?
	# perftest's server ends by itself; never wait forever
	n=0
	while kill -0 $sp 2>/dev/null && [ $n -lt 100 ]; do
		sleep 0.2
		n=$((n + 1))
	done
	kill -9 $sp 2>/dev/null
	wait $sp
	src=$?
	res "bench $1 rc=$crc server_rc=$src seconds=$(since "$s")"
}
# (what else runs, should the numbers look odd)
[ "$QL_BENCH_ROUNDS" -gt 0 ] && ps >/mnt/share/ps-before-bench.log
r=1
while [ "$r" -le "$QL_BENCH_ROUNDS" ]; do
	for op in write send; do
		pair "perftest-$op-lat-r$r" \
			"ib_${op}_lat -d rxe0 -x $G0 -F -s 8 -n $QL_BENCH_ITERS" \
			"ib_${op}_lat -d rxe1 -x $G1 -F -s 8 -n $QL_BENCH_ITERS 198.18.0.1"
		# qlink-bench-verbs forks its server itself and pins both ends
		s=$(up)
		timeout 120 bin/qlink-bench-verbs --test "$op-lat" --size 8 \
			--iters "$QL_BENCH_ITERS" --warmup $((QL_BENCH_ITERS / 10)) \
			--uri ibv://rxe1 --server-uri ibv://rxe0 --client-cpu 0 --server-cpu 1 \
			--timeout 30 --json >"/mnt/share/qlink-$op-lat-r$r.log" 2>&1
		res "bench qlink-$op-lat-r$r rc=$? server_rc=0 seconds=$(since "$s")"
	done
	# the RPC round trip (qlink_parity through the ring, qlink bench's latency
	# phase) right after perftest's send-lat, pinned the same way
	s=$(up)
	timeout 120 bin/qlink bench --device ibv://rxe1 --server-device ibv://rxe0 \
		--client-cpu 0 --server-cpu 1 --warmup-calls $((QL_BENCH_ITERS / 10)) \
		--latency-calls "$QL_BENCH_ITERS" --rate-seconds 0.01 --paced-seconds 0 \
		--json >"/mnt/share/qlink-rpc-lat-r$r.log" 2>&1
	res "bench qlink-rpc-lat-r$r rc=$? server_rc=0 seconds=$(since "$s")"
	# the same over the hsb transport (one WRITE WITH IMMEDIATE, one SEND)
	s=$(up)
	timeout 120 bin/qlink bench --transport hsb --device ibv://rxe1 --server-device ibv://rxe0 \
		--client-cpu 0 --server-cpu 1 --warmup-calls $((QL_BENCH_ITERS / 10)) \
		--latency-calls "$QL_BENCH_ITERS" --rate-seconds 0.01 --paced-seconds 0 \
		--json >"/mnt/share/qlink-hsbrpc-lat-r$r.log" 2>&1
	res "bench qlink-hsbrpc-lat-r$r rc=$? server_rc=0 seconds=$(since "$s")"
	r=$((r + 1))
done

# ---- interop: Linux Soft-RoCE <-> qlink's soft+udp ------------------------
# A second wire: veth vk0 = 198.18.1.1 here, with the kernel's rxe2 on it,
# and its peer vq0 = 198.18.1.2 in network namespace qns, where qlink's
# soft+udp NIC is (soft+udp://198.18.1.2). Debian 12's rxe (6.1) opens its
# UDP 4791 socket in the initial namespace only and cannot run on a device
# of another namespace, so the kernel's end stays here and qlink's end,
# which binds its own UDP 4791, goes to qns (docs/soft-udp.md, section 16).
# tests/udp_rxe_interop runs one process per end (interop_pair): first
# rxe0 <-> rxe1 (both kernel: the harness itself), exact and with netem
# dropping 3 % of rxe1's packets; then rxe2 <-> soft+udp, exact, with
# soft+udp dropping 3 % of what it sends (?drop=0.03&seed=7), and with
# netem dropping 3 % of what the kernel sends, so that both stacks'
# retransmissions run; then the RPC data plane across the two stacks.
# interop_pair URI-A URI-B NETNS-B LOSSY-SIDE [CAPTURE-IF CAPTURE-NS
# CAPTURE-SRC CAPTURE-NAME]: side a on URI-A here, side b on URI-B in NETNS-B
# ("-": here); LOSSY-SIDE a, b or -; QL_IX_SKIP set: the cases named by it
# are left out (and said so in the figures); with CAPTURE-IF, the kernel's packets
# seen there (from CAPTURE-SRC, "" for all) are kept as test vectors in
# /mnt/share/rxe-packets/CAPTURE-NAME.
interop_pair() {
	d=$(mktemp -d /tmp/ix.XXXXXX)
	lossy=
	[ "$4" != - ] && lossy="--lossy-side $4"
	[ -n "${QL_IX_SKIP:-}" ] && lossy="$lossy --skip $QL_IX_SKIP"
	cp=
	if [ -n "${5:-}" ]; then
		mkdir -p "/mnt/share/rxe-packets/$8"
		src=
		[ -n "$7" ] && src="--capture-src $7"
		# shellcheck disable=SC2086 # $src: one option or none
		$(nsx "$6") bin/udp_rxe_interop --capture "$5" --capture-dir "/mnt/share/rxe-packets/$8" \
			$src --capture-seconds "$QL_IX_TIMEOUT" >/tmp/ix-cap.out 2>&1 &
		cp=$!
		n=0
		until grep -q listening /tmp/ix-cap.out || [ $n -ge 50 ]; do
			sleep 0.1
			n=$((n + 1))
		done
	fi
	# shellcheck disable=SC2086 # $lossy: one option or none
	timeout "$QL_IX_TIMEOUT" bin/udp_rxe_interop --side a --uri "$1" --rdv "$d" $lossy \
		--count "$QL_IX_COUNT" >/tmp/ix-a.out 2>&1 &
	pa=$!
	# shellcheck disable=SC2086
	$(nsx "$3") timeout "$QL_IX_TIMEOUT" bin/udp_rxe_interop --side b --uri "$2" --rdv "$d" \
		$lossy --count "$QL_IX_COUNT" >/tmp/ix-b.out 2>&1
	rb=$?
	wait $pa
	ra=$?
	sed 's/^/a| /' /tmp/ix-a.out
	sed 's/^/b| /' /tmp/ix-b.out
	echo "pair exit a=$ra b=$rb"
	if [ -n "$cp" ]; then
		kill -TERM $cp
		wait $cp
		cat /tmp/ix-cap.out
		ls "/mnt/share/rxe-packets/$8"
	fi
	rm -rf "$d"
	[ $ra -eq 0 ] && [ $rb -eq 0 ]
}
# status_in_log COMMAND...: COMMAND, its exit status only in the log (for
# a case whose command is meant to fail; the CHECK decides)
status_in_log() {
	"$@"
	echo "command exit=$?"
}
# netem_on DEV P COMMAND...: COMMAND with P of the packets leaving DEV
# dropped, then the wire restored.
netem_on() {
	dev=$1 loss=$2
	shift 2
	/usr/sbin/tc qdisc add dev "$dev" root netem loss "$loss" || {
		echo "netem: cannot add the qdisc"
		return 98
	}
	"$@"
	crc=$?
	/usr/sbin/tc -s qdisc show dev "$dev"
	/usr/sbin/tc qdisc del dev "$dev" root
	return $crc
}
if [ "$QL_INTEROP" -eq 1 ]; then
	mark interop_setup
	s=$(up)
	rc=0
	ip netns add qns || rc=1
	ip link add vk0 type veth peer name vq0 || rc=1
	ip link set vq0 netns qns || rc=1
	ip addr add 198.18.1.1/24 dev vk0
	ip link set vk0 up
	ip -n qns addr add 198.18.1.2/24 dev vq0
	ip -n qns link set lo up
	ip -n qns link set vq0 up
	rdma link add rxe2 type rxe netdev vk0 || rc=1
	n=0
	until G2=$(gid_index rxe2 198.18.1.1); do
		n=$((n + 1))
		if [ $n -gt 50 ]; then
			rc=1
			break
		fi
		sleep 0.2
	done
	ping -c 1 -W 2 198.18.1.2 >/dev/null || rc=1
	echo "rxe2 GID[$G2] on vk0; qns: $(ip -n qns -br addr show dev vq0)"
	res "setup interop rc=$rc seconds=$(since "$s")"
	T=$QL_IX_TIMEOUT
	ix_case rxe-rxe interop_check interop_pair ibv://rxe0 ibv://rxe1 - - veth0 - "" rxe-rxe
	QL_LOSSY=1
	ix_case rxe-rxe-netem interop_loss_check netem_on veth1 3% interop_pair ibv://rxe0 ibv://rxe1 - b
	QL_LOSSY=0
	ix_case rxe-udp interop_check interop_pair ibv://rxe2 "soft+udp://198.18.1.2?peer_port=rxe" qns - \
		vq0 qns 198.18.1.1 rxe-udp
	QL_LOSSY=1
	ix_case rxe-udp-loss interop_loss_check interop_pair ibv://rxe2 \
		"soft+udp://198.18.1.2?drop=0.03&seed=7" qns b
	# the kernel's packets lost instead (netem on vk0): soft+udp recovers
	# from lost responses, ACKs and READ responses, the kernel from the
	# duplicates it then sees
	# the attack: soft+udp flips a bit in 2 % of its packets after their
	# ICRC was computed; the kernel must refuse each (the UDP balance shows
	# it) and RC must still deliver every byte
	ix_case rxe-udp-corrupt interop_refused_check status_in_log interop_pair ibv://rxe2 \
		"soft+udp://198.18.1.2?corrupt=0.02&seed=11" qns b
	ix_case rxe-udp-kloss interop_kloss_check netem_on vk0 3% interop_pair ibv://rxe2 \
		soft+udp://198.18.1.2 qns a
	QL_LOSSY=0
	if [ "$QL_RPC" -eq 1 ]; then
		# qlinkd on the kernel's rxe2, the VPPU on soft+udp in qns; and the reverse
		rpc_case udp-qlinkd-rxe-ring-rc qlinkd_check qlinkd_session rc \
			ibv://rxe2 198.18.1.1 - soft+udp://198.18.1.2 qns
		rpc_case udp-qlinkd-rxe-ring-uc qlinkd_check qlinkd_session uc \
			ibv://rxe2 198.18.1.1 - soft+udp://198.18.1.2 qns
		rpc_case udp-qlinkd-udp-ring-rc qlinkd_check qlinkd_session rc \
			soft+udp://198.18.1.2 198.18.1.2 qns ibv://rxe2 -
		rpc_case udp-qlinkd-udp-ring-uc qlinkd_check qlinkd_session uc \
			soft+udp://198.18.1.2 198.18.1.2 qns ibv://rxe2 -
		# the board on soft+udp, qlinkd on rxe2; and the reverse
		rpc_case udp-hsb-board-udp hsb_board_check hsb_board_session \
			soft+udp://198.18.1.2 198.18.1.2 qns ibv://rxe2 198.18.1.1 -
		rpc_case udp-hsb-board-rxe hsb_board_check hsb_board_session \
			ibv://rxe2 198.18.1.1 - soft+udp://198.18.1.2 198.18.1.2 qns
	fi
fi

dmesg >/mnt/share/dmesg.log
echo "===== kernel messages (rxe, errors)"
dmesg | grep -iE 'rxe|infiniband|error|fail|bug|warn' | tail -20
bye
