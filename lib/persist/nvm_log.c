/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm log backend -- a redo log in the pool file for block storage: the
 * writer.  See nvm_log.h for the design and nvm.h for the contract it keeps.
 *
 * Owns: flush, order and fence as records appended to the ring (assembled
 * in memory, a group written with its commit, one fdatasync a fence), a
 * record too large written through, checkpoints (whole, or in waves over
 * the fences), the head slots, the device's writes and syncs (the file; a
 * simulated one is nvm_log_sim.c's; injected errors in test builds only,
 * PMT_TEST_HOOKS), and the mapping's set-up, close, format and queries.
 * Replay at open is nvm_log_replay.c's.
 */
#include "persist/nvm_log.h"

#include "base/assert.h"
#include "base/log.h"
#include "base/own_fds.h"
#include "persist/nvm_backend.h"
#define XXH_STATIC_LINKING_ONLY	/* XXH3_state_t on the stack */
#include "persist/nvm_log_internal.h"
#include "persist/nvm_sim.h"
#include "prim/prim.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

/* ---- the device ---- */

static int dev_write(struct log_dev *d, const void *buf, size_t len, uint64_t off)
{
#ifdef PMT_TEST_HOOKS
	if (dev_fails(d))
		return d->fail_err;
#endif
	if (d->sim != NULL)
		return nvm_log_sim_write(d, buf, len, off);
	return pwrite_all(*d->fd, buf, len, off);
}

/* Every write before it durable: the whole pages written straight too
 * (drained first: nvm_log_direct.c). */
static int dev_sync(struct log_dev *d)
{
#ifdef PMT_TEST_HOOKS
	if (dev_fails(d))
		return d->fail_err;
#endif
	int e = nvm_log_direct_drain(d);
	if (e == 0)
		e = d->sim != NULL ? nvm_log_sim_sync(d) : prim_fdatasync(*d->fd) != 0 ? errno : 0;
	if (e == 0)
		d->direct.unsynced = false;
	return e;
}

/* ---- records and head slots ---- */

uint64_t nvm_log_rec_check(const struct log_state *s, const unsigned char *rec, size_t len)
{
	/* The head with check = 0, then the rest. */
	struct log_rec h;
	memcpy(&h, rec, sizeof(h));
	h.check = 0;
	/* A state on the stack must be initialised first: the reset skips
	 * deriving the seed's secret when the garbage it finds there names
	 * the same seed (xxhash.h, XXH3_INITSTATE). */
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_64bits_reset_withSeed(&st, s->r.seed);
	XXH3_64bits_update(&st, &h, sizeof(h));
	XXH3_64bits_update(&st, rec + sizeof(h), len - sizeof(h));
	return XXH3_64bits_digest(&st);
}

static uint64_t range_bytes(uint64_t len) { return 8 + ((len + 7) & ~7ULL); }

static uint64_t rec_bytes(uint64_t payload)
{
	return (sizeof(struct log_rec) + payload + REC_ALIGN - 1) / REC_ALIGN * REC_ALIGN;
}

static int write_head_resume(struct nvm *n, struct log_state *s, uint64_t pos, uint64_t seq,
			     uint64_t resume_pos, uint64_t resume_seq)
{
	int slot = 1 - s->head_slot;
	_Alignas(NVM_LINE) unsigned char line[NVM_LINE] = { 0 };
	struct log_head h = { s->head_gen + 1, pos, seq, 0, resume_pos, resume_seq, 0 };
	h.check = head_check(&h, slot, s->r.seed, HEAD_TAG);
	h.resume_check = resume_check(&h, slot, s->r.seed);
	memcpy(line, &h, sizeof(h));
	uint64_t off = s->r.head_off + (uint64_t)slot * NVM_LINE;
	int e = dev_write(&s->dev, line, sizeof(line), off);
	if (e == 0)
		e = dev_sync(&s->dev);
	n->stats.device_bytes += sizeof(line);
	n->stats.device_flushes++;
	if (e != 0)
		return e;
	/* The mapping's copy of the header page is written back whole by a
	 * checkpoint: it must hold the slot as the file does. */
	memcpy((unsigned char *)n->base + off, line, sizeof(line));
	s->head_slot = slot;
	s->head_gen = h.gen;
	s->resume_pos = resume_pos;
	s->resume_seq = resume_seq;
	return 0;
}

static int write_head(struct nvm *n, struct log_state *s, uint64_t pos, uint64_t seq)
{
	return write_head_resume(n, s, pos, seq, pos, seq);
}

/* ---- checkpoint ---- */

