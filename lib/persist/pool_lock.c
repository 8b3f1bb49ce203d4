/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_lock -- the pool file's lock and who holds it.  See pool_internal.h. */
#include "persist/pool_internal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pool_lock_fd(int fd, bool shared)
{
	struct flock fl = { .l_type = shared ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET };
	return fcntl(fd, F_OFD_SETLK, &fl);
}

static bool pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Some other process with the file open: a candidate holder when the header
 * names none (a read-only holder writes nothing).  Only processes whose
 * /proc/PID/fd we may read are seen. */
static pid_t scan_proc_for_file(const struct stat *st)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return 0;
	pid_t self = getpid(), found = 0;
	struct dirent *e;
	while (found == 0 && (e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end != '\0' || pid <= 0 || pid == self)
			continue;
		char dir[64];
		snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
		DIR *fds = opendir(dir);
		if (fds == NULL)
			continue;
		struct dirent *f;
		while ((f = readdir(fds)) != NULL) {
			char link[sizeof(dir) + sizeof(f->d_name)];
			struct stat fst;
			snprintf(link, sizeof(link), "%s/%s", dir, f->d_name);
			if (f->d_name[0] != '.' && stat(link, &fst) == 0 && fst.st_dev == st->st_dev &&
			    fst.st_ino == st->st_ino) {
				found = (pid_t)pid;
				break;
			}
		}
		closedir(fds);
	}
	closedir(d);
	return found;
}

/* Another descriptor of this process refers to the file (fd excepted). */
static bool open_here(int fd, const struct stat *st)
{
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return false;
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d)) != NULL) {
		char *end;
		long n = strtol(e->d_name, &end, 10);
		struct stat fst;
		if (*end == '\0' && e->d_name[0] != '\0' && n != fd && n != dirfd(d) &&
		    fstat((int)n, &fst) == 0 && fst.st_dev == st->st_dev && fst.st_ino == st->st_ino)
			found = true;
	}
	closedir(d);
	return found;
}

pid_t pool_report_locked(int fd, const char *path, const struct stat *st)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	bool reader = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_RDLCK;
	pid_t pid = 0;
	unsigned char buf[POOL_HEADER_READ];
	if (!reader && prim_pread_all(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) &&
	    memcmp(buf, POOL_MAGIC, 8) == 0) {
		uint64_t v;
		memcpy(&v, buf + POOL_HOLDER_OFF, sizeof(v));
		if (v <= INT32_MAX && pid_alive((pid_t)v))
			pid = (pid_t)v;
	}
	if (pid == 0 && open_here(fd, st))
		pid = getpid();
	if (pid == 0)
		pid = scan_proc_for_file(st);
	const char *how = reader ? "being read (shared lock)" : "in use (exclusive lock)";
	if (pid == getpid())
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

