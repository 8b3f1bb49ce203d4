/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exec -- the exec family, forwarded to lib/runtime/exec_env.h (which owns
 * who inherits the preload and the pool's release before an exec).
 *
 * Interposed: execve, execv, execvp, execvpe, execl, execlp, execle.
 * fexecve and execveat are not: an image started through them is treated
 * like any other child.  The variadic ones build their argv on the stack.
 */
#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>

extern char **environ;

PMT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_env_exec(REAL(execve), path, false, argv, envp);
}

PMT_EXPORT int execv(const char *path, char *const argv[])
{
	return exec_env_exec(REAL(execve), path, false, argv, environ);
}

PMT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return exec_env_exec(REAL(execvpe), file, true, argv, envp);
}

PMT_EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_env_exec(REAL(execvpe), file, true, argv, environ);
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
	return exec_env_exec(REAL(execve), path, false, argv, environ);
}

PMT_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	ARGV_FROM_VA(arg, ap, argv, (void)0);
	return exec_env_exec(REAL(execvpe), file, true, argv, environ);
}

PMT_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char *const *envp;
	ARGV_FROM_VA(arg, ap, argv, envp = va_arg(ap, char *const *));
	return exec_env_exec(REAL(execve), path, false, argv, envp);
}
