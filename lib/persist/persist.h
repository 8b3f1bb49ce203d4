/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist -- the epoch algorithm: a batch of dirty pages made durable.
 *
 * persist_epoch implements the failure-atomic version switch (PMThreads'
 * Algorithm 2), batched: for all dirty pages the older copy's seq is set to
 * VER_d+1 (one fence), the 64-byte lines of that copy which differ from the
 * shadow page are written with the copy's checksum (one fence), then VER_d+1
 * is published (one fence).
 * Three fences per epoch, whatever the number of pages.
 * Its inverse, after a crash, is recovery/recovery.h.
 */
#ifndef PMT_PERSIST_H
#define PMT_PERSIST_H

#include "base/stats_fields.h"
#include "persist/pool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(kind, field, report key): base/stats_fields.h.  The epoch pipeline
 * sums them over every epoch (epoch.h), and the report writes them. */
#define PERSIST_STATS_FIELDS(X) \
	X(count, lines_written, "lines_written") /* 64-byte lines that differed and were written */ \
	X(count, bytes_written, "bytes_written") /* lines_written * 64 */ \
	X(count, bytes_compared, "bytes_compared") /* bytes diffed */ \
	X(count, fences, "fences") \
	/* working copies chosen (a page already chosen by an unpublished \
	 * attempt is not counted again) */ \
	X(count, pages, "copies_chosen") \
	/* of them, valid copies rewritten in place (persist_attempt) */ \
	X(count, pages_in_place, "pages_in_place") \
	/* attempts rewritten in place, not published, put back */ \
	X(count, attempts_reverted, "attempts_reverted") \
	/* of the copies chosen, those written whole, straight from the \
	 * write-back's buffer (nvm_write_direct), no line compared */ \
	X(count, pages_whole, "pages_whole") \
	/* pages to be written whole written as lines instead: the log held \
	 * records for their copy */ \
	X(count, whole_refused, "pages_whole_refused")

struct persist_stats {
	PERSIST_STATS_FIELDS(STATS_DECLARE)
};

static inline void persist_stats_add(struct persist_stats *dst, const struct persist_stats *src)
{
	PERSIST_STATS_FIELDS(STATS_ADD)
}

/* Where persist_epoch_from reads the image of each page.  begin returns the
 * image of pages[k] (page_size bytes, line-aligned) until end(ctx, k); each
 * k is begun and ended once, in order, during the data phase (after the seq
 * fence, before the data fence).  The epoch pipeline (epoch.c) reads a page
 * from the copy it took inside the pause, or else from the live shadow page
 * -- which the program may be writing meanwhile: the image need not stay
 * stable, the pipeline then does not publish what it read.  Each line is
 * read from the image once, and each copy's checksum (pool.h, the sum
 * table) follows from the very bytes written, so it always describes the
 * copy, stable image or not. */
struct persist_source {
	const void *(*begin)(void *ctx, size_t k, uint64_t page);
	/* lines: how many of the copy's lines differed from the image and
	 * were rewritten (0: the page had not changed). */
	void (*end)(void *ctx, size_t k, size_t lines);
	void *ctx;
};

/* Persist the given dirty pages (indices into the heap, any order, no
 * duplicates -- a duplicate is ignored) of the shadow image at shadow
 * (npages pages).  Returns 0 when the image is durable and *p->ver_d was
 * incremented; the errno of a failed write-back (nvm_error: EIO, ENOSPC...)
 * when it is not: then *p->ver_d is unchanged, and every later call returns
 * that errno at once without writing (the pool is no longer trusted for new
 * epochs; the next open recovers the last published one).  n == 0 is a
 * no-op returning 0.  The counts of this epoch are added to
 * *st (which may be NULL).  If the pool's torn copies have not been
 * invalidated since it was opened, that is done first.  A page index
 * >= p->npages, or a read-only pool, aborts (a caller bug). */
int persist_epoch(struct pool *p, const void *shadow, const uint64_t *pages, size_t n,
		  struct persist_stats *st);

/* Reserve now what the write-back needs beside the pool: where the pool's
 * backend has groups, the in-place undo area (twice nvm_group_room_max:
 * address space, touched as attempts use it); where it writes pages
 * straight, the whole pages' hints (a byte a page) and buffer.  Now, not at
 * the first attempt: memory the runtime maps later is not in what the
 * kernel's RLIMIT_DATA was raised by when the program set it
 * (runtime/memory_limits.h), and would come out of the program's own share.
 * 0 (also where there is nothing to reserve), or -1 with err set (ENOMEM);
 * what could not be had is then never chosen (in place, whole pages). */
int persist_reserve_memory(struct pool *p);
/* The same, reading each page's image through src. */
int persist_epoch_from(struct pool *p, const struct persist_source *src, const uint64_t *pages,
		       size_t n, struct persist_stats *st);

