# SPDX-License-Identifier: BSD-3-Clause
# pool-medium.sh -- sourced by the test scripts: where their pools go, for the
# whole suite at once (PMT_POOL_MEDIUM; tests/pool_medium.hpp is the C++ side,
# tools/pmtkit/scratch.py the Python one).
#   disk (the default, what users get): POOL_MEDIUM_DIR is PMT_DISK_DIR
#     (default /var/tmp), which must not be in memory, and PMEM_IS_PMEM_FORCE
#     unset: an ordinary file, on which PMTHREADS_NVM=auto picks the log
#     backend.  Left to the default on a machine without such a directory, the
#     script exits 77 (meson: SKIP) with the reason; asked for by name, 2.
#   pmem: POOL_MEDIUM_DIR is /dev/shm (TMPDIR or /tmp without it),
#     PMEM_IS_PMEM_FORCE exported (1 unless set): emulated persistent memory.
# POOL_MEDIUM_BACKEND: the nvm backend the runtime must pick there.
case ${PMT_POOL_MEDIUM:-disk} in
pmem)
	POOL_MEDIUM_DIR=/dev/shm
	[ -d "$POOL_MEDIUM_DIR" ] && [ -w "$POOL_MEDIUM_DIR" ] || POOL_MEDIUM_DIR=${TMPDIR:-/tmp}
	export PMEM_IS_PMEM_FORCE=${PMEM_IS_PMEM_FORCE:-1}
	POOL_MEDIUM_BACKEND=pmem
	;;
disk)
	POOL_MEDIUM_DIR=${PMT_DISK_DIR:-/var/tmp}
	pool_medium_why=""
	if ! [ -d "$POOL_MEDIUM_DIR" ] || ! [ -w "$POOL_MEDIUM_DIR" ]; then
		pool_medium_why="$POOL_MEDIUM_DIR is not a writable directory (set PMT_DISK_DIR to one on a disk)"
	else
		case $(stat -f -c %T "$POOL_MEDIUM_DIR") in
		tmpfs | ramfs)
			pool_medium_why="$POOL_MEDIUM_DIR is in memory, not on a disk (set PMT_DISK_DIR to a directory on one, or PMT_POOL_MEDIUM=pmem)"
			;;
		esac
	fi
	if [ -n "$pool_medium_why" ]; then
		if [ -z "${PMT_POOL_MEDIUM:-}" ]; then
			echo "SKIP: pools go on a file on a disk by default, and $pool_medium_why" >&2
			exit 77
		fi
		echo "PMT_POOL_MEDIUM=disk: $pool_medium_why" >&2
		exit 2
	fi
	unset PMEM_IS_PMEM_FORCE
	POOL_MEDIUM_BACKEND=log
	;;
*)
	echo "PMT_POOL_MEDIUM=$PMT_POOL_MEDIUM: expected disk (the default: pools in PMT_DISK_DIR, default /var/tmp) or pmem (pools on /dev/shm)" >&2
	exit 2
	;;
esac
