#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu-check.sh: the device check of issue 26, for a machine with an NVIDIA
# GPU (docs/gpu.md "Not yet measured on a GPU").
#
#   scripts/gpu-check.sh [OUT-DIR]     (default: $OUT, else ./gpu-check-out)
#
# 1. skips cleanly where there is no GPU: prints "gpu-check: no GPU:
#    skipped (...)" and exits 0 (nvidia-smi sees none, or no /dev/nvidia0);
# 2. configures build-gpu/ with QLINK_CUDA=ON (nvcc from the PATH or
#    /usr/local/cuda) and builds what the check runs;
# 3. runs the GPU test set: ctest -L gpu (the persistent kernel through
#    test_gpu_dispatch/test_gpu_hsb, the emulation, qlinkd datapath: gpu)
#    and -L cuda (the RDMaxcel kernels on the GPU, tests/cuda), and
#    test_ibv_fake (GPU memory against the real driver too); -L gpu
#    includes test_soft_devmem, whose test_real_gpu moves bytes in and out
#    of cuMemAlloc memory through the soft NIC's copy-engine path;
# 4. runs `qlink bench --gpu=device` for the ring and hsb, the channel in
#    host-mapped memory and in GPU memory (--gpu-memory host|gpu), beside
#    the CPU daemon and the emulation, alternating, over soft+shm (and any
#    ibv:// device the machine has); on soft+shm "GPU memory" is the soft
#    NIC's QL_MEM_GPU, host memory mapped into the GPU (docs/gpu.md), so
#    device memory proper is measured on an ibv://mlx5 device only;
# 5. writes everything to OUT-DIR/gpu-check.txt (figures: one line per
#    bench run, "figure ..."; the JSON of each run; the tests' output) and
#    exits 0 when every step passed, 1 otherwise.
# QL_GPU_CHECK_BUILD=DIR uses a CUDA build already there (no configure or
# build step).
# It finishes within 8 minutes: each step has a timeout taken from what is
# left of QL_GPU_CHECK_BUDGET seconds (default 450), and the benches are
# skipped (said in the file) when too little is left.
set -u
export LC_ALL=C
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${OUT:-$PWD/gpu-check-out}}
budget=${QL_GPU_CHECK_BUDGET:-450}
start=$(date +%s)
mkdir -p "$out" || exit 1
rep=$out/gpu-check.txt
: >"$rep"
say() { echo "gpu-check: $*" | tee -a "$rep"; }
left() { echo $((budget - ($(date +%s) - start))); }
failed=0

# 1. a GPU?
why=
if command -v nvidia-smi >/dev/null 2>&1; then
	gpus=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
	[ "${gpus:-0}" -gt 0 ] || why="nvidia-smi lists no GPU"
elif [ ! -e /dev/nvidia0 ]; then
	why="no nvidia-smi and no /dev/nvidia0"
fi
if [ -n "$why" ]; then
	say "no GPU: skipped ($why)"
	exit 0
fi
say "GPU: $(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
say "host: $(uname -r), $(nproc) CPUs; started $(date -u +%FT%TZ)"
if [ -e /sys/module/nvidia_peermem ] || [ -e /sys/module/nv_peer_mem ]; then
	say "nvidia-peermem: loaded"
else
	say "nvidia-peermem: not loaded"
fi

# 2. build
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || {
	say "FAIL: no nvcc (PATH, /usr/local/cuda/bin)"
	exit 1
}
jobs=$(nproc)
# QL_GPU_CHECK_BUILD: an existing CUDA build directory to use as it is
b=${QL_GPU_CHECK_BUILD:-$src/build-gpu}
step() { # name, timeout, command...: runs it, output to the report
	local name=$1 t=$2 rc
	shift 2
	if [ "$(left)" -lt 20 ]; then
		say "SKIP $name: out of time"
		failed=1
		return 1
	fi
	[ "$t" -gt "$(left)" ] && t=$(left)
	echo "== $name ($*)" >>"$rep"
	timeout --kill-after=5 "$t" "$@" >>"$rep" 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		say "ok $name ($(($(date +%s) - start)) s)"
	else
		say "FAIL $name: exit $rc$([ $rc -eq 124 ] && echo " (timed out after $t s)")"
		failed=1
	fi
	return $rc
}
# the GPU's own architecture only (9.0 on an H200: sm_90), to save build
# time; the default list where nvidia-smi does not say
arch=$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
	head -1 | tr -d ' .')
