/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmthreads.h -- the public interface of libpmthreads.
 *
 * A program linked with (or LD_PRELOADed with) libpmthreads gets a persistent
 * heap: memory from nvmalloc() (or from malloc() when the program runs with
 * PMTHREADS_HEAP=malloc) whose image is made durable at every global quiescent
 * point, that is every PMTHREADS_INTERVAL_MS milliseconds at an instant when no
 * thread holds a lock.  After a crash the heap comes back, at the same virtual
 * address, as of the last quiescent point.  Writes to the persistent heap are
 * failure-atomic per outermost critical section (FASE): a FASE is recovered
 * entirely or not at all.
 *
 * Every function here may be called before the runtime has initialised: the
 * first call initialises it (opening or creating the pool named by
 * PMTHREADS_POOL).  If initialisation fails the functions return their error
 * value and pmthreads_errormsg() says why.
 */
#ifndef PMTHREADS_H
#define PMTHREADS_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define PMTHREADS_VERSION_MAJOR 0
#define PMTHREADS_VERSION_MINOR 1

/*
 * nvmalloc -- allocate size bytes from the persistent heap.
 *
 * name, when not NULL, registers the object under that name (at most
 * PMTHREADS_NAME_MAX bytes including the terminating NUL) so that a later run
 * can find it with nvrecover().  Registering a name that this run registered
 * already rebinds it (the old object is not freed: the program holds it).
 * Registering a name that an earlier run registered (the one this run
 * recovered) rebinds it too, and keeps that run's object for nvrecover:
 * nvrecover(dest, size, name) copies from it for the rest of the run, and it
 * is freed once copied into the new object, at a clean exit, or by a later
 * run (pmthreads.h(3), RECOVERY ACROSS RUNS).  The memory is zeroed.
 * Objects of a page or more are page-aligned; smaller ones are 16-byte
 * aligned.  Returns NULL with errno set to ENOMEM when the heap is full,
 * EINVAL for a name that is too long, or, when the runtime could not start
 * (pmthreads_errormsg() says why), the cause: ENOENT the pool's directory
 * does not exist; EACCES, EROFS, EPERM, ENOSPC, EDQUOT, ENOMEM... from the
 * system call that failed (EACCES also: a privileged program without a safe
 * place for its pool); EBUSY another process holds the pool (or its path);
 * EINVAL a malformed PMTHREADS_* variable; EBADMSG the file at the pool's
 * path is no pool this program can use (not a pool, damaged, another
 * program's or format version); EPERM this process is not the program that
 * owns the pool (PMTHREADS_PROGRAM); ESHUTDOWN the runtime has shut down.
 * The same error at every later call.
 */
void *nvmalloc(size_t size, const char *name);

/*
 * nvfree -- return an object obtained from nvmalloc() to the persistent heap.
 * A named object's name is removed too (and an earlier run's object kept
 * for that name is freed).  nvfree(NULL) does nothing.
 */
void nvfree(void *ptr);

/*
 * nvrecover -- find the object registered under name in the recovered heap.
 *
 * Returns its address (valid for the life of the process, since the heap is
 * mapped at the address it was created at), or NULL when no object of that
 * name exists or it is smaller than size (the size nvmalloc was asked for,
 * not the block's), with errno ENOENT or ERANGE and pmthreads_errormsg()
 * saying which.  When the runtime could not start: NULL with the errno
 * nvmalloc gives for it (ENOENT too, for a missing directory: the usual
 * "nvrecover, else nvmalloc" then fails at nvmalloc with the same errno).  When dest is not NULL, exactly size bytes are also
 * copied to dest (as NVthreads' nvrecover does) from the data the name had
 * when this run started: the object an earlier run registered, if this run
 * has since rebound the name with nvmalloc, else the registered object; the
 * size rule then applies to that object.
 */
void *nvrecover(void *dest, size_t size, const char *name);

/* Names are at most 127 bytes, as NVthreads allows. */
#define PMTHREADS_NAME_MAX 128

