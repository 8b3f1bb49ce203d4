/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prim -- the small set of OS primitives the runtime uses directly.
 *
 * Owns: raw system calls that are not pthread or stdio: time, futexes,
 * thread ids, fixed-address reservations.  Implemented for Linux in
 * prim_linux.c.  The runtime's own locks (prim_lock) are futex-based and never
 * go through pthread_mutex_*, so the interposition layer never sees or counts
 * them and they work before anything has been resolved with dlsym.
 */
#ifndef PMT_PRIM_H
#define PMT_PRIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Monotonic clock in nanoseconds. */
uint64_t prim_now_ns(void);
void prim_sleep_ns(uint64_t ns);
pid_t prim_gettid(void);

/* Write all len bytes to fd, retrying short writes and EINTR.  Returns 0, or
 * -1 with errno set (a write that made no progress fails with EIO).  Uses
 * write(2) only: callable from signal handlers. */
int prim_write_all(int fd, const void *buf, size_t len);

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

/* Give memory back to the system, keeping the range reserved (reads see
 * zeros again).  Not for hot paths: it costs TLB shootdowns. */
void prim_discard(void *addr, size_t len);

/* Allocate and map the pages of [addr, addr+len) writable now, without a
 * fault per page later (madvise MADV_POPULATE_WRITE, Linux >= 5.14).  For
 * a shared file mapping on tmpfs or DAX this allocates the file's pages;
 * on an ordinary file it would dirty the page cache, so do not use it
 * there.  Returns 0, or -1 with errno set (EINVAL: the kernel lacks it). */
int prim_populate_write(void *addr, size_t len);

/* One step of a spin-wait loop; prim_yield gives the processor away
 * (async-signal-safe, unlike pthread calls). */
static inline void prim_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}
void prim_yield(void);

/* A futex mutex, zero-initialised (PRIM_LOCK_INIT).  Not recursive. */
typedef struct { atomic_uint state; } prim_lock_t;
#define PRIM_LOCK_INIT { 0 }
void prim_lock(prim_lock_t *l);
bool prim_trylock(prim_lock_t *l);
void prim_unlock(prim_lock_t *l);

#endif
