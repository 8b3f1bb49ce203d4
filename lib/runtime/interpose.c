/* SPDX-License-Identifier: BSD-3-Clause */
/* interpose -- the entry points interpose.h gives preload/ into base/ and
 * prim/.  See interpose.h. */
#include "runtime/interpose.h"

#include "base/log.h"
#include "base/own_fds.h"
#include "prim/prim.h"

/* preload's one-time set-ups (real.c's resolution of the libc functions). */
static prim_lock_t interposer_lock = PRIM_LOCK_INIT;
/* Held only while the real functions are looked up, once, before main;
 * a child that found it held looks them up again. */
PRIM_LOCK_NAMED(interposer_lock, interposer, "runtime/interpose: the real functions' lookup",
		PRIM_FORK_RESET);

void runtime_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vfatal(fmt, ap);
}

void runtime_interposer_lock(void)
{
	prim_lock(&interposer_lock);
}

void runtime_interposer_unlock(void)
{
	prim_unlock(&interposer_lock);
}

void runtime_cpu_relax(void)
{
	prim_cpu_relax();
}

/* own_fd_any first: one load while the runtime holds no descriptor. */
long runtime_syscall6(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
	return prim_syscall6(nr, a0, a1, a2, a3, a4, a5);
}

bool runtime_fd_is_own(int fd)
{
	return __builtin_expect(own_fd_any(), 0) && own_fd_is(fd);
}

int runtime_fd_vacate(int fd)
{
	return own_fd_any() ? own_fd_vacate(fd) : 0;
}

int runtime_fd_close_range(unsigned first, unsigned last, int flags,
			   int (*close_gap)(unsigned first, unsigned last, int flags))
{
	return own_fd_close_range(first, last, flags, close_gap);
}
