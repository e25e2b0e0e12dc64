#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_layers.sh: the include graph keeps the layering of docs/design.md.
#
#   tests/check_layers.sh SOURCE-DIR
#
# Every #include in src/, include/qlink/ and tools/ that names a file of the
# tree is an edge between two modules: src/<module>/ (src/providers/<name>/
# is module providers/<name>), a public header's module (the table HEADERS
# below), tools (the programs). Rules:
#   1. layers: a module includes nothing of a module in a layer above its
#      own (LAYERS below: util < verbs < providers < transport < rpc <
#      service modules < qlinkd's private code < apps);
#   2. no library code (src/, include/) includes a file of tools/ (the
#      programs, tools/ and src/qlinkd/, may), and no build file under src/
#      compiles one;
#   3. a module's private headers (*_int.h, *_internal.h) are included by
#      that module alone; what another module may use goes in a header
#      without that suffix (or in the public API);
#   4. no cycles between modules (within a layer too);
#   5. a public header includes public headers only (it is installed);
#   6. every module has a layer (a new folder must be placed in LAYERS).
# Before judging the tree it plants one violation of each rule in a small
# tree of its own and fails unless each is caught, so it cannot pass by
# checking nothing.
set -euo pipefail
export LC_ALL=C
src=${1:?usage: check_layers.sh SOURCE-DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# module:layer. 0 util, 1 verbs (with providers/common, the base the
# software NICs share, below them), 2 providers, 3 transport, 4 rpc,
# 5 service modules (libqlink's and libqlink-control's), 6 qlinkd's private
# code (the qlinkd_private library: config and program files, the plugin
# loader, the demo function; no installed library may use it), 7 apps
# (the programs, the bridge provider module, the umbrella header
# qlink/qlink.h). yamlfile is a helper with no qlink dependency but
# qlink/error.h, hence util's layer.
LAYERS="
util:0 yamlfile:0
verbs:1 providers/common:1
providers/*:2
transport:3
rpc:4
daemon:5 gpu:5 vppu:5 sdr:5 qec:5 control:5 endpoint:5
config:6 plugin:6 demo:6
bridge:7 tools:7 qlinkd:7 umbrella:7
"
# public header (include/qlink/NAME.h) : module
HEADERS="
error:util log:util clock:util histogram:util version:util
verbs:verbs mlx5:verbs
channel:transport client:transport ring:transport hsb:transport udp:transport
rpc:rpc rpc_fn:rpc rpc_stream:rpc rpc_table:rpc rpc_wire:rpc
gpu:gpu gpu_rpc:gpu rdmaxcel:gpu
daemon:daemon dispatcher:daemon plugin:daemon
vppu:vppu sdr:sdr sdr_ec:sdr qec:qec qec_wire:qec
control:control qcs:control hololink:control endpoint:endpoint
qlink:umbrella
"

# Known exceptions to rule 1, one "FILE INCLUDED-FILE" a line, each with its
# reason above it. An entry whose include is gone fails (remove it).
EXCEPTIONS="
# the CUDA-Q UDP channel refuses datagrams shorter than their own RPC header
# says and answers an over-long reply with a 24-byte RESULT_OVERFLOW response
# (hardening round 2: no reply longer than its request): it builds that RPC
# response itself; to go when the daemon clamps replies for it
src/transport/udp_channel.c include/qlink/rpc_wire.h
"

excepted() { # FILE INCLUDED
	printf '%s\n' "$EXCEPTIONS" | grep -v '^#' | grep -qxF "$1 $2"
}

module_of() { # PATH (relative to the root) -> module, or nothing
	local p=$1 b
	case $p in
	src/providers/*/*) p=${p#src/providers/}; echo "providers/${p%%/*}" ;;
	src/*/*) p=${p#src/}; echo "${p%%/*}" ;;
	include/qlink/*)
		b=${p##*/}
		b=${b%.in}
		b=${b%.h}
		for e in $HEADERS; do
			[ "${e%%:*}" = "$b" ] && { echo "${e#*:}"; return; }
		done
		echo "?qlink/$b.h"
		;;
	tools/*) echo tools ;;
	esac
}
layer_of() { # MODULE -> layer, or nothing
	local e
	for e in $LAYERS; do
		# shellcheck disable=SC2053 # providers/* is a pattern
		[[ $1 == ${e%%:*} ]] && { echo "${e#*:}"; return; }
	done
}

# ROOT OUT: the edges "FROM-MODULE TO-MODULE FILE:LINE INCLUDED-PATH" of a tree
edges() {
	local root=$1 f ln inc dir d m1 m2 hit
	(cd "$root" && find src include tools -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
		-o -name '*.h.in' \) 2>/dev/null | sort) |
		while read -r f; do
			m1=$(module_of "$f")
			[ -n "$m1" ] || continue
			dir=${f%/*}
			grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<][^">]+[">]' "$root/$f" |
				sed -E 's/^([0-9]+):[^"<]*["<]([^">]+)[">].*/\1 \2/' |
				while read -r ln inc; do
					hit=
					for d in "$dir" src include tools; do
						[ -f "$root/$d/$inc" ] && { hit=$d/$inc; break; }
					done
					[ -n "$hit" ] || continue # a system or third-party header
					m2=$(module_of "$hit")
					[ -n "$m2" ] && echo "$m1 $m2 $f:$ln $hit"
				done
		done
}

