/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/quiesce: the gate, the epoch thread, abandonment, sync.
// The lock wrappers of preload/ are simulated here by calling fase_enter /
// fase_leave / fase_reenter around the real pthread functions.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" {
#include "quiesce/quiesce.h"
// prim/prim.h is C only (atomics, _Noreturn): the one function used here.
uint64_t prim_mapped_bytes(void);
}

namespace {
using clk = std::chrono::steady_clock;

uint64_t ms_since(clk::time_point t0)
{
	return (uint64_t)std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0)
		.count();
}

void lock(pthread_mutex_t *m)
{
	fase_enter();
	pthread_mutex_lock(m);
}

void unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
	fase_leave();
}

struct stats_delta {
	quiesce_stats before{};
	stats_delta() { quiesce_get_stats(&before); }
	quiesce_stats now() const
	{
		quiesce_stats s{};
		quiesce_get_stats(&s);
		s.epochs -= before.epochs;
		s.abandoned -= before.abandoned;
		return s;
	}
};

// Shared state of the invariant test: a[i] == b[i] for every i whenever no
// thread holds the locks.
struct invariant_state {
	pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_t chain[4] = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
				     PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER };
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	long a[4] = {}, b[4] = {};
	std::atomic<long> violations{ 0 }, busy_seen{ 0 }, callbacks{ 0 };
};

void check_invariant(void *arg)
{
	auto *s = static_cast<invariant_state *>(arg);
	s->callbacks++;
	if (quiesce_busy_threads() != 0)
		s->busy_seen++;
	for (int i = 0; i < 4; i++)
		if (s->a[i] != s->b[i])
			s->violations++;
}

void count_epoch(void *arg) { static_cast<std::atomic<long> *>(arg)->fetch_add(1); }
} // namespace

TEST_CASE("epochs happen only when no thread is inside a FASE", "[quiesce]")
{
	invariant_state s;
	stats_delta d;
	REQUIRE(quiesce_start(2, check_invariant, &s) == 0);
	std::atomic<bool> stop{ false };
	std::vector<std::thread> ts;
	for (int t = 0; t < 6; t++)
		ts.emplace_back([&, t] {
			quiesce_thread_start();
			unsigned long iter = 0;
			while (!stop.load(std::memory_order_relaxed)) {
				int i = (int)(iter++ % 4);
				switch (t % 3) {
				case 0: // nested: outer, then one of the chain
					lock(&s.outer);
					lock(&s.chain[i]);
					s.a[i]++;
					sched_yield();
					s.b[i]++;
					unlock(&s.chain[i]);
					unlock(&s.outer);
					break;
				case 1: // hand-over-hand along the chain, writing each
					lock(&s.chain[0]);
					for (int k = 0; k < 4; k++) {
						s.a[k]++;
						s.b[k]++;
						if (k + 1 < 4)
							lock(&s.chain[k + 1]);
						unlock(&s.chain[k]);
					}
					break;
				default: // trylock, writes under a write-locked rwlock too
					fase_enter();
					if (pthread_mutex_trylock(&s.chain[i]) == 0) {
						fase_enter();
						pthread_rwlock_wrlock(&s.rw);
						s.a[i]++;
						s.b[i]++;
						pthread_rwlock_unlock(&s.rw);
						fase_leave();
						unlock(&s.chain[i]);
					} else {
						fase_leave(); // a failed trylock does not count
					}
				}
			}
			quiesce_thread_exit();
		});
	// At least 400 ms and ten epochs under load; on a loaded machine the
	// epochs need more wall time, so wait for them (bounded) rather than
	// judge a fixed window.
	std::this_thread::sleep_for(std::chrono::milliseconds(400));
	for (int waited = 0; s.callbacks < 10 && waited < 100; waited++)
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	stop = true;
	for (auto &t : ts)
		t.join();
	quiesce_stop(true);
	CHECK(s.violations == 0);
	CHECK(s.busy_seen == 0);
	CHECK(s.callbacks >= 10);
	CHECK(d.now().epochs == (uint64_t)s.callbacks.load());
	CHECK(fase_depth() == 0);
	long total = 0;
	for (int i = 0; i < 4; i++) {
		CHECK(s.a[i] == s.b[i]);
		total += s.a[i];
	}
	CHECK(total > 0);
}

