/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prim -- the small set of OS and CPU primitives the runtime uses directly.
 *
 * Owns: raw system calls that are not pthread or stdio: time, futexes,
 * thread ids, whole reads and writes of a file, its disk space and its
 * sync, fixed-address reservations, the signal-frame facts the
 * SIGSEGV handler needs; and the few things that differ by CPU: the
 * spin-wait hint, whether a fault was a write, the vector builds of a
 * vectorising function (PRIM_VECTOR_CLONES).  Nothing outside prim/
 * tests for an architecture.
 *
 *   prim_linux.c      the OS part (Linux, glibc)
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
#include <sys/types.h>

/* Monotonic clock in nanoseconds. */
uint64_t prim_now_ns(void);
void prim_sleep_ns(uint64_t ns);
pid_t prim_gettid(void);
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

/* Wait while *addr == expected, at most timeout_ns (0: no bound).  Returns 0
 * when woken or the value changed, -1 with errno ETIMEDOUT on time-out. */
int prim_futex_wait(atomic_uint *addr, unsigned expected, uint64_t timeout_ns);
void prim_futex_wake(atomic_uint *addr, int count);

/* Reserve len bytes of anonymous read-write memory exactly at addr.  Returns
 * addr, or NULL with errno EEXIST when any part of the range is in use. */
void *prim_map_fixed(void *addr, size_t len);
/* Anonymous read-write memory anywhere; NULL on failure. */
void *prim_map_any(size_t len);
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

/* One step of a spin-wait loop: the CPU's spin hint (x86 pause, arm yield),
 * a compiler barrier on the generic build.  prim_yield gives the processor
 * away (async-signal-safe, unlike pthread calls). */
void prim_cpu_relax(void);
void prim_yield(void);

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
