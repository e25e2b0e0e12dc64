#!/usr/bin/env bash
# test.sh: build qlink and run the whole test suite, then build and run it
# again with AddressSanitizer and UndefinedBehaviorSanitizer, then run the
# verbs suite against Linux Soft-RoCE in a qemu guest (ctest -L rxe, once,
# from build/). Warnings are errors in both builds.
#
#   scripts/test.sh [--quick] [--no-rxe] [-- CTEST-ARGS...]
#
#   --quick   skip the sanitizer build
#   --no-rxe  skip the Soft-RoCE stage (also: QLINK_RXE=0)
#   CTEST-ARGS are passed to both ctest runs (e.g. -- -R verbs)
#
# Build folders: build/ (RelWithDebInfo) and build-asan/ (Debug). The
# Soft-RoCE stage (tests/rxe/run.sh) installs its Debian packages when run
# as root; where it cannot run (not root and packages missing) it says why
# and is skipped, not failed.
set -uo pipefail

usage() {
	sed -n '2,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

quick=0
rxe=${QLINK_RXE:-1}
ctest_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--no-rxe) rxe=0 ;;
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
	ctest --test-dir "$dir" --output-on-failure --no-tests=error -j2 -LE rxe "${ctest_args[@]}" |
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
built=1
case "$normal" in *configure* | *build\)*) built=0 ;; esac

if [ "$quick" -eq 1 ]; then
	asan="skipped (--quick)"
else
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	run_suite "ASan+UBSan" build-asan -DQLINK_SANITIZE=ON -DQLINK_WERROR=ON \
		-DCMAKE_BUILD_TYPE=Debug || status=1
	asan=$result
fi

# The verbs suite on Linux Soft-RoCE (rxe) in a qemu guest, from build/.
# run_rxe sets `result`; returns non-zero on failure (a skip is no failure).
run_rxe() {
	local t0 secs why rc

	echo "=== Soft-RoCE: ctest -L rxe in build/ (tests/rxe/run.sh)"
	t0=$(date +%s)
	ctest --test-dir build --verbose --no-tests=error -L rxe |
		tee build/ctest-rxe.log
	rc=${PIPESTATUS[0]}
	secs=$(($(date +%s) - t0))
	if [ "$rc" -ne 0 ]; then
		result="FAILED (${secs}s; see build/rxe/)"
		return 1
	fi
	if grep -q 'Skipped' build/ctest-rxe.log; then
		why=$(grep -o 'rxe: SKIPPED: .*' build/ctest-rxe.log | head -n 1)
		result="skipped (${why#rxe: SKIPPED: })"
		return 0
	fi
	result="passed (${secs}s)"
}

if [ "$rxe" = 0 ]; then
	rxe_result="skipped (--no-rxe)"
elif [ "$built" = 0 ]; then
	rxe_result="skipped (build/ did not build)"
else
	run_rxe || status=1
	rxe_result=$result
fi

echo
echo "test.sh: $([ $status -eq 0 ] && echo PASS || echo FAIL): build/ $normal; build-asan/ $asan;" \
	"rxe $rxe_result"
exit $status
