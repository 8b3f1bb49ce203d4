#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# install-check.sh MESON BUILD_DIR SOURCE_DIR TEST_NVTHREADS -- `meson install`
# into a scratch directory, build the NVthreads-style programs of SOURCE_DIR
# (tests/nvthreads) with nothing but what pkg-config says about the
# installed pmthreads, as C and as C++ and with -Werror, then run
# test_nvthreads on them with the installed library and pmthreads-recover.
set -eu
MESON=$1 BUILD=$2 SRC=$3 TEST=$4
dest=$(mktemp -d /tmp/pmt-nvt-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$MESON" install -C "$BUILD" --no-rebuild --quiet --destdir "$dest" >"$dest/log" 2>&1 ||
	{ cat "$dest/log"; fail "meson install"; }

pc=$(dirname "$(find "$dest" -name pmthreads.pc)")
inc=$(dirname "$(find "$dest" -name pmthreads.h)")
[ -f "$inc/nvrecovery.h" ] || fail "nvrecovery.h is not installed beside pmthreads.h ($inc)"
# The .pc file names the final prefix; the sysroot puts it under $dest.
flags=$(PKG_CONFIG_PATH="$pc" PKG_CONFIG_SYSROOT_DIR="$dest" pkg-config --cflags --libs pmthreads)
case $flags in *"-I$inc"*) ;; *) fail "pkg-config --cflags does not name $inc: $flags" ;; esac
libdir=$(dirname "$(find "$dest" -name 'libpmthreads.so.0')")
echo "pkg-config: $flags"

bin=$dest/bin-nvt
mkdir "$bin"
for p in idiom kmeans rules own_crashed headers; do
	cc -std=gnu17 -Wall -Wextra -Werror -pthread -o "$bin/nvt_${p}_c" "$SRC/$p.c" $flags ||
		fail "$p.c does not build as C against the installed headers"
	c++ -std=gnu++17 -Wall -Wextra -Werror -pthread -o "$bin/nvt_${p}_cpp" "$SRC/$p.cpp" $flags ||
		fail "$p.cpp does not build as C++ against the installed headers"
done
cc -std=gnu17 -Wall -Wextra -Werror -pthread -DNVT_PMTHREADS_FIRST -o "$bin/nvt_headers_first_c" \
	"$SRC/headers.c" $flags || fail "headers.c (pmthreads.h first) does not build as C"
c++ -std=gnu++17 -Wall -Wextra -Werror -pthread -DNVT_PMTHREADS_FIRST \
	-o "$bin/nvt_headers_first_cpp" "$SRC/headers.cpp" $flags ||
	fail "headers.cpp (pmthreads.h first) does not build as C++"
echo "built: $(ls "$bin" | tr '\n' ' ')"

tool=$(find "$dest" -path '*/bin/pmthreads-recover')
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PMT_NVT_DIR="$bin" \
	PMTHREADS_RECOVER_TOOL="$tool" "$TEST"
