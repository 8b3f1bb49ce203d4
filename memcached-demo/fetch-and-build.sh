#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fetch-and-build.sh -- build memcached-pmthreads: Debian 12's memcached source
# package with memcached-pmthreads.patch, linked with libpmthreads.  The meson
# option -Dmemcached (memcached-demo/meson.build) runs it: -F at configure time,
# the build as a target of `meson compile`.
#
# usage: fetch-and-build.sh [-B PMTHREADS_BUILD_DIR] [-o OUT_DIR] [-f] [-F] [-S]
#   -B DIR  the pmthreads Meson build directory to link against
#           (-I<src>/lib/include -L<DIR>/preload -lpmthreads, rpath to it);
#           default: pkg-config pmthreads if installed, else <src>/build
#   -o DIR  where to fetch, build and put the binaries
#           (default: <pmthreads build dir>/memcached-demo)
#   -f      rebuild from a fresh copy of the source even if up to date
#   -F      only fetch the source package (and check the build dependencies)
#   -S      also build memcached-stock-debug: the same source without the
#           patch, not linked with pmthreads (run-t-suite.sh runs it under
#           LD_PRELOAD)
# Result: OUT_DIR/memcached-pmthreads (Debian's configuration) and
# OUT_DIR/memcached-pmthreads-debug (memcached's debug build: the one its test
# suite runs; accepts -o relaxed_privileges and the debugtime command), and
# OUT_DIR/timedrun (the suite's helper).  The unpacked source with memcached's
# t/ suite is OUT_DIR/memcached-<version>.  Run it again to rebuild after a
# change of the patch or of libpmthreads (idempotent).  Exit status: 0 built,
# 1 error, 3 the source package could not be fetched (apt-get failed), 4 build
# dependencies missing.
#
# The source comes from the machine's own apt sources: the deb entries of
# /etc/apt/sources.list{,.d/*} are copied as deb-src entries into a private apt
# state under OUT_DIR (the system's apt configuration is not touched, no root
# needed for the fetch).  Build dependencies: build-essential, pkg-config,
# libevent-dev, libsasl2-dev, libssl-dev (optional: TLS), dpkg-dev (for
# dpkg-source).
set -euo pipefail
DEMO_DIR=$(cd "$(dirname "$0")" && pwd)
SRC_DIR=$(cd "$DEMO_DIR/.." && pwd)
PATCH=$DEMO_DIR/memcached-pmthreads.patch

die() { echo "fetch-and-build.sh: error: $*" >&2; exit 1; }
note() { echo "fetch-and-build.sh: $*" >&2; }

# the command line, how to link libpmthreads, OUT, the build dependencies and
# configure options: tools/pmtkit/memcached_build.py
mb() {
	PYTHONPATH=$SRC_DIR/tools python3 -B -m pmtkit.memcached_build "$@"
}
settings=$(mb setup "$@") || exit $?
eval "$settings"

# --- fetch the source package (once) ---
APT=$OUT/apt
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/sources"
: >"$APT/empty.list"
APT_OPTS=(-o "Dir::Etc::SourceList=$APT/empty.list" -o "Dir::Etc::SourceParts=$APT/sources"
	-o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache"
	-o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)")

if ! ls "$OUT"/memcached_*.dsc >/dev/null 2>&1; then
	# deb -> deb-src, from the machine's own configuration
	mb deb-src /etc/apt "$APT/sources"
	note "apt-get update (private state in $APT)"
	apt-get -q "${APT_OPTS[@]}" update >"$OUT/apt-update.log" 2>&1 ||
		{ note "apt-get update failed, see $OUT/apt-update.log"; exit 3; }
	# Debian 12's version: the installed memcached's when there is one, else
	# the newest in the configured (bookworm) sources.
	v=$(dpkg-query -W -f='${Version}' memcached 2>/dev/null || true)
	fetched=0
	for want in ${v:+"memcached=$v"} memcached; do
		note "apt-get source $want"
		if (cd "$OUT" && apt-get -q "${APT_OPTS[@]}" source "$want") >>"$OUT/apt-source.log" 2>&1; then
			fetched=1
			break
		fi
	done
	[ $fetched = 1 ] || { note "apt-get source memcached failed, see $OUT/apt-source.log"; exit 3; }
