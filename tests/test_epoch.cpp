/* SPDX-License-Identifier: BSD-3-Clause */
// The epoch pipeline (lib/epoch/epoch.c): the pause collects (and copies the
// hot pages), the write-back reads the other pages live after the program
// runs again, and an attempt during which the program wrote a page it read
// live is carried over, never published.  A published epoch is always the
// heap as it was at its quiescent point; nothing ever write-protects a live
// page for the write-back's sake.
#include "pool_test_util.h"
#include "uffd_half.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>

extern "C" {
#include "epoch/epoch.h"
#include "persist/nvm.h"
#include "persist/nvm_log_test.h"
#include "persist/nvm_sim_test.h"
#include "track/tracker.h"
}

using namespace pooltest;

namespace {

const uint64_t kPages = 96;

struct tracker_case {
	const char *name;
	tracker_kind kind;
	bool copy_in_pause;
};

// This half's trackers (uffd_half.h): the epoch-uffd test runs the uffd
// ones, and meson skips it where uffd tracking is unsupported.
std::vector<tracker_case> cases()
{
	if (uffd_half())
		return { { "uffd", TRACKER_UFFD, false }, { "uffd, copy in pause", TRACKER_UFFD, true } };
	return { { "mprotect", TRACKER_MPROTECT, false },
		 { "mprotect, copy in pause", TRACKER_MPROTECT, true } };
}

// A pool, its heap at the recorded address, a tracker and a pipeline.
struct rig {
	pool *p = nullptr;
	unsigned char *heap = nullptr;
	size_t len = 0;
	tracker *t = nullptr;
	epoch_pipeline *ep = nullptr;

