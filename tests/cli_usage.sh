#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The qlink CLI's one vocabulary (docs: man/qlink.1): every subcommand's
# --help and `qlink help CMD` (the same text, exit 0), -V, and usage errors
# (unknown option, missing value, bad port, bad device URI, bad TIME, stray
# argument) exiting 2 with exactly one line on stderr that points to
# --help and nothing on stdout; the deprecated --uri alias of --device; and
# the --histogram output of vppu and bench (buckets summing to the calls,
# cumulative percentages rising to 100) and their --plot figures (with
# gnuplot); qlink stat on the same option table (TIME --timeout); and an
# unreachable peer (a closed control port, a mute stats socket) failing
# fast with the reason.
#
#   tests/cli_usage.sh QLINK
set -u
qlink=$1
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
	echo "FAIL: $*"
	exit 1
}

# ---- --help, help CMD, -V ----------------------------------------------------
for cmd in info bench serve vppu hololink qec sdr ep "ep serve" "ep call" stat; do
	# shellcheck disable=SC2086 # "ep serve" is two words
	"$qlink" $cmd --help >"$dir/help" 2>"$dir/err" || fail "qlink $cmd --help exited $?"
	[ -s "$dir/err" ] && fail "qlink $cmd --help wrote to stderr: $(cat "$dir/err")"
	grep -q "^usage: qlink $cmd " "$dir/help" || fail "qlink $cmd --help: no usage line"
	grep -q -- "-h, --help" "$dir/help" || fail "qlink $cmd --help: no options"
	# shellcheck disable=SC2086
	"$qlink" help $cmd >"$dir/help2" 2>&1 || fail "qlink help $cmd exited $?"
	cmp -s "$dir/help" "$dir/help2" || fail "qlink help $cmd differs from qlink $cmd --help"
done
# the subcommands that open a device say --device, and name --uri as deprecated
for cmd in bench serve vppu qec sdr "ep serve" "ep call"; do
	# shellcheck disable=SC2086
	"$qlink" $cmd --help >"$dir/help"
	grep -qE -- "--device URI" "$dir/help" || fail "qlink $cmd --help: no --device URI"
	grep -qE -- "^      --uri" "$dir/help" && fail "qlink $cmd --help: --uri listed as an option"
done
"$qlink" bench --help | grep -q "deprecated aliases.*--uri (--device)" ||
	fail "bench --help does not name --uri as deprecated"
"$qlink" --help | grep -q "soft+udp://IP" || fail "qlink --help does not list soft+udp URIs"
for v in -V --version; do
	"$qlink" $v | grep -qE '^qlink [0-9]+\.[0-9]+\.[0-9]+$' || fail "qlink $v"
done
echo "ok --help, help CMD, -V"

