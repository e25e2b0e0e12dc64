#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd programs a Hololink board itself (`qcs:` entry of kind hsb, no
# JSON control plane): `qlink vppu --hsb-listen` plays the FPGA over
# soft+shm (it prints its QP and GID; the qcs entry names them with `qp`
# and `gid`), qlinkd creates an hsb session, connects its UC QP to the
# board's, writes and reads back the data-plane registers, and the board
# streams 20000 frames by WRITE WITH IMMEDIATE; every answer is checked,
# nothing is lost, qlinkd's counters match, SIGTERM is clean. A qcs entry
# pointing at a port with no board: qlinkd names the board and the timeout
# and exits 1 (docs/qlinkd.md).
set -u
qlinkd=$1 qlink=$2
. "$(dirname "$0")/qlinkd_lib.sh"
vp=
ql_at_exit() { [ -n "$vp" ] && kill $vp 2>/dev/null; }
fail() { # the lib's, and the configurations
	echo "FAIL: $*"
	for f in "$dir"/*.out "$dir"/*.err "$dir"/*.yaml; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
	exit 1
}
cport=$(ql_free_ports 2) || fail "no free UDP ports" # the control plane's, and a dead board's

timeout 60 "$qlink" vppu --hsb-listen 127.0.0.1:0 --count 20000 --window 4 --cpu -1 \
	--timeout 20 --device "soft+shm://qlhb-v-$$" >"$dir/vppu.out" 2>&1 &
vp=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/^hsb: register server on 127.0.0.1:\([0-9]*\), VP 0$/\1/p' "$dir/vppu.out")
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || fail "the board printed no register server line"
qpn=$(sed -n 's/^hsb: data plane qpn 0x[0-9a-f]* (\([0-9]*\)) gid .*$/\1/p' "$dir/vppu.out")
gid=$(sed -n 's/^hsb: data plane qpn .* gid \(.*\)$/\1/p' "$dir/vppu.out")
[ -n "$qpn" ] && [ -n "$gid" ] || fail "the board printed no data plane line"

conf() { # $1: file, $2: board port, $3: extra qcs keys
	cat >"$1" <<YAML
device: soft+shm://qlhb-d-$$
control:
  address: 127.0.0.1
  port: $cport
dispatcher:
  cpu: -1
transport: ${transport:-hsb}
hsb:
  pages: 32
  page_size: 256
max_sessions: 4
qcs:
  - kind: hsb
    address: 127.0.0.1
    port: $2
    vp: 0
$3
YAML
}
# a ring qlinkd: its control-plane sessions are rings, the board's is hsb
transport=ring conf "$dir/board.yaml" "$port" "    qp: $qpn
    gid: \"$gid\""
"$qlinkd" --check-config "$dir/board.yaml" >"$dir/check.out" 2>&1 || fail "check-config refused qcs"
grep -q "board.yaml: OK" "$dir/check.out" || fail "check-config said no OK"
timeout 60 "$qlinkd" --config "$dir/board.yaml" >"$dir/qlinkd.out" 2>"$dir/qlinkd.err" &
srv=$!
wait $vp || { vp=; fail "the board (vppu --hsb-listen) exited $?"; }
vp=
grep -q "closed: calls 20000 answered 20000 ok 20000 wrong 0 handler_errors 0 protocol_errors 0 timeouts 0 late 0 lost 0" \
	"$dir/vppu.out" || fail "board report"
# what the board was programmed with is what qlinkd has
for _ in $(seq 50); do grep -q "board programmed" "$dir/qlinkd.err" && break; sleep 0.1; done
hqpn=$(sed -n 's/.*board programmed session=[0-9]* .* qpn=\([0-9]*\) rkey=\(0x[0-9a-f]*\) .*/\1/p' "$dir/qlinkd.err")
rkey=$(sed -n 's/.*board programmed session=[0-9]* .* rkey=\(0x[0-9a-f]*\) .*/\1/p' "$dir/qlinkd.err")
[ -n "$hqpn" ] || fail "qlinkd logged no programmed board"
grep -q "board_qpn=$qpn " "$dir/qlinkd.err" || fail "qlinkd did not connect to the board's QP"
grep -q "^hsb: VP 0 configured: qpn $(printf '0x%x' "$hqpn") rkey $rkey page_addr 0x0 stride 256 pages 32 frame 128 host gid " \
	"$dir/vppu.out" || fail "the board's parameters are not qlinkd's"
# the same qlinkd serves a ring QCS through its control plane: each
# session's transport is its own
timeout 30 "$qlink" vppu --connect "127.0.0.1:$cport" --device "soft+shm://qlhb-r-$$" --cpu -1 \
	--count 2000 --window 4 --timeout 20 >"$dir/ring-vppu.out" 2>&1 || fail "ring QCS exited $?"
grep -q "calls 2000 answered 2000 ok 2000 wrong 0" "$dir/ring-vppu.out" || fail "ring QCS report"
grep -q "transport=ring" "$dir/qlinkd.err" || fail "no ring session created"
kill -TERM $srv
wait $srv || { srv=; fail "qlinkd exited $? on SIGTERM"; }
srv=
grep -q "counters session session=0 running=0 requests=20000 responses=20000 ok=20000 handler_errors=0 protocol_errors=0 dropped=0" \
	"$dir/qlinkd.out" || fail "qlinkd's counters do not match the calls"

# no board at that port (a live soft QP to connect to, but nobody answers
# the registers): the timeout, with the address; qlinkd exits 1
timeout 30 "$qlink" vppu --hsb-listen 127.0.0.1:0 --count 1 --cpu -1 --timeout 8 \
	--device "soft+shm://qlhb-w-$$" >"$dir/vppu2.out" 2>&1 &
vp=$!
qpn=
for _ in $(seq 100); do
	qpn=$(sed -n 's/^hsb: data plane qpn 0x[0-9a-f]* (\([0-9]*\)) gid .*$/\1/p' "$dir/vppu2.out")
	[ -n "$qpn" ] && break
	sleep 0.1
done
gid=$(sed -n 's/^hsb: data plane qpn .* gid \(.*\)$/\1/p' "$dir/vppu2.out")
[ -n "$qpn" ] && [ -n "$gid" ] || fail "the second board printed no data plane line"
dead=$((cport + 1))
conf "$dir/dead.yaml" "$dead" "    qp: $qpn
    gid: \"$gid\""
timeout 30 "$qlinkd" --config "$dir/dead.yaml" >"$dir/dead.out" 2>"$dir/dead.err"
rc=$?
[ $rc -eq 1 ] || fail "qlinkd with no board exited $rc, not 1"
grep -q "qlinkd: qcs board 127.0.0.1:$dead VP 0: hololink 127.0.0.1:$dead: no reply to RD_DWORD of 0x00000080 after 4 tries" \
	"$dir/dead.err" || fail "no timeout message naming the board"
grep -q "board \"not programmed: session failed\" board=127.0.0.1:$dead vp=0 board_qpn=$qpn " \
	"$dir/dead.err" || fail "no structured log of the failure"
kill $vp 2>/dev/null
wait $vp 2>/dev/null
vp=

# defaults: the board's QP 2 and its address IPv4-mapped as its GID (what
# RoCE needs; soft refuses such a GID, and qlinkd says which board)
conf "$dir/map.yaml" "$dead" ""
timeout 30 "$qlinkd" --config "$dir/map.yaml" >"$dir/map.out" 2>"$dir/map.err" && fail "unreachable GID accepted"
grep -q "board_qpn=2 board_gid=::ffff:127.0.0.1 " "$dir/map.err" || fail "defaults of qp and gid"

# bad qcs keys are refused with their line
printf 'transport: hsb\nqcs:\n  - kind: hsb\n    address: 10.0.0.2\n    qp: 0\n    gid: nope\n' >"$dir/bad.yaml"
"$qlinkd" --check-config "$dir/bad.yaml" >"$dir/bad.out" 2>&1 && fail "qp 0, gid nope accepted"
grep -q "bad.yaml:5: qcs.0.qp" "$dir/bad.out" || fail "qp message"
grep -q "bad.yaml:6: qcs\[0\].gid: 'nope' is not a GID" "$dir/bad.out" || fail "gid message"
# boards are hsb sessions whatever `transport` says (that is the control
# plane's sessions'): a ring qlinkd takes qcs entries
printf 'qcs:\n  - kind: hsb\n    address: 10.0.0.2\n' >"$dir/ring.yaml"
"$qlinkd" --check-config "$dir/ring.yaml" >"$dir/ring.out" 2>&1 || fail "qcs on a ring qlinkd refused"
echo PASS
