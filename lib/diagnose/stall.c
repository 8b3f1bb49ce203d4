/* SPDX-License-Identifier: BSD-3-Clause */
/* stall -- the stall report and PMTHREADS_NOT_FASE.  See stall.h. */
#include "diagnose/stall.h"

#include "base/config.h"
#include "diagnose/symbolize.h"
#include "prim/prim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

/* An object's path as dladdr gave it (di of an address in it); for the
 * program itself glibc gives argv[0], which programs rewrite (Redis puts its
 * address there): the executable's path then. */
static const char *object_path(const Dl_info *di)
{
	static char exe[256];
	Dl_info main_di;
	bool is_main = di->dli_fname == NULL || di->dli_fname[0] == '\0' ||
		       (dladdr((void *)getauxval(AT_PHDR), &main_di) != 0 &&
			main_di.dli_fbase == di->dli_fbase);
	if (is_main) {
		if (exe[0] == '\0') {
			ssize_t n = prim_readlink("/proc/self/exe", exe, sizeof(exe) - 1);
			exe[n > 0 ? n : 0] = '\0';
		}
		return exe[0] != '\0' ? exe : "the program";
	}
	return di->dli_fname;
}

/* Whether name is one of the comma-separated list's. */
static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p != '\0';) {
		const char *end = strchr(p, ',');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		if (len == n && memcmp(p, name, n) == 0)
			return true;
		p += len + (end != NULL);
	}
	return false;
}

/* The exported function containing code address at, or NULL. */
static const char *exported_function(uintptr_t at, Dl_info *di)
{
	if (dladdr((void *)at, di) == 0 || di->dli_sname == NULL)
		return NULL;
	return di->dli_sname;
}

/* The exported function the call before return address site called
 * directly, when that is not the lock call itself: the function that took
 * the lock by a tail call (`jmp pthread_mutex_lock`), whose caller the
 * return address is in.  NULL when there is none or it cannot be told. */
static const char *called_function(uintptr_t site, Dl_info *di)
{
	Dl_info at, before;
	if (site < PRIM_CALL_BYTES || dladdr((void *)(site - 1), &at) == 0 ||
	    dladdr((void *)(site - PRIM_CALL_BYTES), &before) == 0 || at.dli_fbase != before.dli_fbase)
		return NULL;
	uintptr_t target = prim_direct_call_target(site);
	const char *fn = target != 0 ? exported_function(target, di) : NULL;
	if (fn == NULL || (uintptr_t)di->dli_saddr != target || strncmp(fn, "pthread_", 8) == 0 ||
	    strncmp(fn, "__pthread_", 10) == 0 || strncmp(fn, "mtx_", 4) == 0)
		return NULL;
	return fn;
}

bool stall_not_fase_site(const void *site)
{
	const char *list = config_get()->not_fase;
	if (site == NULL)
		return false;
	Dl_info di;
	/* A return address: the call is the instruction before it. */
	const char *fn = exported_function((uintptr_t)site - 1, &di);
	if (fn != NULL && listed(list, fn))
		return true;
	fn = called_function((uintptr_t)site, &di);
	return fn != NULL && listed(list, fn);
}

void stall_site_name(uintptr_t site, char *buf, size_t len)
{
	Dl_info di;
	if (site == 0) {
		snprintf(buf, len, "?");
		return;
	}
	const char *fn = exported_function(site - 1, &di);
	if (fn != NULL)
		snprintf(buf, len, "%s+%#lx", fn, (unsigned long)(site - (uintptr_t)di.dli_saddr));
	else if (dladdr((void *)(site - 1), &di) != 0 && di.dli_fname != NULL)
		snprintf(buf, len, "%s+%#lx", object_path(&di),
			 (unsigned long)(site - (uintptr_t)di.dli_fbase));
	else
		snprintf(buf, len, "%#lx", (unsigned long)site);
}

/* The lock's address and what it is: an exported variable, a place in an
 * object's data, or neither (the heap, a stack). */