/* The ring's synced pages behind the tail leave the page cache: nothing
 * reads them but a replay, and a page left cached in a large folio would
 * count (/proc/PID/io) as a whole folio written each time a record
 * reaches it on the next lap. */
static void drop_synced(struct log_state *s)
{
	uint64_t to = s->tail / s->page_size * s->page_size;
	if (to <= s->cached_from)
		return;
	if (to - s->cached_from >= s->r.size) {
		prim_drop_cache(*s->dev.fd, s->r.off, s->r.size);
	} else {
		uint64_t a = s->cached_from % s->r.size, len = to - s->cached_from;
		uint64_t first = a + len > s->r.size ? s->r.size - a : len;
		prim_drop_cache(*s->dev.fd, s->r.off + a, first);
		if (first < len)
			prim_drop_cache(*s->dev.fd, s->r.off, len - first);
	}
	s->cached_from = to;
}

static int write_record(struct log_state *s, const unsigned char *rec, size_t len, uint64_t pos);

/* The records buffered (and pad bytes of zeros after them) in one write. */
static int write_buffered(struct nvm *n, struct log_state *s, size_t pad)
{
	if (s->buffered == 0)
		return 0;
	memset(s->buf + s->buffered, 0, pad);
	int e = write_record(s, s->buf, s->buffered + pad, s->tail - s->buffered);
	n->stats.device_bytes += s->buffered + pad;
	s->buffered = 0;
	return e;
}

static int sync_records(struct nvm *n, struct log_state *s)
{
	int e = write_buffered(n, s, 0);
	if (e != 0)
		return e;
	e = dev_sync(&s->dev);
	n->stats.device_flushes++;
	if (e == 0) {
		s->unsynced = false;
		if (s->dev.sim == NULL)
			drop_synced(s);
	}
	return e;
}

/* Write up to *budget of the pages set in bits from the mapping into the
 * file, in runs; *budget is what is left of it, bytes what was written.
 * cursor NULL: from the first page, each bit cleared once its page is
 * written; else from page *cursor on, the bits kept (the wave's: its pages
 * are still the ring's until the head moves past its records, which
 * nvm_direct_allowed must see), *cursor moved past what was written.  0 or
 * an errno. */
static int write_pages(struct nvm *n, struct log_state *s, uint64_t *bits, uint64_t *cursor,
		       size_t *budget, uint64_t *bytes)
{
	const unsigned char *map = n->base;
	const size_t ps = s->page_size;
	const uint64_t npages = (uint64_t)s->touched_words * 64;
	uint64_t at = cursor != NULL ? *cursor : 0;
	while (*budget != 0 && at < npages) {
		/* The next page set, a word at a time. */
		uint64_t w = bits[at / 64] & (~0ULL << (at % 64));
		if (w == 0) {
			at = (at / 64 + 1) * 64;
			continue;
		}
		uint64_t first = at / 64 * 64 + (uint64_t)__builtin_ctzll(w), end = first;
		/* The run, across words, within the budget. */
		while (end - first < *budget && end < npages && (bits[end / 64] & (1ULL << (end % 64)))) {
			if (cursor == NULL)
				bits[end / 64] &= ~(1ULL << (end % 64));
			end++;
		}
		at = end;
		*budget -= (size_t)(end - first);
		uint64_t off = first * ps, len = (end - first) * ps;
		if (off + len > n->len)
			len = n->len - off;
		int e = dev_write(&s->dev, map + off, (size_t)len, off);
		*bytes += len;
		n->stats.device_bytes += len;
		n->stats.checkpoint_bytes += len;
		if (cursor != NULL)
			*cursor = at;
		if (e != 0)
			return e;
	}
	if (cursor != NULL)
		*cursor = at;
	return 0;
}

/* The pages written in place are durable (a sync when any were written),
 * then the head moves to pos, the record with seq: a checkpoint's end.
 * 0 or an errno. */
static int move_head(struct nvm *n, struct log_state *s, bool written, uint64_t pos, uint64_t seq)
{
	int e = 0;
	if (written) {
		e = dev_sync(&s->dev);
		n->stats.device_flushes++;
	}
	if (e == 0)
		e = write_head(n, s, pos, seq);
	if (e != 0)
		return e;
	s->head = pos;
	s->head_seq = seq;
	n->stats.checkpoints++;
	return 0;
}

/* Write every touched page from the mapping into the file, sync, and move
 * the head to the tail.  Only when the mapping holds no store that a later
 * fence would make durable (nothing pending), or when the pending ranges
 * are being written through anyway.  A wave under way is finished by it. */