	rig(const std::string &path, const tracker_case &c, nvm_kind nvm = NVM_MSYNC,
	    const nvm_sim_options *sim = nullptr, bool create = true, unsigned latency_ns = 0,
	    unsigned copy_budget = 0, unsigned tracker_flags = TRACKER_OPEN_EXACT)
	{
		auto o = options(path, kPages);
		o.nvm = nvm;
		o.latency_ns = latency_ns;
		o.sim = sim;
		o.create = create;
		p = open_or_fail(o);
		len = kPages * page_size();
		heap = (unsigned char *)shadow_reserve(p->shadow_base, len);
		REQUIRE(heap != nullptr);
		if (!p->created)
			recovery_restore_image(p, heap);
		INFO(err_get());
		// Exact unless asked: the cases count the pages of each batch.
		REQUIRE(tracker_open_flags(&t, c.kind, heap, len, tracker_flags) == 0);
		epoch_options eo{};
		eo.copy_in_pause = c.copy_in_pause;
		eo.copy_budget = copy_budget;
		REQUIRE(epoch_pipeline_open(&ep, p, t, heap, nullptr, &eo) == 0);
	}
	~rig()
	{
		epoch_pipeline_close(ep);
		tracker_close(t);
		shadow_release(heap, len);
		pool_close(p);
	}
	unsigned char *page(uint64_t i) { return heap + i * page_size(); }
	bool epoch(epoch_result *r = nullptr)
	{
		epoch_batch *b = epoch_pause(ep, false);
		return epoch_writeback(ep, b, r);
	}
	std::vector<unsigned char> snapshot() { return { heap, heap + len }; }
	// The pool's consistent image of the whole heap.
	std::vector<unsigned char> durable_all()
	{
		std::vector<unsigned char> v(len);
		for (uint64_t i = 0; i < kPages; i++)
			recovery_read_page(p, i, v.data() + i * page_size());
		return v;
	}
	// The pool's consistent image of page i.
	std::vector<unsigned char> durable(uint64_t i)
	{
		std::vector<unsigned char> v(page_size());
		recovery_read_page(p, i, v.data());
		return v;
	}
};

void fill(unsigned char *pg, unsigned char v) { memset(pg, v, page_size()); }

bool all_bytes(const std::vector<unsigned char> &v, unsigned char b)
{
	for (unsigned char c : v)
		if (c != b)
			return false;
	return true;
}

// A crash sweep.  The base pool holds pages 0-39 as 'O' (VER_d 1).  Then
// scenario runs on a copy of it in a fork child, under the persistence
// simulator crashing after k primitives, on a rig opened with
// tracker_flags; it returns 0, or an exit status >= 250 saying what went
// wrong.  Once without a crash (it counts the primitives), then a crash after
// each of them.  After each crash the pool must pass pool_check, its VER_d
// be at most max_ver, and each page i of the recovered image hold only
// want(i, VER_d).  Returns how many crash points recovered each VER_d.
std::vector<unsigned> crash_sweep(const tracker_case &c, unsigned seed, unsigned tracker_flags,
				  const std::function<int(rig &)> &scenario, uint64_t max_ver,
				  const std::function<unsigned char(uint64_t, uint64_t)> &want,
				  nvm_kind kind = NVM_SIM)
{
	scratch_dir d;
	std::string base = d.file("base"), work = d.file("work");
	{
		rig r(base, c);
		for (uint64_t i = 0; i < 40; i++)
			fill(r.page(i), 'O');
		REQUIRE(r.epoch());
	}
	auto child = [&](uint64_t crash_after) {
		copy_file(base, work);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			nvm_sim_options so{};
			so.seed = seed;
			so.survival = NVM_SIM_RANDOM;
			so.crash_after = crash_after;
			rig r(work, c, kind, &so, false, 0, 0, tracker_flags);
			pool_set_clean(r.p, false);	// in use, as the runtime marks it
			int failed = scenario(r);
			if (failed != 0)
				_exit(failed);
			uint64_t prims = kind == NVM_LOG ? nvm_log_primitives(r.p->nvm)
							 : nvm_sim_primitives(r.p->nvm);
			_exit(prims > 249 ? 249 : (int)prims);
		}
		int st = 0;
		REQUIRE(waitpid(pid, &st, 0) == pid);
		return st;
	};
	int st = child(0);
	REQUIRE(WIFEXITED(st));
	uint64_t total = (uint64_t)WEXITSTATUS(st);
	REQUIRE(total > (kind == NVM_LOG ? 3 : 6));
	REQUIRE(total < 249);
	std::vector<unsigned> seen(max_ver + 1);
	for (uint64_t k = 1; k <= total; k++) {
		(void)child(k);
		auto o = options(work, kPages);
		o.create = false;
		pool *p = open_or_fail(o);
		std::string why;
		unsigned problems = pool_check(
			p, [](const char *m, void *a) { *(std::string *)a += std::string(m) + "; "; }, &why);
		INFO("crash after " << k << ": pool_check before recovery: " << why);
		REQUIRE(problems == 0);
		std::vector<unsigned char> img(kPages * page_size());
		recovery_restore_image(p, img.data());
		uint64_t v = *p->ver_d;
		pool_close(p);
		INFO("crash after " << k << " of " << total << ", VER_d " << v);
		REQUIRE(v >= 1);
		REQUIRE(v <= max_ver);
		seen[v]++;
		for (uint64_t i = 0; i < kPages; i++) {
			std::vector<unsigned char> pg(img.begin() + i * page_size(),
						      img.begin() + (i + 1) * page_size());
			INFO("page " << i);
			REQUIRE(all_bytes(pg, want(i, v)));
		}
	}
	return seen;
}

} // namespace

TEST_CASE("writes after the pause are never published by it: the attempt is carried over",
	  "[epoch][trackers]")
{
	for (const auto &c : cases()) {
		SECTION(c.name)
		{
			scratch_dir d;
			rig r(d.file("pool"), c);
			// Epoch 1: pages 0..63 hold 'A'.
			for (uint64_t i = 0; i < 64; i++)
				fill(r.page(i), 'A');
			epoch_batch *b = epoch_pause(r.ep, false);
			REQUIRE(b->n == 64);
			// Nothing is hot yet: only the whole-batch mode copies,
			// else the tail of the run of dirty pages (48..63).
			const unsigned live = 64 - EPOCH_RUN_TAIL;
			CHECK(b->nslots == (c.copy_in_pause ? 64u : EPOCH_RUN_TAIL));
			// The program runs again before the write-back: it
			// overwrites every other page and a page outside the
			// batch.
			for (uint64_t i = 0; i < 64; i += 2)
				fill(r.page(i), 'B');
			fill(r.page(80), 'C');
			epoch_result res{};
			bool durable = epoch_writeback(r.ep, b, &res);
			CHECK(res.pages == 64);
			CHECK(durable == c.copy_in_pause);
			CHECK(res.durable == durable);
			if (c.copy_in_pause) {
				CHECK(res.conflicts == 0);
				CHECK(*r.p->ver_d == 1);
				for (uint64_t i = 0; i < 64; i++) {
					INFO("page " << i);
					CHECK(all_bytes(r.durable(i), 'A'));
				}
			} else {
				// Read live, written meanwhile: never published.
				CHECK(res.conflicts == live / 2);
				CHECK(*r.p->ver_d == 0);
				for (uint64_t i = 0; i < 64; i++)
					CHECK(all_bytes(r.durable(i), 0));
			}
			CHECK(all_bytes(r.durable(80), 0));
			// Epoch 2 takes the later writes; a retry copies its
			// whole (small) batch inside the pause.
			b = epoch_pause(r.ep, false);
			CHECK(b->n == 33);
			CHECK(b->nslots == 33);
			durable = epoch_writeback(r.ep, b, &res);
			CHECK(durable);
			CHECK(*r.p->ver_d == (c.copy_in_pause ? 2u : 1u));
			for (uint64_t i = 0; i < 64; i++) {
				INFO("page " << i);
				CHECK(all_bytes(r.durable(i), i % 2 == 0 ? 'B' : 'A'));
			}
			CHECK(all_bytes(r.durable(80), 'C'));
			// Nothing dirty: an empty epoch, durable as it is.
			CHECK(r.epoch(&res));
			CHECK(res.pages == 0);
			epoch_counters ec{};
			epoch_get_counters(r.ep, &ec);
			CHECK(ec.carried_epochs == (c.copy_in_pause ? 0u : 1u));
			CHECK(ec.conflict_pages == (c.copy_in_pause ? 0u : live / 2));
		}
	}
}

