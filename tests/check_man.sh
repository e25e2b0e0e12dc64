#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_man.sh: the man pages match the programs. Each page renders with no
# groff (and man) warnings; every long option that `qlink --help`,
# `qlink CMD --help` and `qlinkd --help` print appears in qlink(1) /
# qlinkd(8); every key in the configuration parser's tables
# (src/config/config.c) appears in qlinkd.yaml(5); each as the tag of a
# described item, not merely mentioned.
#
#   tests/check_man.sh SOURCE-DIR QLINK QLINKD [QLINK-EPGEN]
set -uo pipefail
src=$1 qlink=$2 qlinkd=$3 epgen=${4:-}
man=$src/man
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

render() { # page: plain ASCII text, no hyphenation, long lines
	groff -man -Tascii -rHY=0 -rLL=300n -P-cbou "$1" 2>/dev/null
}
for page in qlink.1 qlinkd.8 qlinkd.yaml.5 qlink-epgen.1; do
	[ -s "$man/$page" ] || { echo "FAIL: $page missing or empty"; fail=1; continue; }
	w=$(groff -man -Tutf8 -ww -z "$man/$page" 2>&1)
	if [ -n "$w" ]; then
		echo "FAIL: groff warns on $page:"
		printf '    %s\n' "$w"
		fail=1
	fi
	if command -v man >/dev/null 2>&1; then
		w=$(MANWIDTH=80 man --warnings -l "$man/$page" 2>&1 >/dev/null)
		[ -z "$w" ] || { echo "FAIL: man --warnings on $page:"; printf '    %s\n' "$w"; fail=1; }
	fi
	render "$man/$page" >"$tmp/$page.txt"
	grep -q '^NAME' "$tmp/$page.txt" || { echo "FAIL: $page has no NAME section"; fail=1; }
done

opts() { # the long options in a --help text
	grep -oE '(^|[ ,[])--[a-z][a-z0-9-]*' | sed 's/^[ ,[]//' | sort -u
}
check_opts() { # page what help-text
	local page=$1 what=$2 o n=0
	while read -r o; do
		[ -n "$o" ] || continue
		n=$((n + 1))
		# described: the tag of an item (-x, --opt ARG), not only named
		grep -qE -- "^ +(-[a-zA-Z], )?$o([ ,=]|\$)" "$tmp/$page.txt" ||
			{ echo "FAIL: $what: option $o is not described in $page"; fail=1; }
	done < <(opts <<<"$3")
	[ "$n" -gt 0 ] || { echo "FAIL: $what printed no long options"; fail=1; }
}
check_opts qlink.1 "qlink --help" "$("$qlink" --help 2>&1)"
for cmd in bench serve vppu hololink qec sdr ep; do
	check_opts qlink.1 "qlink $cmd --help" "$("$qlink" "$cmd" --help 2>&1)"
	grep -qE "^ *$cmd( |$)" "$tmp/qlink.1.txt" || { echo "FAIL: command $cmd not described in qlink.1"; fail=1; }
done
grep -qE '^ *info( |$)' "$tmp/qlink.1.txt" || { echo "FAIL: command info not described in qlink.1"; fail=1; }
check_opts qlinkd.8 "qlinkd --help" "$("$qlinkd" --help 2>&1)"
[ -z "$epgen" ] || check_opts qlink-epgen.1 "qlink-epgen --help" "$("$epgen" --help 2>&1)"
for s in SIGINT SIGTERM SIGUSR1 'EXIT STATUS' FILES; do
	grep -q "$s" "$tmp/qlinkd.8.txt" || { echo "FAIL: qlinkd.8 does not mention $s"; fail=1; }
done

# every key of the configuration parser's field tables
keys=$(grep -oE '(CYAML_FIELD_[A-Z_]+|STR)\("[a-z_]+"' "$src/src/config/config.c" | sed 's/.*("//; s/"$//' | sort -u)
[ "$(echo "$keys" | wc -w)" -ge 10 ] || { echo "FAIL: found only $(echo "$keys" | wc -w) keys in config.c"; fail=1; }
for k in $keys; do
	grep -qE -- "^ +$k( |\$)" "$tmp/qlinkd.yaml.5.txt" ||
		{ echo "FAIL: config key '$k' is not described in qlinkd.yaml.5"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: 4 pages render cleanly; options of qlink, qlink bench/serve/vppu/hololink/qec/sdr/ep, qlinkd, qlink-epgen and $(echo "$keys" | wc -w) config keys documented"
exit $fail
