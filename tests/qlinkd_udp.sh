#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd offers CUDA-Q Realtime's UDP transport (`udp:` listeners): two
# listeners made at start, 127.0.0.1 (bad requests dropped, the default) and
# [::1] (bad_requests: answer), served by qlinkd's dispatchers with the
# built-ins (rpc_increment, qlink_parity) and a plugin's frame handler. A
# CUDA-Q-style caller (ql-udp-rpc) gets CUDA-Q's answer bytes, thousands of
# checked calls, no reply to refused requests under drop and their statuses
# under answer, no stall after a drop, and no reply to oversize datagrams,
# which qlinkd warns about once per listener; the counters (SIGUSR1) show the
# UDP sessions like the others; SIGTERM is clean. Then: check-config refuses
# bad listeners with their lines, and a second qlinkd on a taken port exits 1
# naming the listener; builtins: [qlink_parity] serves no rpc_increment.
set -u
qlinkd=$1 rpc=$2 plugin=$3 v2plugin=$4
. "$(dirname "$0")/qlinkd_lib.sh"
uport=$((port + 1))

cat >"$dir/udp.yaml" <<YAML
device: soft+shm://qludp-$$
control:
  address: 127.0.0.1
  port: $port
dispatcher:
  cpu: -1
max_sessions: 4
plugins:
  - path: $plugin
udp:
  - listen: "127.0.0.1:$uport"
    slots: 8
    slot_size: 256
  - listen: "[::1]:0"
    slots: 4
    slot_size: 128
    bad_requests: answer
YAML
"$qlinkd" --check-config "$dir/udp.yaml" >"$dir/check.out" 2>&1 || fail "check-config refused udp"
grep -q "udp.yaml: OK" "$dir/check.out" || fail "check-config said no OK"

ql_start_qlinkd "qlinkd serving" --config "$dir/udp.yaml"
grep -q "udp listening session=[0-9]* listen=127.0.0.1:$uport port=$uport slots=8 slot_size=256 bad_requests=drop" \
	"$dir/qlinkd.err" || fail "no IPv4 listener line"
p6=$(sed -n 's/.*udp listening session=[0-9]* listen=\[::1\]:\([0-9]*\) .*bad_requests=answer.*/\1/p' "$dir/qlinkd.err")
[ -n "$p6" ] && [ "$p6" -ne 0 ] || fail "no IPv6 listener line (ephemeral port resolved)"

timeout 60 "$rpc" --plugin 127.0.0.1 "$uport" 256 2000 >"$dir/rpc4.out" 2>&1 || fail "IPv4 caller"
grep -q "udp-rpc: ok 127.0.0.1:$uport stride 256 policy drop" "$dir/rpc4.out" || fail "IPv4 report"
timeout 60 "$rpc" --answer ::1 "$p6" 128 500 >"$dir/rpc6.out" 2>&1 || fail "IPv6 caller"
grep -q "udp-rpc: ok ::1:$p6 stride 128 policy answer" "$dir/rpc6.out" || fail "IPv6 report"

# one warning per listener for its oversize datagrams (two each), from the
# control thread within its 200 ms tick
for _ in $(seq 50); do
	[ "$(grep -c 'dropping datagrams longer than the slot stride' "$dir/qlinkd.err")" -ge 2 ] && break
	sleep 0.1
done
[ "$(grep -c 'dropping datagrams longer than the slot stride' "$dir/qlinkd.err")" -eq 2 ] ||
	fail "not one oversize warning per listener"
grep -q "dropping datagrams longer .* listen=127.0.0.1:$uport bytes=257 slot_size=256" \
	"$dir/qlinkd.err" || fail "the IPv4 warning names the listener and the size"

# the counters, as for any session
kill -USR1 $srv
for _ in $(seq 50); do grep -q "counters udp session" "$dir/qlinkd.out" && break; sleep 0.1; done
grep -q "udp session=[0-9]* listen=127.0.0.1:$uport datagrams=[0-9]* oversize=2 " "$dir/qlinkd.out" ||
	fail "IPv4 udp counters"
grep -q "udp session=[0-9]* listen=\[::1\]:$p6 datagrams=[0-9]* oversize=2 " "$dir/qlinkd.out" ||
	fail "IPv6 udp counters"
# 1 golden + 2000 + 501 + 2 good ones = 2504 rpc_increment calls on the IPv4 listener
grep -q "function session=[0-9]* function=rpc_increment id=0x191b6322 calls=2504 errors=0 " "$dir/qlinkd.out" ||
	fail "rpc_increment counters"
grep -q "function session=[0-9]* function=reverse_bytes id=0x[0-9a-f]* calls=1 errors=0 " "$dir/qlinkd.out" ||
	fail "the plugin's frame handler was not counted"
# dropped requests under drop: not answered; under answer: answered with their status
grep -Eq "session session=[0-9]+ running=1 requests=[0-9]+ responses=[0-9]+ ok=[0-9]+ handler_errors=0 protocol_errors=2 dropped=2 " \
	"$dir/qlinkd.out" || fail "the drop listener's counters"
ql_stop_qlinkd TERM "udp"

