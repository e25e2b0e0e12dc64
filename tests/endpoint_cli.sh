#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlink ep serve / qlink ep call across processes on soft+shm (or the device
# given as $2): the seed's endpoints file served as mailboxes, every type
# through the CLI (send then receive, write then read, --file and --out),
# a repeated call (--repeat), the errors (unknown path, wrong type, oversize)
# with a non-zero exit while the server keeps serving, a bad endpoints file
# refused with its line, and a clean exit with counters on SIGTERM.
#
#   tests/endpoint_cli.sh QLINK [DEVICE | udp] [SOURCE-DIR]
#
# udp: the server on soft+udp://127.0.0.1:PORT and the calls on
# soft+udp://127.0.0.2:PORT (RoCEv2 over loopback, a random PORT).
set -u
qlink=$1
dev=${2:-soft+shm://epcli}
src=${3:-$(dirname "$0")/..}
cdev=$dev
if [ "$dev" = udp ]; then
	port=$((20000 + RANDOM % 20000))
	dev=soft+udp://127.0.0.1:$port
	cdev=soft+udp://127.0.0.2:$port
fi
dir=$(mktemp -d)
sp=
cleanup() {
	[ -n "$sp" ] && kill "$sp" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "== server"; cat "$dir/serve.out"; exit 1; }

"$qlink" ep serve "$src/examples/endpoints/endpoints.yaml" --device "$dev" \
	--listen "unix:$dir/s" --verbose >"$dir/serve.out" 2>&1 &
sp=$!
for _ in $(seq 100); do grep -q "listening on" "$dir/serve.out" && break; sleep 0.05; done
grep -q "4 endpoints on $dev, listening on unix:$dir/s" "$dir/serve.out" || fail "server start"
call() { timeout 20 "$qlink" ep call --device "$cdev" --connect "unix:$dir/s" "$@"; }

# send, then receive what was sent (the mailbox)
call --type send /rdma/ep0 --data "hello endpoint" || fail "send"
[ "$(call --type receive /rdma/ep0)" = "hello endpoint" ] || fail "receive"
# write from a file, read into a file
head -c 100000 /dev/urandom >"$dir/in"
call /rdma/ep1 --file "$dir/in" || fail "write"
call /rdma/ep1 --len 100000 --out "$dir/back" || fail "read"
cmp "$dir/in" "$dir/back" || fail "read back differs"
# the read's default length is the endpoint's size
call /rdma/ep1 --out "$dir/full" || fail "read, default length"
[ "$(stat -c %s "$dir/full")" = 4194304 ] || fail "default length"
# repeated, timed
call /rdma/ep1 --data x --repeat 1000 2>"$dir/rep" || { cat "$dir/rep"; fail "repeat"; }
grep -q "write /rdma/ep1 1 bytes x 1000: median" "$dir/rep" || fail "repeat output"

# errors: exit 1 with the reason; the server goes on
call /rdma/nope --len 1 2>"$dir/e1" && fail "unknown path accepted"
grep -q "no endpoint /rdma/nope" "$dir/e1" || fail "unknown path message"
call --type write /rdma/ep0 --data x 2>"$dir/e2" && fail "wrong type accepted"
grep -q "not of type write" "$dir/e2" || fail "wrong type message"
head -c 5000 /dev/zero >"$dir/big"
call --type send /rdma/ep0 --file "$dir/big" 2>"$dir/e3" && fail "oversize accepted"
grep -q "do not fit" "$dir/e3" || fail "oversize message"
call --type send /rdma/ep0 --data again || fail "send after errors"
[ "$(call --type receive /rdma/ep0)" = "again" ] || fail "receive after errors"
# usage errors
call --type read /rdma/ep1 --data x 2>/dev/null && fail "read with --data accepted"
call 2>/dev/null && fail "no path accepted"

# a bad endpoints file: refused with its line
printf 'version: 1\nendpoints:\n  - path: /a\n    type: wirte\n    buffer:\n      size: 8\n' >"$dir/bad.yaml"
"$qlink" ep serve "$dir/bad.yaml" --device "$dev" --listen "unix:$dir/b" 2>"$dir/bad.out" &&
	fail "bad file accepted"
grep -q "bad.yaml:4: endpoints\[0\].type 'wirte'" "$dir/bad.out" || { cat "$dir/bad.out"; fail "bad file message"; }

kill -TERM "$sp"
wait "$sp" || fail "server exit status"
sp=
grep -q "connections, .* requests (3 refused)" "$dir/serve.out" || fail "counters"
grep -q "0 violations" "$dir/serve.out" || fail "violations"
grep -q "send /rdma/ep0 14 bytes" "$dir/serve.out" || fail "verbose"
echo "PASS: qlink ep serve/call, every type, errors, bad file"
