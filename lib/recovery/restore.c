/* SPDX-License-Identifier: BSD-3-Clause */
/* restore -- the recovered image into the heap, lazily or eagerly.  See
 * restore.h. */
#include "recovery/restore.h"

#include "base/assert.h"
#include "base/log.h"
#include "base/own_fds.h"
#include "persist/persist.h"
#include "recovery/recovery.h"
#include "prim/prim.h"
#include "prim/prim_uffd.h"
#include "quiesce/quiesce.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Pages the background pass restores between two looks for faults: a fault
 * waits at most this many page copies (a few tens of microseconds). */
#define BACKGROUND_CHUNK 16
/* Pages after a faulting one restored with it (counted as background). */
#define FAULT_AROUND 15
/* Fault messages read at once. */
#define FAULT_BATCH 32

enum who { BY_FAULT, BY_BACKGROUND, BY_FINISH };

/* Whose restore read the pool when its storage failed (read_failed). */
struct read_failure {
	const struct pool *pool;
	bool running;		/* the program runs (lazy restore); else the open */
};

struct restore {
	struct pool *pool;
	unsigned char *base;
	size_t page_size;
	uint64_t limit;		/* pages [0, limit) are registered MISSING */
	int uffd;		/* the tracker's */
	int stop_fd;		/* eventfd: the restorer thread should stop */
	bool no_background;
	/* Per page below limit: 0 not yet restored, 1 restored (or present). */
	_Atomic unsigned char *state;
	size_t state_len;
	/* Pages with a persisted image not yet restored; 0: complete. */
	atomic_uint_fast64_t pending;
	uint64_t t0;
	pthread_t thread;
	bool thread_running;
	atomic_bool stopping;
	_Atomic uint64_t fault_pages, background_pages, finish_pages, zero_pages, complete_ns;
	struct restore_stats base_stats;	/* what restore_open knew */
	struct read_failure failure;	/* set at open, read-only after */
};

/* Source of zero-filled pages (never persisted, or discarded since). */
static const unsigned char zero_page[65536] __attribute__((aligned(4096)));

/* The restore that prefaults and fork must finish; NULL when none. */
static _Atomic(struct restore *) active;
static struct restore_stats last_stats;
static bool atfork_registered;

static void mark_done(struct restore *r, uint64_t page, bool has_image)
{
	/* A page goes from 0 to 1 once and never back. */
	unsigned char was = atomic_exchange_explicit(&r->state[page], 1, memory_order_acq_rel);
	PMT_ASSERT(was <= 1);
	if (was != 0 || !has_image)
		return;
	uint_fast64_t left = atomic_fetch_sub_explicit(&r->pending, 1, memory_order_acq_rel);
	/* Each page with an image was counted once in pending. */
	PMT_ASSERT(left != 0);
	if (left == 1)
		atomic_store(&r->complete_ns, prim_now_ns() - r->t0);
}

/* UFFDIO_COPY of one page.  Returns 0 installed, 1 already present, -1 the
 * heap range is gone or the process is exiting. */
static int copy_page(struct restore *r, uint64_t page, const void *src, uint64_t mode)
{
	struct uffdio_copy cp = {
		.dst = (uintptr_t)(r->base + page * r->page_size),
		.src = (uintptr_t)src,
		.len = r->page_size,
		.mode = mode,
	};
	for (;;) {
		cp.copy = 0;
		if (prim_uffd_ioctl(r->uffd, UFFDIO_COPY, &cp) == 0)
			return 0;
		int e = errno;
		if (e == EEXIST)
			return 1;	/* someone else restored it */
		if (e == EAGAIN || e == EINTR)
			continue;	/* the address space was changing (mmap, fork) */
		if (e == ESRCH || e == ENOENT)
			return -1;	/* exiting, or the heap was unmapped */
		log_fatal("lazy restore: UFFDIO_COPY of heap page %llu failed (%s); the heap cannot "
			  "be restored (PMTHREADS_RESTORE=eager avoids userfaultfd)",
			  (unsigned long long)page, strerror(e));
	}
}

static void wake_page(struct restore *r, uint64_t page)
{
	struct uffdio_range rg = { .start = (uintptr_t)(r->base + page * r->page_size),
				   .len = r->page_size };
	(void)prim_uffd_ioctl(r->uffd, UFFDIO_WAKE, &rg);
}

