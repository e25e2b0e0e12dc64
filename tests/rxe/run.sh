#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh: run qlink's verbs test suite against the real kernel RDMA stack —
# Linux Soft-RoCE (rdma_rxe) — inside a qemu guest, since this machine's own
# kernel has no RDMA support.
#
#   tests/rxe/run.sh [--build-dir DIR] [--workdir DIR] [--timeout SEC]
#                    [--tests "NAME..."] [--bench-rounds N] [--bench-iters N]
#                    [--soft] [--no-rpc] [--no-interop]
#
#   --build-dir DIR    a normal (not sanitized) build folder with the test
#                      programs, tools/qlink, tools/qlinkd,
#                      lib*/qlink/plugins/plugin_decoder.so and bench/qlink-bench-verbs
#                      (default: build)
#   --workdir DIR      kernel cache, initramfs, logs (default:
#                      $QLINK_RXE_WORKDIR, else BUILD-DIR/rxe)
#   --timeout SEC      the whole guest run, boot to power-off (default 600)
#   --tests "A B"      test programs to run (default: every test_verbs_*, then
#                      the SDR programs that run on ibv: test_sdr_core,
#                      test_sdr_loop, test_sdr_hostile, test_sdr_mp)
#   --bench-rounds N   rounds of the perftest / qlink latency pairs (default 1;
#                      0: none)
#   --bench-iters N    iterations per latency run (default 1000)
#   --soft             also run the soft:// groups inside the guest
#   --no-rpc           skip the RPC cases (qlink bench, qlinkd + qlink vppu
#                      --connect over rxe; the rpc_case lines of guest-init.sh)
#   --no-interop       skip the interop cases (kernel rxe <-> qlink soft+udp in
#                      a second network namespace, tests/udp_rxe_interop; the
#                      ix_case lines, and the rpc_case lines named udp-*)
#   --extra PROGRAM    also copy PROGRAM (and its libraries) in and run it
#                      like a test program (repeatable; for debugging)
#   --list             print the test programs it would run, one a line,
#                      and exit (no packages, no qemu)
#
# What it does: installs its Debian packages when root (scripts/deps.sh rxe;
# otherwise prints the apt-get line and exits 77, "skipped"); downloads Debian's kernel package
# with `apt-get download` (never installs it) and keeps the kernel and the
# few modules it needs under the work folder; builds an initramfs with
# busybox, the test programs and their libraries, the rxe provider of
# libibverbs and tests/rxe/guest-init.sh as /init; boots it with qemu
# (software emulation, no network device: -nic none) under `timeout`; the
# guest powers itself off. Results come back through a 9p share; this script
# prints a PASS/FAIL line per step and a verdict.
#
# Exit status: 0 all passed, 1 something failed, 77 cannot run here.
set -uo pipefail

SKIP=77
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=build
workdir=${QLINK_RXE_WORKDIR:-}
timeout_s=600
tests=()
bench_rounds=1
bench_iters=1000
soft=0
rpc=1
interop=1
extra=()
list=0

usage() { sed -n '3,31s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
	case "$1" in
	--build-dir) build=$2; shift ;;
	--workdir) workdir=$2; shift ;;
	--timeout) timeout_s=$2; shift ;;
	--tests) read -r -a tests <<<"$2"; shift ;;
	--bench-rounds) bench_rounds=$2; shift ;;
	--bench-iters) bench_iters=$2; shift ;;
	--soft) soft=1 ;;
	--no-rpc) rpc=0 ;;
	--no-interop) interop=0 ;;
	--extra) extra+=("$2"); shift ;;
	--list) list=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "rxe: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
	shift
done

T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "rxe [$(elapsed)s] $*"; }
skip() { echo "rxe: SKIPPED: $*"; exit $SKIP; }
die() { echo "rxe: FAIL: $*"; exit 1; }

