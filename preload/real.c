/* SPDX-License-Identifier: BSD-3-Clause */
/* real -- resolving the interposed libc functions.  See real.h. */
#include "real.h"
#include "track/fault_signal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <dlfcn.h>
#include <stdatomic.h>

struct real_fns real_fn;
int real_resolved;

/* Resolution may run on two threads at once before the constructor; both
 * store the same values, but only one may publish. */
static prim_lock_t resolve_lock = PRIM_LOCK_INIT;

static void *next(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	if (p == NULL)
		log_fatal("cannot find the real %s in the C library", name);
	return p;
}

static void *next_version(const char *name, const char *version)
{
	void *p = dlvsym(RTLD_NEXT, name, version);
	if (p == NULL)
		log_fatal("cannot find the real %s@%s in the C library", name, version);
	return p;
}

#define NEXT(field, name) (*(void **)&real_fn.field = next(name))

void real_resolve(void)
{
	prim_lock(&resolve_lock);
	if (__atomic_load_n(&real_resolved, __ATOMIC_ACQUIRE)) {
		prim_unlock(&resolve_lock);
		return;
	}
	NEXT(execve, "execve");
	NEXT(write, "write");
	NEXT(writev, "writev");
	NEXT(send, "send");
	NEXT(sendto, "sendto");
	NEXT(sendmsg, "sendmsg");
	NEXT(sendmmsg, "sendmmsg");
	NEXT(sendfile, "sendfile");
	NEXT(sendfile64, "sendfile64");
	NEXT(shutdown, "shutdown");
	NEXT(close, "close");
	NEXT(dup, "dup");
	NEXT(fcntl, "fcntl");
	NEXT(fcntl64, "fcntl64");
	NEXT(dup2, "dup2");
	NEXT(dup3, "dup3");
	NEXT(socket, "socket");
	NEXT(socketpair, "socketpair");
	NEXT(pipe, "pipe");
	NEXT(pipe2, "pipe2");
	NEXT(fdopen, "fdopen");
	NEXT(close_range, "close_range");
	NEXT(closefrom, "closefrom");
	NEXT(select, "select");
	NEXT(pselect, "pselect");
	NEXT(epoll_pwait2, "epoll_pwait2");
	NEXT(epoll_ctl, "epoll_ctl");
	NEXT(execvpe, "execvpe");
	NEXT(mutex_lock, "pthread_mutex_lock");
	NEXT(mutex_trylock, "pthread_mutex_trylock");
	NEXT(mutex_timedlock, "pthread_mutex_timedlock");
	NEXT(mutex_clocklock, "pthread_mutex_clocklock");
	NEXT(mutex_unlock, "pthread_mutex_unlock");
	NEXT(rwlock_rdlock, "pthread_rwlock_rdlock");
	NEXT(rwlock_wrlock, "pthread_rwlock_wrlock");
	NEXT(rwlock_tryrdlock, "pthread_rwlock_tryrdlock");
	NEXT(rwlock_trywrlock, "pthread_rwlock_trywrlock");
	NEXT(rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
	NEXT(rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
	NEXT(rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
	NEXT(rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
	NEXT(rwlock_unlock, "pthread_rwlock_unlock");
	NEXT(spin_lock, "pthread_spin_lock");
	NEXT(spin_trylock, "pthread_spin_trylock");
	NEXT(spin_unlock, "pthread_spin_unlock");
	/* dlsym would return the default version, but name it: the old one
	 * must never be taken for it. */
	*(void **)&real_fn.cond_wait = next_version("pthread_cond_wait", "GLIBC_2.3.2");
	*(void **)&real_fn.cond_timedwait = next_version("pthread_cond_timedwait", "GLIBC_2.3.2");
	NEXT(cond_clockwait, "pthread_cond_clockwait");
	*(void **)&real_fn.cond_wait_old = next_version("pthread_cond_wait", "GLIBC_2.2.5");
	*(void **)&real_fn.cond_timedwait_old =
		next_version("pthread_cond_timedwait", "GLIBC_2.2.5");
	NEXT(create, "pthread_create");
	NEXT(join, "pthread_join");
	NEXT(timedjoin_np, "pthread_timedjoin_np");
	NEXT(clockjoin_np, "pthread_clockjoin_np");
	NEXT(barrier_wait, "pthread_barrier_wait");
	NEXT(sem_wait, "sem_wait");
	NEXT(sem_timedwait, "sem_timedwait");
	NEXT(sem_clockwait, "sem_clockwait");
	NEXT(exit, "pthread_exit");
	NEXT(mtx_lock, "mtx_lock");
	NEXT(mtx_trylock, "mtx_trylock");
	NEXT(mtx_timedlock, "mtx_timedlock");
	NEXT(mtx_unlock, "mtx_unlock");
	NEXT(cnd_wait, "cnd_wait");
	NEXT(cnd_timedwait, "cnd_timedwait");
	NEXT(thrd_create, "thrd_create");
	NEXT(thrd_join, "thrd_join");
	NEXT(sigaltstack, "sigaltstack");
	NEXT(read, "read");
	NEXT(pread, "pread");
	NEXT(pread64, "pread64");
	NEXT(readv, "readv");
	NEXT(preadv, "preadv");
	NEXT(preadv64, "preadv64");
	NEXT(recv, "recv");
	NEXT(recvfrom, "recvfrom");
	NEXT(recvmsg, "recvmsg");
	NEXT(recvmmsg, "recvmmsg");
	NEXT(fread, "fread");
	NEXT(fread_unlocked, "fread_unlocked");
	NEXT(fgets, "fgets");
	NEXT(epoll_wait, "epoll_wait");
	NEXT(epoll_pwait, "epoll_pwait");
	NEXT(poll, "poll");
	NEXT(ppoll, "ppoll");
	NEXT(accept, "accept");
	NEXT(accept4, "accept4");
	NEXT(getsockname, "getsockname");
	NEXT(getpeername, "getpeername");
	NEXT(getsockopt, "getsockopt");
	NEXT(readlink, "readlink");
	NEXT(readlinkat, "readlinkat");
	NEXT(getrandom, "getrandom");
	NEXT(stat, "stat");
	NEXT(fstat, "fstat");
	NEXT(lstat, "lstat");
	NEXT(fstatat, "fstatat");
	NEXT(stat64, "stat64");
	NEXT(fstat64, "fstat64");
	NEXT(lstat64, "lstat64");
	NEXT(fstatat64, "fstatat64");
	NEXT(statx, "statx");
	NEXT(getcwd, "getcwd");
	NEXT(opendir, "opendir");
	NEXT(fdopendir, "fdopendir");
	NEXT(aio_read, "aio_read");
	NEXT(aio_write, "aio_write");
	NEXT(aio_fsync, "aio_fsync");
	NEXT(lio_listio, "lio_listio");
	NEXT(aio_error, "aio_error");
	NEXT(aio_return, "aio_return");
	NEXT(sigmask, "pthread_sigmask");
	NEXT(sigsuspend, "sigsuspend");
	NEXT(sigpending, "sigpending");
	NEXT(sigwait, "sigwait");
	NEXT(sigwaitinfo, "sigwaitinfo");
	NEXT(sigtimedwait, "sigtimedwait");
	NEXT(siglongjmp, "siglongjmp");
	NEXT(longjmp, "longjmp");
	NEXT(_longjmp, "_longjmp");
	NEXT(longjmp_chk, "__longjmp_chk");
	/* From here on every mask of the program passes through
	 * fault_signal, which keeps SIGSEGV unblocked in the kernel's masks
	 * and emulates its blocking (fault_signal.h). */
	fault_signal_take_masks(real_fn.sigmask);
	__atomic_store_n(&real_resolved, 1, __ATOMIC_RELEASE);
	prim_unlock(&resolve_lock);
}

/* The sonames of the OpenMP runtimes Debian ships (GCC's, LLVM's and LLVM's
 * Intel-compatible name), for a runtime dlopen'd with RTLD_LOCAL, which
 * RTLD_NEXT does not search. */
static const char *const openmp_runtimes[] = { "libgomp.so.1", "libomp.so.5", "libiomp5.so" };

void *real_openmp(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (p != NULL)
		return p;
	p = dlsym(RTLD_NEXT, name);
	for (size_t i = 0; p == NULL && i < sizeof(openmp_runtimes) / sizeof(openmp_runtimes[0]);
	     i++) {
		void *h = dlopen(openmp_runtimes[i], RTLD_LAZY | RTLD_NOLOAD);
		if (h != NULL) {
			p = dlsym(h, name);
			dlclose(h);
		}
	}
	if (p == NULL)
		log_fatal("%s was called, but no OpenMP runtime loaded in this process defines it",
			  name);
	__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	return p;
}