/* What of the pool the file offset off is, for the message. */
static void describe_offset(const struct pool *p, uint64_t off, char *buf, size_t len)
{
	uint64_t data_end = p->data_off + 2 * p->npages * p->page_size;
	if (off >= p->data_off && off < data_end) {
		uint64_t k = (off - p->data_off) / p->page_size;
		snprintf(buf, len, "copy %d of heap page %llu (heap address %#llx)", (int)(k % 2),
			 (unsigned long long)(k / 2),
			 (unsigned long long)(p->shadow_base + (k / 2) * p->page_size));
	} else {
		snprintf(buf, len, "its %s", off >= data_end      ? "log"
					     : off >= p->sum_off ? "table of page checksums"
					     : off >= p->seq_off ? "table of page copies (seq)"
								 : "header");
	}
}

/* nvm.h's read guard, in the SIGBUS handler of the thread whose read of the
 * pool failed: the image cannot be had, nothing could stand in for the
 * page, and the process ends at once as for a damaged page (_exit: no
 * atexit handler, no final epoch).  Nothing of the pool is written here; on
 * the eager path nothing was before either. */
static void read_failed(void *ctx, uint64_t off)
{
	const struct read_failure *f = ctx;
	char what[160];
	describe_offset(f->pool, off, what, sizeof(what));
	log_msg(LOG_ERR, "pool %s: its storage failed while the heap was restored from it: "
		"reading %s at file offset %llu raised SIGBUS (the file system could not read "
		"it).  The program is stopped (exit status %d) %s; fix the storage under the pool, "
		"then start the program again (`pmthreads-recover check %s` reads every page)",
		f->pool->path, what, (unsigned long long)off, RESTORE_REFUSED_EXIT,
		f->running ? "while it runs; the pool was left as it was, with the epochs made "
			     "durable since it started"
			   : "before the heap was in use; the pool was left as it was, nothing "
			     "written",
		f->pool->path);
	prim_exit_now(RESTORE_REFUSED_EXIT);
}

/* A page that fails its checksum, found while the program runs (on a
 * touch, a neighbour's, the background pass, fork or exit): the program
 * cannot be given the page, nor an older epoch's copy, nor be left running
 * without it.  It ends at once -- _exit: no atexit handler (the runtime's
 * shutdown would persist a final epoch), no stdio flush.  Nothing of the
 * page's copies was written: the page is written only once restored. */
static void verify_or_exit(struct restore *r, uint64_t page, const void *copy)
{
	if (recovery_verify_page(r->pool, page, copy) == 0)
		return;
	log_msg(LOG_ERR, "lazy restore, while the program runs: %s.  The program is stopped "
		"(exit status %d); the epochs made durable since it started are kept", err_get(),
		RESTORE_REFUSED_EXIT);
	prim_exit_now(RESTORE_REFUSED_EXIT);
}

static void restore_page(struct restore *r, uint64_t page, enum who who)
{
	PMT_ASSERT(page < r->limit);	/* only pages below limit are registered MISSING */
	bool pending = atomic_load_explicit(&r->state[page], memory_order_acquire) == 0;
	if (!pending && who != BY_FAULT)
		return;
	const void *src = zero_page;
	uint64_t mode = UFFDIO_COPY_MODE_WP;
	int c = -1;
	if (pending) {
		/* Valid now is valid at start-up: see restore.h. */
		c = pool_valid_copy(r->pool, page);
		if (c >= 0) {
			src = pool_copy(r->pool, page, c);
			verify_or_exit(r, page, src);
		}
	} else {
		/* Restored once, missing again: the program discarded it
		 * (MADV_DONTNEED), so it reads zeros, and it differs from
		 * the pool: not write-protected, it counts as written. */
		mode = 0;
	}
	/* A fault is woken by serve_faults once its neighbours are restored
	 * too: waking at once lets the toucher preempt the restorer, and its
	 * next touch waits for the restorer again. */
	if (who == BY_FAULT)
		mode |= UFFDIO_COPY_MODE_DONTWAKE;
	int rc = copy_page(r, page, src, mode);
	if (rc == 0 && pending) {
		if (c < 0)
			atomic_fetch_add_explicit(&r->zero_pages, 1, memory_order_relaxed);
		else if (who == BY_FAULT)
			atomic_fetch_add_explicit(&r->fault_pages, 1, memory_order_relaxed);
		else if (who == BY_BACKGROUND)
			atomic_fetch_add_explicit(&r->background_pages, 1, memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&r->finish_pages, 1, memory_order_relaxed);
	}
	if (pending && rc >= 0)
		mark_done(r, page, c >= 0);
}

/* Answer every fault message waiting.  Returns false when the process is
 * going away. */
