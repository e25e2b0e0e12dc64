# SPDX-License-Identifier: MIT
# ucx-lib.sh: shared by the bench/compare-*.sh scripts (sourced, not run).
# Runs one ucx_perftest pair and reduces results to medians.
#
# The caller sets: tmp (a scratch folder), port (a base port), scpu, ccpu
# (server and client cores), size (message bytes), and a `prog` name for
# messages; ucx_run leaves srv_pid empty when it returns.
# shellcheck shell=bash disable=SC2154,SC2034

listening() { # port
	if command -v ss >/dev/null 2>&1; then
		ss -ltnH "sport = :$1" 2>/dev/null | grep -q .
	else
		grep -q "Waiting for connection" "$tmp/srv.log" 2>/dev/null
	fi
}

# ucx_run TEST ITERS: sets ucx_p50 (one-way p50, us) and ucx_rate (overall msg/s)
ucx_run() {
	local test=$1 n=$2 i line vals
	port=$((port + 1))
	UCX_TLS=sm,self timeout 30 taskset -c "$scpu" ucx_perftest -p "$port" -c "$scpu" \
		>"$tmp/srv.log" 2>&1 &
	srv_pid=$!
	for i in $(seq 100); do
		listening "$port" && break
		if ! kill -0 "$srv_pid" 2>/dev/null; then break; fi
		sleep 0.05
	done
	if ! listening "$port"; then
		echo "$prog: the ucx_perftest server did not listen on port $port:" >&2
		cat "$tmp/srv.log" >&2
		exit 1
	fi
	if ! UCX_TLS=sm,self timeout 30 ucx_perftest 127.0.0.1 -p "$port" -c "$ccpu" -t "$test" \
		-s "$size" -n "$n" >"$tmp/cli.log" 2>&1; then
		echo "$prog: ucx_perftest -t $test failed:" >&2
		cat "$tmp/cli.log" "$tmp/srv.log" >&2
		exit 1
	fi
	wait "$srv_pid" || true
	srv_pid=
	# The result line: "Final: ITERS P50 AVG OVERALL BW_AVG BW_OVERALL RATE_AVG RATE_OVERALL"
	line=$(grep -E '^[[:space:]]*Final:' "$tmp/cli.log" | tail -n 1 || true)
	if [ -z "$line" ]; then
		echo "$prog: no 'Final:' line in ucx_perftest -t $test output:" >&2
		cat "$tmp/cli.log" >&2
		exit 1
	fi
	if ! vals=$(echo "$line" | awk '{ if (NF < 9 || $3 !~ /^[0-9.]+$/) exit 1; print $3, $NF }'); then
		echo "$prog: cannot parse ucx_perftest's result line: $line" >&2
		exit 1
	fi
	read -r ucx_p50 ucx_rate <<<"$vals"
}

median() { # values... -> median
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
range() { # FORMAT values... -> "min-max"
	local f=$1
	shift
	printf '%s\n' "$@" | sort -g | awk -v f="$f" 'NR == 1 { lo = $1 } { hi = $1 }
		END { printf f "-" f "\n", lo, hi }'
}

