/* SPDX-License-Identifier: BSD-3-Clause */
/* checker -- reports of writes to the persistent heap outside any lock.
 * See fase_checker.h. */
#define UNW_LOCAL_ONLY
#include "diagnose/fase_checker.h"

#include "base/config.h"
#include "base/log.h"
#include "quiesce/quiesce.h"
#include "diagnose/symbolize.h"
#include "prim/prim.h"

#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open addressing at load factor <= 1/2 keeps probe sequences short. */
#define TABLE_SLOTS (2 * CHECKER_MAX_SITES)

/* What the summary at exit lists: per reported site (in the order they were
 * first seen) its backtrace, and per table slot the writes counted there. */
struct site_record {
	uintptr_t ips[CHECKER_MAX_FRAMES];
	int n;
	void *addr;
	size_t slot;
};

/* The sites of unlocked writes. */
static struct {
	/* Call-site keys; 0 marks a free slot.  Slots only ever go from 0 to a
	 * key, so a compare-and-swap is all the synchronisation needed, and
	 * two threads faulting at the same site at once cannot both win. */
	_Atomic uint64_t keys[TABLE_SLOTS];
	atomic_uint used;		/* keys taken (atomic) */
	/* The reported sites: an entry is claimed by incrementing n_records
	 * (atomic) and written by its claimer only. */
	struct site_record records[CHECKER_MAX_SITES];
	atomic_uint n_records;
	_Atomic uint64_t slot_writes[TABLE_SLOTS];	/* per key slot (atomic) */
} sites;

static atomic_bool initialised;
/* The C library's mapped span (see site_key): written once, before
 * initialised is set. */
static struct {
	uintptr_t lo, hi;
} libc;

/* The report's figures (fase_checker_get_stats): relaxed atomics. */
static struct {
	_Atomic uint64_t checked, unlocked, reported, dropped;
} counts;

/* One report at a time, so that the lines of two threads' reports do not
 * interleave.  Taken in the SIGSEGV handler: the reentrancy guard below
 * keeps a thread from ever waiting for itself.  A fork child reports
 * nothing more (it has no tracker). */
static prim_lock_t printing = PRIM_LOCK_INIT;
PRIM_LOCK_NAMED(printing, report, "diagnose/fase_checker: one report at a time",
		PRIM_FORK_RESET);

/* Set while this thread is inside the hook: writes the reporting code itself
 * makes (libunwind's allocations land in the heap in malloc mode) fault
 * again, re-enter the hook, and must be neither checked nor reported. */
static __thread bool in_hook __attribute__((tls_model("initial-exec")));

/* ---- the C library's address range ---- */

static int find_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	uintptr_t probe = (uintptr_t)arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;
		if (s < lo)
			lo = s;
		if (s + ph->p_memsz > hi)
			hi = s + ph->p_memsz;
	}
	if (probe < lo || probe >= hi)
		return 0;
	libc.lo = lo;
	libc.hi = hi;
	return 1;
}

static bool in_libc(uintptr_t ip)
{
	return ip >= libc.lo && ip < libc.hi;
}

/* ---- unwinding (no allocation) ---- */

/* Start a cursor at the faulting instruction (ucontext from the signal) or,
 * without one, at our caller. */
static int cursor_init(unw_cursor_t *c, unw_context_t *own, void *ucontext)
{
	if (ucontext != NULL)
		return unw_init_local2(c, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME);
	if (unw_getcontext(own) != 0)
		return -1;
	return unw_init_local(c, own);
}

