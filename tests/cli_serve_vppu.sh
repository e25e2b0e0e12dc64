#!/usr/bin/env bash
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
"$qlink" vppu --count -3 --params-file x >/dev/null 2>&1 && fail "bad --count accepted"
"$qlink" serve >/dev/null 2>&1 && fail "serve without --params-file accepted"
"$qlink" bench --window 0 >/dev/null 2>&1 && fail "bench --window 0 accepted"
echo "PASS: serve + vppu, 20000 calls"
