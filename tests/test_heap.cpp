/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/heap: the persistent allocator over an anonymous range.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include <pmthreads.h>

extern "C" {
#include "heap/heap.h"
#include "base/log.h"
#include "quiesce/quiesce.h"
}

namespace {

// Anonymous zero-filled memory, as the runtime's shadow range is.
void *map_range(size_t len)
{
	void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? nullptr : p;
}

// A fresh heap over len bytes of anonymous memory, unmapped at the end.
struct test_heap {
	void *base;
	size_t len;
	explicit test_heap(size_t l = 64u << 20) : len(l)
	{
		base = map_range(len);
		REQUIRE(base != nullptr);
		REQUIRE(heap_init(base, len, true) == 0);
		REQUIRE(heap_ready());
	}
	~test_heap() { munmap(base, len); }
	test_heap(const test_heap &) = delete;
	test_heap &operator=(const test_heap &) = delete;
};

uint64_t in_use()
{
	heap_stats st;
	heap_get_stats(&st);
	return st.bytes_in_use;
}

void require_consistent()
{
	heap_validate_report r;
	INFO(err_get());
	REQUIRE(heap_validate_full(&r) == 0);
}

// Fill a block with a pattern derived from a seed unique to the block (not
// from its address, so that it survives realloc's moves).
void fill(void *p, size_t n, unsigned seed)
{
	auto *b = static_cast<unsigned char *>(p);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(seed * 131u + (seed >> 8) + i * 7u);
}

bool intact(const void *p, size_t n, unsigned seed)
{
	auto *b = static_cast<const unsigned char *>(p);
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)(seed * 131u + (seed >> 8) + i * 7u))
			return false;
	return true;
}

struct block {
	void *p;
	size_t size;
	unsigned seed;
};

// No two live blocks overlap (by usable size), all in the heap.
bool disjoint(std::vector<block> v)
{
	std::sort(v.begin(), v.end(), [](const block &a, const block &b) { return a.p < b.p; });
	for (size_t i = 0; i + 1 < v.size(); i++)
		if ((char *)v[i].p + heap_usable_size(v[i].p) > (char *)v[i + 1].p)
			return false;
	return true;
}

size_t random_size(std::mt19937_64 &rng)
{
	switch (rng() % 8) {
	case 0: return 1 + rng() % 16;
	case 1: case 2: case 3: return 1 + rng() % 256;
	case 4: case 5: return 1 + rng() % 4096;
	case 6: return 1 + rng() % 20000;
	default: return 1 + rng() % 200000;
	}
}

} // namespace

TEST_CASE("heap_init checks the range and the header it finds", "[heap]")
{
	const size_t len = 16u << 20;
	void *base = map_range(len);
	REQUIRE(base != nullptr);

	SECTION("all-zero header, not fresh: refused, never formatted over")
	{
		// Formatting here would wipe a heap whose page 0 was lost.
		REQUIRE(heap_init(base, len, false) == -1);
		REQUIRE(std::string(err_get()).find("all zeros") != std::string::npos);
		REQUIRE_FALSE(heap_ready());
		std::vector<unsigned char> zero(1u << 20, 0);
		REQUIRE(memcmp(base, zero.data(), zero.size()) == 0);
	}
	SECTION("fresh: formatted")
	{
		REQUIRE(heap_init(base, len, true) == 0);
		void *p = heap_malloc(100);
		REQUIRE(p != nullptr);
		REQUIRE(heap_contains(p));
		require_consistent();
	}
	SECTION("garbage: refused with a message")
	{
		memset(base, 0xa5, 1u << 20);
		REQUIRE(heap_init(base, len, false) == -1);
		REQUIRE(std::string(err_get()).find("no pmthreads heap") != std::string::npos);
		REQUIRE_FALSE(heap_ready());
		REQUIRE(heap_malloc(10) == nullptr);
	}
	SECTION("a heap of another size: refused")
	{
		REQUIRE(heap_init(base, len, true) == 0);
		REQUIRE(heap_init(base, len / 2, false) == -1);
		REQUIRE(std::string(err_get()).find("formatted for") != std::string::npos);
	}
	SECTION("another format version: refused")
	{
		REQUIRE(heap_init(base, len, true) == 0);
		static_cast<uint32_t *>(base)[2] += 1;	// the version field
		REQUIRE(heap_init(base, len, false) == -1);
		REQUIRE(std::string(err_get()).find("version") != std::string::npos);
	}
	SECTION("a heap of the version before line-sized classes: refused, not reformatted")
	{
		REQUIRE(heap_init(base, len, true) == 0);
		void *p = heap_malloc(80);
		REQUIRE(p != nullptr);
		memset(p, 0x5a, 80);
		// What a version-1 heap's header said: 27 classes, 80 B among them.
		static_cast<uint32_t *>(base)[2] = 1;	// version
		static_cast<uint32_t *>(base)[10] = 27;	// nclasses
		std::vector<unsigned char> before(static_cast<unsigned char *>(base),
						  static_cast<unsigned char *>(base) + (4u << 20));
		REQUIRE(heap_init(base, len, false) == -1);
		std::string why = err_get();
		INFO(why);
		CHECK(why.find("format version 1 ") != std::string::npos);
		CHECK(why.find("not reformatted") != std::string::npos);
		CHECK(why.find("heap version 1)") != std::string::npos);
		CHECK(why.find("PMTHREADS_POOL") != std::string::npos);
		REQUIRE_FALSE(heap_ready());
		REQUIRE(memcmp(before.data(), base, before.size()) == 0);
	}
	SECTION("a heap of the version before 127-byte names: refused, not reformatted")
	{
		REQUIRE(heap_init(base, len, true) == 0);
		void *p = heap_malloc(80);
		REQUIRE(p != nullptr);
		REQUIRE(heap_name_set("root", p) == 0);
		static_cast<uint32_t *>(base)[2] = 2;	// what a version-2 heap's header says
		std::vector<unsigned char> before(static_cast<unsigned char *>(base),
						  static_cast<unsigned char *>(base) + (4u << 20));
		REQUIRE(heap_init(base, len, false) == -1);
		std::string why = err_get();
		INFO(why);
		CHECK(why.find("format version 2 ") != std::string::npos);
		CHECK(why.find("not this build's version 3") != std::string::npos);
		CHECK(why.find("heap version 2)") != std::string::npos);
		REQUIRE_FALSE(heap_ready());
		REQUIRE(memcmp(before.data(), base, before.size()) == 0);
	}
	SECTION("misaligned or tiny ranges: refused")
	{
		REQUIRE(heap_init((char *)base + 16, len - 4096, true) == -1);
		REQUIRE(heap_init(base, 64 * 1024, true) == -1);
	}
	REQUIRE(fase_depth() == 0);
	munmap(base, len);
}

