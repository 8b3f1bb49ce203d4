/* SPDX-License-Identifier: BSD-3-Clause */
/* privilege -- where a privileged program keeps its pool.  See privilege.h. */
#include "runtime/privilege.h"

#include "base/config.h"
#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

bool privilege_secure(void) { return prim_secure_exec(); }

static int refuse(const char *pool, const char *fmt, const char *place, const char *fix)
{
	char what[PATH_MAX + 200];
	snprintf(what, sizeof(what), fmt, place);
	err_set("this program runs with privileges its caller may not have (set-user-ID, "
		"set-group-ID or file capabilities), and its pool %s is not in a safe place: %s; "
		"so it runs WITHOUT persistence.  %s", pool, what, fix);
	err_set_cause(EACCES);
	return -1;
}

/* Directory st (named dir) may lead to the pool: nobody but root and the
 * effective uid can change what it holds.  last: the pool's own directory,
 * which no sticky bit excuses; own: it must be the effective uid's, 0700. */
static int check_dir(const char *pool, const char *dir, const struct stat *st, bool last, bool own)
{
	uid_t euid = prim_geteuid();
	const char *fix = "An administrator can make the place: install -d -m 0700 -o USER "
			  CONFIG_SECURE_POOL_DIR "/UID (with " CONFIG_SECURE_POOL_DIR
			  " owned by root, mode 0711)";
	if (st->st_uid != 0 && st->st_uid != euid)
		return refuse(pool, "the directory %s belongs to another user", dir, fix);
	if (own && (st->st_uid != euid || (st->st_mode & 077) != 0))
		return refuse(pool, "the directory %s is not the effective user's own with mode 0700",
			      dir, fix);
	bool writable = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
	bool sticky_root = (st->st_mode & S_ISVTX) != 0 && st->st_uid == 0;
	if (writable && (last || !sticky_root))
		return refuse(pool, "others may write in the directory %s", dir, fix);
	return 0;
}

int privilege_check_pool_path(const char *pool_path)
{
	const struct config *c = config_get();
	bool made_here = c->pool_dir_is_secure && strcmp(c->pool_path, pool_path) == 0;
	if (prim_geteuid() == prim_getuid())
		return refuse(pool_path, "%s",
			      "its effective user is its caller's (set-group-ID or file capabilities "
			      "only), so every file it could create would be the caller's to read and "
			      "replace", "Make it set-user-ID to a user of its own to persist it");
	if (pool_path[0] != '/')
		return refuse(pool_path, "%s", "the path is relative",
			      "Give pmthreads_set_pool an absolute path");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", pool_path);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	const char *file = slash + 1;
	/* The directories from / down, each opened under the one above it and
	 * never through a symbolic link. */
	int fd = prim_open("/", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return refuse(pool_path, "%s", "/ cannot be opened", "");
	struct stat st;
	int rc = -1;
	size_t depth = 0, n_dirs = 0;
	for (char *p = path + 1; *p != '\0'; p = strchr(p, '/') + 1) {
		n_dirs++;
		if (strchr(p, '/') == NULL)
			break;
	}
	if (prim_fstat(fd, &st) != 0 || check_dir(pool_path, "/", &st, n_dirs == 0, false) != 0)
		goto out;
	char *comp = path + 1;
	while (comp != NULL && *comp != '\0') {
		char *next = strchr(comp, '/');
		if (next != NULL)
			*next = '\0';
		depth++;
		bool last = depth == n_dirs;
		/* The default place's two directories under the secure root are
		 * made when missing: only root can make the first one. */
		bool may_make = made_here && depth + 2 > n_dirs;
		if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0 || comp[0] == '\0') {
			refuse(pool_path, "%s", "the path has an empty, . or .. component",
			       "Give pmthreads_set_pool a plain absolute path");
			goto out;
		}
		int sub = prim_openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
		if (sub < 0 && errno == ENOENT && may_make) {
			if (prim_mkdirat(fd, comp, last ? 0700 : 0711) != 0 && errno != EEXIST) {
				char why[PATH_MAX + 64];
				snprintf(why, sizeof(why), "%s (%s)", path, strerror(errno));
				refuse(pool_path, "its directory cannot be made: %s", why,
				       "An administrator can make the place: install -d -m 0700 -o "
				       "USER " CONFIG_SECURE_POOL_DIR "/UID (with " CONFIG_SECURE_POOL_DIR
				       " owned by root, mode 0711)");
				goto out;
			}
			sub = prim_openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
		}
		if (sub < 0) {
			char why[PATH_MAX + 64];
			snprintf(why, sizeof(why), "%s (%s%s)", path, strerror(errno),
				 errno == ELOOP || errno == ENOTDIR ? ": a symbolic link or no directory"
								    : "");
			refuse(pool_path, "its directory cannot be opened: %s", why, "");
			goto out;
		}
		prim_close(fd);
		fd = sub;
		if (prim_fstat(fd, &st) != 0 || check_dir(pool_path, path, &st, last,
							  last && made_here) != 0)
			goto out;
		if (next == NULL)
			break;
		*next = '/';
		comp = next + 1;
	}
	/* A pool already there: a regular file of root's or the effective
	 * uid's that no group or other may read or write. */
	if (prim_fstatat(fd, file, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != prim_geteuid()) ||
		    (st.st_mode & 077) != 0) {
			refuse(pool_path, "the file is %s", !S_ISREG(st.st_mode) ? "not a regular file"
				: (st.st_mode & 077) != 0 ? "open to its group or others"
							  : "another user's",
			       "Remove it, or make it the effective user's with mode 0600");
			goto out;
		}
	}
	rc = 0;
out:
	prim_close(fd);
	return rc;
}
