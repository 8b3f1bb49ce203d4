/* SPDX-License-Identifier: BSD-3-Clause */
// The runtime never waits on its own gate (quiesce.h, "The runtime's own
// code"): a lock the runtime takes, or a library takes on its behalf, in a
// signal handler of the runtime or on one of its threads, is no FASE and never
// waits for the gate -- the epoch that closed it may be waiting for that very
// code.  Each path is run here while the gate is held closed (an epoch
// procedure that does not return until told), with a bound: a path that waits
// at the gate fails the test and is then let go.
//
// This executable interposes the pthread mutex and rwlock calls itself, as
// preload/pthread_locks.c does for a program: every lock of the process --
// libunwind's, libdw's, the test's "library" lock -- enters and leaves a FASE
// level (fase_enter / fase_leave) around the real call while `armed`.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

extern "C" {
#include "diagnose/fase_checker.h"
#include "quiesce/quiesce.h"
#include "runtime/startup.h"
#include "track/fault_signal.h"
#include "track/tracker.h"
}

// ---- the interposed locks ----

namespace {
std::atomic<bool> armed{ false };
int (*real_mutex_lock)(pthread_mutex_t *);
int (*real_mutex_unlock)(pthread_mutex_t *);
int (*real_rdlock)(pthread_rwlock_t *);
int (*real_wrlock)(pthread_rwlock_t *);
int (*real_rwunlock)(pthread_rwlock_t *);

template <typename F> void resolve(F &f, const char *name)
{
	f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

__attribute__((constructor)) void resolve_real()
{
	resolve(real_mutex_lock, "pthread_mutex_lock");
	resolve(real_mutex_unlock, "pthread_mutex_unlock");
	resolve(real_rdlock, "pthread_rwlock_rdlock");
	resolve(real_wrlock, "pthread_rwlock_wrlock");
	resolve(real_rwunlock, "pthread_rwlock_unlock");
}

// A lock is counted when its acquire was (the level it took is given back
// at the release): kept per thread, as the interposer cannot tell.
thread_local unsigned counted_held;

bool enter()
{
	if (!armed.load(std::memory_order_relaxed))
		return false;
	fase_enter();
	counted_held++;
	return true;
}

void leave()
{
	if (counted_held == 0)
		return;
	counted_held--;
	fase_leave();
}
} // namespace

extern "C" {
int pthread_mutex_lock(pthread_mutex_t *m)
{
	bool c = enter();
	int r = real_mutex_lock(m);
	if (r != 0 && c)
		leave();
	return r;
}

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	int r = real_mutex_unlock(m);
	if (r == 0)
		leave();
	return r;
}

int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	bool c = enter();
	int r = real_rdlock(l);
	if (r != 0 && c)
		leave();
	return r;
}

int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	bool c = enter();
	int r = real_wrlock(l);
	if (r != 0 && c)
		leave();
	return r;
}

int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	int r = real_rwunlock(l);
	if (r == 0)
		leave();
	return r;
}
}

namespace {

// What a library does for the runtime: its own lock, stdio, the dynamic
// loader.  Returns whether each step worked.
pthread_mutex_t library_lock = PTHREAD_MUTEX_INITIALIZER;

bool library_work()
{
	pthread_mutex_lock(&library_lock);
	pthread_mutex_unlock(&library_lock);
	FILE *f = fopen("/dev/null", "w");
	bool ok = f != nullptr && fprintf(f, "%d\n", 42) > 0;
	if (f != nullptr)
		fclose(f);
	// Any shared object does; libdw's is the one symbolize.c opens.
	void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == nullptr)
		h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
	ok = ok && h != nullptr;
	if (h != nullptr)
		dlclose(h);
	return ok;
}

