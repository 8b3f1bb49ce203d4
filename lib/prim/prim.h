/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prim -- the small set of OS and CPU primitives the runtime uses directly.
 *
 * Owns: raw system calls that are not pthread or stdio: time, futexes,
 * thread ids, membarrier, _exit, files (opened, read, written, replaced
 * at once, named, locked, sized, synced, their disk space and who holds
 * them open), memory mappings (anonymous and of files) and their
 * protection, userfaultfd and PAGEMAP_SCAN (uapi fallbacks in prim_uffd.h),
 * the system calls themselves where an interposed wrapper must be passed
 * by (prim_sys_*), the signal-frame facts the SIGSEGV handler needs; and
 * the few things that differ by CPU: the
 * spin-wait hint, whether a fault was a write, the vector builds of a
 * vectorising function (PRIM_VECTOR_CLONES).  Nothing outside prim/
 * tests for an architecture.
 *
 *   prim_linux.c      the OS part (Linux, glibc)
 *   prim_locks.c      the runtime's locks, each named with what a fork
 *                     child gets of it, walked at fork (see prim_lock)
 *   cpu_x86_64.c      the CPU part, one file per architecture, chosen by
 *   cpu_aarch64.c     meson (-Dprim=auto: host_machine.cpu_family();
 *   cpu_generic.c     -Dprim=generic: the portable file on any CPU)
 *
 * A port to another CPU is one more cpu_<family>.c and one line in
 * lib/meson.build; without it the generic file builds and runs (see
 * prim_fault_access for what it cannot tell).
 *
 * The runtime's own locks (prim_lock) are futex-based and never go through
 * pthread_mutex_*, so the interposition layer never sees or counts them and
 * they work before anything has been resolved with dlsym.
 */
#ifndef PMT_PRIM_H
#define PMT_PRIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Monotonic clock in nanoseconds. */
uint64_t prim_now_ns(void);
void prim_sleep_ns(uint64_t ns);
pid_t prim_gettid(void);
pid_t prim_getpid(void);
uid_t prim_getuid(void);
/* Whether this process runs in secure-execution mode (getauxval
 * AT_SECURE: set-user-ID, set-group-ID or file capabilities): its caller
 * may be less privileged than it. */
bool prim_secure_exec(void);
uid_t prim_geteuid(void);
pid_t prim_getppid(void);
/* _exit(2): the process ends now, no atexit handler run, no stdio buffer
 * flushed. */
_Noreturn void prim_exit_now(int status);
/* Whether process pid exists (it may belong to another user). */
bool prim_process_alive(pid_t pid);
/* The size of a page of memory (sysconf; 4096 should it not say). */
size_t prim_page_size(void);
/* The CPUs this process may run on (its affinity mask), at least 1. */
unsigned prim_cpu_count(void);
/* Of those, how many no runnable thread wants now besides the caller (the
 * system's runnable count, /proc/loadavg); 0 when unknown. */
unsigned prim_idle_cpus(void);
/* How many of this process's threads are alive (not exited, not a zombie
 * thread-group leader), from /proc/self/task; -1 when that cannot be read.
 * Raw system calls only: no malloc, no interposed symbol. */
int prim_live_threads(void);
/* What thread tid of this process is doing, for a report: the system call
 * it is blocked in by name where known ("epoll_wait", else "system call
 * 232"), "running" when in none, and the kernel function it sleeps in
 * (wchan) where the kernel tells, e.g. "futex (kernel: futex_wait_queue)".
 * "" when /proc cannot say.  Raw system calls only. */
void prim_thread_wait_state(pid_t tid, char *buf, size_t len);

/* Write all len bytes to fd, retrying short writes and EINTR.  Returns 0, or
 * -1 with errno set (a write that made no progress fails with EIO).  Uses
 * write(2) only: callable from signal handlers. */
int prim_write_all(int fd, const void *buf, size_t len);
/* The same at file offset off (pwrite(2); the file position is left alone). */
int prim_pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* Asynchronous writes (prim_aio_linux.c): Linux's native AIO, for a file
 * opened for direct I/O (prim_reopen_direct), whose writes then go to the
 * device while the caller goes on.  A context takes up to nr writes in
 * flight (prim_aio_setup: 0, or -1 with errno -- ENOSYS, EAGAIN past the
 * system's aio-max-nr, EPERM under a seccomp filter: write synchronously
 * then).  prim_aio_submit queues up to PRIM_AIO_BATCH writes at once:
 * how many it took, or -1 with errno; each completes as one prim_aio_done
 * with its tag and the write's result (the bytes written, or -errno).
 * prim_aio_reap waits for at least min of them (0: none) and returns up to
 * max: how many, or -1 with errno.  The buffers stay untouched until their
 * write completes. */
