/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * real -- the libc functions that preload/ wraps, resolved with
 * dlsym(RTLD_NEXT) / dlvsym.
 *
 * Owns: finding the next definition of an interposed symbol (the symbols:
 * real_list.h).  Resolution
 * happens once, in the library constructor, or earlier on the first call of a
 * wrapper (another library's constructor may lock a mutex before ours runs).
 * Owns it for every symbol but the malloc family's, which malloc_next.h
 * finds (dlsym may call calloc), so there is no recursion.  After
 * resolution a wrapper only loads a pointer, which is safe in signal
 * handlers.
 */
#ifndef PMT_PRELOAD_REAL_H
#define PMT_PRELOAD_REAL_H

#include <aio.h>
#include <pthread.h>
#include <semaphore.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <dirent.h>
#include <sys/stat.h>
#include <threads.h>
#include <time.h>
/* The types of the generated wrappers' functions (syscall_wrappers_real.h). */
#include <fcntl.h>
#include <linux/capability.h>
#include <mqueue.h>
#include <sched.h>
#include <sys/msg.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/statfs.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/timex.h>
#include <sys/utsname.h>
#include <sys/wait.h>

/* One function pointer per line of real_list.h. */
struct real_fns {
#define REAL_FN(ret, field, symbol, params) ret(*field) params;
#define REAL_FN_VERSION(ret, field, symbol, version, params) ret(*field) params;
#define REAL_FN_NORETURN(field, symbol, params) void(*field) params __attribute__((noreturn));
#include "real_list.h"
#undef REAL_FN
#undef REAL_FN_VERSION
#undef REAL_FN_NORETURN
};

extern struct real_fns real_fn;
extern int real_resolved;

/* Resolve every entry (idempotent; a missing symbol is fatal, since the
 * wrapper exists only because libc defines it). */
void real_resolve(void);

/* The next definition of an OpenMP runtime's entry point (openmp.c), which
 * exists only when the program loaded one: looked up on the first call
 * rather than in real_resolve (the runtime may be dlopen'd later, even with
 * RTLD_LOCAL).  *slot caches it; a call with no runtime defining the name is
 * fatal, naming it. */
void *real_openmp(void **slot, const char *name);

/* The real function f, resolving the table first if needed. */
#define REAL(f)                                                             \
	((__builtin_expect(__atomic_load_n(&real_resolved, __ATOMIC_ACQUIRE), 1) \
		  ? (void)0                                                 \
		  : real_resolve()),                                        \
	 real_fn.f)

#endif