fi
orig=$(ls -d "$OUT"/memcached-[0-9]*/ 2>/dev/null | grep -v -- '-pmthreads/$' | head -n 1)
[ -n "$orig" ] && [ -f "$orig/memcached.c" ] || die "unpacked source not found in $OUT"
orig=${orig%/}
note "source: $orig"
[ $FETCH_ONLY = 0 ] || exit 0

# --- patched copy, configured with Debian's options (--enable-sasl --enable-tls) ---
WORK=$OUT/memcached-pmthreads-src
stamp="$(sha256sum "$PATCH" | cut -c1-16) $PM_CFLAGS $PM_LIBS ${CONFIGURE_OPTS[*]}"
if [ $FORCE = 1 ] || [ ! -f "$WORK/.pmthreads-stamp" ] || [ "$(cat "$WORK/.pmthreads-stamp")" != "$stamp" ]; then
	rm -rf "$WORK"
	cp -a "$orig" "$WORK"
	(cd "$WORK" && patch -p1 --forward <"$PATCH") >"$OUT/patch.log" 2>&1 ||
		die "the patch does not apply to $(basename "$orig"), see $OUT/patch.log"
	note "configure"
	(cd "$WORK" && ./configure "${CONFIGURE_OPTS[@]}" \
		CPPFLAGS="$PM_CFLAGS" LIBS="$PM_LIBS" >"$OUT/configure.log" 2>&1) ||
		die "configure failed, see $OUT/configure.log"
	echo "$stamp" >"$WORK/.pmthreads-stamp"
fi
# relink when libpmthreads changed (make does not know about it)
for b in memcached memcached-debug; do
	if [ "$PM_LIBFILE" -nt "$WORK/$b" ]; then rm -f "$WORK/$b"; fi
done
note "make"
if ! make -C "$WORK" -j"${JOBS:-2}" memcached memcached-debug timedrun >"$OUT/make.log" 2>&1; then
	grep -q "undefined reference to .\(nv\|pmthreads_\|crashed\)" "$OUT/make.log" &&
		note "$PM_LIBFILE does not export the pmthreads.h API (yet?)"
	die "build failed, see $OUT/make.log"
fi
install_bin() {   # install_bin FROM TO: replace TO atomically
	cp -f "$1" "$2.tmp" && mv -f "$2.tmp" "$2"
}
install_bin "$WORK/memcached" "$OUT/memcached-pmthreads"
install_bin "$WORK/memcached-debug" "$OUT/memcached-pmthreads-debug"
install_bin "$WORK/timedrun" "$OUT/timedrun"
for b in memcached-pmthreads memcached-pmthreads-debug; do
	ldd "$OUT/$b" | grep libpmthreads >/dev/null || die "$b is not linked with libpmthreads"
done
note "built $OUT/memcached-pmthreads and $OUT/memcached-pmthreads-debug ($("$OUT/memcached-pmthreads" -V))"

# --- the unpatched debug build, for the t/ suite under LD_PRELOAD ---
if [ $STOCK = 1 ]; then
	SWORK=$OUT/memcached-stock-src
	sstamp="${CONFIGURE_OPTS[*]}"
	if [ $FORCE = 1 ] || [ ! -f "$SWORK/.stock-stamp" ] || [ "$(cat "$SWORK/.stock-stamp")" != "$sstamp" ]; then
		rm -rf "$SWORK"
		cp -a "$orig" "$SWORK"
		note "configure (stock)"
		(cd "$SWORK" && ./configure "${CONFIGURE_OPTS[@]}" >"$OUT/configure-stock.log" 2>&1) ||
			die "configure failed, see $OUT/configure-stock.log"
		echo "$sstamp" >"$SWORK/.stock-stamp"
	fi
	note "make (stock)"
	make -C "$SWORK" -j"${JOBS:-2}" memcached-debug >"$OUT/make-stock.log" 2>&1 ||
		die "build failed, see $OUT/make-stock.log"
	install_bin "$SWORK/memcached-debug" "$OUT/memcached-stock-debug"
	note "built $OUT/memcached-stock-debug"
fi
echo "$OUT/memcached-pmthreads"