TEST_CASE("threads blocked outside FASEs never delay an epoch", "[quiesce]")
{
	std::atomic<long> n{ 0 };
	stats_delta d;
	int p[2];
	REQUIRE(pipe(p) == 0);
	std::atomic<long> got{ -1 }; // Catch's assertions are not thread-safe
	std::thread reader([&] {
		quiesce_thread_start();
		char c;
		got = read(p[0], &c, 1); // parked for the whole test
		quiesce_thread_exit();
	});
	REQUIRE(quiesce_start(10, count_epoch, &n) == 0);
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	quiesce_stop(false);
	CHECK(n >= 15); // ~30 due; generous for a loaded machine
	CHECK(d.now().abandoned == 0);
	REQUIRE(write(p[1], "x", 1) == 1);
	reader.join();
	CHECK(got == 1);
	close(p[0]);
	close(p[1]);
}

TEST_CASE("a condition wait under a second lock does not deadlock", "[quiesce]")
{
	std::atomic<long> n{ 0 };
	stats_delta d;
	pthread_mutex_t l1 = PTHREAD_MUTEX_INITIALIZER, l2 = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	bool flag = false;
	REQUIRE(quiesce_start(5, count_epoch, &n) == 0);
	auto t0 = clk::now();
	std::thread waiter([&] {
		lock(&l2);
		lock(&l1);
		while (!flag) {
			fase_leave();
			pthread_cond_wait(&cv, &l1);
			fase_reenter();
		}
		unlock(&l1);
		unlock(&l2);
	});
	std::thread signaller([&] {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		lock(&l1); // waits at the gate while the waiter holds l2
		flag = true;
		pthread_cond_signal(&cv);
		unlock(&l1);
	});
	signaller.join();
	waiter.join();
	CHECK(ms_since(t0) < 2000);
	long before = n;
	// Epochs resume once the lock is released: within a few intervals on
	// an idle machine; the bound leaves room for a loaded one.
	for (int i = 0; i < 400 && n <= before; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(5));
	quiesce_stop(false);
	CHECK(d.now().abandoned >= 1);
	CHECK(n > before);
}

TEST_CASE("a reentry does not wait for an epoch that has not started", "[quiesce]")
{
	std::atomic<long> n{ 0 };
	stats_delta d;
	REQUIRE(quiesce_start(1000, count_epoch, &n) == 0);
	std::atomic<int> phase{ 0 };
	std::thread holder([&] {
		fase_enter(); // holds a "lock" so the epoch stays CLOSING
		phase = 1;
		while (phase != 2)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		fase_leave();
	});
	while (phase != 1)
		std::this_thread::yield();
	std::atomic<int> synced{ -2 };
	std::thread syncer([&] { synced = quiesce_sync(); });
	std::this_thread::sleep_for(std::chrono::milliseconds(5)); // gate closing
	auto t0 = clk::now();
	fase_reenter();
	uint64_t waited = ms_since(t0);
	CHECK(fase_depth() == 1);
	CHECK(waited < 15); // well under the 20 ms bound
	fase_leave();
	phase = 2;
	holder.join();
	syncer.join();
	quiesce_stop(false);
	CHECK(synced == 0);
	CHECK(n >= 1);
	(void)d;
}

namespace {
std::atomic<int> in_epoch{ 0 };
void slow_epoch(void *)
{
	in_epoch = 1;
	std::this_thread::sleep_for(std::chrono::milliseconds(60));
	in_epoch = 0;
}
} // namespace

