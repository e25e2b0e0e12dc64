#!/usr/bin/env bash
# test.sh: build qlink and run the whole test suite, then build and run it
# again with AddressSanitizer and UndefinedBehaviorSanitizer. Warnings are
# errors in both builds.
#
#   scripts/test.sh [--quick] [-- CTEST-ARGS...]
#
#   --quick   skip the sanitizer build
#   CTEST-ARGS are passed to both ctest runs (e.g. -- -R verbs)
#
# Build folders: build/ (RelWithDebInfo) and build-asan/ (Debug).
set -uo pipefail

usage() {
	sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

quick=0
ctest_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	--)
		shift
		ctest_args=("$@")
		break
		;;
	*)
		echo "test.sh: unknown argument '$1'" >&2
		usage >&2
		exit 2
		;;
	esac
	shift
done

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck source=scripts/deps.sh
. scripts/deps.sh
ql_deps test || exit 1

jobs=$(nproc 2>/dev/null || echo 2)

# run_suite NAME DIR CMAKE-ARGS...: configure, build and test one build
# folder; sets `result` to a short verdict and returns non-zero on failure.
run_suite() {
	local name=$1 dir=$2 summary
	shift 2

	echo "=== $name: configure $dir"
	if ! cmake -S . -B "$dir" "$@"; then
		result="FAILED (configure)"
		return 1
	fi
	echo "=== $name: build"
	if ! cmake --build "$dir" -j"$jobs"; then
		result="FAILED (build)"
		return 1
	fi
	echo "=== $name: test"
	ctest --test-dir "$dir" --output-on-failure --no-tests=error -j2 "${ctest_args[@]}" |
		tee "$dir/ctest.log"
	local rc=${PIPESTATUS[0]}
	summary=$(grep -Eo '[0-9]+ tests failed out of [0-9]+' "$dir/ctest.log" | tail -n 1)
	if [ "$rc" -ne 0 ]; then
		result="FAILED (${summary:-ctest exit $rc})"
		return 1
	fi
	result="passed (${summary:-no summary})"
}

status=0
result=""
run_suite "RelWithDebInfo" build -DQLINK_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo || status=1
normal=$result

if [ "$quick" -eq 1 ]; then
	asan="skipped (--quick)"
else
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	run_suite "ASan+UBSan" build-asan -DQLINK_SANITIZE=ON -DQLINK_WERROR=ON \
		-DCMAKE_BUILD_TYPE=Debug || status=1
	asan=$result
fi

echo
echo "test.sh: $([ $status -eq 0 ] && echo PASS || echo FAIL): build/ $normal; build-asan/ $asan"
exit $status