#define PRIM_AIO_BATCH 64
struct prim_aio_write {
	int fd;
	const void *buf;
	size_t len;
	uint64_t off;
	uint64_t tag;
};
struct prim_aio_done {
	uint64_t tag;
	int64_t res;
};
int prim_aio_setup(unsigned nr, uint64_t *ctx);
void prim_aio_destroy(uint64_t ctx);
long prim_aio_submit(uint64_t ctx, const struct prim_aio_write *w, size_t n);
long prim_aio_reap(uint64_t ctx, size_t min, struct prim_aio_done *out, size_t max);

/* A second descriptor of fd's file that bypasses the page cache (O_DIRECT,
 * read-write, close-on-exec), opened through /proc/self/fd: the same
 * inode, checked.  The descriptor, or -1 with errno set (no /proc, a file
 * system without direct I/O: EINVAL). */
int prim_reopen_direct(int fd);
/* Read up to len bytes at file offset off, retrying short reads and EINTR.
 * Returns the bytes read (fewer than len only at the end of the file), or
 * -1 with errno set. */
ssize_t prim_pread_all(int fd, void *buf, size_t len, off_t off);
/* Allocate disk space for [off, off + len) of fd (fallocate(2), mode 0;
 * len 0 does nothing), retrying EINTR.  0, or -1 with errno set (EOPNOTSUPP
 * or ENOSYS: the file system cannot reserve). */
int prim_fallocate(int fd, uint64_t off, uint64_t len);
/* fsync(2), retrying EINTR.  0, or -1 with errno set. */
int prim_fsync(int fd);
/* fdatasync(2), retrying EINTR: the data and what reading it needs, no
 * timestamps.  0, or -1 with errno set. */
int prim_fdatasync(int fd);
/* Drop the clean page-cache pages of [off, off+len) of fd
 * (POSIX_FADV_DONTNEED): a hint, nothing is lost.  A file system that
 * caches in large folios counts the whole folio as written when a later
 * small write dirties it (/proc/PID/io), though it writes only the blocks
 * changed; pages read back from disk come in folios the size of what is
 * written next. */
void prim_drop_cache(int fd, uint64_t off, uint64_t len);
/* fsync the directory dir itself, so that a name created in it or renamed
 * into it survives a power cut.  0, or -1 with errno set. */
int prim_sync_dir(const char *dir);
/* The next extent of data of fd in [from, end): 1 with it in [*start,
 * *stop), 0 when there is no data there (holes up to end, or the file ends),
 * -1 with errno set when the file system cannot say (no SEEK_DATA). */
int prim_next_data(int fd, off_t from, off_t end, off_t *start, off_t *stop);

/* A small file (under /proc, say) read whole into buf with raw system calls
 * (no interposed open/read/close, no malloc): at most len - 1 bytes,
 * NUL-terminated.  Returns the bytes read, or -1 with errno set. */
ssize_t prim_read_file(const char *path, char *buf, size_t len);
/* The target of the symbolic link path, NUL-terminated in buf (cut to len -
 * 1 bytes).  Returns its length, or -1 with errno set. */
ssize_t prim_readlink(const char *path, char *buf, size_t len);
/* Whether paths a and b name the same file (device and inode); false when
 * either cannot be examined. */
bool prim_same_file(const char *a, const char *b);
/* The kernel's limit on resource (RLIMIT_AS...) for this process, by the
 * raw system call: not the program's view, which the interposed
 * getrlimit gives.  0, or -1 with errno set. */
struct rlimit;
int prim_get_rlimit(int resource, struct rlimit *rl);
/* Memory locking by the system calls themselves (the preload interposes
 * mlockall and munlockall): mlock2 of [addr, addr+len), on first touch only
 * when on_fault; mlockall(flags); munlockall.  0, or -1 with errno set. */
int prim_sys_mlock(void *addr, size_t len, bool on_fault);
int prim_sys_mlockall(int flags);
int prim_sys_munlockall(void);
/* Whether this thread has CAP_IPC_LOCK in its effective set (capget);
 * false when it cannot be told. */
