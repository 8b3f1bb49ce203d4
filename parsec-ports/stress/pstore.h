/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pstore.h -- the small storage layer the stress data structures are written
 * against, so that one source builds three ways (chosen at compile time):
 *
 *   native     (no macro)          nodes from calloc, locks are pthread rwlocks
 *                                  inside the nodes.  Run unmodified, or under
 *                                  LD_PRELOAD=libpmthreads.so with
 *                                  PMTHREADS_HEAP=malloc, which makes the
 *                                  structure persistent without a code change.
 *   pmthreads  (-DPSTORE_PMTHREADS) nodes from nvmalloc, the root registered
 *                                  under a name and found again with
 *                                  nvrecover() after a restart.  Locks are
 *                                  pthread rwlocks inside the (persistent)
 *                                  nodes: that is what an unmodified lock-based
 *                                  program does, and the runtime only persists
 *                                  at points where no lock is held, so every
 *                                  recovered lock is in its unlocked state.
 *   pmemobj    (-DPSTORE_PMEMOBJ)  PMDK libpmemobj: every update is one undo-log
 *                                  transaction (pmemobj_tx_begin/_add_range/
 *                                  _commit/_end -- the functional form of
 *                                  TX_BEGIN/TX_ADD/TX_END, used because the
 *                                  transaction spans several functions),
 *                                  nodes from pmemobj_tx_zalloc, the root is the
 *                                  pool's root object.  Locks are PMEMrwlocks
 *                                  inside the nodes: libpmemobj keeps their
 *                                  real state volatile (it re-initialises each
 *                                  one lazily in a new run), so they behave like
 *                                  DRAM locks even though they live in the pool.
 *
 * Links between nodes are pstore_ref values, not raw pointers: for pmemobj a
 * ref is an offset from the pool base (the pool maps at a different address in
 * every run), for the other two it is the address itself (pmthreads brings the
 * heap back at the same address).
 *
 * Every mutating operation is bracketed by pstore_op_begin/pstore_op_end and
 * calls pstore_tx_add(range) before writing an existing node.  For pmemobj
 * that is the transaction; for the others it compiles to nothing (pmthreads
 * makes the outermost critical section failure-atomic by itself).
 *
 * Lock release after a write: an undo-log transaction must keep the locks of
 * the nodes it wrote until it commits.  Otherwise another thread can build on
 * the uncommitted write, commit, and then lose its update when a crash rolls
 * the first transaction back over it.  So a node that was written is released
 * with pstore_release_written(), which for pmemobj defers the unlock to
 * pstore_op_end() (after the commit) and unlocks immediately otherwise.
 * Deferring keeps the top-down lock order, so it adds no deadlock.
 */
#ifndef STRESS_PSTORE_H
#define STRESS_PSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef uintptr_t pstore_ref;

/*
 * pstore_open -- opens (or creates) the store and returns its root object of
 * root_size bytes.  path names the pmemobj pool file (NULL: a fresh pool under
 * /dev/shm, removed by pstore_close); pmthreads takes its pool from
 * PMTHREADS_POOL and ignores path; native ignores it.  root_name names the
 * root for nvrecover().  The root is zeroed when it is new; the structure code
 * marks it initialised itself (inside an operation), so a root whose
 * initialisation was interrupted reads as new.
 */
void *pstore_open(const char *path, const char *root_name, size_t root_size);

/* Closes the store (removes a pool pstore_open created under /dev/shm). */
void pstore_close(void);

/* "native", "pmthreads" or "pmemobj". */
const char *pstore_backend(void);

/* Zeroed memory for a new node.  pmemobj: only inside an operation. */
void *pstore_alloc(size_t size);

/* Prints msg and exits; every unrecoverable storage error ends here. */
_Noreturn void pstore_die(const char *msg);

/* The most node locks one operation may hold back until its commit. */
#define PSTORE_MAX_DEFERRED 128

#if defined(PSTORE_PMEMOBJ)

#include <libpmemobj.h>

typedef PMEMrwlock pstore_lock_t;

extern PMEMobjpool *pstore_pool;
extern uintptr_t pstore_base;

