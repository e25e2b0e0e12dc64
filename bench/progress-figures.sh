#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# progress-figures.sh: every figure of issue 24 (caller-driven progress,
# docs/progress.md) in one run, with default options, each against its
# reference in short alternating runs, and one summary table of medians and
# ratios at the end. It runs the existing benchmarks, each alternating its
# variants round by round:
#
#   1. bench/compare-sockperf.sh --modes auto --no-goodput: soft+udp 8-byte
#      WRITE and SEND ping-pong p50 against sockperf's UDP ping-pong, 8-byte
#      WRITE rate against sockperf's throughput, default options; then
#      --modes thread: the NIC threads, pinned to CPUs 2 and 3 when there
#      are 4 or more (the 4-core figures; with fewer, one short round, the
#      four spinning threads sharing the CPUs there are);
#   2. bench/sdr_bench.sh --variants sr --sizes 64M --losses "0 0.01"
#      --delay-us 500: SDR (selective repeat) 64 MiB at 1 % loss against
#      loss-free, 1 ms injected RTT, default window;
#   3. bench/progress_bench.sh: the GPU emulation's RTT against the CPU
#      dispatcher's (`qlink bench`, default options = QLINK_PROGRESS=auto),
#      and the emulation in thread mode (with `taskset -c 0-3` when there are
#      4 or more CPUs);
#   4. qlink-bench-bridge: the CUDA-Q bridge's ring shape (default options:
#      the pump the auto rule picks, napping on a host with fewer free cores
#      than spinning threads) against its unified shape, and the ring shape
#      with --progress=thread (the spinning pump) and --progress=caller,
#      `qlink vppu --transport hsb` as the QCS.
#
# usage: bench/progress-figures.sh [--build DIR] [--rounds N] [--quick] [--log FILE]
#
# --build: the build tree with tools/qlink and bench/ (default build);
# --rounds: rounds of each benchmark (default 3); --quick (or
# QLINK_FIGURES_QUICK=1): one short round of each, a check that the script
# works end to end (~2 minutes), not a measurement; --log: keep every
# benchmark's own output (default: a temporary file, removed). Needs
# sockperf. Takes about 6-9 minutes with the defaults on a 2-core host.
# Record figures only from a run on an idle machine (docs/benchmarks.md).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

build=build
rounds=3
quick=${QLINK_FIGURES_QUICK:-0}
log=

usage() { sed -n '3,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=${2:?}; shift 2 ;;
	--rounds) rounds=${2:?}; shift 2 ;;
	--quick) quick=1; shift ;;
	--log) log=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "progress-figures.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
done
case "$rounds" in '' | *[!0-9]* | 0) echo "progress-figures.sh: --rounds takes a number >= 1" >&2; exit 2 ;; esac

qlink=$build/tools/qlink
bbench=$build/bench/qlink-bench-bridge
bridge=$build/src/bridge/libcudaq-realtime-bridge-qlink.so
for f in "$qlink" "$build/bench/qlink-bench-verbs" "$bbench" "$bridge"; do
	[ -e "$f" ] || { echo "progress-figures.sh: $f missing (make -C $build)" >&2; exit 2; }
done
prog=progress-figures.sh
# shellcheck source=bench/ucx-lib.sh
. bench/ucx-lib.sh # median
unset QLINK_PROGRESS # default options

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "$log" ] || log=$tmp/log
: >"$log"

ncpu=$(nproc)
if [ "$quick" = 1 ]; then
	rounds=1
	sp_args=(--quick --no-goodput)
	sdr_args=(--rounds 1 --sizes 4M --timeout 30)
	sdr_size=4M
	bridge_calls=300
else
	sp_args=(--rounds "$rounds" --time 1 --iters "20000,200000" --no-goodput)
	sdr_args=(--rounds "$rounds" --sizes 64M)
	sdr_size=64M
	bridge_calls=2000
fi
if [ "$ncpu" -ge 4 ]; then
	wide="CPUs 0-3"
	gpu_ts=(--taskset 0-3)
	sp_thread=("${sp_args[@]}") # as many as the default options'
else
	wide="$ncpu CPUs"
	gpu_ts=()
	# four spinning threads on two CPUs: a round trip can take milliseconds,
	# so a few hundred of them, once
	sp_thread=(--rounds 1 --time 1 --iters "200,2000" --no-goodput)