TEST_CASE("an awaited pause copies its batch: writes after it cannot carry the attempt over",
	  "[epoch][trackers]")
{
	for (const auto &c : cases()) {
		if (c.copy_in_pause)
			continue; // copies every batch anyway
		SECTION(c.name)
		{
			scratch_dir d;
			rig r(d.file("pool"), c);
			for (uint64_t i = 0; i < 64; i++)
				fill(r.page(i), 'A');
			// A sync or held output waits for this epoch.
			epoch_note_awaited(r.ep);
			epoch_batch *b = epoch_pause(r.ep, false);
			REQUIRE(b->n == 64);
			CHECK(b->nslots == 64);
			// As in the case above, the program overwrites every
			// other page before the write-back: here no conflict.
			for (uint64_t i = 0; i < 64; i += 2)
				fill(r.page(i), 'B');
			epoch_result res{};
			CHECK(epoch_writeback(r.ep, b, &res));
			CHECK(res.conflicts == 0);
			CHECK(*r.p->ver_d == 1);
			for (uint64_t i = 0; i < 64; i++) {
				INFO("page " << i);
				CHECK(all_bytes(r.durable(i), 'A'));
			}
			// Only that pause: the next one, over pages never
			// written before (not hot), copies the run's tail only.
			for (uint64_t i = 0; i < 64; i += 2)
				fill(r.page(i), 'A'); // back to what is durable
			CHECK(r.epoch(&res));
			fill(r.page(64), 'D');
			for (uint64_t i = 65; i < 96; i++)
				fill(r.page(i), 'D');
			b = epoch_pause(r.ep, false);
			CHECK(b->n == 32);
			CHECK(b->nslots == EPOCH_RUN_TAIL);
			CHECK(epoch_writeback(r.ep, b, &res));
			epoch_counters ec{};
			epoch_get_counters(r.ep, &ec);
			CHECK(ec.awaited_epochs == 1);
			CHECK(ec.carried_epochs == 0);
		}
	}
}

