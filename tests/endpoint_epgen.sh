#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlink-epgen: regenerating examples/endpoints/endpoints.yaml gives exactly
# the committed output (tests/data/endpoint_gen); the output compiles with
# -Wall -Wextra -Werror (header, source and handler skeleton, C and the
# header as C++ where a C++ compiler is there); the same input twice gives
# the same bytes; bad input is refused (a YAML error with its line, two
# paths that make one C name, a --name that is no C identifier, no -o).
#
#   tests/endpoint_epgen.sh QLINK-EPGEN SOURCE-DIR BUILD-INCLUDE-DIR [CC]
set -u
gen=$1 src=$2 binc=$3 cc=${4:-cc}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir "$dir/a" "$dir/b"
"$gen" "$src/examples/endpoints/endpoints.yaml" -o "$dir/a" --skeleton || fail "generate"
# the expected files carry a suffix: they are output, not project sources
n=0
for f in "$dir"/a/*; do
	n=$((n + 1))
	diff -u "$src/tests/data/endpoint_gen/$(basename "$f").expected" "$f" ||
		fail "$(basename "$f") differs from tests/data/endpoint_gen (regenerate if intended)"
done
[ "$n" = 3 ] || fail "expected 3 files, got $n"
"$gen" "$src/examples/endpoints/endpoints.yaml" -o "$dir/b" --skeleton || fail "generate again"
diff -r "$dir/a" "$dir/b" >/dev/null || fail "not deterministic"

cat >"$dir/main.c" <<'C'
#include "endpoints.h"
extern const struct endpoints_handlers endpoints_handlers;
int main(void)
{
	struct ql_ep_server *s;
	return endpoints_server_create(NULL, &endpoints_handlers, &s) == 0 && 0;
}
C
for f in endpoints.c endpoints_handlers.c; do
	"$cc" -std=gnu11 -Wall -Wextra -Werror -I"$src/include" -I"$binc" -I"$dir/a" \
		-c "$dir/a/$f" -o "$dir/$f.o" || fail "$f does not compile"
done
"$cc" -std=gnu11 -Wall -Wextra -Werror -I"$src/include" -I"$binc" -I"$dir/a" \
	-c "$dir/main.c" -o "$dir/main.o" || fail "a program using the header does not compile"
if command -v c++ >/dev/null; then
	echo '#include "endpoints.h"' >"$dir/cxx.cc"
	c++ -Wall -Werror -I"$src/include" -I"$binc" -I"$dir/a" -c "$dir/cxx.cc" -o "$dir/cxx.o" ||
		fail "the header does not compile as C++"
fi

# refusals
printf 'version: 1\nendpoints:\n  - path: /x\n    type: read\n    buffer:\n      size: 0\n' >"$dir/bad.yaml"
"$gen" "$dir/bad.yaml" -o "$dir/b" 2>"$dir/e" && fail "bad yaml accepted"
grep -q "bad.yaml:6:" "$dir/e" || { cat "$dir/e"; fail "bad yaml: no line"; }
printf 'version: 1\nendpoints:\n  - path: /a-b\n    type: read\n    buffer:\n      size: 8\n  - path: /a_b\n    type: read\n    buffer:\n      size: 8\n' >"$dir/clash.yaml"
"$gen" "$dir/clash.yaml" -o "$dir/b" 2>"$dir/e" && fail "clashing names accepted"
grep -q "make the same C name 'a_b'" "$dir/e" || { cat "$dir/e"; fail "clash message"; }
"$gen" "$src/examples/endpoints/endpoints.yaml" -o "$dir/b" --name 'no-way' 2>/dev/null &&
	fail "bad --name accepted"
"$gen" "$src/examples/endpoints/endpoints.yaml" 2>/dev/null && fail "no -o accepted"
"$gen" "$src/examples/endpoints/endpoints.yaml" -o "$dir/nodir" 2>/dev/null && fail "missing dir accepted"
echo "PASS: qlink-epgen output identical, deterministic, compiles; bad input refused"
