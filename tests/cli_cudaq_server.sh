#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlink serve as CUDA-Q Realtime's test server (docs/cudaq.md): started with
# exactly the command line CUDA-Q's two-process UDP test uses, stdout and
# stderr in one pipe; READY parsed within 15 s; CUDA-Q's five cases (each on
# a fresh server, as its fixture does) run by a caller that behaves as
# CUDA-Q's (ql-cudaq-udp-client); SIGTERM; the PROCESSED count checked; in
# both dispatch shapes. Then qlink's own: a request after a drop answered,
# a burst, garbage datagrams (one warning for the oversize one), a short
# datagram, CUDA-Q's spelling without `--`, --bad-requests answer, IPv6,
# the --timeout backstop, bad arguments, qlink vppu calling qlink serve over
# UDP with every answer checked, and qlink bench --transport udp.
#
#   tests/cli_cudaq_server.sh QLINK CLIENT
set -u
qlink=$1 client=$2
dir=$(mktemp -d)
srv= rd=
trap 'kill $srv $rd 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
	echo "FAIL: $*"
	[ -f "$dir/out" ] && sed 's/^/    [server] /' "$dir/out"
	exit 1
}

# start NAME ARGS...: qlink serve ARGS with stdout+stderr into one pipe (a
# FIFO drained into $dir/out); waits up to 15 s for READY, sets $port
start() {
	rm -f "$dir/out" "$dir/fifo"
	mkfifo "$dir/fifo"
	cat "$dir/fifo" >"$dir/out" &
	rd=$!
	"$qlink" serve "$@" >"$dir/fifo" 2>&1 &
	srv=$!
	for _ in $(seq 300); do
		grep -q '^CUDAQ_REALTIME_SERVER_READY' "$dir/out" 2>/dev/null && break
		kill -0 $srv 2>/dev/null || break
		sleep 0.05
	done
	ready=$(grep '^CUDAQ_REALTIME_SERVER_READY' "$dir/out") || fail "no READY within 15 s: serve $*"
	port=$(sed -n 's/.* port=\([0-9]*\) .*/\1/p' <<<"$ready")
	[ -n "$port" ] && [ "$port" -gt 0 ] || fail "READY without a port: $ready"
}