static inline void *pstore_ptr(pstore_ref r)
{
    return r ? (void *)(pstore_base + r) : NULL;
}

static inline pstore_ref pstore_ref_of(const void *p)
{
    return p ? (uintptr_t)p - pstore_base : 0;
}

static inline void pstore_rdlock(pstore_lock_t *l)
{
    if (pmemobj_rwlock_rdlock(pstore_pool, l) != 0)
        pstore_die("pmemobj_rwlock_rdlock failed");
}

static inline void pstore_wrlock(pstore_lock_t *l)
{
    if (pmemobj_rwlock_wrlock(pstore_pool, l) != 0)
        pstore_die("pmemobj_rwlock_wrlock failed");
}

static inline void pstore_unlock(pstore_lock_t *l)
{
    pmemobj_rwlock_unlock(pstore_pool, l);
}

typedef struct pstore_op {
    pstore_lock_t *deferred[PSTORE_MAX_DEFERRED];
    int ndeferred;
} pstore_op;

static inline void pstore_op_begin(pstore_op *op)
{
    op->ndeferred = 0;
    if (pmemobj_tx_begin(pstore_pool, NULL, TX_PARAM_NONE) != 0)
        pstore_die("pmemobj_tx_begin failed");
}

/* Snapshot a range of an existing object before writing it (TX_ADD). */
static inline void pstore_tx_add(void *p, size_t n)
{
    if (pmemobj_tx_add_range_direct(p, n) != 0)
        pstore_die("pmemobj_tx_add_range_direct failed");
}

static inline void pstore_release_written(pstore_op *op, pstore_lock_t *l)
{
    if (op->ndeferred == PSTORE_MAX_DEFERRED)
        pstore_die("too many locks held back for one transaction");
    op->deferred[op->ndeferred++] = l;
}

static inline void pstore_op_end(pstore_op *op)
{
    if (pmemobj_tx_stage() == TX_STAGE_WORK)
        pmemobj_tx_commit();
    if (pmemobj_tx_end() != 0)
        pstore_die("transaction aborted");
    /* Committed: now others may see what it wrote. */
    for (int i = op->ndeferred - 1; i >= 0; i--)
        pstore_unlock(op->deferred[i]);
    op->ndeferred = 0;
}

#else /* native and pmthreads: plain pthread rwlocks, no transaction */

#include <pthread.h>

typedef pthread_rwlock_t pstore_lock_t;

static inline void *pstore_ptr(pstore_ref r)
{
    return (void *)r;
}

static inline pstore_ref pstore_ref_of(const void *p)
{
    return (uintptr_t)p;
}

static inline void pstore_rdlock(pstore_lock_t *l)
{
    if (pthread_rwlock_rdlock(l) != 0)
        pstore_die("pthread_rwlock_rdlock failed");
}

static inline void pstore_wrlock(pstore_lock_t *l)
{
    if (pthread_rwlock_wrlock(l) != 0)
        pstore_die("pthread_rwlock_wrlock failed");
}

static inline void pstore_unlock(pstore_lock_t *l)
{
    pthread_rwlock_unlock(l);
}

typedef struct pstore_op {
    int unused;
} pstore_op;

static inline void pstore_op_begin(pstore_op *op)
{
    (void)op;
}

static inline void pstore_tx_add(void *p, size_t n)
{
    (void)p;
    (void)n;
}

static inline void pstore_release_written(pstore_op *op, pstore_lock_t *l)
{
    (void)op;
    pstore_unlock(l);
}

static inline void pstore_op_end(pstore_op *op)
{
    (void)op;
}

#endif

/*
 * pstore_alloc'd nodes need no lock initialisation: a zero-filled
 * pthread_rwlock_t equals PTHREAD_RWLOCK_INITIALIZER on glibc, and a zeroed
 * PMEMrwlock is valid by definition.
 */

/* Releases a node lock: deferred when the operation wrote that node. */
static inline void pstore_release(pstore_op *op, pstore_lock_t *l, bool written)
{
    if (written)
        pstore_release_written(op, l);
    else
        pstore_unlock(l);
}

#endif /* STRESS_PSTORE_H */
