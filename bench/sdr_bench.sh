#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sdr_bench.sh: completion time of one message under packet loss, SDR-RDMA
# selective repeat (sr) and erasure coding (ec) against RC on the same
# provider, as SDR-RDMA's paper (arXiv 2505.05366) measures it: two
# processes (`qlink sdr --pair`) on two soft+udp devices on loopback, an
# injected one-way delay on every packet (--delay-us, so the round trip is
# 2 x D plus the wire's own), and seeded loss on the packets the sender's
# data QP sends (RC: its RC QP's requests). The variants alternate within
# every round (sr, ec, rc, then the next seed), because on small shared VMs
# the host steals time from long spinning runs; each cell is the median over
# the rounds of each run's median message.
#
# usage: bench/sdr_bench.sh [--qlink PATH] [--rounds N] [--delay-us D]
#                           [--sizes "1M 64M"] [--losses "0 0.0001 0.001 0.01 0.05"]
#                           [--variants "sr ec rc"] [--count N] [--timeout S]
#                           [--ec K,M] [--window N] [--raw FILE] [--quick] [--help]
#
# --quick: the smoke run (256K, losses 0 and 0.01, one round) that ctest runs.
# Prints a markdown table (median completion time in ms, goodput in MB/s,
# and each variant's time relative to its own loss-free time) and the
# verdict on the target: at 1 % loss SR delivers 64 MiB in <= 1.5 x its
# loss-free time. --raw keeps every `result` line.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

qlink=build/tools/qlink
rounds=5
delay=500
sizes="1M 64M"
losses="0 0.0001 0.001 0.01 0.05"
variants="sr ec rc"
count=""
timeout=60
ec=8,2
window=0
raw=""
quick=0

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	--qlink) qlink=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--delay-us) delay=$2; shift ;;
	--sizes) sizes=$2; shift ;;
	--losses) losses=$2; shift ;;
	--variants) variants=$2; shift ;;
	--count) count=$2; shift ;;
	--timeout) timeout=$2; shift ;;
	--ec) ec=$2; shift ;;
	--window) window=$2; shift ;;
	--raw) raw=$2; shift ;;
	--quick) quick=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "sdr_bench: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
if [ $quick = 1 ]; then
	rounds=1 sizes=256K losses="0 0.01" delay=100 timeout=30
fi
[ -x "$qlink" ] || { echo "sdr_bench: no qlink at $qlink (build first, or --qlink)" >&2; exit 2; }

pid=$$
a=127.$(((pid >> 8) & 255)).$((pid & 255)).1
b=127.$(((pid >> 8) & 255)).$((pid & 255)).2
port=$((24000 + pid % 20000))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
res=$tmp/results
: >"$res"

echo "# qlink sdr benchmark: soft+udp $a <-> $b, delay $delay us each way" \
	"(injected RTT $((2 * delay)) us), $rounds rounds, EC $ec, SDR window" \
	"$([ "$window" != 0 ] && echo "$window" || echo 256) packets"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
for size in $sizes; do
	c=$count
	if [ -z "$c" ]; then
		case $size in *M | *G) c=$([ "${size%M}" -ge 16 ] 2>/dev/null && echo 1 || echo 3) ;; *) c=5 ;; esac
	fi
	for loss in $losses; do
		for r in $(seq "$rounds"); do
			for v in $variants; do
				out=$tmp/run
				if timeout $((timeout * c + 30)) "$qlink" sdr --pair \
					--device "soft+udp://$a:$port" --peer-device "soft+udp://$b:$port" \
					--reliability "$v" --size "$size" --count "$c" --loss "$loss" \
					--seed "$r" --delay-us "$delay" --ec "$ec" --timeout "$timeout" \
					$([ "$window" != 0 ] && echo --window "$window") \
					>"$out" 2>&1; then
					line=$(grep '^result ' "$out")
					[ -n "$raw" ] && echo "$line" >>"$raw"
					med=$(sed -n 's/.* median_us=\([0-9.]*\).*/\1/p' <<<"$line")
					echo "$size $loss $v $med" >>"$res"
				else
					echo "$size $loss $v fail" >>"$res"
					echo "# failed: $v $size loss $loss seed $r: $(tail -n 1 "$out")" >&2
					failed=$((failed + 1))
				fi
			done
		done
	done
done

# median of a variant's runs in a cell ("fail" counts as +infinity)
cell() { # size loss variant -> median us or "fail"
	awk -v s="$1" -v l="$2" -v v="$3" '$1 == s && $2 == l && $3 == v {
		x[n++] = ($4 == "fail") ? 1e30 : $4 }
	END {
		if (!n) { print "-"; exit }
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
		m = (n % 2) ? x[int(n / 2)] : (x[n / 2 - 1] + x[n / 2]) / 2
		print (m >= 1e29) ? "fail" : m }' "$res"
}
bytes() { numfmt --from=iec "$1"; }

echo
printf '| size | loss |'
for v in $variants; do printf ' %s ms | %s MB/s | %s x0 |' "$v" "$v" "$v"; done
echo
printf '|---|---|'
for v in $variants; do printf -- '---|---|---|'; done
echo
for size in $sizes; do
	n=$(bytes "$size")
	for loss in $losses; do
		printf '| %s | %s %% |' "$size" "$(awk -v l="$loss" 'BEGIN { printf "%g", l * 100 }')"
		for v in $variants; do
			m=$(cell "$size" "$loss" "$v")
			z=$(cell "$size" "$(set -- $losses; echo "$1")" "$v")
			if [ "$m" = fail ] || [ "$m" = - ]; then
				printf ' %s | - | - |' "$m"
			else
				awk -v m="$m" -v z="$z" -v n="$n" 'BEGIN {
					printf " %.2f | %.1f |", m / 1000, n / m
					if (z == "fail" || z == "-" || z == 0) printf " - |"; else printf " %.2f |", m / z }'
			fi
		done
		echo
	done
done

# the target: SR, 64 MiB, 1 % loss vs loss-free
if grep -q '^64M 0.01 sr ' "$res" && grep -q '^64M 0 sr ' "$res"; then
	m1=$(cell 64M 0.01 sr)
	m0=$(cell 64M 0 sr)
	echo
	if [ "$m1" = fail ] || [ "$m0" = fail ]; then
		echo "target (SR 64 MiB at 1 % loss <= 1.5 x loss-free): not measured (a run failed)"
	else
		awk -v a="$m1" -v b="$m0" 'BEGIN {
			r = a / b
			printf "target (SR 64 MiB at 1 %% loss <= 1.5 x loss-free): %.2f x: %s\n", r,
				(r <= 1.5) ? "met" : "missed" }'
	fi
fi
[ $failed -eq 0 ] || echo "# $failed run(s) failed (shown as fail)"
[ $quick = 1 ] && [ $failed -ne 0 ] && exit 1
exit 0