# bad listeners: every problem with its line
cat >"$dir/bad.yaml" <<YAML
device: soft+shm://qludp-bad-$$
control: { address: 127.0.0.1, port: $port }
udp:
  - listen: "::1:5000"
  - listen: "127.0.0.1:70000"
  - listen: "localhost:5000"
    slot_size: 16
  - listen: "127.0.0.1:$port"
  - listen: "0.0.0.0:6000"
  - listen: "127.0.0.1:6000"
    bad_requests: maybe
  - listen: "6001"
    allow: ["127.0.0.1/33", "10.0.0.0/8"]
YAML
"$qlinkd" --check-config "$dir/bad.yaml" >"$dir/bad.out" 2>&1 && fail "check-config took bad listeners"
for want in "bad.yaml:4: udp\[0\].listen: '::1:5000': an IPv6 address needs brackets" \
	"bad.yaml:5: udp\[1\].listen: '127.0.0.1:70000': the port is not 0..65535" \
	"bad.yaml:6: udp\[2\].listen: 'localhost:5000': not an IPv4 address" \
	"bad.yaml:7: udp.2.slot_size: 16 is out of range" \
	"bad.yaml:8: udp\[3\]: 127.0.0.1 port $port is the control plane's" \
	"bad.yaml:10: udp\[5\]: listens where udp\[4\] does" \
	"bad.yaml:11: udp\[5\].bad_requests: 'maybe' is not one of drop, answer" \
	"bad.yaml:13: udp\[6\].allow\[0\]: '127.0.0.1/33' is not an address or CIDR"; do
	grep -q "$want" "$dir/bad.out" || fail "check-config: no '$want'"
done

# a plugin that keeps state per session (ABI 2, no flags) with a udp
# listener, which every sender shares: refused, naming both (issue 22, item 4);
# the flags are read from the loaded plugin, so the check loads it
cat >"$dir/shared.yaml" <<YAML
device: soft+shm://qludp-sh-$$
control: { address: 127.0.0.1, port: $port }
plugins:
  - path: $v2plugin
udp:
  - listen: "$uport"
YAML
"$qlinkd" --check-config "$dir/shared.yaml" --load-plugins >"$dir/shared.out" 2>&1 && fail "check-config took a per-session plugin with udp"
grep -q "shared.yaml:4: plugins\[0\]: plugin 'bad_abi' keeps state per session .*udp\[0\] (line 6) is a listener shared by every sender" \
	"$dir/shared.out" || fail "the per-session plugin refusal does not say why"
timeout 20 "$qlinkd" --config "$dir/shared.yaml" >"$dir/shared.run" 2>&1 && fail "qlinkd ran a per-session plugin with udp"

# the allowlist (default loopback) and a bare port (loopback): a listener
# allowing 10.0.0.0/8 only drops a loopback caller's request, unanswered
cat >"$dir/allow.yaml" <<YAML
device: soft+shm://qludp-al-$$
control: { address: 127.0.0.1, port: $port }
udp:
  - listen: "$uport"
    allow: ["10.0.0.0/8"]
YAML
ql_start_qlinkd "qlinkd serving" --config "$dir/allow.yaml"
grep -q "udp listening session=[0-9]* listen=127.0.0.1:$uport " "$dir/qlinkd.err" ||
	fail "a bare port does not listen on loopback"
timeout 10 "$rpc" 127.0.0.1 "$uport" 256 1 >"$dir/rpcal.out" 2>&1 && fail "a source outside the allowlist was answered"
kill -USR1 $srv
for _ in $(seq 50); do grep -q "counters udp session" "$dir/qlinkd.out" && break; sleep 0.1; done
grep -Eq "udp session=[0-9]+ listen=127.0.0.1:$uport datagrams=([1-9][0-9]*) .* not_allowed=[1-9]" "$dir/qlinkd.out" ||
	fail "not_allowed not counted"
ql_stop_qlinkd TERM "udp, allowlist"

# a port already taken: qlinkd names the listener and exits 1
ql_start_qlinkd "qlinkd serving" --config "$dir/udp.yaml"
sed -e "s/qludp-$$/qludp2-$$/" -e "s/port: $port/port: $((port + 2))/" "$dir/udp.yaml" >"$dir/taken.yaml"
timeout 20 "$qlinkd" --config "$dir/taken.yaml" >"$dir/taken.out" 2>"$dir/taken.err"
rc=$?
[ $rc -eq 1 ] || fail "a taken UDP port: exit $rc, not 1"
grep -q "taken.yaml:11: udp 127.0.0.1 port $uport: " "$dir/taken.err" || fail "the taken port is not named"
ql_stop_qlinkd TERM "udp, second run"
# builtins: only what it lists is served
sed -e "s/qludp-$$/qludp3-$$/" -e 's/^max_sessions: 4$/max_sessions: 4\nbuiltins: [qlink_parity]/' \
	"$dir/udp.yaml" >"$dir/builtins.yaml"
ql_start_qlinkd "qlinkd serving" --config "$dir/builtins.yaml"
kill -USR1 $srv
for _ in $(seq 50); do grep -q "counters qlinkd" "$dir/qlinkd.out" && break; sleep 0.1; done
grep -q "function=qlink_parity " "$dir/qlinkd.out" || fail "builtins: qlink_parity not served"
grep -q "function=rpc_increment " "$dir/qlinkd.out" && fail "builtins: rpc_increment served though not listed"
ql_stop_qlinkd TERM "udp, builtins"
echo "qlinkd_udp: ok"