# ---- usage errors: exit 2, one line, a pointer to --help -------------------------
usage_error() { # PATTERN ARGS...: must fail with status 2 and one line matching PATTERN
	local want=$1
	shift
	"$qlink" "$@" >"$dir/out" 2>"$dir/err"
	local st=$?
	[ $st -eq 2 ] || fail "qlink $* exited $st, not 2: $(cat "$dir/err")"
	[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "qlink $*: not one line on stderr: $(cat "$dir/err")"
	[ -s "$dir/out" ] && fail "qlink $*: wrote to stdout: $(cat "$dir/out")"
	grep -qE -- "$want" "$dir/err" || fail "qlink $*: '$(cat "$dir/err")' does not match '$want'"
	grep -qE -- "\(see qlink ([a-z]+ )*--help\)$" "$dir/err" || fail "qlink $*: no pointer to --help"
}
usage_error "^qlink: no command" 
usage_error "unknown command 'frob'" frob
usage_error "unknown command 'frob'" help frob
for cmd in info bench serve vppu hololink qec sdr stat; do
	usage_error "^qlink $cmd: unknown option '--frobnicate'" $cmd --frobnicate
done
usage_error "^qlink ep serve: unknown option '--frob'" ep serve --frob x.yaml
usage_error "^qlink ep call: unknown option '-q'" ep call -q /x
usage_error "^qlink ep: unknown command 'frob'" ep frob
usage_error "option '--device' needs a value" bench --device
usage_error "option '--connect' needs a value" vppu --connect
usage_error "option '-d' needs a value" sdr send -d
usage_error "option '--json' takes no value" bench --json=yes
usage_error "unexpected argument 'extra'" bench extra
# ports 0 and 99999
for p in 0 99999 http; do
	usage_error "bad value '127.0.0.1:$p' for --connect" vppu --connect "127.0.0.1:$p"
	usage_error "bad value '127.0.0.1:$p' for --connect" bench --connect "127.0.0.1:$p"
	usage_error "bad value '127.0.0.1:$p' for --connect" qec --wire --connect "127.0.0.1:$p"
	usage_error "bad value '127.0.0.1:$p' for --connect" sdr send --device soft://loop \
		--connect "127.0.0.1:$p"
	usage_error "bad value '127.0.0.1:$p' for --connect" ep call --connect "127.0.0.1:$p" /x
	usage_error "bad value '127.0.0.1:$p' for HOST:PORT" hololink "127.0.0.1:$p" read 0x0
done
usage_error "bad value '99999' for --port" serve --transport=udp --port 99999
usage_error "bad value '127.0.0.1:99999' for --listen" sdr recv --device soft://loop \
	--listen 127.0.0.1:99999
usage_error "bad value '70000' for --hsb-listen" vppu --hsb-listen 70000
re() { printf '%s' "$1" | sed 's/[][\.*^$+?(){}|]/\\&/g'; } # a literal in a pattern
# bad device URIs, under --device and under the --uri alias
for uri in foo nosuch://x soft+shm:// "soft:/loop"; do
	q=$(re "$uri")
	usage_error "bad value '$q' for --device" bench --device "$uri"
	usage_error "bad value '$q' for --device" vppu --uri "$uri"
	usage_error "bad value '$q' for --device" serve --uri "$uri"
	usage_error "bad value '$q' for --device" qec --device "$uri"
	usage_error "bad value '$q' for --device" sdr --pair --device "$uri"
	usage_error "bad value '$q' for --device" ep call --device "$uri" /x
	usage_error "bad value '$q' for URI" info "$uri"
done
# TIME: seconds or a unit suffix
for t in 5parsecs -1 "" ms 1e999; do
	usage_error "bad value '$t' for --timeout" vppu --timeout "$t"
done
usage_error "bad value '2h' for --timeout" hololink --timeout 2h 127.0.0.1 read 0x0
# qlink stat: the same table, TIME for --timeout (not milliseconds)
for t in 5parsecs -1 0 2h; do
	usage_error "bad value '$t' for --timeout" stat --socket "$dir/none" --timeout "$t"
done
usage_error "option '--socket' needs a value" stat --socket
usage_error "option '--json' takes no value" stat --json=1
usage_error "--json and --prometheus exclude each other" stat --json --prometheus
usage_error "unexpected argument 'extra'" stat --socket "$dir/none" extra
usage_error "--expect checks the answers to --args" vppu --params-file x --expect 00
usage_error "--function my_decoder: give its arguments with --args HEX" vppu --params-file x \
	--function my_decoder
usage_error "bad value 'xyz' for --args" vppu --params-file x --function 7 --args xyz
echo "ok usage errors"

# ---- qlink stat fails fast with the reason; --timeout is TIME -------------------
"$qlink" stat --socket "$dir/none" >"$dir/out" 2>"$dir/err"
[ $? -eq 1 ] || fail "qlink stat on a missing socket did not exit 1"
grep -q "^qlink stat: $dir/none: No such file or directory (is qlinkd running" "$dir/err" ||
	fail "qlink stat on a missing socket: $(cat "$dir/err")"
# a socket that accepts and never answers: --timeout 300ms ends the wait
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept(); time.sleep(30)' "$dir/mute.sock" &
for _ in $(seq 50); do [ -S "$dir/mute.sock" ] && break; sleep 0.1; done
start=$(date +%s%N)
"$qlink" stat --socket "$dir/mute.sock" --timeout 300ms >"$dir/out" 2>"$dir/err"
st=$? ms=$((($(date +%s%N) - start) / 1000000))
kill %% 2>/dev/null
wait 2>/dev/null
[ $st -eq 1 ] || fail "qlink stat --timeout 300ms on a mute socket exited $st: $(cat "$dir/err")"
grep -q "no answer within 0.3s" "$dir/err" || fail "qlink stat --timeout: $(cat "$dir/err")"
[ "$ms" -ge 250 ] && [ "$ms" -lt 1500 ] || fail "qlink stat --timeout 300ms waited ${ms} ms"
echo "ok qlink stat: unreachable and mute qlinkd, --timeout TIME"

# an unreachable qlinkd: a closed port fails in about a second, with the reason
start=$(date +%s%N)
"$qlink" vppu --connect 127.0.0.1:1 --cpu -1 >"$dir/out" 2>"$dir/err"
st=$? ms=$((($(date +%s%N) - start) / 1000000))
[ $st -eq 1 ] || fail "vppu --connect to a closed port exited $st"
grep -q "port unreachable on 3 of 3 tries: nothing listens there" "$dir/err" ||
	fail "vppu --connect to a closed port: $(cat "$dir/err")"
[ "$ms" -lt 4000 ] || fail "vppu --connect to a closed port took ${ms} ms"
echo "ok vppu: a closed control port fails fast with the reason"

# ---- --uri (deprecated) works as --device; --histogram ---------------------------
n=0
serve_vppu() { # ARGS for vppu: a serve on its own device, a vppu with ARGS
	n=$((n + 1))
	"$qlink" serve --params-file "$dir/p$n" --device "soft+shm://cliu-s$$-$n" --cpu -1 \
		--timeout 20 >"$dir/serve$n.out" 2>&1 &
	"$qlink" vppu --params-file "$dir/p$n" --cpu -1 --timeout 20 "$@" >"$dir/vppu.out" \
		2>"$dir/vppu.err"
	local st=$?
	kill %1 2>/dev/null
	wait 2>/dev/null
	return $st
}
serve_vppu --uri "soft+shm://cliu-v$$" --count 300 --histogram ||
	fail "vppu --uri --histogram exited $?: $(cat "$dir/vppu.err")"
grep -q "^closed: calls 300 answered 300 ok 300 wrong 0" "$dir/vppu.out" ||
	fail "vppu --uri: $(cat "$dir/vppu.out")"
grep -q "^#closed: usec count cumulative%$" "$dir/vppu.out" || fail "vppu --histogram: no header"
awk '/^#closed/ { on = 1; next } on && NF == 3 { sum += $2; last = $3; prev_ok = prev_ok && $3 >= prev; prev = $3 }
     BEGIN { prev_ok = 1 } END { exit !(sum == 300 && last == 100 && prev_ok) }' "$dir/vppu.out" ||
	fail "vppu --histogram: buckets do not sum to 300 calls or reach 100%: $(cat "$dir/vppu.out")"

# --plot DIR: the histogram as data, and drawn (PNG, SVG) by gnuplot
if command -v gnuplot >/dev/null; then
	serve_vppu --device "soft+shm://cliu-v$$" --count 300 --plot "$dir/vplot" ||
		fail "vppu --plot exited $?: $(cat "$dir/vppu.err")"
	grep -q "^plots: $dir/vplot/vppu_latency.png" "$dir/vppu.out" ||
		fail "vppu --plot: no plots line: $(cat "$dir/vppu.out")"
	[ "$(head -c 4 "$dir/vplot/vppu_latency.png" | od -An -tx1 | tr -d ' ')" = 89504e47 ] ||
		fail "vppu --plot: no PNG"
	grep -q "<svg" "$dir/vplot/vppu_latency.svg" || fail "vppu --plot: no SVG"
	awk '/^# closed: bucket_us count/ { on = 1; next } on && NF == 4 { sum += $2 }
	     END { exit sum != 300 }' "$dir/vplot/vppu_latency.dat" ||
		fail "vppu --plot: the data does not hold the 300 calls"
fi

# a wrong answer shows the expected and the received bytes; --function by id
serve_vppu --device "soft+shm://cliu-v$$" --count 3 --function 0x191b6322 --args 0aff \
	--expect 0a00 && fail "vppu --expect with a wrong answer exited 0"
grep -q "call 0 of 0x191b6322 answered wrong (status 0, success)" "$dir/vppu.err" ||
	fail "wrong answer: $(cat "$dir/vppu.err")"
grep -q "^  expected: 0a00$" "$dir/vppu.err" || fail "expected bytes: $(cat "$dir/vppu.err")"
grep -q "^  received: 0b00$" "$dir/vppu.err" || fail "received bytes: $(cat "$dir/vppu.err")"
# an unknown function: the status by name
serve_vppu --device "soft+shm://cliu-v$$" --count 2 --function no_such_fn --args 00 &&
	fail "vppu --function no_such_fn exited 0"
grep -q "the first error answer (call 0): status -[0-9]*, unknown function" "$dir/vppu.err" ||
	fail "status name: $(cat "$dir/vppu.err")"
echo "ok --uri alias, vppu --histogram, wrong answers, status names"

timeout 60 "$qlink" bench --device "soft+shm://cliu-b$$" --client-cpu -1 --server-cpu -1 \
	--latency-calls 500 --warmup-calls 10 --rate-seconds 50ms --paced-seconds 0 -H \
	--plot "$dir/bplot" >"$dir/bench.out" 2>&1 || fail "bench -H exited $?: $(cat "$dir/bench.out")"
grep -q "^#latency round trip: usec count cumulative%$" "$dir/bench.out" ||
	fail "bench -H: no latency histogram: $(cat "$dir/bench.out")"
grep -q "^#rate round trip: usec count cumulative%$" "$dir/bench.out" ||
	fail "bench -H: no rate histogram"
awk '/^#latency/ { on = 1; next } /^$|^#/ { on = 0 } on { sum += $2 } END { exit sum != 500 }' \
	"$dir/bench.out" || fail "bench -H: the latency buckets do not sum to 500 calls"
grep -qiE "issue [0-9]|\(seed" "$dir/bench.out" && fail "bench prints internal labels"
if command -v gnuplot >/dev/null; then
	grep -q "<svg" "$dir/bplot/bench_latency.svg" || fail "bench --plot: no SVG"
	[ -s "$dir/bplot/bench_latency.png" ] || fail "bench --plot: no PNG"
	grep -q "^# latency: bucket_us count" "$dir/bplot/bench_latency.dat" ||
		fail "bench --plot: no latency data"
fi
echo "PASS: --help and help CMD for every subcommand, -V, one-line usage errors (exit 2)," \
	"--uri alias, --histogram, --plot, unreachable peers"