bool prim_capable_ipc_lock(void);
/* Files through the C library, as a call of it from the runtime would be
 * (so through the preload's wrapper where it has one: close, read, write,
 * pread, poll, fstat, stat, lstat, readlink).  Results and errno are the C
 * library's. */
int prim_open(const char *path, int flags, mode_t mode);
int prim_close(int fd);
ssize_t prim_read(int fd, void *buf, size_t len);
ssize_t prim_write(int fd, const void *buf, size_t len);
/* One pread(2), short or not (prim_pread_all retries). */
ssize_t prim_pread(int fd, void *buf, size_t len, off_t off);
off_t prim_lseek(int fd, off_t off, int whence);
int prim_poll(struct pollfd *fds, nfds_t n, int timeout_ms);
int prim_fstat(int fd, struct stat *st);
int prim_stat(const char *path, struct stat *st);
int prim_lstat(const char *path, struct stat *st);
int prim_ftruncate(int fd, off_t size);
int prim_fchmod(int fd, mode_t mode);
int prim_fchown(int fd, uid_t uid, gid_t gid);
int prim_unlink(const char *path);
int prim_rename(const char *from, const char *to);
int prim_mkdir(const char *path, mode_t mode);
/* The same relative to the directory dirfd (openat, fstatat, mkdirat). */
int prim_openat(int dirfd, const char *name, int flags, mode_t mode);
int prim_fstatat(int dirfd, const char *name, struct stat *st, int flags);
int prim_mkdirat(int dirfd, const char *name, mode_t mode);
/* A name only one process at a time may hold, released by the kernel when
 * the last descriptor of it closes (a process that dies releases it): an
 * abstract unix socket bound to key (at most 100 bytes) and listening.
 * Returns the descriptor (close-on-exec), or -1 with errno set: EADDRINUSE
 * when another process holds key, *holder and *holder_uid then naming it
 * (0 and (uid_t)-1 when it cannot be told). */
int prim_name_lock(const char *key, pid_t *holder, uid_t *holder_uid);
/* fcntl(fd, F_DUPFD_CLOEXEC, lowest): a close-on-exec copy of fd, the
 * lowest free descriptor from lowest up. */
int prim_dup_cloexec(int fd, int lowest);
/* Replace the file path with len bytes of buf at once: a reader, or a kill
 * -9, sees the old file or the new one, never part of one.  The bytes go
 * first to path.PID.tmp (its name left in tmp, tmp_len bytes), created
 * exclusively with mode 0600 and not through a symbolic link -- one left by
 * an earlier process of this pid that was killed mid-write is removed first
 * if it is a regular file of this user's -- then renamed over path; a
 * failure removes it.  Through the C library, as prim_open.  0, or -1 with
 * errno set and *failed the step that failed (PRIM_REPLACE_NAME: the
 * temporary name does not fit tmp). */
enum prim_replace_step {
	PRIM_REPLACE_NAME,
	PRIM_REPLACE_CREATE,
	PRIM_REPLACE_WRITE,
	PRIM_REPLACE_RENAME,
};
int prim_replace_file(const char *path, const void *buf, size_t len, char *tmp, size_t tmp_len,
		      enum prim_replace_step *failed);
/* rename(2) that fails with EEXIST rather than replace to (renameat2
 * RENAME_NOREPLACE; EINVAL, ENOSYS or EOPNOTSUPP where the file system or
 * kernel lacks it). */
int prim_rename_noreplace(const char *from, const char *to);
int prim_link(const char *from, const char *to);
/* Give the open file fd, made with O_TMPFILE, the name path (linkat through
 * /proc/self/fd, following the link).  0, or -1 with errno set. */
int prim_link_fd(int fd, const char *path);
/* The magic number of the file system fd is on (statfs f_type, as in
 * linux/magic.h), 0 when it cannot be told. */
unsigned long prim_fs_type(int fd);
/* Whether the file system fd is on has no block left for an unprivileged
 * user (fstatfs f_bavail 0: a bare system call, where fstatvfs may read the
 * mount table); false when it cannot be told.  Async-signal-safe. */
bool prim_fs_full(int fd);
/* The bytes an unprivileged user may still allocate on the file system fd
 * is on (fstatfs f_bavail blocks of f_frsize): 0 with *bytes set, or -1
 * with errno when it cannot be told. */