TEST_CASE("small and large blocks: alignment, sizes, no overlap", "[heap]")
{
	test_heap th;
	std::vector<block> live;
	unsigned seed = 1;
	for (size_t size : std::initializer_list<size_t>{ 0, 1, 15, 16, 17, 100, 256, 1000, 3584, 3585, 4095, 4096, 4097,
			     65536u, 100000u, 1u << 20 }) {
		for (int i = 0; i < 5; i++) {
			void *p = heap_malloc(size);
			REQUIRE(p != nullptr);
			REQUIRE(heap_contains(p));
			REQUIRE((uintptr_t)p % 16 == 0);
			REQUIRE(heap_usable_size(p) >= std::max<size_t>(size, 1));
			if (size >= 4096)
				REQUIRE((uintptr_t)p % 4096 == 0);
			fill(p, size, seed);
			live.push_back({ p, size, seed++ });
		}
	}
	REQUIRE(disjoint(live));
	for (auto &b : live)
		REQUIRE(intact(b.p, b.size, b.seed));
	require_consistent();
	for (auto &b : live)
		heap_free(b.p);
	REQUIRE(in_use() == 0);
	require_consistent();
	REQUIRE(fase_depth() == 0);
}

// The size classes as the allocator shows them: the usable size of each
// request from 1 byte to the largest small one.
static std::vector<std::pair<size_t, size_t>> class_table()	// (class size, smallest request)
{
	std::vector<std::pair<size_t, size_t>> classes;
	for (size_t n = 1; n <= 4096; n++) {
		void *p = heap_malloc(n);
		REQUIRE(p != nullptr);
		size_t u = heap_usable_size(p);
		heap_free(p);
		if (u >= 4096)
			break;
		if (classes.empty() || classes.back().first != u)
			classes.push_back({ u, n });
	}
	return classes;
}

TEST_CASE("size classes: whole cache lines from 64 B up, dense below, bounded waste", "[heap]")
{
	test_heap th;
	auto classes = class_table();
	REQUIRE(classes.size() >= 16);
	for (auto [size, first_request] : classes) {
		size_t worst = size - first_request;	// bytes wasted by the smallest request
		// Blocks to fill some 24 spans (of 16 KiB or more), so that span
		// ends are covered: every block line-aligned (no line shared with
		// a neighbour) from 64 B up, 16-byte aligned below.
		heap_validate_report r0;
		REQUIRE(heap_validate_full(&r0) == 0);
		std::vector<void *> v;
		size_t count = 24 * (16384 / size) + 100;
		for (size_t i = 0; i < count; i++) {
			void *p = heap_malloc(size);
			REQUIRE(p != nullptr);
			v.push_back(p);
		}
		heap_validate_report r;
		REQUIRE(heap_validate_full(&r) == 0);
		// the spans this class's blocks took (its reserve span, made
		// by class_table, among them: one span's worth more)
		double span_bytes = (double)(r.span_pages - r0.span_pages) * 4096;
		double footprint = span_bytes / (double)(v.size() * size);	// incl. span headers and tails
		printf("class %5zu B: requests %4zu..%-4zu worst internal waste %3zu B (%4.1f %%), "
		       "spans %.3fx the blocks\n", size, first_request, size, worst,
		       100.0 * (double)worst / (double)size, footprint);
		INFO("class " << size);
		if (size >= 64) {
			CHECK(size % 64 == 0);
			for (void *p : v)
				CHECK((uintptr_t)p % 64 == 0);
			// at most 63 bytes per block up to 512 B, a fifth of the block above
			CHECK(worst <= std::max<size_t>(63, size / 5));
		} else {
			CHECK(size % 16 == 0);
			CHECK(worst <= 15);	// dense: 16-byte steps
			for (void *p : v)
				CHECK((uintptr_t)p % 16 == 0);
		}
		// the span headers, span tails and the last span's free room
		CHECK(footprint <= 1.10);
		for (void *p : v)
			heap_free(p);
	}
	REQUIRE(in_use() == 0);
	require_consistent();
}

TEST_CASE("calloc zeroes, also memory that was used before", "[heap]")
{
	test_heap th;
	std::vector<void *> v;
	for (size_t size : { 24u, 700u, 5000u, 300000u }) {
		void *p = heap_malloc(size);
		memset(p, 0xff, size);
		heap_free(p);
		auto *q = static_cast<unsigned char *>(heap_calloc(1, size));
		REQUIRE(q != nullptr);
		REQUIRE(std::all_of(q, q + size, [](unsigned char c) { return c == 0; }));
		v.push_back(q);
	}
	errno = 0;
	REQUIRE(heap_calloc(SIZE_MAX / 2, 3) == nullptr);
	REQUIRE(errno == ENOMEM);
	for (void *p : v)
		heap_free(p);
	require_consistent();
}

