#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd's live statistics (docs/qlinkd.md, "Live statistics"):
#   1. the stats socket (--stats-socket) is a socket of this user, mode 0600;
#      qlinkd logs the functions it serves (name, id);
#   2. after a QCS's session ended, `qlink stat --json` still shows it with
#      its counters (state ended, requests, the function's calls), the
#      served functions that were never called (0 calls), a live UDP
#      listener's channel counters, the device's and the dispatcher's;
#      the text form names the same;
#   3. --prometheus parses as the text exposition format
#      (tests/prom_check.py) and holds the ended session's counters;
#   4. garbage on the socket: junk bytes, binary, an over-long request,
#      connections that hang without a word, one that asks and never reads,
#      hundreds of connect-and-close: qlinkd keeps serving its QCSs, answers
#      `qlink stat` meanwhile (a hanging client is pushed out) and after;
#   5. SIGUSR1 still prints the counters; a stale socket file left by a
#      killed qlinkd is replaced; a live one is not taken over; SIGTERM
#      removes the socket; the default place under $RUNTIME_DIRECTORY.
set -u
qlinkd=$1 qlink=$2
. "$(dirname "$0")/qlinkd_lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
here=$(dirname "$0")
sock="$dir/stats.sock"
cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlstats-$$
control:
  address: 127.0.0.1
  port: $port
dispatcher:
  cpu: -1
udp:
  - listen: "127.0.0.1:0"
    slots: 4
    slot_size: 256
log:
  level: info
YAML
qstat() { timeout 20 "$qlink" stat --socket "$sock" "$@"; }
vppu() { timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --cpu -1 --window 4 "$@"; }

ql_start_qlinkd "qlinkd serving" --config "$dir/qlinkd.yaml" --stats-socket "$sock"
# ---- 1. the socket, the functions served ---------------------------------------------
[ -S "$sock" ] || fail "no stats socket at $sock"
[ "$(stat -c '%a %u' "$sock")" = "600 $(id -u)" ] ||
	fail "stats socket mode/owner: $(stat -c '%a %u' "$sock")"
grep -q "qlinkd serves function=qlink_parity id=0x90aa3e50" "$dir/qlinkd.err" ||
	fail "qlink_parity not listed at start"
grep -q "qlinkd serves function=rpc_increment id=0x191b6322" "$dir/qlinkd.err" ||
	fail "rpc_increment not listed at start"

# ---- 2. counters after the session ended ---------------------------------------------
vppu --count 300 >"$dir/vppu.out" 2>&1 || fail "vppu exited $?"
for _ in $(seq 100); do grep -q "session destroyed session=" "$dir/qlinkd.err" && break; sleep 0.05; done
qstat --json >"$dir/stat.json" 2>"$dir/stat.err" || fail "qlink stat --json exited $?"
python3 - "$dir/stat.json" >"$dir/json-check.out" 2>&1 <<'PY' || fail "stat json: $(cat "$dir/json-check.out")"
import json, sys
s = json.load(open(sys.argv[1]))
ended = [x for x in s["sessions"] if x["kind"] == "ring"]
assert ended and ended[0]["state"] == "ended", "the QCS's session not kept: %r" % s["sessions"]
e = ended[0]
assert e["requests"] == 300 and e["ok"] == 300 and e["qcs"] == "vppu", e
assert e["latency_ns"]["count"] == 300, e["latency_ns"]
fn = {f["name"]: f for f in s["functions"]}
assert fn["qlink_parity"]["calls"] == 300 and fn["qlink_parity"]["id"] == 0x90aa3e50, fn
assert fn["rpc_increment"]["calls"] == 0, fn  # served, never called
assert s["sessions_ended"] == 1 and s["totals"]["requests"] == 300, s["totals"]
assert set(e["refused"]) >= {"unknown_function", "bad_magic"} and "rnr" in e["dropped"], e
udp = [x for x in s["sessions"] if x["kind"] == "udp"]
assert udp and udp[0]["state"] == "running" and "datagrams" in udp[0]["udp"], udp
assert "rc_nak_rnr" in s["device_counters"] and s["dispatchers"][0]["counters"]["requests"] >= 300
assert s["latency_ns"]["count"] == 300 and s["latency_ns"]["below"][-1]["count"] == 300
PY
qstat >"$dir/stat.txt" 2>&1 || fail "qlink stat exited $?"
grep -Eq '^ +[0-9]+ ring ended .* vppu +300 +300 +300 ' "$dir/stat.txt" || fail "text: no ended session row"
grep -Eq '^qlink_parity +0x90aa3e50 +300 ' "$dir/stat.txt" || fail "text: no function row"

