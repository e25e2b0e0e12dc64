#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rxe_checks.sh: the checks of the rxe stage's RPC cases (tests/rxe/rpc-checks.sh)
# against logs of a real run on rxe (UC, with resends) and against the same
# logs altered one way each: a lost call, a wrong answer, a call the daemon
# ran twice or never, a resend the cache answered that STATUS does not
# account for, a session not ended COMPLETE, qlinkd not exiting 0 on
# SIGTERM, a missing step, no report at all. The kernel-counter judgement
# (kctr_judge: error counters fail, recovery counters are named) and the
# interop check (both sides' every case, exits, capture, kernel log,
# recovery under loss) the same way. Also that run.sh finds every rpc_case
# and ix_case line of guest-init.sh. No packages, no qemu.
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

# ---- the kernel's counters around a case (kctr_judge) ------------------------
cat >"$tmp/k.before" <<'LOG'
rxe0/1/sent_pkts 100
rxe0/1/rcvd_pkts 90
rxe0/1/completer_retry_err 6
rxe0/1/retry_exceeded_err 2
rxe0/1/lifespan 12
rxe1/1/duplicate_request 1
snmp/Udp/InDatagrams 50
snmp/Udp/InErrors 0
snmp/Udp/InCsumErrors 0
LOG
kafter() { # NAME SED-EXPRESSION
	sed "$2" "$tmp/k.before" >"$tmp/k-$1.after"
	echo "$tmp/k-$1.after"
}
kexpect() { # 0|1 AFTER LOSSY WHAT
	local out rc
	out=$(kctr_judge "$tmp/k.before" "$2" "$3")
	rc=$?
	if { [ "$1" -eq 0 ] && [ $rc -eq 0 ]; } || { [ "$1" -ne 0 ] && [ $rc -ne 0 ]; }; then
		echo "ok: counters, $4: $out"
	else
		echo "FAIL: counters, $4: kctr_judge returned $rc: $out"
		fails=$((fails + 1))
	fi
}
kexpect 0 "$(kafter traffic 's/sent_pkts 100/sent_pkts 300/; s/rcvd_pkts 90/rcvd_pkts 290/; s/InDatagrams 50/InDatagrams 250/; s/lifespan 12/lifespan 10/')" 0 "traffic only"
kexpect 0 "$(kafter spurious 's/completer_retry_err 6/completer_retry_err 8/; s/duplicate_request 1/duplicate_request 3/')" 0 "a spurious retransmission (timer before a slow ACK)"
kexpect 0 "$(kafter lossy 's/completer_retry_err 6/completer_retry_err 9/')" 1 "recovery under loss"
kexpect 1 "$(kafter retry 's/retry_exceeded_err 2/retry_exceeded_err 3/')" 0 "retries exhausted"
kexpect 1 "$(kafter retry2 's/retry_exceeded_err 2/retry_exceeded_err 3/')" 1 "retries exhausted under loss"
kexpect 1 "$(kafter csum 's/InCsumErrors 0/InCsumErrors 1/')" 0 "a UDP checksum the kernel refused"
kexpect 1 "$(kafter inerr 's/InErrors 0/InErrors 2/')" 0 "UDP InErrors"
kexpect 1 "$(kafter rnr '$a rxe1/1/rcvd_rnr_err 1')" 0 "an RNR NAK (a counter absent before)"
kexpect 1 "$(kafter unknown '$a rxe0/1/some_new_counter 4')" 0 "a counter this check does not know"
grep -q 'recovery: rxe0/1/completer_retry_err+2 rxe1/1/duplicate_request+2' \
	< <(kctr_judge "$tmp/k.before" "$tmp/k-spurious.after" 0) ||
	{ echo "FAIL: recovery counters not named"; fails=$((fails + 1)); }

# ---- interop (udp_rxe_interop, both sides) -------------------------------------
{
	for side in a b; do
		echo "$side| side $side on ibv://rxe$([ $side = a ] && echo 0 || echo 1): 24 messages a case, sizes 8/1000/4113/16387, lossy side b, kernel counters of rxe0"
		for n in $(seq 0 17); do
			echo "$side| case $n  rc-write-reqa          side=$side requester rc=0 seconds=0.09 kernel: rxe0/1/completer_retry_err+1 udp_in=100 rxe_rcvd=100"
		done
		echo "$side| kernel recovery over the run: as responder (duplicate_request + out_of_seq_request) 28, as requester (completer_retry_err + rcvd_seq_err) 40"
		echo "$side| summary side=$side cases=18 skipped=0 failed=0"
	done
	echo "pair exit a=0 b=0"
	echo "capture: listening on veth0"
	echo "capture: 1957 RoCEv2 packets, 29 opcodes kept, 0 with an ICRC that does not verify"
	echo "kernel counters: errors: none recovery: none packets: rxe0/1/rcvd_pkts+1200"
} >"$tmp/ix.log"
ix() { # NAME SED-EXPRESSION
	sed "$2" "$tmp/ix.log" >"$tmp/ix-$1.log"
	echo "$tmp/ix-$1.log"
}
expect 0 interop_check "$tmp/ix.log" "interop run"
expect 0 interop_loss_check "$tmp/ix.log" "interop run under loss, kernel recovery both ways"
grep -q 'captured_opcodes=29 capture_ok=1' < <(interop_check "$tmp/ix.log") ||
	{ echo "FAIL: capture not reported"; fails=$((fails + 1)); }
expect 1 interop_check "$(ix casefail '/^b| case 7 /s/ rc=0 / rc=1 /')" "a case failed on one side"
expect 1 interop_check "$(ix missing '/^a| case 17 /d')" "a case missing on one side"
expect 0 interop_check "$(ix skipped 's/^\([ab]\)| case 17 .*/\1| skipped 17 uc-write_imm-reqb (--skip uc-write_imm)/')" "a case skipped on purpose, said so"
grep -q 'skipped_a=1 skipped_b=1' < <(interop_check "$tmp/ix-skipped.log") ||
	{ echo "FAIL: skipped cases not reported"; fails=$((fails + 1)); }
