#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlink serve and qlink vppu as separate programs: 20000 checked calls, the
# server's counters match, SIGTERM stops it cleanly; bad arguments fail.
set -u
qlink=$1
dir=$(mktemp -d)
trap 'kill $srv 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$qlink" serve --params-file "$dir/p" --cpu -1 --timeout 20 >"$dir/serve.out" 2>"$dir/serve.err" &
srv=$!
timeout 30 "$qlink" vppu --params-file "$dir/p" --cpu -1 --count 20000 --window 4 \
	--timeout 20 >"$dir/vppu.out" 2>&1 || { cat "$dir/vppu.out"; fail "vppu exited $?"; }
grep -q "calls 20000 answered 20000 ok 20000 wrong 0" "$dir/vppu.out" ||
	{ cat "$dir/vppu.out"; fail "vppu report"; }
kill -TERM $srv
for _ in $(seq 100); do kill -0 $srv 2>/dev/null || break; sleep 0.1; done
kill -0 $srv 2>/dev/null && fail "serve did not stop on SIGTERM"
wait $srv || fail "serve exited $?"
grep -q "requests=20000 responses=20000 ok=20000" "$dir/serve.out" ||
	{ cat "$dir/serve.out" "$dir/serve.err"; fail "serve counters"; }
ls "$dir"/p* >/dev/null 2>&1 && fail "rendezvous files left behind: $(ls "$dir")"

# a server that stops answering mid-run (SIGSTOP): the call timeout ends
# the run within timeout + epsilon, reported, exit 1
stall() { # name: serve + a vppu (args) running; the server stopped after 0.5 s
	"$qlink" serve --params-file "$dir/$1" --cpu -1 --timeout 20 >"$dir/$1.serve" 2>&1 &
	srv=$!
	shift
	"$qlink" vppu --params-file "$dir/$n" --cpu -1 --seconds 60 --window 8 --timeout 20 "$@" \
		>"$dir/$n.out" 2>&1 &
	vp=$!
	sleep 0.5
	kill -STOP $srv
	stopped_at=$(date +%s%N)
}
n=to
stall to --call-timeout 0.5
for _ in $(seq 50); do kill -0 $vp 2>/dev/null || break; sleep 0.1; done
ms=$((($(date +%s%N) - stopped_at) / 1000000))
kill -0 $vp 2>/dev/null && { kill -9 $vp; fail "vppu did not time out (still running after $ms ms)"; }
[ $ms -lt 2500 ] || fail "vppu took $ms ms to time out (call timeout 0.5 s)"
wait $vp
rc=$?
[ $rc -eq 1 ] || { cat "$dir/to.out"; fail "timed-out vppu exited $rc, not 1"; }
grep -q "call(s) unanswered after 0.500 s: timed out" "$dir/to.out" ||
	{ cat "$dir/to.out"; fail "timeout message"; }
kill -CONT $srv; kill -TERM $srv; wait $srv
# SIGTERM with the window full (and a 60 s call timeout): exits at once
n=term
stall term --call-timeout 60
sleep 0.3
kill -TERM $vp
for _ in $(seq 30); do kill -0 $vp 2>/dev/null || break; sleep 0.1; done
kill -0 $vp 2>/dev/null && { kill -9 $vp; fail "vppu with a full window ignored SIGTERM"; }
wait $vp
[ $? -eq 1 ] || fail "stopped vppu should exit 1 (calls lost)"
grep -q "stopped by a signal with 8 call(s) in flight" "$dir/term.out" ||
	{ cat "$dir/term.out"; fail "stop message"; }
kill -CONT $srv; kill -TERM $srv; wait $srv

"$qlink" vppu --count -3 --params-file x >/dev/null 2>&1 && fail "bad --count accepted"
"$qlink" serve >/dev/null 2>&1 && fail "serve without --params-file accepted"
"$qlink" bench --window 0 >/dev/null 2>&1 && fail "bench --window 0 accepted"
echo "PASS: serve + vppu, 20000 calls"