static bool serve_faults(struct restore *r)
{
	struct uffd_msg msgs[FAULT_BATCH];
	for (;;) {
		ssize_t n = prim_read(r->uffd, msgs, sizeof(msgs));
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		for (size_t k = 0; k < (size_t)n / sizeof(msgs[0]); k++) {
			if (msgs[k].event != UFFD_EVENT_PAGEFAULT)
				continue;
			if (msgs[k].arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP)
				continue;	/* resolved by the kernel (WP_ASYNC) */
			uint64_t a = msgs[k].arg.pagefault.address & ~(uint64_t)(r->page_size - 1);
			uint64_t page = (a - (uintptr_t)r->base) / r->page_size;
			if (a < (uintptr_t)r->base || page >= r->limit)
				continue;
			restore_page(r, page, BY_FAULT);
			/* A program that reads a page usually reads its
			 * neighbours next, each another round trip through
			 * this thread unless restored before it wakes. */
			for (uint64_t nb = page + 1; nb < r->limit && nb <= page + FAULT_AROUND; nb++)
				if (atomic_load_explicit(&r->state[nb], memory_order_relaxed) == 0 &&
				    pool_valid_copy(r->pool, nb) >= 0)
					restore_page(r, nb, BY_BACKGROUND);
			wake_page(r, page);
		}
	}
}

static uint64_t background_chunk(struct restore *r, uint64_t next)
{
	for (unsigned n = 0; next < r->limit && n < BACKGROUND_CHUNK; next++) {
		if (atomic_load_explicit(&r->state[next], memory_order_relaxed) != 0)
			continue;
		if (pool_valid_copy(r->pool, next) < 0)
			continue;	/* zeros: left to the first touch */
		restore_page(r, next, BY_BACKGROUND);
		n++;
	}
	return next;
}