int prim_fs_avail(int fd, uint64_t *bytes);
/* Clear fd's O_NONBLOCK (opened non-blocking so that a FIFO would not make
 * the open wait); a failure leaves it as it was. */
void prim_set_blocking(int fd);
/* An open-file-description lock on the whole of fd (fcntl F_OFD_SETLK),
 * shared or exclusive, not waiting: 0, or -1 with errno EAGAIN or EACCES
 * when another description holds a conflicting one. */
int prim_lock_file(int fd, bool shared);
/* Whether the lock that keeps fd from being locked exclusively is a shared
 * one (F_OFD_GETLK); false when unlocked, exclusively locked or unknown. */
bool prim_file_read_locked(int fd);
/* Another descriptor of this process than except_fd refers to the file st
 * describes (device and inode), from /proc/self/fd. */
bool prim_file_open_here(int except_fd, const struct stat *st);
/* Another process that has the file st describes open, from
 * /proc/PID/fd; only processes whose descriptors we may read are seen.  0
 * when none is found. */
pid_t prim_process_with_file(const struct stat *st);
/* Whether process pid has open one of the n files of files (device and
 * inode), or a deleted file whose name was deleted_path (the kernel's
 * "PATH (deleted)"; NULL: none), from /proc/PID/fd: 1 (what, what_len
 * bytes, then names the descriptor and what it leads to), 0 (none), or -1
 * with errno when its descriptors cannot be read (EACCES: another user's,
 * or not dumpable; ENOENT: it ended). */
int prim_process_holds(pid_t pid, const struct stat *files, size_t n, const char *deleted_path,
		       char *what, size_t what_len);
/* A process other than this one that has a socket bound to the abstract
 * name key open (its inode from /proc/net/unix, the process from
 * /proc/PID/fd): who holds a prim_name_lock now, when the process that took
 * it has ended or closed its copy (a child it started by a raw clone
 * inherited it); neither this process nor except is named.  0 when
 * none is found (only processes whose descriptors we may read are seen). */
pid_t prim_name_lock_holder(const char *key, pid_t except);
/* The command name of process pid (/proc/PID/comm) into buf; "?" when it
 * cannot be read. */
void prim_process_name(pid_t pid, char *buf, size_t len);
/* An eventfd, counter 0, close-on-exec and non-blocking; -1 with errno. */
int prim_eventfd(void);

/* A system call by number, as libc's syscall(2) but never through a wrapper
 * of it: the preload interposes syscall(2) itself (the raw entry point of
 * lib/runtime/syscall_outputs.tab), and the runtime's own system calls must
 * pass by it.  The CPU part issues the instruction (cpu_x86_64.c,
 * cpu_aarch64.c); the generic part calls libc's syscall(2), and the preload
 * then leaves syscall(2) unwrapped (meson defines PMT_WRAP_SYSCALL only with a CPU part).  -1 with
 * errno set on failure.  prim_syscall(nr, args...) casts up to six
 * arguments. */
long prim_syscall6(long nr, long a0, long a1, long a2, long a3, long a4, long a5);
#define PRIM_SYSCALL_(nr, a0, a1, a2, a3, a4, a5, ...) \
	prim_syscall6((long)(nr), (long)(a0), (long)(a1), (long)(a2), (long)(a3), (long)(a4), \
		      (long)(a5))
#define prim_syscall(...) PRIM_SYSCALL_(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)

/* The system calls themselves, passing by any wrapper of the same name the
 * preload interposes (output commit holds the program's writes and
 * readiness; the runtime's own descriptors are kept from the program's
 * close).  The kernel's result: -1 with errno set on failure. */
long prim_sys_read(int fd, void *buf, size_t len);
long prim_sys_pread(int fd, void *buf, size_t len, off_t off);
long prim_sys_write(int fd, const void *buf, size_t len);
long prim_sys_sendmsg(int fd, const struct msghdr *m, int flags);
long prim_sys_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
		     socklen_t to_len);
int prim_sys_open(const char *path, int flags);
int prim_sys_close(int fd);
int prim_sys_shutdown(int fd, int how);
int prim_sys_fstat(int fd, struct stat *st);
long prim_sys_fcntl(int fd, int cmd, long arg);
int prim_sys_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
/* RLIMIT_* of this process (prlimit64, pid 0). */
int prim_sys_prlimit(int resource, const struct rlimit *set, struct rlimit *old);
/* ppoll, pselect6 and epoll_pwait with mask (NULL: none) passed as the
 * kernel takes it (its sigset size, pselect6's pair). */