/*
 * pmthreads_crashed -- true when this run recovered a heap that the previous
 * run did not shut down cleanly (it crashed or was killed).  False for a new
 * pool and after a clean exit.  (NVthreads' isCrashed() is this function,
 * in nvrecovery.h.)
 */
bool pmthreads_crashed(void);

/*
 * pmthreads_sync -- force a quiescent point now and return once everything the
 * calling thread wrote to the persistent heap before the call is durable.
 * Returns 0, or -1 with errno EDEADLK when the caller holds a lock (the
 * quiescent point could never be reached), ETIMEDOUT when another thread's
 * lock kept every quiescent point away for PMTHREADS_SYNC_TIMEOUT_MS (default
 * 10 s; a stall report on stderr names it), or another errno on failure.
 * When a write-back of the pool failed (an msync returned EIO, ENOSPC,
 * EDQUOT...): -1 with that errno, now and at every later call -- the epoch
 * was not published, nothing written since the last durable epoch is durable
 * and none will be in this process, which keeps running without persistence
 * (with PMTHREADS_STRICT=1 it has exited with status 1 instead).  ESTALE
 * the same way when the pool file was deleted, renamed or replaced while the
 * program ran (its path no longer leads to the file this process holds; a
 * message at the default verbosity says how to copy it back).  ENOTSUP in
 * a fork child (and its children): only the parent is persisted; the
 * child's heap is a private copy never written to the pool.  ESHUTDOWN
 * after the runtime's end at exit (an exit handler registered before the
 * runtime started, a destructor, another thread still running): the final
 * epoch was the last durable one and nothing written after it is persisted.
 * When the runtime could not start: -1 with nvmalloc's errno for that.
 */
int pmthreads_sync(void);

/*
 * pmthreads_durable_epoch -- the number of the last durable epoch (VER_d).
 * A write that completed before a call returned E is durable once a later
 * call returns E + 2 or more (DudeTM-style acknowledgement).  E + 1 is not
 * enough: epoch E + 1 may have reached its quiescent point before the write
 * and still be writing back (the write-back runs after the threads resume),
 * so only epoch E + 2 is sure to include the write.  pmthreads_sync() waits
 * for durability instead.  After a failed write-back, or once the pool file
 * was deleted, renamed or replaced (see pmthreads_sync), it no longer
 * advances.  After the runtime's end at exit it stays at the final epoch.
 * In a fork child, which is never persisted, it is 0, and stays 0.
 */
uint64_t pmthreads_durable_epoch(void);

/*
 * pmthreads_heap_offset -- 0 when the recovered heap sits at the address it
 * was created at (the normal case).  Otherwise the range was taken in this
 * process and the heap was restored elsewhere: the returned value is
 * (new address - recorded address), which the program must add to pointers
 * stored inside the heap.
 */
ptrdiff_t pmthreads_heap_offset(void);

/*
 * pmthreads_set_pool -- choose the pool file (path; NULL keeps the configured
 * one) and the heap capacity of a pool created by this run (capacity in bytes;
 * 0 keeps it), from the program itself, e.g. from its own command line.  It
 * overrides PMTHREADS_POOL / PMTHREADS_POOL_SIZE and must be called before the
 * runtime starts (before the first nvmalloc, nvrecover or other call that
 * opens the pool; with PMTHREADS_HEAP=malloc the runtime starts at load, so
 * it cannot be used there).  Returns 0, or -1 with errno EBUSY when the
 * runtime has already started (or failed to), EINVAL for a path or capacity
 * that the variables would not accept (pmthreads_errormsg() says why).
 */
int pmthreads_set_pool(const char *path, size_t capacity);

/*
 * pmthreads_errormsg -- a message describing the last error of the calling
 * thread's pmthreads call, or "" when there was none.
 */
const char *pmthreads_errormsg(void);

#ifdef __cplusplus
}
#endif

#endif /* PMTHREADS_H */