expect 1 interop_check "$(ix summary '/^a| summary/s/failed=0/failed=1/')" "a side's summary says failed"
expect 1 interop_check "$(ix exit 's/^pair exit a=0 b=0/pair exit a=0 b=2/')" "a side exited non-zero"
expect 1 interop_check "$(ix noexit '/^pair exit/d')" "no exit line"
expect 1 interop_check "$(ix icrc 's/ 0 with an ICRC/ 3 with an ICRC/')" "captured packets with a bad ICRC"
expect 1 interop_check "$(ix nocap 's/^capture: 1957/capture: 0/')" "a capture that saw nothing"
expect 1 interop_check "$(ix capgone '/^capture: 1957/d')" "a capture that never reported"
expect 1 interop_check "$(ix klog '$a kernel: rdma_rxe: qp#17 moved to error state')" "a kernel log line about rxe"
expect 1 interop_loss_check "$(ix norec 's/out_of_seq_request) 28,/out_of_seq_request) 0,/')" "loss, but the kernel never recovered as responder"
expect 1 interop_loss_check "$(ix norec2 's/rcvd_seq_err) 40$/rcvd_seq_err) 0/')" "loss, but the kernel never retransmitted as requester"
expect 1 interop_loss_check "$(ix norecline '/kernel recovery over the run/d')" "loss, no recovery totals"
expect 1 interop_check "$tmp/empty.log" "interop: no output"
# soft+udp corrupting packets: the kernel's refusals show, nothing else fails
sed -e '/^[ab]| case [0-3] /s/ rc=0 \(.*\)$/ rc=1 \1 FAIL: rxe accepted 5 of the 6 UDP datagrams delivered in this namespace: 1 refused (bad ICRC or header) or not for rxe/' \
	"$tmp/ix.log" >"$tmp/ixc.log"
expect 0 interop_refused_check "$tmp/ixc.log" "corruption: refusals seen, data exact"
expect 1 interop_refused_check "$tmp/ix.log" "corruption: the kernel refused nothing"
expect 1 interop_refused_check "$(sed '/^a| case 9 /s/ rc=0 / rc=1 FAIL: write 3 (1000 bytes): byte 2 is 0x00, want 0x11 /' "$tmp/ixc.log" >"$tmp/ixc2.log"; echo "$tmp/ixc2.log")" "corruption: a wrong byte"
expect 1 interop_refused_check "$(sed '/^b| case 9 /d' "$tmp/ixc.log" >"$tmp/ixc3.log"; echo "$tmp/ixc3.log")" "corruption: a case missing"
expect 1 interop_refused_check "$(sed 's/^pair exit .*/pair exit a=124 b=1/' "$tmp/ixc.log" >"$tmp/ixc4.log"; echo "$tmp/ixc4.log")" "corruption: a side timed out"
cat "$tmp/ix.log" - >"$tmp/ix-netem.log" <<'LOG'
qdisc netem 8001: root refcnt 2 limit 1000 loss 3%
 Sent 301234 bytes 1288 pkt (dropped 41, overlimits 0 requeues 0)
LOG
expect 0 interop_kloss_check "$tmp/ix-netem.log" "the kernel's packets lost (netem)"
expect 1 interop_kloss_check "$tmp/ix.log" "netem said to drop, dropped nothing"
expect 1 interop_kloss_check "$(sed '/^a| case 3 /s/ rc=0 / rc=1 /' "$tmp/ix-netem.log" >"$tmp/ix-n2.log"; echo "$tmp/ix-n2.log")" "netem: a case failed"

# run.sh's list of cases: every rpc_case line of guest-init.sh
n=$(sed -n 's/^[[:space:]]*rpc_case \([A-Za-z0-9_-]*\) .*/\1/p' "$src/tests/rxe/guest-init.sh" | tr '\n' ' ')
for c in bench-ring-rc bench-ring-uc qlinkd-ring-rc qlinkd-ring-uc qlinkd-hsb-board \
	udp-qlinkd-rxe-ring-rc udp-qlinkd-rxe-ring-uc udp-qlinkd-udp-ring-rc udp-qlinkd-udp-ring-uc \
	udp-hsb-board-udp udp-hsb-board-rxe; do
	case " $n" in
	*" $c "*) ;;
	*) echo "FAIL: rpc_case $c not found (found: $n)"; fails=$((fails + 1)) ;;
	esac
done
echo "ok: cases: $n"
# ... and every ix_case line (the interop cases)
n=$(sed -n 's/^[[:space:]]*ix_case \([A-Za-z0-9_-]*\) .*/\1/p' "$src/tests/rxe/guest-init.sh" | tr '\n' ' ')
for c in rxe-rxe rxe-rxe-netem rxe-udp rxe-udp-loss rxe-udp-corrupt rxe-udp-kloss; do
	case " $n" in
	*" $c "*) ;;
	*) echo "FAIL: ix_case $c not found (found: $n)"; fails=$((fails + 1)) ;;
	esac
done
echo "ok: interop cases: $n"
grep -q 'ix_case' "$src/tests/rxe/run.sh" || { echo "FAIL: run.sh does not collect the ix_case lines"; fails=$((fails + 1)); }
grep -q 'rpc_case NAME CHECK' "$src/tests/rxe/run.sh" "$src/tests/rxe/guest-init.sh" ||
	{ echo "FAIL: the rpc_case convention is not documented"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ] && echo "rxe_checks: all passed" && exit 0
echo "rxe_checks: $fails failed"
exit 1