TEST_CASE("freed memory is reused, from the low end", "[heap]")
{
	test_heap th;
	void *a = heap_malloc(48);
	heap_free(a);
	REQUIRE(heap_malloc(48) == a);	// the thread cache is LIFO

	void *big = heap_malloc(1u << 20);
	heap_stats st1;
	heap_get_stats(&st1);
	heap_free(big);
	void *big2 = heap_malloc(1u << 20);
	REQUIRE(big2 == big);
	heap_stats st2;
	heap_get_stats(&st2);
	REQUIRE(st2.bytes_mapped == st1.bytes_mapped);	// no new pages touched

	// Many frees and allocations of the same shapes never grow the heap.
	std::vector<void *> v;
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 200; i++)
			v.push_back(heap_malloc(i % 3 == 0 ? 9000 : 200));
		for (void *p : v)
			heap_free(p);
		v.clear();
	}
	heap_stats st3;
	heap_get_stats(&st3);
	for (int i = 0; i < 200; i++)
		v.push_back(heap_malloc(i % 3 == 0 ? 9000 : 200));
	heap_stats st4;
	heap_get_stats(&st4);
	REQUIRE(st4.bytes_mapped == st3.bytes_mapped);
	for (void *p : v)
		heap_free(p);
	heap_free(big2);
	require_consistent();
}

TEST_CASE("small page runs are cached per thread and given back at exit", "[heap]")
{
	test_heap th;
	void *a = heap_malloc(64 * 1024);
	heap_validate_report r0;
	REQUIRE(heap_validate_full(&r0) == 0);
	heap_free(a);
	heap_validate_report r1;
	REQUIRE(heap_validate_full(&r1) == 0);
	REQUIRE(r1.cached_bytes == r0.cached_bytes + 64 * 1024);
	REQUIRE(heap_malloc(64 * 1024) == a);	// from the cache
	heap_free(a);
	heap_thread_exit();	// the cache goes back to the page allocator
	heap_validate_report r2;
	REQUIRE(heap_validate_full(&r2) == 0);
	REQUIRE(r2.cached_bytes == 0);
	REQUIRE(r2.large_pages == 0);
	REQUIRE(in_use() == 0);
}

TEST_CASE("page runs coalesce on free", "[heap]")
{
	test_heap th;
	// Runs of more than 32 pages: thread caches keep no runs that big, so
	// each free goes straight to the page allocator.
	const size_t run = 40 * 4096;
	std::vector<void *> v;
	for (int i = 0; i < 64; i++)
		v.push_back(heap_malloc(run));
	// free every other run, then the rest: all must merge into one extent
	for (size_t i = 0; i < v.size(); i += 2)
		heap_free(v[i]);
	heap_validate_report r;
	REQUIRE(heap_validate_full(&r) == 0);
	REQUIRE(r.free_extents >= 32);
	for (size_t i = 1; i < v.size(); i += 2)
		heap_free(v[i]);
	REQUIRE(heap_validate_full(&r) == 0);
	REQUIRE(r.free_extents == 1);
	// and the merged extent serves one big run at the same place
	void *big = heap_malloc(64 * run);
	REQUIRE(big == v[0]);
	heap_free(big);
}

TEST_CASE("realloc keeps contents, in place when it fits", "[heap]")
{
	test_heap th;
	auto *p = static_cast<char *>(heap_realloc(nullptr, 40));
	REQUIRE(p != nullptr);
	fill(p, 40, 3);
	REQUIRE(heap_realloc(p, 48) == p);	// same class
	REQUIRE(heap_realloc(p, 30) == p);
	auto *q = static_cast<char *>(heap_realloc(p, 1000));
	REQUIRE(intact(q, 40, 3));
	fill(q, 1000, 4);
	auto *r = static_cast<char *>(heap_realloc(q, 50000));
	REQUIRE(intact(r, 1000, 4));
	REQUIRE((uintptr_t)r % 4096 == 0);
	fill(r, 50000, 5);
	// the run at the top grows in place
	auto *s = static_cast<char *>(heap_realloc(r, 200000));
	REQUIRE(s == r);
	REQUIRE(intact(s, 50000, 5));
	// shrinking a run frees its tail pages, in place
	REQUIRE(heap_realloc(s, 10000) == s);
	REQUIRE(heap_usable_size(s) == 12288);
	REQUIRE(intact(s, 10000, 5));
	// a run grows into a free neighbour (runs over 32 pages are not cached)
	void *block = heap_malloc(40 * 4096);
	void *after = heap_malloc(40 * 4096);
	heap_free(after);
	void *grown = heap_realloc(block, 80 * 4096);
	REQUIRE(grown == block);
	require_consistent();
	heap_free(grown);
	REQUIRE(heap_realloc(s, 0) == nullptr);
	REQUIRE(in_use() == 0);
	require_consistent();
}

TEST_CASE("memalign: every power of two", "[heap]")
{
	test_heap th;
	std::vector<block> live;
	unsigned seed = 7;
	for (size_t align = 1; align <= (1u << 21); align <<= 1) {
		for (size_t size : { 1u, 24u, 100u, 2000u, 5000u, 70000u }) {
			void *p = heap_memalign(align, size);
			REQUIRE(p != nullptr);
			INFO("align " << align << " size " << size);
			REQUIRE((uintptr_t)p % align == 0);
			REQUIRE(heap_usable_size(p) >= size);
			fill(p, size, seed);
			live.push_back({ p, size, seed++ });
		}
	}
	REQUIRE(disjoint(live));
	for (auto &b : live)
		REQUIRE(intact(b.p, b.size, b.seed));
	REQUIRE(heap_memalign(24, 10) == nullptr);
	REQUIRE(errno == EINVAL);
	require_consistent();
	for (auto &b : live)
		heap_free(b.p);
	REQUIRE(in_use() == 0);
	require_consistent();
}

TEST_CASE("heap_good_size is the usable size the allocation would get", "[heap]")
{
	test_heap th;
	for (size_t align = 1; align <= (1u << 16); align <<= 1) {
		for (size_t size = 0; size <= 9000; size += size < 200 ? 1 : 37) {
			INFO("align " << align << " size " << size);
			void *p = heap_memalign(align, size);
			REQUIRE(p != nullptr);
			CHECK(heap_good_size(size, align) == heap_usable_size(p));
			heap_free(p);
		}
	}
	for (size_t size : { 0u, 24u, 3584u, 3585u, 70000u }) {
		void *p = heap_malloc(size);
		REQUIRE(p != nullptr);
		CHECK(heap_good_size(size, 0) == heap_usable_size(p));
		heap_free(p);
	}
	CHECK(heap_good_size(th.len + 1, 0) == 0);
	require_consistent();
}