# stop EXPECTED_COUNT: SIGTERM; PROCESSED within 10 s, exit 0 within 1 s more
stop() {
	local line count
	kill -TERM $srv
	for _ in $(seq 110); do kill -0 $srv 2>/dev/null || break; sleep 0.1; done
	kill -0 $srv 2>/dev/null && { kill -9 $srv; fail "serve did not exit on SIGTERM"; }
	wait $srv || fail "serve exited $? on SIGTERM"
	wait $rd
	line=$(grep '^CUDAQ_REALTIME_SERVER_PROCESSED' "$dir/out") || fail "no PROCESSED line"
	count=${line#CUDAQ_REALTIME_SERVER_PROCESSED count=}
	[ "$line" = "CUDAQ_REALTIME_SERVER_PROCESSED count=$count" ] || fail "PROCESSED line: $line"
	[ "$count" = "$1" ] || fail "PROCESSED count=$count, want $1"
	srv=
}

# client ARGS...: run the caller, keep its output, return its expect_count
client() {
	"$client" "$@" >"$dir/client" 2>&1 || { cat "$dir/client"; fail "client $*"; }
	expect=$(sed -n 's/^expect_count=//p' "$dir/client")
}

for shape in ring unified; do
	uni=
	[ $shape = unified ] && uni=--unified
	# CUDA-Q's fixture: a fresh server per case, its exact command line
	for c in increment wrap bad_magic unknown_function count5; do
		start --transport=udp --dispatch=$shape --timeout=120 -- --port=0 --num-slots=4 \
			--slot-size=256 $uni
		[ "$ready" = "CUDAQ_REALTIME_SERVER_READY transport=udp port=$port dispatch=$shape slots=4 slot_size=256" ] ||
			fail "READY line: $ready"
		client --slots 4 --slot-size 256 127.0.0.1 "$port" $c
		case $c in
		increment) want=1 ;; wrap) want=12 ;; bad_magic | unknown_function) want=1 ;; count5) want=5 ;;
		esac
		[ "$expect" = "$want" ] || fail "client expected $expect, CUDA-Q's case $c wants $want"
		stop "$want"
		echo "ok $shape $c"
	done

	# qlink's own cases on one server: no stall after drops, a burst,
	# garbage, a short datagram
	start --transport=udp --dispatch=$shape --timeout=120 -- --port=0 --num-slots=4 \
		--slot-size=256 $uni
	client 127.0.0.1 "$port" after_drop burst garbage short_request
	# 2 + 1024 + 6 + 1 requests reached the handler; drops and garbage did not
	[ "$expect" = 1033 ] || fail "client expected $expect"
	stop 1033
	n=$(grep -c 'dropping 320-byte datagram longer than the 256-byte slot stride' "$dir/out")
	[ "$n" = 1 ] || fail "want one oversize warning, got $n"
	grep -q 'oversize=1 ' "$dir/out" || fail "oversize counter"
	echo "ok $shape after_drop burst garbage short_request"

	# VPPU <-> qlink serve: every answer checked, both functions, a window
	# wider than the server's ring
	start --transport=udp --dispatch=$shape --timeout=120 -- --port=0 --num-slots=4 \
		--slot-size=256 $uni
	for f in rpc_increment qlink_parity; do
		timeout 60 "$qlink" vppu --transport udp --connect "127.0.0.1:$port" --function $f \
			--cpu -1 --count 3000 --window 8 >"$dir/vppu" 2>&1 ||
			{ cat "$dir/vppu"; fail "vppu $f exited $?"; }
		grep -q "calls 3000 answered 3000 ok 3000 wrong 0 handler_errors 0 protocol_errors 0 timeouts 0" \
			"$dir/vppu" || { cat "$dir/vppu"; fail "vppu $f report"; }
	done
	timeout 60 "$qlink" vppu --transport udp --connect "127.0.0.1:$port" --function rpc_increment \
		--arg-len 232 --cpu -1 --count 1000 --window 1 >"$dir/vppu" 2>&1 ||
		{ cat "$dir/vppu"; fail "vppu with 232-byte arguments exited $?"; }
	grep -q "calls 1000 answered 1000 ok 1000 wrong 0" "$dir/vppu" || { cat "$dir/vppu"; fail "vppu 232"; }
	stop 7000
	echo "ok $shape vppu"
done

# CUDA-Q's other spelling (its test of 2026 without `--`: the server forwards
# its whole command line to the provider)
start --transport=udp --dispatch=ring --port=0 --num-slots=4 --slot-size=256 --timeout=120
[ "$ready" = "CUDAQ_REALTIME_SERVER_READY transport=udp port=$port dispatch=ring slots=4 slot_size=256" ] ||
	fail "READY line: $ready"
client 127.0.0.1 "$port" count5
stop 5
echo "ok without --"

# --bad-requests answer: refusals answered with an error status, not counted
start --transport=udp --bad-requests answer --timeout=120 -- --port=0 --num-slots=4 --slot-size=256
client 127.0.0.1 "$port" bad_answered increment
stop 2
echo "ok --bad-requests answer"

# IPv6 (where the loopback has it)
if grep -q ' lo$' /proc/net/if_inet6 2>/dev/null; then
	start --transport=udp --dispatch=ring --timeout=120 -- --port=0 --num-slots=4 \
		--slot-size=256 --address=::1
	client ::1 "$port" increment count5 garbage
	timeout 60 "$qlink" vppu --transport udp --connect "[::1]:$port" --function rpc_increment \
		--cpu -1 --count 500 --window 4 >"$dir/vppu" 2>&1 || { cat "$dir/vppu"; fail "vppu over IPv6"; }
	grep -q "calls 500 answered 500 ok 500 wrong 0" "$dir/vppu" || { cat "$dir/vppu"; fail "vppu IPv6"; }
	stop $((expect + 500))
	echo "ok IPv6"
else
	echo "skip IPv6: no ::1 on lo"
fi

