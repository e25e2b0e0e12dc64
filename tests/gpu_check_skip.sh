#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/gpu-check.sh on a machine without a GPU: exits 0 at once with its
# "no GPU: skipped" line, on stdout and in the report file, and builds
# nothing. 77 (skipped) where there is a GPU: there the script is the
# device check itself, run by hand (docs/gpu.md).
set -u
src=$1
if command -v nvidia-smi >/dev/null 2>&1 || [ -e /dev/nvidia0 ]; then
	echo "SKIP: this machine has a GPU (run scripts/gpu-check.sh itself)"
	exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
t0=$(date +%s)
OUT=$out/o "$src/scripts/gpu-check.sh" >"$out/stdout" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out/stdout"; echo "FAIL: exit $rc"; exit 1; }
grep -qx "gpu-check: no GPU: skipped (no nvidia-smi and no /dev/nvidia0)" "$out/stdout" ||
	{ cat "$out/stdout"; echo "FAIL: no skip line"; exit 1; }
grep -qx "gpu-check: no GPU: skipped (no nvidia-smi and no /dev/nvidia0)" "$out/o/gpu-check.txt" ||
	{ echo "FAIL: the report lacks the skip line"; exit 1; }
[ "$(wc -l <"$out/stdout")" -eq 1 ] || { cat "$out/stdout"; echo "FAIL: more than the skip line"; exit 1; }
[ ! -e "$src/build-gpu" ] || [ "$(stat -c %Y "$src/build-gpu")" -lt "$t0" ] ||
	{ echo "FAIL: it configured build-gpu"; exit 1; }
[ $(($(date +%s) - t0)) -lt 10 ] || { echo "FAIL: too slow for a skip"; exit 1; }
echo "PASS: gpu-check skips cleanly without a GPU"
