/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exec -- the preload's place in LD_PRELOAD, and the exec family.
 *
 * Owns: who inherits the preload.  A process that is not the target (a
 * wrapper such as time, timeout, env, or a shell that execs; see
 * lib/runtime/target.h) leaves LD_PRELOAD alone, so that the target it starts gets
 * the library.  The target removes the library from its LD_PRELOAD at start
 * (the user's own entries stay), so the programs it starts with system(),
 * popen() or posix_spawn run without it -- unless PMTHREADS_FOLLOW_CHILDREN=1,
 * which keeps the entry and makes every descendant a target of its own.
 *
 * An exec by the target releases its pool first (a final epoch and the
 * clean flag: runtime_shutdown), so that the new image, if it is the target
 * again, opens the pool as after a clean exit; the new image gets the
 * library back in its LD_PRELOAD only if it is the target (or with
 * PMTHREADS_FOLLOW_CHILDREN=1).  Interposed: execve, execv, execvp, execvpe,
 * execl, execlp, execle.  fexecve and execveat are not: an image started
 * through them is treated like any other child.
 *
 * Nothing here allocates from malloc: the new environment is built in an
 * anonymous mapping (in malloc mode malloc is the persistent heap).
 */
#include "base/config.h"
#include "base/export.h"
#include "base/log.h"
#include "preload.h"
#include "prim/prim.h"
#include "real.h"
#include "runtime/runtime.h"
#include "runtime/target.h"
#include "track/fault_signal.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* The LD_PRELOAD entry that loaded this library ("" when it was linked, not
 * preloaded). */
static char own_entry[PATH_MAX];
/* The process the constructor ran in.  A vfork() child shares our memory,
 * runtime state included, and runs no atfork handler: it must not shut down
 * the parent's runtime on its way to exec. */
static pid_t start_pid;

static bool is_separator(char c) { return c == ' ' || c == ':'; }

static bool same_file(const char *a, size_t alen, const struct stat *own)
{
	char path[PATH_MAX];
	if (alen == 0 || alen >= sizeof(path))
		return false;
	memcpy(path, a, alen);
	path[alen] = '\0';
	struct stat st;
	return stat(path, &st) == 0 && st.st_dev == own->st_dev && st.st_ino == own->st_ino;
}

/* Copy value (an LD_PRELOAD list) into out without the entries that are
 * this library; returns the length written. */
static size_t without_own(const char *value, char *out, size_t len)
{
	size_t n = 0;
	const char *p = value;
	size_t own_len = strlen(own_entry);
	while (*p != '\0') {
		while (is_separator(*p))
			p++;
		const char *start = p;
		while (*p != '\0' && !is_separator(*p))
			p++;
		size_t elen = (size_t)(p - start);
		if (elen == 0 || (elen == own_len && memcmp(start, own_entry, elen) == 0))
			continue;
		if (n + elen + 2 > len)
			break;
		if (n != 0)
			out[n++] = ' ';
		memcpy(out + n, start, elen);
		n += elen;
	}
	out[n] = '\0';
	return n;
}

static void find_own_entry(void)
{
	Dl_info info;
	struct stat own;
	const char *list = getenv("LD_PRELOAD");
	if (list == NULL || dladdr((void *)find_own_entry, &info) == 0 ||
	    info.dli_fname == NULL || stat(info.dli_fname, &own) != 0)
		return;
	for (const char *p = list; *p != '\0';) {
		while (is_separator(*p))
			p++;
		const char *start = p;
		while (*p != '\0' && !is_separator(*p))
			p++;
		size_t elen = (size_t)(p - start);
		if (same_file(start, elen, &own) && elen < sizeof(own_entry)) {
			memcpy(own_entry, start, elen);
			own_entry[elen] = '\0';
			return;
		}
	}
}

void preload_env_init(const struct config *c, bool is_target)
{
	start_pid = getpid();
	find_own_entry();
	if (!is_target)
		return;	/* a wrapper: the target further down needs the entry */
	if (c->follow_children) {
		/* Every descendant is a target of its own (its own default pool,
		 * or refused quietly when it would take ours). */
		unsetenv("PMTHREADS_PROGRAM");
		return;
	}
	const char *list = getenv("LD_PRELOAD");
	if (own_entry[0] == '\0' || list == NULL)
		return;
	char rest[4096];
	if (without_own(list, rest, sizeof(rest)) == 0)
		unsetenv("LD_PRELOAD");
	else
		setenv("LD_PRELOAD", rest, 1);
}

/* The environment for a new image: envp with the library's entry put into
 * or taken out of LD_PRELOAD.  Returns envp itself when nothing changes, or
 * an array in a mapping of *map_len bytes (free with prim_unmap). */
