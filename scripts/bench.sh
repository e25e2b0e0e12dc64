#!/usr/bin/env bash
# bench.sh: build qlink optimized and run the verbs benchmark.
#
#   scripts/bench.sh [BENCHMARK-ARGS...]
#
# Arguments go to build-release/bench/qlink-bench-verbs unchanged (try
# --help). Build output goes to stderr, so stdout carries only results.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
. scripts/deps.sh
ql_deps build
# ucx-utils is only a peer to compare against: run without it if need be.
if ! ql_deps bench; then
	echo "bench.sh: ucx-utils is optional; continuing without the UCX peer" >&2
fi

cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DQLINK_BUILD_TESTS=OFF >&2
cmake --build build-release -j"$(nproc 2>/dev/null || echo 2)" >&2
bin=build-release/tools/qlink
if [ ! -x "$bin" ]; then
	echo "bench.sh: $bin was not built (see tools/CMakeLists.txt)" >&2
	exit 1
fi
exec "$bin" bench "$@"