# ---- 3. prometheus -----------------------------------------------------------------
qstat --prometheus >"$dir/stat.prom" 2>&1 || fail "qlink stat --prometheus exited $?"
python3 "$here/prom_check.py" <"$dir/stat.prom" >"$dir/prom-check.out" 2>&1 ||
	fail "prometheus: $(cat "$dir/prom-check.out")"
grep -q '^qlinkd_session_requests_total{session="[0-9]*"} 300$' "$dir/stat.prom" ||
	fail "prometheus: no ended session's requests"
grep -q '^qlinkd_function_calls_total{function="qlink_parity",id="0x90aa3e50"} 300$' \
	"$dir/stat.prom" || fail "prometheus: no function calls"

# ---- 4. garbage ----------------------------------------------------------------------
vppu --seconds 4 >"$dir/during.out" 2>&1 &
vp=$!
python3 - "$sock" >"$dir/attack.out" 2>&1 <<'PY' &
import os, socket, sys, time
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
hang = [conn() for _ in range(20)]           # connect and say nothing
for i in range(50):                          # junk and binary, then close
    s = conn()
    try:
        s.sendall(os.urandom(1 + i * 97) if i % 2 else b"GET / HTTP/1.0\r\n\r\n" * (i + 1))
    except OSError:
        pass
    s.close()
s = conn()                                   # an over-long request: refused
s.sendall(b"j" * 200)
s.settimeout(5)
r = b""
while True:
    try:
        d = s.recv(4096)
    except ConnectionResetError:  # closed with our unread bytes: after the reply
        break
    if not d:
        break
    r += d
assert r.startswith(b"error: unknown request"), r
slow = conn()                                # asks, never reads, tiny buffer
slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
slow.sendall(b"json\n")
for _ in range(300):                         # connect and close, fast
    conn().close()
time.sleep(1.5)
hang += [conn() for _ in range(20)]
print("attack done")
time.sleep(2)
PY
atk=$!
sleep 0.5
qstat --json >"$dir/during.json" 2>&1 || fail "qlink stat during the attack exited $?"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/during.json" ||
	fail "qlink stat during the attack: not JSON"
wait $atk || fail "attack script: $(cat "$dir/attack.out")"
wait $vp || fail "the QCS's run during the attack exited $?"
grep -q "wrong 0 handler_errors 0 protocol_errors 0 timeouts 0 late 0 lost 0" "$dir/during.out" ||
	fail "calls lost during the attack"
kill -0 $srv || fail "qlinkd died"
qstat --json >"$dir/after.json" 2>&1 || fail "qlink stat after the attack exited $?"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["sessions_ended"] == 2' \
	"$dir/after.json" || fail "after the attack: $(head -c 300 "$dir/after.json")"

# ---- 5. SIGUSR1, a live socket, a stale one, the end -------------------------------------
kill -USR1 $srv
for _ in $(seq 100); do grep -q "counters control" "$dir/qlinkd.out" && break; sleep 0.05; done
grep -q "counters control" "$dir/qlinkd.out" || fail "SIGUSR1: no counters"
"$qlinkd" --config "$dir/qlinkd.yaml" --stats-socket "$sock" >"$dir/second.out" 2>&1 &&
	fail "a second qlinkd took a live stats socket"
grep -q "another qlinkd serves it" "$dir/second.out" || fail "second qlinkd: no reason"
qstat --json >/dev/null 2>&1 || fail "the first qlinkd lost its socket"
ql_stop_qlinkd TERM stats
[ -e "$sock" ] && fail "socket left after SIGTERM"
ql_start_qlinkd "qlinkd serving" --config "$dir/qlinkd.yaml" --stats-socket "$sock"
kill -9 $srv
wait $srv 2>/dev/null
srv=
[ -S "$sock" ] || fail "no stale socket left by kill -9 (test setup)"
ql_start_qlinkd "qlinkd serving" --config "$dir/qlinkd.yaml" --stats-socket "$sock"
qstat >/dev/null 2>&1 || fail "stale socket not replaced"
ql_stop_qlinkd TERM stale
# the default place under systemd's RuntimeDirectory=, found by qlink stat alike
mkdir -p "$dir/rt"
RUNTIME_DIRECTORY="$dir/rt" ql_start_qlinkd "qlinkd serving" --config "$dir/qlinkd.yaml"
[ -S "$dir/rt/qlinkd-stats.sock" ] || fail "no socket at \$RUNTIME_DIRECTORY/qlinkd-stats.sock"
RUNTIME_DIRECTORY="$dir/rt" timeout 20 "$qlink" stat --json >/dev/null 2>&1 ||
	fail "qlink stat did not find the default socket"
ql_stop_qlinkd TERM runtime-dir
# a bad request of `qlink stat` itself is a usage error
"$qlink" stat --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "qlink stat --bogus did not exit 2"
echo "PASS: qlinkd stats socket (counters kept, prometheus, 0600, garbage)"