static int checkpoint(struct nvm *n, struct log_state *s)
{
	/* Every record appended is durable before any page it touched is
	 * written in place: replay stops at the first incomplete record, and
	 * a page written ahead of an earlier record would be out of order. */
	if (s->unsynced) {
		int e = sync_records(n, s);
		if (e != 0)
			return e;
	}
	if (s->wave_on) {
		for (size_t w = 0; w < s->touched_words; w++)
			s->touched[w] |= s->wave[w];
		memset(s->wave, 0, s->touched_words * sizeof(uint64_t));
		s->wave_on = false;
	}
	uint64_t bytes = 0;
	size_t all = SIZE_MAX;
	int e = write_pages(n, s, s->touched, NULL, &all, &bytes);
	if (e != 0)
		return e;
	s->any_touched = false;
	return move_head(n, s, bytes != 0, s->tail, s->next_seq);
}

/* Half full after a fence: a wave starts with the pages touched so
 * far, and every fence after it writes a share of them (an eighth, at least
 * 64 pages), so that no fence stalls for a whole checkpoint; once they are
 * all written, a sync and the head moves to where the wave started.  The
 * pages are written as the mapping holds them then -- newer than the wave's
 * records, which is as good: every line a later record changed is replayed
 * from it (docs/design.md).  Past three quarters a whole checkpoint finishes
 * the wave.  Only right after a fence: nothing pending, nothing of an
 * uncommitted group in the mapping. */
static int wave_step(struct nvm *n, struct log_state *s)
{
	if (!s->wave_on) {
		if (s->tail - s->head <= s->r.size / 2 || !s->any_touched)
			return 0;
		uint64_t *t = s->wave;
		s->wave = s->touched;
		s->touched = t;
		s->any_touched = false;
		size_t pages = 0;
		for (size_t w = 0; w < s->touched_words; w++)
			pages += (size_t)__builtin_popcountll(s->wave[w]);
		s->wave_budget = pages / 8 > 64 ? pages / 8 : 64;
		s->wave_pos = s->tail;
		s->wave_seq = s->next_seq;
		s->wave_cursor = 0;
		s->wave_on = true;
	}
	uint64_t bytes = 0;
	size_t budget = s->wave_budget;
	int e = write_pages(n, s, s->wave, &s->wave_cursor, &budget, &bytes);
	if (e != 0 || s->wave_cursor < (uint64_t)s->touched_words * 64)
		return e;	/* more next fence (budget spent) */
	/* The wave is written: durable, then the head moves to its start. */
	e = move_head(n, s, true, s->wave_pos, s->wave_seq);
	if (e == 0) {
		memset(s->wave, 0, s->touched_words * sizeof(uint64_t));
		s->wave_on = false;
	}
	return e;
}

/* ---- flush and fence ---- */

static void log_flush(struct nvm *n, const void *addr, size_t len)
{
	struct log_state *s = n->impl;
	if (len == 0)
		return;
	/* Whole 8-byte words: a range header counts in them. */
	uint64_t off = ((uintptr_t)addr - (uintptr_t)n->base) & ~7ULL;
	uint64_t end = (((uintptr_t)addr - (uintptr_t)n->base) + len + 7) & ~7ULL;
	if (!range_allowed(n, s, off, end - off))
		log_fatal("nvm log: flush of [%llu, %llu) of the pool file, which the log owns or "
			  "which lies outside it", (unsigned long long)off, (unsigned long long)end);
	/* Stored through the mapping: its copy of the page is private now. */
	for (uint64_t p = off / s->page_size; p <= (end - 1) / s->page_size; p++)
		s->cowed[p / 64] |= 1ULL << (p % 64);
	if (s->npending != 0) {
		struct range *last = &s->pending[s->npending - 1];
		/* The common case: the next lines of a run, or the same line
		 * (never a reload, whose length is 0). */
		if (last->len != 0 && off >= last->off && off <= last->off + last->len) {
			if (end > last->off + last->len) {
				s->pending_bytes -= range_bytes(last->len);
				last->len = end - last->off;
				s->pending_bytes += range_bytes(last->len);
			}
			return;
		}
	}
	if (s->npending == s->pending_cap)
		log_fatal("nvm log: more than %zu ranges flushed before one fence", s->pending_cap);
	s->pending[s->npending++] = (struct range){ off, end - off };
	s->pending_bytes += range_bytes(end - off);
}

