#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gen-config-keys.sh: qlinkd.yaml(5)'s KEY SUMMARY section from qlinkd's key
# table (src/config/config.c: one row per key, with its type, range or
# values, default and summary), written between the page's two
# `.\" ---- KEY SUMMARY` marker lines. The table is read through the
# config_keys tool the build makes (tests/config_keys.c).
#
#   scripts/gen-config-keys.sh CONFIG_KEYS [PAGE]
#       CONFIG_KEYS: build/tests/config_keys; PAGE: man/qlinkd.yaml.5
#
# The page is committed; tests/check_config_keys.sh (ctest config_keys_sync)
# regenerates the section and fails on any difference, and checks that the
# page's KEYS and docs/qlinkd.md describe every key of the table and no other.
set -euo pipefail
bin=$1
page=${2:-$(cd "$(dirname "$0")/.." && pwd)/man/qlinkd.yaml.5}
begin='.\" ---- KEY SUMMARY: generated'
end='.\" ---- end of KEY SUMMARY'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -qF "$begin" "$page" && grep -qF "$end" "$page" ||
	{ echo "gen-config-keys.sh: $page has no KEY SUMMARY marker lines" >&2; exit 1; }
"$bin" man >"$tmp/gen"
# (the markers through the environment: awk -v would take their backslash)
B=$begin E=$end awk -v gen="$tmp/gen" '
	index($0, ENVIRON["B"]) == 1 { print; while ((getline l < gen) > 0) print l; skip = 1; next }
	index($0, ENVIRON["E"]) == 1 { skip = 0 }
	!skip { print }
' "$page" >"$tmp/page"
cat "$tmp/page" >"$page"