/* The same in three steps, one attempt at the epoch VER_d+1, for a caller
 * that must look at what it read before it decides to publish (epoch.c: a live page written while it was
 * being read is never published).  begin chooses each page's working copy
 * and durably gives it seq VER_d+1 (the first fence); write stores the
 * lines that differ and their checksums (no fence); end fences the data
 * (the second fence) and, when publish is true, publishes VER_d+1 (the
 * third), then adds the attempt's counts to *st (may be NULL).
 *
 * An attempt ended without publishing leaves its working copies at VER_d+1:
 * invalid after a crash (recovery invalidates them), and chosen again by the
 * next begin, which then only rewrites what its own pages list.  So the
 * next attempt must list every page whose image changed since the
 * unpublished one read it; pages it does not list keep what that attempt
 * wrote, and its checksums (both fenced by its end), and are published
 * with it.  begin with n == 0
 * and end(publish) publish such an attempt's copies alone.
 *
 * In place: where the pool's backend makes everything between two fences
 * all-or-nothing (nvm.h's groups, nvm_group_room) and the attempt fits,
 * begin chooses no working copy for a page that has a valid one: write
 * rewrites the valid copy itself (its lines and checksum), so that each
 * changed line is written once, not once into each copy as the copies take
 * turns, and what the backend later writes back is one copy, not two.
 * Nothing of it counts before the publication's fence commits the group.
 * An attempt so written that ends unpublished puts back every byte it
 * overwrote (reverted is then true), and the next attempt must list every
 * page this one listed as well as its own.  The choice is made from what
 * recent attempts took of the group's room per page; an attempt that
 * outgrows the room after all is put back as soon as it would (reverted,
 * never published, whatever end is asked) and the next one takes working
 * copies. */
/*
 * Whole pages: where the backend writes pages straight to the medium
 * (nvm_has_direct: the log backend on a file), a page most of whose lines
 * change is written whole into its working copy, from a buffer its image
 * is copied into and summed from, in one write a run of adjacent pages (the
 * copies of a run are adjacent in a format-7 pool), never compared line by
 * line, never logged, never written again by a checkpoint: one copy of the
 * page on the device.  Its copy's seq (VER_d+1, torn) is fenced first -- a
 * real fence, not an order: the page may reach the file before anything
 * ordered after it -- and the publication's fence syncs the pages before it
 * writes its commit (three device flushes for such an epoch instead of
 * one, so only attempts with at least PERSIST_WHOLE_MIN such pages write
 * any whole).  Which pages: those never persisted in a run of dirty pages
 * (then compared line by line at their next write-back, to learn how they
 * change), and those whose last comparison found at least half their lines
 * changed -- compared again, read-only, beside the whole write after 3, 7,
 * 15 and 31 whole writes, then every 31 (persist_internal.h), so that a page
 * that changes less is found, and a page that changes whole pays a
 * comparison rarely.  A copy the log holds records for since its last
 * checkpoint gets a reload after them (nvm_log.h, format 7); in a format-6
 * pool it is not written whole (a replay would apply them over it): its
 * lines are written instead.
 */
#define PERSIST_WHOLE_MIN 32

struct persist_attempt {
	struct pool *p;
	uint64_t next;			/* VER_d + 1 */
	uint64_t fences0;
	bool failed;			/* a write-back failed (nvm_error): this
					 * attempt writes nothing */
	bool in_place;			/* pages with a valid copy are rewritten
					 * there (the backend's groups) */
	bool reverted;			/* in-place pages put back (not published,
					 * or outgrowing the room): never published,
					 * to be listed again */
	size_t room0;			/* nvm_group_room at begin */
	/* Pages written whole in this attempt (persist.h, "Whole pages"):
	 * how many, and the pages begin was given (the caller's array, which
	 * outlives the attempt). */
	size_t nwhole;
	const uint64_t *pages;
	size_t n;
	struct persist_stats st;
};
void persist_attempt_begin(struct persist_attempt *e, struct pool *p, const uint64_t *pages, size_t n);
void persist_attempt_write(struct persist_attempt *e, const struct persist_source *src,
			   const uint64_t *pages, size_t n);
/* Returns 0, or the errno of a failed flush or fence (nvm_error: latched;
 * nothing is published then, nor ever after in this process). */
int persist_attempt_end(struct persist_attempt *e, bool publish, struct persist_stats *st);

/* What persist keeps of a pool beside its file (the in-place undo area,
 * the whole pages' hints and buffer): given back when the pool closes. */
void persist_release(struct pool *p);

/* Durably mark every copy with seq > VER_d (left by an interrupted epoch) as
 * POOL_SEQ_INVALID: one flush per seq-table line holding any, one fence
 * when any.  Must happen
 * before the next epoch reuses VER_d + 1, or that epoch would make the torn
 * copy valid again.  recovery_restore_image and persist_epoch call it; idempotent.
 * Returns the number of copies invalidated; 0 on a read-only pool. */
uint64_t persist_invalidate_torn(struct pool *p);

/* Test hook: break persist_epoch's ordering on purpose, so that crash tests
 * can show the simulator catches each kind of mistake.  Never set outside
 * tests.  Process-wide. */
enum persist_fault {
	PERSIST_FAULT_NONE = 0,
	PERSIST_FAULT_SKIP_SEQ_FENCE,	/* seq writes share the data fence */
	PERSIST_FAULT_SKIP_DATA_FENCE,	/* data shares the VER_d fence */
	PERSIST_FAULT_SKIP_DATA_FLUSH,	/* data lines stored, never flushed */
	PERSIST_FAULT_VER_BEFORE_DATA,	/* VER_d published before the data */
	PERSIST_FAULT_SKIP_INVALIDATE,	/* recovery leaves torn copies as they are */
	PERSIST_FAULT_SKIP_SUM_FLUSH,	/* checksums stored, never flushed */
	PERSIST_FAULT_SKIP_SUMS,	/* no checksum computed or stored (also
					 * bench_persist's baseline for their cost) */
};
void persist_set_fault(enum persist_fault f);
enum persist_fault persist_get_fault(void);

#endif
