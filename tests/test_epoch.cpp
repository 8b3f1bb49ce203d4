/* SPDX-License-Identifier: BSD-3-Clause */
// The epoch pipeline (lib/epoch/epoch.c): the pause only collects and guards, the
// write-back reads live pages after the program runs again, and a page the
// program writes before its write-back is saved first.  Whatever the
// program writes after the pause must never reach the pool in that epoch.
#include "pool_test_util.h"
#include "uffd_half.h"

#include <atomic>
#include <random>
#include <thread>

#include <sys/mman.h>

extern "C" {
#include "epoch/epoch.h"
#include "persist/nvm.h"
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
	    const nvm_sim_options *sim = nullptr, bool create = true, unsigned latency_ns = 0)
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
			pool_recover(p, heap);
		INFO(err_get());
		REQUIRE(tracker_open(&t, c.kind, heap, len) == 0);
		epoch_options eo{};
		eo.copy_in_pause = c.copy_in_pause;
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
	void epoch(epoch_result *r = nullptr)
	{
		epoch_batch *b = epoch_pause(ep, false);
		epoch_writeback(ep, b, r);
	}
	// The pool's consistent image of page i.
	std::vector<unsigned char> durable(uint64_t i)
	{
		std::vector<unsigned char> v(page_size());
		pool_read_page(p, i, v.data());
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

} // namespace

TEST_CASE("writes after the pause are saved first and persisted only in the next epoch",
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
			CHECK(b->guarded == !c.copy_in_pause);
			// The program runs again before the write-back: it
			// overwrites every other page and a page outside the
			// batch.
			for (uint64_t i = 0; i < 64; i += 2)
				fill(r.page(i), 'B');
			fill(r.page(80), 'C');
			epoch_result res{};
			epoch_writeback(r.ep, b, &res);
			CHECK(res.pages == 64);
			// uffd's guard saves whole blocks on a fault
			// (TRACKER_GUARD_FAULT_AROUND); the mprotect tracker's
			// first-write fault saves the page alone.
			if (!c.copy_in_pause)
				CHECK(res.pages_saved == (c.kind == TRACKER_UFFD ? 64u : 32u));
			for (uint64_t i = 0; i < 64; i++) {
				INFO("page " << i);
				CHECK(all_bytes(r.durable(i), 'A'));
			}
			CHECK(all_bytes(r.durable(80), 0));
			// Epoch 2 takes the later writes.
			r.epoch(&res);
			CHECK(res.pages == 33);
			for (uint64_t i = 0; i < 64; i++) {
				INFO("page " << i);
				CHECK(all_bytes(r.durable(i), i % 2 == 0 ? 'B' : 'A'));
			}
			CHECK(all_bytes(r.durable(80), 'C'));
			// Nothing dirty: an empty epoch.
			r.epoch(&res);
			CHECK(res.pages == 0);
		}
	}
}

TEST_CASE("a writer racing the write-back never leaks into the epoch", "[epoch][race][trackers]")
{
	for (const auto &c : cases()) {
		SECTION(c.name)
		{
			scratch_dir d;
			rig r(d.file("pool"), c);
			for (int round = 0; round < 20; round++) {
				unsigned char gen = (unsigned char)('a' + round);
				for (uint64_t i = 0; i < kPages; i++)
					fill(r.page(i), gen);
				epoch_batch *b = epoch_pause(r.ep, false);
				REQUIRE(b->n == kPages);
				std::atomic<bool> go{ false };
				std::thread writer([&] {
					std::mt19937 rng(round);
					while (!go.load())
						;
					// Each page's first bytes, in random order, then
					// whole pages: faults race the write-back.
					for (int k = 0; k < 200; k++) {
						uint64_t i = rng() % kPages;
						r.page(i)[rng() % page_size()] = (unsigned char)'Z';
					}
				});
				go.store(true);
				epoch_writeback(r.ep, b, nullptr);
				writer.join();
				for (uint64_t i = 0; i < kPages; i++) {
					INFO("round " << round << " page " << i);
					REQUIRE(all_bytes(r.durable(i), gen));
				}
			}
			// The racing writes were tracked: one more epoch makes the
			// pool equal to the heap.
			r.epoch();
			for (uint64_t i = 0; i < kPages; i++)
				REQUIRE(memcmp(r.durable(i).data(), r.page(i), page_size()) == 0);
		}
	}
}

