#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gen-man3.sh: the library's API reference, one section 3 man page per
# public header: man/man3/ql_<header>.3 lists every function the header
# declares (exported and static inline), grouped by the header's
# "/* ---- section ---- */" banners, each with its synopsis as written and
# the first sentence of the comment above it; the page's description is
# the header's opening comment. The function list comes from the compiler
# (gcc -aux-info), as tests/check_symbols.sh takes it, not from a regex.
#
#   scripts/gen-man3.sh [SOURCE-DIR [OUT-DIR]]   (defaults: . and SOURCE-DIR/man/man3)
#   CC=clang scripts/gen-man3.sh                 (any compiler with -aux-info: gcc)
#
# The pages are committed; tests/check_man3.sh (ctest man3_sync) regenerates
# them and fails on any difference, so a header change without `scripts/
# gen-man3.sh` fails the suite.
set -euo pipefail
export LC_ALL=C
src=$(cd "${1:-.}" && pwd)
out=${2:-$src/man/man3}
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# version.h is generated at configure time: a stand-in from its template
mkdir -p "$tmp/inc/qlink"
sed 's/@[A-Za-z_]*@/0/g' "$src/include/qlink/version.h.in" >"$tmp/inc/qlink/version.h"
headers=()
for h in "$src"/include/qlink/*.h "$src/include/qlink/version.h.in"; do
	b=${h##*/}
	b=${b%.in}
	[ "$b" = qlink.h ] && continue # the umbrella declares nothing itself
	headers+=("$b")
done
{
	for b in "${headers[@]}"; do echo "#include \"qlink/$b\""; done
} >"$tmp/all.c"
"$cc" -std=gnu11 -I"$src/include" -I"$tmp/inc" -aux-info "$tmp/aux" -c "$tmp/all.c" -o "$tmp/all.o"
# "header<TAB>line<TAB>name<TAB>prototype" of every function a public
# header declares; names with a double underscore (ql__x, ql_rpc__x) are
# internal helpers of inline code and not listed
sed -nE 's|^/\* (.*/)?qlink/([a-z_0-9]+\.h):([0-9]+):[^*]*\*/ (.*[ *]([A-Za-z_][A-Za-z_0-9]*) \([^;]*;).*|\2\t\3\t\5\t\4|p' \
	"$tmp/aux" | awk -F'\t' '$3 !~ /__/' | sort -u >"$tmp/funcs"
[ "$(wc -l <"$tmp/funcs")" -ge 100 ] || { echo "gen-man3.sh: found only $(wc -l <"$tmp/funcs") functions" >&2; exit 1; }

