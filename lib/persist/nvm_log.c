/* SPDX-License-Identifier: BSD-3-Clause */
/* nvm log backend -- a redo log in the pool file for block storage.  See
 * nvm_log.h for the design and nvm.h for the contract it keeps. */
#include "persist/nvm_log.h"

#include "base/assert.h"
#include "base/log.h"
#include "persist/nvm_backend.h"
#include "persist/nvm_sim.h"
#include "prim/prim.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY	/* XXH3_state_t on the stack */
#include <xxhash.h>

/* Records of the first format 6 pools (before groups) each counted alone;
 * a record of a group counts only with the group's commit record. */
#define REC_MAGIC_SINGLE 0x31524c544d504dULL	/* "PMTLR1\0" little-endian-ish tag */
#define REC_MAGIC 0x32524c544d504dULL		/* "PMTLR2\0" */
#define REC_COMMIT 1ULL
#define REC_ALIGN NVM_LINE
/* A range header: offset/8 in bits 16-63, length/8 in bits 0-15. */
#define RANGE_MAX_BYTES (0xffffu * 8u)
#define SECTOR 512

/* The head of every record; len includes it and is a multiple of REC_ALIGN. */
struct log_rec {
	uint64_t magic;
	uint64_t seq;		/* consecutive from 1 */
	uint64_t pos;		/* its byte position (monotonic, ring offset = pos % size) */
	uint32_t len;
	uint32_t nranges;
	uint64_t payload;	/* bytes of range headers and data after this head */
	uint64_t check;		/* XXH3 of the record with check = 0 */
	uint64_t flags;		/* REC_COMMIT: the last record of a group */
	uint64_t reserved;
};
_Static_assert(sizeof(struct log_rec) == REC_ALIGN, "a record head is one line");

/* One head slot: the position and seq of the oldest record still needed;
 * and where a run that opened the pool after a crash began appending, with
 * the seq it skipped to there (jump_past_stale).  The resume fields have
 * their own checksum: slots written before them (zeros) have none, and
 * resume where nothing does. */
struct log_head {
	uint64_t gen;
	uint64_t pos;
	uint64_t seq;
	uint64_t check;		/* of gen, pos, seq */
	uint64_t resume_pos;
	uint64_t resume_seq;
	uint64_t resume_check;	/* of everything before it */
};
_Static_assert(sizeof(struct log_head) <= NVM_LINE, "a head slot is one line");

struct range {
	uint64_t off;
	uint64_t len;
};

/* The device under the log: the file, or (tests) a simulation of it. */
struct log_dev {
	const int *fd;		/* the mapping's (nvm.fd): own_fds may move it */
	/* Simulation only (sim != NULL): unsynced writes, with what they
	 * overwrote, for the crash. */
	struct nvm_sim_options *sim;
	uint64_t primitives;
	uint64_t rng;
	struct undo {
		uint64_t off;
		size_t len;
		unsigned char *old;
	} *undo;
	size_t nundo, undo_cap;
	/* Tests (nvm_log_fail_io): the fail_at-th write or sync from now
	 * fails with fail_err, doing nothing. */
	uint64_t fail_at;
	int fail_err;
};

static bool dev_fails(struct log_dev *d)
{
	return d->fail_at != 0 && --d->fail_at == 0;
}

struct log_state {
	struct nvm_log_region r;
	size_t page_size;
	struct log_dev dev;

	uint64_t head, tail;		/* positions: [head, tail) is live */
	uint64_t head_seq, next_seq;
	uint64_t head_gen;
	int head_slot;
	/* The record at resume_pos has seq resume_seq (not one more than the
	 * one before it): struct log_head. */
	uint64_t resume_pos, resume_seq;

	/* Ranges flushed since the last fence. */
	struct range *pending;
	size_t npending, pending_cap;	/* entries (address space reserved) */
	uint64_t pending_bytes;		/* what their record would take */