TEST_CASE("bad frees are reported and change nothing", "[heap]")
{
	test_heap th;
	log_set_level(LOG_ERR);
	void *a = heap_malloc(64);
	void *b = heap_malloc(64);
	void *big = heap_malloc(10000);
	uint64_t before = in_use();
	heap_free((char *)a + 16);		// interior
	heap_free((char *)big + 4096);		// interior of a run
	heap_free((char *)th.base + 8);		// metadata
	int local;
	heap_free(&local);			// not in the heap
	REQUIRE(in_use() == before);
	heap_free(a);
	heap_free(a);				// double free, in the cache
	heap_free(big);
	heap_free(big);				// double free of a run
	REQUIRE(in_use() == before - 64 - 12288);
	require_consistent();
	// the cache was not corrupted: two allocations give two blocks
	void *c = heap_malloc(64), *d = heap_malloc(64);
	REQUIRE(c != d);
	heap_free(b);
	heap_free(c);
	heap_free(d);
	REQUIRE(in_use() == 0);
	require_consistent();
	log_set_level(LOG_WARN);
}

TEST_CASE("out of space: NULL + ENOMEM, and everything works after", "[heap]")
{
	test_heap th(4u << 20);
	std::vector<void *> v;
	SECTION("small blocks")
	{
		for (;;) {
			errno = 0;
			void *p = heap_malloc(100);
			if (p == nullptr) {
				REQUIRE(errno == ENOMEM);
				break;
			}
			v.push_back(p);
		}
		REQUIRE(v.size() > 10000);
	}
	SECTION("large blocks")
	{
		for (;;) {
			errno = 0;
			void *p = heap_malloc(50000);
			if (p == nullptr) {
				REQUIRE(errno == ENOMEM);
				break;
			}
			v.push_back(p);
		}
		REQUIRE(heap_malloc(8u << 20) == nullptr);
		REQUIRE(heap_realloc(v[0], 8u << 20) == nullptr);	// v[0] stays valid
	}
	require_consistent();
	for (void *p : v)
		heap_free(p);
	REQUIRE(in_use() == 0);
	// Everything is usable again, even as one large run: cached blocks and
	// reserve spans are given back when pages run out.
	void *big = heap_malloc(3u << 20);
	REQUIRE(big != nullptr);
	heap_free(big);
	require_consistent();
}

TEST_CASE("random mix against a model", "[heap]")
{
	test_heap th(256u << 20);
	std::mt19937_64 rng(42);
	std::vector<block> live;
	unsigned seed = 0;
	for (int i = 0; i < 30000; i++) {
		unsigned op = rng() % 10;
		if (op < 5 || live.empty()) {
			size_t size = random_size(rng);
			void *p = op == 0 ? heap_calloc(1, size)
			       : op == 1 ? heap_memalign((size_t)1 << (rng() % 14), size)
					 : heap_malloc(size);
			REQUIRE(p != nullptr);
			fill(p, size, ++seed);
			live.push_back({ p, size, seed });
		} else if (op < 8) {
			size_t k = rng() % live.size();
			REQUIRE(intact(live[k].p, live[k].size, live[k].seed));
			heap_free(live[k].p);
			live[k] = live.back();
			live.pop_back();
		} else {
			size_t k = rng() % live.size();
			size_t size = random_size(rng);
			void *p = heap_realloc(live[k].p, size);
			REQUIRE(p != nullptr);
			// contents up to the old size moved with it
			REQUIRE(intact(p, std::min(size, live[k].size), live[k].seed));
			fill(p, size, ++seed);
			live[k] = { p, size, seed };
		}
		if (i % 5000 == 0) {
			REQUIRE(disjoint(live));
			require_consistent();
		}
	}
	REQUIRE(disjoint(live));
	for (auto &b : live) {
		REQUIRE(intact(b.p, b.size, b.seed));
		heap_free(b.p);
	}
	REQUIRE(in_use() == 0);
	require_consistent();
}

TEST_CASE("threads: churn with cross-thread frees", "[heap][threads]")
{
	test_heap th(256u << 20);
	const int nthreads = 4, rounds = 20000;
	// Each thread allocates; half of what it allocates is freed by its
	// neighbour through a handoff queue.
	struct handoff {
		std::mutex lock;
		std::vector<block> q;
	};
	std::vector<handoff> box(nthreads);
	std::atomic<int> failures{ 0 };
	auto worker = [&](int id) {
		std::mt19937_64 rng(id);
		std::vector<block> mine;
		unsigned seed = (unsigned)id << 24;
		for (int i = 0; i < rounds; i++) {
			size_t size = rng() % 16 == 0 ? 1 + rng() % 40000 : 1 + rng() % 512;
			void *p = heap_malloc(size);
			if (p == nullptr) {
				failures++;
				continue;
			}
			fill(p, size, ++seed);
			block b{ p, size, seed };
			if (rng() % 2) {
				handoff &h = box[(id + 1) % nthreads];
				h.lock.lock();
				h.q.push_back(b);
				h.lock.unlock();
			} else {
				mine.push_back(b);
			}
			if (mine.size() > 64) {
				for (auto &m : mine) {
					if (!intact(m.p, m.size, m.seed))
						failures++;
					heap_free(m.p);
				}
				mine.clear();
			}
			handoff &in = box[id];
			std::vector<block> got;
			in.lock.lock();
			got.swap(in.q);
			in.lock.unlock();
			for (auto &g : got) {
				if (!intact(g.p, g.size, g.seed))
					failures++;
				heap_free(g.p);
			}
		}
		for (auto &m : mine)
			heap_free(m.p);
		if (fase_depth() != 0)
			failures++;
		heap_thread_exit();
	};
	std::vector<std::thread> ts;
	for (int i = 0; i < nthreads; i++)
		ts.emplace_back(worker, i);
	for (auto &t : ts)
		t.join();
	for (auto &h : box)
		for (auto &b : h.q) {
			REQUIRE(intact(b.p, b.size, b.seed));
			heap_free(b.p);
		}
	REQUIRE(failures == 0);
	REQUIRE(in_use() == 0);
	require_consistent();
}

