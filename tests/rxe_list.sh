#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rxe_list.sh: tests/rxe/run.sh finds its test programs from a clone and a
# build folder whose paths contain dots and spaces (issue 8: a clone at
# ~/src/qlink-1.0 found none). Runs `run.sh --list` from a copy of the
# script under "qlink 1.0" against a build folder "build dir.1" holding
# links to the real test programs (test_verbs_*, the SDR programs of the
# default list) plus decoys (files that are not programs, SDR programs that
# are not in the list); no packages, no qemu.
#
#   tests/rxe_list.sh SOURCE-DIR BUILD-DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qlink rxe.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

root="$tmp/src/qlink 1.0"
mkdir -p "$root/tests/rxe" "$root/build dir.1/tests"
cp "$src/tests/rxe/run.sh" "$root/tests/rxe/"
want=()
for f in "$build"/tests/test_verbs_*; do
	n=${f##*/}
	case "$n" in *.*) continue ;; esac
	[ -x "$f" ] || continue
	ln -s "$f" "$root/build dir.1/tests/$n"
	want+=("$n")
done
[ ${#want[@]} -ge 3 ] || { echo "FAIL: only ${#want[@]} test_verbs_* programs in $build/tests"; exit 1; }
# the SDR programs that run on ibv are in the default list; the soft+udp
# fault ones (test_sdr_loss, test_sdr_ec) are not
for n in test_sdr_core test_sdr_loop test_sdr_hostile test_sdr_mp; do
	[ -x "$build/tests/$n" ] || { echo "FAIL: $build/tests/$n missing (build first)"; exit 1; }
	ln -s "$build/tests/$n" "$root/build dir.1/tests/$n"
	want+=("$n")
done
for n in test_sdr_loss test_sdr_ec; do
	[ -x "$build/tests/$n" ] && ln -s "$build/tests/$n" "$root/build dir.1/tests/$n"
done
# decoys: a source file, a log and a non-executable file are not programs
touch "$root/build dir.1/tests/test_verbs_decoy.c" "$root/build dir.1/tests/test_verbs_decoy.log" \
	"$root/build dir.1/tests/test_verbs_noexec"

got=$(cd "$tmp" && "$root/tests/rxe/run.sh" --build-dir "$root/build dir.1" --list) ||
	{ echo "FAIL: run.sh --list: $got"; exit 1; }
exp=$(printf '%s\n' "${want[@]}" | sort)
if [ "$(printf '%s\n' "$got" | sort)" != "$exp" ]; then
	echo "FAIL: run.sh --list found:"
	printf '%s\n' "$got"
	echo "expected:"
	printf '%s\n' "$exp"
	exit 1
fi
# a relative --build-dir with a space, from inside the clone
got2=$(cd "$root" && tests/rxe/run.sh --build-dir "build dir.1" --list | sort)
[ "$got2" = "$exp" ] || { echo "FAIL: relative --build-dir: $got2"; exit 1; }
# an empty build folder is an error, not an empty list
mkdir -p "$root/empty.d/tests"
if "$root/tests/rxe/run.sh" --build-dir "$root/empty.d" --list >/dev/null 2>&1; then
	echo "FAIL: --list with no test programs succeeded"
	exit 1
fi
echo "PASS: ${#want[@]} test programs found under '$root'"