fi
start=$(date +%s)
echo "# progress-figures: $(date -u '+%Y-%m-%d %H:%M UTC'), $ncpu CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
	"$rounds round(s)$([ "$quick" = 1 ] && echo ", QUICK (not a measurement)")"
if [ "$ncpu" -lt 4 ]; then
	echo "# NOTE: the 4-core figures with threads need >= 4 CPUs; this host has $ncpu, so the" \
		"thread-mode rows below ran on all $ncpu, sharing them with the benchmark itself"
fi

step() { echo "# $(($(date +%s) - start)) s: $*"; echo "=== $*" >>"$log"; }

# ---- 1. soft+udp vs sockperf ----------------------------------------------------
step "soft+udp vs sockperf (bench/compare-sockperf.sh)"
QLINK_BENCH_VERBS=$build/bench/qlink-bench-verbs bash bench/compare-sockperf.sh "${sp_args[@]}" \
	--modes auto >"$tmp/sp" 2>&1
cat "$tmp/sp" >>"$log"
step "soft+udp thread mode vs sockperf, NIC threads on $wide (bench/compare-sockperf.sh)"
QLINK_BENCH_VERBS=$build/bench/qlink-bench-verbs bash bench/compare-sockperf.sh "${sp_thread[@]}" \
	--modes thread >"$tmp/sp4" 2>&1
cat "$tmp/sp4" >>"$log"
# a medians row: "NAME MODE pp -m 40 PEER UNIT (range) QLINK UNIT (range) RATIO ..."
sp_row() { # name mode -> "peer qlink ratio"
	awk -v n="$1" -v m="$2" '$1 == n && $2 == m && $3 != "" && NF > 12 {
		for (i = 1; i <= NF; i++) if ($i == "<=" || $i == ">=") r = $(i - 1)
		q = ($9 ~ /^[0-9.]+$/) ? $9 : "nan"
		print $6, q, r; exit }' "$tmp/sp" "$tmp/sp4"
}

# ---- 2. SDR under loss ---------------------------------------------------------------
step "SDR $sdr_size at 1 % loss vs loss-free, 1 ms RTT (bench/sdr_bench.sh)"
bash bench/sdr_bench.sh --qlink "$qlink" "${sdr_args[@]}" --losses "0 0.01" --variants sr \
	--delay-us 500 >"$tmp/sdr" 2>&1
cat "$tmp/sdr" >>"$log"
sdr_ms() { # loss label ("0 %" or "1 %") -> median ms of sr
	awk -F'|' -v s="$sdr_size" -v l="$1" '{ gsub(/ /, "", $2); gsub(/ /, "", $3) }
		$2 == s && $3 == l { gsub(/ /, "", $4); print $4; exit }' "$tmp/sdr"
}

# ---- 3. GPU emulation vs the CPU dispatcher ----------------------------------------
step "GPU emulation vs CPU dispatcher (bench/progress_bench.sh)"
bash bench/progress_bench.sh --qlink "$qlink" --rounds "$rounds" >"$tmp/gpu" 2>&1
cat "$tmp/gpu" >>"$log"
if [ "${#gpu_ts[@]}" -gt 0 ]; then
	step "GPU emulation, threads on $wide (bench/progress_bench.sh ${gpu_ts[*]})"
	bash bench/progress_bench.sh --qlink "$qlink" --rounds "$rounds" "${gpu_ts[@]}" >"$tmp/gpu4" 2>&1
	cat "$tmp/gpu4" >>"$log"
else
	cp "$tmp/gpu" "$tmp/gpu4"
fi
gpu_p50() { # file label -> p50 values (us), one per round
	awk -v l="$2" 'index($0, l " ") == 1 { for (i = 1; i <= NF; i++) if ($i == "latency") { print $(i + 2); break } }' "$1"
}

# ---- 4. the bridge: ring shape vs unified ----------------------------------------------
step "bridge ring shape vs unified shape (qlink-bench-bridge)"
declare -A br
for r in $(seq "$rounds"); do
	for v in "ring auto" "unified auto" "ring thread" "ring caller"; do
		set -- "${v% *}" "${v#* }"
		out=$(timeout 120 "$bbench" --bridge "$bridge" --qlink "$qlink" --shape "$1" --progress "$2" \
			--count "$bridge_calls" 2>&1)
		echo "round $r $v: $out" >>"$log"
		p=$(sed -n 's/.*round trip us: p50 \([0-9.]*\).*/\1/p' <<<"$out" | tail -1)
		br[$1_$2]+=" ${p:-nan}"
	done
