/* SPDX-License-Identifier: BSD-3-Clause */
/* tracker_mprotect -- write tracking by page protection and SIGSEGV, for
 * kernels without asynchronous userfaultfd write-protection.  See tracker.h.
 *
 * The range is read-only between collections.  The first write to a page
 * faults; the handler marks the page in a bitmap (atomically: several threads
 * may fault at once) and makes it writable.  A collection lists the marked
 * pages and makes them read-only again, coalescing runs of pages into one
 * mprotect each.  Writable runs split the range into VMAs, so their number is
 * bounded (TRACKER_MPROTECT_MAX_RUNS): beyond it the whole range is made
 * writable and the next collection reports every page touched since, as
 * /proc/self/pagemap says (resident or swapped: a superset of the written
 * ones).
 *
 * The faults come through fault_signal.c, which owns the process's SIGSEGV
 * disposition: claim_fault below takes the first writes to tracked pages;
 * every other fault goes to the application's own disposition. */
#include "track/tracker_backend.h"

#include "base/log.h"
#include "base/own_fds.h"
#include "prim/prim.h"
#include "track/fault_signal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* Trackers that may be attached at once (the heap, plus tests and tools). */
#define MAX_TRACKERS 8

/* A collection re-protects collected pages up to this many clean pages
 * apart with one mprotect (the clean ones are read-only already). */
#define REPROTECT_GAP 64

/* A first write right after the page before it was written opens this many
 * pages, counted as written: a thread filling memory in order takes one
 * fault per FAULT_AHEAD pages instead of one per page, and the write-back
 * compares (and finds unchanged) at most FAULT_AHEAD - 1 pages it did not
 * need to. */
#define FAULT_AHEAD 16

/* Hot pages.  A page written again in the epoch right after the one in
 * which it was collected (re-protected) is likely to be written in many
 * more: it is then kept writable and reported written at every collection,
 * instead of faulting again after each.  A fault costs a signal and two
 * mprotects (each splits or merges VMAs under the process's mmap lock and
 * flushes the TLB of every processor running the program: 40 % of
 * memcached's worker CPU under output commit); a page reported without
 * being written costs a compare with its durable copy in the pause
 * (tracker_written_unknown; epoch.c leaves it out when unchanged).  A hot page is
 * re-protected once HOT_IDLE collections in a row passed without the epoch
 * finding its bytes changed (tracker_note_changed): both costs are paid per
 * epoch, so a page written in one epoch out of a few dozen is cheaper hot.
 * Epochs on demand (output commit) come every few hundred microseconds, and
 * a server writes the same pages (its items, free lists, LRU links) again
 * every few dozen of them: those stay hot (memcached: with a window of 16
 * collections 13k requests/s, 64: 22k, 128-255: 25k).  Only while
 * collections come at least every HOT_PERIOD_NS (a moving average): at the
 * default 100 ms interval a program's faults are few against its work,
 * while the copies of hot pages, taken inside the pause (a hot page can be
 * written at any time), stall every thread; bank, which writes thousands of
 * pages per epoch, lost a third of its transfers with them at 100 ms (when
 * every hot page was still copied in the pause). */
#define HOT_PERIOD_NS 5000000ULL
#define HOT_IDLE 160
/* At most this many pages are hot at once: each is compared in the pause at
 * every epoch, written or not (and copied when it changed). */
#define HOT_MAX 1024

/* pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst). */
#define PM_ENTRY_PRESENT (1ULL << 63)
#define PM_ENTRY_SWAPPED (1ULL << 62)

struct mp_impl {
	struct tracker *t;
	uintptr_t lo, hi;		/* the range */
	size_t ps;
	size_t npages;
	_Atomic uint64_t *dirty;	/* one bit per page */
	size_t nwords;
	/* An upper bound on the number of runs of dirty (so writable) pages:
	 * exact after each collection, never an undercount in between. */
	atomic_long runs;
	/* The whole range is writable until the next collection. */
	atomic_bool overflow;
	int pagemap;			/* -1: report every page after overflow */
	bool fault_ahead;		/* not TRACKER_OPEN_EXACT (FAULT_AHEAD) */
	bool hot_any_rate;		/* TRACKER_OPEN_HOT_AT_ANY_RATE */
	int slot;
	/* Hot pages (HOT_IDLE), touched on the epoch thread only (by
	 * collections and tracker_note_changed).  hot: kept writable, its
	 * dirty bit never cleared; last: collected by the previous
	 * collection; idle: a hot page's collections left before it is
	 * re-protected unless found changed; blind: collected by the last
	 * collection while hot, so reported without a write seen
	 * (tracker_written_unknown).  NULL when exact reports were asked for
	 * (TRACKER_OPEN_EXACT). */
	uint64_t *hot, *last, *blind;
	uint8_t *idle;
	size_t nhot;
	/* The recent spacing of collections (HOT_PERIOD_NS). */
	uint64_t last_collect_ns, period_ns;
};

