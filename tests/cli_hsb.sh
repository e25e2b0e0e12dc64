#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hsb transport through the tools: qlink serve --transport hsb and qlink
# vppu --transport hsb as separate programs (20000 checked calls, counters
# match, no rendezvous files left), qlink bench --transport hsb (a short run,
# every answer checked), and the option's bad values refused.
set -u
qlink=$1
dir=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$qlink" serve --transport hsb --params-file "$dir/p" --device "soft+shm://clihsb-$$" --cpu -1 \
	--slots 16 --slot-size 384 --timeout 20 >"$dir/serve.out" 2>"$dir/serve.err" &
srv=$!
timeout 30 "$qlink" vppu --transport hsb --params-file "$dir/p" --device "soft+shm://clihsbv-$$" \
	--cpu -1 --count 20000 --window 4 --timeout 20 >"$dir/vppu.out" 2>&1 ||
	{ cat "$dir/vppu.out" "$dir/serve.err"; fail "vppu exited $?"; }
grep -q "calls 20000 answered 20000 ok 20000 wrong 0" "$dir/vppu.out" ||
	{ cat "$dir/vppu.out"; fail "vppu report"; }
kill -TERM $srv
for _ in $(seq 100); do kill -0 $srv 2>/dev/null || break; sleep 0.1; done
kill -0 $srv 2>/dev/null && fail "serve did not stop on SIGTERM"
wait $srv || fail "serve exited $?"
srv=
grep -q "requests=20000 responses=20000 ok=20000 .* dropped=0" "$dir/serve.out" ||
	{ cat "$dir/serve.out" "$dir/serve.err"; fail "serve counters"; }
ls "$dir"/p* >/dev/null 2>&1 && fail "rendezvous files left behind: $(ls "$dir")"

timeout 60 "$qlink" bench --transport hsb --device "soft+shm://clihsbb-$$" --client-cpu -1 \
	--server-cpu -1 --latency-calls 5000 --rate-seconds 0.1 --paced-seconds 0 --json \
	>"$dir/bench.out" 2>&1 || { cat "$dir/bench.out"; fail "bench exited $?"; }
grep -q '"transport":"hsb"' "$dir/bench.out" || { cat "$dir/bench.out"; fail "bench json"; }
grep -q '"lost":0,"wrong":0' "$dir/bench.out" || { cat "$dir/bench.out"; fail "bench lost/wrong"; }

# bad values
"$qlink" bench --transport tcp >/dev/null 2>&1 && fail "bench --transport tcp accepted"
"$qlink" bench --transport hsb --slot-size 200 >/dev/null 2>&1 &&
	fail "bench: hsb page size 200 (not a multiple of 128) accepted"
"$qlink" serve --transport xyz --params-file "$dir/q" >/dev/null 2>&1 &&
	fail "serve --transport xyz accepted"
"$qlink" vppu --transport hsb --connect 127.0.0.1:1 --qcs-device >/dev/null 2>&1 &&
	fail "vppu --transport hsb --qcs-device accepted"
echo "PASS"