mkdir -p "$out"
rm -f "$out"/ql_*.3
for b in "${headers[@]}"; do
	file=$src/include/qlink/$b
	[ -f "$file" ] || file=$file.in
	name=ql_${b%.h}
	awk -F'\t' -v OFS='\t' '$1 == h { print $2, $3, $4 }' h="$b" "$tmp/funcs" | sort -n -k1,1 -k2,2 \
		>"$tmp/lines"
	[ -s "$tmp/lines" ] || continue # macros and types only (rpc.h: an umbrella)
	awk -v page="$name" -v hdr="$b" -v upper="$(echo "$name" | tr a-z A-Z)" '
	function esc(s) { # text for groff: backslashes, and no request at a line start
		gsub(/\\/, "\\e", s)
		sub(/^[.\047]/, "\\\\\\&&", s)
		return s
	}
	function sentence(s,   i, rest, cut) { # the first sentence of s
		gsub(/[ \t]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s)
		rest = s; cut = 0
		while ((i = index(rest, ". ")) > 0) {
			# not after e.g., i.e., etc., vs. or a single letter
			if (substr(rest, 1, i) ~ /(e\.g|i\.e|etc|vs|[^A-Za-z][A-Za-z])\.$/ || i == 1) {
				cut += i + 1; rest = substr(rest, i + 2); continue
			}
			return substr(s, 1, cut + i)
		}
		return s
	}
	FNR == NR { # line -> its functions (a macro line may define several)
		split($0, a, "\t"); nw[a[1]]++; want[a[1], nw[a[1]]] = a[2]; proto[a[2]] = a[3]; next
	}
	{ line[FNR] = $0 }
	END {
		n = FNR
		# comment blocks that start a line: text, and the line they end on
		incom = 0
		for (i = 1; i <= n; i++) {
			l = line[i]
			if (!incom && l ~ /^[ \t]*\/\*/) { incom = 1; start = i; text = "" }
			if (incom) {
				t = l
				sub(/^[ \t]*\/\*+ ?/, "", t); sub(/\*+\/.*$/, "", t); sub(/^[ \t]*\* ?/, "", t)
				text = text " " t
				if (l ~ /\*\//) {
					incom = 0; comment_end[i] = 1; comment_text[i] = text
					banner = (text ~ /^ *-+ .* -+ *$/)
					if (banner) { t = text; gsub(/^ *-+ | -+ *$/, "", t); banner_at[i] = t }
					# the opening comment of the header (after the SPDX line)
					if (length(head) == 0 && !banner && text !~ /SPDX-License/ && start < 10)
						head = text
				}
			}
		}
		# each function: its synopsis, its section, its comment sentence
		section = ""
		nf = 0
		for (i = 1; i <= n; i++) {
			if (i in banner_at) section = banner_at[i]
			for (w = 1; w <= nw[i]; w++) {
			fn = want[i, w]
			# the declaration from its first line to the end of its parameter list
			s = ""; depth = 0; seen = 0
			for (j = i; j <= n; j++) {
				l = line[j]
				s = s " " l
				for (k = 1; k <= length(l); k++) {
					c = substr(l, k, 1)
					if (c == "(") { depth++; seen = 1 }
					if (c == ")") depth--
				}
				if (seen && depth == 0) break
			}
			gsub(/[ \t]+/, " ", s); sub(/^ /, "", s)
			sub(/ *__attribute__.*$/, "", s); sub(/ *\{.*$/, "", s); sub(/ *;.*$/, "", s)
			# a function a macro defines: the prototype the compiler printed
			if (index(s, fn "(") == 0) { s = proto[fn]; sub(/^extern /, "", s); sub(/ *;$/, "", s) }
			syn[++nf] = s ";"
			sec[nf] = section
			fname[nf] = fn
			# the nearest comment above, with no blank line between
			d = ""
			for (j = i - 1; j >= 1 && line[j] !~ /^[ \t]*$/; j--) {
				if (j in comment_end) {
					if (!(j in banner_at)) d = comment_text[j]
					break
				}
			}
			desc[nf] = (d == "") ? "" : sentence(d)
			}
		}
		title = sentence(head)
		sub(/^[a-z_0-9]+(\.h)?: /, "", title)
		print ".\\\" SPDX-License-Identifier: MIT"
		print ".\\\" Generated by scripts/gen-man3.sh from include/qlink/" hdr ": do not edit."
		print ".TH " upper " 3 \"\" \"qlink\" \"qlink Library Functions\""
		print ".SH NAME"
		print page " \\- " esc(title)
		print ".SH SYNOPSIS"
		print ".nf"
		print ".B #include <qlink/" hdr ">"
		cur = "\001"
		for (f = 1; f <= nf; f++) {
			if (sec[f] != cur) { cur = sec[f]; print ".PP"; if (cur != "") print "/* " esc(cur) " */" }
			print esc(syn[f])
		}
		print ".fi"
		print ".SH DESCRIPTION"
		h = head; gsub(/[ \t]+/, " ", h); sub(/^ /, "", h); sub(/ $/, "", h)
		print esc(h)
		print ".PP"
		print "Each function below returns as the header states; functions returning"
		print ".B int"
		print "return 0 (or a count) on success and a negative errno on failure, with a"
		print "sentence in"
		print ".BR ql_error_detail ()."
		cur = "\001"
		for (f = 1; f <= nf; f++) {
			if (sec[f] != cur) { cur = sec[f]; if (cur != "") print ".SS " esc(cur) }
			print ".TP"
			print ".BR " fname[f] " ()"
			print (desc[f] == "" ? "See the synopsis and the header." : esc(desc[f]))
		}
		print ".SH FILES"
		print ".I include/qlink/" hdr
		print "(installed as"
		print ".IR <qlink/" hdr "> )"
		print ".SH SEE ALSO"
		print ".BR qlink (1),"
		print ".BR qlinkd (8),"
		print "and the project documentation (docs/*.md), installed under share/doc/qlink."
	}' "$tmp/lines" "$file" >"$out/$name.3"
done
