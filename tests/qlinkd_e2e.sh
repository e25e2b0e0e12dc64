#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd end to end: a config with the example plugin, `qlink vppu` over the
# params-file rendezvous, SIGUSR1 prints counters, SIGTERM with calls in
# flight exits 0; bad configs and plugins fail with a message, not a signal.
set -u
qlinkd=$1 qlink=$2 plugin=$3 bad_plugin=$4 examples=$5
. "$(dirname "$0")/qlinkd_lib.sh"

cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlinkd-e2e-$$
control:
  port: $port
dispatcher:
  cpu: -1
ring:
  slots: 64
  slot_size: 256
plugins:
  - path: $plugin
    config: max_weight=8
log:
  level: info
  format: text
YAML
"$qlinkd" --check-config "$dir/qlinkd.yaml" >"$dir/check.out" 2>&1 || fail "check-config of a good file"
grep -q "qlinkd.yaml: OK" "$dir/check.out" || fail "check-config output"
"$qlinkd" --check-config "$examples/qlinkd.yaml" >/dev/null 2>&1 || true # plugin path may differ

"$qlinkd" --config "$dir/qlinkd.yaml" --params-file "$dir/p" --timeout 20 \
	>"$dir/qlinkd.out" 2>"$dir/qlinkd.err" &
srv=$!
timeout 30 "$qlink" vppu --params-file "$dir/p" --cpu -1 --count 5000 --window 4 \
	--timeout 20 >"$dir/vppu.out" 2>&1 || fail "vppu exited $?"
grep -q "calls 5000 answered 5000 ok 5000 wrong 0" "$dir/vppu.out" || fail "vppu report"
kill -USR1 $srv
for _ in $(seq 50); do grep -q "requests=5000" "$dir/qlinkd.out" && break; sleep 0.1; done
grep -q "counters session session=0 running=1 requests=5000 responses=5000 ok=5000" \
	"$dir/qlinkd.out" || fail "SIGUSR1 counters"
grep -q "function=repcode_decode" "$dir/qlinkd.out" || fail "plugin function not registered"
grep -q "plugin=repcode_decoder" "$dir/qlinkd.err" || fail "plugin load not logged"

# calls in flight when SIGTERM arrives: qlinkd still exits 0
timeout 30 "$qlink" vppu --params-file "$dir/p" --cpu -1 --seconds 5 --timeout 2 \
	>"$dir/vppu2.out" 2>&1 &
vp=$!
sleep 0.5
ql_stop_qlinkd TERM SIGTERM
wait $vp 2>/dev/null

# bad inputs: non-zero exit, a message, never a signal (exit status > 128)
expect_fail() { # name, expected message, command...
	local name=$1 msg=$2
	shift 2
	timeout 20 "$@" >"$dir/bad.out" 2>&1
	local rc=$?
	[ $rc -ne 124 ] || fail "$name: accepted (still running after 20 s)"
	[ $rc -ne 0 ] || fail "$name: accepted"
	[ $rc -lt 128 ] || fail "$name: killed by signal $((rc - 128))"
	grep -q -- "$msg" "$dir/bad.out" || { cat "$dir/bad.out"; fail "$name: message"; }
}
printf 'device: soft+shm://x\nring:\n  slots: 48\n' >"$dir/geom.yaml"
expect_fail "bad geometry" "geom.yaml:3: ring: num_slots 48" "$qlinkd" --config "$dir/geom.yaml"
expect_fail "check bad geometry" "geom.yaml:3:" "$qlinkd" --check-config "$dir/geom.yaml"
# soft+shm parameters (pid, fd, heap address) go to unauthenticated QCSs on
# this host only: no secret and a non-loopback allowlist entry is refused
printf 'device: soft+shm://x\ncontrol:\n  port: %s\n  allow: [127.0.0.1/32, 10.0.0.0/8]\n' "$port" >"$dir/remote.yaml"
expect_fail "soft+shm, no secret, remote allow" "'10.0.0.0/8': a soft+shm device without control.secret_file answers local" \
	"$qlinkd" --config "$dir/remote.yaml"
expect_fail "check soft+shm, no secret, remote allow" "remote.yaml: control.allow '10.0.0.0/8'" \
	"$qlinkd" --check-config "$dir/remote.yaml"
printf 'device: [x\n' >"$dir/syntax.yaml"
expect_fail "malformed" "syntax.yaml:2: YAML syntax error" "$qlinkd" --config "$dir/syntax.yaml"
printf 'plugins:\n  - path: %s\n' "$bad_plugin" >"$dir/abi.yaml"
expect_fail "bad plugin ABI" "abi.yaml:2: plugins\[0\]: .*plugin ABI version 42" \
	"$qlinkd" --config "$dir/abi.yaml"
# --check-config alone runs no plugin code (the file's trust only):
# --load-plugins loads it
"$qlinkd" --check-config "$dir/abi.yaml" >/dev/null 2>&1 || fail "check-config loaded a plugin"
expect_fail "check bad plugin ABI" "plugin ABI version 42" "$qlinkd" --check-config "$dir/abi.yaml" --load-plugins
printf 'plugins:\n  - path: %s\n' "$qlink" >"$dir/exe.yaml"
expect_fail "executable as plugin" "cannot be loaded\|not a qlink plugin" \
	"$qlinkd" --config "$dir/exe.yaml"
