/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * real -- the libc functions that preload/ wraps, resolved with
 * dlsym(RTLD_NEXT) / dlvsym.
 *
 * Owns: finding the next definition of an interposed symbol.  Resolution
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

struct real_fns {
	/* mutexes */
	int (*mutex_lock)(pthread_mutex_t *);
	int (*mutex_trylock)(pthread_mutex_t *);
	int (*mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
	int (*mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
	int (*mutex_unlock)(pthread_mutex_t *);
	/* rwlocks */
	int (*rwlock_rdlock)(pthread_rwlock_t *);
	int (*rwlock_wrlock)(pthread_rwlock_t *);
	int (*rwlock_tryrdlock)(pthread_rwlock_t *);
	int (*rwlock_trywrlock)(pthread_rwlock_t *);
	int (*rwlock_timedrdlock)(pthread_rwlock_t *, const struct timespec *);
	int (*rwlock_timedwrlock)(pthread_rwlock_t *, const struct timespec *);
	int (*rwlock_clockrdlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*rwlock_clockwrlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*rwlock_unlock)(pthread_rwlock_t *);
	/* spinlocks */
	int (*spin_lock)(pthread_spinlock_t *);
	int (*spin_trylock)(pthread_spinlock_t *);
	int (*spin_unlock)(pthread_spinlock_t *);
	/* condition variables: the current (GLIBC_2.3.2) and the old
	 * (GLIBC_2.2.5) versions */
	int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
	int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	int (*cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
			      const struct timespec *);
	int (*cond_wait_old)(pthread_cond_t *, pthread_mutex_t *);
	int (*cond_timedwait_old)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	/* threads */
	int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	int (*join)(pthread_t, void **);
	int (*timedjoin_np)(pthread_t, void **, const struct timespec *);
	int (*clockjoin_np)(pthread_t, void **, clockid_t, const struct timespec *);
	int (*barrier_wait)(pthread_barrier_t *);
	int (*sem_wait)(sem_t *);
	int (*sem_timedwait)(sem_t *, const struct timespec *);
	int (*sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
	void (*exit)(void *) __attribute__((noreturn));
	/* C11 threads (<threads.h>, c11_threads.c): glibc implements them
	 * with internal calls to its pthread code, which the pthread wrappers
	 * never see */
	int (*mtx_lock)(mtx_t *);
	int (*mtx_trylock)(mtx_t *);
	int (*mtx_timedlock)(mtx_t *__restrict, const struct timespec *__restrict);
	int (*mtx_unlock)(mtx_t *);
	int (*cnd_wait)(cnd_t *, mtx_t *);
	int (*cnd_timedwait)(cnd_t *__restrict, mtx_t *__restrict,
			     const struct timespec *__restrict);
	int (*thrd_create)(thrd_t *, thrd_start_t, void *);
	int (*thrd_join)(thrd_t, int *);
	/* alternate signal stacks (signals.c) */
	int (*sigaltstack)(const stack_t *, stack_t *);
	/* system calls and stdio that write user memory */
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*pread64)(int, void *, size_t, off64_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*preadv)(int, const struct iovec *, int, off_t);
	ssize_t (*preadv64)(int, const struct iovec *, int, off64_t);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned, int, struct timespec *);
	size_t (*fread)(void *, size_t, size_t, FILE *);
	size_t (*fread_unlocked)(void *, size_t, size_t, FILE *);
	char *(*fgets)(char *, int, FILE *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	ssize_t (*readlink)(const char *, char *, size_t);
	ssize_t (*readlinkat)(int, const char *, char *, size_t);
	ssize_t (*getrandom)(void *, size_t, unsigned);
	int (*stat)(const char *, struct stat *);
	int (*fstat)(int, struct stat *);
	int (*lstat)(const char *, struct stat *);
	int (*fstatat)(int, const char *, struct stat *, int);
	int (*stat64)(const char *, struct stat64 *);
	int (*fstat64)(int, struct stat64 *);
	int (*lstat64)(const char *, struct stat64 *);
	int (*fstatat64)(int, const char *, struct stat64 *, int);
	int (*statx)(int, const char *, int, unsigned, struct statx *);
	char *(*getcwd)(char *, size_t);
	DIR *(*opendir)(const char *);
	DIR *(*fdopendir)(int);
	/* output to sockets and pipes (output.c) */
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned, int);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*sendfile64)(int, int, off64_t *, size_t);
	int (*shutdown)(int, int);
	int (*close)(int);
	int (*dup)(int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	/* descriptors made or ended (output_fds.c) */
	int (*socket)(int, int, int);
	int (*socketpair)(int, int, int, int[2]);
	int (*pipe)(int[2]);
	int (*pipe2)(int[2], int);
	FILE *(*fdopen)(int, const char *);
	int (*close_range)(unsigned, unsigned, int);
	void (*closefrom)(int);
	/* readiness under output commit (output_readiness.c; epoll_wait,
	 * epoll_pwait, poll and ppoll are above) */
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
		       const sigset_t *);
	int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *,
			    const sigset_t *);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	/* asynchronous I/O (aio.c) */
	int (*aio_read)(struct aiocb *);
	int (*aio_write)(struct aiocb *);
	int (*aio_fsync)(int, struct aiocb *);
	int (*lio_listio)(int, struct aiocb *const[], int, struct sigevent *);
	int (*aio_error)(const struct aiocb *);
	ssize_t (*aio_return)(struct aiocb *);
	/* exec (exec.c) */
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	/* signal masks (sigmask.c) */
	int (*sigmask)(int, const sigset_t *, sigset_t *);
	int (*sigsuspend)(const sigset_t *);
	int (*sigpending)(sigset_t *);
	int (*sigwait)(const sigset_t *, int *);
	int (*sigwaitinfo)(const sigset_t *, siginfo_t *);
	int (*sigtimedwait)(const sigset_t *, siginfo_t *, const struct timespec *);
	/* non-local jumps that may leave a signal handler (sigmask.c) */
	void (*siglongjmp)(struct __jmp_buf_tag *, int) __attribute__((noreturn));
	void (*longjmp)(struct __jmp_buf_tag *, int) __attribute__((noreturn));
	void (*_longjmp)(struct __jmp_buf_tag *, int) __attribute__((noreturn));
	void (*longjmp_chk)(struct __jmp_buf_tag *, int) __attribute__((noreturn));
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