TEST_CASE("a reentry waits while an epoch procedure runs", "[quiesce]")
{
	in_epoch = 0;
	REQUIRE(quiesce_start(1000, slow_epoch, nullptr) == 0);
	std::atomic<int> synced{ -2 }, synced2{ -2 };
	std::thread syncer([&] { synced = quiesce_sync(); });
	while (in_epoch == 0)
		std::this_thread::yield();
	fase_reenter();
	CHECK(in_epoch == 0);
	fase_leave();
	syncer.join();
	// An ordinary first lock waits too.
	std::thread syncer2([&] { synced2 = quiesce_sync(); });
	while (in_epoch == 0)
		std::this_thread::yield();
	fase_enter();
	CHECK(in_epoch == 0);
	fase_leave();
	syncer2.join();
	quiesce_stop(false);
	CHECK(synced == 0);
	CHECK(synced2 == 0);
}

TEST_CASE("passing the gate waits out an epoch and holds no level", "[quiesce]")
{
	// fase_pass_gate: the wait before an OpenMP ordered turn.
	in_epoch = 0;
	REQUIRE(quiesce_start(1000, slow_epoch, nullptr) == 0);
	REQUIRE(fase_depth() == 0);
	fase_pass_gate(); // gate open: passes at once
	CHECK(fase_depth() == 0);
	CHECK(quiesce_sync() == 0); // and is outside any FASE
	std::atomic<int> synced{ -2 };
	std::thread syncer([&] { synced = quiesce_sync(); });
	while (in_epoch == 0)
		std::this_thread::yield();
	fase_pass_gate();
	CHECK(in_epoch == 0); // waited for the procedure
	CHECK(fase_depth() == 0);
	syncer.join();
	// Inside a FASE it neither waits nor changes the depth.
	fase_enter();
	std::thread syncer2([&] { quiesce_sync(); });
	fase_pass_gate();
	CHECK(fase_depth() == 1);
	fase_leave();
	syncer2.join();
	quiesce_stop(false);
	CHECK(synced == 0);
}

TEST_CASE("quiesce_sync", "[quiesce]")
{
	std::atomic<long> n{ 0 };
	SECTION("fails with EDEADLK inside a FASE")
	{
		REQUIRE(quiesce_start(1000, count_epoch, &n) == 0);
		fase_enter();
		errno = 0;
		CHECK(quiesce_sync() == -1);
		CHECK(errno == EDEADLK);
		fase_leave();
		quiesce_stop(false);
	}
	SECTION("forces an epoch long before the interval")
	{
		REQUIRE(quiesce_start(10000, count_epoch, &n) == 0);
		auto t0 = clk::now();
		for (int i = 0; i < 5; i++) {
			long before = n;
			REQUIRE(quiesce_sync() == 0);
			CHECK(n > before);
		}
		CHECK(ms_since(t0) < 1000);
		quiesce_stop(false);
	}
	SECTION("fails with ESRCH without an epoch thread")
	{
		errno = 0;
		CHECK(quiesce_sync() == -1);
		CHECK(errno == ESRCH);
	}
}

// The procedure sees whether anyone waits for its epoch: the pipeline copies
// an awaited batch whole rather than risk carrying it over (epoch.h).
struct awaited_seen {
	std::atomic<long> yes{ 0 }, no{ 0 };
};

void note_awaited(void *arg)
{
	auto *a = static_cast<awaited_seen *>(arg);
	(quiesce_epoch_awaited() ? a->yes : a->no)++;
}

TEST_CASE("an epoch is awaited only when a sync or a demand waits for it", "[quiesce]")
{
	awaited_seen a;
	// Periodic epochs: nobody waits.
	REQUIRE(quiesce_start(2, note_awaited, &a) == 0);
	auto t0 = clk::now();
	while (a.no < 3 && ms_since(t0) < 10000)
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
	quiesce_stop(false);
	CHECK(a.no >= 3);
	CHECK(a.yes == 0);
	// With a long interval, every epoch comes from a sync or a demand.
	a.no = 0;
	REQUIRE(quiesce_start(100000, note_awaited, &a) == 0);
	for (int i = 0; i < 5; i++)
		REQUIRE(quiesce_sync() == 0);
	CHECK(a.yes >= 5);
	long yes = a.yes;
	quiesce_request_epoch();
	t0 = clk::now();
	while (a.yes == yes && ms_since(t0) < 10000)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	CHECK(a.yes > yes);
	quiesce_stop(false);
	CHECK(a.no == 0);
	CHECK_FALSE(quiesce_epoch_awaited());
}

