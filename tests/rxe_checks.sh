#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rxe_checks.sh: the checks of the rxe stage's RPC cases (tests/rxe/rpc-checks.sh)
# against logs of a real run on rxe (UC, with resends) and against the same
# logs altered one way each: a lost call, a wrong answer, a call the daemon
# ran twice or never, a resend the cache answered that STATUS does not
# account for, a session not ended COMPLETE, qlinkd not exiting 0 on
# SIGTERM, a missing step, no report at all. Also that run.sh finds every
# rpc_case line of guest-init.sh. No packages, no qemu.
#
#   tests/rxe_checks.sh SOURCE-DIR
set -uo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/rxe/rpc-checks.sh
. "$src/tests/rxe/rpc-checks.sh"
# shellcheck disable=SC2034 # read by qlinkd_check (rpc-checks.sh)
QL_RPC_CALLS=5000
fails=0
expect() { # 0|1 CHECK LOG WHAT
	local out rc
	out=$("$2" "$3")
	rc=$?
	if { [ "$1" -eq 0 ] && [ $rc -eq 0 ]; } || { [ "$1" -ne 0 ] && [ $rc -ne 0 ]; }; then
		echo "ok: $4: $out"
	else
		echo "FAIL: $4: check returned $rc: $out"
		fails=$((fails + 1))
	fi
}

# qlink bench --json over UC on rxe: 4899 calls, 187 resends, 1000 warm-up calls
cat >"$tmp/bench.log" <<'LOG'
{"uri":"ibv://rxe1","server_uri":"ibv://rxe0","function":"qlink_parity","slots":64,"slot_size":256,"rtt_ns":{"p50":201216,"p90":351232,"p99":4964352,"p999":13074432,"max":192126032},"rpc_per_s":6300.2,"lost":0,"wrong":0,"server":"requests=5899 responses=6035 ok=5899 errors=0","phases":[{"phase":"latency","sent":3000,"received":3000,"ok":3000,"wrong":0,"handler_errors":0,"protocol_errors":0,"unexpected":0,"timeouts":0,"late":0,"lost":0,"resent":54,"gave_up":0,"dup_responses":16,"elapsed_s":1.242436,"rpc_per_s":2414.6,"transport_error":0,"timed_out":false,"stopped":false,"rtt_ns":{"min":101421,"p50":201216,"p90":351232,"p99":4964352,"p999":13074432,"max":192126032,"mean":410666.2}},{"phase":"rate","sent":1899,"received":1899,"ok":1899,"wrong":0,"handler_errors":0,"protocol_errors":0,"unexpected":0,"timeouts":0,"late":0,"lost":0,"resent":133,"gave_up":0,"dup_responses":25,"elapsed_s":0.301418,"rpc_per_s":6300.2,"transport_error":0,"timed_out":false,"stopped":false,"rtt_ns":{"min":1535664,"p50":3792896,"p90":8814592,"p99":14188544,"p999":17564433,"max":17564433,"mean":5066211.8}}]}
LOG
bench() { # NAME SED-EXPRESSION
	sed "$2" "$tmp/bench.log" >"$tmp/bench-$1.log"
	echo "$tmp/bench-$1.log"
}
expect 0 bench_check "$tmp/bench.log" "bench UC run"
grep -q 'resent=[1-9]' < <(bench_check "$tmp/bench.log") || { echo "FAIL: resends not reported"; fails=$((fails + 1)); }
expect 1 bench_check "$(bench lost 's/"lost":0,"wrong":0,"server"/"lost":1,"wrong":0,"server"/')" "a lost call"
expect 1 bench_check "$(bench wrong 's/"lost":0,"wrong":0,"server"/"lost":0,"wrong":2,"server"/')" "a wrong answer"
expect 1 bench_check "$(bench twice 's/requests=\([0-9]*\)9 /requests=\10 /')" "the daemon's request count off"
expect 1 bench_check "$(bench errors 's/errors=0/errors=1/')" "a daemon error"
expect 1 bench_check "$(bench short 's/"received":3000/"received":2999/')" "a call unanswered"
: >"$tmp/empty.log"
expect 1 bench_check "$tmp/empty.log" "no report"

