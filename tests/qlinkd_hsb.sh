#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd with `transport: hsb`: `qlink vppu --connect --transport hsb` through
# the UDP/JSON control plane (CONNECTION_PARAMS carries the page geometry),
# `qlink bench --connect --transport hsb`, and over the params-file
# rendezvous; every answer checked; a ring client is told the transport; bad
# transport keys are refused by --check-config; `qlink stat` keeps the ended
# hsb session's channel counters (bad_imm, ...).
set -u
qlinkd=$1 qlink=$2
. "$(dirname "$0")/qlinkd_lib.sh"
cat >"$dir/qlinkd.yaml" <<YAML
device: soft+shm://qlinkd-hsb-$$
control:
  address: 127.0.0.1
  port: $port
dispatcher:
  cpu: -1
transport: hsb
hsb:
  pages: 32
  page_size: 256
  resp_size: 128
max_sessions: 4
YAML
"$qlinkd" --check-config "$dir/qlinkd.yaml" >"$dir/check.out" 2>&1 || fail "check-config"
"$qlinkd" --config "$dir/qlinkd.yaml" --stats-socket "$dir/stats.sock" >"$dir/qlinkd.out" \
	2>"$dir/qlinkd.err" &
srv=$!
for _ in $(seq 100); do grep -q "listening" "$dir/qlinkd.err" && break; sleep 0.05; done
grep -q "listening" "$dir/qlinkd.err" || fail "qlinkd did not start"

timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --transport hsb --cpu -1 --count 10000 \
	--window 4 --device "soft+shm://qlinkd-hsbv-$$" >"$dir/vppu.out" 2>&1 ||
	fail "vppu --connect --transport hsb exited $?"
grep -q "calls 10000 answered 10000 ok 10000 wrong 0" "$dir/vppu.out" || fail "vppu report"
grep -q '"requests":10000,"responses":10000,"ok":10000' "$dir/vppu.out" ||
	fail "STATUS counters do not match the calls"
grep -q "transport=hsb" "$dir/qlinkd.err" || fail "qlinkd did not log an hsb session"

timeout 60 "$qlink" bench --connect "127.0.0.1:$port" --transport hsb --client-cpu -1 \
	--device "soft+shm://qlinkd-hsbb-$$" --latency-calls 5000 --rate-seconds 0.1 \
	--paced-seconds 0 --json >"$dir/bench.out" 2>&1 || fail "bench --connect exited $?"
grep -q '"lost":0,"wrong":0' "$dir/bench.out" || fail "bench --connect --transport hsb report"

# a ring client against an hsb qlinkd: told, not hung
timeout 30 "$qlink" vppu --connect "127.0.0.1:$port" --cpu -1 --count 10 \
	--device "soft+shm://qlinkd-hsbr-$$" >"$dir/ring.out" 2>&1 && fail "ring vppu against hsb"
grep -q "offers the hsb transport: use --transport hsb" "$dir/ring.out" ||
	fail "ring vppu: no transport message"
# the ended hsb session's channel counters, kept by the stats socket
timeout 20 "$qlink" stat --socket "$dir/stats.sock" --json >"$dir/stat.out" 2>&1 ||
	fail "qlink stat exited $?"
grep -q '"id":0,"kind":"hsb","state":"ended",.*"hsb":{"frames":10000,"bad_imm":0,"bad_len":0' \
	"$dir/stat.out" || fail "qlink stat: no hsb counters of the ended session"
kill -TERM $srv
wait $srv || fail "qlinkd exited $?"
# why frames were refused, per session: none here
grep -q "counters hsb session=0 frames=10000 refused=0 bad_imm=0 bad_len=0 not_imm=0 page_busy=0 recv_errors=0 resp_too_big=0" \
	"$dir/qlinkd.out" "$dir/qlinkd.err" || fail "qlinkd logged no hsb refusal counters"
srv=

# params-file rendezvous with transport: hsb
"$qlinkd" --config "$dir/qlinkd.yaml" --params-file "$dir/p" --timeout 20 \
	>"$dir/qlinkd2.out" 2>"$dir/qlinkd2.err" &
