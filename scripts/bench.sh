#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench.sh: build qlink optimized and run `qlink bench` (the RPC main job).
#
#   scripts/bench.sh [QLINK-BENCH-ARGS...]
#
# By default the paced phase runs 1 MHz for 10 s (sustained load), and the
# report says whether the seed's p99 < 10 us held in that run or was
# MISSED. Arguments go to build-release/tools/qlink bench after that default,
# so they override it (e.g. --paced-seconds 1, --json; try --help). Build
# output goes to stderr, so stdout carries only results.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
. scripts/deps.sh
ql_deps build
# ucx-utils and sockperf are only peers to compare against: run without them if need be.
if ! ql_deps bench; then
	echo "bench.sh: ucx-utils and sockperf are optional; continuing without the peers" >&2
fi

cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DQLINK_BUILD_TESTS=OFF >&2
cmake --build build-release -j"$(nproc 2>/dev/null || echo 2)" >&2
bin=build-release/tools/qlink
if [ ! -x "$bin" ]; then
	echo "bench.sh: $bin was not built (see tools/CMakeLists.txt)" >&2
	exit 1
fi
exec "$bin" bench --rate 1000000 --paced-seconds 10 "$@"
