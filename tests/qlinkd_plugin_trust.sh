#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd and plugin trust (issue 22 item 5, docs/security.md round 2):
#  1. `--check-config` checks that each plugin exists and is trusted but runs
#     none of its code: the marker plugin's constructor (which writes
#     $QL_TEST_PLUGIN_MARKER) does not run; with --load-plugins it does.
#  2. a plugin anyone else could have written is refused by --check-config
#     and --config, naming the file or directory and why, before any of its
#     code runs: a 0666 file, and (as root) a file owned by nobody, or in a
#     directory under /tmp (1777) that nobody created first; a private
#     directory of ours under /tmp is trusted (the sticky bit protects it).
set -u
qlinkd=$1 plugin=$2 scratch=$3
. "$(dirname "$0")/qlinkd_lib.sh"
export QL_TEST_PLUGIN_MARKER=$dir/marker
trusted=$scratch/plugin-trust-sh-$$
mkdir -p "$trusted" && chmod 0755 "$trusted"
ql_at_exit() { rm -rf "$trusted"; }

# (a control port of ours: a --config that wrongly got past the plugin would
# bind it, not another qlinkd's)
conf() {
	printf 'device: soft+shm://qlinkd-trust-%s\ncontrol: { port: %s }\nplugins:\n  - path: %s\n' \
		"$$" "$port" "$1" >"$dir/$2"
}

conf "$plugin" good.yaml
"$qlinkd" --check-config "$dir/good.yaml" >"$dir/check.out" 2>&1 || fail "check-config of a trusted plugin"
grep -q "good.yaml: OK" "$dir/check.out" || fail "check-config said no OK"
[ ! -e "$QL_TEST_PLUGIN_MARKER" ] || fail "--check-config ran the plugin's constructor"
"$qlinkd" --check-config "$dir/good.yaml" --load-plugins >"$dir/load.out" 2>&1 || fail "--load-plugins"
[ -e "$QL_TEST_PLUGIN_MARKER" ] || fail "--check-config --load-plugins did not load the plugin"
rm -f "$QL_TEST_PLUGIN_MARKER"
"$qlinkd" --config "$dir/good.yaml" --load-plugins >"$dir/usage.out" 2>&1 && fail "--load-plugins without --check-config accepted"

refused() { # name, yaml, message
	"$qlinkd" --check-config "$dir/$2" >"$dir/r.out" 2>&1 && fail "$1: --check-config accepted"
	grep -q -- "$3" "$dir/r.out" || fail "$1: --check-config message"
	"$qlinkd" --check-config "$dir/$2" --load-plugins >"$dir/r.out" 2>&1 && fail "$1: --load-plugins accepted"
	grep -q -- "$3" "$dir/r.out" || fail "$1: --load-plugins message"
	timeout 20 "$qlinkd" --config "$dir/$2" >"$dir/r.out" 2>&1 && fail "$1: --config accepted"
	grep -q -- "$3" "$dir/r.out" || fail "$1: --config message"
	[ ! -e "$QL_TEST_PLUGIN_MARKER" ] || fail "$1: the plugin's constructor ran"
}
# $dir is mktemp -d: 0700 and ours, under /tmp (1777, sticky): trusted
cp "$plugin" "$dir/marker.so"
conf "$dir/marker.so" tmp.yaml
"$qlinkd" --check-config "$dir/tmp.yaml" >"$dir/r.out" 2>&1 || fail "a plugin in a private directory under /tmp refused"
if [ "$(id -u)" = 0 ]; then
	mkdir "$dir/squat" && cp "$plugin" "$dir/squat/marker.so" && chown 65534:65534 "$dir/squat"
	conf "$dir/squat/marker.so" squat.yaml
	refused "a directory nobody created" squat.yaml "refused: directory '$dir/squat' is owned by uid 65534"
fi
cp "$plugin" "$trusted/marker.so"
chmod 0666 "$trusted/marker.so"
conf "$trusted/marker.so" mode.yaml
refused "a 0666 file" mode.yaml "refused: file '$trusted/marker.so' is world-writable (mode 0666)"
if [ "$(id -u)" = 0 ]; then
	chmod 0755 "$trusted/marker.so"
	chown 65534:65534 "$trusted/marker.so"
	refused "owned by nobody" mode.yaml "refused: file '$trusted/marker.so' is owned by uid 65534"
fi
echo "PASS: plugins are checked for trust; --check-config runs no plugin code unless --load-plugins"
