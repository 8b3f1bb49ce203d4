/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm log replay -- a log-backed pool brought to its last fence at open.
 *
 * Owns: reading the head slots and the ring (once, in chunks, each record
 * checksummed once), applying every complete group onto the private
 * mapping in order and stopping at the first torn or stale record, and the
 * helper thread that makes the pages records touch private ahead of the
 * applying (nvm_log_set_helper; struct prefault).  Runs on the opening
 * thread, inside nvm_log_init; the writer (nvm_log.c) takes over the state
 * it leaves.  See nvm_log.h for the design.
 */
#include "persist/nvm_log_internal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* How replay starts and ends its helper thread (nvm_log_set_helper): none
 * set, it runs on the opening thread alone.  Written by nvm_log_set_helper
 * before any pool opens (the runtime's start, the tool's), read by each
 * replay and its helper thread (which its start publishes to). */
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
	return nvm_log_rec_check(s, rec, h.len) == h.check ? rec : NULL;
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
		if (len == 0) {
			/* A reload (nvm_log.h): the page was written straight
			 * to the file after the records before this one; what
			 * they made of the mapping's copy goes. */
			if (!s->r.reloads || off % s->page_size != 0 ||
			    !range_allowed(n, s, off, s->page_size))
				goto bad;
			prim_discard((unsigned char *)n->base + off, s->page_size);
			b += 8;
			continue;
		}
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
	struct prefault *pf = prim_map_any(sizeof(*pf));	/* zeroed; not malloc's (nvm.c) */
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
		prim_unmap(pf, sizeof(*pf));
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
	prim_unmap(pf, sizeof(*pf));
}

/* The seq the record at pos must have, the one before it having seq - 1. */
static uint64_t seq_at(const struct log_state *s, uint64_t pos, uint64_t seq)
{
	return pos == s->resume_pos ? s->resume_seq : seq;
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

int nvm_log_replay(struct nvm *n, struct log_state *s)
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