	/* File pages written by records since the last checkpoint. */
	uint64_t *touched;
	size_t touched_words;
	bool any_touched;
	/* A checkpoint spread over the fences (wave_step): the pages records
	 * before wave_pos (seq wave_seq) touched and the wave has yet to
	 * write; wave_budget pages a fence. */
	uint64_t *wave;
	bool wave_on;
	uint64_t wave_pos, wave_seq;
	size_t wave_budget;
	bool unsynced;			/* records appended since the last sync */
	/* An open group's records not yet written: s->buf[0, buffered) is
	 * ring bytes from position tail - buffered.  A group is
	 * all-or-nothing, so its records need reach the file only with its
	 * commit: one write a group, not one a record (write_buffered). */
	size_t buffered;
	uint64_t cached_from;		/* ring bytes before it left the page cache */
	bool group_open;		/* records appended since the last commit */
	/* The next append first checkpoints and moves the head past a gap of
	 * seq numbers (see jump_past_stale). */
	bool jump_pending;
	/* The replay met the skip of an earlier run: the head moves past it
	 * with a checkpoint when the pool is accepted (log_accept), before
	 * anything is stored, never while a check may still refuse it. */
	bool resume_due;

	unsigned char *buf;		/* record assembly, r.size bytes reserved */
};

static struct log_state *log_of(const struct nvm *n);

/* ---- the device ---- */

static void dev_crash(struct log_dev *d);

static void dev_primitive(struct log_dev *d)
{
	d->primitives++;
	if (d->sim->crash_after != 0 && d->primitives == d->sim->crash_after)
		dev_crash(d);
}

/* 0 or an errno. */
static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	return prim_pwrite_all(fd, buf, len, (off_t)off) == 0 ? 0 : errno;
}

/* Keep what a simulated write overwrites, for the crash. */
static int dev_remember(struct log_dev *d, uint64_t off, size_t len)
{
	if (d->nundo == d->undo_cap) {
		size_t cap = d->undo_cap ? 2 * d->undo_cap : 64;
		struct undo *u = realloc(d->undo, cap * sizeof(*u));
		if (u == NULL)
			return ENOMEM;
		d->undo = u;
		d->undo_cap = cap;
	}
	unsigned char *old = malloc(len);
	if (old == NULL)
		return ENOMEM;
	ssize_t got = prim_pread_all(*d->fd, old, len, (off_t)off);
	if (got < 0)
		got = 0;
	if ((size_t)got < len)
		memset(old + got, 0, len - (size_t)got);
	d->undo[d->nundo++] = (struct undo){ off, len, old };
	return 0;
}

static void dev_forget(struct log_dev *d)
{
	for (size_t i = 0; i < d->nundo; i++)
		free(d->undo[i].old);
	d->nundo = 0;
}

static int dev_write(struct log_dev *d, const void *buf, size_t len, uint64_t off)
{
	if (dev_fails(d))
		return d->fail_err;
	if (d->sim != NULL) {
		int e = dev_remember(d, off, len);
		if (e != 0)
			return e;
	}
	int e = pwrite_all(*d->fd, buf, len, off);
	if (d->sim != NULL)
		dev_primitive(d);
	return e;
}

static int dev_sync(struct log_dev *d)
{
	if (dev_fails(d))
		return d->fail_err;
	int e = prim_fdatasync(*d->fd) != 0 ? errno : 0;
	if (d->sim != NULL) {
		dev_forget(d);
		dev_primitive(d);
	}
	return e;
}

/* Power lost: each sector of every unsynced write, newest first, keeps its
 * new bytes or gets back what it overwrote. */
static void dev_crash(struct log_dev *d)
{
	for (size_t i = d->nundo; i-- > 0;) {
		const struct undo *u = &d->undo[i];
		for (size_t s = 0; s < u->len; s += SECTOR) {
			size_t l = u->len - s < SECTOR ? u->len - s : SECTOR;
			if (!nvm_sim_survives(d->sim->survival, &d->rng))
				(void)pwrite_all(*d->fd, u->old + s, l, u->off + s);
		}
	}
	(void)prim_fdatasync(*d->fd);
	if (d->sim->on_crash != NULL)
		d->sim->on_crash(d->sim->on_crash_arg);
	prim_exit_now(NVM_SIM_CRASH_EXIT);
}

/* ---- records and head slots ---- */

static uint64_t rec_check(const struct log_state *s, const unsigned char *rec, size_t len)
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

/* Heads are written with the groups' tag; a reader takes the older one too
 * (pools written before groups), while a binary from before groups finds
 * no valid head in a pool written since and refuses it, rather than
 * replaying none of its records (whose magic it does not know). */