TEST_CASE("threads beyond the cache slots share the locked slot", "[heap][threads]")
{
	test_heap th(256u << 20);
	// 80 threads alive at once: more than the 64 owned slots.
	const int nthreads = 80;
	std::atomic<int> ready{ 0 }, failures{ 0 };
	std::atomic<bool> go{ false };
	auto worker = [&](int id) {
		std::vector<void *> v;
		for (int i = 0; i < 50; i++)
			v.push_back(heap_malloc(16 + (size_t)(i * id) % 300));
		ready++;
		while (!go)
			std::this_thread::yield();
		for (int round = 0; round < 200; round++) {
			for (auto &p : v) {
				heap_free(p);
				p = heap_malloc(16 + (size_t)(round + id) % 5000);
				if (p == nullptr)
					failures++;
			}
		}
		for (void *p : v)
			heap_free(p);
		heap_thread_exit();
	};
	std::vector<std::thread> ts;
	for (int i = 0; i < nthreads; i++)
		ts.emplace_back(worker, i);
	while (ready < nthreads)
		std::this_thread::yield();
	go = true;
	for (auto &t : ts)
		t.join();
	REQUIRE(failures == 0);
	REQUIRE(in_use() == 0);
	require_consistent();
}

TEST_CASE("freeing or moving a named block removes its name", "[heap]")
{
	test_heap th;
	void *small = heap_malloc(64), *large = heap_malloc(3 * 4096 + 1), *moved = heap_malloc(32);
	REQUIRE(heap_name_set("small", small) == 0);
	REQUIRE(heap_name_set("large", large) == 0);
	REQUIRE(heap_name_set("moved", moved) == 0);
	heap_free(small);
	heap_free(large);
	void *grown = heap_realloc(moved, 100000);
	REQUIRE(grown != nullptr);
	REQUIRE(grown != moved);
	CHECK(heap_name_get("small", nullptr) == nullptr);
	CHECK(heap_name_get("large", nullptr) == nullptr);
	CHECK(heap_name_get("moved", nullptr) == nullptr);
	heap_free(grown);
}

TEST_CASE("a named page run resized in place keeps its name, with the new size", "[heap]")
{
	test_heap th;
	void *run = heap_name_alloc("run", 8 * 4096);
	REQUIRE(run != nullptr);
	REQUIRE(heap_realloc(run, 2 * 4096 + 10) == run);	// shrinks in place
	size_t size = 0;
	REQUIRE(heap_name_get("run", &size) == run);
	REQUIRE(size == 2 * 4096 + 10);
	require_consistent();	// the recorded size fits the smaller block
	REQUIRE(heap_name_recover("run", nullptr, 2 * 4096 + 11, nullptr) == -1);
	heap_free(run);
	REQUIRE(in_use() == 0);
}

namespace {

// The heap a new run adopts: the same memory, heap_init again (as after a
// restart, the memory being what the last epoch left).
void next_run(const test_heap &th)
{
	REQUIRE(heap_init(th.base, th.len, false) == 0);
}

uint64_t held_now()
{
	heap_validate_report r;
	INFO(err_get());
	REQUIRE(heap_validate_full(&r) == 0);
	REQUIRE(r.held == heap_name_held());
	return r.held;
}

} // namespace

