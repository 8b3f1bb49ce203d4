# SPDX-License-Identifier: BSD-3-Clause
"""scratch.py -- where the scripts put their pools: a fresh temporary
directory on /dev/shm (memory, so PMEM_IS_PMEM_FORCE=1 is honest about it),
or the system's temporary directory where there is no /dev/shm."""

import os
import sys
import tempfile


def scratch_dir(prefix, parent=None):
    """A new directory named prefix + a random tail, under parent when given."""
    if parent is None and os.path.isdir("/dev/shm"):
        parent = "/dev/shm"
    return tempfile.mkdtemp(prefix=prefix, dir=parent)


def pool_medium():
    """PMT_POOL_MEDIUM, the test suite's switch (tools/pool-medium.sh is the
    shell side, tests/pool_medium.hpp the C++ one): "disk" (the default, what
    users get: pools in PMT_DISK_DIR, default /var/tmp, PMEM_IS_PMEM_FORCE
    unset: the log backend) or "pmem" (pools on /dev/shm,
    PMEM_IS_PMEM_FORCE=1)."""
    m = os.environ.get("PMT_POOL_MEDIUM") or "disk"
    if m not in ("pmem", "disk"):
        raise SystemExit("PMT_POOL_MEDIUM=%s: expected disk (the default: pools in PMT_DISK_DIR, "
                         "default /var/tmp) or pmem (pools on /dev/shm)" % m)
    return m


def pool_dir(prefix, parent=None):
    """A new directory for pools on the medium of pool_medium(), under parent
    when given; env_for_pools(os.environ) goes with it.  With the medium left
    to its default, a disk directory in memory ends the script with status 77
    (meson: SKIP) and the reason; asked for by name, it is an error."""
    if parent is None and pool_medium() == "disk":
        parent = os.environ.get("PMT_DISK_DIR") or "/var/tmp"
        if _in_memory(parent):
            why = ("%s is in memory, not on a disk (set PMT_DISK_DIR to a directory on one, "
                   "or PMT_POOL_MEDIUM=pmem)" % parent)
            if not os.environ.get("PMT_POOL_MEDIUM"):
                sys.stderr.write("SKIP: pools go on a file on a disk by default, and %s\n" % why)
                raise SystemExit(77)
            raise SystemExit("PMT_POOL_MEDIUM=disk: " + why)
    return scratch_dir(prefix, parent)


def env_for_pools(env):
    """Sets env (a dict) for a pool on the medium: PMEM_IS_PMEM_FORCE=1 on
    pmem unless set, and removed on disk (a forced "is pmem" would pick the
    pmem backend on an ordinary file)."""
    if pool_medium() == "disk":
        env.pop("PMEM_IS_PMEM_FORCE", None)
    else:
        env.setdefault("PMEM_IS_PMEM_FORCE", "1")
    return env


def _in_memory(path):
    """Whether path is on tmpfs or ramfs (the mount table's longest match)."""
    path = os.path.realpath(path)
    best, fstype = "", ""
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            mnt = fields[1].replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, fstype = mnt, fields[2]
    return fstype in ("tmpfs", "ramfs")
