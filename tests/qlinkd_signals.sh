#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd and each signal it handles, with a QCS connected:
#   SIGUSR1  prints the counters, service goes on;
#   SIGHUP   logged, no reload: says whether the file on disk is valid (and
#            its problems), service goes on; never a silent death;
#   SIGINT, SIGTERM  the QCS is told (ABORT "server shutdown"), the final
#            session and control counters are printed, exit 0.
set -u
qlinkd=$1 qlink=$2
QL_KILL="kill -9"
. "$(dirname "$0")/qlinkd_lib.sh"
cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlinkd-sig-$$
control:
  address: 127.0.0.1
  port: $port
dispatcher:
  cpu: -1
log:
  level: info
YAML
start() { ql_start_qlinkd serving --config "$dir/qlinkd.yaml"; }
vppu() { # out file, args...
	local out=$1
	shift
	timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --cpu -1 "$@" >"$dir/$out" 2>&1
}
wait_for() { # pattern, file
	for _ in $(seq 100); do grep -q -- "$1" "$2" && return 0; sleep 0.05; done
	return 1
}

start
# SIGUSR1 and SIGHUP during a run: the run goes on untouched
vppu run.out --seconds 2 --window 4 &
vp=$!
sleep 0.5
kill -USR1 $srv
wait_for "counters session session=0 running=1" "$dir/qlinkd.out" || fail "SIGUSR1: no counters"
wait_for "counters control" "$dir/qlinkd.out" || fail "SIGUSR1: no control counters"
kill -HUP $srv
wait_for "SIGHUP: configuration not reloaded" "$dir/qlinkd.err" || fail "SIGHUP not logged"
grep -q "config_on_disk=valid problems=0" "$dir/qlinkd.err" || fail "SIGHUP: file check"
wait $vp || fail "the run across SIGUSR1 and SIGHUP exited $?"
grep -q "wrong 0 handler_errors 0 protocol_errors 0 timeouts 0 late 0 lost 0" "$dir/run.out" ||
	fail "calls lost across SIGUSR1/SIGHUP"
# a broken file on disk: SIGHUP says so, with every problem and its line
cp "$dir/qlinkd.yaml" "$dir/good.yaml"
printf 'ring:\n  slots: 48\nmax_sessions: 0\n' >>"$dir/qlinkd.yaml"
kill -HUP $srv
wait_for "config_on_disk=invalid problems=2" "$dir/qlinkd.err" || fail "SIGHUP: broken file"
grep -q "qlinkd.yaml:1[0-9]: .*48" "$dir/qlinkd.err" || fail "SIGHUP: problem lines"
kill -0 $srv || fail "qlinkd died on SIGHUP"
cp "$dir/good.yaml" "$dir/qlinkd.yaml"
vppu after.out --count 2000 --window 4 || fail "no service after SIGHUP"

# SIGINT and SIGTERM with a run in progress
for sig in INT TERM; do
	[ $sig = INT ] || start
	vppu "stop-$sig.out" --seconds 20 --window 4 --call-timeout 2 &
	vp=$!
	wait_for "control started" "$dir/qlinkd.err" || fail "$sig: the QCS did not start"
	sleep 0.3
	ql_stop_qlinkd $sig SIG$sig
	grep -q "stopping.* signal=SIG$sig" "$dir/qlinkd.err" || fail "SIG$sig: no stopping line"
	grep -q "counters session session=0 running=0 requests=[1-9]" "$dir/qlinkd.out" ||
		fail "SIG$sig: no final session counters"
	grep -q "counters control received=" "$dir/qlinkd.out" || fail "SIG$sig: no final control counters"
	wait $vp
	grep -q "server aborted the session: server shutdown" "$dir/stop-$sig.out" ||
		fail "SIG$sig: the QCS was not told"
done
echo "PASS: qlinkd signals (USR1, HUP, INT, TERM)"