/* The record of the pending ranges, assembled in s->buf; its length. */
static size_t assemble(const struct nvm *n, struct log_state *s, uint64_t pos, uint64_t flags)
{
	unsigned char *rec = s->buf + s->buffered;
	unsigned char *b = rec + sizeof(struct log_rec);
	uint32_t nranges = 0;
	for (size_t i = 0; i < s->npending; i++) {
		uint64_t off = s->pending[i].off, left = s->pending[i].len;
		if (left == 0) {	/* a reload: its header alone */
			uint64_t hdr = (off / 8) << 16;
			memcpy(b, &hdr, 8);
			b += 8;
			nranges++;
			continue;
		}
		while (left > 0) {
			uint64_t l = left < RANGE_MAX_BYTES ? left : RANGE_MAX_BYTES;
			uint64_t hdr = (off / 8) << 16 | (l / 8);
			memcpy(b, &hdr, 8);
			memcpy(b + 8, (const unsigned char *)n->base + off, (size_t)l);
			b += 8 + l;
			off += l;
			left -= l;
			nranges++;
		}
	}
	uint64_t payload = (uint64_t)(b - (rec + sizeof(struct log_rec)));
	size_t len = (size_t)rec_bytes(payload);
	memset(b, 0, len - sizeof(struct log_rec) - payload);
	struct log_rec h = { REC_MAGIC, s->next_seq, pos, (uint32_t)len, nranges, payload, 0, flags, 0 };
	memcpy(rec, &h, sizeof(h));
	h.check = nvm_log_rec_check(s, rec, len);
	memcpy(rec, &h, sizeof(h));
	return len;
}

/* Write a record of len bytes at position pos of the ring: one write, or
 * two when it wraps around the ring's end. */
static int write_record(struct log_state *s, const unsigned char *rec, size_t len, uint64_t pos)
{
	uint64_t in = pos % s->r.size;
	size_t first = in + len > s->r.size ? (size_t)(s->r.size - in) : len;
	int e = dev_write(&s->dev, rec, first, s->r.off + in);
	if (e == 0 && first < len)
		e = dev_write(&s->dev, rec + first, len - first, s->r.off);
	return e;
}

/* The pending ranges are now in a record or written through: their pages
 * are the next checkpoint's. */
static void take_pending(struct log_state *s)
{
	for (size_t i = 0; i < s->npending; i++)
		if (s->pending[i].len != 0)	/* a reload touches nothing */
			touch(s, s->pending[i].off, s->pending[i].len);
	s->npending = 0;
	s->pending_bytes = 0;
}

static int write_through(struct nvm *n, struct log_state *s)
{
	take_pending(s);
	n->stats.writes_through++;
	/* Whatever the group had appended is in place now, with the rest. */
	s->group_open = false;
	return checkpoint(n, s);
}

/* After an open the ring past the records replayed may hold records of the
 * run that crashed: uncommitted ones, or ones behind a torn record, each
 * with the seq and position the chain would expect there next.  Appended
 * over, a new record that is torn could leave such a stale one (or a stale
 * commit after a new record of the same length) in the chain, replayed as
 * ours.  So the first append skips every seq the old run can have used in
 * this lap (at most one a line of the ring), and the head slot says where
 * the skip is -- written and synced first, the head itself unmoved (the
 * slot has room for one skip: nvm_log_init checkpoints an older one away
 * before anything is stored). */
static int jump_past_stale(struct nvm *n, struct log_state *s)
{
	PMT_ASSERT(s->resume_pos <= s->head);
	/* Past the skip of a run that crashed before this one, too. */
	uint64_t from = s->resume_seq > s->next_seq ? s->resume_seq : s->next_seq;
	uint64_t seq = from + s->r.size / REC_ALIGN + 1;
	int e = s->tail == s->head ? write_head(n, s, s->head, seq)
				   : write_head_resume(n, s, s->head, s->head_seq, s->tail, seq);
	if (e == 0 && s->tail == s->head)
		s->head_seq = seq;
	if (e == 0) {
		s->next_seq = seq;
		s->jump_pending = false;
	}
	return e;
}

/* Append the pending ranges as the next record (no sync); commit: as the
 * group's last record, even with nothing pending.  A record that does not
 * commit is only buffered (log_state.buffered); the commit writes the
 * group's records at once.  0 or an errno. */
