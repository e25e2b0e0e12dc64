#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# roce_tshark.sh: tshark (Wireshark's InfiniBand/RRoCE dissector) decodes
# every soft+udp packet without a warning, error or malformed packet.
#
#   tests/roce_tshark.sh GEN            GEN (tests/roce_pcap_gen) writes one packet
#                                       per opcode and AETH kind; every opcode
#                                       must be there, decoded
#   tests/roce_tshark.sh GEN FILE.pcap [PORT]
#                                       check a capture of a real run instead
#                                       (a soft+udp URI's ?pcap=FILE, or
#                                       tshark -i lo with CHECKSUMS=0); PORT:
#                                       its UDP port if not 4791
#
# Also recomputes each packet's ICRC from the fields tshark decoded (python3's
# zlib.crc32 over the masked pseudo-header of docs/soft-udp.md), independently
# of src/providers/sudp/roce.c, when python3 is installed.
# Exit 77 (skipped) without tshark: scripts/deps.sh test installs it.
set -euo pipefail
gen=$1
cap=${2:-}
port=${3:-4791}
if ! command -v tshark >/dev/null 2>&1; then
	echo "SKIP: tshark is not installed (scripts/deps.sh test)"
	exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export HOME=$dir XDG_CONFIG_HOME=$dir # no user profile, no preferences
want=""
if [ -z "$cap" ]; then
	cap=$dir/roce.pcap
	want=$("$gen" "$cap")
fi
# The payload heuristics are off: a payload is application bytes, which they
# would guess to be another protocol (a WRITE of 06 00 ... becomes an XNS
# datagram "EtherType encapsulated", malformed). IP and UDP checksums are
# checked in our own captures (pcap.c writes them); a live capture (tshark -i
# lo) has the kernel's offloaded, unfinished ones: CHECKSUMS=0 for those.
heur=""
for h in eth_over_ib mellanox_eoib fc_infiniband sdp_infiniband iser_infiniband lnet_ib \
	rpcrdma_infiniband smb_direct_infiniband smcr_infiniband nvme_rdma; do
	heur="$heur --disable-heuristic $h"
done
sums=${CHECKSUMS:-1}
ts() {
	# shellcheck disable=SC2086
	tshark -r "$cap" -o "infiniband.rroce.port:$port" -o "ip.check_checksum:$([ "$sums" = 1 ] && echo TRUE || echo FALSE)" \
		-o "udp.check_checksum:$([ "$sums" = 1 ] && echo TRUE || echo FALSE)" $heur "$@" 2>"$dir/stderr"
}

# 1. the expert system: nothing at all (notes, warnings, errors, malformed)
ts -q -z expert >"$dir/expert"
if grep -Eiq 'error|warn|malformed|note' "$dir/expert"; then
	echo "FAIL: tshark expert info:"
	head -40 "$dir/expert"
	exit 1
fi
ts -V >"$dir/verbose"
if grep -Eiq 'malformed|expert info|exception' "$dir/verbose"; then
	echo "FAIL: tshark -V reports:"
	grep -Ei -B20 'malformed|expert info|exception' "$dir/verbose" | head -60
	exit 1
fi

# 2. every frame is an InfiniBand packet with an opcode
ts -T fields -E separator=, -e frame.number -e infiniband.bth.opcode >"$dir/ops"
total=$(wc -l <"$dir/ops")
decoded=$(awk -F, '$2 != ""' "$dir/ops" | wc -l)
if [ "$total" -eq 0 ] || [ "$decoded" -ne "$total" ]; then
	echo "FAIL: $decoded of $total frames decoded as InfiniBand"
	exit 1
fi
if [ -n "$want" ]; then
	[ "$total" -eq "$want" ] || { echo "FAIL: $total frames, the generator wrote $want"; exit 1; }
	# RC 0..20, 22, 23; UC 32..43
	expected="0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 22 23 32 33 34 35 36 37 38 39 40 41 42 43"
	got=$(cut -d, -f2 "$dir/ops" | sort -n | uniq | tr '\n' ' ' | sed 's/ $//')
	[ "$got" = "$expected" ] || { echo "FAIL: opcodes decoded: $got"; echo "      expected:        $expected"; exit 1; }
fi

# 3. the ICRC, recomputed from what tshark decoded
if command -v python3 >/dev/null 2>&1; then
	ts -T fields -E separator=, -e ip.src -e ip.dst -e ip.id -e ipv6.src -e ipv6.dst \
		-e udp.srcport -e udp.dstport -e udp.payload >"$dir/fields"
	python3 - "$dir/fields" <<'PY'
import ipaddress, struct, sys, zlib
bad = 0
for n, line in enumerate(open(sys.argv[1]), 1):
    s4, d4, ipid, s6, d6, sp, dp, pay = line.rstrip("\n").split(",")
    pay = bytes.fromhex(pay.replace(":", ""))
    ulen = 8 + len(pay)
    if s4:
        ip = bytes([0x45, 0xff]) + struct.pack("!HHH", 20 + ulen, int(ipid, 16), 0x4000) \
            + bytes([0xff, 17, 0xff, 0xff]) + ipaddress.ip_address(s4).packed + ipaddress.ip_address(d4).packed
    else:
        ip = bytes([0x6f, 0xff, 0xff, 0xff]) + struct.pack("!HBB", ulen, 17, 0xff) \
            + ipaddress.ip_address(s6).packed + ipaddress.ip_address(d6).packed
    udp = struct.pack("!HHHH", int(sp), int(dp), ulen, 0xffff)
    body = bytearray(pay[:-4])
    body[4] = 0xff
    icrc = struct.pack("<I", zlib.crc32(b"\xff" * 8 + ip + udp + bytes(body)))
    if icrc != pay[-4:]:
        print(f"FAIL: frame {n}: ICRC {pay[-4:].hex()}, expected {icrc.hex()}")
        bad += 1
sys.exit(1 if bad else 0)
PY
	icrc="ICRC checked"
else
	icrc="ICRC not checked (no python3)"
fi
echo "PASS: $total packets decoded by tshark without expert info; $icrc"
