#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# udp_rxe_interop_shm.sh: the interop program (tests/udp_rxe_interop.c)
# between two processes on soft+shm, every case, both sides checked: the
# harness that the qemu stage runs between kernel rxe and soft+udp, proven
# on the build host. Then with a side that sends fewer messages than the
# other expects, or spoils a byte (--corrupt): both sides must fail the
# case, so the checks can fail.
#
# With --udp: the same 18 cases between two soft+udp devices on loopback
# addresses (127.x.y.2 and 127.x.y.3, one port), exact and with side b
# dropping 3 % of what it sends (?drop=0.03&seed=7, --lossy-side b).
#
#   tests/udp_rxe_interop_shm.sh PROGRAM [--udp]
set -uo pipefail
prog=$1
mode=${2:-}
uri_a="soft+shm://ixa$$"
uri_b="soft+shm://ixb$$"
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
pair() { # NAME EXPECT(0|1) ARGS-A -- ARGS-B
	local name=$1 want=$2 to=20
	[ "$want" -eq 0 ] || to=3 # a failing case waits out its timeout
	shift 2
	local a=() b=()
	while [ "$1" != -- ]; do a+=("$1"); shift; done
	shift
	b=("$@")
	mkdir -p "$tmp/$name"
	chmod 700 "$tmp/$name"
	"$prog" --side a --uri "$uri_a" --rdv "$tmp/$name" --timeout "$to" "${a[@]}" >"$tmp/$name.a" 2>&1 &
	local pa=$!
	"$prog" --side b --uri "$uri_b$query" --rdv "$tmp/$name" --timeout "$to" "${b[@]}" >"$tmp/$name.b" 2>&1
	local rb=$?
	wait $pa
	local ra=$?
	if { [ "$want" -eq 0 ] && [ $ra -eq 0 ] && [ $rb -eq 0 ]; } ||
		{ [ "$want" -ne 0 ] && [ $ra -ne 0 ] && [ $rb -ne 0 ]; }; then
		echo "ok: $name (a rc=$ra, b rc=$rb)"
	else
		echo "FAIL: $name: a rc=$ra b rc=$rb (want $([ "$want" -eq 0 ] && echo 0 || echo non-zero))"
		sed 's/^/  a| /' "$tmp/$name.a"
		sed 's/^/  b| /' "$tmp/$name.b"
		fails=$((fails + 1))
	fi
}
query=
if [ "$mode" = --udp ]; then
	net="127.$((($$ >> 8) & 255)).$(($$ & 255))"
	port=$((20000 + $$ % 20000))
	uri_a="soft+udp://$net.2:$port"
	uri_b="soft+udp://$net.3:$port"
	pair exact 0 --
	query='?drop=0.03&seed=7'
	pair lossy 0 --lossy-side b -- --lossy-side b
	for n in exact lossy; do
		for side in a b; do
			c=$(($(grep -c '^case .* rc=0 ' "$tmp/$n.$side") + $(grep -c '^skipped ' "$tmp/$n.$side")))
			[ "$c" -eq 18 ] || { echo "FAIL: $n: $c cases passed or skipped on side $side"; fails=$((fails + 1)); }
		done
	done
	grep -h '^case' "$tmp/lossy.a" | head -n 3
	[ "$fails" -eq 0 ] && echo "udp_rxe_interop (soft+udp): all passed" && exit 0
	echo "udp_rxe_interop (soft+udp): $fails failed"
	exit 1
fi
pair all 0 --
grep -c '^case .* rc=0 ' "$tmp/all.a" | grep -qx 18 || { echo "FAIL: not 18 cases passed on side a"; cat "$tmp/all.a"; fails=$((fails + 1)); }
grep -c '^case .* rc=0 ' "$tmp/all.b" | grep -qx 18 || { echo "FAIL: not 18 cases passed on side b"; cat "$tmp/all.b"; fails=$((fails + 1)); }
sed 's/^/  a| /' "$tmp/all.a" | tail -n 3
# side b sends fewer messages than a expects: a's checks (receive count,
# bytes in place, atomic final value) and b's verdict must both say so
pair short-send 1 --cases rc-send-reqb --count 8 -- --cases rc-send-reqb --count 6
pair short-write 1 --cases rc-write-reqb --count 8 -- --cases rc-write-reqb --count 6
pair short-fadd 1 --cases rc-fetch_add-reqb --count 8 -- --cases rc-fetch_add-reqb --count 6
# the responder spoils a byte: a READ source byte (the requester sees it)
# or a byte past the last message (the responder's own sweep sees it)
pair corrupt-read 1 --cases rc-read-reqa -- --cases rc-read-reqa --corrupt
pair corrupt-gap 1 --cases uc-write-reqa -- --cases uc-write-reqa --corrupt
grep -q 'FAIL: .*written outside any message' "$tmp/corrupt-gap.b" ||
	{ echo "FAIL: the stray byte was not reported"; cat "$tmp/corrupt-gap.b"; fails=$((fails + 1)); }
# a side alone: the peer never comes; it stops after the first case
"$prog" --side a --uri "soft+shm://ixa$$" --rdv "$tmp" --timeout 1 >"$tmp/alone.a" 2>&1
if [ $? -ne 0 ] && grep -q 'the other side is gone' "$tmp/alone.a" && [ "$(grep -c '^case ' "$tmp/alone.a")" -eq 1 ]; then
	echo "ok: a side alone fails after one case"
else
	echo "FAIL: a side alone:"; cat "$tmp/alone.a"; fails=$((fails + 1))
fi
# the test vectors' check: a change to a masked field (the TOS) still
# verifies, a change to the destination address does not
vec=$(dirname "$0")/data/rxe-packets
mkdir -p "$tmp/vec" "$tmp/tos"
sed '/^hex$/{n;s/^4500/45e0/}' "$vec/0a-rc_rdma_write_only.txt" >"$tmp/tos/0a.txt"
"$prog" --verify-vectors "$tmp/tos" >"$tmp/tos.out" 2>&1 ||
	{ echo "FAIL: a packet with another TOS (masked) did not verify"; cat "$tmp/tos.out"; fails=$((fails + 1)); }
sed '/^hex$/{n;n;s/^c6/c7/}' "$vec/0a-rc_rdma_write_only.txt" >"$tmp/vec/0a.txt"
if "$prog" --verify-vectors "$tmp/vec" >"$tmp/vec.out" 2>&1; then
	echo "FAIL: a spoiled test vector verified"; cat "$tmp/vec.out"; fails=$((fails + 1))
else
	echo "ok: a spoiled test vector is refused"
fi
[ "$fails" -eq 0 ] && echo "udp_rxe_interop_shm: all passed" && exit 0
echo "udp_rxe_interop_shm: $fails failed"
exit 1
