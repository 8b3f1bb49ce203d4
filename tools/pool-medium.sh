# SPDX-License-Identifier: BSD-3-Clause
# pool-medium.sh -- sourced by the test scripts: where their pools go, for the
# whole suite at once (PMT_POOL_MEDIUM; tests/pool_medium.hpp is the C++ side,
# tools/pmtkit/scratch.py the Python one).
#   pmem (default): POOL_MEDIUM_DIR is /dev/shm (TMPDIR or /tmp without it),
#     PMEM_IS_PMEM_FORCE exported (1 unless set): emulated persistent memory;
#   disk: POOL_MEDIUM_DIR is PMT_DISK_DIR (default /var/tmp), which must not
#     be in memory, and PMEM_IS_PMEM_FORCE unset: an ordinary file, on which
#     PMTHREADS_NVM=auto picks the log backend.
# POOL_MEDIUM_BACKEND: the nvm backend the runtime must pick there.
case ${PMT_POOL_MEDIUM:-pmem} in
pmem)
	POOL_MEDIUM_DIR=/dev/shm
	[ -d "$POOL_MEDIUM_DIR" ] && [ -w "$POOL_MEDIUM_DIR" ] || POOL_MEDIUM_DIR=${TMPDIR:-/tmp}
	export PMEM_IS_PMEM_FORCE=${PMEM_IS_PMEM_FORCE:-1}
	POOL_MEDIUM_BACKEND=pmem
	;;
disk)
	POOL_MEDIUM_DIR=${PMT_DISK_DIR:-/var/tmp}
	[ -d "$POOL_MEDIUM_DIR" ] && [ -w "$POOL_MEDIUM_DIR" ] || {
		echo "PMT_POOL_MEDIUM=disk: $POOL_MEDIUM_DIR is not a writable directory (set PMT_DISK_DIR to one on a disk)" >&2
		exit 2
	}
	case $(stat -f -c %T "$POOL_MEDIUM_DIR") in
	tmpfs | ramfs)
		echo "PMT_POOL_MEDIUM=disk: $POOL_MEDIUM_DIR is in memory, not on a disk (set PMT_DISK_DIR to a directory on one)" >&2
		exit 2
		;;
	esac
	unset PMEM_IS_PMEM_FORCE
	POOL_MEDIUM_BACKEND=log
	;;
*)
	echo "PMT_POOL_MEDIUM=$PMT_POOL_MEDIUM: expected pmem (pools on /dev/shm) or disk (pools in PMT_DISK_DIR, default /var/tmp)" >&2
	exit 2
	;;
esac