static char **exec_env(char *const envp[], bool want, size_t *map_len)
{
	*map_len = 0;
	if (own_entry[0] == '\0' || envp == NULL)
		return (char **)envp;
	size_t n = 0, found = (size_t)-1;
	for (; envp[n] != NULL; n++)
		if (strncmp(envp[n], "LD_PRELOAD=", 11) == 0)
			found = n;
	const char *old = found != (size_t)-1 ? envp[found] + 11 : "";
	size_t value_len = strlen(old) + strlen(own_entry) + 2;
	size_t len = (n + 2) * sizeof(char *) + value_len + 11;
	char **out = prim_map_any(len);
	if (out == NULL)
		return (char **)envp;
	*map_len = len;
	char *value = (char *)(out + n + 2);
	size_t cap = value_len + 11;
	if (want) {
		char rest[4096];
		size_t r = without_own(old, rest, sizeof(rest));
		snprintf(value, cap, "LD_PRELOAD=%s%s%s", own_entry, r != 0 ? " " : "", rest);
	} else {
		memcpy(value, "LD_PRELOAD=", 11);
		without_own(old, value + 11, cap - 11);
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (i != found)
			out[k++] = envp[i];
	if (value[11] != '\0')
		out[k++] = value;
	out[k] = NULL;
	return out;
}

/* The file execvp would run for name, resolved through PATH, into out. */
static bool resolve_in_path(const char *name, char *out, size_t len)
{
	if (strchr(name, '/') != NULL) {
		snprintf(out, len, "%s", name);
		return true;
	}
	const char *path = getenv("PATH");
	if (path == NULL)
		path = "/bin:/usr/bin";
	for (const char *p = path;;) {
		const char *colon = strchrnul(p, ':');
		int dlen = (int)(colon - p);
		int n = snprintf(out, len, "%.*s%s%s", dlen, p, dlen ? "/" : "", name);
		if (n > 0 && (size_t)n < len && access(out, X_OK) == 0)
			return true;
		if (*colon == '\0')
			return false;
		p = colon + 1;
	}
}

typedef int (*exec_fn)(const char *file, char *const argv[], char *const envp[]);

/* The new image inherits the mask: SIGSEGV blocked there when the program
 * blocks it (fault_signal.h). */
static int call_execve(const char *file, char *const argv[], char *const envp[])
{
	fault_signal_before_exec();
	int r = REAL(execve)(file, argv, envp);
	int e = errno;
	fault_signal_after_exec();
	errno = e;
	return r;
}

static int call_execvpe(const char *file, char *const argv[], char *const envp[])
{
	fault_signal_before_exec();
	int r = REAL(execvpe)(file, argv, envp);
	int e = errno;
	fault_signal_after_exec();
	errno = e;
	return r;
}

/* What every wrapper does: release the pool, fix the environment, exec. */
static int exec_as_target(exec_fn fn, const char *file, bool search, char *const argv[],
			  char *const envp[])
{
	if (!target_is_self())
		return fn(file, argv, envp);
	char resolved[PATH_MAX];
	bool found = search ? resolve_in_path(file, resolved, sizeof(resolved))
			    : (snprintf(resolved, sizeof(resolved), "%s", file), true);
	/* Only when the exec can succeed: a failed exec leaves this process
	 * running, and it should still be persisted. */
	bool runnable = found && access(resolved, X_OK) == 0;
	bool next_is_target = runnable && target_is_path(resolved);
	const struct config *c = config_get();
	bool released = false;
	if (runnable && getpid() == start_pid && runtime_state() == RUNTIME_RUNNING) {
		log_msg(LOG_INFO, "exec of %s: releasing the pool %s (final epoch)", resolved,
			c->pool_path);
		runtime_shutdown();
		released = true;
	}
	size_t map_len;
	char **env = exec_env(envp, next_is_target || c->follow_children, &map_len);
	int r = fn(file, argv, env);
	int e = errno;
	if (map_len != 0)
		prim_unmap(env, map_len);
	if (released)
		log_msg(LOG_WARN, "exec of %s failed (%s); this process is no longer persisted "
			"(its pool was released for the new image)", resolved, strerror(e));
	errno = e;
	return r;
}

PMT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_as_target(call_execve, path, false, argv, envp);
}

PMT_EXPORT int execv(const char *path, char *const argv[])
{
	return exec_as_target(call_execve, path, false, argv, environ);
}

PMT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return exec_as_target(call_execvpe, file, true, argv, envp);
}

PMT_EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_as_target(call_execvpe, file, true, argv, environ);
}

/* execl and friends: the variadic list as an argv array on the stack. */
#define ARGV_FROM_VA(first, ap, argv, extra)                                 \
	size_t argc_ = 1;                                                   \
	va_start(ap, first);                                                \
	while (va_arg(ap, char *) != NULL)                                  \
		argc_++;                                                    \
	va_end(ap);                                                         \
	if (argc_ > 65536) {                                                \
		errno = E2BIG;                                              \
		return -1;                                                  \
	}                                                                   \
	char *argv[argc_ + 1];                                              \
	va_start(ap, first);                                                \
	argv[0] = (char *)first;                                            \
	for (size_t i_ = 1; i_ <= argc_; i_++)                              \
		argv[i_] = va_arg(ap, char *);                              \
	extra;                                                              \
	va_end(ap)

PMT_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	ARGV_FROM_VA(arg, ap, argv, (void)0);
	return exec_as_target(call_execve, path, false, argv, environ);
}

PMT_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	ARGV_FROM_VA(arg, ap, argv, (void)0);
	return exec_as_target(call_execvpe, file, true, argv, environ);
}

PMT_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char *const *envp;
	ARGV_FROM_VA(arg, ap, argv, envp = va_arg(ap, char *const *));
	return exec_as_target(call_execve, path, false, argv, envp);
}
