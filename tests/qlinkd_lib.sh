# SPDX-License-Identifier: MIT
# Sourced by the tests/qlinkd_*.sh scripts, after they set $qlinkd: the
# set-up they share. A temp dir $dir, removed on exit with the qlinkd in
# $srv killed (by $QL_KILL, default `kill`; a script's own children by the
# ql_at_exit it may redefine); fail() prints every *.out and *.err of $dir
# (through $QL_SHOW, default `cat`) and exits 1; free ports; starting
# qlinkd until it logs a line, and stopping it on a signal with a clean exit.
: "${QL_KILL:=kill}" "${QL_SHOW:=cat}"
dir=$(mktemp -d)
srv=
ql_at_exit() { :; }
trap '[ -n "$srv" ] && $QL_KILL $srv 2>/dev/null; ql_at_exit; rm -rf "$dir"' EXIT
fail() {
	echo "FAIL: $*"
	for f in "$dir"/*.out "$dir"/*.err; do [ -f "$f" ] && { echo "== $f"; $QL_SHOW "$f"; }; done
	exit 1
}

# A base port P with P .. P+N-1 free for UDP (N default 1), asked of the
# kernel by ql-free-port ($QL_FREE_PORT, set by tests/CMakeLists.txt): never
# a fixed port, which another qlinkd on the host (or a test beside this one)
# may hold. Run by hand without it: a random port, as before.
ql_free_ports() { # [N]
	if [ -n "${QL_FREE_PORT:-}" ]; then
		"$QL_FREE_PORT" "${1:-1}"
	else
		echo $((20000 + RANDOM % 20000))
	fi
}
# $port, $port+1 and $port+2: the control plane's and the listeners' a
# script may add
port=$(ql_free_ports 3) || fail "no free UDP ports (ql-free-port)"

# Start qlinkd with the given arguments, its stdout and stderr in
# $dir/qlinkd.out and .err (emptied first, so an earlier run's lines do not
# count), and wait up to 5 s for WORD on its stderr.
ql_start_qlinkd() { # word, qlinkd arguments...
	local word=$1
	shift
	: >"$dir/qlinkd.out"
	: >"$dir/qlinkd.err"
	"$qlinkd" "$@" >"$dir/qlinkd.out" 2>"$dir/qlinkd.err" &
	srv=$!
	for _ in $(seq 100); do grep -q "$word" "$dir/qlinkd.err" && break; sleep 0.05; done
	grep -q "$word" "$dir/qlinkd.err" || fail "qlinkd did not start"
}

# Send qlinkd SIG; it must end within 10 s, exit 0 and log its clean stop.
ql_stop_qlinkd() { # signal, what (said in a failure)
	local rc
	kill -"$1" $srv
	for _ in $(seq 100); do kill -0 $srv 2>/dev/null || break; sleep 0.1; done
	kill -0 $srv 2>/dev/null && fail "$2: qlinkd did not stop"
	wait $srv
	rc=$?
	srv=
	[ $rc -eq 0 ] || fail "$2: qlinkd exited $rc"
	grep -q 'stopped status=0\|"msg":"stopped","status":0' "$dir/qlinkd.err" ||
		fail "$2: no clean-stop log line"
}