static _Atomic(struct mp_impl *) active[MAX_TRACKERS];
/* Signal handlers and tracker_prefault calls currently looking at active[]:
 * detach waits for them before freeing what they may be reading. */
static atomic_int readers_inside;

/* Serialises attach and detach: a slot is
 * published only once the SIGSEGV handler is installed. */
static prim_lock_t slots_lock = PRIM_LOCK_INIT;
/* Attach and detach run under the runtime's start-up lock, which fork
 * waits for; a child detaches after the reset. */
PRIM_LOCK_NAMED(slots_lock, slots, "track/mprotect: attaching and detaching", PRIM_FORK_RESET);

/* ---- dirty bitmap ---- */

static bool page_dirty(const struct mp_impl *m, size_t i)
{
	return (atomic_load(&m->dirty[i / 64]) >> (i % 64)) & 1;
}

static void go_overflow(struct mp_impl *m)
{
	if (atomic_exchange(&m->overflow, true))
		return;
	/* Every page is marked before it is made writable, but from here on
	 * writes are not seen at all: the next collection falls back to
	 * pagemap, and written_since cannot tell until then. */
	if (prim_protect((void *)m->lo, m->hi - m->lo, true) != 0)
		log_msg(LOG_ERR, "cannot unprotect the persistent heap after too many dirty "
			"runs (errno %d)", errno);
	__atomic_fetch_add(&m->t->stats.overflows, 1, __ATOMIC_RELAXED);
}

/* Mark pages [first, first+count) dirty.  Async-signal-safe.
 *
 * Runs are counted by looking at both neighbours *before* setting a page's
 * bit: of two adjacent pages marked concurrently at most one can see the
 * other (seq_cst), so the estimate may exceed the true number of runs but is
 * never below it. */
static void mark_pages(struct mp_impl *m, size_t first, size_t count)
{
	long delta = 0;
	for (size_t i = first; i < first + count; i++) {
		long d = 1;
		if (i > 0 && page_dirty(m, i - 1))
			d--;
		if (i + 1 < m->npages && page_dirty(m, i + 1))
			d--;
		uint64_t bit = 1ULL << (i % 64);
		if (!(atomic_fetch_or(&m->dirty[i / 64], bit) & bit))
			delta += d;
	}
	if (delta != 0 &&
	    atomic_fetch_add(&m->runs, delta) + delta > TRACKER_MPROTECT_MAX_RUNS)
		go_overflow(m);
}

static int protect_unpinned(const struct mp_impl *m, size_t first, size_t count);

/* Make pages [first, first+count) writable, or read-only (except pinned
 * ones: tracker_pin_writable). */
static int set_access(const struct mp_impl *m, size_t first, size_t count, bool writable)
{
	if (!writable)
		return protect_unpinned(m, first, count);
	return prim_protect((void *)(m->lo + first * m->ps), count * m->ps, true);
}

/* ---- pinned pages: memory the kernel writes as a stack ----
 *
 * tracker_pin_writable (tracker.h).  A pinned page is never made read-only:
 * set_access skips it (under the tracker's pin lock, so a pin and a
 * collection's re-protection cannot interleave), and every collection
 * reports it written again (pins_remark), whether or not it was.  The
 * ranges are kept so that unpinning one recomputes the bits of pages it
 * shares with another (a small alternate signal stack shares its pages with
 * other heap blocks). */

struct pin_range {
	uintptr_t lo, hi;	/* page-aligned, inside the tracked range */
};

struct pins {
	prim_lock_t lock;
	uint64_t *bits;		/* one per page; mapped with the first pin */
	struct pin_range *ranges;
	size_t n, cap;
};

/* Indexed like active[]: by the tracker's slot.  Only attach and detach
 * set an entry (under slots_lock). */
static struct pins *pins_of[MAX_TRACKERS];

/* A fork child detaches without pinning anything (runtime_atfork_child). */
static prim_lock_t *pins_lock(size_t i)
{
	for (int s = 0; s < MAX_TRACKERS; s++)
		if (pins_of[s] != NULL && i-- == 0)
			return &pins_of[s]->lock;
	return NULL;
}
PRIM_LOCK_KIND(pin_locks, "track/mprotect: a tracker's pinned ranges", PRIM_FORK_RESET, pins_lock);

