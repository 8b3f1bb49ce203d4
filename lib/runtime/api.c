/* SPDX-License-Identifier: BSD-3-Clause */
/* api -- the functions of pmthreads.h, over runtime, heap and quiesce. */
#include "base/config.h"
#include "base/export.h"
#include "heap/heap.h"
#include "base/log.h"
#include "quiesce/quiesce.h"
#include "runtime/runtime.h"

#include <pmthreads.h>

#include <errno.h>

PMT_EXPORT void *nvmalloc(size_t size, const char *name)
{
	err_clear();
	if (runtime_init() != 0) {
		errno = runtime_init_errno();
		return NULL;
	}
	if (name != NULL)
		return heap_name_alloc(name, size);
	void *p = heap_calloc(1, size == 0 ? 1 : size);
	if (p == NULL && err_get()[0] == '\0')
		err_set("nvmalloc(%zu): the persistent heap is full; set PMTHREADS_POOL_SIZE "
			"larger for a new pool", size);
	return p;
}

PMT_EXPORT void nvfree(void *ptr)
{
	if (ptr == NULL || runtime_init() != 0)
		return;
	fase_enter();
	heap_name_remove_ptr(ptr);
	heap_free(ptr);
	fase_leave();
}

PMT_EXPORT void *nvrecover(void *dest, size_t size, const char *name)
{
	err_clear();
	if (name == NULL) {
		err_set("nvrecover: no name");
		errno = EINVAL;
		return NULL;
	}
	if (runtime_init() != 0) {
		errno = runtime_init_errno();
		return NULL;
	}
	void *p;
	return heap_name_recover(name, dest, size, &p) == 0 ? p : NULL;
}

PMT_EXPORT bool pmthreads_crashed(void)
{
	return runtime_init() == 0 && runtime_crashed();
}

/* A write-back failed: nothing written since is durable, and never will be
 * in this process (runtime.h). */
static int fail_io(int e)
{
	err_set_errno(e, "the pool's write-back failed: epoch %llu is the last durable one",
		      (unsigned long long)runtime_durable_epoch());
	errno = e;
	return -1;
}

/* A fork child's heap is a private copy: nothing it writes reaches the
 * pool, which stays the parent's.  ENOTSUP, as for an operation valid in
 * general but not for this object (POSIX); ECHILD would read as wait(2)'s
 * "no child processes". */
static int fail_fork_child(void)
{
	err_set_errno(ENOTSUP, "pmthreads_sync: this process is a fork child of a persistent "
		      "program: only the parent is persisted (the child's heap is a private copy, "
		      "never written to the pool); make the work durable in the parent (hand it "
		      "back through a pipe or shared memory), or have the child exec a program "
		      "that opens a pool of its own");
	errno = ENOTSUP;
	return -1;
}

/* The runtime has shut down (the program is exiting: an atexit handler or a
 * destructor that runs after the runtime's): its final epoch was the last
 * durable one, and nothing written since is persisted, nor will be. */
static int fail_shut_down(void)
{
	err_set_errno(ESHUTDOWN, "pmthreads_sync: the pmthreads runtime has shut down (the "
		      "program is exiting): epoch %llu, the final one, is the last durable one "
		      "and nothing written after it is persisted; make the writes durable before "
		      "exit, or in an exit handler registered after the runtime started (after the "
		      "first nvmalloc; under PMTHREADS_HEAP=malloc, in main): such a handler runs "
		      "before the runtime's end",
		      (unsigned long long)runtime_durable_epoch());
	errno = ESHUTDOWN;
	return -1;
}

PMT_EXPORT int pmthreads_sync(void)
{
	err_clear();
	if (runtime_init() != 0) {
		errno = runtime_init_errno();
		return -1;
	}
	/* A fork child first: whatever the parent's pool went through, the
	 * child's heap was never going to be written to it. */
	if (runtime_fork_child())
		return fail_fork_child();
	if (runtime_io_error() != 0)
		return fail_io(runtime_io_error());
	if (runtime_state() != RUNTIME_RUNNING)
		return fail_shut_down();
	if (quiesce_sync() != 0)
		return -1;
	/* The epoch this call waited for may be the one that failed. */
	if (runtime_io_error() != 0)
		return fail_io(runtime_io_error());
	return 0;
}

PMT_EXPORT uint64_t pmthreads_durable_epoch(void)
{
	return runtime_init() == 0 ? runtime_durable_epoch() : 0;
}

PMT_EXPORT ptrdiff_t pmthreads_heap_offset(void)
{
	return runtime_init() == 0 ? runtime_heap_offset() : 0;
}

PMT_EXPORT const char *pmthreads_errormsg(void) { return err_get(); }

PMT_EXPORT int pmthreads_set_pool(const char *path, size_t capacity)
{
	err_clear();
	if (runtime_state() != RUNTIME_NONE) {
		err_set("pmthreads_set_pool: the runtime has already %s; call it before the "
			"first nvmalloc or nvrecover", runtime_state() == RUNTIME_FAILED
			? "failed to start" : "started");
		errno = EBUSY;
		return -1;
	}
	if (config_set_pool(path, capacity) != 0) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}
