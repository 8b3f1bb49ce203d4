/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pthread_threads -- thread lifecycle.
 *
 * pthread_create wraps the start routine so that the thread registers with
 * quiesce before it runs and, however it ends (return, pthread_exit,
 * cancellation), gives back its heap cache and its record.  Blocking waits
 * (joins, barriers, semaphores) are in pthread_blocking.c.
 */
#include "base/export.h"
#include "preload.h"
#include "real.h"
#include "runtime/interpose.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

/* glibc's allocator, called directly: the trampoline is runtime memory and
 * never belongs in the persistent heap. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

struct trampoline {
	void *(*start)(void *);
	void *arg;
	bool blocks_segv;	/* the creator's view of its mask (fault_signal.h) */
};

static __thread bool exit_done __attribute__((tls_model("initial-exec")));
/* Counted among the application's threads (quiesce_app_thread_added): the
 * main thread and every thread started through the wrapper.  Others (glibc's
 * internal helper threads, anything created without pthread_create) are
 * only seen in /proc/self/task when the count reaches 0. */
static __thread bool counted __attribute__((tls_model("initial-exec")));
/* Started through thread_main, whose cleanup handler runs after all of the
 * application's (it was pushed first). */
static __thread bool wrapped __attribute__((tls_model("initial-exec")));

void preload_thread_exit(void)
{
	if (exit_done)
		return;
	exit_done = true;
	heap_thread_exit();
	quiesce_thread_exit();
	if (counted) {
		counted = false;
		quiesce_app_thread_gone();
	}
}

__thread bool preload_known_thread __attribute__((tls_model("initial-exec")));

void preload_main_thread_counted(void)
{
	counted = true;
	preload_known_thread = true;
}

static void thread_cleanup(void *unused)
{
	(void)unused;
	preload_thread_exit();
}

void preload_thread_started(bool blocks_segv)
{
	fault_signal_set_app_blocked(blocks_segv);
	wrapped = true;
	counted = true;	/* by the creating thread, before the creation */
	preload_known_thread = true;
	quiesce_thread_start();
}

static void *thread_main(void *p)
{
	struct trampoline t = *(struct trampoline *)p;
	__libc_free(p);
	preload_thread_started(t.blocks_segv);
	void *ret;
	pthread_cleanup_push(thread_cleanup, NULL);
	ret = t.start(t.arg);
	pthread_cleanup_pop(1);
	return ret;
}

PMT_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*start)(void *),
			      void *arg)
{
	struct trampoline *t = __libc_malloc(sizeof(*t));
	if (t == NULL)
		return EAGAIN;
	t->start = start;
	t->arg = arg;
	t->blocks_segv = fault_signal_app_blocked();
	/* A stack in the heap pinned writable (kernel_stacks.h). */
	void *stack;
	if (kernel_stack_thread_begin(attr, &stack) != 0) {
		__libc_free(t);
		return EAGAIN;
	}
	/* Counted before it exists: a main thread that calls pthread_exit
	 * right after this must not look like the last one. */
	quiesce_app_thread_added();
	int r = REAL(create)(th, attr, thread_main, t);
	if (r != 0) {
		quiesce_app_thread_gone();
		__libc_free(t);
	}
	kernel_stack_thread_end(stack, r, r == 0 ? *th : (pthread_t)0);
	return r;
}

PMT_EXPORT void pthread_exit(void *ret)
{
	/* Threads not created through the wrapper (the main thread) have no
	 * cleanup handler of ours; the others get theirs after the
	 * application's handlers, which may still unlock. */
	if (!wrapped)
		preload_thread_exit();
	REAL(exit)(ret);
}
