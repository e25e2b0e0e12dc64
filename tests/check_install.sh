#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_install.sh: `cmake --install` into a scratch prefix gives a tree
# another project can build against, both ways the README shows:
#   1. pkg-config: a plain cc command line builds examples/verbs_hello.c
#      (and a control-plane program with qlink-control);
#   2. CMake: a tiny project with find_package(qlink) builds it against
#      qlink::qlink (shared), qlink::qlink_static and qlink::control.
# Every program is run; the shared ones must load libqlink.so.0 from the
# prefix. Also checks the installed layout (libraries with their soname
# links, headers without qlinkd's private ones, tools, man pages (the API
# reference's man3 pages all there), configs).
# 3. qlinkd as a service: the plugins in LIBDIR/qlink/plugins, the example
#    configuration at SYSCONFDIR/qlink/qlinkd.yaml (never overwritten), the
#    systemd unit naming the installed paths; then a DESTDIR install to /usr
#    and the first command of docs/qlinkd.md run as written against it.
#
#   tests/check_install.sh BUILD-DIR SOURCE-DIR CC [EXTRA-FLAGS]
#   (EXTRA-FLAGS: e.g. "-fsanitize=address,undefined" in a sanitizer build)
set -euo pipefail
build=$1 src=$2 cc=$3 extra=${4:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qlink install.XXXXXX") # a space, on purpose
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix dir"
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || {
	cat "$tmp/install.log"
	fail "cmake --install"
}
libdir=$(cd "$prefix" && ls -d lib*/libqlink.so.0 | head -n 1)
[ -n "$libdir" ] || fail "no libqlink.so.0 installed"
libdir=$prefix/${libdir%/libqlink.so.0}
for f in "$libdir/libqlink.so.0" "$libdir/libqlink.so" "$libdir/libqlink.a" \
	"$libdir/libqlink-control.so.0" "$libdir/libqlink-control.a" \
	"$libdir/libcudaq-realtime-bridge-qlink.so" \
	"$libdir/pkgconfig/qlink.pc" "$libdir/pkgconfig/qlink-control.pc" \
	"$libdir/cmake/qlink/qlinkConfig.cmake" "$libdir/cmake/qlink/qlinkConfigVersion.cmake" \
	"$prefix/include/qlink/qlink.h" "$prefix/include/qlink/version.h" \
	"$prefix/include/qlink/rpc_wire.h" "$prefix/include/qlink/plugin.h" \
	"$prefix/bin/qlink" "$prefix/sbin/qlinkd" \
	"$prefix/share/man/man1/qlink.1" "$prefix/share/man/man8/qlinkd.8" \
	"$prefix/share/man/man5/qlinkd.yaml.5" \
	"$prefix/share/man/man3/ql_verbs.3" "$prefix/share/man/man3/ql_rpc_table.3" \
	"$prefix/share/doc/qlink/examples/qlinkd.yaml" "$prefix/share/doc/qlink/examples/program.yaml" \
	"$prefix/share/doc/qlink/README.md" "$prefix/share/doc/qlink/wire-protocol.md" \
	"$libdir/qlink/plugins/plugin_decoder.so" "$libdir/qlink/plugins/plugin_host_call.so" \
	"$libdir/qlink/plugins/qlink-qec.so" "$prefix/etc/qlink/qlinkd.yaml" \
	"$prefix/lib/systemd/system/qlinkd.service"; do
	[ -e "$f" ] || fail "not installed: ${f#"$prefix"/}"
done
# the whole API reference: every page of man/man3, nothing else
diff <(cd "$src/man/man3" && ls ql_*.3) <(cd "$prefix/share/man/man3" && ls) >/dev/null ||
	fail "share/man/man3 is not man/man3: $(cd "$prefix/share/man/man3" && ls | tr '\n' ' ')"
soname=$(readelf -d "$libdir/libqlink.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libqlink.so.0 ] || fail "soname of libqlink is '$soname'"
[ "$(readlink "$libdir/libqlink.so.0")" = "libqlink.so.$(sed -n 's/#define QL_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/qlink/version.h")" ] ||
	fail "libqlink.so.0 -> $(readlink "$libdir/libqlink.so.0"), not the project version"
for h in config.h program.h demo.h loader.h; do
	[ ! -e "$prefix/include/qlink/$h" ] || fail "qlinkd-private header installed: qlink/$h"
done
"$prefix/bin/qlink" --version | grep -q '^qlink ' || fail "installed qlink --version"
"$prefix/sbin/qlinkd" --version | grep -q '^qlinkd ' || fail "installed qlinkd --version"

runs() { # PROGRAM: run it on the loop device and check it loaded the prefix's library
	local out
	out=$("$1" soft://loop) || fail "$1 exited $?: $out"
	echo "$out" | grep -q 'wrote "hello"' || fail "$1 printed: $out"
}
loads_prefix() {
	ldd "$1" | grep -F "libqlink.so.0 => $libdir/libqlink.so.0" >/dev/null ||
		fail "$1 does not load libqlink from the prefix: $(ldd "$1" | grep qlink)"
}

# ---- 1. pkg-config, plain cc -------------------------------------------------
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pkg-config --exists 'qlink >= 0.1' || fail "pkg-config does not find qlink"
mkdir -p "$tmp/pc"
# pkg-config's output is shell-quoted (the prefix has a space): eval it
eval "cflags=($(pkg-config --cflags qlink))"
eval "libs=($(pkg-config --libs qlink))"
# shellcheck disable=SC2086
"$cc" -std=gnu11 -Wall -Werror $extra "${cflags[@]}" "$src/examples/verbs_hello.c" -o "$tmp/pc/hello" \
	"${libs[@]}" -Wl,-rpath,"$libdir" || fail "cc with pkg-config qlink"
runs "$tmp/pc/hello"
loads_prefix "$tmp/pc/hello"
cat >"$tmp/ctl.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <qlink/qlink.h>
int main(void)
{
	printf("qlink %s (headers %s)\n", ql_version(), QL_VERSION_STRING);
	return strcmp(ql_version(), QL_VERSION_STRING) != 0 || !QL_VERSION_CHECK(0, 1, 0) ||
	       QL_VERSION_CHECK(QL_VERSION_MAJOR + 1, 0, 0) || ql_ctl_type_name(QL_CTL_DISCOVER) == NULL;
}
C
eval "cflags=($(pkg-config --cflags qlink-control))"
eval "libs=($(pkg-config --libs qlink-control))"
# shellcheck disable=SC2086
"$cc" -std=gnu11 -Wall -Werror $extra "${cflags[@]}" "$tmp/ctl.c" -o "$tmp/pc/ctl" "${libs[@]}" \
	-Wl,-rpath,"$libdir" || fail "cc with pkg-config qlink-control"
"$tmp/pc/ctl" || fail "the qlink-control program"
echo "pkg-config: $(pkg-config --cflags --libs qlink)"

# ---- 2. CMake find_package ---------------------------------------------------
mkdir -p "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.18)
project(qlink_user C)
find_package(qlink 0.1 REQUIRED)
add_executable(hello "$src/examples/verbs_hello.c")
target_link_libraries(hello qlink::qlink)
add_executable(hello_static "$src/examples/verbs_hello.c")
target_link_libraries(hello_static qlink::qlink_static)
add_executable(ctl "$tmp/ctl.c")
target_link_libraries(ctl qlink::control)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
	-DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" >"$tmp/cm.log" 2>&1 ||
	{ cat "$tmp/cm.log"; fail "find_package(qlink)"; }
cmake --build "$tmp/cm/build" >>"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "build with find_package"; }
runs "$tmp/cm/build/hello"
loads_prefix "$tmp/cm/build/hello"
runs "$tmp/cm/build/hello_static"
if readelf -d "$tmp/cm/build/hello_static" | grep -q 'NEEDED.*libqlink'; then
	fail "hello_static needs the shared libqlink"
fi
"$tmp/cm/build/ctl" || fail "the qlink::control program"
# a newer major version must not be accepted
sed -i 's/find_package(qlink 0.1 REQUIRED)/find_package(qlink 99 REQUIRED)/' "$tmp/cm/CMakeLists.txt"
if cmake -S "$tmp/cm" -B "$tmp/cm/build99" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
	fail "find_package(qlink 99) succeeded"
fi

# ---- 3. qlinkd as a service --------------------------------------------------
unit=$prefix/lib/systemd/system/qlinkd.service
grep -qx 'Type=notify' "$unit" || fail "qlinkd.service is not Type=notify"
grep -qxF "ExecStart=\"$prefix/sbin/qlinkd\" --config \"$prefix/etc/qlink/qlinkd.yaml\"" "$unit" ||
	fail "qlinkd.service's ExecStart: $(grep ExecStart "$unit")"
cmp -s "$src/examples/qlinkd.yaml" "$prefix/etc/qlink/qlinkd.yaml" ||
	fail "etc/qlink/qlinkd.yaml is not examples/qlinkd.yaml"
# an operator's configuration is kept by the next install
echo "# the operator's" >>"$prefix/etc/qlink/qlinkd.yaml"
cmake --install "$build" --prefix "$prefix" >"$tmp/install2.log" || fail "second cmake --install"
grep -qx "# the operator's" "$prefix/etc/qlink/qlinkd.yaml" ||
	fail "cmake --install overwrote etc/qlink/qlinkd.yaml"
# DESTDIR, prefix /usr: the configuration in /etc, the unit naming /usr/sbin
dest="$tmp/dest dir.d"
DESTDIR=$dest cmake --install "$build" --prefix /usr >"$tmp/install3.log" ||
	{ cat "$tmp/install3.log"; fail "DESTDIR cmake --install"; }
[ -f "$dest/etc/qlink/qlinkd.yaml" ] || fail "DESTDIR install: no etc/qlink/qlinkd.yaml"
grep -qxF 'ExecStart="/usr/sbin/qlinkd" --config "/etc/qlink/qlinkd.yaml"' \
	"$dest/usr/lib/systemd/system/qlinkd.service" || fail "DESTDIR install: the unit's ExecStart"
# docs/qlinkd.md's first command, as written, from the installed documentation:
# examples/qlinkd.yaml names plugin_decoder.so, found in the plugin directory
first=$(sed -n '/^```sh$/{n;p;q}' "$src/docs/qlinkd.md")
[ "${first%%#*}" = "qlinkd --check-config examples/qlinkd.yaml   " ] ||
	fail "docs/qlinkd.md's first command is now '$first': update this check"
out=$(cd "$dest/usr/share/doc/qlink" && PATH="$dest/usr/sbin:$PATH" && ${first%%#*} 2>&1) ||
	fail "docs/qlinkd.md's first command in the installed tree: $out"
[ "$out" = "examples/qlinkd.yaml: OK" ] || fail "the first command printed: $out"
# and with the plugin loaded, against the installed default configuration
out=$("$dest/usr/sbin/qlinkd" --check-config "$dest/etc/qlink/qlinkd.yaml" --load-plugins 2>&1) ||
	fail "qlinkd --check-config /etc/qlink/qlinkd.yaml --load-plugins: $out"
# the default configuration is the install's own, wherever it was put: the
# /usr install's /etc (under DESTDIR), and a --prefix install's PREFIX/etc
"$dest/usr/sbin/qlinkd" --help | grep -qxF "default configuration: $dest/etc/qlink/qlinkd.yaml" ||
	fail "the DESTDIR qlinkd's default configuration: $("$dest/usr/sbin/qlinkd" --help | grep '^default conf')"
"$prefix/sbin/qlinkd" --help | grep -qxF "default configuration: $prefix/etc/qlink/qlinkd.yaml" ||
	fail "the --prefix qlinkd's default configuration: $("$prefix/sbin/qlinkd" --help | grep '^default conf')"
"$dest/usr/sbin/qlinkd" --help | grep -qxF "plugin directory: $dest/usr/lib/qlink/plugins" ||
	fail "the installed qlinkd's plugin directory: $("$dest/usr/sbin/qlinkd" --help | tail -n 1)"
echo "PASS: installed to '$prefix'; verbs_hello built with pkg-config and with find_package, all ran; qlinkd's service files, and docs/qlinkd.md's first command in a DESTDIR install"
