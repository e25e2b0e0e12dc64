#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_hololink.sh: `qlink vppu --hsb-listen` configured through `qlink
# hololink write` as a host would (13 data-plane registers in one block,
# then the enable bit), printing what it received; `qlink hololink read`
# reads them back; a refused write and a silent board exit 1 with the
# board's status or the register address.
#
#   tests/cli_hololink.sh QLINK
set -uo pipefail
qlink=$1
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp"/* 2>/dev/null; exit 1; }

"$qlink" vppu --hsb-listen 127.0.0.1:0 --timeout 20 >"$tmp/vppu.out" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/^hsb: register server on 127.0.0.1:\([0-9]*\), VP 0$/\1/p' "$tmp/vppu.out")
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || fail "no register server line"
b() { "$qlink" hololink --timeout 500ms "127.0.0.1:$port" "$@"; }

# no register there: the board's status
b write 0x7000 1 2>"$tmp/err" && fail "write to no register accepted"
grep -q "status 0x03 (invalid address)" "$tmp/err" || fail "no status in: $(cat "$tmp/err")"
# enabling before configuring: general error
b write 0x0200030c 1 2>"$tmp/err" && fail "enable of an unconfigured VP accepted"
grep -q "status 0x02 (general error)" "$tmp/err" || fail "no status in: $(cat "$tmp/err")"
# what upstream's host writes at start is taken (VSYNC, PTP, events, APB RAM, I2C)
b write 0x70000000 0 0x104 2 0x200 0 0x20c 0xffffffff 0x2080 0 0x03000200 0 ||
	fail "start-up registers refused"
# host 10.0.0.1, MAC 02:11:22:33:44:55, QP 0x11, rkey 0x2233, base 0x100000000,
# page 384, 64 pages, frame 256, DP_PACKET_SIZE 11 (Ethernet MTU 1500)
b write 0x02000304 11 0x02000308 12288 0x1018 256 0x1020 0x22334455 0x1024 0x0211 \
	0x1028 0x0a000001 0x102c 4791 0x1000 0x11 0x1004 0x2233 0x1008 0 0x100c 1 \
	0x1010 3 0x1014 63 || fail "configuration block refused"
b read 0x1004 0x1014 >"$tmp/read" || fail "read"
printf '0x00001004 0x00002233\n0x00001014 0x0000003f\n' | cmp -s - "$tmp/read" ||
	fail "read back: $(cat "$tmp/read")"
# a third party (another loopback address) is not answered: the board
# belongs to the first host that talked to it
"$qlink" hololink --timeout 100ms --retries 0 "127.0.0.2:$port" write 0x1004 0x6666 \
	2>"$tmp/err" && fail "third-party write answered"
b read 0x1004 >"$tmp/read" && grep -q "0x00001004 0x00002233" "$tmp/read" ||
	fail "third party changed DP_RKEY: $(cat "$tmp/read")"
b write 0x0200030c 1 || fail "enable refused"
wait "$pid" || fail "vppu --hsb-listen exited $?"
pid=
grep -q "^hsb: VP 0 configured: qpn 0x11 rkey 0x2233 page_addr 0x100000000 stride 384 pages 64 frame 256 host 10.0.0.1 mac 02:11:22:33:44:55 udp_port 4791 mtu 1482 src_port 12288$" \
	"$tmp/vppu.out" || fail "parameters: $(cat "$tmp/vppu.out")"
# the board is gone: silence, with the address
"$qlink" hololink --timeout 50ms --retries 1 "127.0.0.1:$port" read 0x1000 2>"$tmp/err" &&
	fail "read from nobody succeeded"
grep -q "no reply to RD_DWORD of 0x00001000 after 2 tries" "$tmp/err" || fail "timeout: $(cat "$tmp/err")"
# --allow on the vppu's board: a listed network is answered, a host not in
# the list is not, even the first one to talk (no trust on first use)
start_board() {
	"$qlink" vppu --hsb-listen 127.0.0.1:0 --timeout 20 "$@" >"$tmp/vppu.out" 2>&1 &
	pid=$!
	port=
	for _ in $(seq 100); do
		port=$(sed -n 's/^hsb: register server on 127.0.0.1:\([0-9]*\), VP 0$/\1/p' "$tmp/vppu.out")
		[ -n "$port" ] && break
		sleep 0.1
	done
	[ -n "$port" ] || fail "no register server line ($*)"
}
stop_board() { kill "$pid"; wait "$pid" 2>/dev/null; pid=; }
start_board --allow 10.0.0.0/8 --allow 192.168.1.7
"$qlink" hololink --timeout 100ms --retries 1 "127.0.0.1:$port" read 0x1004 2>"$tmp/err" &&
	fail "a host outside --allow answered"
grep -q "no reply to RD_DWORD" "$tmp/err" || fail "refused: $(cat "$tmp/err")"
stop_board
start_board --allow 127.0.0.0/8
"$qlink" hololink --timeout 500ms "127.0.0.1:$port" read 0x1004 >"$tmp/read" ||
	fail "a host in --allow not answered: $(cat "$tmp/read")"
stop_board
"$qlink" vppu --hsb-listen 0 --allow 300.1.2.3 2>/dev/null; [ $? -eq 2 ] || fail "bad --allow not a usage error"
"$qlink" vppu --hsb-listen 0 --allow ::1 2>/dev/null; [ $? -eq 2 ] || fail "IPv6 --allow not a usage error"
"$qlink" vppu --allow 127.0.0.1 --count 1 2>/dev/null; [ $? -eq 2 ] || fail "--allow without --hsb-listen not a usage error"
# usage errors
"$qlink" hololink 127.0.0.1 write 0x1002 1 2>/dev/null; [ $? -eq 2 ] || fail "misaligned ADDR not a usage error"
"$qlink" hololink 127.0.0.1 poke 0x1000 2>/dev/null; [ $? -eq 2 ] || fail "unknown verb not a usage error"
echo "PASS: hsb listener configured over the register protocol, readback, refusals, timeout, --allow"