# --timeout is CUDA-Q's backstop: serve that long, then stop as on SIGTERM
start --transport=udp --timeout=1 -- --port=0 --frobnicate=3
grep -q "ignoring transport argument '--frobnicate=3'" "$dir/out" || fail "no warning for an unknown transport argument"
for _ in $(seq 50); do kill -0 $srv 2>/dev/null || break; sleep 0.1; done
kill -0 $srv 2>/dev/null && fail "serve --timeout=1 still running after 5 s"
wait $srv || fail "serve exited $? after its timeout"
wait $rd
grep -q '^timeout reached (1s)' "$dir/out" || fail "no 'timeout reached'"
grep -q '^CUDAQ_REALTIME_SERVER_PROCESSED count=0$' "$dir/out" || fail "no PROCESSED after the timeout"
srv=
echo "ok --timeout"

# qlink bench over the same transport (a forked server on loopback)
timeout 60 "$qlink" bench --transport udp --client-cpu -1 --server-cpu -1 --latency-calls 3000 \
	--warmup-calls 100 --rate-seconds 0.1 --paced-seconds 0 --json >"$dir/bench" 2>&1 ||
	{ cat "$dir/bench"; fail "bench --transport udp exited $?"; }
grep -q '"transport":"udp"' "$dir/bench" && grep -q '"lost":0,"wrong":0' "$dir/bench" ||
	{ cat "$dir/bench"; fail "bench --transport udp report"; }
"$qlink" bench --transport udp --connect 127.0.0.1:7700 >/dev/null 2>&1 &&
	fail "bench --transport udp --connect accepted"
echo "ok bench --transport udp"

# rpc_increment is served on the ring too (the built-ins of every qlink serve)
"$qlink" serve --params-file "$dir/rp" --device "soft+shm://clicq-s$$" --cpu -1 --timeout 20 \
	>"$dir/rs" 2>&1 &
srv=$!
timeout 30 "$qlink" vppu --params-file "$dir/rp" --device "soft+shm://clicq-v$$" --cpu -1 \
	--function rpc_increment --arg-len 100 --count 2000 --window 4 --timeout 20 >"$dir/vppu" 2>&1 ||
	{ cat "$dir/vppu"; fail "vppu rpc_increment on the ring exited $?"; }
grep -q "calls 2000 answered 2000 ok 2000 wrong 0" "$dir/vppu" || { cat "$dir/vppu"; fail "ring increment"; }
kill -TERM $srv
wait $srv || fail "serve (ring) exited $?"
grep -q "requests=2000 responses=2000 ok=2000" "$dir/rs" || { cat "$dir/rs"; fail "serve (ring) counters"; }
srv=
echo "ok rpc_increment on the ring"

# refused command lines
bad() { "$qlink" serve "$@" >/dev/null 2>&1 && fail "serve $* accepted"; }
bad --transport=udp --dispatch=sideways
bad --transport=udp --params-file "$dir/p"
bad --transport=udp -- --port=70000
bad --transport=udp -- --slot-size=8
bad --transport=udp --bad-requests maybe
bad --dispatch=ring --params-file "$dir/p"
bad --transport=udp stray
"$qlink" vppu --transport udp --connect 127.0.0.1 >/dev/null 2>&1 && fail "vppu without a port accepted"
"$qlink" vppu --transport udp --connect ::1:5 >/dev/null 2>&1 && fail "bare IPv6 accepted"
"$qlink" vppu --transport udp --params-file x >/dev/null 2>&1 && fail "udp with --params-file accepted"
"$qlink" vppu --function nothing --params-file x >/dev/null 2>&1 && fail "--function nothing accepted"
# a port where nobody listens: the vppu ends with an error, not a hang
timeout 20 "$qlink" vppu --transport udp --connect 127.0.0.1:9 --cpu -1 --count 10 \
	--call-timeout 1 >"$dir/vppu" 2>&1 && { cat "$dir/vppu"; fail "vppu against a closed port succeeded"; }
[ $? -ne 124 ] || fail "vppu against a closed port hung"
echo "PASS: qlink serve as CUDA-Q's test server, both shapes"
