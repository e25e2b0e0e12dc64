#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_config_keys.sh: qlinkd's configuration is documented from its key
# table (src/config/config.c, read through the config_keys tool):
#  - qlinkd.yaml(5)'s KEYS section describes (as a tagged item, nested under
#    its mapping's item) every key of the table, and no key the table lacks;
#  - its KEY SUMMARY section is what scripts/gen-config-keys.sh makes of the
#    table;
#  - docs/qlinkd.md's key table has a row per key (a list's entry keys named
#    in their list's row), and no row for a key the table lacks.
# With --planted it proves itself: it plants a mismatch of each kind in
# copies of the page and the doc and fails unless each is caught.
#
#   tests/check_config_keys.sh [--planted] SOURCE-DIR CONFIG_KEYS [PAGE DOC]
set -uo pipefail
planted=0
[ "${1:-}" = --planted ] && { planted=1; shift; }
src=$1 bin=$2
page=${3:-$src/man/qlinkd.yaml.5} doc=${4:-$src/docs/qlinkd.md}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # page doc: FAIL lines on stdout; status 1 if any
	local page=$1 doc=$2 fail=0 k parent
	"$bin" list >"$tmp/keys" || return 1
	# KEYS: ".TP" then ".B name", nested by .RS/.RE under the item above
	awk '
	/^\.SH/ { inkeys = ($0 ~ /^\.SH KEYS/); next }
	!inkeys { next }
	/^\.RS/ { stack[++d] = last; next }
	/^\.RE/ { d--; next }
	/^\.TP/ { tp = 1; next }
	tp && $1 == ".B" { p = ""; for (i = 1; i <= d; i++) p = p stack[i] "."; last = $2; print p $2 }
	{ tp = 0 }' "$page" >"$tmp/documented"
	while read -r k; do
		grep -qxF "$k" "$tmp/documented" ||
			{ echo "FAIL: key $k of the key table is not described in ${page##*/} (KEYS)"; fail=1; }
	done <"$tmp/keys"
	while read -r k; do
		grep -qxF "$k" "$tmp/keys" ||
			{ echo "FAIL: ${page##*/} (KEYS) describes $k, which is not a key of the key table"; fail=1; }
	done <"$tmp/documented"
	# KEY SUMMARY: regenerated into a copy, no difference
	cp "$page" "$tmp/regen"
	if ! "$src/scripts/gen-config-keys.sh" "$bin" "$tmp/regen" >"$tmp/gen.err" 2>&1; then
		echo "FAIL: $(cat "$tmp/gen.err")"
		fail=1
	elif ! diff -u "$page" "$tmp/regen" >"$tmp/diff"; then
		echo "FAIL: ${page##*/}'s KEY SUMMARY is not the key table's: run scripts/gen-config-keys.sh"
		sed 's/^/    /' "$tmp/diff" | head -20
		fail=1
	fi
	# docs/qlinkd.md: "| `key` | default | meaning |" rows
	# (its "## Configuration" section: other tables are of other files)
	awk '/^## / { in_cfg = ($0 == "## Configuration") } in_cfg' "$doc" >"$tmp/cfg"
	sed -n 's/^| `\([a-z_.]*\)` |.*/\1/p' "$tmp/cfg" >"$tmp/rows"
	grep '^| `[a-z_.]*` |' "$tmp/cfg" >"$tmp/rowtext"
	while read -r k; do
		grep -qxF "$k" "$tmp/keys" ||
			{ echo "FAIL: ${doc##*/} has a row for $k, which is not a key of the key table"; fail=1; }
	done <"$tmp/rows"
	while read -r k; do
		parent=${k%.*}
		if [ "$parent" != "$k" ] && grep -q "^| \`$parent\` | none | list of" "$tmp/rowtext"; then
			# a list's entry key: named in the list's row
			grep "^| \`$parent\` |" "$tmp/rowtext" | grep -qF "\`${k##*.}\`" ||
				{ echo "FAIL: ${doc##*/}: the row of $parent does not name its key ${k##*.}"; fail=1; }
		elif grep -q "^$k\." "$tmp/keys"; then
			: # a mapping: its keys have the rows
		else
			grep -qxF "$k" "$tmp/rows" ||
				{ echo "FAIL: key $k of the key table has no row in ${doc##*/}"; fail=1; }
		fi
	done <"$tmp/keys"
	return $fail
}

if [ $planted -eq 0 ]; then
	check "$page" "$doc" && echo "PASS: $(wc -l <"$tmp/keys") keys of the key table documented in ${page##*/} and ${doc##*/}, KEY SUMMARY up to date"
	exit
fi

# --planted: each mismatch must be caught, with its message
expect() { # what, message, page, doc
	local out
	out=$(check "$3" "$4") && { echo "FAIL: planted $1: not caught"; exit 1; }
	grep -qF -- "$2" <<<"$out" || { echo "FAIL: planted $1: no '$2' in:"; echo "$out"; exit 1; }
	echo "caught: $1"
}
check "$page" "$doc" >/dev/null || { echo "FAIL: the real page and doc do not pass"; exit 1; }
# a key of the table the page does not describe (its item renamed: also a
# described key the table lacks)
sed 's/^\.B burst$/.B burst_size/' "$page" >"$tmp/p1"
expect "key missing from the page" "key dispatcher.burst of the key table is not described" "$tmp/p1" "$doc"
expect "key the table lacks in the page" "describes dispatcher.burst_size, which is not a key" "$tmp/p1" "$doc"
# a stale summary
sed 's/^integer, 1\.\.32, default 32: /integer, 1..64, default 32: /' "$page" >"$tmp/p2"
cmp -s "$page" "$tmp/p2" && { echo "FAIL: could not plant a stale summary"; exit 1; }
expect "stale KEY SUMMARY" "KEY SUMMARY is not the key table's" "$tmp/p2" "$doc"
# a doc row for a key the table lacks, and a key without its row
sed 's/^| `control.port` |/| `control.prot` |/' "$doc" >"$tmp/d1"
expect "doc row the table lacks" "has a row for control.prot" "$page" "$tmp/d1"
expect "key without a doc row" "key control.port of the key table has no row" "$page" "$tmp/d1"
echo "PASS: every planted mismatch caught"