static int append(struct nvm *n, struct log_state *s, bool commit)
{
	if (s->npending == 0 && !(commit && s->group_open))
		return 0;
	if (s->jump_pending) {
		int e = jump_past_stale(n, s);
		if (e != 0)
			return e;
	}
	uint64_t len = rec_bytes(s->pending_bytes);
	/* After every fence at most three quarters of the ring are in use
	 * (log_fence); a record larger than half of it, or than what is
	 * free, is written through (nvm_log.h). */
	if (len > s->r.size / 2 || s->tail + len - s->head > s->r.size)
		return write_through(n, s);
	/* The buffer holds r.size bytes: room for this record and a page of
	 * padding, or the group so far is written first. */
	if (s->buffered + len + s->page_size > s->r.size) {
		int e = write_buffered(n, s, 0);
		if (e != 0) {
			s->npending = 0;
			s->pending_bytes = 0;
			return e;
		}
	}
	size_t rl = assemble(n, s, s->tail, commit ? REC_COMMIT : 0);
	s->buffered += rl;
	s->tail += rl;
	s->next_seq++;
	s->unsynced = true;
	s->group_open = !commit;
	n->stats.log_records++;
	n->stats.log_bytes += rl;
	take_pending(s);
	if (!commit)
		return 0;
	/* Zeros to the end of the group's last page (where the ring is free
	 * that far): that page has left the page cache (drop_synced), and a
	 * write of part of a page not cached makes the kernel read the rest
	 * from the disk first -- a synchronous read in every small epoch.  The
	 * device writes the whole page either way; the next record overwrites
	 * the zeros. */
	uint64_t pad = (s->page_size - s->tail % s->page_size) % s->page_size;
	if (s->tail + pad - s->head > s->r.size)
		pad = s->head + s->r.size - s->tail;
	/* An error is latched (fail): nothing is appended again. */
	return write_buffered(n, s, (size_t)pad);
}

static void fail(struct nvm *n, int e)
{
	log_msg(LOG_DEBUG, "the pool's log write failed (%s)", strerror(e));
	nvm_latch_error(n, e);
}

/* A checkpoint that failed after the last fence (log_state.deferred_error)
 * is latched now, before anything more is written.  Whether it was. */
static bool latch_deferred(struct nvm *n, struct log_state *s)
{
	if (s->deferred_error == 0)
		return false;
	fail(n, s->deferred_error);
	s->deferred_error = 0;
	return true;
}

/* Records are replayed in order and only up to the first that is not
 * complete, so appending one orders it after every earlier one: no sync.
 * The whole pages written since complete first (nvm.h: the mapping reads
 * them from the next order or fence on -- the redo of an attempt compares
 * against them). */
static void log_order(struct nvm *n)
{
	struct log_state *s = n->impl;
	if (latch_deferred(n, s))
		return;
	int e = nvm_log_direct_drain(&s->dev);
	if (e == 0)
		e = append(n, s, false);
	if (e != 0)
		fail(n, e);
}

/* A file cut short under us: the writes to the ring past its new end would
 * extend it again and succeed, and their sync too, but the next open refuses
 * a pool whose size is not its header's -- nothing may be acknowledged. */
static int check_size(const struct nvm *n)
{
	struct stat st;
	if (prim_fstat(n->fd, &st) != 0)
		return errno;
	return (uint64_t)st.st_size < n->len ? EIO : 0;
}

static void log_fence(struct nvm *n)
{
	struct log_state *s = n->impl;
	if (latch_deferred(n, s))
		return;
	int e = check_size(n);
	/* Pages written straight are durable before the commit that makes
	 * them count: one sync of them (and of the group's records so far,
	 * uncommitted) first, then the commit's. */
	if (e == 0 && s->dev.direct.unsynced)
		e = sync_records(n, s);
	if (e == 0)
		e = append(n, s, true);
	if (e == 0 && s->unsynced)
		e = sync_records(n, s);
	if (e != 0) {
		fail(n, e);
		return;
	}
	/* Half full: a wave of the checkpoint a fence; over three quarters:
	 * all of it now, while nothing is pending. */
	e = wave_step(n, s);
	if (e == 0 && s->tail - s->head > s->r.size / 4 * 3)
		e = checkpoint(n, s);
	/* The records are durable: this fence succeeded whatever became of
	 * the checkpoint, whose failure only stops what comes after it.  The
	 * head did not move past a record whose pages did not reach the file
	 * (move_head syncs them first), so the next open replays them. */
	if (e != 0) {
		log_msg(LOG_DEBUG, "a checkpoint of the pool's log failed (%s); the epoch just "
			"written stands, nothing more is written", strerror(e));
		s->deferred_error = e;
	}
}

int nvm_log_checkpoint(struct nvm *n)
{
	struct log_state *s = nvm_log_of(n);
	if (s == NULL || n->read_only)
		return 0;
	/* A write: the pool passed its checks (nvm_accept), or it is now. */
	if (nvm_accept(n) != 0)
		return n->error;
	if (n->error != 0 || latch_deferred(n, s))
		return n->error;
	if (s->npending != 0 ||
	    (!s->any_touched && !s->wave_on && s->head == s->tail && !s->unsynced))
		return 0;
	int e = checkpoint(n, s);
	if (e != 0)
		nvm_latch_error(n, e);
	return n->error;
}