TEST_CASE("a system call writing a guarded page is prefaulted and saved", "[epoch][trackers]")
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
			// What preload/syscalls.c does before read().
			tracker_prefault(r.page(5) + 100, 6);
			CHECK(read(fds[0], r.page(5) + 100, 6) == 6);
			close(fds[0]);
			close(fds[1]);
			epoch_writeback(r.ep, b, nullptr);
			CHECK(all_bytes(r.durable(5), 'A'));
			r.epoch();
			CHECK(memcmp(r.durable(5).data() + 100, "kernel", 6) == 0);
		}
	}
}

TEST_CASE("the pause does not copy: its cost does not follow the dirty pages", "[epoch][trackers]")
{
	// Not a timing test: it checks the mechanism.  With a guard, no page
	// is copied unless written during the write-back.
	for (const auto &c : cases()) {
		if (c.copy_in_pause)
			continue;
		SECTION(c.name)
		{
			scratch_dir d;
			rig r(d.file("pool"), c);
			for (uint64_t i = 0; i < kPages; i++)
				fill(r.page(i), 'q');
			epoch_result res{};
			r.epoch(&res);
			CHECK(res.pages == kPages);
			CHECK(res.pages_saved == 0);
			epoch_counters ec{};
			epoch_get_counters(r.ep, &ec);
			CHECK(ec.unguarded_epochs == 0);
			CHECK(ec.slot_bytes_resident == 0);
		}
	}
}

// Crash sweep through the pipeline with the persistence simulator: pages
// are written between the pause and the write-back, and the write-back
// crashes after every primitive.  Recovery must give the old image or the
// paused one, never a page with the later writes.
TEST_CASE("crash at every point of a guarded write-back recovers the old or the paused image",
	  "[epoch][crash][trackers]")
{
	for (const auto &c : cases()) {
		SECTION(c.name)
		{
			scratch_dir d;
			std::string base = d.file("base"), work = d.file("work");
			{
				rig r(base, c);
				for (uint64_t i = 0; i < 40; i++)
					fill(r.page(i), 'O');
				r.epoch();
			}
			// In a child: reopen under the simulator, write 'N', pause,
			// write 'X' over some of it, write back; crash after k.
			auto child = [&](uint64_t crash_after) {
				pid_t pid = fork();
				REQUIRE(pid >= 0);
				if (pid == 0) {
					nvm_sim_options so{};
					so.seed = 7;
					so.survival = NVM_SIM_RANDOM;
					so.crash_after = crash_after;
					rig r(work, c, NVM_SIM, &so, false);
					for (uint64_t i = 0; i < 40; i += 3)
						fill(r.page(i), 'N');
					fill(r.page(50), 'N');
					epoch_batch *b = epoch_pause(r.ep, false);
					for (uint64_t i = 0; i < 40; i += 6)
						fill(r.page(i), 'X');
					epoch_writeback(r.ep, b, nullptr);
					_exit(nvm_sim_primitives(r.p->nvm) > 255 ? 255
						: (int)nvm_sim_primitives(r.p->nvm));
				}
				int st = 0;
				REQUIRE(waitpid(pid, &st, 0) == pid);
				return st;
			};
			copy_file(base, work);
			int st = child(0);
			REQUIRE(WIFEXITED(st));
			uint64_t total = (uint64_t)WEXITSTATUS(st);
			REQUIRE(total > 3);
			REQUIRE(total < 255);
			for (uint64_t k = 1; k <= total; k++) {
				copy_file(base, work);
				(void)child(k);
				auto o = options(work, kPages);
				o.create = false;
				pool *p = open_or_fail(o);
				std::vector<unsigned char> img(kPages * page_size());
				pool_recover(p, img.data());
				bool is_new = *p->ver_d == 2;
				INFO("crash after " << k << " of " << total << ", VER_d " << *p->ver_d);
				REQUIRE((*p->ver_d == 1 || is_new));
				for (uint64_t i = 0; i < kPages; i++) {
					unsigned char want = i < 40 ? 'O' : 0;
					if (is_new && ((i < 40 && i % 3 == 0) || i == 50))
						want = 'N';
					std::vector<unsigned char> pg(img.begin() + i * page_size(),
								      img.begin() + (i + 1) * page_size());
					INFO("page " << i);
					REQUIRE(all_bytes(pg, want));
				}
				pool_close(p);
			}
		}
	}
}