# qlinkd + qlink vppu --connect over UC on rxe: 683 resends answered from the cache
cat >"$tmp/qlinkd.log" <<'LOG'
step 1 qlink_parity: calls 4000 answered 4000 ok 4000 wrong 0 handler_errors 0 protocol_errors 0 timeouts 0 late 0 lost 0 resent 1999 gave_up 0
step 1 qlink_parity: round trip us: p50 6569.984 p90 15499.264 p99 40239.104 p99.9 96731.136 max 97922.015; 1025 RPC/s
step 2 repcode_decode: calls 1000 answered 1000 ok 1000 wrong 0 handler_errors 0 protocol_errors 0 timeouts 0 late 0 lost 0 resent 434 gave_up 0
step 2 repcode_decode: round trip us: p50 300.032 p90 14778.368 p99 27328.512 p99.9 49152.000 max 54918.743; 195 RPC/s
server: {"channels":1,"requests":5000,"responses":5683,"ok":5000,"handler_errors":0,"protocol_errors":0,"dropped":0,"result_overruns":0,"channel_error":0,"failed":0,"dup_answered":683,"dup_missed":0}
vppu exit=0
qlinkd exit=0
== qlinkd log
2026-11-23T14:17:00.857031Z info control "session ended" qcs=vppu state=COMPLETE
LOG
qlinkd() { # NAME SED-EXPRESSION
	sed "$2" "$tmp/qlinkd.log" >"$tmp/qlinkd-$1.log"
	echo "$tmp/qlinkd-$1.log"
}
expect 0 qlinkd_check "$tmp/qlinkd.log" "qlinkd UC run"
expect 1 qlinkd_check "$(qlinkd dup 's/"dup_answered":683/"dup_answered":682/')" "responses not requests + cache answers"
expect 1 qlinkd_check "$(qlinkd missed 's/"dup_missed":0/"dup_missed":3/')" "resends the cache missed"
expect 1 qlinkd_check "$(qlinkd req 's/"requests":5000/"requests":5001/')" "a call run twice"
expect 1 qlinkd_check "$(qlinkd lost '/^step 1/s/lost 0/lost 1/')" "a lost call"
expect 1 qlinkd_check "$(qlinkd wrong '/^step 2/s/wrong 0/wrong 1/')" "a wrong answer"
expect 1 qlinkd_check "$(qlinkd complete '/state=COMPLETE/d')" "session not COMPLETE"
expect 1 qlinkd_check "$(qlinkd exit 's/^qlinkd exit=0/qlinkd exit=143/')" "qlinkd killed, not stopped"
expect 1 qlinkd_check "$(qlinkd step '/^step 2/d')" "a step missing"
# RC: no cache, responses = requests
expect 0 qlinkd_check "$(qlinkd rc 's/,"dup_answered":683,"dup_missed":0//; s/"responses":5683/"responses":5000/')" "qlinkd RC run"

# run.sh's list of cases: every rpc_case line of guest-init.sh
n=$(sed -n 's/^[[:space:]]*rpc_case \([A-Za-z0-9_-]*\) .*/\1/p' "$src/tests/rxe/guest-init.sh" | tr '\n' ' ')
for c in bench-ring-rc bench-ring-uc qlinkd-ring-rc qlinkd-ring-uc; do
	case " $n" in
	*" $c "*) ;;
	*) echo "FAIL: rpc_case $c not found (found: $n)"; fails=$((fails + 1)) ;;
	esac
done
echo "ok: cases: $n"
grep -q 'rpc_case NAME CHECK' "$src/tests/rxe/run.sh" "$src/tests/rxe/guest-init.sh" ||
	{ echo "FAIL: the rpc_case convention is not documented"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ] && echo "rxe_checks: all passed" && exit 0
echo "rxe_checks: $fails failed"
exit 1
