#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The generated-code example (examples/endpoints): its server and client in
# two processes on soft+shm; the client checks every answer.
#
#   tests/endpoint_example.sh SERVER CLIENT [DEVICE]
set -u
srv=$1 cli=$2 dev=${3:-soft+shm://epex}
dir=$(mktemp -d)
"$srv" "$dev" "unix:$dir/s" >"$dir/srv.out" 2>&1 &
sp=$!
trap 'kill $sp 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q listening "$dir/srv.out" && break; sleep 0.05; done
timeout 30 "$cli" "$dev" "unix:$dir/s" || { echo "FAIL: client"; cat "$dir/srv.out"; exit 1; }
kill -TERM $sp
wait $sp || { echo "FAIL: server exit"; cat "$dir/srv.out"; exit 1; }
grep -q "41943040 bytes written, 3 reads" "$dir/srv.out" || { echo "FAIL: server counts"; cat "$dir/srv.out"; exit 1; }
echo "PASS: generated example server and client"
