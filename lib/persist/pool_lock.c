/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_lock -- the pool file's lock and who holds it.  See pool_internal.h. */
#include "persist/pool_internal.h"

#include "base/log.h"
#include "base/own_fds.h"
#include "persist/nvm_backend.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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


/* FNV-1a, 64 bits: the file name in the name lock's key (a key must fit a
 * socket address; a collision of two names in one directory would only make
 * them exclude each other). */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static int open_dir(struct pool *p, const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	const char *base = slash != NULL ? slash + 1 : path;
	if (strlen(base) >= sizeof(p->name) || base[0] == '\0') {
		err_set("pool %s: its file name is empty or longer than %zu bytes; set "
			"PMTHREADS_POOL to a file path", path, sizeof(p->name) - 1);
		err_set_cause(EINVAL);
		return -1;
	}
	snprintf(p->name, sizeof(p->name), "%s", base);
	p->dir_fd = prim_open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (p->dir_fd < 0) {
		err_set_errno(errno, "cannot open pool %s: its directory %s", path, dir);
		return -1;
	}
	own_fd_keep(&p->dir_fd, "pool directory");
	return 0;
}

/* Where the directory dir_fd holds is now: the kernel's name for it
 * (/proc/self/fd), absolute and free of symbolic links.  false when it
 * cannot be read or the directory was removed. */
static bool dir_now(const struct pool *p, char *out, size_t len)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", p->dir_fd);
	ssize_t n = prim_readlink(link, out, len - 1);
	if (n <= 0 || out[0] != '/')
		return false;
	out[n] = '\0';
	static const char deleted[] = " (deleted)";
	size_t dl = sizeof(deleted) - 1;
	return !((size_t)n > dl && strcmp(out + n - dl, deleted) == 0);
}

/* p->dir_path: the held directory's path, once, at open -- kept only if it
 * leads back to that directory now (else the check could fire on a path
 * that never did: a directory outside the process's root, say). */
static void resolve_dir(struct pool *p, const struct stat *d)
{
	p->dir_dev = (uint64_t)d->st_dev;
	p->dir_ino = (uint64_t)d->st_ino;
	struct stat back;
	if (!dir_now(p, p->dir_path, sizeof(p->dir_path)) || prim_stat(p->dir_path, &back) != 0 ||
	    (uint64_t)back.st_dev != p->dir_dev || (uint64_t)back.st_ino != p->dir_ino) {
		log_msg(LOG_DEBUG, "pool %s: its directory's path cannot be resolved (is /proc "
			"mounted?); a rename of the directory will not be noticed", p->path);
		p->dir_path[0] = '\0';
	}
}

/* Whether process pid, which holds the pool's name lock, has open what a
 * pmthreads program holding this pool has: the pool's directory (dir_fd,
 * from open to close), the file now at the name, or a deleted file of this
 * name (a pool deleted under it).  1 (what says which), 0, -1 (its
 * descriptors cannot be read: errno). */
static int holder_has_pool(const struct pool *p, pid_t pid, const struct stat *dir, char *what,
			   size_t what_len)
{
	struct stat files[2];
	size_t n = 0;
	files[n++] = *dir;
	if (prim_fstatat(p->dir_fd, p->name, &files[n], AT_SYMLINK_NOFOLLOW) == 0)
		n++;
	char deleted[PATH_MAX + 256];
	bool named = p->dir_path[0] != '\0' &&
		     snprintf(deleted, sizeof(deleted), "%s/%s", strcmp(p->dir_path, "/") == 0 ? "" :
			      p->dir_path, p->name) < (int)sizeof(deleted);
	return prim_process_holds(pid, files, n, named ? deleted : NULL, what, what_len);
}