uint64_t nvm_log_touched_end(const struct nvm *n, uint64_t lo, uint64_t hi)
{
	const struct log_state *s = nvm_log_of(n);
	if (s == NULL || hi <= lo)
		return lo;
	uint64_t first = lo / s->page_size, p = (hi - 1) / s->page_size + 1;
	while (p-- > first)
		if (s->touched[p / 64] & (1ULL << (p % 64)))
			return (p + 1) * s->page_size < hi ? (p + 1) * s->page_size : hi;
	return lo;
}

/* What the open group may still take with none of it written in place: its
 * records all fit in the ring (after those it has), none over half of it
 * (append writes such a one through). */
static size_t log_group_room(const struct nvm *n)
{
	const struct log_state *s = n->impl;
	if (n->error != 0 || s->deferred_error != 0 || s->jump_pending || !n->accepted)
		return 0;
	uint64_t room = s->r.size - (s->tail - s->head);
	if (room > s->r.size / 2)
		room = s->r.size / 2;
	uint64_t held = rec_bytes(s->pending_bytes);
	return room > held ? (size_t)(room - held) : 0;
}

/* The most log_group_room gives: half the ring. */
static size_t log_group_room_max(const struct nvm *n)
{
	const struct log_state *s = n->impl;
	return (size_t)(s->r.size / 2);
}

static void log_discard_flushed(struct nvm *n)
{
	struct log_state *s = n->impl;
	/* The reloads stay: the pages they name were written to the file,
	 * whatever the caller put back in the mapping. */
	size_t kept = 0;
	for (size_t i = 0; i < s->npending; i++)
		if (s->pending[i].len == 0)
			s->pending[kept++] = s->pending[i];
	s->npending = kept;
	s->pending_bytes = kept * range_bytes(0);
}

/* nvm_write_direct: the pages to the file at once; the mapping's copies
 * of them (private, perhaps stale) are dropped, so that it reads what the
 * file holds from now on. */
static void log_write_direct(struct nvm *n, void *dst, const void *src, size_t len)
{
	struct log_state *s = n->impl;
	if (latch_deferred(n, s))
		return;
	uint64_t off = (uint64_t)((uintptr_t)dst - (uintptr_t)n->base);
	if (off % s->page_size != 0 || len % s->page_size != 0 || !range_allowed(n, s, off, len))
		log_fatal("nvm log: a direct write of [%llu, %llu) of the pool file, which is not "
			  "whole pages of its data", (unsigned long long)off,
			  (unsigned long long)(off + len));
	int e = nvm_log_direct_write(&s->dev, src, len, off);
	n->stats.device_bytes += len;
	n->stats.direct_bytes += len;
	if (e != 0) {
		fail(n, e);
		return;
	}
	/* The mapping's private copies of these pages, if any, are stale: it
	 * reads the file's from now on.  (A page only read through it shares
	 * the page cache's, which the file system updates or drops.)  A page
	 * records in the ring still touch gets a reload after them, in the
	 * group that publishes it: a replay reads it from the file afresh
	 * (log_direct_allowed let it through only where the log has them). */
	bool any = false;
	for (uint64_t p = off / s->page_size; p < (off + len) / s->page_size; p++) {
		uint64_t bit = 1ULL << (p % 64);
		any |= (s->cowed[p / 64] & bit) != 0;
		s->cowed[p / 64] &= ~bit;
		if ((s->touched[p / 64] & bit) || (s->wave_on && (s->wave[p / 64] & bit))) {
			if (s->npending == s->pending_cap)
				log_fatal("nvm log: more than %zu ranges flushed before one fence",
					  s->pending_cap);
			s->pending[s->npending++] = (struct range){ p * s->page_size, 0 };
			s->pending_bytes += range_bytes(0);
		}
	}
	if (any)
		prim_discard(dst, len);
}

static void log_direct_reserve(struct nvm *n)
{
	struct log_state *s = n->impl;
	nvm_log_direct_reserve(&s->dev);
}

static void *log_direct_stage(struct nvm *n, size_t len)
{
	struct log_state *s = n->impl;
	return s->deferred_error != 0 ? NULL : nvm_log_direct_stage(&s->dev, len);
}

/* Whether a replay could apply a record over [addr, addr + len): one that
 * touched it since the last checkpoint (or in the wave under way) is
 * still in the ring. */
static bool log_direct_allowed(const struct nvm *n, const void *addr, size_t len)
{
	const struct log_state *s = n->impl;
	if (s->deferred_error != 0 || len == 0)
		return false;
	if (s->r.reloads)
		return true;	/* a reload follows the records (log_write_direct) */
	uint64_t off = (uint64_t)((uintptr_t)addr - (uintptr_t)n->base);
	for (uint64_t p = off / s->page_size; p <= (off + len - 1) / s->page_size; p++) {
		uint64_t bit = 1ULL << (p % 64);
		if ((s->touched[p / 64] & bit) || (s->wave_on && (s->wave[p / 64] & bit)))
			return false;
	}
	return true;
}