TEST_CASE("attempts carried over in a row end with the whole batch copied in the pause",
	  "[epoch][trackers]")
{
	for (const auto &c : cases()) {
		if (c.copy_in_pause)
			continue;
		SECTION(c.name)
		{
			scratch_dir d;
			// A budget of 2 pages (4 to 8 in retries) that the rounds
			// overrun.
			rig r(d.file("pool"), c, NVM_MSYNC, nullptr, true, 0, 2);
			// Each round writes 9 pages nothing made hot yet, then
			// writes them again after the pause: conflicts.
			for (unsigned round = 0; round < EPOCH_CARRY_MAX; round++) {
				for (uint64_t i = 10 * round; i < 10 * round + 9; i++)
					fill(r.page(i), (unsigned char)('a' + round));
				epoch_batch *b = epoch_pause(r.ep, false);
				CHECK(b->nslots <= 2u * EPOCH_COPY_BUDGET_GROWTH);
				for (uint64_t i = 10 * round; i < 10 * round + 9; i++)
					r.page(i)[7] = 'X';
				epoch_result res{};
				INFO("round " << round);
				CHECK(!epoch_writeback(r.ep, b, &res));
				CHECK(res.conflicts > 0);
				CHECK(*r.p->ver_d == 0);
			}
			// The next pause copies all, so the same race cannot stop
			// it: published, with the heap as it was at that pause.
			fill(r.page(90), 'z');
			epoch_batch *b = epoch_pause(r.ep, false);
			CHECK(b->nslots == b->n);
			CHECK(b->n > 8);
			auto at_pause = r.snapshot();
			fill(r.page(90), 'Y');
			epoch_result res{};
			CHECK(epoch_writeback(r.ep, b, &res));
			CHECK(*r.p->ver_d == 1);
			CHECK(r.durable_all() == at_pause);
			epoch_counters ec{};
			epoch_get_counters(r.ep, &ec);
			CHECK(ec.paused_epochs == 1);
			CHECK(ec.carried_epochs == EPOCH_CARRY_MAX);
			// And the budget is back to its first size.
			for (uint64_t i = 0; i < kPages; i++)
				fill(r.page(i), 'w');
			b = epoch_pause(r.ep, false);
			CHECK(b->nslots <= 2);
			CHECK(epoch_writeback(r.ep, b, &res));
			CHECK(r.durable_all() == r.snapshot());
		}
	}
}

// Writers racing the write-back: after each write-back the pool holds either
// the heap as it was at that pause (published) or the last published image
// (carried over) -- never a page with a later write.
static void race_rounds(rig &r, int rounds, int writers, bool clusters)
{
	auto last_durable = r.durable_all();
	unsigned published = 0;
	for (int round = 0; round < rounds; round++) {
		unsigned char gen = (unsigned char)('a' + round);
		for (uint64_t i = 0; i < kPages; i += 1 + (uint64_t)round % 3)
			fill(r.page(i), gen);
		epoch_batch *b = epoch_pause(r.ep, false);
		auto at_pause = r.snapshot();
		std::atomic<int> ready{ 0 };
		std::atomic<bool> go{ false }, done{ false };
		auto writer = [&](unsigned seed) {
			std::mt19937 rng(seed);
			ready++;
			while (!go.load())
				;
			for (int k = 0; clusters ? !done.load() : k < 200; k++) {
				uint64_t first = rng() % kPages;
				uint64_t n = clusters ? 1 + rng() % 6 : 1;
				for (uint64_t i = first; i < first + n && i < kPages; i++)
					// Atomic: two writers may pick one byte.
					__atomic_store_n(&r.page(i)[rng() % page_size()],
							 (unsigned char)'Z', __ATOMIC_RELAXED);
			}
		};
		std::vector<std::thread> ws;
		for (int w = 0; w < writers; w++)
			ws.emplace_back(writer, (unsigned)(writers * round + w));
		while (ready.load() < writers)
			;
		go.store(true);
		epoch_result res{};
		bool durable = epoch_writeback(r.ep, b, &res);
		done.store(true);
		for (auto &t : ws)
			t.join();
		INFO("round " << round << (durable ? " published" : " carried over"));
		auto now = r.durable_all();
		if (durable) {
			REQUIRE(now == at_pause);
			last_durable = now;
			published++;
		} else {
			REQUIRE(res.conflicts > 0);
			REQUIRE(now == last_durable);
		}
	}
	// Quiet epochs: the pool catches up with the heap within
	// EPOCH_CARRY_MAX + 1 of them.
	bool durable = false;
	for (int k = 0; k <= EPOCH_CARRY_MAX && !durable; k++)
		durable = r.epoch();
	REQUIRE(durable);
	REQUIRE(r.durable_all() == r.snapshot());
	WARN(published << " of " << rounds << " racing write-backs published");
}

TEST_CASE("a writer racing the write-back never leaks into a published epoch",
	  "[epoch][race][trackers]")
{
	for (const auto &c : cases()) {
		SECTION(c.name)
		{
			scratch_dir d;
			rig r(d.file("pool"), c);
			race_rounds(r, 20, 1, false);
		}
	}
}

TEST_CASE("writers racing a slow write-back in clusters of pages never leak into it",
	  "[epoch][race][trackers]")
{
	for (const auto &c : cases()) {
		SECTION(c.name)
		{
			scratch_dir d;
			// A slow NVM (2 us per line written): each write-back
			// takes long enough for both writers to hit pages it has
			// read and pages it has not read yet.
			rig r(d.file("pool"), c, NVM_MSYNC, nullptr, true, 2000);
			race_rounds(r, 8, 2, true);
		}
	}
}

