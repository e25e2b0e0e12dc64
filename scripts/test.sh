#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test.sh: build qlink and run the whole test suite, then build and run it
# again with AddressSanitizer and UndefinedBehaviorSanitizer, then once more
# instrumented for coverage (gcovr: line coverage of src/ printed, and the
# run fails below 80 %), then run the verbs suite against Linux Soft-RoCE in
# a qemu guest (ctest -L rxe, once, from build/). Warnings are errors in
# every build.
#
#   scripts/test.sh [--quick] [--no-coverage] [--no-rxe] [-- CTEST-ARGS...]
#
#   --quick        skip the sanitizer build
#   --no-coverage  skip the coverage stage (also: QLINK_COVERAGE=0)
#   --no-rxe       skip the Soft-RoCE stage (also: QLINK_RXE=0)
#   CTEST-ARGS are passed to the plain and sanitizer ctest runs (e.g.
#   -- -R verbs); a subset measures no coverage, so the coverage stage is
#   then skipped.
#
# Build folders: build/ (RelWithDebInfo), build-asan/ (Debug) and
# build-cov/ (Debug, --coverage; reports build-cov/coverage.txt and
# build-cov/coverage/index.html). The fuzz tests (label fuzz) are left out
# of the coverage run: their targets are built by clang, uninstrumented; so
# are the install tests (label install), which link a program out of tree
# against the instrumented library. A test failing in the coverage build is
# reported there and gated by the other two builds; the coverage stage fails on the coverage figure (and on
# a configure or build error).
# The minimum is QLINK_COVERAGE_MIN (default 80, percent of lines of src/).
# The Soft-RoCE stage (tests/rxe/run.sh) installs its Debian packages when
# run as root; where it cannot run (not root and packages missing) it says
# why and is skipped, not failed.
set -uo pipefail

usage() {
	sed -n '3,30s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

quick=0
rxe=${QLINK_RXE:-1}
coverage=${QLINK_COVERAGE:-1}
coverage_min=${QLINK_COVERAGE_MIN:-80}
ctest_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--no-rxe) rxe=0 ;;
	--no-coverage) coverage=0 ;;
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
if [ "$coverage" = 0 ]; then
	ql_deps test || exit 1
else
	ql_deps test coverage || exit 1
fi

jobs=$(nproc 2>/dev/null || echo 2)

# run_suite NAME DIR CMAKE-ARGS...: configure, build and test one build
# folder; sets `result` to a short verdict and returns non-zero on failure.
# Tests labelled `skip_labels` (a ctest regex) are not run; `before_test`,
# if set, is run between the build and the tests.
skip_labels=rxe
before_test=
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
	[ -z "$before_test" ] || $before_test "$dir"
	echo "=== $name: test"
	ctest --test-dir "$dir" --output-on-failure --no-tests=error -j2 -LE "$skip_labels" \
		"${ctest_args[@]}" |
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

# Coverage: a Debug build instrumented with --coverage runs the suite (less
# the clang-built fuzz targets), then gcovr prints the line coverage of src/
# per file and fails the stage below coverage_min percent.
# shellcheck disable=SC2317 # called through $before_test
clear_counts() {
	# counters of an earlier run would add to this one's
	find "$1" -name '*.gcda' -delete
}

run_coverage() {
	local dir=build-cov pct rc tests

	# fuzz: clang-built targets, no gcov counters; install: builds a
	# program out of tree against the installed (here instrumented) library
	skip_labels='rxe|fuzz|install'
	before_test=clear_counts
	run_suite "Coverage" "$dir" -DQLINK_WERROR=ON -DCMAKE_BUILD_TYPE=Debug \
		"-DCMAKE_C_FLAGS=--coverage -fprofile-update=atomic" -DCMAKE_EXE_LINKER_FLAGS=--coverage \
		-DCMAKE_SHARED_LINKER_FLAGS=--coverage -DCMAKE_MODULE_LINKER_FLAGS=--coverage
	rc=$?
	skip_labels=rxe
	before_test=
	case "$result" in *configure* | *build\)*) return 1 ;; esac
	# A test that fails here is reported but gated by the build/ and
	# build-asan/ stages: this stage gates coverage. (Busy-polling tests
	# run several times slower instrumented at -O0.)
	tests=$result
	[ "$rc" -eq 0 ] || echo "=== Coverage: WARNING: tests failed in $dir: $tests" >&2
	echo "=== Coverage: gcovr, lines of src/ (minimum ${coverage_min} %)"
	mkdir -p "$dir/coverage"
	gcovr --root . --filter 'src/' --exclude-directories "$dir/CMakeFiles" -j "$jobs" \
		--print-summary --txt "$dir/coverage.txt" \
		--html-details "$dir/coverage/index.html" \
		--fail-under-line "$coverage_min" "$dir" | tee "$dir/gcovr.log"
	rc=${PIPESTATUS[0]}
	cat "$dir/coverage.txt"
	pct=$(grep -Eo '^lines: [0-9.]+%' "$dir/gcovr.log" | grep -Eo '[0-9.]+%')
	if [ "$rc" -ne 0 ]; then
		result="FAILED (lines ${pct:-?} of src/, minimum ${coverage_min} %; gcovr exit $rc; tests $tests)"
		return 1
	fi
	result="passed (lines ${pct} of src/, minimum ${coverage_min} %; tests $tests)"
}

if [ "$coverage" = 0 ]; then
	cov="skipped (--no-coverage)"
elif [ ${#ctest_args[@]} -gt 0 ]; then
	cov="skipped (CTEST-ARGS select a subset)"
else
	run_coverage || status=1
	cov=$result
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
	"build-cov/ $cov; rxe $rxe_result"
exit $status
