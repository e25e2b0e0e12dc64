#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_space_paths.sh: a clone and a build in a path with a space and a dot
# work. Links the source and build trees into "TMP/q link.d/" and re-runs
# the named ctest tests (their command lines as ctest has them, every
# argument and the working directory under SOURCE-DIR or BUILD-DIR moved to
# the link, and so are the environment's values; the pass regex kept): a
# script that leaves a path unquoted fails here. Skips (77) without python3 (used to read ctest's
# JSON test list).
#
#   tests/check_space_paths.sh BUILD-DIR SOURCE-DIR TEST...
set -uo pipefail
build=$1 src=$2
shift 2
command -v python3 >/dev/null 2>&1 || {
	echo "SKIP: no python3 to read ctest's test list"
	exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base="$tmp/q link.d"
mkdir -p "$base"
ln -s "$src" "$base/src dir"
ln -s "$build" "$base/build.dir x"
ctest --test-dir "$build" --show-only=json-v1 >"$tmp/tests.json" 2>/dev/null ||
	{ echo "FAIL: ctest --show-only=json-v1"; exit 1; }
fail=0
for name in "$@"; do
	# NUL-separated: the working directory, the pass regex, then env entries
	# ("ENV NAME=VALUE"), then the command's arguments, paths moved
	python3 - "$tmp/tests.json" "$name" "$src" "$build" "$base/src dir" "$base/build.dir x" \
		>"$tmp/cmd" <<'PY' || { echo "FAIL: $name: no such test"; fail=1; continue; }
import json, sys
tests, name, src, build, nsrc, nbuild = sys.argv[1:]
t = next((t for t in json.load(open(tests))["tests"] if t["name"] == name), None)
if t is None:
    sys.exit(1)
def move(a):
    for old, new in ((build, nbuild), (src, nsrc)):  # build first: it may lie under src
        if a == old or a.startswith(old + "/"):
            return new + a[len(old):]
    return a
props = {p["name"]: p["value"] for p in t.get("properties", [])}
out = [move(props.get("WORKING_DIRECTORY", build)),
       "|".join(props.get("PASS_REGULAR_EXPRESSION", []))]
out += ["ENV " + e.split("=", 1)[0] + "=" + move(e.split("=", 1)[1]) if "=" in e else "ENV " + e
        for e in props.get("ENVIRONMENT", [])]
out += [move(a) for a in t["command"]]
sys.stdout.write("\0".join(out))
PY
	mapfile -d '' -t parts <"$tmp/cmd"
	wd=${parts[0]} pass=${parts[1]}
	envs=() cmd=()
	for p in "${parts[@]:2}"; do
		if [[ $p == "ENV "* ]]; then envs+=("${p#ENV }"); else cmd+=("$p"); fi
	done
	start=$(date +%s)
	(cd "$wd" && env ${envs[@]+"${envs[@]}"} timeout 300 "${cmd[@]}") >"$tmp/out" 2>&1
	rc=$?
	if [ $rc -ne 0 ] || { [ -n "$pass" ] && ! grep -qE "$pass" "$tmp/out"; }; then
		echo "FAIL: $name from '$base' (exit $rc):"
		tail -n 20 "$tmp/out" | sed 's/^/    /'
		fail=1
	else
		echo "ok: $name from '$base' ($(($(date +%s) - start)) s)"
	fi
done
[ $fail -eq 0 ] && echo "PASS: $# tests from a path with a space and a dot"
exit $fail
