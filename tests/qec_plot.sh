#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlink qec --plot: the offline sweep draws the threshold figure and --wire
# the latency histograms, each as a PNG and an SVG that gnuplot actually
# wrote (PNG signature, an <svg> document with the curves' titles), with
# the data files next to them. Skipped (77) without gnuplot; the test
# profile of scripts/deps.sh installs gnuplot-nox.
set -u
qlink=$1 plugin=$2
command -v gnuplot >/dev/null 2>&1 || { echo "SKIP: gnuplot not installed (gnuplot-nox)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
	echo "FAIL: $*"
	cat "$dir"/*.out 2>/dev/null
	exit 1
}
png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && [ "$(stat -c %s "$1")" -gt 5000 ]; }

timeout 120 "$qlink" qec --distances 3,5 --p 0.02:0.04:3 --shots 500 --plot "$dir/p" >"$dir/off.out" 2>&1 ||
	fail "offline --plot exited $?"
png "$dir/p/qec_threshold_phenomenological.png" || fail "threshold PNG"
grep -q "<svg" "$dir/p/qec_threshold_phenomenological.svg" || fail "threshold SVG"
grep -q "d = 5" "$dir/p/qec_threshold_phenomenological.svg" || fail "threshold SVG: no d = 5 curve"
[ "$(grep -cE '^[35] ' "$dir/p/qec_threshold_phenomenological.dat")" -eq 6 ] || fail "threshold data"
timeout 120 "$qlink" qec --noise code-capacity --distances 3 --p 0.05,0.1 --shots 500 \
	--plot "$dir/p" >"$dir/cc.out" 2>&1 || fail "code capacity --plot exited $?"
png "$dir/p/qec_threshold_code_capacity.png" || fail "code capacity PNG"

QLINK_QEC_PLUGIN=$plugin timeout 120 "$qlink" qec --wire --distance 3 --p 0.02 --shots 500 \
	--cpu -1 --server-cpu -1 --call-timeout 30 --plot "$dir/p" >"$dir/wire.out" 2>&1 ||
	fail "--wire --plot exited $?"
png "$dir/p/qec_latency.png" || fail "latency PNG"
grep -q "<svg" "$dir/p/qec_latency.svg" || fail "latency SVG"
grep -q "round trip, get_corrections" "$dir/p/qec_latency.svg" || fail "latency SVG: no round trip"
[ "$(grep -c '^# ' "$dir/p/qec_latency.dat")" -eq 4 ] || fail "latency data: 4 histograms"
echo "PASS: threshold (phenomenological, code capacity) and latency figures, PNG and SVG"