// The gate held closed: an epoch whose procedure does not return until
// open() (later epochs return at once).
struct closed_gate {
	std::atomic<int> state{ 0 };	// 0: not yet, 1: the procedure holds it, 2: let go
	static void procedure(void *arg)
	{
		auto *g = static_cast<closed_gate *>(arg);
		int expected = 0;
		if (!g->state.compare_exchange_strong(expected, 1))
			return;
		while (g->state.load() != 2)
			usleep(1000);
	}
	closed_gate()
	{
		REQUIRE(quiesce_start(1, procedure, this) == 0);
		for (int i = 0; i < 10000 && state.load() != 1; i++)
			usleep(1000);
		REQUIRE(state.load() == 1);
	}
	void open() { state.store(2); }
	~closed_gate()
	{
		open();
		quiesce_stop(false);
	}
};

// Run fn on an application thread; whether it returned within ms.  When it
// did not, the gate is opened (it then can) and the thread joined.
struct bounded_run {
	void (*fn)(void *);
	void *arg;
	std::atomic<bool> done{ false };
	static void *main(void *p)
	{
		auto *b = static_cast<bounded_run *>(p);
		b->fn(b->arg);
		b->done.store(true);
		return nullptr;
	}
};

bool runs_within(closed_gate &g, void (*fn)(void *), void *arg, int ms)
{
	bounded_run b{ fn, arg };
	pthread_t th;
	REQUIRE(pthread_create(&th, nullptr, bounded_run::main, &b) == 0);
	for (int i = 0; i < ms && !b.done.load(); i++)
		usleep(1000);
	bool in_time = b.done.load();
	g.open();
	pthread_join(th, nullptr);
	return in_time;
}

constexpr int BOUND_MS = 5000;

} // namespace

TEST_CASE("a runtime scope swaps the record and restores it exactly", "[gate]")
{
	armed = false;
	REQUIRE(quiesce_runtime_depth() == 0);
	fase_enter();
	REQUIRE(fase_depth() == 1);
	unsigned busy = quiesce_busy_threads();
	{
		quiesce_scope s;
		quiesce_runtime_enter(&s);
		CHECK(quiesce_runtime_depth() == 1);
		CHECK(fase_depth() == 1);	// the application's depth
		fase_enter();			// a library's lock: on the private record
		fase_enter();
		CHECK(fase_depth() == 1);
		CHECK(quiesce_busy_threads() == busy);
		{
			quiesce_scope inner;
			quiesce_runtime_enter(&inner);
			CHECK(quiesce_runtime_depth() == 2);
			CHECK(fase_depth() == 1);
			quiesce_runtime_leave(&inner);
		}
		fase_leave();
		fase_leave();
		quiesce_runtime_leave(&s);
	}
	CHECK(quiesce_runtime_depth() == 0);
	CHECK(fase_depth() == 1);
	CHECK(quiesce_busy_threads() == busy);
	fase_leave();
	CHECK(fase_depth() == 0);
}

namespace {
void scoped_library_work(void *ok)
{
	quiesce_scope s;
	quiesce_runtime_enter(&s);
	*static_cast<bool *>(ok) = library_work();
	quiesce_runtime_leave(&s);
}
} // namespace

TEST_CASE("code in a runtime scope passes a closed gate", "[gate]")
{
	armed = true;
	bool ok = false;
	{
		closed_gate g;
		CHECK(runs_within(g, scoped_library_work, &ok, BOUND_MS));
	}
	armed = false;
	CHECK(ok);
}

TEST_CASE("an application thread's lock still waits at a closed gate", "[gate]")
{
	// The other side: the scope is what lets the runtime through, not a
	// gate that no longer closes.
	armed = true;
	{
		closed_gate g;
		CHECK_FALSE(runs_within(
			g, [](void *) { library_work(); }, nullptr, 300));
	}
	armed = false;
}

