#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlink qec end to end, as an operator runs it:
#  1. offline: the sweep prints a row per (d, p) with its interval; --json
#     one object per point; the same seed gives the same numbers;
#  2. --wire with its own daemon (the plugin loaded from the build): the
#     logical errors equal the offline ones bit for bit, no round lost;
#  3. --wire --connect to a qlinkd serving qlink-qec.so with two decoders
#     (config from the YAML file): both decoders, bit for bit; a decoder id
#     the daemon has, with other parameters, exits 1 and says DIFFERENT or
#     names the refusal;
#  4. bad options and a bad plugin configuration fail with a message.
set -u
qlinkd=$1 qlink=$2 plugin=$3
. "$(dirname "$0")/qlinkd_lib.sh"

# 1. offline
timeout 120 "$qlink" qec --distances 3,5 --p 0.02,0.04 --shots 2000 --seed 7 >"$dir/off.out" 2>&1 ||
	fail "offline exited $?"
[ "$(grep -cE '^ +[35] +[35] +0\.0[24]000 ' "$dir/off.out")" -eq 4 ] || fail "offline: 4 rows"
timeout 120 "$qlink" qec --distances 3,5 --p 0.02,0.04 --shots 2000 --seed 7 >"$dir/off2.out" 2>&1
cmp -s <(grep -E '^ +[35] ' "$dir/off.out" | awk '{print $1,$2,$3,$6,$7,$8,$9}') \
	<(grep -E '^ +[35] ' "$dir/off2.out" | awk '{print $1,$2,$3,$6,$7,$8,$9}') ||
	fail "offline: the same seed gave other numbers"
timeout 120 "$qlink" qec --distance 3 --p 0.05 --noise code-capacity --shots 1000 --json \
	>"$dir/json.out" 2>&1 || fail "offline --json exited $?"
grep -q '"noise":"code-capacity","distance":3,"rounds":0,"p":0.05,' "$dir/json.out" ||
	fail "offline --json"

# 2. --wire, own daemon
QLINK_QEC_PLUGIN=$plugin timeout 120 "$qlink" qec --wire --distance 5 --p 0.02 --shots 1000 \
	--cpu -1 --server-cpu -1 --call-timeout 30 >"$dir/own.out" 2>&1 || fail "--wire (own daemon) exited $?"
grep -q "bit for bit: equal" "$dir/own.out" || fail "--wire own: not equal"
grep -qE "rounds sent 6000, decoded 6000, .* lost 0, errors 0" "$dir/own.out" ||
	fail "--wire own: rounds"

# 3. --wire --connect to qlinkd
cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlinkd-qec-$$
control:
  address: 127.0.0.1
  port: $port
  allow: [127.0.0.1/32]
dispatcher:
  cpu: -1
max_sessions: 4
builtins: []
plugins:
  - path: $plugin
    config: |
      id=0 distance=3 rounds=3 p=0.03
      id=4 distance=5 rounds=4 p=0.01 q=0.02 input=detectors
log:
  level: info
YAML
"$qlinkd" --check-config "$dir/qlinkd.yaml" >"$dir/check.out" 2>&1 || fail "check-config"
ql_start_qlinkd listening --config "$dir/qlinkd.yaml"
grep -q "plugin=qec" "$dir/qlinkd.err" || fail "plugin load not logged"
timeout 120 "$qlink" qec --wire --connect "127.0.0.1:$port" --device "soft+shm://qec-cli-$$" \
	--distance 3 --rounds 3 --p 0.03 --shots 1000 --cpu -1 --call-timeout 30 \
	>"$dir/c0.out" 2>&1 || fail "--connect decoder 0 exited $?"
grep -q "bit for bit: equal" "$dir/c0.out" || fail "--connect decoder 0: not equal"
timeout 120 "$qlink" qec --wire --connect "127.0.0.1:$port" --device "soft+shm://qec-cli-$$" \
	--decoder-id 4 --input detectors --distance 5 --rounds 4 --p 0.01 --q 0.02 --shots 1000 \
	--cpu -1 --rate 0 --call-timeout 30 >"$dir/c4.out" 2>&1 || fail "--connect decoder 4 exited $?"
grep -q "bit for bit: equal" "$dir/c4.out" || fail "--connect decoder 4: not equal"
# the stream's distance is not the decoder's: every round refused, exit 1
timeout 120 "$qlink" qec --wire --connect "127.0.0.1:$port" --device "soft+shm://qec-cli-$$" \
	--decoder-id 4 --distance 3 --p 0.01 --shots 10 --cpu -1 >"$dir/bad.out" 2>&1
[ $? -eq 1 ] || fail "a mismatched decoder did not exit 1"
grep -q "errors .* (first -4)" "$dir/bad.out" || fail "mismatch: no -4"
ql_stop_qlinkd TERM "qlinkd with the qec plugin"

# 4. bad input: exit 2 or 1 with a message
"$qlink" qec --distances 4 >"$dir/e1.out" 2>&1
[ $? -eq 2 ] && grep -q "bad value '4' for --distances" "$dir/e1.out" || fail "--distances 4"
"$qlink" qec --wire --distances 3,5 >"$dir/e2.out" 2>&1
[ $? -eq 2 ] && grep -q "one --distance and one --p" "$dir/e2.out" || fail "--wire with two points"
printf 'device: soft+shm://x\nplugins:\n  - path: %s\n    config: "id=0 d=4"\n' "$plugin" \
	>"$dir/badcfg.yaml"
"$qlinkd" --check-config "$dir/badcfg.yaml" --load-plugins >"$dir/e3.out" 2>&1 && fail "bad plugin config accepted"
grep -q "d: an odd integer 3..15" "$dir/e3.out" || fail "bad plugin config: message"
echo "PASS: qlink qec offline, --wire (own daemon, qlinkd with two decoders), refusals"
