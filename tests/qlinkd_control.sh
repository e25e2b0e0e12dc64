#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd and the control plane, end to end and under bad input:
#  1. qlinkd (example plugin, shared secret, allowlist 127.0.0.1/32) and
#     `qlink vppu --connect --program` as separate processes: DISCOVER, ACK,
#     START, every call checked, STATUS counters matching, STOP, COMPLETE;
#  2. while a paced VPPU run is in progress, truncated, oversized, non-JSON,
#     wrong-type, wrong-version, unauthenticated, wrongly signed, replayed and
#     non-allowlisted datagrams: the run loses nothing, qlinkd answers or drops
#     and counts each, and keeps running;
#  3. a QCS killed mid-run is detected (session timeout) and torn down;
#  4. SIGTERM with calls in flight: qlinkd exits 0 and tells the QCS.
set -u
qlinkd=$1 qlink=$2 plugin=$3 send=$4 corpus=$5 program=$6
. "$(dirname "$0")/qlinkd_lib.sh"
printf 'qlinkd-e2e-secret\n' >"$dir/secret"
cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlinkd-ctl-$$
control:
  address: 127.0.0.1
  port: $port
  secret_file: $dir/secret
  allow: [127.0.0.1/32]
dispatcher:
  cpu: -1
max_sessions: 8
plugins:
  - path: $plugin
    config: max_weight=8
log:
  level: info
YAML
ql_start_qlinkd listening --config "$dir/qlinkd.yaml"

# 1. a program through the control plane
timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --secret-file "$dir/secret" \
	--program "$program" --cpu -1 >"$dir/prog.out" 2>&1 || fail "vppu --program exited $?"
for step in "step 1 qlink_parity: calls 1000 answered 1000 ok 1000 wrong 0" \
	"step 2 qlink_parity: calls 10000 answered 10000 ok 10000 wrong 0" \
	"step 3 repcode_decode: calls 1000 answered 1000 ok 1000 wrong 0"; do
	grep -q "$step" "$dir/prog.out" || fail "program: $step"
done
grep -q '"requests":12000,"responses":12000,"ok":12000' "$dir/prog.out" ||
	fail "STATUS counters do not match the calls"
grep -q 'state=COMPLETE' "$dir/qlinkd.err" || fail "session did not end COMPLETE"
# qlink bench against the running daemon
timeout 60 "$qlink" bench --connect "127.0.0.1:$port" --secret-file "$dir/secret" \
	--client-cpu -1 --latency-calls 2000 --rate-seconds 0.05 --paced-seconds 0 --json \
	>"$dir/bench.out" 2>&1 || fail "qlink bench --connect exited $?"
grep -q '"lost":0,"wrong":0' "$dir/bench.out" || fail "qlink bench --connect report"
grep -q '\\"requests\\":' "$dir/bench.out" || grep -q 'requests' "$dir/bench.out" ||
	fail "qlink bench --connect: no server counters"

# 2. bad input while a run is in progress
timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --secret-file "$dir/secret" --cpu -1 \
	--rate 20000 --seconds 3 --window 16 >"$dir/run.out" 2>&1 &
vp=$!
sleep 0.5
for f in "$corpus"/bad-* "$corpus"/edge-* "$corpus"/fuzz-* "$corpus"/ok-*; do
	"$send" --wait 20 127.0.0.1 "$port" "$f" >>"$dir/replies.out" 2>&1 || fail "send $f"
done
head -c 3000 /dev/urandom >"$dir/big"
"$send" 127.0.0.1 "$port" "$dir/big" >/dev/null || fail "send oversized"
printf 'not json at all' | "$send" 127.0.0.1 "$port" - >>"$dir/replies.out"
printf '{"v":2,"type":"DISCOV' | "$send" 127.0.0.1 "$port" - >>"$dir/replies.out"
printf '{"v":9,"type":"DISCOVER","session":"00000000000000aa","seq":1}' |
	"$send" --secret-file "$dir/secret" 127.0.0.1 "$port" - >>"$dir/replies.out"
printf '{"v":2,"type":"STATUS_REPLY","session":"00000000000000aa","seq":1}' |
	"$send" --secret-file "$dir/secret" 127.0.0.1 "$port" - >>"$dir/replies.out"
printf '{"v":2,"type":"DISCOVER","session":"00000000000000bb","seq":1,"name":"x","channels":1}' >"$dir/disc"
printf 'wrong-secret\n' >"$dir/wrong"
"$send" --secret-file "$dir/wrong" 127.0.0.1 "$port" "$dir/disc" >>"$dir/replies.out"
"$send" 127.0.0.1 "$port" "$dir/disc" >>"$dir/replies.out" # no MAC at all
# a signed DISCOVER, then the same datagram again: answered from the cache
sport=$((port + 1))
"$send" --from "127.0.0.1:$sport" --secret-file "$dir/secret" --pad 256 --cookie 1 \
	127.0.0.1 "$port" "$dir/disc" >"$dir/first.out"