static void lock_name(uintptr_t lock, char *buf, size_t len)
{
	Dl_info di;
	if (lock == 0) {
		snprintf(buf, len, "no lock (a heap operation or a runtime's construct)");
		return;
	}
	struct symbol sym;
	symbolize(lock, false, &sym);	/* the symbol table too, where there is one */
	if (dladdr((void *)lock, &di) != 0 && di.dli_sname != NULL)
		snprintf(buf, len, "%#lx (%s+%#lx in %s)", (unsigned long)lock, di.dli_sname,
			 (unsigned long)(lock - (uintptr_t)di.dli_saddr), object_path(&di));
	else if (strcmp(sym.function, "??") != 0)
		snprintf(buf, len, "%#lx (%s in %s)", (unsigned long)lock, sym.function,
			 sym.object != NULL ? sym.object : "?");
	else if (dladdr((void *)lock, &di) != 0 && di.dli_fname != NULL)
		snprintf(buf, len, "%#lx (a static variable at %s+%#lx)", (unsigned long)lock,
			 object_path(&di), (unsigned long)(lock - (uintptr_t)di.dli_fbase));
	else
		snprintf(buf, len, "%#lx (in no object's data: on the heap or a stack)",
			 (unsigned long)lock);
}

static void thread_name(int tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
	buf[0] = '\0';
	int fd = prim_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	ssize_t n = prim_read(fd, buf, len - 1);
	prim_close(fd);
	if (n < 0)
		n = 0;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
}

static const char *site_object(uintptr_t site)
{
	Dl_info di;
	if (site == 0 || dladdr((void *)(site - 1), &di) == 0)
		return "?";
	return object_path(&di);
}