TEST_CASE("names across runs: nvmalloc holds the earlier run's object for nvrecover", "[heap]")
{
	test_heap th;
	const size_t n = 100;
	auto *a = static_cast<unsigned char *>(heap_name_alloc("x", n));
	REQUIRE(a != nullptr);
	fill(a, n, 1);
	// The same run rebinding its own name holds nothing (the program has
	// the first object).
	void *again = heap_name_alloc("again", 8), *again2 = heap_name_alloc("again", 8);
	REQUIRE(again2 != again);
	REQUIRE(held_now() == 0);
	heap_free(again);
	heap_free(again2);
	REQUIRE(heap_name_get("again", nullptr) == nullptr);
	std::vector<unsigned char> out(n);

	SECTION("the NVthreads idiom: nvmalloc, then nvrecover into the new object")
	{
		next_run(th);
		auto *b = static_cast<unsigned char *>(heap_name_alloc("x", n));
		REQUIRE(b != nullptr);
		REQUIRE(b != a);
		REQUIRE(held_now() == 1);
		// until recovered, the data is the held object's, the name the new one's
		size_t size = 0;
		REQUIRE(heap_name_get("x", &size) == b);
		REQUIRE(size == n);
		void *obj = nullptr;
		REQUIRE(heap_name_recover("x", b, n, &obj) == 0);
		REQUIRE(obj == b);
		REQUIRE(intact(b, n, 1));
		REQUIRE(held_now() == 0);	// copied into the name's object: freed
		REQUIRE(in_use() == heap_usable_size(b));
		// and later calls read the name's object, which holds the same data
		REQUIRE(heap_name_recover("x", out.data(), n, nullptr) == 0);
		REQUIRE(intact(out.data(), n, 1));
	}
	SECTION("a crash between nvmalloc and nvrecover: the next run still finds the data")
	{
		next_run(th);
		auto *b = static_cast<unsigned char *>(heap_name_alloc("x", n));
		REQUIRE(b != nullptr);
		next_run(th);	// crashed here, before nvrecover
		auto *c = static_cast<unsigned char *>(heap_name_alloc("x", n));
		REQUIRE(c != nullptr);
		REQUIRE(held_now() == 1);	// still the first run's, not the zeroed one
		// the crashed run's object went: the held one and c remain
		REQUIRE(in_use() == heap_usable_size(a) + heap_usable_size(c));
		(void)b;
		REQUIRE(heap_name_recover("x", c, n, nullptr) == 0);
		REQUIRE(intact(c, n, 1));
		REQUIRE(held_now() == 0);
		heap_free(c);
		REQUIRE(in_use() == 0);
	}
	SECTION("recovered into memory of the program's own: the run that went on wins")
	{
		next_run(th);
		auto *b = static_cast<unsigned char *>(heap_name_alloc("x", n));
		REQUIRE(heap_name_recover("x", out.data(), n, nullptr) == 0);
		REQUIRE(intact(out.data(), n, 1));
		REQUIRE(held_now() == 1);	// not in the name's object: still held
		// the whole run reads what the name had when it started
		REQUIRE(heap_name_recover("x", out.data(), n, nullptr) == 0);
		REQUIRE(intact(out.data(), n, 1));
		fill(b, n, 2);	// the program went on from the copy
		next_run(th);	// and crashed
		auto *c = static_cast<unsigned char *>(heap_name_alloc("x", n));
		REQUIRE(held_now() == 1);
		REQUIRE(heap_name_recover("x", c, n, nullptr) == 0);
		REQUIRE(intact(c, n, 2));
		REQUIRE(held_now() == 0);
		heap_free(c);
		REQUIRE(in_use() == 0);
	}
	SECTION("a run that started after a clean exit goes on with its own object")
	{
		next_run(th);
		heap_name_after_crash(false);	// isCrashed() false: nothing to recover
		auto *b = static_cast<unsigned char *>(heap_name_alloc("x", n));
		REQUIRE(held_now() == 1);
		fill(b, n, 3);	// the program starts over in its new object
		next_run(th);	// and crashes later
		auto *c = static_cast<unsigned char *>(heap_name_alloc("x", n));
		REQUIRE(heap_name_recover("x", c, n, nullptr) == 0);
		REQUIRE(intact(c, n, 3));	// its data, not the older run's
		REQUIRE(held_now() == 0);
		REQUIRE(in_use() == heap_usable_size(c));
	}
	SECTION("a clean exit frees what is held; nvfree frees both objects")
	{
		next_run(th);
		auto *b = static_cast<unsigned char *>(heap_name_alloc("x", n));
		REQUIRE(held_now() == 1);
		heap_name_release_held();
		REQUIRE(held_now() == 0);
		REQUIRE(in_use() == heap_usable_size(b));
		REQUIRE(heap_name_recover("x", out.data(), n, nullptr) == 0);
		REQUIRE(std::all_of(out.begin(), out.end(), [](unsigned char ch) { return ch == 0; }));
		next_run(th);
		REQUIRE(heap_name_alloc("x", n) != nullptr);
		REQUIRE(held_now() == 1);
		heap_free(heap_name_get("x", nullptr));
		REQUIRE(held_now() == 0);
		REQUIRE(heap_name_get("x", nullptr) == nullptr);
		REQUIRE(in_use() == 0);
		(void)b;
	}
	SECTION("the program frees the held object itself: the name stays")
	{
		next_run(th);
		void *b = heap_name_alloc("x", n);
		heap_free(a);
		REQUIRE(held_now() == 0);
		REQUIRE(heap_name_get("x", nullptr) == b);
		REQUIRE(heap_name_recover("x", out.data(), n, nullptr) == 0);
		heap_free(b);
		REQUIRE(in_use() == 0);
	}
	SECTION("an object with another name is held, never freed under that name")
	{
		REQUIRE(heap_name_set("y", a) == 0);
		next_run(th);
		void *b = heap_name_alloc("x", n);
		REQUIRE(held_now() == 1);
		REQUIRE(heap_name_recover("x", b, n, nullptr) == 0);
		REQUIRE(held_now() == 0);
		REQUIRE(heap_name_get("y", nullptr) == a);
		REQUIRE(in_use() == heap_usable_size(a) + heap_usable_size(b));
		REQUIRE(intact(a, n, 1));
		heap_free(a);
		heap_free(b);
		REQUIRE(in_use() == 0);
	}
	SECTION("the size rule follows the object's requested size")
	{
		// 100 bytes in a 112-byte block: 101 is refused, the block's slack
		// is never handed out
		REQUIRE(heap_usable_size(a) > n);
		REQUIRE(heap_name_recover("x", out.data(), n + 1, nullptr) == -1);
		REQUIRE(errno == ERANGE);
		REQUIRE(std::string(err_get()).find("100 bytes") != std::string::npos);
		REQUIRE(heap_name_recover("x", nullptr, n + 1, nullptr) == -1);
		std::vector<unsigned char> big(n + 16, 0xee);
		REQUIRE(heap_name_recover("x", big.data(), n, nullptr) == 0);
		REQUIRE(intact(big.data(), n, 1));
		REQUIRE(big[n] == 0xee);	// exactly size bytes
		REQUIRE(heap_name_recover("x", big.data(), 10, nullptr) == 0);	// less: fine
		REQUIRE(heap_name_recover("nothing", big.data(), 1, nullptr) == -1);
		REQUIRE(errno == ENOENT);
		// after a rebind the held (old) object's size applies to the copy
		next_run(th);
		void *b = heap_name_alloc("x", 2 * n);
		big.assign(2 * n, 0);
		REQUIRE(heap_name_recover("x", big.data(), n + 1, nullptr) == -1);
		REQUIRE(errno == ERANGE);
		REQUIRE(heap_name_recover("x", nullptr, 2 * n, nullptr) == 0);	// the bound one
		// the old object's bytes into the bigger new object: recovered
		REQUIRE(heap_name_recover("x", b, n, nullptr) == 0);
		REQUIRE(held_now() == 0);
		REQUIRE(intact(b, n, 1));
	}
	SECTION("names of 127 bytes; 128 refused")
	{
		std::string longest(127, 'n'), too_long(128, 'n');
		REQUIRE(PMTHREADS_NAME_MAX == 128);
		void *p = heap_name_alloc(longest.c_str(), 8);
		REQUIRE(p != nullptr);
		REQUIRE(heap_name_get(longest.c_str(), nullptr) == p);
		errno = 0;
		REQUIRE(heap_name_alloc(too_long.c_str(), 8) == nullptr);
		REQUIRE(errno == EINVAL);
		REQUIRE(std::string(err_get()).find("longer than 127 bytes") != std::string::npos);
		REQUIRE(heap_name_recover(too_long.c_str(), nullptr, 0, nullptr) == -1);
		REQUIRE(errno == EINVAL);
		// a long name across a run, held and recovered
		memset(p, 0x77, 8);
		next_run(th);
		void *q = heap_name_alloc(longest.c_str(), 8);
		REQUIRE(heap_name_recover(longest.c_str(), q, 8, nullptr) == 0);
		REQUIRE(static_cast<unsigned char *>(q)[7] == 0x77);
	}
	SECTION("many held names: the table grows around them")
	{
		std::vector<void *> objs;
		for (int i = 0; i < 600; i++) {
			void *p = heap_name_alloc(("obj" + std::to_string(i)).c_str(), 24);
			REQUIRE(p != nullptr);
			fill(p, 24, 100 + i);
		}
		next_run(th);
		for (int i = 0; i < 600; i++)
			objs.push_back(heap_name_alloc(("obj" + std::to_string(i)).c_str(), 24));
		REQUIRE(held_now() == 600);	// 1201 nodes: the table grew past 512 buckets
		for (int i = 0; i < 600; i += 2) {
			REQUIRE(heap_name_recover(("obj" + std::to_string(i)).c_str(), objs[i], 24,
						  nullptr) == 0);
			REQUIRE(intact(objs[i], 24, 100 + i));
		}
		REQUIRE(held_now() == 300);
		heap_name_release_held();
		REQUIRE(held_now() == 0);
		for (int i = 1; i < 600; i += 2)
			REQUIRE(heap_name_get(("obj" + std::to_string(i)).c_str(), nullptr) == objs[i]);
	}
	REQUIRE(fase_depth() == 0);
}