TEST_CASE("a system call writing a page of the batch is only a write", "[epoch][trackers]")
{
	for (const auto &c : cases()) {
		SECTION(c.name)
		{
			scratch_dir d;
			rig r(d.file("pool"), c);
			fill(r.page(5), 'A');
			epoch_batch *b = epoch_pause(r.ep, false);
			REQUIRE(b->n == 1);
			int fds[2];
			REQUIRE(pipe(fds) == 0);
			REQUIRE(write(fds[1], "kernel", 6) == 6);
			// The mprotect tracker's own protection makes the kernel's
			// write fail unless prefaulted (preload/syscalls.c does
			// that); with uffd nothing is protected for the
			// write-back, so the kernel's write just works.
			if (c.kind == TRACKER_MPROTECT)
				tracker_prefault(r.page(5) + 100, 6);
			CHECK(read(fds[0], r.page(5) + 100, 6) == 6);
			close(fds[0]);
			close(fds[1]);
			bool durable = epoch_writeback(r.ep, b, nullptr);
			CHECK(durable == c.copy_in_pause);
			if (durable)
				CHECK(all_bytes(r.durable(5), 'A'));
			else
				CHECK(all_bytes(r.durable(5), 0));
			CHECK(r.epoch());
			CHECK(memcmp(r.durable(5).data() + 100, "kernel", 6) == 0);
		}
	}
}

TEST_CASE("the pause copies only hot pages: its cost does not follow the dirty pages",
	  "[epoch][trackers]")
{
	// Not a timing test: it checks the mechanism.  A quiet epoch copies
	// nothing in the pause and faults nothing; only pages written during
	// a write-back become hot, and stop being hot after EPOCH_HOT_EPOCHS
	// quiet write-backs.
	for (const auto &c : cases()) {
		if (c.copy_in_pause)
			continue;
		SECTION(c.name)
		{
			scratch_dir d;
			rig r(d.file("pool"), c);
			for (uint64_t i = 0; i < kPages; i++)
				fill(r.page(i), 'q');
			tracker_stats st;
			tracker_get_stats(r.t, &st);
			uint64_t faults0 = st.faults;
			epoch_result res{};
			CHECK(r.epoch(&res));
			CHECK(res.pages == kPages);
			// One run of dirty pages: its tail only.
			CHECK(res.pages_saved == EPOCH_RUN_TAIL);
			// The write-back itself takes no fault.
			if (c.kind == TRACKER_MPROTECT) {
				tracker_get_stats(r.t, &st);
				CHECK(st.faults == faults0);
			}
			epoch_counters ec{};
			epoch_get_counters(r.ep, &ec);
			CHECK(ec.paused_epochs == 0);
			CHECK(ec.slot_bytes_resident == EPOCH_RUN_TAIL * page_size());
			// Page 3 written during a write-back: hot.
			fill(r.page(3), 'h');
			epoch_batch *b = epoch_pause(r.ep, false);
			fill(r.page(3), 'i');
			CHECK(!epoch_writeback(r.ep, b, &res));
			for (int e = 0; e < EPOCH_HOT_EPOCHS; e++) {
				fill(r.page(3), (unsigned char)('j' + e));
				fill(r.page(40), (unsigned char)('j' + e));
				CHECK(r.epoch(&res));
				INFO("quiet write-back " << e);
				CHECK(res.pages == 2);
				// page 3, not 40 -- but the first is a retry (of the
				// carried-over write-back), which copies its batch
				CHECK(res.pages_saved == (e == 0 ? 2u : 1u));
			}
			fill(r.page(3), 'x');
			CHECK(r.epoch(&res));
			CHECK(res.pages_saved == 0);	// cooled down
		}
	}
}

