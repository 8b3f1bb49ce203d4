/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * real_list -- the one list of the libc functions preload/ wraps.
 *
 * Owns: the set of interposed symbols other than the malloc family's
 * (malloc_next.h).  Each line gives the field of struct real_fns, the symbol
 * dlsym looks up, and its type; real.h expands the list into the struct and
 * real.c into the resolver, so a wrapper's real function is named once.
 *   REAL_FN(ret, field, "symbol", (params))          the default version
 *   REAL_FN_VERSION(ret, field, "symbol", "version", (params))
 *                                                     one version by name
 *   REAL_FN_NORETURN(field, "symbol", (params))      returns void, never
 * No include guard: included once per expansion, with the three macros
 * defined by the includer.
 */
/* mutexes */
REAL_FN(int, mutex_lock, "pthread_mutex_lock", (pthread_mutex_t *))
REAL_FN(int, mutex_trylock, "pthread_mutex_trylock", (pthread_mutex_t *))
REAL_FN(int, mutex_timedlock, "pthread_mutex_timedlock",
	(pthread_mutex_t *, const struct timespec *))
REAL_FN(int, mutex_clocklock, "pthread_mutex_clocklock",
	(pthread_mutex_t *, clockid_t, const struct timespec *))
REAL_FN(int, mutex_unlock, "pthread_mutex_unlock", (pthread_mutex_t *))
/* rwlocks */
REAL_FN(int, rwlock_rdlock, "pthread_rwlock_rdlock", (pthread_rwlock_t *))
REAL_FN(int, rwlock_wrlock, "pthread_rwlock_wrlock", (pthread_rwlock_t *))
REAL_FN(int, rwlock_tryrdlock, "pthread_rwlock_tryrdlock", (pthread_rwlock_t *))
REAL_FN(int, rwlock_trywrlock, "pthread_rwlock_trywrlock", (pthread_rwlock_t *))
REAL_FN(int, rwlock_timedrdlock, "pthread_rwlock_timedrdlock",
	(pthread_rwlock_t *, const struct timespec *))
REAL_FN(int, rwlock_timedwrlock, "pthread_rwlock_timedwrlock",
	(pthread_rwlock_t *, const struct timespec *))
REAL_FN(int, rwlock_clockrdlock, "pthread_rwlock_clockrdlock",
	(pthread_rwlock_t *, clockid_t, const struct timespec *))
REAL_FN(int, rwlock_clockwrlock, "pthread_rwlock_clockwrlock",
	(pthread_rwlock_t *, clockid_t, const struct timespec *))
REAL_FN(int, rwlock_unlock, "pthread_rwlock_unlock", (pthread_rwlock_t *))
/* spinlocks */
REAL_FN(int, spin_lock, "pthread_spin_lock", (pthread_spinlock_t *))
REAL_FN(int, spin_trylock, "pthread_spin_trylock", (pthread_spinlock_t *))
REAL_FN(int, spin_unlock, "pthread_spin_unlock", (pthread_spinlock_t *))
/* condition variables: the current (GLIBC_2.3.2) and the old
 * (GLIBC_2.2.5) versions */
REAL_FN_VERSION(int, cond_wait, "pthread_cond_wait", "GLIBC_2.3.2",
	(pthread_cond_t *, pthread_mutex_t *))
REAL_FN_VERSION(int, cond_timedwait, "pthread_cond_timedwait", "GLIBC_2.3.2",
	(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))
REAL_FN(int, cond_clockwait, "pthread_cond_clockwait",
	(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *))
REAL_FN_VERSION(int, cond_wait_old, "pthread_cond_wait", "GLIBC_2.2.5",
	(pthread_cond_t *, pthread_mutex_t *))
REAL_FN_VERSION(int, cond_timedwait_old, "pthread_cond_timedwait", "GLIBC_2.2.5",
	(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))
/* threads */
REAL_FN(int, create, "pthread_create",
	(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))
REAL_FN(int, join, "pthread_join", (pthread_t, void **))
REAL_FN(int, timedjoin_np, "pthread_timedjoin_np", (pthread_t, void **, const struct timespec *))
REAL_FN(int, clockjoin_np, "pthread_clockjoin_np",
	(pthread_t, void **, clockid_t, const struct timespec *))
REAL_FN(int, barrier_wait, "pthread_barrier_wait", (pthread_barrier_t *))
REAL_FN(int, sem_wait, "sem_wait", (sem_t *))
REAL_FN(int, sem_timedwait, "sem_timedwait", (sem_t *, const struct timespec *))
REAL_FN(int, sem_clockwait, "sem_clockwait", (sem_t *, clockid_t, const struct timespec *))
REAL_FN_NORETURN(exit, "pthread_exit", (void *))
/* C11 threads (<threads.h>, c11_threads.c): glibc implements them
 * with internal calls to its pthread code, which the pthread wrappers
 * never see */
REAL_FN(int, mtx_lock, "mtx_lock", (mtx_t *))
REAL_FN(int, mtx_trylock, "mtx_trylock", (mtx_t *))
REAL_FN(int, mtx_timedlock, "mtx_timedlock", (mtx_t *__restrict, const struct timespec *__restrict))
REAL_FN(int, mtx_unlock, "mtx_unlock", (mtx_t *))
REAL_FN(int, cnd_wait, "cnd_wait", (cnd_t *, mtx_t *))
REAL_FN(int, cnd_timedwait, "cnd_timedwait",
	(cnd_t *__restrict, mtx_t *__restrict, const struct timespec *__restrict))