// Guard fault-around (uffd's batch guard, tracker_mprotect.c): a write
// fault on a guarded page saves the still-pending pages of its aligned
// block and unprotects the block with one mprotect.  The neighbours must be
// saved before any thread can write them.
TEST_CASE("a guard fault saves its block of pages, which then write without faulting",
	  "[epoch][faultaround][uffd]")
{
	// the guard serves the uffd tracker only
	const tracker_case c = { "uffd", TRACKER_UFFD, false };
	const uint64_t blk = TRACKER_GUARD_FAULT_AROUND;
	static_assert(kPages >= 4 * TRACKER_GUARD_FAULT_AROUND, "room for blocks");
	scratch_dir d;
	rig r(d.file("pool"), c);
	for (uint64_t i = 0; i < kPages; i++)
		fill(r.page(i), 'P');
	epoch_batch *b = epoch_pause(r.ep, false);
	REQUIRE(b->n == kPages);
	uint64_t f0 = r.t->stats.guard_faults;
	r.page(blk + 3)[7] = 'W';	// faults: saves and opens [blk, 2 blk)
	CHECK(r.t->stats.guard_faults == f0 + 1);
	for (uint64_t i = blk; i < 2 * blk; i++)
		r.page(i)[11] = 'W';
	CHECK(r.t->stats.guard_faults == f0 + 1);
	r.page(2 * blk)[5] = 'W';	// the next block faults again
	CHECK(r.t->stats.guard_faults == f0 + 2);
	epoch_result res{};
	epoch_writeback(r.ep, b, &res);
	CHECK(res.pages_saved == 2 * blk);
	for (uint64_t i = 0; i < kPages; i++) {
		INFO("page " << i);
		REQUIRE(all_bytes(r.durable(i), 'P'));
	}
	r.epoch(&res);
	CHECK(res.pages == blk + 1);
	for (uint64_t i = 0; i < kPages; i++)
		REQUIRE(memcmp(r.durable(i).data(), r.page(i), page_size()) == 0);
}

TEST_CASE("writers racing the write-back in clusters of pages never leak into the epoch",
	  "[epoch][faultaround][race][trackers]")
{
	for (const auto &c : cases()) {
		SECTION(c.name)
		{
			scratch_dir d;
			// A slow NVM (2 us per line written): the write-back holds
			// each page WRITING for ~100 us, so a fault whose block
			// holds that page waits inside the handler -- the window
			// in which a block unprotected before it is saved would
			// let the other writer's stores reach the epoch.
			rig r(d.file("pool"), c, NVM_MSYNC, nullptr, true, 2000);
			for (int round = 0; round < 6; round++) {
				unsigned char gen = (unsigned char)('a' + round);
				for (uint64_t i = 0; i < kPages; i++)
					fill(r.page(i), gen);
				epoch_batch *b = epoch_pause(r.ep, false);
				REQUIRE(b->n == kPages);
				std::atomic<int> ready{ 0 };
				std::atomic<bool> go{ false }, done{ false };
				// Two writers storing into runs of neighbouring
				// pages until the write-back ends: one's fault opens
				// a block the other writes into without a fault.
				auto writer = [&](unsigned seed) {
					std::mt19937 rng(seed);
					ready++;
					while (!go.load())
						;
					while (!done.load()) {
						uint64_t first = rng() % kPages;
						uint64_t len = 1 + rng() % 6;
						for (uint64_t i = first; i < first + len && i < kPages; i++)
							// Atomic: the two writers may pick one byte.
							__atomic_store_n(&r.page(i)[rng() % page_size()],
									 (unsigned char)'Z', __ATOMIC_RELAXED);
					}
				};
				std::thread w1(writer, 2 * round), w2(writer, 2 * round + 1);
				while (ready.load() < 2)
					;
				go.store(true);
				epoch_writeback(r.ep, b, nullptr);
				done.store(true);
				w1.join();
				w2.join();
				for (uint64_t i = 0; i < kPages; i++) {
					INFO("round " << round << " page " << i);
					REQUIRE(all_bytes(r.durable(i), gen));
				}
			}
			r.epoch();
			for (uint64_t i = 0; i < kPages; i++)
				REQUIRE(memcmp(r.durable(i).data(), r.page(i), page_size()) == 0);
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
		scratch_dir d;
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
