#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_headers.sh: every public header compiles on its own (it includes
# what it uses), as C11 with the project's warnings and, where a C++
# compiler is given, as C++ (extern "C", no C-only constructs in what a C++
# program sees); and qlink/qlink.h includes every public header.
#
#   tests/check_headers.sh SOURCE-DIR BUILD-INCLUDE-DIR CC [CXX]
set -uo pipefail
src=$1 binc=$2 cc=$3 cxx=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
headers=()
for h in "$src"/include/qlink/*.h; do headers+=("${h##*/}"); done
headers+=(version.h)
for h in "${headers[@]}"; do
	printf '#include "qlink/%s"\n#include "qlink/%s" /* twice: guarded */\n' "$h" "$h" >"$tmp/t.c"
	if ! "$cc" -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
		-I"$src/include" -I"$binc" -fsyntax-only "$tmp/t.c" 2>"$tmp/err"; then
		echo "FAIL: qlink/$h alone (C11):"
		sed 's/^/    /' "$tmp/err" | head -20
		fail=1
	fi
	if [ -n "$cxx" ]; then
		cp "$tmp/t.c" "$tmp/t.cc"
		if ! "$cxx" -std=c++17 -Wall -Wextra -Werror -I"$src/include" -I"$binc" -fsyntax-only \
			"$tmp/t.cc" 2>"$tmp/err"; then
			echo "FAIL: qlink/$h alone (C++17):"
			sed 's/^/    /' "$tmp/err" | head -20
			fail=1
		fi
	fi
	n=$((n + 1))
done
for h in "${headers[@]}"; do
	[ "$h" = qlink.h ] && continue
	grep -q "^#include \"qlink/$h\"" "$src/include/qlink/qlink.h" ||
		{ echo "FAIL: qlink/qlink.h does not include qlink/$h"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: $n public headers compile alone${cxx:+, as C11 and as C++17}"
exit $fail