/* ---- set-up ---- */

static void log_unmap(struct nvm *n)
{
	struct log_state *s = n->impl;
	if (s == NULL)
		return;
	/* A clean close leaves nothing to replay (nothing pending: the last
	 * fence was the close's record).  A pool never accepted -- refused
	 * by a check after the replay, or closed before its first write --
	 * is left exactly as it was: what the replay made stays in the log. */
	if (!n->read_only && n->accepted && n->error == 0)
		(void)nvm_log_checkpoint(n);
	if (s->dev.sim != NULL)
		nvm_log_sim_free(&s->dev);
	/* A fork child's copy (nvm_abandon) leaves the parent's writes alone. */
	nvm_log_direct_free(&s->dev, !n->read_only);
	if (s->pending != NULL)
		prim_unmap(s->pending, s->pending_cap * sizeof(*s->pending));
	if (s->touched != NULL)
		prim_unmap(s->touched, s->touched_words * 8);
	if (s->wave != NULL)
		prim_unmap(s->wave, s->touched_words * 8);
	if (s->cowed != NULL)
		prim_unmap(s->cowed, s->touched_words * 8);
	if (s->buf != NULL)
		prim_unmap(s->buf, s->r.size);
	prim_unmap(s, sizeof(*s));
	n->impl = NULL;
}

/* nvm_accept: what the open deferred (nvm_log_init). */
static int log_accept(struct nvm *n)
{
	struct log_state *s = n->impl;
	if (!s->resume_due)
		return 0;
	s->resume_due = false;
	return checkpoint(n, s);
}

static const struct nvm_ops log_ops = {
	.name = "log",
	.accept = log_accept,
	.flush = log_flush,
	.fence = log_fence,
	.order = log_order,
	.group_room = log_group_room,
	.group_room_max = log_group_room_max,
	.discard_flushed = log_discard_flushed,
	.unmap = log_unmap,
	.copy_flush = NULL,
	.write_direct = log_write_direct,
	.direct_stage = log_direct_stage,
	.direct_reserve = log_direct_reserve,
	.direct_allowed = log_direct_allowed,
};

static const struct nvm_ops log_readonly_ops = {
	.name = "log (read-only)",
	.flush = nvm_readonly_flush,
	.fence = nvm_readonly_fence,
	.unmap = log_unmap,
	.copy_flush = NULL,
};

struct log_state *nvm_log_of(const struct nvm *n)
{
	return n != NULL && (n->ops == &log_ops || n->ops == &log_readonly_ops) ? n->impl : NULL;
}

int nvm_log_get_info(const struct nvm *n, struct nvm_log_info *out)
{
	const struct log_state *s = nvm_log_of(n);
	if (s == NULL)
		return -1;
	*out = (struct nvm_log_info){ s->head, s->tail, s->head_seq, s->next_seq,
				      n->stats.log_replayed_records, n->stats.log_replayed_bytes, s->r.size,
				      s->head_slot };
	return 0;
}

static bool region_sane(const struct nvm_log_region *r, size_t len, size_t ps)
{
	return r->size >= NVM_LOG_MIN_SIZE && r->size % ps == 0 && r->off % ps == 0 &&
	       r->off <= len && r->size <= len - r->off && r->head_off % NVM_LINE == 0 &&
	       r->head_off + NVM_LOG_HEAD_BYTES <= r->off;
}

/* n: mapped private (read-write, even for a read-only file: replay writes
 * the mapping only). */