int prim_sys_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		   const sigset_t *mask);
int prim_sys_pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
		     const struct timespec *timeout, const sigset_t *mask);
int prim_sys_epoll_pwait(int epfd, struct epoll_event *ev, int n, int timeout_ms,
			 const sigset_t *mask);
int prim_sys_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
/* The C library's sigaction without the preload's wrapper (glibc's
 * __sigaction: the kernel's disposition, with the C library's restorer). */
int prim_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* Send sig to this thread (tgkill), or queue it with info
 * (rt_tgsigqueueinfo: the siginfo the handler is to see). */
void prim_sys_signal_thread(int sig);
void prim_sys_queue_signal_thread(int sig, siginfo_t *info);

/* Wait while *addr == expected, at most timeout_ns (0: no bound).  Returns 0
 * when woken or the value changed, -1 with errno ETIMEDOUT on time-out. */
int prim_futex_wait(atomic_uint *addr, unsigned expected, uint64_t timeout_ns);
void prim_futex_wake(atomic_uint *addr, int count);

/* Reserve len bytes of anonymous read-write memory exactly at addr.  Returns
 * addr, or NULL with errno EEXIST when any part of the range is in use. */
void *prim_map_fixed(void *addr, size_t len);
/* Anonymous read-write memory anywhere; NULL on failure. */
void *prim_map_any(size_t len);
/* Double an array of *cap items of item bytes (first_cap when empty) kept in
 * prim_map_any memory, the n in use copied over: for tables that must not
 * come from malloc (a wrapper of free, or of an allocation, reaches them).
 * false, nothing changed, when memory is short.  The caller serialises. */
bool prim_array_grow(void **items, size_t *cap, size_t n, size_t item, size_t first_cap);
void prim_unmap(void *addr, size_t len);
/* Bytes mapped by the two functions above and not yet unmapped by
 * prim_unmap: the runtime's own private memory (the heap's range with it). */
uint64_t prim_mapped_bytes(void);
/* Those mappings' ranges, [lo[i], hi[i]), up to max of them (every one
 * while the runtime keeps no more than 512); returns how many. */
size_t prim_mappings(uintptr_t *lo, uintptr_t *hi, size_t max);

/* Give memory back to the system, keeping the range reserved (reads see
 * zeros again).  Not for hot paths: it costs TLB shootdowns. */
void prim_discard(void *addr, size_t len);

/* Allocate and map the pages of [addr, addr+len) writable now, without a
 * fault per page later (madvise MADV_POPULATE_WRITE, Linux >= 5.14).  For
 * a shared file mapping on tmpfs or DAX this allocates the file's pages;
 * on an ordinary file it would dirty the page cache, so do not use it
 * there.  Returns 0, or -1 with errno set (EINVAL: the kernel lacks it). */
int prim_populate_write(void *addr, size_t len);

/* Anonymous read-write memory anywhere, all of it committed (no
 * MAP_NORESERVE) and not counted in prim_mapped_bytes: it stands for a
 * device (nvm_sim's media), not for the runtime's own memory.  NULL with
 * errno set on failure; prim_unmap_device gives it back. */
void *prim_map_device(size_t len);
void prim_unmap_device(void *addr, size_t len);

/* The first len bytes of the file fd mapped, read-only unless writable:
 * PRIM_MAP_SHARED, stores reach the file; PRIM_MAP_SYNC, the same with
 * MAP_SYNC (MAP_SHARED_VALIDATE), which only a DAX file system grants --
 * its blocks are the persistent memory, so cache flushes alone make stores
 * durable; PRIM_MAP_PRIVATE, copy on write (MAP_NORESERVE: copies count as
 * they are made).  Not counted in prim_mapped_bytes.  NULL with errno set;
 * prim_unmap_file gives it back. */
enum prim_file_map { PRIM_MAP_SHARED, PRIM_MAP_SYNC, PRIM_MAP_PRIVATE };
void *prim_map_file(int fd, size_t len, bool writable, enum prim_file_map how);
void prim_unmap_file(void *addr, size_t len);
/* Make [addr, addr+len) private anonymous memory in place (mremap of a new
 * anonymous mapping over it), holding what it held when keep, zeros
 * otherwise: the pages leave whatever file they mapped.  0, or -1 with
 * errno set and the range as it was.  Async-signal-safe (a SIGBUS handler
 * uses it). */