done

# ---- the summary ------------------------------------------------------------------------
med() { # values -> median of the numeric ones, or nan
	local v
	v=$(tr ' ' '\n' <<<"$*" | grep -E '^[0-9.]+$' | tr '\n' ' ')
	# shellcheck disable=SC2086
	if [ -n "${v// /}" ]; then median $v; else echo nan; fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "nan" && b != "nan" && b > 0) printf "%.2f", a / b; else print "nan" }'; }
verdict() { # ratio op limit
	awk -v r="$1" -v o="$2" -v l="$3" 'BEGIN { if (r == "nan") print "not measured";
		else if ((o == "<=" && r <= l) || (o == ">=" && r >= l)) print "met"; else print "MISSED" }'
}
row() { # figure qlink-median reference-median unit op limit [note]
	local r
	r=$(ratio "$2" "$3")
	printf '%-44s %12s %12s %-4s %7s  %-8s %s\n' "$1" "$2" "$3" "$4" "$r" \
		"${5:+$5 $6}" "$([ -n "$5" ] && verdict "$r" "$5" "$6")${7:+ $7}"
}

echo
echo "summary ($rounds round(s); medians; ratio = qlink / reference)"
printf '%-44s %12s %12s %-4s %7s  %-8s %s\n' "figure" "qlink" "reference" "unit" "ratio" "target" "verdict"
read -r pw qw _ <<<"$(sp_row write-lat auto)"
row "soft+udp WRITE ping-pong p50 / sockperf pp" "${qw:-nan}" "${pw:-nan}" us "<=" 1.3
read -r ps qs _ <<<"$(sp_row send-lat auto)"
row "soft+udp SEND ping-pong p50 / sockperf pp" "${qs:-nan}" "${ps:-nan}" us "<=" 1.3
read -r pb qb _ <<<"$(sp_row write-bw auto)"
row "soft+udp 8-byte WRITE rate / sockperf tp" "${qb:-nan}" "${pb:-nan}" M/s ">=" 0.8
read -r pw qw _ <<<"$(sp_row write-lat thread)"
row "  thread mode ($wide): WRITE p50" "${qw:-nan}" "${pw:-nan}" us "" ""
read -r ps qs _ <<<"$(sp_row send-lat thread)"
row "  thread mode ($wide): SEND p50" "${qs:-nan}" "${ps:-nan}" us "" ""
read -r pb qb _ <<<"$(sp_row write-bw thread)"
row "  thread mode ($wide): WRITE rate" "${qb:-nan}" "${pb:-nan}" M/s "" ""
s1=$(sdr_ms "1%")
s0=$(sdr_ms "0%")
row "SDR $sdr_size at 1 % loss / loss-free (1 ms RTT)" "${s1:-nan}" "${s0:-nan}" ms "<=" 1.5
cpu=$(med "$(gpu_p50 "$tmp/gpu" "cpu dispatcher")")
row "GPU emulation RTT p50 / CPU dispatcher" "$(med "$(gpu_p50 "$tmp/gpu" "gpu emulate, auto")")" "$cpu" us "<=" 1.5
row "  GPU emulation, caller / CPU dispatcher" "$(med "$(gpu_p50 "$tmp/gpu" "gpu emulate, caller")")" "$cpu" us "" ""
row "  GPU emulation, thread ($wide) / CPU" "$(med "$(gpu_p50 "$tmp/gpu4" "gpu emulate, thread")")" \
	"$(med "$(gpu_p50 "$tmp/gpu4" "cpu dispatcher")")" us "" ""
uni=$(med "${br[unified_auto]}")
row "bridge ring shape p50 / unified shape" "$(med "${br[ring_auto]}")" "$uni" us "<=" 2
row "  bridge ring shape, --progress=thread / unified" "$(med "${br[ring_thread]}")" "$uni" us "" ""
row "  bridge ring shape, --progress=caller / unified" "$(med "${br[ring_caller]}")" "$uni" us "" ""
echo "($(($(date +%s) - start)) s; every benchmark's own output: $([ "$log" = "$tmp/log" ] && echo "pass --log FILE to keep it" || echo "$log"))"