int nvm_log_init(struct nvm *n, const struct nvm_log_region *r, const struct nvm_sim_options *sim,
		 bool read_only)
{
	size_t ps = prim_page_size();
	if (!region_sane(r, n->len, ps)) {
		err_set("the pool's log region (offset %llu, %llu bytes) does not fit its file of %zu "
			"bytes: the header is corrupt", (unsigned long long)r->off,
			(unsigned long long)r->size, n->len);
		return -1;
	}
	/* The runtime's memory, not malloc's (nvm.c): zeroed. */
	struct log_state *s = prim_map_any(sizeof(*s));
	if (s == NULL) {
		err_set_errno(ENOMEM, "cannot set up the pool's log");
		return -1;
	}
	s->r = *r;
	s->page_size = ps;
	s->dev.fd = &n->fd;
	nvm_log_direct_init(&s->dev);
	size_t pages = (n->len + ps - 1) / ps;
	s->touched_words = (pages + 63) / 64;
	/* Every range is at least 16 bytes of a record: the ring bounds a
	 * record, not a fence group (one larger is written through), so the
	 * list is sized for the whole file's lines. */
	s->pending_cap = n->len / NVM_LINE + 16;
	n->impl = s;
	n->ops = read_only ? &log_readonly_ops : &log_ops;
	s->touched = prim_map_any(s->touched_words * 8);
	s->wave = read_only ? NULL : prim_map_any(s->touched_words * 8);
	s->cowed = read_only ? NULL : prim_map_any(s->touched_words * 8);
	s->pending = read_only ? NULL : prim_map_any(s->pending_cap * sizeof(*s->pending));
	s->buf = read_only ? NULL : prim_map_any(r->size);
	if (s->touched == NULL ||
	    (!read_only &&
	     (s->pending == NULL || s->buf == NULL || s->wave == NULL || s->cowed == NULL))) {
		err_set_errno(ENOMEM, "cannot reserve the pool log's buffers");
		log_unmap(n);
		return -1;
	}
	if (sim != NULL && nvm_log_sim_init(&s->dev, sim) != 0) {
		log_unmap(n);
		return -1;
	}
	/* The replay reads what the device holds, not what the page cache
	 * shows: a run whose fdatasync of the ring failed left its records
	 * cached (the kernel keeps pages it could not write, marked clean),
	 * and replaying them would bring back an epoch that run was told was
	 * not durable (issue 39 item 4).  Nothing is lost: the synced part of
	 * the ring leaves the cache anyway (drop_synced, and below). */
	if (sim == NULL)
		prim_drop_cache(n->fd, r->off, r->size);
	if (nvm_log_replay(n, s) != 0) {
		/* Nothing of a pool that fails here is ever written. */
		n->read_only = true;
		log_unmap(n);
		return -1;
	}
	s->jump_pending = !read_only;
	/* What the replay stored, and what its helper made private ahead of
	 * it (whether applied or not): any page may be the mapping's own. */
	if (!read_only && (n->stats.log_replayed_records != 0 || n->stats.log_replay_prefaulted != 0))
		memset(s->cowed, 0xff, s->touched_words * 8);
	/* Written whole at creation, read by the replay: none of it is
	 * needed cached (drop_synced). */
	if (!read_only && sim == NULL) {
		prim_drop_cache(n->fd, r->off, r->size);
		s->cached_from = s->tail / ps * ps;
	}
	/* The skip of an earlier run still in the log (it crashed before a
	 * checkpoint, and so did the run before it): the head moves past it
	 * when the pool is accepted (log_accept), before anything is stored
	 * -- the mapping holds only what the log made durable then -- and not
	 * now, while the checks of the open may still refuse the pool. */
	s->resume_due = !read_only && s->resume_pos > s->head;
	return 0;
}

int nvm_log_format(int fd, const char *path, const struct nvm_log_region *r, bool fill)
{
	static const unsigned char zeros[1 << 16];
	/* Where the ring is not written (tmpfs), its space is still reserved:
	 * a full file system must fail an allocation, never an epoch. */
	if (!fill && prim_fallocate(fd, r->off, r->size) != 0 && errno != EOPNOTSUPP &&
	    errno != ENOSYS) {
		err_set_errno(errno, "cannot create pool %s: no space for its log of %llu bytes "
			      "(free space, or make it smaller with PMTHREADS_LOG_SIZE)", path,
			      (unsigned long long)r->size);
		return -1;
	}
	for (uint64_t done = 0; fill && done < r->size;) {
		size_t l = r->size - done < sizeof(zeros) ? (size_t)(r->size - done) : sizeof(zeros);
		int e = pwrite_all(fd, zeros, l, r->off + done);
		if (e != 0) {
			err_set_errno(e, "cannot create pool %s: writing its log region failed", path);
			return -1;
		}
		done += l;
	}
	for (int slot = 0; slot < 2; slot++) {
		_Alignas(NVM_LINE) unsigned char line[NVM_LINE] = { 0 };
		struct log_head h = { (uint64_t)slot, 0, 1, 0, 0, 1, 0 };
		h.check = head_check(&h, slot, r->seed, HEAD_TAG);
		h.resume_check = resume_check(&h, slot, r->seed);
		memcpy(line, &h, sizeof(h));
		int e = pwrite_all(fd, line, sizeof(line), r->head_off + (uint64_t)slot * NVM_LINE);
		if (e != 0) {
			err_set_errno(e, "cannot create pool %s: writing its log head failed", path);
			return -1;
		}
	}
	return 0;
}
