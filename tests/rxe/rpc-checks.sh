#!/bin/sh
# SPDX-License-Identifier: MIT
# rpc-checks.sh: the checks of the rxe guest's RPC cases (guest-init.sh,
# rpc_case NAME CHECK COMMAND...), sourced by the guest and by
# tests/rxe_checks.sh. Each takes the case's log, prints the figures for
# results.txt on one line and returns non-zero when the case failed.
# shellcheck disable=SC2034 # QL_RPC_WARMUP is read by the awk program

# qlink bench --json: the phases' calls, resends, losses, wrong answers and
# the daemon's counters; fails unless lost 0, wrong 0, errors=0 and the
# daemon ran each call exactly once (its requests = the answered calls +
# QL_RPC_WARMUP warm-up calls; a UC resend answered from the cache is not a
# request).
QL_RPC_WARMUP=1000
bench_check() {
	awk -v warmup="$QL_RPC_WARMUP" '
	/^\{"uri"/ {
		line = $0
		while (match(line, /"phase":"[a-z]+","sent":[0-9]+,"received":[0-9]+/)) {
			seg = substr(line, RSTART, RLENGTH); split(seg, f, /[:,]/)
			sent += f[4]; recv += f[6]; line = substr(line, RSTART + RLENGTH)
		}
		line = $0
		while (match(line, /"resent":[0-9]+/)) {
			resent += substr(line, RSTART + 9, RLENGTH - 9); line = substr(line, RSTART + RLENGTH)
		}
		match($0, /"rtt_ns":\{"p50":[0-9]+/); p50 = substr($0, RSTART + 16, RLENGTH - 16)
		match($0, /"rpc_per_s":[0-9.]+/); rate = substr($0, RSTART + 12, RLENGTH - 12)
		match($0, /"lost":[0-9]+,"wrong":[0-9]+/); split(substr($0, RSTART, RLENGTH), lw, /[:,]/)
		lost = lw[2]; wrong = lw[4]
		match($0, /"server":"[^"]*"/); srv = substr($0, RSTART + 10, RLENGTH - 11)
		match(srv, /requests=[0-9]+/); sreq = substr(srv, RSTART + 9, RLENGTH - 9)
		match(srv, /errors=[0-9]+/); serr = substr(srv, RSTART + 7, RLENGTH - 7)
		seen = 1
	}
	END {
		if (!seen) { print "no report"; exit 1 }
		printf "calls=%d answered=%d lost=%s wrong=%s resent=%d p50_us=%.1f rpc_per_s=%.0f server_requests=%s server_errors=%s\n",
			sent, recv, lost, wrong, resent, p50 / 1000, rate, sreq, serr
		exit !(lost == 0 && wrong == 0 && sent == recv && serr == 0 && sreq == recv + warmup)
	}' "$1"
}
# Every step answered and right, STATUS's requests and ok equal to the
# calls (each run once), its responses the requests plus, on UC, the
# resends answered from the cache (dup_answered), the session ended
# COMPLETE, qlinkd stopped cleanly (exit 0 on SIGTERM).
qlinkd_check() {
	awk -v calls="${QL_RPC_CALLS:?}" '
	/^step [0-9]+ [a-z_]+: calls / {
		steps++; sent += $5; recv += $7; ok += $9; wrong += $11; lost += $21; resent += $23
		if ($5 != $7 || $7 != $9 || $11 != 0 || $21 != 0) bad = 1
	}
	/^server: \{/ {
		match($0, /"requests":[0-9]+/); req = substr($0, RSTART + 11, RLENGTH - 11)
		match($0, /"responses":[0-9]+/); resp = substr($0, RSTART + 12, RLENGTH - 12)
		match($0, /"ok":[0-9]+/); sok = substr($0, RSTART + 5, RLENGTH - 5)
		dup = "-"
		if (match($0, /"dup_answered":[0-9]+/)) dup = substr($0, RSTART + 15, RLENGTH - 15)
		if (match($0, /"dup_missed":[0-9]+/)) missed = substr($0, RSTART + 13, RLENGTH - 13)
	}
	/state=COMPLETE/ { complete = 1 }
	/^qlinkd exit=/ { qexit = substr($0, 13) }
	END {
		printf "steps=%d calls=%d answered=%d ok=%d wrong=%d lost=%d resent=%d status_requests=%s status_responses=%s status_ok=%s dup_answered=%s complete=%d qlinkd_exit=%s\n",
			steps, sent, recv, ok, wrong, lost, resent, req, resp, sok, dup, complete, qexit
		exit !(!bad && steps == 2 && sent == calls && req == calls && sok == calls && \
			resp == calls + (dup == "-" ? 0 : dup) && missed + 0 == 0 && \
			complete && qexit == "0")
	}' "$1"
}
# An FPGA-shaped QCS (qlink vppu --hsb-listen) programmed by qlinkd over the
# Hololink register protocol: qlinkd logged the board programmed, the board
# streamed its calls and every one came back right, nothing lost, and
# qlinkd's counters saw exactly those requests; qlinkd stopped cleanly.
hsb_board_check() {
	awk -v calls="${QL_HSB_CALLS:?}" '
	/^closed: calls / { sent = $3; recv = $5; ok = $7; wrong = $9; seen = 1 }
	/ lost [0-9]+/ && /^closed: / { for (i = 1; i < NF; i++) if ($i == "lost") lost = $(i + 1) }
	/board programmed/ { programmed = 1 }
	/counters session session=[0-9]+ running=0 requests=/ {
		match($0, /requests=[0-9]+/); req = substr($0, RSTART + 9, RLENGTH - 9)
		match($0, / ok=[0-9]+/); sok = substr($0, RSTART + 4, RLENGTH - 4)
	}
	/counters hsb session=[0-9]+ frames=/ {
		match($0, /frames=[0-9]+/); frames = substr($0, RSTART + 7, RLENGTH - 7)
		match($0, / refused=[0-9]+/); refused = substr($0, RSTART + 9, RLENGTH - 9)
	}
	/^qlinkd exit=/ { qexit = substr($0, 13) }
	END {
		printf "calls=%s answered=%s ok=%s wrong=%s lost=%s programmed=%d server_requests=%s server_ok=%s hsb_frames=%s hsb_refused=%s qlinkd_exit=%s\n",
			sent, recv, ok, wrong, lost, programmed, req, sok, frames, refused, qexit
		exit !(seen && sent == calls && recv == calls && ok == calls && wrong == 0 && \
			lost == 0 && programmed && req == calls && sok == calls && \
			frames == calls && refused == "0" && qexit == "0")
	}' "$1"
}
# UC over a lossy wire (netem): everything bench_check asks, and the loss
# was real: netem dropped packets and the VPPU resent.
bench_loss_check() {
	detail=$(bench_check "$1")
	brc=$?
	dropped=$(sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' "$1" | awk '{ s += $1 } END { print s + 0 }')
	resent=$(echo "$detail" | sed -n 's/.* resent=\([0-9]*\) .*/\1/p')
	echo "$detail netem_dropped=$dropped"
	[ "$brc" -eq 0 ] && [ "${resent:-0}" -gt 0 ] && [ "$dropped" -gt 0 ]
}

# ---- the kernel's counters around a case ------------------------------------
# kctr_snapshot: every rxe device's hw_counters ("DEV/PORT/NAME VALUE") and
# this namespace's UDP counters ("snmp/Udp/NAME VALUE").
kctr_snapshot() {
	for f in /sys/class/infiniband/*/ports/*/hw_counters/*; do
		[ -f "$f" ] || continue
		n=${f#/sys/class/infiniband/}
		echo "${n%%/*}/$(echo "$f" | sed 's|.*/ports/\([0-9]*\)/hw_counters/|\1/|') $(cat "$f")"
	done
	awk '/^Udp:/ { if (!h) { for (i = 2; i <= NF; i++) k[i] = $i; h = 1 } else for (i = 2; i <= NF; i++) print "snmp/Udp/" k[i], $i }' /proc/net/snmp
}
# kctr_judge BEFORE AFTER LOSSY: one line naming the counters that moved,
# by class (docs/soft-udp.md, 16.3 "Kernel counters"); non-zero when an
# error counter moved. Recovery counters are named, not judged: on this
# emulated machine under load an RC timer can fire before a slow ACK (a
# spurious retransmission, harmless); LOSSY 1 only marks the line.
#   traffic:  sent_pkts rcvd_pkts ack_deferred rdma_sends rdma_recvs, UDP's
#             InDatagrams OutDatagrams NoPorts IgnoredMulti (lifespan: a setting)
#   recovery: duplicate_request out_of_seq_request rcvd_seq_err completer_retry_err
#   errors:   everything else: retry_exceeded_err retry_rnr_exceeded_err
#             rcvd_rnr_err send_rnr_err send_err link_downed, UDP's InErrors
#             RcvbufErrors SndbufErrors InCsumErrors MemErrors, any unknown name
kctr_judge() {
	awk -v lossy="$3" '
	NR == FNR { b[$1] = $2; next }
	{
		d = $2 - b[$1]; n = $1; sub(/.*\//, "", n)
		if (d == 0 || n == "lifespan") next
		if (n ~ /^(sent_pkts|rcvd_pkts|ack_deferred|rdma_sends|rdma_recvs|InDatagrams|OutDatagrams|NoPorts|IgnoredMulti)$/) {
			if (n ~ /pkts$/) info = info " " $1 "+" d
			next
		}
		if (n ~ /^(duplicate_request|out_of_seq_request|rcvd_seq_err|completer_retry_err)$/) {
			rec = rec " " $1 "+" d
			next
		}
		bad = bad " " $1 "+" d
	}
	END {
		printf "kernel counters%s: errors:%s recovery:%s packets:%s\n", (lossy ? " (loss injected)" : ""), (bad == "" ? " none" : bad),
			(rec == "" ? " none" : rec), (info == "" ? " none" : info)
		exit bad != ""
	}' "$1" "$2"
}

# ---- interop (tests/udp_rxe_interop.c, both sides' output) ------------------
# Each side's lines prefixed "a| " and "b| ", then "pair exit a=N b=N" (and,
# when a capture ran, its "capture: ..." summary). Passes when both sides
# accounted for QL_IX_CASES cases (run, or named on a "skipped" line: a
# case left out on purpose is shown in the figures), every one rc=0 on both, both summaries say
# failed=0, both exited 0, a capture (if any) kept packets whose ICRC all
# verified, and, when LOSSY (2nd argument) is 1, the kernel's own
# retransmission ran both ways (its recovery totals are non-zero).
QL_IX_CASES=18
interop_check() {
	awk -v want="${QL_IX_CASES:?}" -v lossy="${2:-0}" '
	/^[ab]\| case / { side = substr($0, 1, 1); n[side]++; if ($0 !~ / rc=0 /) { bad++; if (!first) first = $0 } }
	/^[ab]\| summary / { side = substr($0, 1, 1); if ($0 ~ / failed=0$/) okay[side] = 1 }
	/^[ab]\| skipped / { side = substr($0, 1, 1); sk[side]++ }
	/^[ab]\| kernel recovery over the run:/ { rec_resp = $(NF - 6) + 0; rec_req = $NF + 0; seen_rec = 1 }
	/^pair exit a=0 b=0$/ { exited = 1 }
	/^capture: listening/ { cap = 1; capbad = 1 } # until its summary says otherwise
	/^capture: [0-9]+ RoCEv2 packets/ { cap = 1; capbad = ($0 !~ / 0 with an ICRC/ || $2 + 0 == 0); kept = $5 }
	/^kernel: / { klog++ }
	END {
		printf "cases_a=%d cases_b=%d failed=%d exit_ok=%d%s%s%s%s\n", n["a"], n["b"], bad, exited,
			(sk["a"] + sk["b"] ? sprintf(" skipped_a=%d skipped_b=%d", sk["a"], sk["b"]) : ""),
			(seen_rec ? sprintf(" kernel_recovery_as_responder=%d as_requester=%d", rec_resp, rec_req) : ""),
			(cap ? sprintf(" captured_opcodes=%s capture_ok=%d", kept, !capbad) : ""),
			(klog ? sprintf(" kernel_log_lines=%d", klog) : "")
		if (first) print first > "/dev/stderr"
		exit !(n["a"] + sk["a"] == want && n["b"] + sk["b"] == want && !bad && okay["a"] && okay["b"] && exited && \
			!capbad && !klog && (!lossy || (seen_rec && rec_resp > 0 && rec_req > 0)))
	}' "$1"
}
interop_loss_check() { interop_check "$1" 1; }
# The kernel's packets dropped instead (netem on its veth; qlink's side
# exact): every case exact on both sides (soft+udp's requester recovers
# lost responses, ACKs and READ responses, the kernel's requester its own
# lost requests), and netem really dropped packets.
interop_kloss_check() {
	detail=$(interop_check "$1" 0)
	irc=$?
	dropped=$(sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' "$1" | awk '{ s += $1 } END { print s + 0 }')
	echo "$detail netem_dropped=$dropped"
	[ "$irc" -eq 0 ] && [ "$dropped" -gt 0 ]
}
# The attack (soft+udp corrupting some of its packets after the ICRC): the
# kernel refused packets (a case's UDP balance failed: "UDP datagrams
# delivered" in its reason), every other outcome exact: each side
# accounted for QL_IX_CASES cases, no failure for any other reason (data,
# completions, counters), no kernel log line.
interop_refused_check() {
	awk -v want="${QL_IX_CASES:?}" '
	/^[ab]\| case / {
		side = substr($0, 1, 1); n[side]++
		if ($0 ~ / rc=0 /) next
		if ($0 ~ /UDP datagrams delivered/) { refused++; next }
		other++; if (!first) first = $0
	}
	/^[ab]\| skipped / { side = substr($0, 1, 1); n[side]++ }
	/^pair exit a=[01] b=[01]$/ { exited = 1 } # 1: cases failed, nothing worse
	/^kernel: / { klog++ }
	END {
		printf "cases_a=%d cases_b=%d refused_cases=%d other_failures=%d\n", n["a"], n["b"], refused, other
		if (first) print first > "/dev/stderr"
		exit !(n["a"] == want && n["b"] == want && refused > 0 && !other && !klog && \
			exited)
	}' "$1"
}
