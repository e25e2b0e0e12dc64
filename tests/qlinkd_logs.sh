#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qlinkd's log lines parse, in both formats (docs/qlinkd.md, "Logs"):
#   json  qlinkd runs with a plugin that logs (plugin_decoder, version
#         "1.0"), serves a session that ends, gets SIGUSR1, SIGHUP with a
#         broken file on disk and SIGTERM; a second qlinkd fails on the taken
#         control port and a third on a file that is no plugin. Every line of
#         every stdout and stderr is one JSON object (tests/qlinkd_logcheck.py,
#         python3's json module); the plugin's version is the string "1.0"
#         and an error's text is whole.
#   text  the same config path, holding blanks and quotes, reads back from
#         the text line unchanged (its quotes escaped once, not twice).
# The config lives in a directory whose name has a blank and a quote.
set -u
qlinkd=$1 qlink=$2 plugin=$3 notplugin=$4
. "$(dirname "$0")/qlinkd_lib.sh"
logcheck=$(dirname "$0")/qlinkd_logcheck.py
check() { python3 "$logcheck" "$@"; } # a function: the path may hold blanks
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
odd="$dir/a \"quoted\" dir"
mkdir -p "$odd"
cfg="$odd/qlinkd.yaml"
write_cfg() { # format, plugin path
	cat >"$cfg" <<YAML
device: soft+shm://qllogs-$$
control:
  address: 127.0.0.1
  port: $port
dispatcher:
  cpu: -1
plugins:
  - path: $2
    config: max_weight=8
log:
  level: debug
  format: $1
YAML
}
wait_for() { # pattern, file
	for _ in $(seq 100); do grep -q -- "$1" "$2" && return 0; sleep 0.05; done
	return 1
}

# ---- json -----------------------------------------------------------------------
write_cfg json "$plugin"
ql_start_qlinkd '"msg":"serving"' --config "$cfg"
timeout 60 "$qlink" vppu --connect "127.0.0.1:$port" --cpu -1 --count 200 --window 4 \
	>"$dir/vppu.out" 2>&1 || fail "vppu exited $?"
wait_for '"msg":"destroyed"' "$dir/qlinkd.err" || fail "the session did not end"
kill -USR1 $srv
wait_for '"msg":"control"' "$dir/qlinkd.out" || fail "SIGUSR1: no counters"
cp "$cfg" "$dir/good.yaml"
printf 'ring:\n  slots: 48\n' >>"$cfg"
kill -HUP $srv
wait_for '"config_on_disk":"invalid"' "$dir/qlinkd.err" || fail "SIGHUP not logged"
wait_for '"component":"config"' "$dir/qlinkd.err" || fail "SIGHUP: no problem line"
cp "$dir/good.yaml" "$cfg"
# a second qlinkd on the taken control port: an error line, exit 1
"$qlinkd" --config "$cfg" >"$dir/taken.out" 2>"$dir/taken.err" && fail "second qlinkd started"
grep -q '"msg":"cannot listen"' "$dir/taken.err" || fail "no cannot-listen line"
cp "$dir/qlinkd.out" "$dir/run1.out"
cp "$dir/qlinkd.err" "$dir/run1.err"
ql_stop_qlinkd TERM json
check json "$dir/qlinkd.out" "$dir/qlinkd.err" "$dir/taken.out" "$dir/taken.err" \
	>"$dir/check.out" 2>&1 || fail "json: $(cat "$dir/check.out")"
grep -q '"component":"plugin".*"source":"libqlink"\|"component":"plugin","msg":"loaded"' \
	"$dir/qlinkd.err" || fail "no plugin line"
[ "$(check field json "$dir/qlinkd.err" loaded version)" = '"1.0"' ] ||
	fail "json: the plugin version is not the string \"1.0\""
[ "$(check field json "$dir/qlinkd.err" starting config)" = "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$cfg")" ] ||
	fail "json: config path not whole"
err=$(check field json "$dir/taken.err" "cannot listen" error)
case $err in *" "*) ;; *) fail "json: the error text is cut: $err" ;; esac
grep -q '"msg":"function".*"calls":' "$dir/qlinkd.out" || fail "json: no function counters"

# a file that is no plugin: the loader's error is a JSON line too
write_cfg json "$notplugin"
"$qlinkd" --config "$cfg" >"$dir/np.out" 2>"$dir/np.err" && fail "qlinkd ran a non-plugin"
grep -q '"msg":"cannot load"' "$dir/np.err" || fail "no cannot-load line"
check json "$dir/np.out" "$dir/np.err" >"$dir/check.out" 2>&1 || fail "json: $(cat "$dir/check.out")"

# ---- text -----------------------------------------------------------------------
write_cfg text "$plugin"
ql_start_qlinkd ' serving ' --config "$cfg"
ql_stop_qlinkd TERM text
check text "$dir/qlinkd.out" "$dir/qlinkd.err" >"$dir/check.out" 2>&1 ||
	fail "text: $(cat "$dir/check.out")"
[ "$(check field text "$dir/qlinkd.err" starting config)" = "$cfg" ] ||
	fail "text: the config path does not read back: $(grep starting "$dir/qlinkd.err")"
grep -q '\\\\"' "$dir/qlinkd.err" && fail "text: a quote escaped twice"
echo "PASS: qlinkd logs parse (json and text)"