TEST_CASE("a thread exiting inside a FASE does not stall epochs", "[quiesce]")
{
	std::atomic<long> n{ 0 };
	stats_delta d;
	unsigned regs = quiesce_registered_threads();
	REQUIRE(quiesce_start(5, count_epoch, &n) == 0);
	std::thread([] {
		fase_enter();
		quiesce_thread_exit();
	}).join();
	CHECK(quiesce_registered_threads() == regs);
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	quiesce_stop(false);
	CHECK(d.now().abandoned == 0);
	CHECK(n >= 5);
}

TEST_CASE("records are reused by short-lived threads", "[quiesce]")
{
	unsigned regs = quiesce_registered_threads();
	for (int i = 0; i < 600; i++)
		std::thread([] {
			fase_enter();
			fase_leave();
			quiesce_thread_exit();
		}).join();
	CHECK(quiesce_registered_threads() == regs);
}

TEST_CASE("start replaces the procedure; stop runs a final epoch", "[quiesce]")
{
	std::atomic<long> a{ 0 }, b{ 0 };
	REQUIRE(quiesce_start(10000, count_epoch, &a) == 0);
	REQUIRE(quiesce_sync() == 0);
	CHECK(a == 1);
	REQUIRE(quiesce_start(10000, count_epoch, &b) == 0);
	CHECK(quiesce_running());
	REQUIRE(quiesce_sync() == 0);
	CHECK(a == 1);
	CHECK(b == 1);
	quiesce_stop(true);
	CHECK(b == 2);
	CHECK_FALSE(quiesce_running());
	CHECK(quiesce_start(0, count_epoch, &a) == -1);
}

TEST_CASE("pause statistics are consistent", "[quiesce]")
{
	std::atomic<long> n{ 0 };
	REQUIRE(quiesce_start(1000, count_epoch, &n) == 0);
	for (int i = 0; i < 20; i++)
		REQUIRE(quiesce_sync() == 0);
	quiesce_stop(false);
	quiesce_stats s{};
	quiesce_get_stats(&s);
	CHECK(s.epochs >= 20);
	CHECK(s.syncs >= 20);
	CHECK(s.pause_ns_p50 > 0);
	CHECK(s.pause_ns_p50 <= s.pause_ns_p99);
	CHECK(s.pause_ns_p99 <= s.pause_ns_max);
	CHECK(s.pause_ns_max <= s.pause_ns_total);
	CHECK(s.membarrier); // kernel 6.18 has it
}

// The runtime's own threads run on stacks of its own memory, so that the
// memory limits leave them out of the program's share (memory_limits.h):
// counted while the thread lives, given back when it is joined.
static std::atomic<bool> stack_thread_go{ false };
static void *stack_thread(void *)
{
	volatile unsigned char deep[64 << 10];	// a real frame, on that stack
	deep[0] = 1;
	while (!stack_thread_go.load())
		usleep(1000);
	quiesce_internal_thread_done();
	return (void *)(uintptr_t)deep[0];
}

TEST_CASE("an internal thread's stack is the runtime's memory until it is joined", "[quiesce]")
{
	uint64_t before = prim_mapped_bytes();
	pthread_t th;
	stack_thread_go = false;
	REQUIRE(quiesce_create_internal_thread(&th, stack_thread, nullptr) == 0);
	uint64_t during = prim_mapped_bytes();
	CHECK(during >= before + (8u << 20));
	stack_thread_go = true;
	void *ret = nullptr;
	REQUIRE(quiesce_join_internal_thread(th, &ret) == 0);
	CHECK(ret == (void *)1);
	CHECK(prim_mapped_bytes() == before);
}

