#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_needed.sh: a program that uses only verbs (examples/verbs_hello,
# linked to the shared libqlink) depends on no library of the control
# plane or qlinkd: no jansson, libsodium, libcyaml, libyaml or libdl, neither
# directly (readelf NEEDED) nor through libqlink (ldd).
#
#   tests/check_needed.sh PROGRAM
set -euo pipefail
prog=$1
bad='jansson|sodium|cyaml|yaml|libdl\.|qlink-control'
needed=$(readelf -d "$prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "NEEDED: $(echo "$needed" | tr '\n' ' ')"
echo "$needed" | grep -q '^libqlink\.so\.0$' || { echo "FAIL: not linked to libqlink.so.0"; exit 1; }
if echo "$needed" | grep -E "$bad"; then
	echo "FAIL: $prog needs the libraries above"
	exit 1
fi
deps=$(ldd "$prog")
if echo "$deps" | grep -E "$bad"; then
	echo "FAIL: $prog loads the libraries above (ldd)"
	exit 1
fi
echo "$deps" | grep -q 'libqlink\.so\.0 => /' || { echo "FAIL: ldd does not resolve libqlink.so.0"; exit 1; }
echo "PASS: no jansson, sodium, cyaml, yaml or libdl"