case $arch in '' | *[!0-9]*) arch="80-real;90" ;; esac
say "CUDA architectures: $arch"
if [ -z "${QL_GPU_CHECK_BUILD:-}" ]; then
	cfg=(cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQLINK_CUDA=ON
		-DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch")
	# without cmocka the tests cannot build: the benches still can
	step configure 120 "${cfg[@]}" ||
		step "configure without the tests" 120 "${cfg[@]}" -DQLINK_BUILD_TESTS=OFF || exit 1
fi
# what the check runs, of what this tree has
have=$(cmake --build "$b" --target help 2>/dev/null)
targets=
for t in qlink-cli qlinkd test_gpu_body test_gpu_dispatch test_gpu_hsb test_ibv_fake \
	test_soft_devmem test_rdmaxcel rdmaxcel_write; do
	printf '%s\n' "$have" | grep -qx "\.\.\. $t" && targets="$targets $t"
done
# shellcheck disable=SC2086
[ -n "${QL_GPU_CHECK_BUILD:-}" ] || step build 240 cmake --build "$b" -j "$jobs" --target $targets || exit 1

# 3. the GPU test set
if [ -x "$b/tests/test_gpu_body" ]; then
	step "ctest -L gpu" 180 ctest --test-dir "$b" -L gpu -j4 --output-on-failure --timeout 120
	step "ctest -L cuda" 60 ctest --test-dir "$b" -L cuda --output-on-failure --timeout 50 \
		--no-tests=ignore
	step test_ibv_fake 30 "$b/tests/test_ibv_fake"
else
	say "SKIP the GPU tests: built without tests"
	failed=1
fi
[ -x "$b/examples/rdmaxcel_write" ] && step "example rdmaxcel_write" 30 "$b/examples/rdmaxcel_write"

# 4. the benches: CPU daemon, emulation, kernel with host-mapped and GPU
# memory, ring and hsb, alternating; each run's JSON in the report and its
# figures on one line
uris="soft+shm://gpuchk-$$"
# a ConnectX (mlx5: the GPU dispatcher needs mlx5 queues) as well
for d in $(timeout 10 "$b/tools/qlink" info 2>/dev/null | grep -o '^ibv://mlx5[A-Za-z0-9_]*' | sort -u); do
	uris="$uris $d"
done
bench() { # label, qlink bench arguments...
	local label=$1 j t=25
	shift
	if [ "$(left)" -lt 30 ]; then
		say "SKIP bench $label: out of time"
		failed=1
		return
	fi
	[ "$t" -gt $(($(left) - 5)) ] && t=$(($(left) - 5))
	j=$(timeout --kill-after=5 $t "$b/tools/qlink" bench --latency-calls 10000 --warmup-calls 1000 \
		--rate-seconds 0.3 --paced-seconds 0 --json "$@" 2>>"$rep")
	if [ -z "$j" ]; then
		say "FAIL bench $label ($*)"
		failed=1
		return
	fi
	echo "json $label $j" >>"$rep"
	say "figure $label: $(printf '%s' "$j" | python3 -c '
import json, sys
j = json.load(sys.stdin)
r = j["rtt_ns"]
print("p50 %.2f us p99 %.2f us rate %.3f M/s lost %d wrong %d | %s" % (r["p50"] / 1e3,
      r["p99"] / 1e3, j["rpc_per_s"] / 1e6, j["lost"], j["wrong"], j.get("server", "")))
' 2>&1)"
}
for round in 1 2; do
	for uri in $uris; do
		for tr in ring hsb; do
			bench "$tr cpu-daemon round$round $uri" --uri "$uri" --transport "$tr"
			bench "$tr emulate round$round $uri" --uri "$uri" --transport "$tr" --gpu=emulate
			bench "$tr kernel host-mapped round$round $uri" --uri "$uri" --transport "$tr" \
				--gpu=device --gpu-memory host
			bench "$tr kernel gpu-memory round$round $uri" --uri "$uri" --transport "$tr" \
				--gpu=device --gpu-memory gpu
		done
	done
done
say "done in $(($(date +%s) - start)) s: $([ $failed -eq 0 ] && echo all passed || echo FAILURES above); report $rep"
exit $failed