srv=$!
timeout 30 "$qlink" vppu --params-file "$dir/p" --transport hsb --cpu -1 --count 2000 \
	--device "soft+shm://qlinkd-hsbp-$$" >"$dir/vppu2.out" 2>&1 || fail "vppu --params-file exited $?"
grep -q "calls 2000 answered 2000 ok 2000 wrong 0" "$dir/vppu2.out" || fail "vppu2 report"
kill -TERM $srv
wait $srv || fail "qlinkd (params-file) exited $?"
srv=

# bad keys
printf 'transport: udp\n' >"$dir/bad1.yaml"
"$qlinkd" --check-config "$dir/bad1.yaml" >"$dir/bad1.out" 2>&1 && fail "transport: udp accepted"
grep -q "transport: 'udp' is not one of ring, hsb" "$dir/bad1.out" || fail "bad1 message"
printf 'transport: hsb\nhsb:\n  page_size: 200\n' >"$dir/bad2.yaml"
"$qlinkd" --check-config "$dir/bad2.yaml" >"$dir/bad2.out" 2>&1 && fail "page_size 200 accepted"
grep -q "multiple of 128" "$dir/bad2.out" || fail "bad2 message"
# the page geometry: a frame and the board's 128 bytes of metadata at
# page + round_up(frame, 128) must fit a page
printf 'transport: hsb\nhsb:\n  page_size: 256\n  frame_len: 256\n' >"$dir/bad5.yaml"
"$qlinkd" --check-config "$dir/bad5.yaml" >"$dir/bad5.out" 2>&1 && fail "frame_len = page_size accepted"
grep -q "bad5.yaml:4: hsb: frame length 256 needs pages of at least 384 bytes (round_up(frame, 128) + 128 of metadata), not 256: frame_len at most 128 for this page size" \
	"$dir/bad5.out" || { cat "$dir/bad5.out"; fail "bad5 message"; }
printf 'transport: hsb\nhsb:\n  page_size: 384\n  frame_len: 256\n' >"$dir/ok5.yaml"
"$qlinkd" --check-config "$dir/ok5.yaml" >"$dir/ok5.out" 2>&1 || fail "frame_len 256 in 384-byte pages refused"
printf 'bad_requests: ignore\n' >"$dir/bad3.yaml"
"$qlinkd" --check-config "$dir/bad3.yaml" >"$dir/bad3.out" 2>&1 && fail "bad_requests: ignore accepted"
# a UC ring answers every request (its resend cache pairs them): no drop
printf 'ring:\n  qp: uc\nbad_requests: drop\n' >"$dir/bad4.yaml"
"$qlinkd" --check-config "$dir/bad4.yaml" >"$dir/bad4.out" 2>&1 && fail "drop on a UC ring accepted"
grep -q "bad4.yaml:3: bad_requests: drop is not possible on a UC ring" "$dir/bad4.out" || fail "bad4 message"
printf 'ring:\n  qp: uc\nbad_requests: answer\n' >"$dir/ok4.yaml"
"$qlinkd" --check-config "$dir/ok4.yaml" >"$dir/ok4.out" 2>&1 || fail "answer on a UC ring refused"
# qcs entries are acted upon now (tests/qlinkd_hsb_board.sh): --check-config
# validates and accepts them on an hsb qlinkd
printf 'transport: hsb\nqcs:\n  - kind: hsb\n    address: 127.0.0.1\n' >"$dir/qcs.yaml"
"$qlinkd" --check-config "$dir/qcs.yaml" >"$dir/qcs.out" 2>&1 || fail "qcs refused by --check-config"
printf 'transport: hsb\nqcs:\n  - kind: fpga\n    address: 127.0.0.1\n' >"$dir/qcs2.yaml"
"$qlinkd" --check-config "$dir/qcs2.yaml" >"$dir/qcs2.out" 2>&1 && fail "qcs kind fpga accepted"
grep -q "qcs\[0\].kind: 'fpga' is not a QCS kind" "$dir/qcs2.out" || fail "qcs kind message"
echo PASS