int prim_make_private(void *addr, size_t len, bool keep);
/* Move the mapping [from, from + len) to to, replacing whatever was mapped
 * there in one step (mremap MREMAP_FIXED): a thread reading [to, to + len)
 * meanwhile sees the old mapping or the new one, never a hole.  0, or -1
 * with errno (both mappings then as they were). */
int prim_move_mapping(void *from, size_t len, void *to);

/* Make [addr, addr+len) read-only, or readable and writable again
 * (mprotect).  0, or -1 with errno set.  A plain call: the mprotect
 * tracker's fault path uses it. */
int prim_protect(void *addr, size_t len, bool writable);
/* Base pages only in [addr, addr+len) (MADV_NOHUGEPAGE); a kernel without
 * transparent huge pages refuses, which is harmless. */
void prim_no_huge_pages(void *addr, size_t len);
/* msync(MS_SYNC) of [addr, addr+len), retrying EINTR.  0, or -1 with errno
 * set. */
int prim_msync(void *addr, size_t len);

/* userfaultfd and PAGEMAP_SCAN (Linux; the uapi structs and numbers, with
 * fallbacks for older headers, in prim_uffd.h).  A userfaultfd,
 * close-on-exec and non-blocking; user_mode_only: faults of user mode only
 * (all an unprivileged process may ask for when
 * vm.unprivileged_userfaultfd is 0).  -1 with errno set. */
int prim_uffd_open(bool user_mode_only);
/* One UFFDIO_* ioctl on a userfaultfd: 0, or -1 with errno set. */
int prim_uffd_ioctl(int uffd, unsigned long request, void *arg);
struct pm_scan_arg;
/* One PAGEMAP_SCAN ioctl on an open /proc/self/pagemap: the kernel's
 * result (regions filled, or -1 with errno set; EINTR is the caller's). */
long prim_pagemap_scan(int pagemap_fd, struct pm_scan_arg *arg);

/* One step of a spin-wait loop: the CPU's spin hint (x86 pause, arm yield),
 * a compiler barrier on the generic build.  prim_yield gives the processor
 * away (async-signal-safe, unlike pthread calls). */
void prim_cpu_relax(void);
void prim_yield(void);
/* membarrier(2), private expedited: prim_membarrier_register, once, says
 * whether the kernel has it (and registers this process for it); then
 * prim_membarrier makes every thread of the process pass a full memory
 * barrier before it returns 0 (-1 with errno set: fence yourself). */
bool prim_membarrier_register(void);
int prim_membarrier(void);

/* On a function whose loop vectorises: a build of it for the widest vector
 * unit the CPU family commonly has (x86-64: AVX2) beside the baseline one,
 * the CPU's choosing at load time (GCC target_clones, an ifunc).  Empty on
 * other CPUs, other compilers and sanitizer builds (whose runtimes do not
 * expect ifuncs in the code they instrument). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define PRIM_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PRIM_VECTOR_CLONES
#endif

/* A futex mutex, zero-initialised (PRIM_LOCK_INIT).  Not recursive. */
typedef struct { atomic_uint state; } prim_lock_t;
#define PRIM_LOCK_INIT { 0 }
void prim_lock(prim_lock_t *l);
bool prim_trylock(prim_lock_t *l);
void prim_unlock(prim_lock_t *l);

/*
 * Every lock of the runtime is named where it is defined, with what a fork
 * child gets of it (docs/design.md, "What the runtime promises at the
 * edges", has the table).  fork() copies a lock that another thread holds
 * as held, and that thread does not exist in the child: a child that takes
 * it waits for ever.  So each lock is one of:
 *   PRIM_FORK_RESET: the child resets it (prim_locks_atfork_child) -- what
 *       it guards is the parent's, and the module's *_atfork_child drops or
 *       rebuilds it, or the child never reaches it;
 *   a rank > 0: taken around fork by the forking thread, in ascending rank
 *       (prim_locks_fork_prepare), and released in the parent
 *       (prim_locks_fork_parent) and the child (prim_locks_atfork_child) --
 *       the child goes on using what it guards, which is whole only if
 *       nobody was half-way through it when the process was copied.
 * A code path that holds a lock of some rank takes no lock of a lower rank.
 *
 * PRIM_LOCK_NAMED(lock, id, what, rank) names one lock (a static one, or a
 * field of a static struct); PRIM_LOCK_KIND(id, what, rank, each) names
 * locks that come and go with what holds them (a heap's, a tracker's, an
 * output queue's): each(i) is the i-th that exists now, in the order they
 * are taken, NULL past the last.  The records go into one section of the
 * object (pmt_locks), so the fork handlers and the tests walk them all
 * without a list to keep; tests/test_file_state.py fails on a prim_lock_t
 * of lib/ that no record names.
 */
