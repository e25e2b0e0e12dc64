#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_man3.sh: the API reference (man/man3/ql_<header>.3, one page per
# public header) is in step with the headers:
#   1. scripts/gen-man3.sh regenerates exactly the committed pages (a header
#      changed without regenerating fails, and so does a hand edit);
#   2. every function a public header declares (gcc -aux-info, as
#      tests/check_symbols.sh finds them) is an entry of its header's page,
#      and no page names a function that no header declares. A planted
#      missing entry and a planted unknown one must be caught first.
#
#   tests/check_man3.sh CC SOURCE-DIR
set -euo pipefail
export LC_ALL=C
cc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# ---- 1. regenerated == committed ------------------------------------------------
CC=$cc "$src/scripts/gen-man3.sh" "$src" "$tmp/gen" >"$tmp/gen.log" 2>&1 ||
	{ echo "FAIL: scripts/gen-man3.sh failed:"; cat "$tmp/gen.log"; exit 1; }
if ! diff -ru "$src/man/man3" "$tmp/gen" >"$tmp/diff"; then
	echo "FAIL: man/man3 differs from what scripts/gen-man3.sh generates (run it and commit):"
	head -n 40 "$tmp/diff"
	fail=1
fi

# ---- 2. the pages against the headers ----------------------------------------------
mkdir -p "$tmp/inc/qlink"
sed 's/@[A-Za-z_]*@/0/g' "$src/include/qlink/version.h.in" >"$tmp/inc/qlink/version.h"
for h in "$src"/include/qlink/*.h; do echo "#include \"qlink/${h##*/}\""; done >"$tmp/all.c"
echo '#include "qlink/version.h"' >>"$tmp/all.c"
"$cc" -std=gnu11 -I"$src/include" -I"$tmp/inc" -aux-info "$tmp/aux" -c "$tmp/all.c" -o "$tmp/all.o"
# "page function" for every declared function (but the internal helpers of
# inline code, named with a double underscore: ql__x, ql_rpc__x)
sed -nE 's|^/\* (.*/)?qlink/([a-z_0-9]+)\.h:[0-9]+:[^*]*\*/ .*[ *]([A-Za-z_][A-Za-z_0-9]*) \(.*|ql_\2 \3|p' \
	"$tmp/aux" | awk '$2 !~ /__/' | sort -u >"$tmp/declared"
[ "$(wc -l <"$tmp/declared")" -ge 100 ] ||
	{ echo "FAIL: found only $(wc -l <"$tmp/declared") public functions"; exit 1; }

entries() { # DIR: "page function" for every entry (.BR name ()) of the pages
	local p
	for p in "$1"/ql_*.3; do
		sed -nE 's/^\.BR ([A-Za-z_][A-Za-z_0-9]*) \(\)$/\1/p' "$p" | sed "s|^|$(basename "$p" .3) |"
	done | sort -u
}
compare() { # DIR: print what is missing and what is unknown
	entries "$1" >"$tmp/listed"
	comm -23 "$tmp/declared" "$tmp/listed" | awk '{ print "missing: " $2 " (qlink/" substr($1, 4) ".h) has no entry in " $1 ".3" }'
	comm -13 "$tmp/declared" "$tmp/listed" | awk '{ print "unknown: " $1 ".3 names " $2 "(), which qlink/" substr($1, 4) ".h does not declare" }'
}
# the comparison catches a planted gap and a planted stranger
mkdir -p "$tmp/plant"
cp "$src"/man/man3/ql_*.3 "$tmp/plant/"
sed -i '/^\.BR ql_hist_init ()$/d' "$tmp/plant/ql_histogram.3"
printf '.TP\n.BR ql_no_such_function ()\nPlanted.\n' >>"$tmp/plant/ql_verbs.3"
compare "$tmp/plant" >"$tmp/planted"
if ! grep -q '^missing: ql_hist_init ' "$tmp/planted" || ! grep -q '^unknown: ql_verbs.3 names ql_no_such_function()' "$tmp/planted"; then
	echo "FAIL: the check does not catch a planted missing or unknown entry:"
	cat "$tmp/planted"
	fail=1
fi
compare "$src/man/man3" >"$tmp/out"
if [ -s "$tmp/out" ]; then
	sed 's/^/FAIL: /' "$tmp/out"
	fail=1
fi
[ $fail -eq 0 ] && echo "PASS: $(wc -l <"$tmp/declared") public functions, each in its header's page of $(ls "$src"/man/man3/ql_*.3 | wc -l) (man/man3 as scripts/gen-man3.sh makes it)"
exit $fail
