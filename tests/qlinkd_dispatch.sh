#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd with one dispatcher per core:
#  1. --check-config rejects bad core lists (a core this host lacks, a core
#     twice, cpu and cpus together, an empty list, an unknown idle policy),
#     each on its line;
#  2. qlinkd with `cpus: [0, LAST]` and the yield idle policy serves four
#     QCSs at once: every call answered, the sessions spread over both
#     dispatchers (least-loaded), both dispatchers' counters show requests;
#  3. SIGTERM: exit 0.
set -u
qlinkd=$1 qlink=$2
. "$(dirname "$0")/qlinkd_lib.sh"
last=$(($(nproc) - 1))

# 1. bad core lists
bad() { # expected "LINE: text" and the YAML
	printf '%s' "$2" >"$dir/bad.yaml"
	"$qlinkd" --check-config "$dir/bad.yaml" >"$dir/check.out" 2>&1 && fail "accepted: $2"
	grep -qF "bad.yaml:$1" "$dir/check.out" || fail "expected '$1' for: $2 (got $(cat "$dir/check.out"))"
}
bad "4: dispatcher.cpus[1]: 4096 is not a CPU of this host" $'dispatcher:\n  cpus:\n    - 0\n    - 4096\n'
bad "2: dispatcher.cpus[1]: cpu 0 is listed twice" $'dispatcher:\n  cpus: [0, 0]\n'
bad "3: dispatcher: give cpu (one core) or cpus (a list), not both" $'dispatcher:\n  cpu: 0\n  cpus: [0]\n'
bad "2: dispatcher.cpus: a list needs at least one entry" $'dispatcher:\n  cpus: []\n'
bad "2: dispatcher.idle: 'fast' is not one of spin, yield, sleep" $'dispatcher:\n  idle: fast\n'
bad "2: dispatcher.cpus[0]: -1 is not a CPU" $'dispatcher:\n  cpus: [-1]\n'
printf 'dispatcher:\n  cpu: 0\n' >"$dir/old.yaml"
"$qlinkd" --check-config "$dir/old.yaml" >/dev/null 2>&1 || fail "a one-core config no longer loads"

# 2. two dispatchers, four QCSs at once
cores="[0, $last]"
[ "$last" -eq 0 ] && cores="[0]"
cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlinkd-disp-$$
control:
  address: 127.0.0.1
  port: $port
dispatcher:
  cpus: $cores
  idle: yield
  idle_after_us: 200
max_sessions: 8
YAML
ql_start_qlinkd listening --config "$dir/qlinkd.yaml"
[ "$(grep -c 'dispatcher started' "$dir/qlinkd.err")" -eq "$([ "$last" -eq 0 ] && echo 1 || echo 2)" ] ||
	fail "not one dispatcher per core"
pids=
for i in 1 2 3 4; do
	timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --device "soft+shm://qlvppu-d$i-$$" \
		--name "qcs$i" --cpu -1 --seconds 1.5 --window 4 >"$dir/vppu$i.out" 2>&1 &
	pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a vppu exited non-zero"; done
[ "$(grep -c 'session dispatching' "$dir/qlinkd.err")" -eq 4 ] || fail "not four sessions"
if [ "$last" -gt 0 ]; then
	grep -q "session dispatching.* cpu=0 " "$dir/qlinkd.err" || fail "no session on cpu 0"
	grep -q "session dispatching.* cpu=$last " "$dir/qlinkd.err" || fail "no session on cpu $last"
fi
kill -USR1 $srv
for _ in $(seq 100); do grep -q "counters qlinkd" "$dir/qlinkd.out" && break; sleep 0.05; done
for c in $(echo "$cores" | tr -d '[],'); do
	line=$(grep "counters dispatcher cpu=$c " "$dir/qlinkd.out")
	[ -n "$line" ] || fail "no counters for the dispatcher on cpu $c"
	echo "$line" | grep -q ' requests=0 ' && fail "the dispatcher on cpu $c served nothing"
done

# 3. clean stop
kill -TERM $srv
wait $srv || fail "qlinkd exited $? on SIGTERM"
srv=
grep "session dispatching\|counters dispatcher" "$dir/qlinkd.err" "$dir/qlinkd.out"
echo "qlinkd_dispatch: OK"