TEST_CASE("a hot page still holding its durable bytes is left out of the epoch; changed, it is persisted",
	  "[epoch][trackers]")
{
	// The mprotect backend keeps page 5 writable (hot) and reports it at
	// every collection; the pause compares it with its durable copy.  The
	// uffd backend reports it only when written.
	for (const auto &c : cases()) {
		SECTION(c.name)
		{
			scratch_dir d;
			rig r(d.file("pool"), c, NVM_MSYNC, nullptr, true, 0, 0,
			      TRACKER_OPEN_HOT_AT_ANY_RATE);
			const bool hot = c.kind == TRACKER_MPROTECT;
			epoch_result res{};
			fill(r.page(5), 'a');
			REQUIRE(r.epoch(&res));
			fill(r.page(5), 'b');
			// The collection that makes it hot leaves it writable
			// but does not copy it: read live, it counts as written
			// meanwhile, and that attempt is carried over (once).
			int tries = 0;
			while (!r.epoch(&res))
				REQUIRE(++tries < 3);
			tracker_stats st;
			tracker_get_stats(r.t, &st);
			CHECK(st.hot_pages == (hot ? 1u : 0u));
			epoch_counters ec{};
			epoch_get_counters(r.ep, &ec);
			uint64_t unchanged0 = ec.pages_unchanged, faults0 = st.faults;
			const size_t last = page_size() - 1;
			for (int e = 0; e < 12; e++) {
				INFO("epoch " << e);
				bool written = e % 3 == 0;
				if (written)	// the page's last byte: the whole page is compared
					r.page(5)[last] = (unsigned char)e;
				REQUIRE(r.epoch(&res));
				CHECK(res.pages == (written ? 1u : 0u));
				auto want = std::vector<unsigned char>(r.page(5), r.page(5) + page_size());
				CHECK(r.durable(5) == want);
			}
			epoch_get_counters(r.ep, &ec);
			CHECK(ec.pages_unchanged - unchanged0 == (hot ? 8u : 0u));
			// Back to bytes the older copy holds, not the durable one:
			// changed, so persisted.
			fill(r.page(5), 'x');
			REQUIRE(r.epoch(&res));
			CHECK(all_bytes(r.durable(5), 'x'));
			fill(r.page(5), 'b');
			REQUIRE(r.epoch(&res));
			CHECK(res.pages == 1);
			CHECK(all_bytes(r.durable(5), 'b'));
			if (hot) {	// all of it without a fault
				tracker_get_stats(r.t, &st);
				CHECK(st.faults == faults0);
			}
			// What a restart recovers.
			auto image = r.snapshot();
			CHECK(r.durable_all() == image);
			if (!hot || c.copy_in_pause)	// (paused: nothing is carried over)
				continue;
			// An attempt carried over chose page 5 and wrote 'c' to
			// its working copy; then the page went back to its
			// durable bytes.  The retry must write it again: its
			// publication makes that working copy the valid one.
			fill(r.page(5), 'c');
			fill(r.page(60), 'p');
			epoch_batch *b = epoch_pause(r.ep, false);
			fill(r.page(60), 'q');	// read live: the attempt is carried over
			REQUIRE(!epoch_writeback(r.ep, b, &res));
			fill(r.page(5), 'b');
			REQUIRE(r.epoch(&res));
			CHECK(all_bytes(r.durable(5), 'b'));
			CHECK(all_bytes(r.durable(60), 'q'));
		}
	}
}

// Crash sweep through the pipeline: pages are written between the pause and
// the write-back (a conflict: carried over), then a second epoch publishes;
// the run crashes after every primitive of both.  Recovery must give the old
// image or the second pause's, never the first pause's (never published)
// nor a mix.  On the log backend the attempt rewrites the pages' valid
// copies in place: carried over, it puts them back, and the redo lists its
// pages as well as the later writes (epoch.c's redo list).
static void carried_pipeline_sweep(nvm_kind kind)
{
	for (const auto &c : cases()) {
		if (c.copy_in_pause)
			continue;
		SECTION(c.name)
		{
			auto scenario = [kind](rig &r) {
				for (uint64_t i = 0; i < 40; i += 3)
					fill(r.page(i), 'N');
				fill(r.page(50), 'N');
				epoch_batch *b = epoch_pause(r.ep, false);
				for (uint64_t i = 0; i < 40; i += 6)
					fill(r.page(i), 'X');
				if (epoch_writeback(r.ep, b, nullptr))
					return 250;	// must be carried
				if (kind == NVM_LOG) {
					epoch_counters ec{};
					epoch_get_counters(r.ep, &ec);
					if (ec.persist.pages_in_place == 0 ||
					    ec.persist.attempts_reverted != 1)
						return 252;
					// The redo: the 7 pages written again, and
					// the rest of the attempt's 15 with them.
					b = epoch_pause(r.ep, false);
					if (b->n != 15)
						return 253;
					return epoch_writeback(r.ep, b, nullptr) ? 0 : 251;
				}
				return r.epoch() ? 0 : 251;
			};
			// VER_d 2: the second pause's image, never the first's.
			auto seen = crash_sweep(
				c, 7, TRACKER_OPEN_EXACT, scenario, 2,
				[](uint64_t i, uint64_t v) {
					unsigned char want = i < 40 ? 'O' : 0;
					if (v == 2 && i < 40 && i % 6 == 0)
						want = 'X';
					else if (v == 2 && ((i < 40 && i % 3 == 0) || i == 50))
						want = 'N';
					return want;
				},
				kind);
			CHECK(seen[2] > 0);
			CHECK(seen[1] > 0);
		}
	}
}

