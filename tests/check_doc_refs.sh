#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_doc_refs.sh: the docs name only files that exist. Scans README.md,
# docs/*.md and the man pages (man/*.[158], man/man3/*.3) for
#   - repo-relative paths: a word starting with one of the tree's top
#     folders (src/ tests/ tools/ docs/ examples/ include/ man/ scripts/
#     cmake/ bench/ .ci/), e.g. `src/control/msg.c` or docs/qlinkd.md, and
#   - Markdown links to a relative target, [text](wire-protocol.md#anchor),
#     taken from the linking file's folder,
# and fails on each that names no file or folder in SOURCE-DIR. A program
# built from tests/NAME.c or bench/NAME.c may be named tests/NAME. Patterns
# and placeholders are not paths: a word with * ? [ < > { } $, an
# all-capitals segment (BUILD/, FILE) or the example name foo is skipped,
# as are paths the build writes (listed below). Known exceptions are listed
# below with their reason; one that exists now fails (remove it). It first
# runs itself on a planted document with a bad reference and fails unless
# that is caught.
#
#   tests/check_doc_refs.sh SOURCE-DIR
set -uo pipefail
src=$1

# made by the build or by a run, not in the source tree
generated='^(include/qlink/version\.h|tests/fuzz/corpus/[a-z_]+/fuzz-.*|docs/img/.*\.(png|svg))$'

# named before they are written: "PATH reason"
pending=(
)

# check ROOT FILE...: print "FILE: REF" for each reference that does not exist
check() {
	local root=$1
	shift
	local f rel ref dir
	for f in "$@"; do
		rel=${f#"$root"/}
		dir=$(dirname "$rel")
		{
			# repo-relative paths
			# roff writes a hyphen as \-
			sed 's/\\-/-/g' "$f" |
				grep -oE '(^|[^A-Za-z0-9_./+-])(\.ci|src|tests|tools|docs|examples|include|man|scripts|cmake|bench)/[[A-Za-z0-9_./+*?<>{}$-]*' |
				sed -E 's/^[^A-Za-z0-9_.]//; s/^/R /'
			# Markdown links to relative targets
			grep -oE '\]\([^)#[:space:]]+' "$f" | sed -E 's/^\]\(//; s/^/L /'
		} | while read -r kind ref; do
			ref=${ref%%#*}
			# trailing punctuation of the sentence, a :LINE suffix
			while [[ $ref =~ [.,\;:\)]$ ]]; do ref=${ref%?}; done
			[[ $ref =~ ^(.*):[0-9]+$ ]] && ref=${BASH_REMATCH[1]}
			[ -n "$ref" ] || continue
			case "$ref" in
			*[*?\<\>{}\$[]* | http:* | https:* | mailto:* | /*) continue ;;
			esac
			[[ $ref =~ (^|/)([A-Z][A-Z0-9_-]*(/|$)|foo[-./]) ]] && continue
			for p in "${pending[@]}"; do
				[ "$ref" = "${p%% *}" ] && continue 2
			done
			if [ "$kind" = L ]; then
				[ -e "$root/$dir/$ref" ] || [ -e "$root/$ref" ] || echo "$rel: $ref"
			else
				[[ $ref =~ $generated ]] && continue
				[ -e "$root/$ref" ] && continue
				case "$ref" in
				tests/* | bench/*) [ -e "$root/$ref.c" ] && continue ;;
				esac
				echo "$rel: $ref"
			fi
		done
	done
}

# ---- 1. it catches a planted bad reference -----------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/src/control"
touch "$tmp/src/control/msg.c" "$tmp/docs/other.md"
cat >"$tmp/docs/planted.md" <<'MD'
Real: `src/control/msg.c`, [other](other.md#x), src/control/*.c, BUILD/tools/qlinkd.
Planted: see src/control/gone.c and [missing](nowhere.md).
MD
got=$(check "$tmp" "$tmp/docs/planted.md")
want=$'docs/planted.md: src/control/gone.c\ndocs/planted.md: nowhere.md'
if [ "$got" != "$want" ]; then
	echo "FAIL: the check itself: on a planted document it reported"
	printf '%s\n' "${got:-(nothing)}"
	exit 1
fi

# ---- 2. the tree's documents -------------------------------------------------
for p in "${pending[@]}"; do
	if [ -e "$src/${p%% *}" ]; then
		echo "FAIL: ${p%% *} exists now: remove it from the pending list of $0"
		exit 1
	fi
done
shopt -s nullglob
bad=$(check "$src" "$src/README.md" "$src"/docs/*.md "$src"/man/*.[158] "$src"/man/man3/*.3)
if [ -n "$bad" ]; then
	echo "FAIL: references to files that do not exist:"
	printf '    %s\n' "$bad"
	exit 1
fi
echo "PASS: every repo path and relative link in README.md, docs/*.md and man/ exists"
