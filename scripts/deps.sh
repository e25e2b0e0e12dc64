#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deps.sh: make sure the Debian packages a task needs are installed.
#
#   scripts/deps.sh PROFILE...          check/install, exit 0 or 1
#   . scripts/deps.sh; ql_deps PROFILE...   same, as a function (returns 0 or 1)
#
# Profiles: build (compile the library and tools), test (build + cmocka),
# bench (build + ucx-utils and sockperf, the peers the benchmarks compare against),
# coverage (test + gcovr, the line-coverage report and gate of scripts/test.sh),
# rxe (qemu, busybox, rdma-core, perftest...: tests/rxe/run.sh, which boots
# Debian's kernel with Linux Soft-RoCE in a VM).
# Missing packages are installed with apt-get when running as root (one
# `apt-get update` per run); otherwise the exact command to run is printed on
# stderr and the result is 1. Only Debian's own archive is needed.

ql_deps_packages() {
	local profile
	for profile in "$@"; do
		case "$profile" in
		# libc6-dev: gcc only recommends it, and recommends are not installed.
		build) echo cmake gcc libc6-dev make pkg-config libibverbs-dev libjansson-dev libsodium-dev libcyaml-dev libyaml-dev libisal-dev ;;
		# clang, lld, libclang-rt-14-dev: the libFuzzer targets (Debian 12's clang 14); groff-base: man page checks;
		# tshark: tests/roce_tshark.sh decodes soft+udp captures (installs without its debconf question when noninteractive).
		# gnuplot-nox: tests/qec_plot.sh (qlink qec --plot draws its PNG and SVG figures with gnuplot).
		test) echo cmake gcc libc6-dev make pkg-config libibverbs-dev libjansson-dev libsodium-dev libcyaml-dev libyaml-dev libisal-dev libcmocka-dev clang lld libclang-rt-14-dev groff-base tshark gnuplot-nox ;;
		coverage) echo cmake gcc libc6-dev make pkg-config libibverbs-dev libjansson-dev libsodium-dev libcyaml-dev libyaml-dev libisal-dev libcmocka-dev clang lld libclang-rt-14-dev groff-base tshark gcovr gnuplot-nox ;;
		bench) echo cmake gcc libc6-dev make pkg-config libibverbs-dev libjansson-dev libsodium-dev libcyaml-dev libyaml-dev libisal-dev ucx-utils sockperf ;;
		rxe)
			echo qemu-system-x86 busybox-static rdma-core ibverbs-providers ibverbs-utils \
				perftest kmod cpio iproute2 util-linux gzip libc-bin
			;;
		*)
			echo "deps: unknown profile '$profile' (build, test, coverage, bench, rxe)" >&2
			return 2
			;;
		esac
	done
}

# Installed package names plus what they provide (pkgconf provides pkg-config).
ql_deps_installed() {
	dpkg-query -W -f='${db:Status-Abbrev}|${Package}|${Provides}\n' 2>/dev/null |
		awk -F'|' '$1 ~ /^.i/ {
			print $2
			n = split($3, p, ", *")
			for (i = 1; i <= n; i++) { sub(/ .*/, "", p[i]); if (p[i] != "") print p[i] }
		}'
}

ql_deps() {
	local list installed pkg
	local -a wanted missing=()

	list=$(ql_deps_packages "$@") || return 2
	mapfile -t wanted < <(tr ' ' '\n' <<<"$list" | sed '/^$/d' | sort -u)
	if ! command -v dpkg-query >/dev/null 2>&1; then
		echo "deps: not a Debian system (no dpkg-query); make sure these are installed:" \
			"${wanted[*]}" >&2
		return 0
	fi
	installed=$(ql_deps_installed)
	for pkg in "${wanted[@]}"; do
		grep -qxF "$pkg" <<<"$installed" || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0

	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing Debian packages: ${missing[*]}" >&2
		echo "deps: install them with:" >&2
		echo "sudo apt-get install -y ${missing[*]}" >&2
		return 1
	fi
	echo "deps: installing ${missing[*]}" >&2
	# The update is what a fresh machine (empty package lists) needs; once per
	# run, shared with child scripts through the environment.
	if [ -z "${QL_DEPS_APT_UPDATED:-}" ]; then
		apt-get update >&2 || return 1
		export QL_DEPS_APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
		return 1
}

# Executed rather than sourced: act on the arguments.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	if [ $# -eq 0 ]; then
		echo "usage: $0 PROFILE... (build, test, coverage, bench, rxe)" >&2
		exit 2
	fi
	ql_deps "$@"
fi