#define HEAD_TAG_SINGLE 0x4c4f4748ULL	/* "LOGH" */
#define HEAD_TAG 0x4c4f4732ULL		/* "LOG2" */

static uint64_t head_check(const struct log_head *h, int slot, uint64_t seed, uint64_t tag)
{
	return XXH3_64bits_withSeed(h, offsetof(struct log_head, check), seed ^ (tag + (uint64_t)slot));
}

static uint64_t range_bytes(uint64_t len) { return 8 + ((len + 7) & ~7ULL); }

static uint64_t rec_bytes(uint64_t payload)
{
	return (sizeof(struct log_rec) + payload + REC_ALIGN - 1) / REC_ALIGN * REC_ALIGN;
}

static void touch(struct log_state *s, uint64_t off, uint64_t len)
{
	uint64_t first = off / s->page_size, last = (off + len - 1) / s->page_size;
	for (uint64_t p = first; p <= last; p++)
		s->touched[p / 64] |= 1ULL << (p % 64);
	s->any_touched = true;
}

/* A range a record may name: inside the file, clear of the ring and the
 * head slots (which only this file writes, never through the mapping). */
static bool range_allowed(const struct nvm *n, const struct log_state *s, uint64_t off,
			  uint64_t len)
{
	if (len == 0 || off > n->len || len > n->len - off)
		return false;
	if (off < s->r.off + s->r.size && off + len > s->r.off)
		return false;
	return !(off < s->r.head_off + NVM_LOG_HEAD_BYTES && off + len > s->r.head_off);
}

