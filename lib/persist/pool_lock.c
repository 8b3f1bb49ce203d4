/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_lock -- the pool file's lock and who holds it.  See pool_internal.h. */
#include "persist/pool_internal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <string.h>

int pool_lock_fd(int fd, bool shared) { return prim_lock_file(fd, shared); }

pid_t pool_report_locked(int fd, const char *path, const struct stat *st)
{
	bool reader = prim_file_read_locked(fd);
	pid_t pid = 0;
	unsigned char buf[POOL_HEADER_READ];
	if (!reader && prim_pread_all(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) &&
	    memcmp(buf, POOL_MAGIC, 8) == 0) {
		uint64_t v;
		memcpy(&v, buf + POOL_HOLDER_OFF, sizeof(v));
		if (v <= INT32_MAX && prim_process_alive((pid_t)v))
			pid = (pid_t)v;
	}
	if (pid == 0 && prim_file_open_here(fd, st))
		pid = prim_getpid();
	if (pid == 0)
		pid = prim_process_with_file(st);
	const char *how = reader ? "being read (shared lock)" : "in use (exclusive lock)";
	if (pid == prim_getpid())
		err_set("pool %s is already open in this process (%s); open it once, or use "
			"another PMTHREADS_POOL path", path, how);
	else if (pid != 0)
		err_set("pool %s is %s by process %d; stop that process first, or use another "
			"PMTHREADS_POOL path", path, how, (int)pid);
	else
		err_set("pool %s is %s by another process (pid unknown); stop it first, or use "
			"another PMTHREADS_POOL path", path, how);
	return pid;
}

