#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd warns when its control plane answers beyond loopback without a
# shared secret (issue 25): `--check-config` prints the warning (and still
# passes the file), and qlinkd logs it at start; a loopback address, a
# loopback-only allowlist, the soft+shm rule (127.0.0.0/8 without a secret)
# or a secret file silence it.
#
#   tests/qlinkd_exposed.sh QLINKD
set -uo pipefail
qlinkd=$1
. "$(dirname "$0")/qlinkd_lib.sh"

warning="warning: the control plane listens on 0.0.0.0 port $port beyond loopback without control.secret_file"
printf 's3cret-for-the-test\n' >"$dir/secret"
chmod 600 "$dir/secret"
conf() { # name, control keys (flow mapping body)
	printf 'device: soft://loop\ncontrol: { port: %s%s }\n' "$port" "$2" >"$dir/$1.yaml"
}
conf open ""
conf allow ", allow: [10.0.0.0/8]"
conf lo ", address: 127.0.0.1"
conf lo_allow ", allow: [127.0.0.1/32, 127.0.0.0/8]"
conf secret ", secret_file: secret"
printf 'device: soft+shm://qlexp%s\ncontrol: { port: %s }\n' "$$" "$port" >"$dir/shm.yaml"

for f in open allow; do
	"$qlinkd" --check-config "$dir/$f.yaml" >"$dir/$f.out" 2>"$dir/$f.err" ||
		fail "check-config $f: exit status $? (a warning is not an error)"
	grep -qF "$dir/$f.yaml: $warning" "$dir/$f.err" || fail "check-config $f: no warning"
	grep -qF "$dir/$f.yaml: OK" "$dir/$f.out" || fail "check-config $f: not OK"
done
grep -qF "reaches it from control.allow" "$dir/allow.err" || fail "check-config allow: the warning does not name control.allow"
for f in lo lo_allow secret shm; do
	"$qlinkd" --check-config "$dir/$f.yaml" >"$dir/$f.out" 2>"$dir/$f.err" || fail "check-config $f: exit status $?"
	grep -q "warning" "$dir/$f.err" && fail "check-config $f: warns though held to loopback or authenticated"
done

# at start: logged once, at warn level, before serving
ql_start_qlinkd serving --config "$dir/open.yaml"
grep "warn" "$dir/qlinkd.err" | grep "beyond loopback without a secret" | grep -q "address=0.0.0.0 port=$port" ||
	fail "start: no warning logged"
ql_stop_qlinkd TERM "open"
ql_start_qlinkd serving --config "$dir/secret.yaml"
grep -q "beyond loopback" "$dir/qlinkd.err" && fail "start with a secret: warned"
ql_stop_qlinkd TERM "secret"
echo "PASS: the control plane beyond loopback without a secret is warned of (check and start), and only then"