enum pool_error pool_lock_name(struct pool *p, const struct pool_open_options *o)
{
	if (open_dir(p, o->path) != 0)
		return POOL_ERR_REFUSED;
	struct stat d;
	if (prim_fstat(p->dir_fd, &d) != 0) {
		err_set_errno(errno, "cannot open pool %s: its directory", o->path);
		return POOL_ERR_REFUSED;
	}
	resolve_dir(p, &d);
	char key[100];
	snprintf(key, sizeof(key), "pmthreads-pool/%llx/%llx/%016llx",
		 (unsigned long long)d.st_dev, (unsigned long long)d.st_ino,
		 (unsigned long long)name_hash(p->name));
	pid_t holder;
	uid_t holder_uid;
	p->name_fd = prim_name_lock(key, &holder, &holder_uid);
	if (p->name_fd >= 0) {
		own_fd_keep(&p->name_fd, "pool name lock");
		return POOL_OK;
	}
	if (errno != EADDRINUSE) {
		/* No unix sockets here (a seccomp filter, say): the file's
		 * own lock is all there is. */
		log_msg(LOG_DEBUG, "pool %s: no name lock (%s); the file's lock alone guards it",
			o->path, strerror(errno));
		return POOL_OK;
	}
	if (holder != 0 && holder_uid != prim_geteuid() && holder_uid != 0) {
		log_msg(LOG_WARN, "pool %s: the name lock %s is held by process %d of uid %u, "
			"which cannot hold this user's pool; passed over (the pool file's own "
			"lock still guards it)", o->path, key, (int)holder, (unsigned)holder_uid);
		return POOL_OK;
	}
	/* SO_PEERCRED names the process that bound the name; a child it
	 * forked without our fork handler (a raw clone) may outlive it. */
	pid_t binder = holder;
	if (holder != 0 && holder != prim_getpid() && !prim_process_alive(holder))
		holder = 0;
	char what[PATH_MAX + 64], comm[32];
	int has = -1, unread = 0;
	if (holder != 0 && holder != prim_getpid()) {
		has = holder_has_pool(p, holder, &d, what, sizeof(what));
		unread = errno;
	}
	/* Who else has the name's socket open: such a child (beside a binder
	 * that closed its copy, or in its place), or the holder of a name
	 * SO_PEERCRED could not tell (another pid namespace). */
	if (holder == 0 || has == 0) {
		pid_t other = prim_name_lock_holder(key, holder);
		if (other != 0) {
			holder = other;
			has = holder_has_pool(p, holder, &d, what, sizeof(what));
			unread = errno;
		}
	}
	if (holder != 0 && holder != prim_getpid())
		prim_process_name(holder, comm, sizeof(comm));
	if (has == 0) {
		/* Bound by a process that holds no pool here: no pmthreads
		 * program holding the pool is without its directory open
		 * (pool_close closes the name first). */
		log_msg(LOG_WARN, "pool %s: the name lock %s is held by process %d (%s), which "
			"has neither the pool's directory nor a file of its name open, so it holds "
			"no pool here; passed over (the pool file's own lock still guards it; while "
			"that process holds the name, a second program could run at this path if "
			"this pool were deleted)", o->path, key, (int)holder, comm);
		return POOL_OK;
	}
	if (o->lock_holder != NULL)
		*o->lock_holder = holder;
	if (holder == prim_getpid())
		err_set("pool %s is already open in this process; open it once, or use another "
			"PMTHREADS_POOL path", o->path);
	else if (holder != 0 && has == 1)
		err_set("pool %s is in use by process %d (%s), which holds its path (the name "
			"lock %s) and has this pool's directory or file open (%s); stop that process "
			"first, or use another PMTHREADS_POOL path", o->path, (int)holder, comm, key, what);
	else if (holder != 0)
		err_set("pool %s is in use by process %d (%s), which holds its path (the name "
			"lock %s); whether it holds this pool cannot be told, its descriptors cannot "
			"be read here (%s): check with `ls -l /proc/%d/fd` and stop it, or use another "
			"PMTHREADS_POOL path", o->path, (int)holder, comm, key, strerror(unread),
			(int)holder);
	else if (binder != 0)
		err_set("pool %s is in use: its path (the name lock %s) is held, though process "
			"%d, which took it, has ended -- a child it started without exec still holds "
			"it (`ss -xlp | grep %s` names it, where this process may not look); stop that "
			"child first, or use another PMTHREADS_POOL path", o->path, key, (int)binder, key);
	else
		err_set("pool %s is in use by another process (pid unknown), which holds its "
			"path (the name lock %s; `ss -xlp | grep %s` names it); stop it first, or "
			"use another PMTHREADS_POOL path", o->path, key, key);
	return POOL_ERR_LOCKED;
}