"$send" --from "127.0.0.1:$sport" --secret-file "$dir/secret" --pad 256 --cookie 1 \
	127.0.0.1 "$port" "$dir/disc" >"$dir/second.out"
grep -q CONNECTION_PARAMS "$dir/first.out" || fail "a signed DISCOVER was not answered"
cmp -s "$dir/first.out" "$dir/second.out" || fail "a duplicate DISCOVER got another answer"
# hostile names (a line feed, a forged key): refused, nothing forged in the log
printf '{"v":2,"type":"DISCOVER","session":"00000000000000cc","seq":1,"name":"x\\nFORGED-LINE qcs=evil"}' \
	>"$dir/hostile"
"$send" --secret-file "$dir/secret" --pad 256 --cookie 1 127.0.0.1 "$port" "$dir/hostile" \
	>"$dir/hostile.out"
grep -q '"code":"malformed"' "$dir/hostile.out" || fail "a hostile name was not refused"
grep -q '^FORGED-LINE' "$dir/qlinkd.err" && fail "a peer forged a log line"
grep -q 'qcs=evil' "$dir/qlinkd.err" && fail "a peer forged a log key"
# a second qlinkd (or anything else) on the same control port: refused, clearly
"$qlinkd" --config "$dir/qlinkd.yaml" >"$dir/second-qlinkd.out" 2>"$dir/second-qlinkd.err" &&
	fail "a second qlinkd started on port $port"
grep -q "control port $port already in use" "$dir/second-qlinkd.err" ||
	fail "a second qlinkd on port $port did not say the port is in use"
# from a source outside the allowlist: dropped, unanswered
"$send" --from 127.0.0.2 --secret-file "$dir/secret" 127.0.0.1 "$port" "$dir/disc" \
	>"$dir/notallowed.out" || fail "send from 127.0.0.2"
[ -s "$dir/notallowed.out" ] && fail "a non-allowlisted source got an answer"
grep -q '"type":"ERROR"' "$dir/replies.out" || fail "no ERROR answers to bad datagrams"
wait $vp || fail "the run during bad input exited $?"
grep -q "answered 60000 ok 60000 wrong 0 .* lost 0" "$dir/run.out" ||
	grep -q "lost 0" "$dir/run.out" || fail "calls lost during bad input"
grep -q "wrong 0 handler_errors 0 protocol_errors 0" "$dir/run.out" ||
	fail "wrong answers during bad input"
kill -0 $srv || fail "qlinkd died"
kill -USR1 $srv
for _ in $(seq 50); do grep -q "counters control" "$dir/qlinkd.out" && break; sleep 0.1; done
line=$(grep "counters control" "$dir/qlinkd.out" | tail -n 1)
for k in malformed too_big bad_version bad_mac not_allowed duplicates; do
	v=$(echo "$line" | sed -n "s/.* $k=\([0-9]*\).*/\1/p")
	[ -n "$v" ] && [ "$v" -gt 0 ] || fail "control counter $k not counted: $line"
done

# a QCS that disappears (SIGKILL, no COMPLETE, no keepalives) is detected
# after the session timeout and its channel torn down; qlinkd serves on
timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --secret-file "$dir/secret" --cpu -1 \
	--seconds 20 --window 4 >"$dir/killed.out" 2>&1 &
vp=$!
sleep 1
kill -KILL $vp
wait $vp 2>/dev/null
for _ in $(seq 100); do grep -q "QCS lost" "$dir/qlinkd.err" && break; sleep 0.1; done
grep -q "QCS lost: tearing its channels down" "$dir/qlinkd.err" || fail "a vanished QCS was not detected"
kill -0 $srv || fail "qlinkd died after losing a QCS"
timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --secret-file "$dir/secret" --cpu -1 \
	--count 1000 --window 4 >"$dir/after.out" 2>&1 || fail "no service after a QCS was lost"

# 3. SIGTERM with calls in flight
timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --secret-file "$dir/secret" --cpu -1 \
	--seconds 5 --window 8 --timeout 2 >"$dir/term.out" 2>&1 &
vp=$!
sleep 1
ql_stop_qlinkd TERM SIGTERM
wait $vp
rc=$?
[ $rc -lt 128 ] || fail "the VPPU was killed by signal $((rc - 128)) when qlinkd stopped"
echo "PASS: qlinkd control plane: program run, bad datagrams, SIGTERM"