REAL_FN(int, thrd_create, "thrd_create", (thrd_t *, thrd_start_t, void *))
REAL_FN(int, thrd_join, "thrd_join", (thrd_t, int *))
/* alternate signal stacks (signals.c) */
REAL_FN(int, sigaltstack, "sigaltstack", (const stack_t *, stack_t *))
/* system calls and stdio that write user memory */
REAL_FN(size_t, fread, "fread", (void *, size_t, size_t, FILE *))
REAL_FN(size_t, fread_unlocked, "fread_unlocked", (void *, size_t, size_t, FILE *))
REAL_FN(char *, fgets, "fgets", (char *, int, FILE *))
REAL_FN(int, epoll_wait, "epoll_wait", (int, struct epoll_event *, int, int))
REAL_FN(int, epoll_pwait, "epoll_pwait", (int, struct epoll_event *, int, int, const sigset_t *))
REAL_FN(int, poll, "poll", (struct pollfd *, nfds_t, int))
REAL_FN(int, ppoll, "ppoll", (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *))
REAL_FN(int, accept, "accept", (int, struct sockaddr *, socklen_t *))
REAL_FN(int, accept4, "accept4", (int, struct sockaddr *, socklen_t *, int))
REAL_FN(char *, getcwd, "getcwd", (char *, size_t))
REAL_FN(DIR *, opendir, "opendir", (const char *))
REAL_FN(DIR *, fdopendir, "fdopendir", (int))
/* output to sockets and pipes (output.c) */
REAL_FN(ssize_t, write, "write", (int, const void *, size_t))
REAL_FN(ssize_t, writev, "writev", (int, const struct iovec *, int))
REAL_FN(ssize_t, send, "send", (int, const void *, size_t, int))
REAL_FN(ssize_t, sendto, "sendto",
	(int, const void *, size_t, int, const struct sockaddr *, socklen_t))
REAL_FN(ssize_t, sendmsg, "sendmsg", (int, const struct msghdr *, int))
REAL_FN(int, sendmmsg, "sendmmsg", (int, struct mmsghdr *, unsigned, int))
REAL_FN(ssize_t, sendfile, "sendfile", (int, int, off_t *, size_t))
REAL_FN(ssize_t, sendfile64, "sendfile64", (int, int, off64_t *, size_t))
REAL_FN(int, shutdown, "shutdown", (int, int))
REAL_FN(int, close, "close", (int))
REAL_FN(int, dup, "dup", (int))
REAL_FN(int, fcntl, "fcntl", (int, int, ...))
REAL_FN(int, fcntl64, "fcntl64", (int, int, ...))
REAL_FN(int, dup2, "dup2", (int, int))
REAL_FN(int, dup3, "dup3", (int, int, int))
/* descriptors made or ended (output_fds.c) */
REAL_FN(int, socket, "socket", (int, int, int))
REAL_FN(int, socketpair, "socketpair", (int, int, int, int[2]))
REAL_FN(int, pipe, "pipe", (int[2]))
REAL_FN(int, pipe2, "pipe2", (int[2], int))
REAL_FN(FILE *, fdopen, "fdopen", (int, const char *))
REAL_FN(int, close_range, "close_range", (unsigned, unsigned, int))
REAL_FN(void, closefrom, "closefrom", (int))
/* readiness under output commit (output_readiness.c; epoll_wait,
 * epoll_pwait, poll and ppoll are above) */
REAL_FN(int, select, "select", (int, fd_set *, fd_set *, fd_set *, struct timeval *))
REAL_FN(int, pselect, "pselect",
	(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *))
REAL_FN(int, epoll_pwait2, "epoll_pwait2",
	(int, struct epoll_event *, int, const struct timespec *, const sigset_t *))
REAL_FN(int, epoll_ctl, "epoll_ctl", (int, int, int, struct epoll_event *))
/* fork (process.c) */
REAL_FN(pid_t, fork, "fork", (void))
/* exec (exec.c) */
REAL_FN(int, execve, "execve", (const char *, char *const[], char *const[]))
REAL_FN(int, execvpe, "execvpe", (const char *, char *const[], char *const[]))
/* signal masks (sigmask.c) */
REAL_FN(int, sigmask, "pthread_sigmask", (int, const sigset_t *, sigset_t *))
REAL_FN(int, sigsuspend, "sigsuspend", (const sigset_t *))
REAL_FN(int, sigpending, "sigpending", (sigset_t *))
REAL_FN(int, sigwait, "sigwait", (const sigset_t *, int *))
REAL_FN(int, sigwaitinfo, "sigwaitinfo", (const sigset_t *, siginfo_t *))
REAL_FN(int, sigtimedwait, "sigtimedwait", (const sigset_t *, siginfo_t *, const struct timespec *))
/* non-local jumps that may leave a signal handler (sigmask.c) */
REAL_FN_NORETURN(siglongjmp, "siglongjmp", (struct __jmp_buf_tag *, int))
REAL_FN_NORETURN(longjmp, "longjmp", (struct __jmp_buf_tag *, int))
REAL_FN_NORETURN(_longjmp, "_longjmp", (struct __jmp_buf_tag *, int))
REAL_FN_NORETURN(longjmp_chk, "__longjmp_chk", (struct __jmp_buf_tag *, int))
/* asynchronous I/O (aio.c) */
REAL_FN(int, aio_read, "aio_read", (struct aiocb *))
REAL_FN(int, aio_write, "aio_write", (struct aiocb *))
REAL_FN(int, aio_fsync, "aio_fsync", (int, struct aiocb *))
REAL_FN(int, lio_listio, "lio_listio", (int, struct aiocb *const[], int, struct sigevent *))
REAL_FN(int, aio_error, "aio_error", (const struct aiocb *))
REAL_FN(ssize_t, aio_return, "aio_return", (struct aiocb *))
/* The generated wrappers' (lib/runtime/syscall_outputs.tab). */
#include "syscall_wrappers_real.h"