static int pins_attach(struct mp_impl *m)
{
	struct pins *p = prim_map_any(sizeof(*p));
	if (p == NULL) {
		err_set_errno(errno, "cannot allocate the mprotect tracker's pinned ranges");
		return -1;
	}
	p->lock = (prim_lock_t)PRIM_LOCK_INIT;
	pins_of[m->slot] = p;
	return 0;
}

static void pins_detach(struct mp_impl *m)
{
	struct pins *p = pins_of[m->slot];
	pins_of[m->slot] = NULL;
	if (p == NULL)
		return;
	if (p->bits != NULL)
		prim_unmap(p->bits, m->nwords * sizeof(uint64_t));
	if (p->ranges != NULL)
		prim_unmap(p->ranges, p->cap * sizeof(*p->ranges));
	prim_unmap(p, sizeof(*p));
}

/* Relaxed: keep_hot reads it without the pin lock (a pin or unpin racing
 * it only decides whether a page may become hot). */
static bool pinned(const struct pins *p, size_t i)
{
	return (__atomic_load_n(&p->bits[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1;
}

/* set_access(..., false): read-only, except pinned pages. */
static int protect_unpinned(const struct mp_impl *m, size_t first, size_t count)
{
	struct pins *p = pins_of[m->slot];
	if (p != NULL)
		prim_lock(&p->lock);
	int rc = 0;
	if (p == NULL || p->n == 0) {
		rc = prim_protect((void *)(m->lo + first * m->ps), count * m->ps, false);
	} else {
		size_t run = first;
		for (size_t i = first; i <= first + count; i++) {
			if (i < first + count && !pinned(p, i))
				continue;
			if (i > run && prim_protect((void *)(m->lo + run * m->ps), (i - run) * m->ps,
						    false) != 0)
				rc = -1;
			run = i + 1;
		}
	}
	if (p != NULL)
		prim_unlock(&p->lock);
	return rc;
}

/* After a collection cleared their bits: pinned pages count as written in
 * the next epoch too (they are writable all along). */
static void pins_remark(struct mp_impl *m)
{
	struct pins *p = pins_of[m->slot];
	if (p == NULL)
		return;
	prim_lock(&p->lock);
	for (size_t r = 0; r < p->n; r++)
		for (uintptr_t a = p->ranges[r].lo; a < p->ranges[r].hi; a += m->ps) {
			size_t i = (a - m->lo) / m->ps;
			atomic_fetch_or_explicit(&m->dirty[i / 64], 1ULL << (i % 64),
						 memory_order_relaxed);
		}
	prim_unlock(&p->lock);
}

/* [addr, addr+len) clipped to m's range and widened to whole pages; false
 * when nothing of it is tracked by m. */
static bool pin_clip(const struct mp_impl *m, const void *addr, size_t len, struct pin_range *out)
{
	uintptr_t a = (uintptr_t)addr, e = a + len < a ? UINTPTR_MAX : a + len;
	uintptr_t lo = a > m->lo ? a : m->lo, hi = e < m->hi ? e : m->hi;
	if (len == 0 || lo >= hi)
		return false;
	out->lo = lo & ~(uintptr_t)(m->ps - 1);
	out->hi = (hi + m->ps - 1) & ~(uintptr_t)(m->ps - 1);
	return true;
}

static struct mp_impl *mp_of(struct tracker *t)
{
	return t != NULL && t->ops == &tracker_mprotect_ops ? t->impl : NULL;
}

int tracker_pin_writable(struct tracker *t, void *addr, size_t len)
{
	struct mp_impl *m = mp_of(t);
	struct pin_range r;
	if (m == NULL || !pin_clip(m, addr, len, &r))
		return 0;	/* uffd: the kernel resolves its own writes */
	struct pins *p = pins_of[m->slot];
	prim_lock(&p->lock);
	if (p->bits == NULL)
		p->bits = prim_map_any(m->nwords * sizeof(uint64_t));
	if (p->n == p->cap) {
		size_t cap = p->cap == 0 ? 64 : p->cap * 2;
		struct pin_range *n = prim_map_any(cap * sizeof(*n));
		if (n != NULL && p->ranges != NULL) {
			memcpy(n, p->ranges, p->n * sizeof(*n));
			prim_unmap(p->ranges, p->cap * sizeof(*p->ranges));
		}
		if (n != NULL) {
			p->ranges = n;
			p->cap = cap;
		}
	}
	if (p->bits == NULL || p->n == p->cap) {
		prim_unlock(&p->lock);
		err_set_errno(ENOMEM, "cannot record a pinned stack range");
		return -1;
	}
	p->ranges[p->n++] = r;
	size_t first = (r.lo - m->lo) / m->ps, count = (r.hi - r.lo) / m->ps;
	for (size_t i = first; i < first + count; i++)
		__atomic_fetch_or(&p->bits[i / 64], 1ULL << (i % 64), __ATOMIC_RELAXED);
	/* Marked before writable, as for any first write. */
	mark_pages(m, first, count);
	int rc = 0;
	if (!atomic_load(&m->overflow))
		rc = set_access(m, first, count, true);
	prim_unlock(&p->lock);
	if (rc != 0)
		err_set_errno(errno, "cannot make a stack in the persistent heap writable");
	return rc;
}

void tracker_unpin(struct tracker *t, void *addr, size_t len)
{
	struct mp_impl *m = mp_of(t);
	struct pin_range r;
	if (m == NULL || !pin_clip(m, addr, len, &r))
		return;
	struct pins *p = pins_of[m->slot];
	prim_lock(&p->lock);
	for (size_t k = 0; k < p->n; k++) {
		if (p->ranges[k].lo != r.lo || p->ranges[k].hi != r.hi)
			continue;
		p->ranges[k] = p->ranges[--p->n];
		/* Its pages stay writable and dirty: the next collection
		 * re-protects those no other pin holds. */
		for (uintptr_t a = r.lo; a < r.hi; a += m->ps) {
			size_t i = (a - m->lo) / m->ps;
			__atomic_fetch_and(&p->bits[i / 64], ~(1ULL << (i % 64)), __ATOMIC_RELAXED);
		}
		for (size_t o = 0; o < p->n; o++)
			for (uintptr_t a = p->ranges[o].lo; a < p->ranges[o].hi; a += m->ps) {
				if (a < r.lo || a >= r.hi)
					continue;
				size_t i = (a - m->lo) / m->ps;
				__atomic_fetch_or(&p->bits[i / 64], 1ULL << (i % 64), __ATOMIC_RELAXED);
			}
		break;
	}
	prim_unlock(&p->lock);
}

/* ---- the signal handler ---- */

/* Whether a fault may be a first write to a tracked page.  A read cannot
 * be (the range is readable), and an instruction fetch must not look like a
 * write: jumping into the heap would unprotect the page and the fault repeat
 * forever.  When the CPU part cannot tell (prim_fault_access UNKNOWN: the
 * generic build), a fault in a tracked range counts as a write -- reads there
 * do not fault, and treating a write as foreign would hand every first
 * write to the program's SIGSEGV disposition; the price is that a jump into
 * the heap loops instead of crashing. */
static bool may_be_write(const siginfo_t *si, const void *ucv)
{
	enum prim_fault_access access = prim_fault_access(si, ucv);
	return access == PRIM_FAULT_WRITE || access == PRIM_FAULT_UNKNOWN;
}

static _Atomic(tracker_write_hook) write_hook;

void tracker_set_write_hook(tracker_write_hook fn)
{
	atomic_store(&write_hook, fn);
}


/* A fault at address a: if it is a first write to a tracked page, record it
 * and let the write proceed.  Returns whether it was ours. */
static bool handle_tracked_write(uintptr_t a, void *ucv)
{
	for (int i = 0; i < MAX_TRACKERS; i++) {
		struct mp_impl *m = atomic_load(&active[i]);
		if (m == NULL || a < m->lo || a >= m->hi)
			continue;
		/* Before the page becomes writable: the hook sees the write
		 * while it is still pending (and a thread racing to the same
		 * page faults too, rather than slipping past unseen). */
		tracker_write_hook hook = atomic_load_explicit(&write_hook, memory_order_acquire);
		if (hook != NULL)
			hook((void *)a, ucv);
		size_t page = (a - m->lo) / m->ps;
		size_t count = 1;
		/* Written in order (the page before is dirty): open the next
		 * ones too, marked first, rather than fault on each.  Not
		 * while the FASE checker needs every first write. */
		if (m->fault_ahead && hook == NULL && page > 0 && page_dirty(m, page - 1)) {
			count = FAULT_AHEAD;
			if (count > m->npages - page)
				count = m->npages - page;
		}
		mark_pages(m, page, count);
		__atomic_fetch_add(&m->t->stats.faults, 1, __ATOMIC_RELAXED);
		if (atomic_load(&m->overflow))
			return true;	/* the whole range is writable already */
		return set_access(m, page, count, true) == 0;
	}
	return false;
}


/* fault_signal's claim: a first write to a tracked page.  In the SIGSEGV
 * handler. */
static bool claim_fault(const siginfo_t *si, void *ucv)
{
	if (!may_be_write(si, ucv))
		return false;
	atomic_fetch_add(&readers_inside, 1);
	bool ours = handle_tracked_write((uintptr_t)si->si_addr, ucv);
	atomic_fetch_sub(&readers_inside, 1);
	return ours;
}

/* ---- prefault ---- */

void tracker_prefault(void *addr, size_t len)
{
	if (len == 0)
		return;
	uintptr_t a = (uintptr_t)addr;
	uintptr_t e = a + len < a ? UINTPTR_MAX : a + len;
	atomic_fetch_add(&readers_inside, 1);
	for (int i = 0; i < MAX_TRACKERS; i++) {
		struct mp_impl *m = atomic_load(&active[i]);
		if (m == NULL)
			continue;
		uintptr_t lo = a > m->lo ? a : m->lo;
		uintptr_t hi = e < m->hi ? e : m->hi;
		if (lo >= hi)
			continue;
		size_t first = (lo - m->lo) / m->ps;
		size_t count = (hi - 1 - m->lo) / m->ps - first + 1;
		/* Marked before made writable: a write from another thread in
		 * between must not go unrecorded. */
		mark_pages(m, first, count);
		if (!atomic_load(&m->overflow))
			(void)set_access(m, first, count, true);
	}
	atomic_fetch_sub(&readers_inside, 1);
}

/* ---- attach, collect, detach ---- */

static void free_impl(struct mp_impl *m)
{
	own_fd_close(&m->pagemap);
	if (m->dirty != NULL)
		prim_unmap((void *)m->dirty, m->nwords * sizeof(uint64_t));
	if (m->hot != NULL)
		prim_unmap(m->hot, m->nwords * sizeof(uint64_t));
	if (m->last != NULL)
		prim_unmap(m->last, m->nwords * sizeof(uint64_t));
	if (m->blind != NULL)
		prim_unmap(m->blind, m->nwords * sizeof(uint64_t));
	if (m->idle != NULL)
		prim_unmap(m->idle, m->npages);
	prim_unmap(m, sizeof(*m));
}

static int mp_attach(struct tracker *t)
{
	struct mp_impl *m = prim_map_any(sizeof(*m));
	if (m == NULL) {
		err_set_errno(errno, "cannot allocate the mprotect write tracker");
		return -1;
	}
	m->t = t;
	m->lo = (uintptr_t)t->base;
	m->hi = m->lo + t->len;
	m->ps = t->page_size;
	m->npages = t->len / t->page_size;
	m->nwords = (m->npages + 63) / 64;
	m->pagemap = -1;
	m->slot = -1;
	m->fault_ahead = !(t->open_flags & TRACKER_OPEN_EXACT);
	m->hot_any_rate = (t->open_flags & TRACKER_OPEN_HOT_AT_ANY_RATE) != 0;
	m->dirty = prim_map_any(m->nwords * sizeof(uint64_t));
	if (m->dirty == NULL) {
		err_set_errno(errno, "cannot allocate the dirty-page bitmap for %zu pages",
			      m->npages);
		free_impl(m);
		return -1;
	}
	/* Address space only: pages are used as pages of the range are
	 * written. */
	if (m->fault_ahead &&
	    ((m->hot = prim_map_any(m->nwords * sizeof(uint64_t))) == NULL ||
	     (m->last = prim_map_any(m->nwords * sizeof(uint64_t))) == NULL ||
	     (m->blind = prim_map_any(m->nwords * sizeof(uint64_t))) == NULL ||
	     (m->idle = prim_map_any(m->npages)) == NULL)) {
		err_set_errno(errno, "cannot allocate the hot-page maps for %zu pages", m->npages);
		free_impl(m);
		return -1;
	}
	/* Only needed after an overflow; without it such an epoch reports
	 * the whole range. */
	m->pagemap = prim_open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC, 0);
	own_fd_keep(&m->pagemap, "/proc/self/pagemap");

	prim_lock(&slots_lock);
	for (int i = 0; i < MAX_TRACKERS && m->slot < 0; i++)
		if (atomic_load(&active[i]) == NULL)
			m->slot = i;
	if (m->slot < 0) {
		prim_unlock(&slots_lock);
		err_set("cannot track more than %d ranges with the mprotect backend at once",
			MAX_TRACKERS);
		free_impl(m);
		return -1;
	}
	if (fault_signal_install(claim_fault) != 0) {
		prim_unlock(&slots_lock);
		err_set_errno(errno, "cannot install the SIGSEGV handler of the mprotect write "
			      "tracker");
		free_impl(m);
		return -1;
	}
	if (pins_attach(m) != 0) {
		prim_unlock(&slots_lock);
		fault_signal_uninstall();
		free_impl(m);
		return -1;
	}
	/* Published before the range is protected: every fault it can cause
	 * finds it. */
	atomic_store(&active[m->slot], m);
	prim_unlock(&slots_lock);
	t->impl = m;

	/* Give the range's VMA its anon_vma now, while it is one VMA.  Else
	 * each page first written after a split gets an anon_vma of its own,
	 * and VMAs with different anon_vmas never merge again: the pieces
	 * would outlive the epoch and pile up past the run budget.  An
	 * atomic add of 0 is a write that cannot lose a concurrent one. */
	__atomic_fetch_add((uint64_t *)t->base, 0, __ATOMIC_RELAXED);

	if (prim_protect(t->base, t->len, false) != 0) {
		err_set_errno(errno, "cannot write-protect %p + %zu", t->base, t->len);
		t->ops->detach(t);
		return -1;
	}
	return 0;
}

/* After an overflow: mark every page that pagemap says was touched. */
static void mark_touched(struct mp_impl *m)
{
	uint64_t entries[512];
	size_t done = 0;
	while (m->pagemap >= 0 && done < m->npages) {
		size_t want = m->npages - done < 512 ? m->npages - done : 512;
		off_t off = (off_t)((m->lo / m->ps + done) * sizeof(uint64_t));
		ssize_t r = prim_pread(m->pagemap, entries, want * sizeof(uint64_t), off);
		if (r < (ssize_t)sizeof(uint64_t))
			break;
		size_t got = (size_t)r / sizeof(uint64_t);
		for (size_t k = 0; k < got; k++)
			if (entries[k] & (PM_ENTRY_PRESENT | PM_ENTRY_SWAPPED))
				atomic_fetch_or_explicit(&m->dirty[(done + k) / 64],
							 1ULL << ((done + k) % 64),
							 memory_order_relaxed);
		done += got;
	}
	if (done < m->npages) {
		log_msg(LOG_WARN, "cannot read /proc/self/pagemap after a dirty-run overflow; "
			"persisting every page of the heap this epoch");
		for (size_t i = done; i < m->npages; i++)
			atomic_fetch_or_explicit(&m->dirty[i / 64], 1ULL << (i % 64),
						 memory_order_relaxed);
	}
}

/* Exact number of runs of dirty pages (quiescent: no concurrent marking). */
static long count_runs(const struct mp_impl *m)
{
	long runs = 0;
	uint64_t carry = 0;
	for (size_t w = 0; w < m->nwords; w++) {
		uint64_t bits = atomic_load_explicit(&m->dirty[w], memory_order_relaxed);
		runs += __builtin_popcountll(bits & ~((bits << 1) | carry));
		carry = bits >> 63;
	}
	return runs;
}

/* Call fn on each run of dirty pages. */
static void for_each_dirty_run(const struct mp_impl *m,
			       void (*fn)(const struct mp_impl *m, size_t first, size_t count))
{
	size_t start = 0, len = 0;
	for (size_t w = 0; w < m->nwords; w++) {
		uint64_t bits = atomic_load_explicit(&m->dirty[w], memory_order_relaxed);
		while (bits != 0) {
			size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
			bits &= bits - 1;
			if (len > 0 && start + len == i) {
				len++;
				continue;
			}
			if (len > 0)
				fn(m, start, len);
			start = i;
			len = 1;
		}
	}
	if (len > 0)
		fn(m, start, len);
}

static void make_writable(const struct mp_impl *m, size_t first, size_t count)
{
	if (set_access(m, first, count, true) != 0)
		log_msg(LOG_ERR, "cannot unprotect pages %zu..%zu of a tracked range (errno %d)",
			first, first + count - 1, errno);
}

static void make_read_only(const struct mp_impl *m, size_t first, size_t count)
{
	if (set_access(m, first, count, false) != 0)
		log_msg(LOG_ERR, "cannot re-protect pages %zu..%zu of a tracked range (errno %d)",
			first, first + count - 1, errno);
}

/* Bit i of one of the hot-page maps (hot, last, blind: epoch thread only). */
static bool map_bit(const uint64_t *map, size_t i)
{
	return (map[i / 64] >> (i % 64)) & 1;
}

static bool page_hot(const struct mp_impl *m, size_t i) { return map_bit(m->hot, i); }

/* Whether collected page i stays writable (hot) rather than being
 * re-protected; updates its hot state (HOT_IDLE).  consecutive: it was
 * collected by the previous collection too; allowed: pages may stay or
 * become hot now. */
static bool keep_hot(struct mp_impl *m, size_t i, bool consecutive, bool allowed)
{
	uint64_t bit = 1ULL << (i % 64);
	if (page_hot(m, i)) {
		if (allowed && --m->idle[i] != 0)
			return true;
		m->hot[i / 64] &= ~bit;
		m->nhot--;
		return false;
	}
	/* A pinned page is writable and reported at every collection
	 * already. */
	struct pins *p = pins_of[m->slot];
	if (!consecutive || !allowed || m->nhot >= HOT_MAX || (p->bits != NULL && pinned(p, i)))
		return false;
	m->hot[i / 64] |= bit;
	m->nhot++;
	m->idle[i] = HOT_IDLE;
	m->t->stats.hot_pages++;
	return true;
}

/* A moving average of the spacing of collections (HOT_PERIOD_NS). */
static void update_period(struct mp_impl *m)
{
	uint64_t now = prim_now_ns();
	if (m->last_collect_ns != 0 && now > m->last_collect_ns) {
		uint64_t gap = now - m->last_collect_ns;
		m->period_ns = m->period_ns == 0 ? gap : m->period_ns - m->period_ns / 8 + gap / 8;
	}
	m->last_collect_ns = now;
}

static size_t mp_collect(struct tracker *t, uint64_t *pages, size_t max)
{
	struct mp_impl *m = t->impl;
	if (m->hot != NULL)
		update_period(m);
	bool was_overflow = atomic_load(&m->overflow);
	if (was_overflow)
		mark_touched(m);
	/* Every first write must fault while the FASE checker listens. */
	bool hot_allowed = m->hot != NULL && !was_overflow &&
			   (m->hot_any_rate || (m->period_ns != 0 && m->period_ns <= HOT_PERIOD_NS)) &&
			   atomic_load_explicit(&write_hook, memory_order_acquire) == NULL;
	/* The whole range is re-protected below: nothing stays hot. */
	if (was_overflow && m->nhot != 0) {
		memset(m->hot, 0, m->nwords * sizeof(uint64_t));
		m->nhot = 0;
	}

	size_t n = 0;
	size_t run_start = 0, run_len = 0;	/* collected pages to re-protect */
	/* Bits are exact, so the extent only bounds the walk (bits above it,
	 * if any, wait for a wider collection). */
	size_t nwords = (t->extent / t->page_size + 63) / 64;
	if (nwords > m->nwords)
		nwords = m->nwords;
	for (size_t w = 0; w < nwords && n < max; w++) {
		uint64_t bits = atomic_load_explicit(&m->dirty[w], memory_order_relaxed);
		uint64_t taken = 0, kept = 0;
		/* Before keep_hot changes them (after an overflow none is). */
		uint64_t was_hot = m->hot != NULL ? m->hot[w] : 0;
		while (bits != 0 && n < max) {
			unsigned b = (unsigned)__builtin_ctzll(bits);
			bits &= bits - 1;
			taken |= 1ULL << b;
			size_t i = w * 64 + b;
			pages[n++] = i;
			/* Writable, and written as far as the next collection
			 * knows: its bit stays. */
			if (!was_overflow && m->hot != NULL &&
			    keep_hot(m, i, map_bit(m->last, i), hot_allowed))
				kept |= 1ULL << b;
		}
		if (m->hot != NULL) {
			m->last[w] = taken;
			m->blind[w] = taken & was_hot;
		}
		atomic_fetch_and_explicit(&m->dirty[w], ~(taken & ~kept), memory_order_seq_cst);
	}
	/* Every bit is cleared before any page is read-only again, and no
	 * handler that marked a page before its bit was cleared is still
	 * making it writable: a thread outside any FASE may fault meanwhile,
	 * and its mprotect landing after ours would leave the page writable
	 * and unmarked, its later writes never collected.  A handler that
	 * starts later marks the page anew.  (Writes before our mprotect land
	 * before this epoch's copy, or read, of the page.) */
	while (atomic_load(&readers_inside) != 0)
		prim_yield();
	for (size_t k = 0; k < n && !was_overflow; k++) {	/* else all below */
		size_t i = (size_t)pages[k];
		if (m->hot != NULL && page_hot(m, i)) {
			/* Kept writable: never inside a covering range. */
			if (run_len > 0)
				make_read_only(m, run_start, run_len);
			run_len = 0;
			continue;
		}
		/* Pages between collected ones that are not dirty are
		 * read-only already: re-protecting a covering range costs one
		 * call instead of one per run (each call splits VMAs and
		 * flushes the TLB). */
		if (run_len > 0 && i - (run_start + run_len) <= REPROTECT_GAP) {
			run_len = i - run_start + 1;
		} else {
			if (run_len > 0)
				make_read_only(m, run_start, run_len);
			run_start = i;
			run_len = 1;
		}
	}
	if (run_len > 0)
		make_read_only(m, run_start, run_len);

	pins_remark(m);
	/* Pages left for the next call (more than max were dirty) stay
	 * marked and writable. */
	long remaining = count_runs(m);
	if (was_overflow && remaining <= TRACKER_MPROTECT_MAX_RUNS) {
		if (set_access(m, 0, m->npages, false) != 0)
			log_msg(LOG_ERR, "cannot re-protect the persistent heap (errno %d)", errno);
		for_each_dirty_run(m, make_writable);
		atomic_store(&m->overflow, false);
	}
	atomic_store(&m->runs, remaining);
	return n;
}

void tracker_mprotect_atfork_child(void)
{
	/* The parent's handlers in flight ran on threads the child does not
	 * have: detach must not wait for them. */
	atomic_store(&readers_inside, 0);
}

static void mp_detach(struct tracker *t)
{
	struct mp_impl *m = t->impl;
	if (m == NULL)
		return;
	/* The heap outlives tracking (shutdown, fork child): leave it
	 * writable, and only then stop recognising faults in it. */
	if (prim_protect(t->base, t->len, true) != 0)
		log_msg(LOG_WARN, "cannot unprotect %p + %zu when detaching the tracker (errno %d)",
			t->base, t->len, errno);
	prim_lock(&slots_lock);
	atomic_store(&active[m->slot], NULL);
	fault_signal_uninstall();
	prim_unlock(&slots_lock);
	while (atomic_load(&readers_inside) != 0)
		prim_yield();
	pins_detach(m);
	free_impl(m);
	t->impl = NULL;
}

/* The bitmap holds exactly the pages marked since the collection (each is
 * marked before it becomes writable, so before any store to it lands), and
 * reading it changes nothing.  After an overflow writes are no longer seen
 * at all. */
static int mp_written_since(struct tracker *t, const uint64_t *pages, size_t n, uint8_t *written)
{
	struct mp_impl *m = t->impl;
	/* The caller read the pages' contents before asking: a store it saw
	 * was preceded by its page's mark (the handler marks, then
	 * mprotects), so the mark must be seen too. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&m->overflow))
		return -1;
	for (size_t k = 0; k < n; k++)
		written[k] = page_dirty(m, (size_t)pages[k]);
	/* An overflow that began while we read may have let stores through
	 * unmarked. */
	return atomic_load(&m->overflow) ? -1 : 0;
}

/* A hot page the epoch found changed stays hot for HOT_IDLE more
 * collections. */
static void mp_note_changed(struct tracker *t, const uint64_t *pages, size_t n,
			    const uint8_t *changed)
{
	struct mp_impl *m = t->impl;
	if (m->hot == NULL || m->nhot == 0)
		return;
	for (size_t k = 0; k < n; k++) {
		size_t i = (size_t)pages[k];
		if (changed[k] && i < m->npages && page_hot(m, i))
			m->idle[i] = HOT_IDLE;
	}
}

/* The pages the last collection took while they were hot: writable since
 * the collection before, so nothing saw whether they were written.  Only
 * words the collection walked are asked about (pages it returned). */
static size_t mp_written_unknown(struct tracker *t, const uint64_t *pages, size_t n,
				 uint8_t *unknown)
{
	struct mp_impl *m = t->impl;
	if (m->hot == NULL)
		return 0;
	size_t count = 0;
	for (size_t k = 0; k < n; k++) {
		size_t i = (size_t)pages[k];
		unknown[k] = i < m->npages && map_bit(m->blind, i);
		count += unknown[k];
	}
	return count;
}

const struct tracker_ops tracker_mprotect_ops = {
	.name = "mprotect",
	.attach = mp_attach,
	.collect_dirty = mp_collect,
	.written_since = mp_written_since,
	.note_changed = mp_note_changed,
	.written_unknown = mp_written_unknown,
	.detach = mp_detach,
};