# --check-config reports every problem in one run, each as FILE:LINE:
# message, whatever its kind (issue 25): an unknown key hides no bad value,
# the first error no later one (a bad value, an unknown key, a bad type, a
# key nested where it does not belong); the exit status is 1
cat >"$dir/many.yaml" <<YAML
device: soft+shm://this/is:bad
control:
  port: 0
  prot: 1
ring: 64
dispatcher:
  log:
    level: debug
max_sessions: [4]
YAML
"$qlinkd" --check-config "$dir/many.yaml" >"$dir/many.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "check-config: many problems: exit status $rc, not 1"
for want in "many.yaml:1: device: .*outside" "many.yaml:3: control.port: 0 is out of range" \
	"many.yaml:4: unknown key 'prot' in control" \
	"many.yaml:5: ring: wrong type: expected a mapping, found a scalar" \
	"many.yaml:7: unknown key 'log' in dispatcher" \
	"many.yaml:9: max_sessions: wrong type: expected a scalar value, found a list"; do
	grep -q -- "$want" "$dir/many.out" || fail "check-config: missing '$want'"
done
[ "$(wc -l <"$dir/many.out")" -eq 6 ] || fail "check-config: not one line per problem"
# ... and then each plugin's
cat >"$dir/many.yaml" <<YAML
device: soft+shm://this/is:bad
control:
  port: 0
max_sessions: 1024
ring:
  slots: 65536
  slot_size: 65536
plugins:
  - path: $bad_plugin
  - path: /nonexistent/plugin.so
YAML
"$qlinkd" --check-config "$dir/many.yaml" --load-plugins >"$dir/many.out" 2>&1 && fail "check-config: many problems accepted"
for want in "many.yaml:1: device: .*outside" "many.yaml:3: control.port: 0 is out of range" \
	"many.yaml:6: ring: .*more than this host's memory" \
	"many.yaml:10: plugins\[1\].path: cannot read" "many.yaml:9: plugins\[0\]: .*plugin ABI version 42"; do
	grep -q -- "$want" "$dir/many.out" || fail "check-config: missing '$want'"
done
printf 'device: soft://loop\n---\ndevice: soft://loop\n' >"$dir/two.yaml"
expect_fail "two documents" "two.yaml:2: a second YAML document" "$qlinkd" --check-config "$dir/two.yaml"
# qlinkd's --params-file obeys the rendezvous rules (src/transport/rendezvous.h)
printf 'planted\n' >"$dir/planted"
expect_fail "pre-existing params file" "planted already exists" \
	"$qlinkd" --config "$dir/qlinkd.yaml" --params-file "$dir/planted" --timeout 1
[ "$(cat "$dir/planted")" = planted ] || fail "qlinkd overwrote a pre-existing params file"
mkdir "$dir/ww" && chmod 0777 "$dir/ww"
expect_fail "world-writable params directory" "writable by group or others and not sticky" \
	"$qlinkd" --config "$dir/qlinkd.yaml" --params-file "$dir/ww/p" --timeout 1
expect_fail "missing config" "cannot read the file" "$qlinkd" --config "$dir/nope.yaml"
# usage errors: exit 2, one line on stderr pointing to --help, as qlink's
qlinkd_usage() { # PATTERN ARGS...
	local want=$1
	shift
	"$qlinkd" "$@" >"$dir/u.out" 2>"$dir/u.err"
	local st=$?
	[ $st -eq 2 ] || fail "qlinkd $*: exited $st, not 2: $(cat "$dir/u.err")"
	[ "$(wc -l <"$dir/u.err")" -eq 1 ] || fail "qlinkd $*: not one line: $(cat "$dir/u.err")"
	[ -s "$dir/u.out" ] && fail "qlinkd $*: wrote to stdout"
	grep -qE -- "^qlinkd: $want \(see qlinkd --help\)$" "$dir/u.err" ||
		fail "qlinkd $*: '$(cat "$dir/u.err")' does not match '$want'"
}
qlinkd_usage "give one of --config FILE or --check-config FILE" --config a --check-config b
qlinkd_usage "unknown option '--frob'" --frob
qlinkd_usage "unknown option '-x'" -x
qlinkd_usage "option '--config' needs a value" --config
qlinkd_usage "option '--load-plugins' takes no value" --check-config a --load-plugins=1
qlinkd_usage "unexpected argument 'extra'" --config a extra
qlinkd_usage "--load-plugins goes with --check-config" --config a --load-plugins
for t in 5parsecs 0 -1 2d; do
	qlinkd_usage "bad value '$t' for --timeout" --config a --timeout "$t"
done
# --timeout is a TIME, as qlink's: 300ms waits 0.3 s for the client
start=$(date +%s%N)
expect_fail "--timeout 300ms" "within 0.3 s" "$qlinkd" --config "$dir/qlinkd.yaml" \
	--params-file "$dir/short" --timeout 300ms
ms=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -lt 10000 ] || fail "qlinkd --timeout 300ms waited ${ms} ms"
# no arguments: the default configuration (named by --help), read as --config
def=$("$qlinkd" --help | sed -n 's/^default configuration: //p')
[ -n "$def" ] || fail "qlinkd --help names no default configuration"
[ -e "$def" ] || expect_fail "no arguments, no default configuration" "$def: cannot read the file" "$qlinkd"
echo "PASS: qlinkd end to end"
