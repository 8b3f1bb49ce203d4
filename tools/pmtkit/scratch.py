# SPDX-License-Identifier: BSD-3-Clause
"""scratch.py -- where the scripts put their pools: a fresh temporary
directory on /dev/shm (memory, so PMEM_IS_PMEM_FORCE=1 is honest about it),
or the system's temporary directory where there is no /dev/shm."""

import os
import tempfile


def scratch_dir(prefix, parent=None):
    """A new directory named prefix + a random tail, under parent when given."""
    if parent is None and os.path.isdir("/dev/shm"):
        parent = "/dev/shm"
    return tempfile.mkdtemp(prefix=prefix, dir=parent)