/* The instruction pointers of the first max frames. */
static int walk(void *ucontext, uintptr_t *ips, int max)
{
	unw_context_t own;
	unw_cursor_t c;
	if (cursor_init(&c, &own, ucontext) != 0)
		return 0;
	int n = 0;
	do {
		unw_word_t ip;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
		ips[n++] = (uintptr_t)ip;
	} while (n < max && unw_step(&c) > 0);
	return n;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* The faulting PC, plus the return addresses up to the first frame outside
 * the C library when the write happened inside it (memcpy and friends are
 * one PC for every caller). */
static uint64_t site_key(const uintptr_t *ips, int n)
{
	uint64_t k = ips[0];
	for (int i = 0; i + 1 < n && in_libc(ips[i]); i++)
		k = mix(k) ^ ips[i + 1];
	return k != 0 ? k : 1;
}

/* Whether the site is new (and now remembered); *slot: its table slot, or
 * TABLE_SLOTS when the table is full.  Lock-free, no allocation. */
static bool first_time(uint64_t key, size_t *slot)
{
	size_t i = (size_t)(mix(key) % TABLE_SLOTS);
	*slot = TABLE_SLOTS;
	for (size_t probes = 0; probes < TABLE_SLOTS; probes++, i = (i + 1) % TABLE_SLOTS) {
		*slot = i;
		uint64_t cur = atomic_load_explicit(&sites.keys[i], memory_order_acquire);
		if (cur == key)
			return false;
		if (cur != 0)
			continue;
		if (atomic_fetch_add(&sites.used, 1) >= CHECKER_MAX_SITES) {
			atomic_fetch_sub(&sites.used, 1);
			break;
		}
		uint64_t expected = 0;
		if (atomic_compare_exchange_strong(&sites.keys[i], &expected, key))
			return true;
		atomic_fetch_sub(&sites.used, 1);
		if (expected == key)
			return false;	/* another thread took this site just now */
	}
	*slot = TABLE_SLOTS;
	if (atomic_fetch_add(&counts.dropped, 1) == 0)
		log_msg(LOG_WARN, "the FASE checker has seen %d distinct sites of unlocked "
			"writes; further new sites are not reported", CHECKER_MAX_SITES);
	return false;
}

/* ---- symbolising and printing (may allocate, see fase_checker.h) ---- */

static void print_frames(void *ucontext, int n)
{
	unw_context_t own;
	unw_cursor_t c;
	if (cursor_init(&c, &own, ucontext) != 0)
		return;
	for (int i = 0; i < n; i++) {
		unw_word_t ip = 0, off = 0;
		char name[256];
		if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
		int r = unw_get_proc_name(&c, name, sizeof(name), &off);
		Dl_info di;
		bool have_dl = dladdr((void *)ip, &di) != 0;
		if (r != 0 && r != -UNW_ENOMEM) {
			/* No symbol table entry libunwind could read: the
			 * nearest exported symbol, if any. */
			if (have_dl && di.dli_sname != NULL) {
				snprintf(name, sizeof(name), "%s", di.dli_sname);
				off = ip - (uintptr_t)di.dli_saddr;
			} else {
				snprintf(name, sizeof(name), "??");
				off = have_dl ? ip - (uintptr_t)di.dli_fbase : 0;
			}
		}
		const char *obj = have_dl && di.dli_fname != NULL && di.dli_fname[0] != '\0'
					  ? di.dli_fname
					  : program_invocation_name;
		log_msg(LOG_WARN, "  #%d 0x%lx %s+0x%lx (%s)", i, (unsigned long)ip, name,
			(unsigned long)off, obj);
		if (unw_step(&c) <= 0)
			break;
	}
}

static void report(void *addr, void *ucontext, int nframes)
{
	/* The reporting code's own heap writes (malloc mode) must be able to
	 * fault and be tracked; every other signal stays blocked. */
	sigset_t segv, saved;
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	pthread_sigmask(SIG_UNBLOCK, &segv, &saved);
	prim_lock(&printing);
	log_msg(LOG_WARN, "write to the persistent heap at %p outside any lock (not "
		"failure-atomic)", addr);
	print_frames(ucontext, nframes);
	prim_unlock(&printing);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/* ---- the hook ---- */

void fase_checker_on_write(void *addr, void *ucontext)
{
	/* A write of the runtime's own code (its threads, its exit path; the
	 * handler's scope is one level) is not the program's. */
	if (in_hook || !atomic_load_explicit(&initialised, memory_order_acquire) ||
	    quiesce_runtime_depth() > 1)
		return;
	atomic_fetch_add_explicit(&counts.checked, 1, memory_order_relaxed);
	if (fase_depth() != 0)
		return;
	in_hook = true;
	atomic_fetch_add_explicit(&counts.unlocked, 1, memory_order_relaxed);
	uintptr_t ips[CHECKER_MAX_FRAMES];
	int n = walk(ucontext, ips, CHECKER_MAX_FRAMES);
	size_t slot;
	if (n > 0 && first_time(site_key(ips, n), &slot)) {
		atomic_fetch_add_explicit(&counts.reported, 1, memory_order_relaxed);
		unsigned r = atomic_fetch_add(&sites.n_records, 1);
		if (r < CHECKER_MAX_SITES) {
			memcpy(sites.records[r].ips, ips, sizeof(ips[0]) * (size_t)n);
			sites.records[r].n = n;
			sites.records[r].addr = addr;
			sites.records[r].slot = slot;
		}
		report(addr, ucontext, n);
	}
	if (n > 0 && slot < TABLE_SLOTS)
		atomic_fetch_add_explicit(&sites.slot_writes[slot], 1, memory_order_relaxed);
	in_hook = false;
}

int fase_checker_init(void)
{
	if (atomic_load(&initialised))
		return 0;
	/* libunwind's global cache is guarded by a lock: a handler
	 * interrupting an unwind on the same thread would deadlock on it. */
	if (unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD) != 0) {
		err_set("the FASE checker cannot set libunwind's caching policy");
		return -1;
	}
	dl_iterate_phdr(find_libc, (void *)(uintptr_t)&abort);
	if (libc.hi == 0)
		log_msg(LOG_INFO, "the FASE checker did not find the C library's mapping; "
			"writes inside memcpy and friends are keyed by their own address only");
	/* Warm-up: libunwind initialises itself lazily (address space, unwind
	 * tables of the loaded objects); let that happen here, not in the
	 * first handler. */
	unw_context_t ctx;
	unw_cursor_t c;
	if (unw_getcontext(&ctx) != 0 || unw_init_local(&c, &ctx) != 0) {
		err_set("the FASE checker cannot unwind this process's stack with libunwind");
		return -1;
	}
	char name[64];
	unw_word_t off;
	int depth = 0;
	do
		(void)unw_get_proc_name(&c, name, sizeof(name), &off);
	while (++depth < CHECKER_MAX_FRAMES && unw_step(&c) > 0);
	atomic_store_explicit(&initialised, true, memory_order_release);
	return 0;
}

void fase_checker_get_stats(struct fase_checker_stats *out)
{
	out->writes_checked = atomic_load_explicit(&counts.checked, memory_order_relaxed);
	out->unlocked_writes = atomic_load_explicit(&counts.unlocked, memory_order_relaxed);
	out->sites_reported = atomic_load_explicit(&counts.reported, memory_order_relaxed);
	out->sites_dropped = atomic_load_explicit(&counts.dropped, memory_order_relaxed);
}

uint64_t fase_checker_violations(void)
{
	return atomic_load(&counts.unlocked);
}

/* Frames of the runtime itself (the preload's lock wrappers, the signal
 * path) say nothing to the user. */
static bool own_frame(const struct symbol *sym)
{
	return strstr(sym->object, "libpmthreads") != NULL;
}

void fase_checker_print_summary(void)
{
	if (!atomic_load(&initialised))
		return;
	struct fase_checker_stats cs;
	fase_checker_get_stats(&cs);
	bool fail = config_get()->check == CHECK_FAIL;
	enum log_level level = cs.unlocked_writes != 0 ? LOG_WARN : LOG_INFO;
	log_msg(level, "FASE checker: %llu first writes checked, %llu outside any lock, %llu call "
		"sites reported%s", (unsigned long long)cs.writes_checked,
		(unsigned long long)cs.unlocked_writes, (unsigned long long)cs.sites_reported,
		cs.unlocked_writes != 0 && fail ? "; exit status 1 (PMTHREADS_CHECK=fail)" : "");
	if (cs.unlocked_writes == 0 || log_get_level() < LOG_WARN)
		return;
	bool lines = symbolize_open();
	unsigned n = atomic_load(&sites.n_records);
	if (n > CHECKER_MAX_SITES)
		n = CHECKER_MAX_SITES;
	bool any_line = false;
	for (unsigned r = 0; r < n; r++) {
		const struct site_record *rec = &sites.records[r];
		log_msg(LOG_WARN, "  site %u: %llu unlocked first writes (the first to %p):", r + 1,
			(unsigned long long)atomic_load(&sites.slot_writes[rec->slot]), rec->addr);
		int shown = 0;
		for (int i = 0; i < rec->n && shown < 4; i++) {
			struct symbol sym;
			symbolize(rec->ips[i], i > 0, &sym);
			if (own_frame(&sym))
				continue;
			if (sym.line > 0) {
				any_line = true;
				log_msg(LOG_WARN, "    %s %s at %s:%d", shown == 0 ? "in" : "from",
					sym.function, sym.file, sym.line);
			} else {
				log_msg(LOG_WARN, "    %s %s (%s)", shown == 0 ? "in" : "from",
					sym.function, sym.object);
			}
			shown++;
		}
	}
	if (!any_line)
		log_msg(LOG_WARN, "  (file:line needs %s and a program built with -g)",
			lines ? "debug information" : "libdw (Debian: libdw1)");
	symbolize_close();
}
