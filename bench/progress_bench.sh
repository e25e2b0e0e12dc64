#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# progress_bench.sh: the GPU emulation against the CPU dispatcher, in
# caller and thread progress (docs/progress.md, issue 24), alternated in
# rounds so that one run's load is shared by all three; prints each run's
# latency line (p50 us is the 3rd column).
#
#   bench/progress_bench.sh [--qlink PATH] [--rounds N] [--taskset CPUS]
#
# --taskset runs every command under `taskset -c CPUS` (e.g. 0-3 for the
# 4-core figures with threads).
set -euo pipefail
qlink=build/tools/qlink rounds=3 ts=()
while [ $# -gt 0 ]; do
	case $1 in
	--qlink) qlink=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--taskset) ts=(taskset -c "$2"); shift 2 ;;
	*) echo "usage: $0 [--qlink PATH] [--rounds N] [--taskset CPUS]" >&2; exit 2 ;;
	esac
done
args=(--latency-calls 2000 --warmup-calls 100 --rate-seconds 0.2 --paced-seconds 0)
run() { # label, env, extra args
	local label=$1 envv=$2
	shift 2
	printf '%-22s ' "$label"
	env "$envv" "${ts[@]}" "$qlink" bench "$@" "${args[@]}" 2>&1 | grep -E '^latency' || echo "(failed)"
}
for r in $(seq "$rounds"); do
	echo "# round $r"
	run "cpu dispatcher" QLINK_PROGRESS=auto
	run "gpu emulate, caller" QLINK_PROGRESS=caller --gpu=emulate
	run "gpu emulate, thread" QLINK_PROGRESS=thread --gpu=emulate
	run "gpu emulate, auto" QLINK_PROGRESS=auto --gpu=emulate
done