struct text {
	char *buf;
	size_t len, used;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
	if (t->used >= t->len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->used += (size_t)n < t->len - t->used ? (size_t)n : t->len - t->used - 1;
}

/* A line per holder (at most QUIESCE_STALL_HOLDERS, then how many more):
 * the thread, the lock, where it was taken, what the thread does now.
 * suggest gets the function PMTHREADS_NOT_FASE would name, or "". */
static void add_holders(struct text *t, const struct quiesce_stall *s, char *suggest,
			size_t suggest_len, const char *more)
{
	(void)symbolize_open();	/* file:line where debug information exists */
	suggest[0] = '\0';
	unsigned shown = s->n_holders < QUIESCE_STALL_HOLDERS ? s->n_holders : QUIESCE_STALL_HOLDERS;
	for (unsigned i = 0; i < shown; i++) {
		const struct quiesce_stall_holder *h = &s->holders[i];
		char name[32], lock[384], wait[160], where[512];
		thread_name(h->tid, name, sizeof(name));
		lock_name(h->lock, lock, sizeof(lock));
		bool self = h->tid == prim_gettid();	/* the exit's own thread */
		if (self)
			snprintf(wait, sizeof(wait), "the thread that is exiting");
		else
			prim_thread_wait_state(h->tid, wait, sizeof(wait));
		struct symbol sym;
		symbolize(h->site, true, &sym);
		if (sym.line > 0)
			snprintf(where, sizeof(where), "%s (%s:%d)", sym.function, sym.file, sym.line);
		else
			snprintf(where, sizeof(where), "%s (%s)", sym.function, site_object(h->site));
		Dl_info cd;
		const char *callee = h->site != 0 ? called_function(h->site, &cd) : NULL;
		char via[192] = "";
		if (callee != NULL)
			snprintf(via, sizeof(via), " by its call to %s (which ends in the lock call)",
				 callee);
		add(t, "  thread %d (%s) holds lock %s, taken in %s%s%s%s\n", h->tid,
		    name[0] != '\0' ? name : "?", lock, where, via,
		    wait[0] == '\0'			 ? ""
		    : self || strcmp(wait, "running") == 0 ? "; it is "
							 : "; it is blocked in ",
		    wait);
		Dl_info di;
		const char *fn = h->site != 0 ? exported_function(h->site - 1, &di) : NULL;
		if (suggest[0] == '\0' && (callee != NULL || fn != NULL))
			snprintf(suggest, suggest_len, "%s", callee != NULL ? callee : fn);
		else if (fn == NULL && h->site != 0 && strcmp(sym.function, "??") != 0) {
			add(t, "  (%s is not in the dynamic symbol table: PMTHREADS_NOT_FASE cannot "
			    "name it unless the program is linked with -rdynamic)\n", sym.function);
		}
	}
	if (s->n_holders > shown)
		add(t, "  and %u more thread(s) %s\n", s->n_holders - shown, more);
}

/* The fix, when the lock may be no critical section. */
static void add_not_fase(struct text *t, const char *suggest)
{
	add(t, "if that lock is no critical section (a global lock held across an event loop or a "
	    "blocking wait), run with PMTHREADS_NOT_FASE=%s (pmthreads run --not-fase %s; see "
	    "pmthreads(7) for the risk)", suggest, suggest);
}

void stall_format(const struct quiesce_stall *s, bool cleared, char *buf, size_t len)
{
	struct text t = { buf, len, 0 };
	buf[0] = '\0';
	double stood = (double)s->stood_ns / 1e9;
	if (cleared) {
		add(&t, "durability resumes: a quiescent point was reached after %.1f s without "
		    "one\n", stood);
		return;
	}
	add(&t, "durability has stood still for %.1f s: no quiescent point could be reached, "
	    "so heap writes made since are not durable\n", stood);
	if (s->n_holders == 0)
		add(&t, "  the FASE that blocked the last attempt has just ended\n");
	char suggest[128];
	add_holders(&t, s, suggest, sizeof(suggest), "in a FASE that outlasted the bound");
	add(&t, "  no epoch closes the gate against it again until it releases; pmthreads_sync() "
	    "fails with ETIMEDOUT after %llu ms of this (PMTHREADS_SYNC_TIMEOUT_MS), and output "
	    "held by output commit waits\n", (unsigned long long)(s->sync_timeout_ns / 1000000));
	if (suggest[0] != '\0') {
		add(&t, "  what to do: ");
		add_not_fase(&t, suggest);
		add(&t, "; else make the thread release it; next report after %.0f s\n",
		    (double)s->next_report_ns / 1e9);
	} else {
		add(&t, "  what to do: make the thread release the lock between its operations, or, "
		    "if it is no critical section, name the function that takes it in "
		    "PMTHREADS_NOT_FASE (see pmthreads(7)); next report after %.0f s\n",
		    (double)s->next_report_ns / 1e9);
	}
}

void stall_format_exit(const struct quiesce_stall *s, unsigned long long epoch, char *buf,
		       size_t len)
{
	struct text t = { buf, len, 0 };
	buf[0] = '\0';
	add(&t, "no quiescent point could be reached at exit (a thread held a lock): what the "
	    "program wrote since the last durable epoch is not in the pool; the next run recovers "
	    "epoch %llu\n", epoch);
	if (s->n_holders == 0) {
		add(&t, "  the FASE that kept it from one ended as the final epoch gave up\n");
		return;
	}
	char suggest[128];
	add_holders(&t, s, suggest, sizeof(suggest), "in a FASE at exit");
	if (suggest[0] != '\0') {
		add(&t, "  what to do: ");
		add_not_fase(&t, suggest);
		add(&t, "; else release it before the program exits\n");
	} else {
		add(&t, "  what to do: release the lock before the program exits, or, if it is no "
		    "critical section, name the function that takes it in PMTHREADS_NOT_FASE (see "
		    "pmthreads(7))\n");
	}
}

void stall_summary(const struct quiesce_stall *s, bool cleared, char *buf, size_t len)
{
	struct text t = { buf, len, 0 };
	buf[0] = '\0';
	add(&t, "stall%s stood_ms=%llu", cleared ? " cleared" : "",
	    (unsigned long long)(s->stood_ns / 1000000));
	if (cleared)
		return;
	unsigned shown = s->n_holders < QUIESCE_STALL_HOLDERS ? s->n_holders : QUIESCE_STALL_HOLDERS;
	for (unsigned i = 0; i < shown; i++) {
		char site[256];
		stall_site_name(s->holders[i].site, site, sizeof(site));
		add(&t, " thread=%d lock=%#lx site=%s", s->holders[i].tid,
		    (unsigned long)s->holders[i].lock, site);
	}
}