static uint64_t resume_check(const struct log_head *h, int slot, uint64_t seed)
{
	return XXH3_64bits_withSeed(h, offsetof(struct log_head, resume_check),
				    seed ^ (0x52534d45ULL + (uint64_t)slot));
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
 * file, in runs, clearing their bits; *budget is what is left of it, bytes
 * what was written.  0 or an errno. */
static int write_pages(struct nvm *n, struct log_state *s, uint64_t *bits, size_t *budget,
		       uint64_t *bytes)
{
	const unsigned char *map = n->base;
	const size_t ps = s->page_size;
	for (size_t w = 0; w < s->touched_words && *budget != 0; w++) {
		while (bits[w] != 0 && *budget != 0) {
			size_t b = (size_t)__builtin_ctzll(bits[w]);
			uint64_t first = (uint64_t)w * 64 + b, end = first;
			/* The run, across words, within the budget. */
			while (end - first < *budget && end / 64 < s->touched_words &&
			       (bits[end / 64] & (1ULL << (end % 64)))) {
				bits[end / 64] &= ~(1ULL << (end % 64));
				end++;
			}
			*budget -= (size_t)(end - first);
			uint64_t off = first * ps, len = (end - first) * ps;
			if (off + len > n->len)
				len = n->len - off;
			int e = dev_write(&s->dev, map + off, (size_t)len, off);
			*bytes += len;
			n->stats.device_bytes += len;
			n->stats.checkpoint_bytes += len;
			if (e != 0)
				return e;
		}
	}
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
	int e = write_pages(n, s, s->touched, &all, &bytes);
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
		s->wave_on = true;
	}
	uint64_t bytes = 0;
	size_t budget = s->wave_budget;
	int e = write_pages(n, s, s->wave, &budget, &bytes);
	if (e != 0 || budget == 0)
		return e;	/* more next fence (budget spent) */
	for (size_t w = 0; w < s->touched_words; w++)
		if (s->wave[w] != 0)
			return 0;
	/* The wave is written: durable, then the head moves to its start. */
	e = move_head(n, s, true, s->wave_pos, s->wave_seq);
	if (e == 0)
		s->wave_on = false;
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
	if (s->npending != 0) {
		struct range *last = &s->pending[s->npending - 1];
		/* The common case: the next lines of a run, or the same line. */
		if (off >= last->off && off <= last->off + last->len) {
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
	h.check = rec_check(s, rec, len);
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

/* The seq the record at pos must have, the one before it having seq - 1. */
static uint64_t seq_at(const struct log_state *s, uint64_t pos, uint64_t seq)
{
	return pos == s->resume_pos ? s->resume_seq : seq;
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

/* Records are replayed in order and only up to the first that is not
 * complete, so appending one orders it after every earlier one: no sync. */
static void log_order(struct nvm *n)
{
	int e = append(n, n->impl, false);
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
	int e = check_size(n);
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
	if (e != 0)
		fail(n, e);
}

int nvm_log_checkpoint(struct nvm *n)
{
	struct log_state *s = log_of(n);
	if (s == NULL || n->read_only)
		return 0;
	/* A write: the pool passed its checks (nvm_accept), or it is now. */
	if (nvm_accept(n) != 0)
		return n->error;
	if (n->error != 0)
		return n->error;
	if (s->npending != 0 ||
	    (!s->any_touched && !s->wave_on && s->head == s->tail && !s->unsynced))
		return 0;
	int e = checkpoint(n, s);
	if (e != 0)
		nvm_latch_error(n, e);
	return n->error;
}

uint64_t nvm_log_primitives(const struct nvm *n)
{
	const struct log_state *s = log_of(n);
	return s != NULL ? s->dev.primitives : 0;
}

void nvm_log_fail_io(struct nvm *n, uint64_t k, int err)
{
	struct log_state *s = log_of(n);
	if (s == NULL)
		log_fatal("nvm_log_fail_io on a %s mapping (log backend only)", n->ops->name);
	s->dev.fail_at = k;
	s->dev.fail_err = err;
}

uint64_t nvm_log_touched_end(const struct nvm *n, uint64_t lo, uint64_t hi)
{
	const struct log_state *s = log_of(n);
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
	if (n->error != 0 || s->jump_pending || !n->accepted)
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
	s->npending = 0;
	s->pending_bytes = 0;
}

/* ---- replay ---- */

/* How replay starts and ends its helper thread (nvm_log_set_helper): none
 * set, it runs on the opening thread alone. */
static struct {
	nvm_log_thread_start_fn start;
	nvm_log_thread_join_fn join;
	void (*done)(void);
	bool when_busy;
} helper;

void nvm_log_set_helper(nvm_log_thread_start_fn start, nvm_log_thread_join_fn join,
			void (*done)(void), bool when_busy)
{
	helper.start = start;
	helper.join = start != NULL ? join : NULL;
	helper.done = start != NULL ? done : NULL;
	helper.when_busy = when_busy;
}

/* The log is read with pread, not through the mapping: a hole of a full
 * tmpfs cannot even be loaded from a mapping (SIGBUS), while pread gives
 * its zeros. */
static bool read_at(const struct log_state *s, void *buf, size_t len, uint64_t off)
{
	return prim_pread_all(*s->dev.fd, buf, len, (off_t)off) == (ssize_t)len;
}

static bool read_head(const struct log_state *s, int slot, struct log_head *h)
{
	return read_at(s, h, sizeof(*h), s->r.head_off + (uint64_t)slot * NVM_LINE) &&
	       (h->check == head_check(h, slot, s->r.seed, HEAD_TAG) ||
		h->check == head_check(h, slot, s->r.seed, HEAD_TAG_SINGLE)) &&
	       h->pos % REC_ALIGN == 0;
}

/* The live part of the ring as replay reads it: once, in chunks of
 * READ_CHUNK, each record checksummed once in the buffer, which holds the
 * ring's bytes from from (the first record of the group not yet applied) to
 * to.  A group is applied from the buffer once its commit is read (and
 * PREFAULT_LAG bytes more), then left behind: what is still needed moves
 * to the buffer's start once a chunk's worth is applied.  (Asking the
 * kernel for the chunks ahead, POSIX_FADV_WILLNEED, cost more than it
 * saved: its own readahead follows the reads.) */
#define READ_CHUNK (1u << 20)
#define READ_FIRST (64u << 10)

struct ring_reader {
	unsigned char *buf;
	size_t cap;		/* r.size: a live part never exceeds the ring */
	uint64_t from, to;	/* positions: buf[0] holds from */
	bool failed;		/* a read failed: nothing after it */
};

/* Ring bytes [from, from + len) of the lap starting at head into dst, in
 * two reads where they wrap around the ring's end. */
static bool read_ring(const struct log_state *s, unsigned char *dst, uint64_t from, size_t len)
{
	uint64_t in = from % s->r.size;
	size_t first = in + len > s->r.size ? (size_t)(s->r.size - in) : len;
	return read_at(s, dst, first, s->r.off + in) &&
	       (first == len || read_at(s, dst + first, len - first, s->r.off));
}

/* Make ring positions up to end readable in the buffer (end - head is at
 * most the ring's size); false at a failed read. */
static bool reader_fill(const struct log_state *s, struct ring_reader *rr, uint64_t keep,
			uint64_t end)
{
	uint64_t limit = s->head + s->r.size;
	while (rr->to < end) {
		if (rr->failed)
			return false;
		/* Applied records leave the buffer once they fill a chunk,
		 * or when the next chunk has no room: what is read goes to
		 * memory already touched. */
		if (keep > rr->from &&
		    (keep - rr->from >= READ_CHUNK || rr->to - rr->from + READ_CHUNK > rr->cap)) {
			memmove(rr->buf, rr->buf + (keep - rr->from), (size_t)(rr->to - keep));
			rr->from = keep;
		}
		/* Small reads while the log proves short (a clean close
		 * leaves none), up to a chunk. */
		uint64_t len = rr->to - s->head < READ_CHUNK ? rr->to - s->head : READ_CHUNK;
		if (len < READ_FIRST)
			len = READ_FIRST;
		if (len > limit - rr->to)
			len = limit - rr->to;
		if (len > rr->cap - (rr->to - rr->from))
			len = rr->cap - (rr->to - rr->from);
		/* At least to end: a record larger than a chunk is read
		 * whole. */
		if (len < end - rr->to)
			len = end - rr->to;
		if (!read_ring(s, rr->buf + (rr->to - rr->from), rr->to, (size_t)len)) {
			rr->failed = true;
			return false;
		}
		rr->to += len;
	}
	return true;
}

/* The record at pos with seq, checked in the buffer, when complete; NULL
 * otherwise (the end).  keep: the position the buffer must still hold. */
static const unsigned char *record_at(const struct log_state *s, struct ring_reader *rr,
				      uint64_t keep, uint64_t pos, uint64_t seq)
{
	struct log_rec h;
	if (pos + sizeof(h) - s->head > s->r.size || !reader_fill(s, rr, keep, pos + sizeof(h)))
		return NULL;
	memcpy(&h, rr->buf + (pos - rr->from), sizeof(h));
	if ((h.magic != REC_MAGIC && h.magic != REC_MAGIC_SINGLE) || h.seq != seq || h.pos != pos ||
	    h.len % REC_ALIGN != 0 ||
	    h.len < sizeof(h) || h.len > s->r.size / 2 || h.payload > h.len - sizeof(h))
		return NULL;
	if (pos + h.len - s->head > s->r.size)
		return NULL;	/* it would overlap the head: not of this lap */
	if (!reader_fill(s, rr, keep, pos + h.len))
		return NULL;
	const unsigned char *rec = rr->buf + (pos - rr->from);
	return rec_check(s, rec, h.len) == h.check ? rec : NULL;
}

/* Apply one complete record to the mapping.  -1 (err_get() set) when its
 * content, though checksummed, cannot be ours: a corrupt pool. */
static int apply(struct nvm *n, struct log_state *s, const unsigned char *rec)
{
	struct log_rec h;
	memcpy(&h, rec, sizeof(h));
	const unsigned char *b = rec + sizeof(h), *end = b + h.payload;
	for (uint32_t i = 0; i < h.nranges; i++) {
		uint64_t hdr;
		if (end - b < 8)
			goto bad;
		memcpy(&hdr, b, 8);
		uint64_t off = (hdr >> 16) * 8, len = (hdr & 0xffff) * 8;
		if ((uint64_t)(end - b - 8) < len || !range_allowed(n, s, off, len))
			goto bad;
		memcpy((unsigned char *)n->base + off, b + 8, (size_t)len);
		touch(s, off, len);
		b += 8 + len;
	}
	return 0;
bad:
	err_set("the pool's log record %llu (at ring offset %llu) passes its checksum but names "
		"a range outside the pool's data: the pool is corrupt",
		(unsigned long long)h.seq, (unsigned long long)(h.pos % s->r.size));
	return -1;
}

/* Applying a record to the private mapping copies each page it touches
 * out of the page cache (a copy-on-write fault, ~2 us a page, most of a
 * replay).  Where a CPU is idle, a helper thread takes those copies ahead:
 * replay hands it the pages of each record as soon as the record is checked
 * (two 2 MiB blocks of three, every page once) and applies groups
 * PREFAULT_LAG bytes behind (a sixteenth of a smaller ring), so that the
 * helper works on pages the applying thread reaches later; a page whose
 * record the applying thread has passed already the helper skips.  The
 * helper only makes pages private (MADV_POPULATE_WRITE), which leaves their
 * bytes as they are: what is applied, and in which order, is the opening
 * thread's alone, and a page the helper has not reached (or a record whose
 * group never commits) costs nothing but the work. */
#define PREFAULT_LAG (4u << 20)
#define PREFAULT_BLOCK_PAGES 512	/* a large folio of the page cache is one block's */
#define PREFAULT_SHARE 3	/* the opener reads and copies too: a block of three is its own */

struct prefault {
	struct nvm *n;
	uint64_t *pages;	/* page numbers, in the order handed over */
	uint64_t *at;		/* the position of the record each came from */
	size_t cap;
	uint64_t *queued;	/* a bit per page of the file: handed over */
	size_t words;
	_Atomic size_t published;	/* pages[0, published) are the helper's */
	_Atomic uint64_t applied;	/* the applying thread's position */
	atomic_uint wake;		/* futex word: bumped at each publish and at stop */
	atomic_bool stop;
	size_t taken;			/* the helper's own */
	uint64_t populated;		/* pages it populated (the helper's; read after the join) */
	pthread_t thread;
};

static void *prefault_main(void *arg)
{
	struct prefault *pf = arg;
	const size_t ps = prim_page_size();
	for (;;) {
		unsigned w = atomic_load_explicit(&pf->wake, memory_order_acquire);
		size_t pub = atomic_load_explicit(&pf->published, memory_order_acquire);
		while (pf->taken < pub && !atomic_load_explicit(&pf->stop, memory_order_relaxed)) {
			size_t i = pf->taken, j = i + 1;
			if (pf->at[i] < atomic_load_explicit(&pf->applied, memory_order_relaxed)) {
				pf->taken = j;
				continue;
			}
			while (j < pub && pf->pages[j] == pf->pages[j - 1] + 1)
				j++;
			/* A kernel without it (before 5.14), or a page the file
			 * cannot give (past a shortened end): the applying
			 * thread's own fault decides. */
			if (prim_populate_write((unsigned char *)pf->n->base + pf->pages[i] * ps,
						(j - i) * ps) == 0)
				pf->populated += j - i;
			pf->taken = j;
		}
		if (atomic_load_explicit(&pf->stop, memory_order_acquire))
			break;
		if (pf->taken == atomic_load_explicit(&pf->published, memory_order_acquire))
			(void)prim_futex_wait(&pf->wake, w, 0);
	}
	if (helper.done != NULL)
		helper.done();
	return NULL;
}

/* A helper started for this replay, or NULL: none set, or none could be. */
static struct prefault *prefault_start(struct nvm *n, const struct log_state *s)
{
	/* On a machine with no CPU idle, the helper would take the opener's
	 * (and could hold a page the opener waits for while it waits for a
	 * CPU). */
	if (helper.start == NULL || (!helper.when_busy && prim_idle_cpus() == 0))
		return NULL;
	struct prefault *pf = calloc(1, sizeof(*pf));
	if (pf == NULL)
		return NULL;
	pf->n = n;
	pf->words = s->touched_words;
	/* Every page at most once; every page a record touches costs it at
	 * least a range of 16 bytes. */
	size_t pages = s->touched_words * 64;
	pf->cap = pages < s->r.size / 16 ? pages : (size_t)(s->r.size / 16);
	pf->pages = prim_map_any(pf->cap * sizeof(*pf->pages));
	pf->at = prim_map_any(pf->cap * sizeof(*pf->at));
	pf->queued = prim_map_any(pf->words * sizeof(*pf->queued));
	atomic_init(&pf->applied, s->head);
	if (pf->pages == NULL || pf->at == NULL || pf->queued == NULL ||
	    helper.start(&pf->thread, prefault_main, pf) != 0) {
		if (pf->pages != NULL)
			prim_unmap(pf->pages, pf->cap * sizeof(*pf->pages));
		if (pf->at != NULL)
			prim_unmap(pf->at, pf->cap * sizeof(*pf->at));
		if (pf->queued != NULL)
			prim_unmap(pf->queued, pf->words * sizeof(*pf->queued));
		free(pf);
		return NULL;
	}
	return pf;
}

/* Hand the helper the pages of a checked record that are its share and
 * new to it.  A range the pool does not allow is left to apply (which
 * refuses it when its group commits). */
static void prefault_record(struct prefault *pf, const struct log_state *s,
			    const unsigned char *rec)
{
	struct log_rec h;
	memcpy(&h, rec, sizeof(h));
	const unsigned char *b = rec + sizeof(h), *end = b + h.payload;
	size_t n = atomic_load_explicit(&pf->published, memory_order_relaxed), was = n;
	for (uint32_t i = 0; i < h.nranges && end - b >= 8; i++) {
		uint64_t hdr;
		memcpy(&hdr, b, 8);
		uint64_t off = (hdr >> 16) * 8, len = (hdr & 0xffff) * 8;
		if ((uint64_t)(end - b - 8) < len)
			break;
		b += 8 + len;
		if (!range_allowed(pf->n, s, off, len))
			continue;
		uint64_t last = (off + len - 1) / s->page_size;
		for (uint64_t p = off / s->page_size; p <= last; p++) {
			if ((p / PREFAULT_BLOCK_PAGES) % PREFAULT_SHARE == 1 ||
			    (pf->queued[p / 64] & (1ULL << (p % 64))) || n == pf->cap)
				continue;
			pf->queued[p / 64] |= 1ULL << (p % 64);
			pf->at[n] = h.pos;
			pf->pages[n++] = p;
		}
	}
	if (n == was)
		return;
	atomic_store_explicit(&pf->published, n, memory_order_release);
	atomic_fetch_add_explicit(&pf->wake, 1, memory_order_release);
	prim_futex_wake(&pf->wake, 1);
}

static void prefault_stop(struct prefault *pf, struct nvm *n)
{
	if (pf == NULL)
		return;
	atomic_store_explicit(&pf->stop, true, memory_order_release);
	atomic_fetch_add_explicit(&pf->wake, 1, memory_order_release);
	prim_futex_wake(&pf->wake, 1);
	helper.join(pf->thread, NULL);
	n->stats.log_replay_prefaulted += pf->populated;
	prim_unmap(pf->pages, pf->cap * sizeof(*pf->pages));
	prim_unmap(pf->at, pf->cap * sizeof(*pf->at));
	prim_unmap(pf->queued, pf->words * sizeof(*pf->queued));
	free(pf);
}

/* Apply the records from the tail to end (a group's end), read and checked
 * in the buffer.  0, or -1 with err_get() set (apply). */
static int apply_to(struct nvm *n, struct log_state *s, const struct ring_reader *rr, uint64_t end,
		    struct prefault *pf)
{
	while (s->tail < end) {
		const unsigned char *g = rr->buf + (s->tail - rr->from);
		uint32_t len;
		memcpy(&len, g + offsetof(struct log_rec, len), sizeof(len));
		if (apply(n, s, g) != 0)
			return -1;
		s->tail += len;
		n->stats.log_replayed_records++;
		n->stats.log_replayed_bytes += len;
		if (pf != NULL)
			atomic_store_explicit(&pf->applied, s->tail, memory_order_relaxed);
	}
	return 0;
}

static int replay(struct nvm *n, struct log_state *s)
{
	struct log_head h[2];
	bool ok0 = read_head(s, 0, &h[0]), ok1 = read_head(s, 1, &h[1]);
	if (!ok0 && !ok1) {
		err_set("both head slots of the pool's log fail their checksums (the header is "
			"corrupt)");
		s->head_slot = -1;
		return -1;
	}
	int cur = ok0 && ok1 ? (h[1].gen > h[0].gen ? 1 : 0) : ok0 ? 0 : 1;
	s->head_slot = cur;
	s->head_gen = h[cur].gen;
	s->head = s->tail = h[cur].pos;
	s->head_seq = s->next_seq = h[cur].seq;
	bool resumes = h[cur].resume_check == resume_check(&h[cur], cur, s->r.seed) &&
		       h[cur].resume_pos >= h[cur].pos && h[cur].resume_pos % REC_ALIGN == 0;
	s->resume_pos = resumes ? h[cur].resume_pos : h[cur].pos;
	s->resume_seq = resumes ? h[cur].resume_seq : h[cur].seq;
	uint64_t t0 = prim_now_ns();
	struct ring_reader rr = { prim_map_any(s->r.size), s->r.size, s->head, s->head, false };
	if (rr.buf == NULL) {
		err_set_errno(ENOMEM, "cannot reserve the buffer to replay the pool's log");
		return -1;
	}
	/* Each record is read and checked once; a group is applied when its
	 * commit is read (a record counts only with its group's commit:
	 * nvm_log.h), so what a torn or stale record ends is never applied --
	 * once PREFAULT_LAG bytes of records are read past it. */
	struct prefault *pf = prefault_start(n, s);
	/* With a helper or without: one way to apply, whatever the machine's
	 * load. */
	uint64_t lag = s->r.size / 16 < PREFAULT_LAG ? s->r.size / 16 : PREFAULT_LAG;
	uint64_t pos = s->head, seq = s->head_seq, committed = s->head, committed_seq = s->head_seq;
	int rc = 0;
	for (;;) {
		seq = seq_at(s, pos, seq);
		const unsigned char *rec = record_at(s, &rr, s->tail, pos, seq);
		if (rec == NULL)
			break;
		if (pf != NULL)
			prefault_record(pf, s, rec);
		struct log_rec r;
		memcpy(&r, rec, sizeof(r));
		pos += r.len;
		seq++;
		if (r.magic == REC_MAGIC_SINGLE || (r.flags & REC_COMMIT)) {
			committed = pos;
			committed_seq = seq;
		}
		if (committed - s->tail > lag && (rc = apply_to(n, s, &rr, committed, pf)) != 0)
			break;
	}
	if (rc == 0)
		rc = apply_to(n, s, &rr, committed, pf);
	s->next_seq = committed_seq;
	prefault_stop(pf, n);
	prim_unmap(rr.buf, rr.cap);
	if (rc != 0)
		return rc;
	n->stats.log_replay_us += (prim_now_ns() - t0) / 1000;
	return 0;
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
	if (s->dev.sim != NULL) {
		dev_forget(&s->dev);
		free(s->dev.undo);
		free(s->dev.sim);
	}
	if (s->pending != NULL)
		prim_unmap(s->pending, s->pending_cap * sizeof(*s->pending));
	if (s->touched != NULL)
		prim_unmap(s->touched, s->touched_words * 8);
	if (s->wave != NULL)
		prim_unmap(s->wave, s->touched_words * 8);
	if (s->buf != NULL)
		prim_unmap(s->buf, s->r.size);
	free(s);
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
};

static const struct nvm_ops log_readonly_ops = {
	.name = "log (read-only)",
	.flush = nvm_readonly_flush,
	.fence = nvm_readonly_fence,
	.unmap = log_unmap,
	.copy_flush = NULL,
};

static struct log_state *log_of(const struct nvm *n)
{
	return n != NULL && (n->ops == &log_ops || n->ops == &log_readonly_ops) ? n->impl : NULL;
}

int nvm_log_get_info(const struct nvm *n, struct nvm_log_info *out)
{
	const struct log_state *s = log_of(n);
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
	struct log_state *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		err_set_errno(ENOMEM, "cannot set up the pool's log");
		return -1;
	}
	s->r = *r;
	s->page_size = ps;
	s->dev.fd = &n->fd;
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
	s->pending = read_only ? NULL : prim_map_any(s->pending_cap * sizeof(*s->pending));
	s->buf = read_only ? NULL : prim_map_any(r->size);
	if (s->touched == NULL ||
	    (!read_only && (s->pending == NULL || s->buf == NULL || s->wave == NULL))) {
		err_set_errno(ENOMEM, "cannot reserve the pool log's buffers");
		log_unmap(n);
		return -1;
	}
	if (sim != NULL) {
		s->dev.sim = malloc(sizeof(*sim));
		if (s->dev.sim == NULL) {
			err_set_errno(ENOMEM, "cannot set up the simulated device");
			log_unmap(n);
			return -1;
		}
		*s->dev.sim = *sim;
		s->dev.rng = sim->seed ^ 0x10910910910ULL;
	}
	if (replay(n, s) != 0) {
		/* Nothing of a pool that fails here is ever written. */
		n->read_only = true;
		log_unmap(n);
		return -1;
	}
	s->jump_pending = !read_only;
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
