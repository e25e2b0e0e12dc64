#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A legitimate QCS under a garbage flood (issue 9): qlinkd with a shared
# secret on 127.0.0.1; ql-udp-flood sends garbage (random bytes, and random
# bytes after a '{' that reach the JSON parser, and cookie-less DISCOVERs)
# from many source ports, bounded in count and time; meanwhile
# `qlink vppu --connect` does DISCOVER (cookie round trip), ACK, START and a
# paced run. The run must connect and lose nothing; qlinkd must count the
# rejected datagrams, create no session for them and keep running.
# usage: qlinkd_flood.sh QLINKD QLINK FLOOD [RATE SECONDS]
set -u
qlinkd=$1 qlink=$2 flood=$3 rate=${4:-50000} secs=${5:-4}
QL_SHOW="tail -40"
. "$(dirname "$0")/qlinkd_lib.sh"
fl=
ql_at_exit() { [ -n "$fl" ] && kill $fl 2>/dev/null; }
printf 'qlinkd-flood-secret\n' >"$dir/secret"
cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlinkd-flood-$$
control:
  address: 127.0.0.1
  port: $port
  secret_file: $dir/secret
dispatcher:
  cpu: -1
max_sessions: 4
log:
  level: info
YAML
ql_start_qlinkd listening --config "$dir/qlinkd.yaml"

count=$(awk -v r="$rate" -v s="$secs" 'BEGIN { printf "%d", r * s }')
{
	"$flood" "$port" --rate "$((rate / 2))" --seconds "$secs" --count "$((count / 2))" \
		--ports 64 --kind garbage >"$dir/flood-garbage.out" 2>&1 &
	"$flood" "$port" --rate "$((rate * 2 / 5))" --seconds "$secs" --count "$((count * 2 / 5))" \
		--ports 64 --kind json --size 100 >"$dir/flood-json.out" 2>&1 &
	"$flood" "$port" --rate "$((rate / 10))" --seconds "$secs" --count "$((count / 10))" \
		--ports 64 --kind discover >"$dir/flood-discover.out" 2>&1 &
	wait
} &
fl=$!
sleep 0.5
# the QCS connects and runs while the flood goes on
timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --secret-file "$dir/secret" --cpu -1 \
	--rate 5000 --seconds 2 --window 8 --timeout 2 >"$dir/run.out" 2>&1 ||
	fail "vppu under flood exited $?"
grep -q " lost 0" "$dir/run.out" || fail "calls lost under flood"
grep -Eq "wrong 0 handler_errors 0 protocol_errors 0 timeouts 0" "$dir/run.out" ||
	fail "calls failed under flood"
wait $fl
fl=
cat "$dir"/flood-*.out
kill -0 $srv || fail "qlinkd died under flood"
sleep 0.5 # what the socket still holds
kill -USR1 $srv
for _ in $(seq 50); do grep -q "counters control" "$dir/qlinkd.out" && break; sleep 0.1; done
line=$(grep "counters control" "$dir/qlinkd.out" | tail -n 1)
echo "$line"
kill -TERM $srv
wait $srv
rc=$?
srv=
[ $rc -eq 0 ] || fail "qlinkd exited $rc"
for k in received rejected malformed; do
	v=$(echo "$line" | sed -n "s/.* $k=\([0-9]*\).*/\1/p")
	[ -n "$v" ] && [ "$v" -gt 1000 ] || fail "control counter $k too small under flood: $line"
done
# one session only: the QCS's; the flood created none
echo "$line" | grep -q "sessions_total=1 " || fail "the flood created sessions: $line"
echo "flood test: ok"