TEST_CASE("crash at every point of a carried-over write-back and its redo",
	  "[epoch][crash][trackers]")
{
	carried_pipeline_sweep(NVM_SIM);
}

TEST_CASE("log backend: crash at every point of a carried-over in-place write-back and its redo",
	  "[epoch][crash][trackers][log]")
{
	carried_pipeline_sweep(NVM_LOG);
}

// The same sweep through epochs in which hot pages leave the batch
// unchanged: pages 0-9 are made hot, then the even ones change and the odd
// ones do not.  Whatever the crash point, recovery gives one of the
// published images, each page as that epoch had it.
TEST_CASE("crash at every point of epochs that leave unchanged hot pages out", "[epoch][crash][trackers]")
{
	for (const auto &c : cases()) {
		if (c.copy_in_pause)
			continue;
		SECTION(c.name)
		{
			auto scenario = [&c](rig &r) {
				for (uint64_t i = 0; i < 10; i++)
					fill(r.page(i), 'a');
				if (!r.epoch())	// VER_d 2
					return 250;
				for (uint64_t i = 0; i < 10; i++)
					fill(r.page(i), 'b');
				// Hot from this collection on (mprotect): its first
				// write-back may be carried over.
				int tries = 0;
				while (!r.epoch())	// VER_d 3
					if (++tries == 3)
						return 251;
				for (uint64_t i = 0; i < 10; i += 2)
					fill(r.page(i), 'N');
				fill(r.page(50), 'N');
				if (!r.epoch())	// VER_d 4
					return 252;
				if (!r.epoch())	// nothing changed: nothing published
					return 253;
				epoch_counters ec{};
				epoch_get_counters(r.ep, &ec);
				if (c.kind == TRACKER_MPROTECT && ec.pages_unchanged < 5 + 10)
					return 254;
				return 0;
			};
			auto seen = crash_sweep(c, 11, TRACKER_OPEN_HOT_AT_ANY_RATE, scenario, 4,
						[](uint64_t i, uint64_t v) {
							unsigned char want = i < 40 ? 'O' : 0;
							if (i < 10 && v >= 2)
								want = v == 2 ? 'a'
								       : (v == 4 && i % 2 == 0) ? 'N'
												 : 'b';
							if (i == 50 && v == 4)
								want = 'N';
							return want;
						});
			CHECK(seen[4] > 0);
			CHECK(seen[3] > 0);
		}
	}
}

