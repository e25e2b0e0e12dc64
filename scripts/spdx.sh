#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Add (or, with --check, list the lack of) the SPDX line of every source
# file git tracks: C, shell, Python, CMake, example YAML and man pages.
#   scripts/spdx.sh [--check] [REPO]
set -euo pipefail
check=0
[ "${1:-}" = --check ] && { check=1; shift; }
cd "${1:-.}"
tag='SPDX-License-Identifier: MIT'
missing=0
while IFS= read -r -d '' f; do
	head -n 3 "$f" | grep -q 'SPDX-License-Identifier:' && continue
	if [ $check -eq 1 ]; then echo "no SPDX line: $f"; missing=1; continue; fi
	case "$f" in
	*.c | *.h | *.cu | *.cuh | *.c.in | *.h.in) sed -i "1i /* $tag */" "$f" ;;
	*.[1-8])
		sed -i "1i .\\\\\" $tag" "$f" ;;
	*.sh | *.py | *CMakeLists.txt | *.cmake | *.cmake.in | *.yaml | *.yml | *.pc.in | .ci/run)
		if head -n 1 "$f" | grep -q '^#!'; then sed -i "1a # $tag" "$f"; else sed -i "1i # $tag" "$f"; fi ;;
	esac
done < <(git ls-files -z -- '*.c' '*.h' '*.cu' '*.cuh' '*.in' '*.sh' '*.py' '*CMakeLists.txt' '*.cmake' \
	'.ci/run' 'examples/*.yaml' 'man/*.[1-8]')
exit $missing
