#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The rendezvous files under attack (src/transport/rendezvous.h): a pre-existing
# file, a symlink to a victim file, a foreign-owned directory (when run as
# root), a world-writable directory, and files a reader must not trust.
# Each is refused with a clear message and the victim is left untouched.
set -u
qlink=$1
dir=$(mktemp -d)
pids=
cleanup() {
	local p
	for p in $pids; do kill "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*.out; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done; exit 1; }

printf 'victim data\n' >"$dir/victim"
victim_ok() { [ "$(cat "$dir/victim")" = "victim data" ] || fail "$1: the victim file was changed"; }

refused() { # name, expected message, command...
	local name=$1 msg=$2
	shift 2
	timeout 20 "$@" >"$dir/r.out" 2>&1
	local rc=$?
	[ $rc -ne 0 ] || fail "$name: accepted"
	[ $rc -lt 124 ] || fail "$name: hung or killed ($rc)"
	grep -q -- "$msg" "$dir/r.out" || { cat "$dir/r.out"; fail "$name: message"; }
}
serve=("$qlink" serve --cpu -1 --timeout 0.5 --params-file)
vppu=("$qlink" vppu --cpu -1 --count 10 --timeout 0.5 --params-file)

# 1. a pre-existing file is neither reused nor overwritten
printf 'planted\n' >"$dir/pre"
refused "pre-existing file" "already exists" "${serve[@]}" "$dir/pre"
[ "$(cat "$dir/pre")" = "planted" ] || fail "pre-existing file overwritten"

# 2. a symlink to a victim file, at the server's file and at .ready
ln -s "$dir/victim" "$dir/link"
refused "symlink" "is a symbolic link" "${serve[@]}" "$dir/link"
victim_ok "symlink"
ln -s "$dir/victim" "$dir/r3.ready"
"${serve[@]}" "$dir/r3" --timeout 10 >"$dir/s3.out" 2>&1 &
s3=$!
pids="$pids $s3"
timeout 20 "$qlink" vppu --cpu -1 --count 10 --timeout 2 --params-file "$dir/r3" \
	>"$dir/v3.out" 2>&1 && fail "vppu ran with a symlink at .ready"
kill -TERM $s3 2>/dev/null
wait $s3 && fail "serve succeeded with a symlink at .ready"
# the client sees it first (it refuses to follow it), or the server refuses
# to create through it
grep -q "r3.ready is a symbolic link" "$dir/v3.out" "$dir/s3.out" || fail ".ready symlink message"
victim_ok ".ready symlink"
# ... and at the client's .client file: the server, reading it, refuses
ln -s "$dir/victim" "$dir/r4.client"
refused "symlink at .client" "r4.client is a symbolic link" "${serve[@]}" "$dir/r4" --timeout 3
victim_ok ".client symlink"

# 3. a directory owned by someone else (needs root to make one)
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	mkdir "$dir/foreign"
	chown nobody "$dir/foreign"
	refused "foreign-owned directory" "is owned by uid" "${serve[@]}" "$dir/foreign/p"
	[ -z "$(ls -A "$dir/foreign")" ] || fail "a file was created in the foreign directory"
	refused "reader, foreign-owned directory" "is owned by uid" "${vppu[@]}" "$dir/foreign/p"
	# a params file owned by another uid in our own directory
	printf 'x\n' >"$dir/theirs"
	chown nobody "$dir/theirs"
	refused "reader, foreign-owned file" "theirs is owned by uid" "${vppu[@]}" "$dir/theirs"
else
	echo "SKIP: foreign-owned directory and file (not root)"
fi

# 4. a world-writable directory that is not sticky
mkdir "$dir/ww"
chmod 0777 "$dir/ww"
refused "world-writable directory" "writable by group or others and not sticky" "${serve[@]}" "$dir/ww/p"
[ -z "$(ls -A "$dir/ww")" ] || fail "a file was created in the world-writable directory"
# sticky and ours is allowed (the file name is taken exclusively)
mkdir "$dir/sticky"
chmod 1777 "$dir/sticky"
refused "sticky directory (times out waiting, not refused)" "no .*sticky/p.client within" \
	"${serve[@]}" "$dir/sticky/p"

# 5. a reader refuses files it cannot trust
printf 'x\n' >"$dir/gw"
chmod 0666 "$dir/gw"
refused "reader, writable by others" "writable by group or others" "${vppu[@]}" "$dir/gw"
printf 'x\n' >"$dir/real"
ln -s "$dir/real" "$dir/rlink"
refused "reader, symlink" "rlink is a symbolic link" "${vppu[@]}" "$dir/rlink"
mkfifo "$dir/fifo"
refused "reader, FIFO" "not a regular file" "${vppu[@]}" "$dir/fifo"
ln "$dir/real" "$dir/hard"
refused "reader, hard link" "hard links" "${vppu[@]}" "$dir/hard"

# 6. what serve creates is 0600 and is removed when it ends
"${serve[@]}" "$dir/m" --timeout 10 >"$dir/s6.out" 2>&1 &
s6=$!
pids="$pids $s6"
for _ in $(seq 100); do [ -f "$dir/m" ] && break; sleep 0.05; done
[ "$(stat -c %a "$dir/m")" = 600 ] || fail "params file mode $(stat -c %a "$dir/m")"
kill -TERM $s6
wait $s6
[ -e "$dir/m" ] && fail "serve left its params file behind"
echo "PASS: rendezvous attacks refused"