int pool_bind_identity(struct pool *p, const struct stat *locked)
{
	p->dev = (uint64_t)locked->st_dev;
	p->ino = (uint64_t)locked->st_ino;
	p->lost[0] = '\0';
	if (p->dir_fd < 0)
		return 0;
	struct stat now;
	if (prim_fstatat(p->dir_fd, p->name, &now, AT_SYMLINK_NOFOLLOW) != 0 ||
	    (uint64_t)now.st_dev != p->dev || (uint64_t)now.st_ino != p->ino) {
		err_set("pool %s was removed or replaced while being opened; is another program "
			"replacing it?", p->path);
		err_set_cause(ESTALE);
		return -1;
	}
	return 0;
}

/* The directory moved: old and now are its path at open and now.  The
 * components they end with alike are below what was renamed, so that
 * moving back the rest -- the directory renamed -- puts everything back:
 * /var/tmp/app renamed /var/tmp/app.old gives `mv /var/tmp/app.old
 * /var/tmp/app`, and for /var/tmp/x/app with x renamed x.old, `mv
 * /var/tmp/x.old /var/tmp/x`. */
static void note_moved(struct pool *p, const char *now, bool replaced)
{
	p->dir_moved = true;
	const char *old = p->dir_path;
	size_t a = strlen(old), b = strlen(now);
	for (;;) {
		size_t ia = a, ib = b;
		while (ia > 0 && old[ia - 1] != '/')
			ia--;
		while (ib > 0 && now[ib - 1] != '/')
			ib--;
		/* ia, ib: where the last components start; stop before "/". */
		if (ia <= 1 || ib <= 1 || a - ia != b - ib || memcmp(old + ia, now + ib, a - ia) != 0)
			break;
		a = ia - 1;
		b = ib - 1;
	}
	snprintf(p->put_back, sizeof(p->put_back), "mv '%.*s' '%.*s'", (int)b, now, (int)a, old);
	snprintf(p->lost, sizeof(p->lost), "was moved with its directory %s, which is now %s%s",
		 old, now, replaced ? " (another directory is at the old path)" : "");
}

/* The second half of the check: p->dir_path still leads to the directory
 * that holds the pool. */
static bool dir_path_holds(struct pool *p)
{
	if (p->dir_path[0] == '\0')
		return true;
	struct stat d;
	bool replaced = false;
	if (prim_stat(p->dir_path, &d) == 0) {
		if ((uint64_t)d.st_dev == p->dir_dev && (uint64_t)d.st_ino == p->dir_ino)
			return true;
		replaced = true;
	} else if (errno != ENOENT && errno != ENOTDIR) {
		return true;	/* cannot tell (EACCES, ELOOP, ENOMEM...): the next check asks again */
	}
	char now[PATH_MAX];
	/* A move is confirmed by the kernel's own name for the directory.
	 * When it cannot be read (no /proc after a chroot, say) or is still
	 * the path it had, what changed is this process's view of the names
	 * (a chroot, another mount namespace, a mount over a directory above
	 * it), not where the directory is: cannot tell.  (A directory
	 * removed, the kernel's "(deleted)", lost the pool's name first.) */
	if (!dir_now(p, now, sizeof(now)) || strcmp(now, p->dir_path) == 0)
		return true;
	note_moved(p, now, replaced);
	nvm_latch_error(p->nvm, ESTALE);
	return false;
}

bool pool_identity_holds(struct pool *p)
{
	if (p->dir_fd < 0 || p->read_only)
		return true;
	if (p->lost[0] != '\0')
		return false;
	struct stat held, named;
	if (prim_fstatat(p->dir_fd, p->name, &named, AT_SYMLINK_NOFOLLOW) == 0) {
		if ((uint64_t)named.st_dev == p->dev && (uint64_t)named.st_ino == p->ino)
			return dir_path_holds(p);
		snprintf(p->lost, sizeof(p->lost), "was replaced (its name now leads to another file)");
	} else if (errno != ENOENT && errno != ENOTDIR) {
		return true;	/* cannot tell (EACCES, ENOMEM...): the next epoch asks again */
	} else if (prim_fstat(p->fd, &held) == 0 && held.st_nlink == 0) {
		snprintf(p->lost, sizeof(p->lost), "was deleted");
	} else {
		snprintf(p->lost, sizeof(p->lost), "was renamed (nothing is at its path now)");
	}
	nvm_latch_error(p->nvm, ESTALE);
	return false;
}