// Pool population (populate_pool): on a pmem-kind pool the pool pages of
// the heap up to its high-water mark are allocated before the write-back
// stores there, both copies, written or not.  MADV_POPULATE_WRITE is Linux
// >= 5.14; without it the pipeline silently does without, and there is
// nothing to check: the epoch-populate test, which meson skips then
// (PMT_TEST_NEEDS=populate-write).
TEST_CASE("a pmem-kind pool has both copies of the heap's pages populated by the write-back",
	  "[epoch][populate]")
{
	size_t ps = page_size();
	for (bool pmem : { true, false }) {
		// Residency (mincore) shows what was allocated only where no
		// readahead brings pages in: a file in memory, whatever the
		// medium of the run (the backend is chosen here, not by it).
		scratch_dir d(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		const tracker_case c = { "mprotect", TRACKER_MPROTECT, false };
		rig r(d.file("pool"), c, pmem ? NVM_PMEM : NVM_MSYNC);
		auto resident = [&](uint64_t page, int copy) {
			unsigned char v = 0;
			REQUIRE(mincore(pool_copy(r.p, page, copy), ps, &v) == 0);
			return (v & 1) != 0;
		};
		INFO((pmem ? "pmem" : "msync"));
		CHECK(!resident(kPages - 1, 0));
		CHECK(!resident(kPages - 1, 1));
		// With no extent_fn the batch's highest page is the high-water
		// mark; it is rounded up to EPOCH_POPULATE_CHUNK pages, capped
		// at the heap.
		fill(r.page(kPages / 2), 'P');
		r.epoch();
		epoch_counters ec{};
		epoch_get_counters(r.ep, &ec);
		if (pmem) {
			CHECK(ec.pool_bytes_populated == 2 * kPages * ps);
			// Never written, yet allocated.
			CHECK(resident(0, 0));
			CHECK(resident(0, 1));
			CHECK(resident(kPages - 1, 0));
			CHECK(resident(kPages - 1, 1));
		} else {
			// An ordinary file: populating would dirty page-cache
			// pages that msync then writes.
			CHECK(ec.pool_bytes_populated == 0);
			CHECK(!resident(0, 0));
		}
		CHECK(all_bytes(r.durable(kPages / 2), 'P'));
	}
}

namespace {
// Bytes this process dirtied in the page cache of file systems that write
// back (/proc/self/io write_bytes, counted when a clean page is dirtied);
// -1 where the kernel does not count them.
long long io_write_bytes()
{
	std::ifstream in("/proc/self/io");
	std::string key;
	long long v;
	while (in >> key >> v)
		if (key == "write_bytes:")
			return v;
	return -1;
}

// Whether dir is on a file system whose pages are written back to a device
// (not tmpfs or ramfs, which write_bytes never counts).
bool on_block_storage(const char *dir)
{
	struct statfs sf;
	return statfs(dir, &sf) == 0 && sf.f_type != TMPFS_MAGIC && sf.f_type != RAMFS_MAGIC;
}
} // namespace

// An epoch on an ordinary file -- the default pool -- dirties no more pool
// pages than it writes lines into: the log backend appends what changed and
// never dirties a page of the pool's data by a store (its mapping is
// private).  The same measurement of the msync backend, which rewrites every
// page it changes (and the seq and checksum tables' pages), shows that it
// sees pool pages.  Both trackers.  PMT_DISK_DIR names the directory on a
// disk (default /var/tmp); the meson tests epoch-storage(-uffd) run it, and
// are skipped where there is no such directory or no /proc/self/io
// (PMT_TEST_NEEDS=disk).
TEST_CASE("an epoch on an ordinary file dirties no more pool pages than it writes lines into",
	  "[epoch][trackers][log][storage]")
{
	const char *disk = getenv("PMT_DISK_DIR") != nullptr ? getenv("PMT_DISK_DIR") : "/var/tmp";
	INFO("PMT_DISK_DIR " << disk);
	REQUIRE(on_block_storage(disk));
	REQUIRE(io_write_bytes() >= 0);
	for (const auto &c : cases()) {
		if (c.copy_in_pause)
			continue;
		SECTION(c.name)
		{
			for (nvm_kind kind : { NVM_LOG, NVM_MSYNC }) {
				INFO((kind == NVM_LOG ? "log" : "msync"));
				scratch_dir d(disk);
				rig r(d.file("pool"), c, kind);
				for (uint64_t i = 0; i < kPages; i++)
					fill(r.page(i), 'O');
				REQUIRE(r.epoch());
				std::mt19937 g(11);
				uint64_t lines = 0;
				long long dirtied = 0;
				for (int e = 0; e < 10; e++) {
					// A line in each of 40 distinct pages.
					std::vector<uint64_t> all(kPages);
					for (uint64_t i = 0; i < kPages; i++)
						all[i] = i;
					std::shuffle(all.begin(), all.end(), g);
					for (int k = 0; k < 40; k++)
						r.page(all[k])[(g() % 64) * 64] ^= 0x5a;
					epoch_counters before{}, after{};
					epoch_get_counters(r.ep, &before);
					long long w0 = io_write_bytes();
					REQUIRE(r.epoch());
					dirtied += io_write_bytes() - w0;
					epoch_get_counters(r.ep, &after);
					lines += after.persist.lines_written - before.persist.lines_written;
				}
				// 400 lines changed, each in a page of its own.
				const uint64_t changed = 400;
				uint64_t pages = (uint64_t)dirtied / page_size();
				INFO(lines << " lines written, " << pages << " pool pages dirtied");
				CHECK(lines >= changed);
				if (kind == NVM_LOG)
					CHECK(pages <= changed / 4);
				else
					CHECK(pages >= changed);
			}
		}
	}
}