static void *restorer_main(void *arg)
{
	struct restore *r = arg;
	struct nvm_read_guard guard = { .failed = read_failed, .ctx = &r->failure };
	nvm_read_guard_push(&guard);
	uint64_t next = r->no_background ? r->limit : 0;
	struct pollfd fds[2] = { { .fd = r->uffd, .events = POLLIN },
				 { .fd = r->stop_fd, .events = POLLIN } };
	for (;;) {
		if (!serve_faults(r) || atomic_load(&r->stopping))
			break;
		if (next < r->limit && atomic_load(&r->pending) != 0) {
			next = background_chunk(r, next);
			continue;
		}
		/* Everything restored: stay for faults on pages the program
		 * discards and touches again, and on never-persisted ones. */
		if (prim_poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
	}
	nvm_read_guard_pop(&guard);
	quiesce_internal_thread_done();
	return NULL;
}

void restore_finish(struct restore *r)
{
	if (r == NULL)
		return;
	struct nvm_read_guard guard = { .failed = read_failed, .ctx = &r->failure };
	nvm_read_guard_push(&guard);
	for (uint64_t i = 0; i < r->limit && atomic_load(&r->pending) != 0; i++) {
		if (atomic_load_explicit(&r->state[i], memory_order_relaxed) == 0 &&
		    pool_valid_copy(r->pool, i) >= 0)
			restore_page(r, i, BY_FINISH);
	}
	nvm_read_guard_pop(&guard);
}

void restore_prefault(void *addr, size_t len)
{
	struct restore *r = atomic_load_explicit(&active, memory_order_acquire);
	if (r == NULL || len == 0 || atomic_load_explicit(&r->pending, memory_order_relaxed) == 0)
		return;
	uintptr_t lo = (uintptr_t)addr, hi = lo + len, b = (uintptr_t)r->base;
	uintptr_t top = b + r->limit * r->page_size;
	if (hi <= b || lo >= top)
		return;
	if (lo < b)
		lo = b;
	if (hi > top)
		hi = top;
	struct nvm_read_guard guard = { .failed = read_failed, .ctx = &r->failure };
	nvm_read_guard_push(&guard);
	for (uint64_t i = (lo - b) / r->page_size; i < (hi - b + r->page_size - 1) / r->page_size; i++)
		restore_page(r, i, BY_FINISH);
	nvm_read_guard_pop(&guard);
}

/* fork(): the child's heap is not registered with our userfaultfd, so every
 * page must be present before the address space is copied. */
static void atfork_prepare(void)
{
	restore_finish(atomic_load(&active));
}

static void free_restore(struct restore *r)
{
	own_fd_close(&r->stop_fd);
	own_fd_forget(&r->uffd);
	if (r->state != NULL)
		prim_unmap((void *)r->state, r->state_len);
	prim_unmap(r, sizeof(*r));
}

/* Returns 0 (lazy restore running), 1 (not possible here: use the eager
 * path; the tracker is still fine for that after a close), -1 error. */
static int start_lazy(struct restore **out, struct tracker *t, struct pool *p, void *shadow,
		      const struct restore_options *o, uint64_t t0, uint64_t limit, uint64_t pages)
{
	if (p->page_size > sizeof(zero_page))
		return 1;
	bool kernel_faults = false;
	int uffd = tracker_uffd_register_missing(t, limit * p->page_size, &kernel_faults);
	if (uffd < 0) {
		log_msg(LOG_INFO, "lazy restore unavailable (%s); copying the heap", err_get());
		return 1;
	}
	uint64_t t_reg = prim_now_ns();
	struct restore *r = prim_map_any(sizeof(*r));
	if (r == NULL) {
		err_set_errno(errno, "cannot allocate the lazy restorer");
		return -1;
	}
	r->pool = p;
	r->failure = (struct read_failure){ .pool = p, .running = true };
	r->base = shadow;
	r->page_size = p->page_size;
	r->limit = limit;
	r->uffd = uffd;
	own_fd_keep(&r->uffd, "userfaultfd");
	r->no_background = o->no_background;
	r->t0 = t0;
	PMT_ASSERT(pages > 0 && pages <= limit);	/* lazy only with pages to restore */
	atomic_store(&r->pending, pages);
	r->stop_fd = prim_eventfd();
	own_fd_keep(&r->stop_fd, "lazy restore's eventfd");
	r->state_len = limit > 0 ? limit : 1;
	r->state = prim_map_any(r->state_len);
	if (r->stop_fd < 0 || r->state == NULL) {
		err_set_errno(errno, "cannot set up the lazy restorer");
		free_restore(r);
		return -1;
	}
	r->base_stats.lazy = true;
	r->base_stats.kernel_faults = kernel_faults;
	r->base_stats.pages = pages;
	if (!atfork_registered) {
		if (pthread_atfork(atfork_prepare, NULL, NULL) != 0) {
			err_set("cannot register the lazy restorer's fork handler");
			free_restore(r);
			return -1;
		}
		atfork_registered = true;
	}
	/* The restorer must never run a handler the program installed: one
	 * that touched a page not yet restored would wait for itself. */
	int e = quiesce_create_internal_thread(&r->thread, restorer_main, r);
	if (e != 0) {
		err_set_errno(e, "cannot start the lazy restorer thread");
		free_restore(r);
		return -1;
	}
	r->thread_running = true;
	log_msg(LOG_DEBUG, "lazy restore: restorer thread up %llu us after the registration",
		(unsigned long long)(prim_now_ns() - t_reg) / 1000);
	if (pages == 0)
		atomic_store(&r->complete_ns, prim_now_ns() - t0);
	atomic_store_explicit(&active, r, memory_order_release);
	*out = r;
	return 0;
}

static int restore_from_pool(struct restore **out, struct tracker **tracker_out, struct pool *p,
			     void *shadow, size_t len, enum tracker_kind kind,
			     const struct restore_options *o, uint64_t t0, uint64_t t_inval);

int restore_open(struct restore **out, struct tracker **tracker_out, struct pool *p, void *shadow,
		 size_t len, enum tracker_kind kind, const struct restore_options *o)
{
	static const struct restore_options defaults = { .policy = RESTORE_AUTO };
	if (o == NULL)
		o = &defaults;
	*out = NULL;
	*tracker_out = NULL;
	memset(&last_stats, 0, sizeof(last_stats));
	uint64_t t0 = prim_now_ns();
	if (p->created) {
		/* Nothing was ever persisted: the fresh range is the image,
		 * and the heap covers what it uses as it grows. */
		int rc = tracker_open_flags(tracker_out, kind, shadow, len, TRACKER_OPEN_COVER_LATER);
		last_stats.complete_ns = last_stats.usable_ns = prim_now_ns() - t0;
		return rc;
	}
	/* No write: torn copies are never served (pool_valid_copy), and
	 * are invalidated durably once the pool passed every check (the
	 * caller, or the first epoch: persist_attempt_begin), before any
	 * epoch can reuse VER_d + 1 -- never before a check that may still
	 * refuse the pool. */
	uint64_t t_inval = prim_now_ns();
	/* The scan and the eager copy read the pool: its storage failing
	 * under them ends the process (read_failed). */
	struct read_failure failure = { .pool = p, .running = false };
	struct nvm_read_guard guard = { .failed = read_failed, .ctx = &failure };
	nvm_read_guard_push(&guard);
	int rc = restore_from_pool(out, tracker_out, p, shadow, len, kind, o, t0, t_inval);
	nvm_read_guard_pop(&guard);
	return rc;
}

/* restore_open's part for a pool that holds an image, under a read guard. */
static int restore_from_pool(struct restore **out, struct tracker **tracker_out, struct pool *p,
			     void *shadow, size_t len, enum tracker_kind kind,
			     const struct restore_options *o, uint64_t t0, uint64_t t_inval)
{
	/* The part of the heap that has persisted pages: only it needs
	 * missing-page faults; above it the kernel zero-fills as usual. */
	uint64_t limit = 0, pages = 0;
	uint64_t npages = len / p->page_size < p->npages ? len / p->page_size : p->npages;
	for (uint64_t i = 0; i < npages; i++)
		if (pool_valid_copy(p, i) >= 0) {
			limit = i + 1;
			pages++;
		}

	bool lazy = o->policy != RESTORE_EAGER && kind != TRACKER_MPROTECT &&
		    tracker_uffd_supported() && pages > 0;
	if (lazy && o->policy == RESTORE_AUTO && !tracker_uffd_kernel_faults_possible()) {
		/* User-mode-only: a system call reading or writing a page not
		 * yet restored would fail with EFAULT. */
		log_msg(LOG_INFO, "lazy restore needs a userfaultfd whose kernel faults wait "
			"(root, or vm.unprivileged_userfaultfd=1); copying the heap "
			"(PMTHREADS_RESTORE=lazy to restore lazily anyway)");
		lazy = false;
	}
	if (lazy) {
		uint64_t t_scan = prim_now_ns();
		struct tracker *t;
		if (tracker_open_flags(&t, kind, shadow, len, TRACKER_OPEN_MISSING) != 0)
			return -1;
		uint64_t t_tracker = prim_now_ns();
		int r = start_lazy(out, t, p, shadow, o, t0, limit, pages);
		if (r == 0) {
			log_msg(LOG_DEBUG, "lazy restore of %llu pages below page %llu: invalidation "
				"%llu us, scan %llu us, tracker %llu us, restorer %llu us",
				(unsigned long long)pages, (unsigned long long)limit,
				(unsigned long long)(t_inval - t0) / 1000,
				(unsigned long long)(t_scan - t_inval) / 1000,
				(unsigned long long)(t_tracker - t_scan) / 1000,
				(unsigned long long)(prim_now_ns() - t_tracker) / 1000);
			last_stats = (*out)->base_stats;
			last_stats.usable_ns = (*out)->base_stats.usable_ns = prim_now_ns() - t0;
			*tracker_out = t;
			return 0;
		}
		tracker_close(t);
		if (r < 0)
			return -1;
	}
	last_stats.pages = pages;
	uint64_t copied = recovery_copy_image(p, shadow);
	if (copied == RECOVERY_REFUSED)
		return -1;	/* err_get() names the page */
	last_stats.eager_pages = copied;
	/* After the copy: the copy's writes must not count as dirty. */
	int rc = tracker_open_flags(tracker_out, kind, shadow, len, TRACKER_OPEN_COVER_LATER);
	if (rc == 0 && tracker_cover(*tracker_out, limit * p->page_size) != 0) {
		tracker_close(*tracker_out);
		*tracker_out = NULL;
		rc = -1;
	}
	last_stats.complete_ns = last_stats.usable_ns = prim_now_ns() - t0;
	return rc;
}

void restore_get_stats(const struct restore *r, struct restore_stats *out)
{
	if (r == NULL) {
		*out = last_stats;
		return;
	}
	*out = r->base_stats;
	out->fault_pages = atomic_load(&r->fault_pages);
	out->background_pages = atomic_load(&r->background_pages);
	out->finish_pages = atomic_load(&r->finish_pages);
	out->zero_pages = atomic_load(&r->zero_pages);
	out->complete_ns = atomic_load(&r->complete_ns);
}

void restore_close(struct restore *r)
{
	if (r == NULL)
		return;
	restore_finish(r);
	atomic_store(&r->stopping, true);
	uint64_t one = 1;
	if (prim_write(r->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		log_msg(LOG_WARN, "lazy restore: cannot signal the restorer thread to stop");
	if (r->thread_running)
		quiesce_join_internal_thread(r->thread, NULL);
	restore_get_stats(r, &last_stats);
	atomic_store(&active, NULL);
	free_restore(r);
}

void restore_abandon(struct restore *r)
{
	if (r == NULL)
		return;
	restore_get_stats(r, &last_stats);
	atomic_store(&active, NULL);
	free_restore(r);
}