TEST_CASE("names", "[heap]")
{
	test_heap th;
	void *a = heap_malloc(100), *b = heap_malloc(20000);
	REQUIRE(heap_name_set("alpha", a) == 0);
	REQUIRE(heap_name_set("beta", b) == 0);
	REQUIRE(heap_name_set("also-a", a) == 0);
	size_t usable = 0;
	REQUIRE(heap_name_get("alpha", &usable) == a);
	REQUIRE(usable == heap_usable_size(a));
	REQUIRE(heap_name_get("beta", &usable) == b);
	REQUIRE(usable == 20480);
	REQUIRE(heap_name_get("gamma", &usable) == nullptr);
	REQUIRE(usable == 0);

	std::string longest(PMTHREADS_NAME_MAX - 1, 'x'), too_long(PMTHREADS_NAME_MAX, 'x');
	REQUIRE(heap_name_set(longest.c_str(), b) == 0);
	REQUIRE(heap_name_get(longest.c_str(), nullptr) == b);
	REQUIRE(heap_name_set(too_long.c_str(), b) == -1);
	REQUIRE(errno == EINVAL);
	int local;
	REQUIRE(heap_name_set("stack", &local) == -1);

	// rebinding
	REQUIRE(heap_name_set("beta", a) == 0);
	REQUIRE(heap_name_get("beta", nullptr) == a);

	std::map<std::string, void *> seen;
	heap_name_foreach([](const char *name, void *p, size_t, void *arg) {
		(*static_cast<std::map<std::string, void *> *>(arg))[name] = p;
	}, &seen);
	REQUIRE(seen.size() == 4);
	REQUIRE(seen["alpha"] == a);
	REQUIRE(seen[longest] == b);

	heap_name_remove_ptr(a);	// drops alpha, also-a, beta
	REQUIRE(heap_name_get("alpha", nullptr) == nullptr);
	REQUIRE(heap_name_get("beta", nullptr) == nullptr);
	REQUIRE(heap_name_get(longest.c_str(), nullptr) == b);
	require_consistent();

	// many names: the table grows; each is found, removal by object works
	std::vector<void *> objs;
	for (int i = 0; i < 3000; i++) {
		objs.push_back(heap_malloc(32));
		REQUIRE(heap_name_set(("obj" + std::to_string(i)).c_str(), objs.back()) == 0);
	}
	for (int i = 0; i < 3000; i += 7)
		REQUIRE(heap_name_get(("obj" + std::to_string(i)).c_str(), nullptr) == objs[i]);
	require_consistent();
	for (int i = 0; i < 3000; i++) {
		heap_name_remove_ptr(objs[i]);
		heap_free(objs[i]);
	}
	REQUIRE(heap_name_get("obj5", nullptr) == nullptr);
	heap_name_remove_ptr(b);
	heap_free(a);
	heap_free(b);
	REQUIRE(in_use() == 0);
	require_consistent();
	REQUIRE(fase_depth() == 0);
}

namespace {
// A pointer-linked structure built in the heap.
struct list_node {
	list_node *next;
	uint64_t value;
};
struct tree_node {
	tree_node *left, *right;
	uint64_t key;
	char pad[40];
};

tree_node *tree_insert(tree_node *t, uint64_t key)
{
	if (t == nullptr) {
		auto *n = static_cast<tree_node *>(heap_calloc(1, sizeof(tree_node)));
		REQUIRE(n != nullptr);
		n->key = key;
		return n;
	}
	if (key < t->key)
		t->left = tree_insert(t->left, key);
	else
		t->right = tree_insert(t->right, key);
	return t;
}

void tree_keys(const tree_node *t, std::vector<uint64_t> &out)
{
	if (t == nullptr)
		return;
	tree_keys(t->left, out);
	out.push_back(t->key);
	tree_keys(t->right, out);
}

void tree_free(tree_node *t)
{
	if (t == nullptr)
		return;
	tree_free(t->left);
	tree_free(t->right);
	heap_free(t);
}
} // namespace