enum prim_fork_rank {
	PRIM_FORK_RESET = 0,
	PRIM_FORK_RUNTIME = 1,		/* runtime/: start-up and shutdown */
	PRIM_FORK_HEAP = 2,		/* heap/: names, shared slot, classes, pages */
	PRIM_FORK_OWN_FDS = 3,		/* base/own_fds: the runtime's descriptors */
	PRIM_FORK_DISPOSITIONS = 4,	/* track/fault_signal: signal dispositions */
	PRIM_FORK_ACTIONS = 5,		/* track/fault_signal: the program's actions */
	PRIM_FORK_RANKS
};
struct prim_lock_kind {
	const char *what;		/* the module and what the lock guards */
	enum prim_fork_rank rank;
	prim_lock_t *(*each)(size_t i);
};
#define PRIM_LOCK_KIND(id, what_, rank_, each_)                                                   \
	static const struct prim_lock_kind id                                                      \
		__attribute__((used, section("pmt_locks"), aligned(sizeof(void *)))) = {           \
			.what = what_, .rank = rank_, .each = each_                                \
		}
#define PRIM_LOCK_NAMED(lock, id, what_, rank_)                                                    \
	static prim_lock_t *id##_each(size_t i) { return i == 0 ? &(lock) : NULL; }              \
	PRIM_LOCK_KIND(id##_kind, what_, rank_, id##_each)
/* pthread_atfork's three, in the forking thread (runtime/startup.c calls
 * them in its own handlers, where the fork order is written down). */
void prim_locks_fork_prepare(void);
void prim_locks_fork_parent(void);
void prim_locks_atfork_child(void);
/* The records, for the tests' hooks (prim_locks_test.h). */
const struct prim_lock_kind *prim_lock_kinds(size_t *n);

/* What the access that raised a SIGSEGV was, decoded from the signal frame
 * (cpu_<arch>.c: the x86-64 page-fault error code; the aarch64 fault's ESR,
 * from the esr_context record the kernel puts in the frame).  The generic
 * build cannot tell and answers PRIM_FAULT_UNKNOWN; so can a real CPU file
 * when the frame lacks the record.  Callers must document what they do with
 * UNKNOWN.  Async-signal-safe; si and ucontext are the handler's arguments
 * (ucontext a ucontext_t *), for a fault the kernel raised (si_code > 0). */
enum prim_fault_access {
	PRIM_FAULT_UNKNOWN,
	PRIM_FAULT_READ,
	PRIM_FAULT_WRITE,
	PRIM_FAULT_EXEC,	/* an instruction fetch */
};
enum prim_fault_access prim_fault_access(const siginfo_t *si, const void *ucontext);
/* The target of the direct call instruction that ends just before
 * return_address (x86-64 `call rel32`, aarch64 `bl`), or 0 when the bytes
 * there are no such instruction (an indirect call) or the CPU file cannot
 * decode calls (generic).  The caller makes sure the bytes before
 * return_address are mapped code (the same object's).  Where a function ends
 * in a tail call to pthread_mutex_lock, the lock call's return address lies
 * in its caller, and this names the function that was called. */
uintptr_t prim_direct_call_target(uintptr_t return_address);
/* The most bytes prim_direct_call_target reads before return_address. */
#define PRIM_CALL_BYTES 5

/* The signal mask of the context a handler interrupted (uc_sigmask of its
 * ucontext_t *), which returning from the handler restores. */
void prim_interrupted_sigmask(const void *ucontext, sigset_t *mask);
/* Replace that mask: what returning from the handler will restore. */
void prim_set_interrupted_sigmask(void *ucontext, const sigset_t *mask);

#endif
