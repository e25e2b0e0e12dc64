#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_source.sh SRC_DIR: every tracked source file carries an SPDX line in
# its first three lines, and every tracked C and CUDA file is clang-formatted (when
# clang-format is installed; .clang-format is the style).
set -u
src=$1
cd "$src" || exit 1
status=0
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "check_source: $src is not a git checkout; nothing to check"
	exit 0
fi
while IFS= read -r -d '' f; do
	head -n 3 "$f" | grep -q 'SPDX-License-Identifier:' && continue
	echo "FAIL: $f has no SPDX-License-Identifier line"
	status=1
done < <(git ls-files -z -- '*.c' '*.h' '*.cu' '*.in' '*.sh' '*.py' '*CMakeLists.txt' '*.cmake' '.ci/run' \
	'examples/*.yaml' 'man/*.[1-8]')
if command -v clang-format >/dev/null 2>&1; then
	while IFS= read -r -d '' f; do
		if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
			echo "FAIL: $f is not clang-formatted (clang-format -i $f)"
			status=1
		fi
	done < <(git ls-files -z -- '*.c' '*.h' '*.cu')
else
	echo "check_source: clang-format not installed, formatting not checked"
fi
[ $status -eq 0 ] && echo "check_source: every source file has its SPDX line and is formatted"
exit $status
