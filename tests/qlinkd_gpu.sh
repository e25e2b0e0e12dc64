#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd with `datapath: gpu` (docs/gpu.md): each ring session served by a
# GPU dispatcher, here its host emulation (gpu.mode: emulate) on the soft
# NIC's mlx5 engine: `qlink vppu` over the params-file rendezvous gets every
# qlink_parity call answered, SIGUSR1 prints the GPU dispatcher's counters,
# SIGTERM exits 0; with transport: hsb each hsb session is served by the
# dispatcher's hsb path the same way; what the GPU datapath cannot serve is
# refused with its line (boards, UC, rpc_increment, plugins).
set -u
qlinkd=$1 qlink=$2
. "$(dirname "$0")/qlinkd_lib.sh"

cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlinkd-gpu-$$
control:
  port: $port
dispatcher:
  cpu: -1
ring:
  slots: 32
  slot_size: 128
datapath: gpu
gpu:
  mode: emulate
YAML
"$qlinkd" --check-config "$dir/qlinkd.yaml" >"$dir/check.out" 2>&1 || fail "check-config of a good file"

"$qlinkd" --config "$dir/qlinkd.yaml" --params-file "$dir/p" --timeout 20 \
	>"$dir/qlinkd.out" 2>"$dir/qlinkd.err" &
srv=$!
timeout 60 "$qlink" vppu --params-file "$dir/p" --cpu -1 --count 2000 --window 4 \
	--timeout 20 >"$dir/vppu.out" 2>&1 || fail "vppu exited $?"
grep -q "calls 2000 answered 2000 ok 2000 wrong 0" "$dir/vppu.out" || fail "vppu report"
grep -q "gpu dispatcher.*mode=emulate" "$dir/qlinkd.err" || fail "gpu dispatcher not logged"
kill -USR1 $srv
for _ in $(seq 50); do grep -q "requests=2000" "$dir/qlinkd.out" && break; sleep 0.1; done
grep -q "datapath=gpu mode=emulate running=1 requests=2000 responses=2000 ok=2000" \
	"$dir/qlinkd.out" || fail "SIGUSR1 counters"
ql_stop_qlinkd TERM SIGTERM

# transport: hsb: each hsb session served by the GPU dispatcher's hsb path
# (docs/gpu.md "The hsb transport"); its refusal counters on SIGUSR1
cat >"$dir/hsb.yaml" <<YAML
device: soft+shm://qlinkd-gpuh-$$
control:
  port: $port
dispatcher:
  cpu: -1
transport: hsb
hsb:
  pages: 32
  page_size: 256
  resp_size: 128
datapath: gpu
gpu:
  mode: emulate
YAML
"$qlinkd" --check-config "$dir/hsb.yaml" >"$dir/check.out" 2>&1 || fail "check-config of gpu+hsb"
"$qlinkd" --config "$dir/hsb.yaml" --params-file "$dir/ph" --timeout 20 \
	>"$dir/qlinkd.out" 2>"$dir/qlinkd.err" &
srv=$!
timeout 60 "$qlink" vppu --params-file "$dir/ph" --transport hsb --cpu -1 --count 2000 \
	--window 4 --uri "soft+shm://qlinkd-gpuhv-$$" --timeout 20 >"$dir/vppu.out" 2>&1 ||
	fail "vppu --transport hsb exited $?"
grep -q "calls 2000 answered 2000 ok 2000 wrong 0" "$dir/vppu.out" || fail "hsb vppu report"
grep -q "gpu dispatcher.*mode=emulate transport=hsb" "$dir/qlinkd.err" ||
	fail "hsb gpu dispatcher not logged"
kill -USR1 $srv
for _ in $(seq 50); do grep -q "requests=2000" "$dir/qlinkd.out" && break; sleep 0.1; done
# the VPPU has gone: the UC QP may have failed (receive errors, the body
# stopped: "peer gone?"), nothing else refused
grep -Eq "datapath=gpu mode=emulate running=[01] requests=2000 responses=2000 ok=2000" \
	"$dir/qlinkd.out" || fail "hsb SIGUSR1 counters"
grep -Eq "session=0 datapath=gpu frames=20[0-9][0-9] refused=([0-9]+) bad_imm=0 bad_len=0 not_imm=0 recv_errors=\1 dropped=0" \
	"$dir/qlinkd.out" || fail "hsb SIGUSR1 refusal counters"
ql_stop_qlinkd TERM "SIGTERM (hsb)"

# what datapath: gpu cannot serve, each reported with its line
bad() { # name, expected message, yaml
	printf '%s\n' "$3" >"$dir/bad.yaml"
	"$qlinkd" --check-config "$dir/bad.yaml" >"$dir/bad.out" 2>&1 && fail "$1: accepted"
	grep -q -- "$2" "$dir/bad.out" || fail "$1: message"
}
bad "qcs" "bad.yaml:1: datapath: gpu serves the QCSs' ring or hsb sessions only" \
	"$(printf 'datapath: gpu\ntransport: hsb\nqcs:\n  - kind: hsb\n    address: 127.0.0.1')"
bad "uc" "datapath: gpu serves the ring over RC only" \
	"$(printf 'datapath: gpu\nring:\n  qp: uc')"
bad "increment" "bad.yaml:2: builtins: rpc_increment has no GPU build" \
	"$(printf 'datapath: gpu\nbuiltins: [qlink_parity, rpc_increment]')"
bad "mode" "bad.yaml:3: gpu.mode: 'fast' is not one of auto, device, emulate" \
	"$(printf 'datapath: gpu\ngpu:\n  mode: fast')"
bad "datapath" "bad.yaml:1: datapath: 'fpga' is not one of cpu, gpu" "datapath: fpga"
echo "PASS: qlinkd datapath gpu (emulated) serves ring and hsb and counts; unservable configs refused"
