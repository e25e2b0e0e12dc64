#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_symbols.sh: the shared libraries export exactly what their linker
# version scripts list, and every function declared in a public header
# (include/qlink/*.h and the generated qlink/version.h) is exported by one
# of them, so a forgotten (or a leaked) symbol fails the suite.
#
#   tests/check_symbols.sh CC SOURCE-DIR BUILD-INCLUDE-DIR \
#       LIB.so MAP [LIB.so MAP]... -- CONTROL-HEADERS... \
#       [--modules MODULE.so MAP [MODULE.so MAP]...] \
#       [--static ARCHIVE.a... [--allow ALLOW-FILE]]
#
# Static archives (libqlink.a, ...) have no version script: every global
# symbol they define must be named ql_ (public) or ql__ (internal), as the
# shared libraries' are, so that a program linking libqlink.a statically
# gets no name of ours outside our prefix. ALLOW-FILE lists the exceptions,
# one `NAME REASON...` a line; an entry whose symbol no archive defines any
# more fails too (remove it), unless its reason starts with [optional]. The
# check plants an unprefixed symbol in an archive of its own first and
# fails unless that is caught, so it cannot pass by checking nothing.
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
export LC_ALL=C # sort, comm and join agree on one order
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
mods=() mod_maps=() archives=() allow=
while [ $# -gt 0 ]; do
	case $1 in
	--modules)
		shift
		while [ $# -gt 1 ] && [ "${1#--}" = "$1" ]; do
			mods+=("$1") mod_maps+=("$2")
			shift 2
		done
		;;
	--static)
		shift
		while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do
			archives+=("$1")
			shift
		done
		;;
	--allow)
		allow=$2
		shift 2
		;;
	*) echo "FAIL: unexpected argument '$1' (--modules takes MODULE.so MAP pairs)"; exit 1 ;;
	esac
done
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
# and the shared libraries' exports are all ql_ (the maps could list others)
for i in "${!libs[@]}"; do
	grep -v '^ql_' "$tmp/dyn.$i" | sed "s|^|FAIL: ${libs[$i]##*/} exports an unprefixed |" |
		grep . && fail=1
done

# ---- static archives: every global definition ql_ or ql__ -------------------
allowed() { # the allow-list's names
	[ -n "$allow" ] || return 0
	sed -e 's/#.*//' "$allow" | awk 'NF { print $1 }' | sort -u
}
# ARCHIVE...: print "archive(member): symbol" for each unprefixed global
# definition not in the allow-list
unprefixed() {
	local a
	for a in "$@"; do
		# nm -A: "archive:member:value type name" (undefined: no value)
		nm -A -g --defined-only "$a" 2>/dev/null |
			awk -v arc="${a##*/}" '{ n = $NF; t = $(NF - 1); m = $0
				sub(/:[0-9a-f]+ [A-Za-z] [^ ]+$/, "", m); sub(/^.*:/, "", m)
				# ASan names an ODR indicator after its global: judge the global
				sub(/^__odr_asan\./, "", n)
				if (t ~ /^[A-TV-Z]$/ && n !~ /^ql_/) print n " " arc "(" m ")" }'
	done | sort -k1,1 | join -v 1 - "$tmp/allowed" | awk '{ print $2 ": " $1 }'
}
if [ ${#archives[@]} -gt 0 ]; then
	allowed >"$tmp/allowed"
	# the check must catch a planted unprefixed symbol (and a ql_ one passes)
	printf 'int soft_planted_symbol(void) { return 0; }\nint ql__fine(void) { return 1; }\n' \
		>"$tmp/plant.c"
	"$cc" -c "$tmp/plant.c" -o "$tmp/plant.o" && ar rcs "$tmp/libplant.a" "$tmp/plant.o"
	if [ "$(unprefixed "$tmp/libplant.a")" != "libplant.a(plant.o): soft_planted_symbol" ]; then
		echo "FAIL: the static check does not catch a planted unprefixed symbol"
		fail=1
	fi
	unprefixed "${archives[@]}" >"$tmp/bad"
	if [ -s "$tmp/bad" ]; then
		echo "FAIL: global symbols without the ql_/ql__ prefix (rename them, make them static, or"
		echo "      list them in ${allow:-an allow-list} with the reason):"
		sed 's/^/  /' "$tmp/bad"
		fail=1
	fi
	# a stale allow-list entry is removed, not kept "just in case"
	for a in "${archives[@]}"; do nm -g --defined-only "$a" 2>/dev/null; done |
		awk 'NF >= 2 { print $NF }' | sort -u >"$tmp/defined"
	if [ -n "$allow" ]; then
		sed -e 's/#.*//' "$allow" | awk 'NF && $2 != "[optional]" { print $1 }' | sort -u |
			comm -23 - "$tmp/defined" | sed "s|^|FAIL: ${allow##*/} lists a symbol no archive defines: |" |
			grep . && fail=1
	fi
	nallow=$(allowed | wc -l)
	stat_note="; ${#archives[@]} static archive(s): all ql_/ql__ but $nallow allowed"
fi

[ $fail -eq 0 ] && echo "PASS: $(wc -l <"$tmp/pub") public functions, exported as listed${mods[0]:+; ${#mods[@]} module(s) export their maps only}${stat_note:-}"
exit $fail
