/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * interpose -- the interface the runtime offers its interposers (preload/).
 *
 * Owns: nothing but the boundary.  preload/ includes this header and
 * base/export.h, nothing else of lib/ (the layers test checks it), so that
 * every policy a wrapper applies is found here or behind what this includes.
 *
 * Most of what a wrapper calls is a runtime/ module written for it, included
 * below.  Three lower modules are included too, because their calls sit on
 * the program's hot paths and must stay inline or direct (no runtime step in
 * between); one more because its calls are pure pass-through of a state it
 * owns.  The rest of lib/ preload reaches only through the entry points
 * declared at the end.
 */
#ifndef PMT_RUNTIME_INTERPOSE_H
#define PMT_RUNTIME_INTERPOSE_H

/* runtime/'s own modules, each the policy behind one group of wrappers. */
#include "runtime/aio_pins.h"		/* aio_*: buffers pinned while in flight */
#include "runtime/exec_env.h"		/* exec*: LD_PRELOAD kept, pool released */
#include "runtime/kernel_stacks.h"	/* stacks the kernel writes (threads, sigaltstack) */
#include "runtime/memory_limits.h"	/* getrlimit/setrlimit/prlimit */
#include "runtime/memory_lock.h"	/* mlockall/munlockall */
#include "runtime/prefault.h"		/* system calls writing into the heap: EFAULT policy */
#include "runtime/runtime.h"		/* runtime_init, runtime_in_init (malloc before start) */
#include "runtime/startup.h"		/* the constructor, exit and fork order */

/* Hot: every lock, unlock and condition wait of the program.  The fast paths
 * (fase_enter_lock, fase_leave_lock, fase_acquire_failed, fase_enter_fast,
 * fase_leave_fast) are inline here, a call into quiesce/ costing as much as
 * the lock itself; the wrappers also take fase_reenter*, fase_cond_leave,
 * fase_pass_gate, fase_depth and the thread hooks (quiesce_thread_*,
 * quiesce_app_thread_*, quiesce_note_blocking_in_fase) from it. */
#include "quiesce/quiesce.h"

/* Hot: malloc and friends go straight to the allocator (heap_malloc,
 * heap_free, heap_contains, ...), one call as before. */
#include "heap/heap.h"

/* Hot: every write, send, close, poll and epoll_wait first tests output
 * commit with one inline load (output_active, output_poll_needed,
 * output_epoll_needed); the held calls then go to output/ as they are.
 * readiness.h includes output.h. */
#include "output/readiness.h"

/* Pass-through: the program's SIGSEGV/SIGBUS dispositions and every signal
 * mask it sets are track/'s state (fault_signal_sigaction,
 * fault_signal_sigmask, fault_signal_call_begin/end around the calls that
 * install a mask, whose struct fault_signal_call lives on the wrapper's
 * stack). */
#include "track/fault_signal.h"

#include <stdarg.h>
#include <stdbool.h>

/* ---- entry points for what preload needs of base/ and prim/ ---- */

/* The wrappers cannot go on (a real libc function is missing): the message
 * goes where every runtime error goes (log_fatal), then abort. */
__attribute__((noreturn, format(printf, 1, 2))) void runtime_fatal(const char *fmt, ...);

/* Serialise preload's one-time set-ups that may race before the constructor
 * (resolving the real functions).  A futex lock of the runtime's: never the
 * pthread functions preload interposes.  Not recursive. */
void runtime_interposer_lock(void);
void runtime_interposer_unlock(void);

/* The CPU's spin-wait hint, for a wait of a few instructions (another thread
 * finishing the same one-time set-up). */
void runtime_cpu_relax(void);

/* A system call by number, never through the preload's syscall(2) wrapper
 * (prim_syscall6): what that wrapper forwards to. */
long runtime_syscall6(long nr, long a0, long a1, long a2, long a3, long a4, long a5);

/* Whether fd is one of the runtime's own descriptors (own_fds.h), which the
 * program's close, dup and fcntl must not reach: they fail with EBADF. */
bool runtime_fd_is_own(int fd);

/* Before the program's dup2/dup3 onto fd: when fd is one of the runtime's,
 * move it away first.  0 when fd is free for the call, -1 (EMFILE) when it
 * cannot move. */
int runtime_fd_vacate(int fd);

/* The program's close_range/closefrom over [first, last]: close_gap closes
 * each part that holds none of the runtime's descriptors. */
int runtime_fd_close_range(unsigned first, unsigned last, int flags,
			   int (*close_gap)(unsigned first, unsigned last, int flags));

#endif