case "$build" in /*) ;; *) build=$(pwd)/$build ;; esac
[ -n "$workdir" ] || workdir=$build/rxe
case "$workdir" in /*) ;; *) workdir=$(pwd)/$workdir ;; esac

# The test programs: every executable test_verbs_* in BUILD/tests, then the
# SDR programs that make sense on ibv (docs/sdr.md; the fault-injection ones,
# test_sdr_loss and test_sdr_ec, need soft+udp and would only skip). Only
# the file *name* is looked at, so a build folder under a path with dots or
# spaces (~/src/qlink-1.0, "qlink 1.0") works; names with a dot (test_x.c,
# test_x.log) are not programs.
rxe_sdr_tests=(test_sdr_core test_sdr_loop test_sdr_hostile test_sdr_mp)
list_tests() {
	local f name
	for f in "$build"/tests/test_verbs_*; do
		name=${f##*/}
		case "$name" in *.*) continue ;; esac
		[ -f "$f" ] && [ -x "$f" ] && printf '%s\n' "$name"
	done
	for name in "${rxe_sdr_tests[@]}"; do
		f=$build/tests/$name
		[ -f "$f" ] && [ -x "$f" ] && printf '%s\n' "$name"
	done
}
if [ ${#tests[@]} -eq 0 ]; then
	mapfile -t tests < <(list_tests)
fi
if [ "$list" -eq 1 ]; then
	[ ${#tests[@]} -gt 0 ] || die "no test programs in $build/tests (build first: cmake --build $build)"
	printf '%s\n' "${tests[@]}"
	exit 0
fi

# ---- 1. host packages (scripts/deps.sh, profile rxe) ----------------------
if ! command -v dpkg-query >/dev/null 2>&1; then
	skip "not a Debian system (needs qemu-system-x86_64, busybox, rdma-core, perftest)"
fi
# shellcheck source=scripts/deps.sh
. "$src/scripts/deps.sh"
if ! ql_deps rxe; then
	[ "$(id -u)" -ne 0 ] && skip "Debian packages missing and not root (see the apt-get line above)"
	die "could not install the packages of profile rxe (scripts/deps.sh)"
fi
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not found"
qemu-system-x86_64 -accel help 2>/dev/null | grep -qx tcg || skip "this qemu has no TCG accelerator"

# ---- 2. what goes into the guest ------------------------------------------
[ ${#tests[@]} -gt 0 ] || die "no test programs in $build/tests (build first: cmake --build $build)"
[ -x "$build/tools/qlink" ] || die "$build/tools/qlink missing (build first)"
if [ "$rpc" -eq 1 ]; then
	[ -x "$build/tools/qlinkd" ] || die "$build/tools/qlinkd missing (build first, or --no-rpc)"
	# the build tree's plugin directory (CMakeLists.txt, QLINK_BUILD_PLUGINDIR)
	plugin=$(ls "$build"/lib*/qlink/plugins/plugin_decoder.so 2>/dev/null | head -n 1)
	[ -f "$plugin" ] ||
		die "$build/lib/qlink/plugins/plugin_decoder.so missing (build first, or --no-rpc)"
fi
# The RPC cases: one `rpc_case NAME CHECK COMMAND...` line each in
# guest-init.sh; every NAME must come back with a result.
rpc_cases=()
[ "$rpc" -eq 1 ] &&
	mapfile -t rpc_cases < <(sed -n 's/^[[:space:]]*rpc_case \([A-Za-z0-9_-]*\) .*/\1/p' "$here/guest-init.sh" |
		{ if [ "$interop" -eq 1 ]; then cat; else grep -v '^udp-'; fi; })
# The interop cases: `ix_case NAME CHECK COMMAND...` lines, the same way.
ix_cases=()
[ "$interop" -eq 1 ] &&
	mapfile -t ix_cases < <(sed -n 's/^[[:space:]]*ix_case \([A-Za-z0-9_-]*\) .*/\1/p' "$here/guest-init.sh")
if [ "$interop" -eq 1 ] && [ ! -x "$build/tests/udp_rxe_interop" ]; then
	die "$build/tests/udp_rxe_interop missing (build first, or --no-interop)"
fi
if [ "$bench_rounds" -gt 0 ] && [ ! -x "$build/bench/qlink-bench-verbs" ]; then
	echo "rxe: $build/bench/qlink-bench-verbs missing (QLINK_BUILD_BENCH=OFF?): no benchmark"
	bench_rounds=0
fi
for t in "${tests[@]}"; do
	[ -x "$build/tests/$t" ] || die "$build/tests/$t missing"
done
if grep -q '^QLINK_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
	skip "$build is a sanitizer build; run the rxe suite from a normal build"
fi
prov=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so 2>/dev/null | head -n 1)
[ -n "$prov" ] || die "the rxe provider of libibverbs (ibverbs-providers) is missing"

mkdir -p "$workdir" || die "cannot create $workdir"
exec 9>"$workdir/lock"
flock -w 60 9 || die "another rxe run holds $workdir/lock"
say "work folder $workdir"

# ---- 3. Debian's kernel, downloaded and extracted, never installed --------
apt_get_lists() {
	apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}
kpkg=$(apt_get_lists)
if [ -z "$kpkg" ] && [ "$(id -u)" -eq 0 ]; then
	apt-get update >"$workdir/apt-update.log" 2>&1
	kpkg=$(apt_get_lists)
fi
if [ -z "$kpkg" ]; then
	# offline: use what an earlier run kept
	kdir=$(ls -d "$workdir"/kernel-* 2>/dev/null | tail -n 1)
	[ -n "$kdir" ] || skip "cannot find Debian's linux-image-amd64 (run apt-get update)"
	kver=${kdir##*/kernel-}
else
	kver=${kpkg#linux-image-}
	kdir=$workdir/kernel-$kver
fi
# rxe needs crc32 (no softdep); sch_netem: packet loss on the veth wire
mods="crc32_generic rdma_rxe veth virtio_pci 9pnet_virtio 9p sch_netem"
if [ ! -s "$kdir/modules.list" ] || [ ! -f "$kdir/vmlinuz" ] ||
	[ "$(cat "$kdir/mods.txt" 2>/dev/null)" != "$mods" ]; then
	say "fetching $kpkg"
	rm -rf "$kdir" "$workdir/debs" "$workdir/kroot"
	mkdir -p "$workdir/debs" "$workdir/kroot"
	(cd "$workdir/debs" && apt-get download "$kpkg" >"$workdir/apt-download.log" 2>&1) ||
		die "apt-get download $kpkg failed (see $workdir/apt-download.log)"
	dpkg-deb -x "$workdir"/debs/"${kpkg}"_*.deb "$workdir/kroot" || die "dpkg-deb -x failed"
	depmod -b "$workdir/kroot" "$kver" || die "depmod failed" # the .deb ships no modules.dep
	mkdir -p "$kdir.tmp/modules"
	cp "$workdir/kroot/boot/vmlinuz-$kver" "$kdir.tmp/vmlinuz" || die "no vmlinuz in $kpkg"
	: >"$kdir.tmp/modules.list"
	: >"$workdir/insmod.txt"
	for m in $mods; do
		# in load order; "builtin" lines need nothing
		modprobe -d "$workdir/kroot" -S "$kver" --show-depends "$m" >>"$workdir/insmod.txt" ||
			die "module $m not found in $kpkg"
	done
	while IFS= read -r ko; do
		base=${ko##*/}
		grep -qx "modules/$base" "$kdir.tmp/modules.list" && continue
		cp "$ko" "$kdir.tmp/modules/$base" || die "cannot copy $ko"
		echo "modules/$base" >>"$kdir.tmp/modules.list"
	done < <(sed -n 's/^insmod \(.*\.ko\(\.[a-z]*\)\{0,1\}\)\( .*\)\{0,1\}$/\1/p' "$workdir/insmod.txt")
	[ -s "$kdir.tmp/modules.list" ] || die "no modules resolved"
	echo "$mods" >"$kdir.tmp/mods.txt" # the cache is for this module set
	mv "$kdir.tmp" "$kdir"
	rm -rf "$workdir/kroot" "$workdir/debs" # ~0.5 GB unpacked; keep only what boots
fi
say "kernel $kver ready ($(wc -l <"$kdir/modules.list") modules)"

# ---- 4. initramfs -------------------------------------------------------------
ir=$workdir/initramfs
rm -rf "$ir"
mkdir -p "$ir"/usr/bin "$ir"/usr/sbin "$ir"/usr/lib/x86_64-linux-gnu "$ir"/usr/lib64 "$ir"/etc \
	"$ir"/proc "$ir"/sys "$ir"/dev "$ir"/tmp "$ir"/run "$ir"/mnt/share "$ir"/bb \
	"$ir"/qlink/bin "$ir"/modules
ln -s usr/bin "$ir/bin"
ln -s usr/sbin "$ir/sbin"
ln -s usr/lib "$ir/lib"
ln -s usr/lib64 "$ir/lib64"
cp /bin/busybox "$ir/usr/bin/busybox" || die "busybox missing"
ln -s busybox "$ir/usr/bin/sh"
copy_libs() { # the shared libraries a program needs, at their own paths
	local l
	while IFS= read -r l; do
		[ -n "$l" ] || continue
		[ -e "$ir$l" ] || { mkdir -p "$ir$(dirname "$l")" && cp -L "$l" "$ir$l"; }
	done < <(ldd "$1" 2>/dev/null | sed -n -e 's/^.*=> \(\/.*\) (0x[0-9a-f]*)$/\1/p' \
		-e 's/^\t\(\/[^ ]*\) (0x[0-9a-f]*)$/\1/p')
}
for f in /usr/bin/ib_write_lat /usr/bin/ib_send_lat /usr/bin/rdma /usr/sbin/ip /usr/sbin/tc /usr/bin/chrt \
	/usr/bin/ibv_devices /usr/bin/ibv_devinfo "$prov"; do
	[ -e "$f" ] || die "$f missing"
	mkdir -p "$ir$(dirname "$f")"
	cp -L "$f" "$ir$f"
	copy_libs "$f"
done
for f in tools/qlink tools/qlinkd bench/qlink-bench-verbs; do
	[ -x "$build/$f" ] || continue
	cp "$build/$f" "$ir/qlink/bin/"
	copy_libs "$build/$f"
done
for t in "${tests[@]}"; do
	cp "$build/tests/$t" "$ir/qlink/bin/"
	copy_libs "$build/tests/$t"
done
if [ "$interop" -eq 1 ]; then
	cp "$build/tests/udp_rxe_interop" "$ir/qlink/bin/"
	copy_libs "$build/tests/udp_rxe_interop"
fi
for f in "${extra[@]}"; do
	[ -x "$f" ] || die "--extra $f: not an executable"
	cp "$f" "$ir/qlink/bin/"
	copy_libs "$f"
	tests+=("${f##*/}")
done
if [ "$rpc" -eq 1 ]; then
	mkdir -p "$ir/qlink/lib"
	cp "$plugin" "$ir/qlink/lib/"
	copy_libs "$plugin"
fi
mkdir -p "$ir/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$ir/etc/libibverbs.d/"
printf 'root:x:0:0:root:/:/bin/sh\n' >"$ir/etc/passwd"
printf 'root:x:0:\n' >"$ir/etc/group"
cp "$kdir"/modules/*.ko "$ir/modules/"
sed "s|^|/|" "$kdir/modules.list" >"$ir/modules.list"
cp "$here/guest-init.sh" "$ir/init"
cp "$here/rpc-checks.sh" "$ir/rpc-checks.sh"
chmod +x "$ir/init"
{
	echo "QL_TESTS='${tests[*]}'"
	echo "QL_TEST_TIMEOUT=300"
	echo "QL_SOFT=$soft"
	echo "QL_RPC=$rpc"
	echo "QL_RPC_TIMEOUT=180"
	echo "QL_INTEROP=$interop"
	echo "QL_IX_COUNT=24"
	echo "QL_IX_TIMEOUT=120"
	echo "QL_BENCH_ROUNDS=$bench_rounds"
	echo "QL_BENCH_ITERS=$bench_iters"
} >"$ir/rxe.conf"
(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1 >"$workdir/initrd.gz") ||
	die "cannot build the initramfs"
say "initramfs $(du -h "$workdir/initrd.gz" | cut -f1): ${#tests[@]} test programs, ${#rpc_cases[@]} RPC cases, ${#ix_cases[@]} interop cases"

# ---- 5. boot -----------------------------------------------------------------
share=$workdir/share
rm -rf "$share"
mkdir -p "$share"
log=$workdir/guest.log
say "booting qemu (TCG, -nic none, timeout ${timeout_s}s); console in $log"
timeout -k 10 "$timeout_s" qemu-system-x86_64 -accel tcg -smp 2 -m 1024 -nographic \
	-no-reboot -nic none \
	-kernel "$kdir/vmlinuz" -initrd "$workdir/initrd.gz" \
	-append "console=ttyS0 quiet loglevel=3 panic=-1 tsc=reliable clocksource=tsc" \
	-virtfs local,path="$share",mount_tag=share,security_model=none,id=share \
	</dev/null 2>&1 | tr -d '\r' | tee "$log" |
	grep --line-buffered -E '^(@@|  test_|rxe|qlink|poweroff|insmod)|FATAL|Kernel panic'
qrc=${PIPESTATUS[0]}
say "qemu exited with status $qrc"

# ---- 6. verdict ---------------------------------------------------------------
fail=0
res=$share/results.txt
echo
echo "==== rxe suite: ibv://rxe0 (end a) <-> ibv://rxe1 (end b), kernel $kver"
printf '%-36s %-6s %s\n' "step" "result" "detail"
check() { # kind name
	local line
	line=$(grep -E "^$1 $2 " "$res" 2>/dev/null | tail -n 1)
	if [ -z "$line" ]; then
		printf '%-36s %-6s %s\n' "$2" FAIL "no result (the guest did not get there)"
		fail=1
	elif echo "$line" | grep -qE ' rc=0( |$)' && ! echo "$line" | grep -qE 'server_rc=[1-9]'; then
		printf '%-36s %-6s %s\n' "$2" PASS "${line#"$1 $2 "}"
	else
		printf '%-36s %-6s %s\n' "$2" FAIL "${line#"$1 $2 "}"
		fail=1
		[ -f "$share/$2.log" ] && sed 's/^/    | /' "$share/$2.log" | tail -n 60
	fi
}
check setup rxe
check info qlink-info
if [ -s "$share/qlink-info.log" ]; then
	sed -n '/^ibv:/,$p' "$share/qlink-info.log" | sed 's/^/    | /'
fi
for t in "${tests[@]}"; do
	check test "$t"
	if [ -f "$share/$t.log" ]; then
		# cmocka names a skipped test twice: when it happens, and in the summary
		s=$(($(grep -cE '^\[  SKIPPED \] [A-Za-z0-9_]+$' "$share/$t.log") / 2))
		f=$(($(grep -cE '^\[  FAILED  \] [A-Za-z0-9_]+$' "$share/$t.log") / 2))
		o=$(grep -cE '^\[       OK \]' "$share/$t.log")
		n=$(grep -c 'NOTE \]' "$share/$t.log")
		printf '%-36s %-6s %s\n' "" "" "cmocka: $o passed, $f failed, $s skipped; $n notes"
		if [ "$f" -ne 0 ]; then
			printf '%-36s %-6s %s\n' "$t" FAIL "cmocka reported a failed test, whatever the exit status"
			fail=1
		fi
	else
		printf '%-36s %-6s %s\n' "$t" FAIL "no log"
		fail=1
	fi
done
for c in "${rpc_cases[@]}"; do
	check rpc "$c"
	# check shows NAME.log; a case's own log is rpc-NAME.log
	line=$(grep -E "^rpc $c " "$res" 2>/dev/null | tail -n 1)
	if [ -n "$line" ] && ! echo "$line" | grep -qE ' rc=0( |$)' && [ -f "$share/rpc-$c.log" ]; then
		sed 's/^/    | /' "$share/rpc-$c.log" | tail -n 40
	fi
done
if [ "$interop" -eq 1 ]; then
	check setup interop
	for c in "${ix_cases[@]}"; do
		check interop "$c"
		line=$(grep -E "^interop $c " "$res" 2>/dev/null | tail -n 1)
		if [ -n "$line" ] && ! echo "$line" | grep -qE ' rc=0( |$)' && [ -f "$share/interop-$c.log" ]; then
			grep -E 'FAIL|^pair exit|^kernel|^capture' "$share/interop-$c.log" | head -n 40 | sed 's/^/    | /'
		fi
	done
	[ -d "$share/rxe-packets" ] && echo "rxe packets kept as test vectors: $share/rxe-packets"
fi
# every result line the guest wrote must be one this script expected
known=" setup:rxe info:qlink-info "
for t in "${tests[@]}"; do known="$known test:$t "; done
for c in "${rpc_cases[@]}"; do known="$known rpc:$c "; done
for c in "${ix_cases[@]}"; do known="$known interop:$c "; done
[ "$interop" -eq 1 ] && known="$known setup:interop "
while read -r kind name _; do
	case "$kind" in bench) continue ;; esac
	case "$known" in
	*" $kind:$name "*) ;;
	*)
		printf '%-36s %-6s %s\n' "$name" FAIL "a result ($kind) this script did not expect"
		fail=1
		;;
	esac
done < <(cat "$res" 2>/dev/null)
r=1
while [ "$r" -le "$bench_rounds" ]; do
	for op in write send; do
		check bench "perftest-$op-lat-r$r"
		check bench "qlink-$op-lat-r$r"
	done
	check bench "qlink-rpc-lat-r$r"
	r=$((r + 1))
done
if [ "$bench_rounds" -gt 0 ]; then
	"$here/bench-report.sh" "$share" "$bench_rounds" | tee "$workdir/bench-report.md"
fi
if [ "$qrc" -ne 0 ]; then
	echo "qemu exit status $qrc (124: the whole run hit --timeout ${timeout_s}s)"
	fail=1
fi
grep -q '^@@MARK poweroff' "$log" || { echo "the guest did not reach power-off"; fail=1; }
echo "==== rxe: $([ $fail -eq 0 ] && echo PASS || echo FAIL) in $(elapsed)s (logs: $share)"
exit $fail
