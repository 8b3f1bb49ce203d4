/* SPDX-License-Identifier: BSD-3-Clause */
/* exec_env -- the library's place in LD_PRELOAD, and exec.  See exec_env.h. */
#include "runtime/exec_env.h"

#include "base/config.h"
#include "base/log.h"
#include "prim/prim.h"
#include "runtime/runtime.h"
#include "runtime/target.h"
#include "track/fault_signal.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The LD_PRELOAD entry that loaded this library ("" when it was linked, not
 * preloaded).  Written once by exec_env_init, before main. */
static char own_entry[PATH_MAX];
/* The process the constructor ran in.  A vfork() child shares our memory,
 * runtime state included, and runs no atfork handler: it must not shut down
 * the parent's runtime on its way to exec. */
static pid_t start_pid;

static bool is_separator(char c) { return c == ' ' || c == ':'; }

/* The next entry of the LD_PRELOAD list at *p (entries are separated by
 * spaces or colons): its start, with its length in *len and *p moved past
 * it; NULL at the end of the list. */
static const char *next_entry(const char **p, size_t *len)
{
	while (is_separator(**p))
		(*p)++;
	if (**p == '\0')
		return NULL;
	const char *start = *p;
	while (**p != '\0' && !is_separator(**p))
		(*p)++;
	*len = (size_t)(*p - start);
	return start;
}

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
	const char *start;
	size_t elen;
	while ((start = next_entry(&p, &elen)) != NULL) {
		if (elen == own_len && memcmp(start, own_entry, elen) == 0)
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
	const char *p = list, *start;
	size_t elen;
	while ((start = next_entry(&p, &elen)) != NULL) {
		if (same_file(start, elen, &own) && elen < sizeof(own_entry)) {
			memcpy(own_entry, start, elen);
			own_entry[elen] = '\0';
			return;
		}
	}
}

void exec_env_init(const struct config *c, bool is_target)
{
	start_pid = prim_getpid();
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
static char **new_image_env(char *const envp[], bool want, size_t *map_len)
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

/* The new image inherits the mask: SIGSEGV blocked there when the program
 * blocks it (fault_signal.h). */
static int exec_with_mask(exec_env_fn fn, const char *file, char *const argv[],
			  char *const envp[])
{
	fault_signal_before_exec();
	int r = fn(file, argv, envp);
	int e = errno;
	fault_signal_after_exec();
	errno = e;
	return r;
}

int exec_env_exec(exec_env_fn fn, const char *file, bool search, char *const argv[],
		  char *const envp[])
{
	if (!target_is_self())
		return exec_with_mask(fn, file, argv, envp);
	char resolved[PATH_MAX];
	bool found = search ? resolve_in_path(file, resolved, sizeof(resolved))
			    : (snprintf(resolved, sizeof(resolved), "%s", file), true);
	/* Only when the exec can succeed: a failed exec leaves this process
	 * running, and it should still be persisted. */
	bool runnable = found && access(resolved, X_OK) == 0;
	bool next_is_target = runnable && target_is_path(resolved);
	const struct config *c = config_get();
	bool released = false;
	if (runnable && prim_getpid() == start_pid && runtime_state() == RUNTIME_RUNNING) {
		log_msg(LOG_INFO, "exec of %s: releasing the pool %s (final epoch)", resolved,
			c->pool_path);
		runtime_shutdown();
		released = true;
	}
	size_t map_len;
	char **env = new_image_env(envp, next_is_target || c->follow_children, &map_len);
	int r = exec_with_mask(fn, file, argv, env);
	int e = errno;
	if (map_len != 0)
		prim_unmap(env, map_len);
	if (released)
		log_msg(LOG_WARN, "exec of %s failed (%s); this process is no longer persisted "
			"(its pool was released for the new image)", resolved, strerror(e));
	errno = e;
	return r;
}