# ROOT: print every violation; status 1 if any
judge() {
	local root=$1 bad=0 m1 m2 at hit l1 l2 m
	edges "$root" >"$tmp/edges"
	while read -r m1 m2 at hit; do
		case $hit in
		tools/*)
			if [ "$m1" != tools ] && [ "$m1" != qlinkd ]; then
				echo "tools: $at ($m1) includes $hit: library code never uses a tool's files"
				bad=1
			fi
			;;
		esac
		if [ "${at%%/*}" = include ] && [ "${hit%%/*}" != include ]; then
			echo "public: $at includes $hit: an installed header includes public headers only"
			bad=1
		fi
		[ "$m1" != "$m2" ] || continue
		case ${hit##*/} in
		*_int.h | *_internal.h)
			echo "private: $at ($m1) includes $hit, private to $m2: use a header of $m2 meant for other modules"
			bad=1
			;;
		esac
		l1=$(layer_of "$m1") l2=$(layer_of "$m2")
		for m in "$m1:$l1" "$m2:$l2"; do
			if [ -z "${m#*:}" ]; then
				echo "unplaced: module ${m%:*} ($at) has no layer: add it to LAYERS/HEADERS in ${0##*/}"
				bad=1
			fi
		done
		if [ -n "$l1" ] && [ -n "$l2" ] && [ "$l2" -gt "$l1" ] && ! excepted "${at%:*}" "$hit"; then
			echo "layer: $at ($m1, layer $l1) includes $hit ($m2, layer $l2): dependencies point down"
			bad=1
		fi
	done <"$tmp/edges"
	# an exception whose include is gone is removed from the list
	printf '%s\n' "$EXCEPTIONS" | grep -v '^#' | grep . | while read -r f h; do
		[ ! -f "$root/$f" ] || awk -v f="$f" -v h="$h" '{ sub(/:[0-9]+$/, "", $3) }
			$3 == f && $4 == h { found = 1 } END { exit !found }' "$tmp/edges" ||
			echo "stale: the exception '$f includes $h' is no longer needed: remove it"
	done >"$tmp/stale"
	[ ! -s "$tmp/stale" ] || { cat "$tmp/stale"; bad=1; }
	# build files under src/ compile nothing of tools/
	if grep -rnE '(SOURCE_DIR\}|\.\.)/tools/' "$root/src" --include=CMakeLists.txt --include='*.cmake' \
		>"$tmp/cm" 2>/dev/null; then
		sed "s|^$root/|tools: |; s|\$|: a library's build uses a file of tools/|" "$tmp/cm"
		bad=1
	fi
	# cycles between modules (tsort reports a loop on stderr)
	awk '$1 != $2 { print $1, $2 }' "$tmp/edges" | sort -u >"$tmp/graph"
	if ! tsort "$tmp/graph" >/dev/null 2>"$tmp/loop"; then
		echo "cycle: modules that include each other:" $(sed -n 's/^tsort: //p' "$tmp/loop" |
			grep -v 'input contains a loop')
		# the includes between the loop's modules, to find the culprit lines
		sed -n 's/^tsort: //p' "$tmp/loop" | grep -v 'input contains a loop' >"$tmp/loopmods"
		awk 'NR == FNR { in_loop[$1] = 1; next } $1 != $2 && in_loop[$1] && in_loop[$2]' \
			"$tmp/loopmods" "$tmp/edges" | sed 's/^/  /' | head -n 20
		bad=1
	fi
	return $bad
}