namespace {
struct internal_run {
	std::atomic<bool> done{ false };
	bool ok = false;
	unsigned depth_seen = 99;
};

void *internal_main(void *p)
{
	auto *r = static_cast<internal_run *>(p);
	r->ok = library_work();
	r->depth_seen = fase_depth();
	r->done.store(true);
	quiesce_internal_thread_done();
	return nullptr;
}

// The runtime's threads (the release thread, the log's replay helper, the
// lazy restorer) are all made by quiesce_create_internal_thread.
void start_internal(void *p)
{
	auto *r = static_cast<internal_run *>(p);
	pthread_t th;
	if (quiesce_create_internal_thread(&th, internal_main, r) != 0)
		return;
	while (!r->done.load())
		usleep(1000);
	quiesce_join_internal_thread(th, nullptr);
}
} // namespace

TEST_CASE("a runtime thread's locks, stdio and dlopen pass a closed gate", "[gate]")
{
	armed = true;
	internal_run r;
	{
		closed_gate g;
		CHECK(runs_within(g, start_internal, &r, BOUND_MS));
	}
	armed = false;
	CHECK(r.done.load());
	CHECK(r.ok);
	CHECK(r.depth_seen == 0);
}

namespace {
struct epoch_work {
	std::atomic<int> runs{ 0 };
	std::atomic<bool> ok{ true };
	std::atomic<int> busy_seen{ 0 };
};

// The epoch procedure itself (the statistics' writer, the persist step)
// runs with the gate closed.
void epoch_procedure(void *arg)
{
	auto *w = static_cast<epoch_work *>(arg);
	if (!library_work())
		w->ok = false;
	if (quiesce_busy_threads() != 0)
		w->busy_seen++;
	w->runs++;
}
} // namespace

TEST_CASE("the epoch procedure's locks, stdio and dlopen pass the gate it closed", "[gate]")
{
	armed = true;
	epoch_work w;
	REQUIRE(quiesce_start(1, epoch_procedure, &w) == 0);
	for (int i = 0; i < BOUND_MS && w.runs.load() < 3; i++)
		usleep(1000);
	quiesce_stop(false);
	armed = false;
	CHECK(w.runs.load() >= 3);
	CHECK(w.ok.load());
	CHECK(w.busy_seen.load() == 0);
}

// ---- the fault handler ----

namespace {
std::atomic<bool> hook_ok{ true };
std::atomic<int> hook_runs{ 0 };

// The tracker's write hook runs in the SIGSEGV handler: the FASE checker's
// report (libunwind) and, for certain, a library's lock, stdio and dlopen.
void handler_hook(void *addr, void *ucontext)
{
	fase_checker_on_write(addr, ucontext);
	if (!library_work())
		hook_ok = false;
	hook_runs++;
}

struct heap_write {
	char *page;
	std::atomic<bool> done{ false };
};

__attribute__((noinline)) void unlocked_store(void *p)
{
	auto *w = static_cast<heap_write *>(p);
	*(volatile char *)w->page = 1;	// no lock held: the checker reports it
}
} // namespace

TEST_CASE("the fault handler's report passes a closed gate", "[gate]")
{
	fault_signal_set_inside(startup_claim_inside);
	REQUIRE(fase_checker_init() == 0);
	const size_t ps = (size_t)sysconf(_SC_PAGESIZE), len = 64 * ps;
	void *base = mmap(nullptr, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	REQUIRE(base != MAP_FAILED);
	tracker *t = nullptr;
	REQUIRE(tracker_open(&t, TRACKER_MPROTECT, base, len) == 0);
	tracker_set_write_hook(handler_hook);
	fase_checker_stats before{}, after{};
	fase_checker_get_stats(&before);
	heap_write w;
	w.page = static_cast<char *>(base) + 3 * ps;
	armed = true;
	{
		closed_gate g;
		CHECK(runs_within(g, unlocked_store, &w, BOUND_MS));
	}
	armed = false;
	tracker_set_write_hook(nullptr);
	tracker_close(t);
	munmap(base, len);
	fase_checker_get_stats(&after);
	CHECK(hook_runs.load() == 1);
	CHECK(hook_ok.load());
	CHECK(after.unlocked_writes == before.unlocked_writes + 1);
	CHECK(after.sites_reported == before.sites_reported + 1);
}
