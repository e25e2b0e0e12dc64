#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_symbols.sh: the shared libraries export exactly what their linker
# version scripts list, and every function declared in a public header
# (include/qlink/*.h and the generated qlink/version.h) is exported by one
# of them, so a forgotten (or a leaked) symbol fails the suite.
#
#   tests/check_symbols.sh CC SOURCE-DIR BUILD-INCLUDE-DIR \
#       LIB.so MAP [LIB.so MAP]... -- CONTROL-HEADERS... \
#       [--modules MODULE.so MAP [MODULE.so MAP]...]
#
# Modules are dlopen'ed plugins (the CUDA-Q bridge provider): each must
# export exactly its map (its entry point), under the map's version node,
# and is no part of the public headers' accounting.
#
# The public functions come from the compiler itself (gcc -aux-info lists
# every prototype with the header it came from), not from a regex over
# the headers. Functions of CONTROL-HEADERS must be in the last library's
# map, all others in the first's.
set -euo pipefail
cc=$1 src=$2 binc=$3
shift 3
libs=() maps=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	libs+=("$1") maps+=("$2")
	shift 2
done
shift
ctl_headers=()
while [ $# -gt 0 ] && [ "$1" != --modules ]; do
	ctl_headers+=("$1")
	shift
done
mods=() mod_maps=()
if [ $# -gt 0 ]; then
	shift
	while [ $# -gt 1 ]; do
		mods+=("$1") mod_maps+=("$2")
		shift 2
	done
	[ $# -eq 0 ] || { echo "FAIL: --modules takes MODULE.so MAP pairs"; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# (no reader of a pipe here may stop early, as `awk '... exit'` would: under
# pipefail the writer's SIGPIPE then fails the script, silently, at random)

map_syms() { # the global names of a version script
	sed -e 's|/\*.*\*/||g' "$1" | awk '/global:/ { g = 1; next } /local:/ { g = 0 } g' |
		tr -d ' \t;' | grep -v '^$' | sort -u
}

# LIB MAP: the library exports exactly the map's names, all under its node
check_exports() {
	local lib=$1 map=$2 out=$3 node
	map_syms "$map" >"$out.map"
	[ -s "$out.map" ] || { echo "FAIL: $map lists no symbols"; fail=1; }
	# defined dynamic symbols, without the version nodes (type A)
	nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u \
		>"$out.dyn"
	if ! diff -u "$out.map" "$out.dyn" >"$tmp/diff"; then
		echo "FAIL: ${lib##*/} exports differ from ${map##*/} (- listed only, + exported only):"
		sed -n '3,$p' "$tmp/diff" | grep '^[-+]'
		fail=1
	fi
	node=$(sed -e 's|/\*.*\*/||g' "$map" | awk '/\{/ && !n { print $1; n = 1 }')
	if nm -D --defined-only "$lib" | awk '$2 != "A"' | grep -v "@@$node\$" | grep -q .; then
		echo "FAIL: ${lib##*/}: symbols without version $node"
		fail=1
	fi
}

for i in "${!mods[@]}"; do
	check_exports "${mods[$i]}" "${mod_maps[$i]}" "$tmp/mod.$i"
done

for i in "${!libs[@]}"; do
	lib=${libs[$i]} map=${maps[$i]}
	map_syms "$map" >"$tmp/map.$i"
	[ -s "$tmp/map.$i" ] || { echo "FAIL: $map lists no symbols"; fail=1; }
	# defined dynamic symbols, without the version nodes (type A)
	nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u \
		>"$tmp/dyn.$i"
	if ! diff -u "$tmp/map.$i" "$tmp/dyn.$i" >"$tmp/diff"; then
		echo "FAIL: ${lib##*/} exports differ from ${map##*/} (- listed only, + exported only):"
		sed -n '3,$p' "$tmp/diff" | grep '^[-+]'
		fail=1
	fi
	# and every exported symbol carries the map's version node
	node=$(sed -e 's|/\*.*\*/||g' "$map" | awk '/\{/ && !n { print $1; n = 1 }')
	if nm -D --defined-only "$lib" | awk '$2 != "A"' | grep -v "@@$node\$" | grep -q .; then
		echo "FAIL: ${lib##*/}: symbols without version $node"
		fail=1
	fi
done

# every function the public headers declare (not static inline)
{
	for h in "$src"/include/qlink/*.h; do echo "#include \"qlink/${h##*/}\""; done
	echo '#include "qlink/version.h"'
} >"$tmp/all.c"
"$cc" -std=gnu11 -I"$src/include" -I"$binc" -aux-info "$tmp/aux" -c "$tmp/all.c" -o "$tmp/all.o"
# (header base name and function; the paths may contain spaces)
grep -v '\*/ static ' "$tmp/aux" |
	sed -nE 's|^/\* .*/qlink/([a-z_0-9]+\.h):[0-9]+:[^*]*\*/ .*[ *]([A-Za-z_][A-Za-z_0-9]*) \(.*|\1 \2|p' |
	sort -u >"$tmp/pub"
[ "$(wc -l <"$tmp/pub")" -ge 50 ] || { echo "FAIL: found only $(wc -l <"$tmp/pub") public functions"; fail=1; }
last=$((${#libs[@]} - 1))
while read -r h fn; do
	want=0
	for c in "${ctl_headers[@]}"; do [ "$h" = "$c" ] && want=$last; done
	if ! grep -qx "$fn" "$tmp/dyn.$want"; then
		echo "FAIL: $fn (qlink/$h) is not exported by ${libs[$want]##*/} (add it to ${maps[$want]##*/})"
		fail=1
	fi
done <"$tmp/pub"
# and nothing is exported that no public header declares
awk '{ print $2 }' "$tmp/pub" | sort -u >"$tmp/pubnames"
for i in "${!libs[@]}"; do
	comm -23 "$tmp/dyn.$i" "$tmp/pubnames" | sed "s|^|FAIL: ${libs[$i]##*/} exports an undeclared |" |
		grep . && fail=1
done
[ $fail -eq 0 ] && echo "PASS: $(wc -l <"$tmp/pub") public functions, exported as listed${mods[0]:+; ${#mods[@]} module(s) export their maps only}"
exit $fail