TEST_CASE("recovery: a snapshot taken at a quiescent point comes back whole", "[heap][recovery]")
{
	const size_t len = 128u << 20;
	test_heap th(len);
	std::mt19937_64 rng(7);
	std::vector<block> live;

	// Churn from several threads; some keep their cache slots (they never
	// call heap_thread_exit: a crash would catch them so).  Catch's macros
	// are not thread-safe: the threads count failures instead.
	std::atomic<int> failures{ 0 };
	auto churn = [&](std::vector<block> &keep, unsigned base_seed, bool exit_cleanly) {
		std::mt19937_64 r(base_seed);
		std::vector<block> tmp;
		unsigned s = base_seed;
		for (int i = 0; i < 3000; i++) {
			size_t size = random_size(r);
			void *p = heap_malloc(size);
			if (p == nullptr) {
				failures++;
				continue;
			}
			fill(p, size, ++s);
			(r() % 3 == 0 ? keep : tmp).push_back({ p, size, s });
			if (tmp.size() > 50) {
				for (auto &b : tmp)
					heap_free(b.p);
				tmp.clear();
			}
		}
		for (auto &b : tmp)
			heap_free(b.p);
		if (exit_cleanly)
			heap_thread_exit();
	};
	std::vector<block> kept[3];
	{
		std::thread t1(churn, std::ref(kept[0]), 1000u, false);
		std::thread t2(churn, std::ref(kept[1]), 2000u, true);
		t1.join();
		t2.join();
	}
	churn(kept[2], 3000u, false);
	REQUIRE(failures == 0);
	for (auto &k : kept)
		live.insert(live.end(), k.begin(), k.end());

	// a list and a tree, reached through names
	list_node *head = nullptr;
	for (uint64_t i = 0; i < 1000; i++) {
		auto *n = static_cast<list_node *>(heap_malloc(sizeof(list_node)));
		n->next = head;
		n->value = i;
		head = n;
	}
	REQUIRE(heap_name_set("list", head) == 0);
	tree_node *root = nullptr;
	std::vector<uint64_t> keys;
	for (int i = 0; i < 2000; i++) {
		uint64_t k = rng();
		keys.push_back(k);
		root = tree_insert(root, k);
	}
	std::sort(keys.begin(), keys.end());
	REQUIRE(heap_name_set("tree", root) == 0);

	// The quiescent point: no operation in progress; take the image.
	REQUIRE(fase_depth() == 0);
	require_consistent();
	uint64_t usage_at_snapshot = in_use();
	heap_stats snap_stats;
	heap_get_stats(&snap_stats);
	std::vector<char> image(snap_stats.bytes_mapped);
	memcpy(image.data(), th.base, image.size());

	// Keep going after the snapshot (this work is "lost in the crash").
	REQUIRE(live.size() > 200);
	for (size_t i = 0; i < 200; i++)
		heap_free(live[i].p);
	for (int i = 0; i < 5000; i++) {
		void *p = heap_malloc(random_size(rng));
		memset(p, 0xee, heap_usable_size(p));
	}
	heap_name_remove_ptr(head);

	// Crash: the range comes back as the image (pages above the image's
	// high-water mark were never used then: zero).
	memset(th.base, 0, len);
	memcpy(th.base, image.data(), image.size());
	REQUIRE(heap_init(th.base, len, false) == 0);
	require_consistent();	// dead threads' caches were handed back
	REQUIRE(in_use() == usage_at_snapshot);

	// Everything allocated at snapshot time is intact.
	for (auto &b : live)
		REQUIRE(intact(b.p, b.size, b.seed));
	auto *l = static_cast<list_node *>(heap_name_get("list", nullptr));
	REQUIRE(l == head);
	uint64_t expect = 999, count = 0;
	for (; l != nullptr; l = l->next, count++)
		REQUIRE(l->value == expect--);
	REQUIRE(count == 1000);
	std::vector<uint64_t> got;
	tree_keys(static_cast<tree_node *>(heap_name_get("tree", nullptr)), got);
	REQUIRE(got == keys);

	// New allocations never overlap what survived.
	std::vector<block> all = live;
	for (list_node *n = head; n != nullptr; n = n->next)
		all.push_back({ n, sizeof(*n), 0 });
	std::vector<block> fresh;
	for (int i = 0; i < 5000; i++) {
		size_t size = random_size(rng);
		void *p = heap_malloc(size);
		REQUIRE(p != nullptr);
		fill(p, size, 99);
		fresh.push_back({ p, size, 99 });
		all.push_back(fresh.back());
	}
	REQUIRE(disjoint(all));
	for (auto &b : live)
		REQUIRE(intact(b.p, b.size, b.seed));
	require_consistent();

	// No leak: freeing what was allocated since recovery brings usage
	// back to the snapshot's, and freeing everything to zero.
	for (auto &b : fresh)
		heap_free(b.p);
	REQUIRE(in_use() == usage_at_snapshot);
	for (auto &b : live)
		heap_free(b.p);
	for (list_node *n = head; n != nullptr;) {
		list_node *next = n->next;
		heap_free(n);
		n = next;
	}
	heap_name_remove_ptr(head);
	heap_name_remove_ptr(root);
	tree_free(root);
	REQUIRE(in_use() == 0);
	require_consistent();
}

TEST_CASE("recovery: the image adopted at another address works", "[heap][recovery]")
{
	const size_t len = 32u << 20;
	test_heap th(len);
	auto *p = static_cast<uint64_t *>(heap_malloc(1000));
	p[0] = 12345;
	REQUIRE(heap_name_set("p", p) == 0);
	void *other = map_range(len);
	memcpy(other, th.base, len);
	REQUIRE(heap_init(other, len, false) == 0);
	auto *q = static_cast<uint64_t *>(heap_name_get("p", nullptr));
	REQUIRE(q == (uint64_t *)((char *)other + ((char *)p - (char *)th.base)));
	REQUIRE(q[0] == 12345);
	require_consistent();
	heap_name_remove_ptr(q);
	heap_free(q);
	REQUIRE(in_use() == 0);
	require_consistent();
	munmap(other, len);
}

TEST_CASE("a full heap says which pool size would fit the request", "[heap]")
{
	const size_t len = 2u << 20;
	void *base = map_range(len);
	REQUIRE(base != nullptr);
	REQUIRE(heap_init(base, len, true) == 0);
	err_clear();
	errno = 0;
	CHECK(heap_malloc(3u << 20) == nullptr);
	CHECK(errno == ENOMEM);
	std::string msg = err_get();
	INFO(msg);
	CHECK(msg.find("the persistent heap is full") != std::string::npos);
	CHECK(msg.find("PMTHREADS_POOL_SIZE=8M") != std::string::npos);
	munmap(base, len);
}