// The epoch thread's schedule (lib/quiesce/epoch_loop.c): what a late, a
// carried-over and a blocked attempt do to when the next one is due.
namespace {
struct schedule_probe {
	unsigned after_ms = 0;	// each write-back's length
	int carry = 0;		// how many of the first write-backs are carried over
	std::atomic<int> afters{ 0 };
	std::mutex m;
	std::vector<clk::time_point> points;	// each quiescent point
};

void probe_point(void *arg)
{
	auto *p = static_cast<schedule_probe *>(arg);
	std::lock_guard<std::mutex> g(p->m);
	p->points.push_back(clk::now());
}

quiesce_outcome probe_after(void *arg)
{
	auto *p = static_cast<schedule_probe *>(arg);
	if (p->after_ms != 0)
		std::this_thread::sleep_for(std::chrono::milliseconds(p->after_ms));
	return p->afters++ < p->carry ? QUIESCE_CARRIED : QUIESCE_DURABLE;
}

size_t probe_points(schedule_probe &p)
{
	std::lock_guard<std::mutex> g(p.m);
	return p.points.size();
}

uint64_t ms_between(clk::time_point a, clk::time_point b)
{
	return (uint64_t)std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}
} // namespace

TEST_CASE("a write-back that overruns the interval makes the next epoch late", "[quiesce]")
{
	// 10 ms interval, 30 ms write-backs: every epoch after the first is
	// due before its predecessor's write-back ends, so it starts at once
	// and is counted late.
	schedule_probe p;
	p.after_ms = 30;
	quiesce_stats before{}, after{};
	quiesce_get_stats(&before);
	REQUIRE(quiesce_start_split(10, probe_point, probe_after, &p) == 0);
	for (int i = 0; i < 500 && probe_points(p) < 6; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	quiesce_stop(false);
	quiesce_get_stats(&after);
	uint64_t epochs = after.epochs - before.epochs, late = after.late_epochs - before.late_epochs;
	REQUIRE(epochs >= 6);
	CHECK(late + 1 >= epochs);
	CHECK(after.late_ns_total > before.late_ns_total);
}

TEST_CASE("a carried-over epoch is completed at once and keeps the period", "[quiesce]")
{
	// 1 s interval; the first write-back is carried over: its retry comes
	// at once, not an interval later, and the epoch after it is due one
	// interval after the first, not at once again.
	schedule_probe p;
	p.carry = 1;
	REQUIRE(quiesce_start_split(1000, probe_point, probe_after, &p) == 0);
	for (int i = 0; i < 1000 && probe_points(p) < 3; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	quiesce_stop(false);
	std::lock_guard<std::mutex> g(p.m);
	REQUIRE(p.points.size() >= 3);
	CHECK(ms_between(p.points[0], p.points[1]) < 500);
	CHECK(ms_between(p.points[0], p.points[2]) >= 900);
}

TEST_CASE("a FASE that blocked an attempt defers the next ones instead of blocking them too", "[quiesce]")
{
	// 10 ms interval (a 20 ms bound); a lock held for 400 ms: one attempt
	// is abandoned, the ones due while the lock stays held are deferred
	// (one an interval) and close no gate.
	std::atomic<long> n{ 0 };
	quiesce_stats before{}, after{};
	quiesce_get_stats(&before);
	pthread_mutex_t l = PTHREAD_MUTEX_INITIALIZER;
	std::atomic<bool> holding{ false };
	REQUIRE(quiesce_start(10, count_epoch, &n) == 0);
	std::thread holder([&] {
		lock(&l);
		holding = true;
		std::this_thread::sleep_for(std::chrono::milliseconds(400));
		unlock(&l);
	});
	holder.join();
	long at_release = n;
	for (int i = 0; i < 400 && n <= at_release; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(5));
	quiesce_stop(false);
	quiesce_get_stats(&after);
	CHECK(holding);
	uint64_t abandoned = after.abandoned - before.abandoned;
	CHECK(abandoned >= 1);
	CHECK(abandoned <= 2);
	CHECK(after.attempts_deferred - before.attempts_deferred >= 5);
	CHECK(n > at_release);
}
