#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# install-check.sh MESON BUILD_DIR -- `meson install` into a scratch
# directory, then: the man pages are there and render without warnings, the
# bash completions load and complete, pkg-config finds what a user links
# with, and the installed pmthreads prints its help.
set -eu
MESON=$1 BUILD=$2
dest=$(mktemp -d /tmp/pmt-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$MESON" install -C "$BUILD" --no-rebuild --quiet --destdir "$dest" >"$dest.log" 2>&1 ||
	{ cat "$dest.log"; rm -f "$dest.log"; fail "meson install"; }
rm -f "$dest.log"

for page in man1/pmthreads.1 man1/pmthreads-recover.1 man7/pmthreads.7 man3/pmthreads.h.3 man3/nvmalloc.3 man3/nvrecover.3 man3/isCrashed.3; do
	f=$(find "$dest" -path "*/share/man/$page")
	[ -n "$f" ] || fail "$page is not installed"
	if command -v man >/dev/null; then
		out=$(MANWIDTH=80 man --warnings -l "$f" 2>"$dest/warn") || fail "man -l $page"
		[ ! -s "$dest/warn" ] || { cat "$dest/warn"; fail "$page renders with warnings"; }
		echo "$out" | grep -q '^NAME' || fail "$page has no NAME section"
	fi
done
echo "man pages: installed, render"

for c in pmthreads pmthreads-recover; do
	f=$(find "$dest" -path "*/bash-completion/completions/$c")
	[ -n "$f" ] || fail "the completion for $c is not installed"
done
bin=$(dirname "$(find "$dest" -path '*/bin/pmthreads')")
comp=$(dirname "$f")
if [ -f /usr/share/bash-completion/bash_completion ]; then
	got=$(PATH="$bin:$PATH" bash -c '
		source /usr/share/bash-completion/bash_completion
		source "$1/pmthreads"; source "$1/pmthreads-recover"
		complete -p pmthreads pmthreads-recover >/dev/null || exit 1
		COMP_WORDS=(pmthreads run --trac); COMP_CWORD=2; COMP_LINE="pmthreads run --trac"
		COMP_POINT=${#COMP_LINE}; _pmthreads; echo "${COMPREPLY[*]}"
		COMP_WORDS=(pmthreads-recover ch); COMP_CWORD=1; COMP_LINE="pmthreads-recover ch"
		COMP_POINT=${#COMP_LINE}; _pmthreads_recover; echo "${COMPREPLY[*]}"' _ "$comp" 2>/dev/null)
	[ "$got" = "--tracker
check" ] || fail "completion gave: $got"
	echo "bash completion: loads, completes"
fi

pc=$(dirname "$(find "$dest" -name pmthreads.pc)")
libs=$(PKG_CONFIG_PATH="$pc" pkg-config --libs pmthreads)
case $libs in *-lpmthreads*) ;; *) fail "pkg-config --libs: $libs" ;; esac
PKG_CONFIG_PATH="$pc" pkg-config --variable=preload pmthreads | grep -q 'libpmthreads.so.0$' ||
	fail "pkg-config has no preload variable"
echo "pkg-config: $libs"

"$bin/pmthreads" --help | grep -q PMTHREADS_INTERVAL_MS || fail "installed pmthreads --help"
find "$dest" -name LICENSE | grep -q . || fail "LICENSE is not installed"
echo "PASS"