# ---- the check must catch each planted violation ------------------------------
plant() { # NAME: a clean mini tree, then the violation NAME planted
	local t=$tmp/plant-$1
	mkdir -p "$t/src/util" "$t/src/verbs" "$t/src/daemon" "$t/src/sdr" "$t/src/vppu" "$t/src/qec" \
		"$t/src/bridge" "$t/include/qlink" "$t/tools"
	echo '#include "qlink/error.h"' >"$t/src/util/error.c"
	echo '/* */' >"$t/include/qlink/error.h"
	echo '#include "qlink/error.h"' >"$t/include/qlink/verbs.h"
	echo '#include "qlink/verbs.h"' >"$t/src/verbs/verbs.c"
	echo '#include "qlink/verbs.h"' >"$t/include/qlink/sdr.h"
	echo '#include "qlink/sdr.h"' >"$t/src/sdr/sdr_int.h"
	echo '#include "sdr/sdr_int.h"' >"$t/src/sdr/sdr.c"
	echo '#include "qlink/verbs.h"' >"$t/include/qlink/vppu.h"
	echo '#include "qlink/vppu.h"' >"$t/include/qlink/qec.h"
	echo '#include "qlink/vppu.h"' >"$t/src/vppu/vppu.c"
	echo '#include "qlink/qec.h"' >"$t/src/qec/stream.c"
	echo '#include "qlink/error.h"' >"$t/src/daemon/daemon.c"
	echo '#include "qlink/sdr.h"' >"$t/src/bridge/bridge.c"
	echo '#include "rdv.h"' >"$t/tools/tool.c"
	echo '#include "qlink/verbs.h"' >"$t/tools/rdv.h"
	echo 'add_library(x MODULE x.c)' >"$t/src/bridge/CMakeLists.txt"
	# qlinkd (src/qlinkd/) is a program: it may use a tool's files
	mkdir -p "$t/src/qlinkd"
	echo '#include "rdv.h"' >"$t/src/qlinkd/main.c"
	case $1 in
	clean) ;;
	layer) echo '#include "qlink/verbs.h"' >>"$t/src/util/error.c" ;;
	tools) echo '#include "rdv.h"' >>"$t/src/bridge/bridge.c" ;;
	tools_cmake) echo 'add_library(y MODULE ${PROJECT_SOURCE_DIR}/tools/rdv.c)' >>"$t/src/bridge/CMakeLists.txt" ;;
	private) echo '#include "sdr/sdr_int.h"' >>"$t/src/daemon/daemon.c" ;;
	cycle) echo '#include "qlink/qec.h"' >>"$t/src/vppu/vppu.c" ;;
	public) echo '#include "sdr/sdr_int.h"' >>"$t/include/qlink/qec.h" ;;
	unplaced) mkdir -p "$t/src/newmod" && echo '#include "qlink/error.h"' >"$t/src/newmod/a.c" ;;
	esac
	echo "$t"
}
selftest=0
if ! judge "$(plant clean)" >"$tmp/out"; then
	echo "FAIL: the planted trees' clean base is judged bad:"
	cat "$tmp/out"
	selftest=1
fi
for v in layer tools tools_cmake private cycle public unplaced; do
	want=${v%_cmake}
	if judge "$(plant "$v")" >"$tmp/out" || ! grep -q "^$want:" "$tmp/out"; then
		echo "FAIL: a planted '$v' violation is not caught (got: $(tr '\n' ' ' <"$tmp/out"))"
		selftest=1
	fi
done
[ $selftest -eq 0 ] || exit 1

# ---- the tree ---------------------------------------------------------------------
if judge "$src" >"$tmp/out"; then
	echo "PASS: $(awk '$1 != $2' "$tmp/edges" | wc -l) includes between $(awk '{ print $1; print $2 }' \
		"$tmp/graph" | sort -u | wc -l) modules point down, no cycle (7 planted violations caught)"
else
	sed 's/^/FAIL: /' "$tmp/out"
	exit 1
fi
