/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/persist and lib/recovery without crashes: what an epoch
// writes, how many fences it costs, which copy it uses, and that recovery
// brings the image back (crash behaviour is in test_crash.cpp).
#include "pool_test_util.h"

extern "C" {
#include "persist/nvm_log.h"
#include "persist/nvm_sim_test.h"
#include "persist/persist_test.h"
}

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

using namespace pooltest;

namespace {

void fill_random(unsigned char *p, size_t len, uint32_t seed)
{
	std::mt19937 rng(seed);
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(rng() | 1); // never 0: every line differs from a hole
}

uint64_t now_ns()
{
	return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
		       std::chrono::steady_clock::now().time_since_epoch())
		.count();
}

std::vector<uint64_t> all_pages(uint64_t n)
{
	std::vector<uint64_t> v(n);
	for (uint64_t i = 0; i < n; i++)
		v[i] = i;
	return v;
}

std::vector<unsigned char> recovered(const std::string &path, uint64_t npages, uint64_t *restored = nullptr)
{
	auto o = options(path, npages);
	o.create = false;
	pool *p = open_or_fail(o);
	shadow_buf out(npages * page_size());
	uint64_t r = recovery_restore_image(p, out.mem);
	if (restored)
		*restored = r;
	pool_close(p);
	return out.bytes();
}

// The write-back's view of each page: the image img of the whole heap.
struct image_source {
	const void *ctx[2];
	persist_source src;
	image_source(pool *p, const unsigned char *img) : ctx{ p, img }
	{
		src = { [](void *c, size_t, uint64_t page) -> const void * {
				auto **v = (const void **)c;
				return (const unsigned char *)v[1] + page * ((const pool *)v[0])->page_size;
			},
			[](void *, size_t, size_t) {}, (void *)ctx };
	}
	image_source(const image_source &) = delete;
};

} // namespace

TEST_CASE("an epoch writes exactly the lines that differ from the working copy", "[persist]")
{
	scratch_dir d;
	const uint64_t n = 16;
	std::string path = d.file("lines.pool");
	auto o = options(path, n);
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	fill_random(sh.mem, sh.len, 1);
	auto pages = all_pages(n);
	const uint64_t lines_per_page = page_size() / NVM_LINE;

	persist_stats st{};
	persist_epoch(p, sh.mem, pages.data(), n, &st);
	CHECK(st.pages == n);
	CHECK(st.lines_written == n * lines_per_page); // copy 0 was a hole
	CHECK(st.bytes_written == st.lines_written * NVM_LINE);
	CHECK(st.bytes_compared == n * page_size());
	CHECK(st.fences == 3);
	CHECK(*p->ver_d == 1);

	// Second epoch fills copy 1; now both copies hold the same image.
	persist_epoch(p, sh.mem, pages.data(), n, nullptr);

	// Change 1 line in page 3, 5 scattered lines in page 7, a run of 10
	// lines in page 11; page 9 is dirty but unchanged.
	sh.mem[3 * page_size() + 5] ^= 0xff;
	for (int l : { 0, 2, 17, 40, 63 })
		sh.mem[7 * page_size() + (size_t)l * NVM_LINE + 7] ^= 0x0f;
	for (int l = 20; l < 30; l++)
		sh.mem[11 * page_size() + (size_t)l * NVM_LINE] ^= 0x80;
	uint64_t dirty[] = { 3, 7, 9, 11 };
	persist_stats st3{};
	persist_epoch(p, sh.mem, dirty, 4, &st3);
	CHECK(st3.pages == 4);
	CHECK(st3.lines_written == 1 + 5 + 10);
	CHECK(st3.bytes_compared == 4 * page_size());
	CHECK(st3.fences == 3);
	CHECK(*p->ver_d == 3);
	pool_close(p);
	CHECK(recovered(o.path, n) == sh.bytes());
}

TEST_CASE("the fence count per epoch does not grow with the number of pages", "[persist]")
{
	scratch_dir d;
	const uint64_t n = 512;
	std::string path = d.file("fences.pool");
	auto o = options(path, n);
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	for (uint64_t count : { 1, 7, 64, 512 }) {
		fill_random(sh.mem, sh.len, (uint32_t)count);
		auto pages = all_pages(count);
		uint64_t f0 = p->nvm->stats.fences;
		persist_stats st{};
		persist_epoch(p, sh.mem, pages.data(), pages.size(), &st);
		CHECK(p->nvm->stats.fences - f0 == 3);
		CHECK(st.fences == 3);
	}
	pool_close(p);
}

TEST_CASE("the older copy becomes the working copy", "[persist]")
{
	scratch_dir d;
	std::string path = d.file("alt.pool");
	auto o = options(path, 4);
	pool *p = open_or_fail(o);
	shadow_buf sh(4 * page_size());
	uint64_t page2[] = { 2 }, page1[] = { 1 };
	persist_epoch(p, sh.mem, page2, 1, nullptr);
	CHECK((p->seq[2][0] == 1 && p->seq[2][1] == 0));
	persist_epoch(p, sh.mem, page2, 1, nullptr);
	CHECK((p->seq[2][0] == 1 && p->seq[2][1] == 2));
	persist_epoch(p, sh.mem, page1, 1, nullptr);
	persist_epoch(p, sh.mem, page2, 1, nullptr);
	CHECK((p->seq[2][0] == 4 && p->seq[2][1] == 2));
	CHECK((p->seq[1][0] == 3 && p->seq[1][1] == 0));
	// An invalidated copy is reused first, even when it is the newer one.
	p->seq[2][0] = POOL_SEQ_INVALID;
	persist_epoch(p, sh.mem, page2, 1, nullptr);
	CHECK((p->seq[2][0] == 5 && p->seq[2][1] == 2));
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	pool_close(p);
}

// The seq table's extent grows from two threads: an application thread
// reserving heap (pool_reserve, under the heap's growth lock) and the epoch
// thread writing the seq entry of a page past it (persist_epoch).  Both go
// through pool_seq_pages_raise: under ThreadSanitizer (the tsan suite runs
// this case) the two plain stores that did this before were a data race.
TEST_CASE("the seq table's extent grows from the heap and the epoch thread at once", "[persist][race]")
{
	scratch_dir d;
	const uint64_t n = 256;
	std::string path = d.file("grow.pool");
	auto o = options(path, n);
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	std::atomic<int> reserve_failures{ 0 };	// Catch's macros are not for other threads
	std::thread heap([p, &reserve_failures] {
		for (uint64_t end = 1; end <= n; end++)
			if (pool_reserve(p, end - 1, end) != 0)
				reserve_failures++;
	});
	for (uint64_t i = n; i-- > 0;) {
		uint64_t page[] = { i };
		REQUIRE(persist_epoch(p, sh.mem, page, 1, nullptr) == 0);
		CHECK(pool_valid_copy(p, i) >= 0);
	}
	heap.join();
	CHECK(reserve_failures == 0);
	CHECK(pool_seq_pages(p) == n);
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	pool_close(p);
}

TEST_CASE("a page listed twice is persisted once", "[persist]")
{
	scratch_dir d;
	std::string path = d.file("dup.pool");
	auto o = options(path, 4);
	pool *p = open_or_fail(o);
	shadow_buf sh(4 * page_size());
	memset(sh.mem + 2 * page_size(), 7, 100);
	uint64_t pages[] = { 2, 0, 2 };
	persist_stats st{};
	persist_epoch(p, sh.mem, pages, 3, &st);
	CHECK(st.pages == 2);
	CHECK((p->seq[2][0] == 1 && p->seq[2][1] == 0));
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	pool_close(p);
	CHECK(recovered(o.path, 4) == sh.bytes());
}

TEST_CASE("every backend persists and recovers the same image", "[persist][nvm]")
{
	scratch_dir d;
	const uint64_t n = 32;
	auto kind = GENERATE(NVM_MSYNC, NVM_PMEM, NVM_SIM, NVM_AUTO);
	INFO("backend " << config_nvm_name(kind));
	std::string path = d.file("b.pool");
	auto o = options(path, n);
	o.nvm = kind;
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	std::mt19937 rng(42);
	for (int epoch = 0; epoch < 6; epoch++) {
		std::vector<uint64_t> pages;
		for (uint64_t i = 0; i < n; i++)
			if (rng() % 3 == 0) {
				pages.push_back(i);
				size_t off = i * page_size() + (rng() % (page_size() - 200));
				fill_random(sh.mem + off, 1 + rng() % 200, rng());
			}
		persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr);
	}
	if (kind == NVM_SIM) {
		// Strict: everything the epochs wrote reached the simulated media
		// (all but the advisory holder pid, which is never flushed).
		auto media = static_cast<const unsigned char *>(nvm_sim_media(p->nvm));
		auto base = static_cast<const unsigned char *>(p->nvm->base);
		REQUIRE(media != nullptr);
		CHECK(memcmp(media + p->seq_off, base + p->seq_off, p->file_size - p->seq_off) == 0);
		// Both version records (VER_d, clean flag), at offsets 1024 and 1088.
		CHECK(memcmp(media + 1024, base + 1024, 128) == 0);
	}
	CHECK(p->nvm->stats.errors == 0);
	pool_close(p);
	CHECK(recovered(o.path, n) == sh.bytes());
}

TEST_CASE("emulated NVM latency is charged per flushed line", "[persist][nvm]")
{
	scratch_dir d;
	std::string path = d.file("lat.pool");
	auto o = options(path, 4);
	o.latency_ns = 20000;
	pool *p = open_or_fail(o);
	shadow_buf sh(4 * page_size());
	fill_random(sh.mem, page_size(), 3);
	uint64_t page0[] = { 0 };
	uint64_t t0 = now_ns();
	persist_stats st{};
	persist_epoch(p, sh.mem, page0, 1, &st);
	uint64_t ns = now_ns() - t0;
	// 64 data lines + the seq line + the VER_d line.
	CHECK(st.lines_written == page_size() / NVM_LINE);
	CHECK(ns >= (st.lines_written + 2) * 20000);
	pool_close(p);
}

TEST_CASE("recovery of a never-written pool touches no page", "[recover]")
{
	scratch_dir d;
	const uint64_t n = 1 << 16; // 256 MiB of heap, all holes
	std::string path = d.file("sparse.pool");
	auto o = options(path, n);
	pool_close(open_or_fail(o));
	o.create = false;
	pool *p = open_or_fail(o);
	shadow_buf out(4 * page_size());
	// Pages never persisted must not be written: recovering into a buffer
	// of only 4 pages would overflow if any were.
	uint64_t t0 = now_ns();
	CHECK(recovery_restore_image(p, out.mem) == 0);
	INFO("recovery of " << n << " empty pages took " << (now_ns() - t0) / 1000 << " us");
	CHECK(persist_invalidate_torn(p) == 0);
	pool_close(p);
}

TEST_CASE("recovery restores only the pages that were persisted", "[recover]")
{
	scratch_dir d;
	const uint64_t n = 8;
	std::string path = d.file("part.pool");
	auto o = options(path, n);
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	fill_random(sh.mem + 2 * page_size(), page_size(), 9);
	fill_random(sh.mem + 6 * page_size(), page_size(), 10);
	uint64_t pages[] = { 6, 2 };
	persist_epoch(p, sh.mem, pages, 2, nullptr);
	pool_close(p);

	o.create = false;
	p = open_or_fail(o);
	shadow_buf out(n * page_size());
	memset(out.mem, 0xab, out.len); // marks pages that recovery leaves alone
	CHECK(recovery_restore_image(p, out.mem) == 2);
	for (uint64_t i = 0; i < n; i++) {
		INFO("page " << i);
		if (i == 2 || i == 6)
			CHECK(memcmp(out.mem + i * page_size(), sh.mem + i * page_size(), page_size()) == 0);
		else
			CHECK(out.mem[i * page_size()] == 0xab);
	}
	pool_close(p);
}

TEST_CASE("a torn copy is invalidated durably and never comes back", "[recover]")
{
	scratch_dir d;
	const uint64_t n = 4;
	std::string path = d.file("torn.pool");
	auto o = options(path, n);
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	shadow_buf sh(n * page_size());
	memset(sh.mem + page_size(), 0x11, page_size());
	uint64_t page1[] = { 1 }, page3[] = { 3 };
	persist_epoch(p, sh.mem, page1, 1, nullptr); // copy 0, seq 1
	// What a crash in the middle of epoch 2 leaves: the other copy carries
	// seq 2 > VER_d and half-written data.
	p->seq[1][1] = 2;
	memset(pool_copy(p, 1, 1), 0xee, page_size() / 2);
	pool_close(p);

	o.create = false;
	SECTION("through recovery_restore_image")
	{
		p = open_or_fail(o);
		shadow_buf out(n * page_size());
		CHECK(recovery_restore_image(p, out.mem) == 1);
		CHECK(out.bytes() == sh.bytes());
		CHECK(p->seq[1][1] == POOL_SEQ_INVALID);
		pool_close(p);
	}
	// Either way, the next epoch reuses VER_d + 1 = 2 for other pages; had
	// the torn copy kept seq 2 it would now be valid and newest.
	p = open_or_fail(o);
	memset(sh.mem + 3 * page_size(), 0x33, page_size());
	persist_epoch(p, sh.mem, page3, 1, nullptr);
	CHECK(*p->ver_d == 2);
	CHECK(p->seq[1][1] == POOL_SEQ_INVALID);
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	pool_close(p);
	CHECK(recovered(o.path, n) == sh.bytes());

	// The invalid copy is the next working copy of its page.
	p = open_or_fail(o);
	memset(sh.mem + page_size(), 0x12, 64);
	persist_epoch(p, sh.mem, page1, 1, nullptr);
	CHECK((p->seq[1][0] == 1 && p->seq[1][1] == 3));
	pool_close(p);
	CHECK(recovered(o.path, n) == sh.bytes());
}

namespace {

// Every copy an epoch made valid, and every copy of the attempt at VER_d + 1
// (an unpublished one), has the checksum of its bytes in the sum table.
void require_sums_match(pool *p)
{
	for (uint64_t i = 0; i < p->seq_pages; i++)
		for (int c = 0; c < 2; c++) {
			uint64_t s = p->seq[i][c];
			if (s == 0 || s == POOL_SEQ_INVALID || s > *p->ver_d + 1)
				continue;
			INFO("page " << i << " copy " << c << " seq " << s << " VER_d " << *p->ver_d);
			REQUIRE(p->sum[i][c] == pool_page_sum(p, i, pool_copy(p, i, c)));
		}
}

// A word or a few of some lines of some pages, as a program's stores do.
void store_words(std::mt19937_64 &rng, shadow_buf &sh, uint64_t npages)
{
	int stores = 1 + (int)(rng() % 40);
	for (int k = 0; k < stores; k++) {
		size_t word = rng() % (npages * page_size() / 8);
		uint64_t v = rng() % 3 == 0 ? 0 : rng();
		memcpy(sh.mem + 8 * word, &v, 8);
	}
}

} // namespace

TEST_CASE("the write-back keeps every copy's checksum the sum of its bytes", "[persist][checksum]")
{
	scratch_dir d;
	const uint64_t n = 16;
	std::string path = d.file("sums.pool");
	auto o = options(path, n);
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	shadow_buf sh(n * page_size());
	auto pages = all_pages(n);
	std::mt19937_64 rng(2411);
	for (int round = 0; round < 4; round++) {
		for (int e = 0; e < 40; e++) {
			store_words(rng, sh, n);
			// Only some pages listed: copies of different ages.
			std::vector<uint64_t> list;
			for (uint64_t i : pages)
				if (rng() % 3 != 0)
					list.push_back(i);
			REQUIRE(persist_epoch(p, sh.mem, list.data(), list.size(), nullptr) == 0);
			require_sums_match(p);
		}
		// A later process: the valid copies' sums are where updates start.
		// Round 2 also leaves a torn copy whose sum entry is another
		// attempt's (nonzero, wrong): invalidated, it must be summed afresh
		// when it is next written, not updated.
		if (round == 2) {
			int c = 1 - pool_valid_copy(p, 5);
			p->seq[5][c] = *p->ver_d + 1;
			memset(pool_copy(p, 5, c), 0x5a, page_size() / 3);
			p->sum[5][c] = 12345;
		}
		pool_close(p);
		o.create = false;
		p = open_or_fail(o);
		CHECK(recovery_restore_image(p, sh.mem) > 0);
	}
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	pool_close(p);
	CHECK(recovered(o.path, n) == sh.bytes());
}

TEST_CASE("a live image changing under the write-back cannot make a checksum disagree with its copy",
	  "[persist][checksum][live]")
{
	// The epoch pipeline may read a page the program is writing (persist.h):
	// that read is not published, but the copy it wrote is the base of the
	// next update of its checksum, so the sum must describe the bytes
	// written, whatever the image held at any other moment.
	scratch_dir d;
	const uint64_t n = 4;
	std::string path = d.file("live.pool");
	auto o = options(path, n);
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	auto pages = all_pages(n);
	std::atomic<bool> stop{ false };
	std::thread writer([&] {
		std::mt19937_64 rng(5);
		auto *words = reinterpret_cast<std::atomic<uint64_t> *>(sh.mem);
		while (!stop.load(std::memory_order_relaxed))
			words[rng() % (n * page_size() / 8)].store(rng(), std::memory_order_relaxed);
	});
	for (int e = 0; e < 300; e++) {
		persist_attempt a;
		persist_attempt_begin(&a, p, pages.data(), pages.size());
		const void *ctx[2] = { p, sh.mem };
		persist_source src = {
			[](void *c, size_t, uint64_t page) -> const void * {
				auto **v = static_cast<const void **>(c);
				return static_cast<const unsigned char *>(v[1]) + page * page_size();
			},
			[](void *, size_t, size_t) {}, ctx
		};
		persist_attempt_write(&a, &src, pages.data(), pages.size());
		// Every other attempt is left unpublished and redone, as the
		// pipeline does with a read it cannot trust.
		REQUIRE(persist_attempt_end(&a, e % 2 == 1, nullptr) == 0);
		require_sums_match(p);
	}
	stop = true;
	writer.join();
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	pool_close(p);
}

// What the runtime asks of a backend it asks through nvm.h (epoch.c's
// population, runtime.c's memory limits, persist.c's undo area): each
// backend's answers, and the undo area sized as it always was on the log
// (the ring's size and a page).
TEST_CASE("each backend says through nvm.h whether it is memory-like, how much of its mapping is "
	  "private and how large a group may grow", "[persist][nvm]")
{
	scratch_dir d;
	const uint64_t n = 32;
	auto kind = GENERATE(NVM_MSYNC, NVM_PMEM, NVM_SIM, NVM_LOG);
	INFO("backend " << config_nvm_name(kind));
	std::string path = d.file("q.pool");
	auto o = options(path, n);
	o.nvm = kind;
	pool *p = open_or_fail(o);
	CHECK(std::string(nvm_name(p->nvm)) == config_nvm_name(kind));
	CHECK(nvm_is_memory_like(p->nvm) == (kind == NVM_PMEM));
	CHECK(nvm_private_bytes(p->nvm) == (kind == NVM_LOG ? p->nvm->len : 0));
	CHECK(nvm_group_room_max(p->nvm) == (kind == NVM_LOG ? p->log_size / 2 : 0));
	REQUIRE(persist_reserve_memory(p) == 0);
	if (kind == NVM_LOG) {
		CHECK(p->undo_cap == p->log_size + 4096);
		CHECK(nvm_group_room(p->nvm) <= nvm_group_room_max(p->nvm));
	} else {
		CHECK(p->undo == nullptr);
	}
	pool_close(p);

	// A pool opened for a backend other than the log: the log's
	// private mapping until accepted, that backend's shared one after.
	if (kind != NVM_LOG && kind != NVM_SIM) {
		o.accept_later = true;
		p = open_or_fail(o);
		CHECK(std::string(nvm_name(p->nvm)) == "log");
		CHECK(nvm_private_bytes(p->nvm) == p->nvm->len);
		CHECK_FALSE(nvm_is_memory_like(p->nvm));
		REQUIRE(pool_accept(p) == 0);
		CHECK(std::string(nvm_name(p->nvm)) == config_nvm_name(kind));
		CHECK(nvm_private_bytes(p->nvm) == 0);
		CHECK(nvm_is_memory_like(p->nvm) == (kind == NVM_PMEM));
		CHECK(nvm_group_room_max(p->nvm) == 0);
		pool_close(p);
	}
}

// The log backend keeps everything between two fences all-or-nothing
// (nvm_group_room), so a page with a valid copy is rewritten there: each
// changed line is written once, not into each copy in turn.  An attempt so
// written that is not published puts every byte back.
TEST_CASE("on the log backend the write-back rewrites valid copies in place, and puts back an "
	  "unpublished attempt", "[persist][log]")
{
	scratch_dir d;
	const uint64_t n = 32;
	std::string path = d.file("inplace.pool");
	auto o = options(path, n);
	o.nvm = NVM_LOG;
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	fill_random(sh.mem, sh.len, 5);
	auto pages = all_pages(n);
	persist_stats st{};
	// Epoch 1: no page has a valid copy yet: working copies, as ever.
	REQUIRE(persist_epoch(p, sh.mem, pages.data(), n, &st) == 0);
	CHECK(st.pages_in_place == 0);
	// Epoch 2: one line of every even page, in place in copy 0.
	for (uint64_t i = 0; i < n; i += 2)
		sh.mem[i * page_size() + 64 * (i % 64) + 3] ^= 0x5a;
	std::vector<uint64_t> even;
	for (uint64_t i = 0; i < n; i += 2)
		even.push_back(i);
	persist_stats st2{};
	uint64_t log0 = p->nvm->stats.log_bytes;
	REQUIRE(persist_epoch(p, sh.mem, even.data(), even.size(), &st2) == 0);
	CHECK(st2.pages_in_place == even.size());
	CHECK(st2.lines_written == even.size());
	for (uint64_t i : even) {
		CHECK((p->seq[i][0] == 1 && p->seq[i][1] == 0));	// no working copy chosen
		CHECK(memcmp(pool_copy(p, i, 0), sh.mem + i * page_size(), page_size()) == 0);
	}
	// A line and a checksum entry per page, a few record heads: nothing of
	// the other copy (in turns, a page's second epoch rewrites the whole
	// page into copy 1).
	CHECK(p->nvm->stats.log_bytes - log0 < even.size() * (72 + 16) + 1024);
	CHECK(pool_check(p, nullptr, nullptr) == 0);

	// An attempt that is not published: copies and checksums as they were.
	std::vector<unsigned char> before(pool_copy(p, 0, 0), pool_copy(p, 0, 0) + 2 * page_size());
	uint64_t sum0 = p->sum[4][0];
	shadow_buf sh3(n * page_size());
	memcpy(sh3.mem, sh.mem, sh.len);
	for (uint64_t i : even)
		sh3.mem[i * page_size() + 100] ^= 0x33;
	uint64_t logged = p->nvm->stats.log_bytes;
	persist_attempt e;
	persist_attempt_begin(&e, p, even.data(), even.size());
	CHECK(e.in_place);
	image_source src(p, sh3.mem);
	persist_attempt_write(&e, &src.src, even.data(), even.size());
	CHECK(memcmp(pool_copy(p, 4, 0), sh3.mem + 4 * page_size(), page_size()) == 0);
	persist_stats st3{};
	REQUIRE(persist_attempt_end(&e, false, &st3) == 0);
	CHECK(e.reverted);
	CHECK(st3.attempts_reverted == 1);
	// Nothing of it reached the log: every page was rewritten in place
	// (no seq order), and the put-back withdrew its flushes.
	CHECK(p->nvm->stats.log_bytes == logged);
	CHECK(*p->ver_d == 2);
	CHECK(p->sum[4][0] == sum0);
	CHECK(std::vector<unsigned char>(pool_copy(p, 0, 0), pool_copy(p, 0, 0) + 2 * page_size()) ==
	      before);
	for (uint64_t i : even)
		CHECK(memcmp(pool_copy(p, i, 0), sh.mem + i * page_size(), page_size()) == 0);
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	// Its group is committed by the next publication, which lists its pages
	// too: the image of that epoch, after a crash as well.
	REQUIRE(persist_epoch(p, sh3.mem, even.data(), even.size(), nullptr) == 0);
	CHECK(*p->ver_d == 3);
	p->read_only = true;	// the crash: no clean close
	pool_abandon(p);
	CHECK(recovered(path, n) == sh3.bytes());
}

// Why the put-back matters: a later attempt too large to stay in the log is
// written through, checkpointing the mapping into the file -- which must not
// carry what an unpublished in-place attempt overwrote by then.
TEST_CASE("an unpublished in-place attempt is put back before a later group is written through",
	  "[persist][log]")
{
	scratch_dir d;
	const uint64_t n = 64;
	std::string path = d.file("through.pool");
	auto o = options(path, n);
	o.nvm = NVM_LOG;
	o.log_size = 256 << 10;	// the smallest ring: half of it is 32 pages
	pool *p = open_or_fail(o);
	// Line by line only: B's pages, every line changed, would be written
	// whole (persist.h), never in place nor through the log.
	p->whole_min = SIZE_MAX;
	shadow_buf sh(n * page_size());
	fill_random(sh.mem, sh.len, 9);
	auto pages = all_pages(n);
	REQUIRE(persist_epoch(p, sh.mem, pages.data(), n, nullptr) == 0);
	const std::vector<unsigned char> durable = sh.bytes();
	auto attempt = [&](const std::vector<uint64_t> &list, const unsigned char *img) {
		persist_attempt e;
		persist_attempt_begin(&e, p, list.data(), list.size());
		image_source src(p, img);
		persist_attempt_write(&e, &src.src, list.data(), list.size());
		REQUIRE(persist_attempt_end(&e, false, nullptr) == 0);
		return e;
	};
	// A: a line of 8 pages, in place, not published.
	std::vector<uint64_t> a = { 1, 3, 5, 7, 9, 11, 13, 15 };
	for (uint64_t i : a)
		sh.mem[i * page_size() + 200] ^= 0x11;
	persist_attempt ea = attempt(a, sh.mem);
	CHECK(ea.in_place);
	CHECK(ea.reverted);
	// B: every line of 40 pages: working copies, written through.
	std::vector<uint64_t> b;
	for (uint64_t i = 20; i < 60; i++)
		b.push_back(i);
	fill_random(sh.mem + 20 * page_size(), 40 * page_size(), 10);
	uint64_t through0 = p->nvm->stats.writes_through;
	// Chosen in place from what A logged per page, B outgrows the room:
	// put back as it would, and the next attempt takes working copies.
	persist_attempt eb = attempt(b, sh.mem);
	CHECK(eb.in_place);
	CHECK(eb.reverted);
	CHECK(p->nvm->stats.writes_through == through0);
	eb = attempt(b, sh.mem);
	CHECK_FALSE(eb.in_place);
	CHECK(p->nvm->stats.writes_through > through0);
	// The crash: neither was published.
	p->read_only = true;
	pool_abandon(p);
	CHECK(recovered(path, n) == durable);
}

// Whole pages (persist.h): on the log backend a page most of whose lines
// change is written whole, straight into its working copy -- never compared,
// logged or checkpointed -- and compared now and then to learn whether it
// still changes that much; a page that changes little goes line by line.
TEST_CASE("on the log backend pages that change whole are written whole, the others line by line",
	  "[persist][log][whole]")
{
	scratch_dir d;
	const uint64_t n = 64;
	std::string path = d.file("whole.pool");
	auto o = options(path, n);
	o.nvm = NVM_LOG;
	o.log_size = 4 << 20;	// a comparison of every line stays in place
	pool *p = open_or_fail(o);
	REQUIRE(nvm_has_direct(p->nvm));
	shadow_buf sh(n * page_size());
	auto pages = all_pages(n);
	const uint64_t lines = page_size() / NVM_LINE;
	uint32_t seed = 40;
	// One epoch: every line of every page changed (or one line of each),
	// persisted; what it wrote whole, and the image it leaves.
	auto epoch = [&](bool every_line) {
		if (every_line)
			fill_random(sh.mem, sh.len, seed++);
		else
			for (uint64_t i = 0; i < n; i++)
				sh.mem[i * page_size() + 64 * (seed % lines) + 5] ^= 0x21;
		seed++;
		persist_stats st{};
		uint64_t direct0 = p->nvm->stats.direct_bytes, log0 = p->nvm->stats.log_bytes;
		REQUIRE(persist_epoch(p, sh.mem, pages.data(), n, &st) == 0);
		INFO("epoch " << *p->ver_d);
		CHECK(p->nvm->stats.direct_bytes - direct0 == st.pages_whole * page_size());
		if (st.pages_whole == n)	// the seq and sum entries only, no page
			CHECK(p->nvm->stats.log_bytes - log0 < n * 64 + 4096);
		CHECK(pool_check(p, nullptr, nullptr) == 0);
		return st;
	};
	// Never persisted (a run of pages): whole.  Then compared line by line
	// (in place): every line, heavy.  Whole three times, then whole and
	// compared (read-only) with the valid copy -- one line of each now.
	persist_stats st = epoch(true);
	CHECK(st.pages_whole == n);
	CHECK(st.bytes_compared == 0);
	st = epoch(true);
	CHECK(st.pages_whole == 0);
	CHECK(st.lines_written == n * lines);
	for (int k = 0; k < 3; k++)
		CHECK(epoch(true).pages_whole == n);
	st = epoch(false);
	CHECK(st.pages_whole == n);
	// Changing little now: line by line, in place, whatever comes.
	for (int k = 0; k < 3; k++) {
		st = epoch(false);
		CHECK(st.pages_whole == 0);
		CHECK(st.lines_written == n);
		CHECK(st.pages_in_place == n);
	}
	// Changing whole again: compared first (every line, in place), then
	// whole.
	st = epoch(true);
	CHECK(st.pages_whole == 0);
	CHECK(st.lines_written == n * lines);
	CHECK(epoch(true).pages_whole == n);
	// Fewer such pages than an attempt's two extra device flushes are worth
	// (PERSIST_WHOLE_MIN): line by line.
	std::vector<uint64_t> few(pages.begin(), pages.begin() + PERSIST_WHOLE_MIN - 1);
	fill_random(sh.mem, few.size() * page_size(), seed++);
	persist_stats sf{};
	REQUIRE(persist_epoch(p, sh.mem, few.data(), few.size(), &sf) == 0);
	CHECK(sf.pages_whole == 0);
	CHECK(sf.lines_written == few.size() * lines);
	const std::vector<unsigned char> image = sh.bytes();
	pool_close(p);
	CHECK(recovered(path, n) == image);
}

// A copy written whole must not be overwritten by a replay of records that
// touched it earlier: in a format-7 pool a reload follows them (nvm_log.h),
// so the copy is written whole all the same, and a replay from before the
// next checkpoint finds it as written.
TEST_CASE("a copy the log still holds records for is written whole, and replayed as written",
	  "[persist][log][whole]")
{
	scratch_dir d;
	const uint64_t n = 64;
	std::string path = d.file("refused.pool");
	auto o = options(path, n);
	o.nvm = NVM_LOG;
	o.log_size = 4 << 20;	// no checkpoint but the test's
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	auto pages = all_pages(n);
	auto every_line = [&](uint32_t seed) { fill_random(sh.mem, sh.len, seed); };
	auto one_line = [&](uint32_t seed) {
		for (uint64_t i = 0; i < n; i++)
			sh.mem[i * page_size() + 64 * (seed % 64) + 7] ^= 0x42;
	};
	auto epoch = [&](persist_stats *st) {
		REQUIRE(persist_epoch(p, sh.mem, pages.data(), n, st) == 0);
	};
	// 1: never persisted, whole into copy 0.  2: whole into copy 1,
	// compared: one line each, light.  3: one line each, in place into
	// copy 1 (logged).  4: every line, in place into copy 1 again, heavy.
	// 5: whole into copy 0 (no record touched it).
	every_line(60);
	epoch(nullptr);
	one_line(61);
	epoch(nullptr);
	one_line(62);
	epoch(nullptr);
	every_line(63);
	epoch(nullptr);
	every_line(64);
	persist_stats st5{};
	epoch(&st5);
	CHECK(st5.pages_whole == n);
	// 6 wants copy 1, which the records of 3 and 4 touched: written whole
	// with a reload after them.
	every_line(70);
	persist_stats st{};
	epoch(&st);
	CHECK(st.pages_whole == n);
	CHECK(st.whole_refused == 0);
	// The file as a crash now would leave it: its replay brings epoch 6.
	std::string crashed = d.file("crashed.pool");
	copy_file(path, crashed);
	CHECK(recovered(crashed, n) == sh.bytes());
	REQUIRE(nvm_log_checkpoint(p->nvm) == 0);
	every_line(71);
	persist_stats st7{};
	epoch(&st7);
	CHECK(st7.whole_refused == 0);
	CHECK(st7.pages_whole == n);
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	const std::vector<unsigned char> image = sh.bytes();
	// As a crash leaves it: the replay finds every epoch's pages.
	p->read_only = true;
	pool_abandon(p);
	CHECK(recovered(path, n) == image);
}

// Whole pages reach the file asynchronously (nvm_log_direct.c); the mapping
// reads what they wrote from the next order or fence on (nvm.h).  An
// attempt that is not published, then its redo comparing the same copies
// line by line at once: the comparison must see the pages written whole, or
// the checksum it updates from them describes other bytes.
TEST_CASE("an unpublished attempt's whole pages are what its redo compares", "[persist][log][whole]")
{
	scratch_dir d;
	const uint64_t n = 2048;
	std::string path = d.file("redo.pool");
	auto o = options(path, n);
	o.nvm = NVM_LOG;
	o.log_size = 32 << 20;
	pool *p = open_or_fail(o);
	shadow_buf sh(n * page_size());
	auto pages = all_pages(n);
	for (int round = 0; round < 4; round++) {
		INFO("round " << round);
		fill_random(sh.mem, sh.len, 80 + (uint32_t)round);
		// A: every page whole, not published.
		p->whole_min = 0;
		for (uint64_t i = 0; i < n; i++)
			REQUIRE(persist_test_hint_whole(p, i));
		persist_attempt e;
		persist_attempt_begin(&e, p, pages.data(), n);
		image_source src(p, sh.mem);
		persist_attempt_write(&e, &src.src, pages.data(), n);
		REQUIRE(persist_attempt_end(&e, false, nullptr) == 0);
		CHECK(e.st.pages_whole == n);
		// Its redo, line by line, with a line of each page changed since.
		for (uint64_t i = 0; i < n; i++)
			sh.mem[i * page_size() + 64 * (i % 64)] ^= 0x33;
		p->whole_min = SIZE_MAX;
		persist_stats st{};
		REQUIRE(persist_epoch(p, sh.mem, pages.data(), n, &st) == 0);
		CHECK(st.pages_whole == 0);
		CHECK(pool_check(p, nullptr, nullptr) == 0);
		// The redo's records checkpointed: the next A's copies may be
		// written whole again.
		REQUIRE(nvm_log_checkpoint(p->nvm) == 0);
	}
	const std::vector<unsigned char> image = sh.bytes();
	pool_close(p);
	CHECK((recovered(path, n) == image));	// (not printed: 8 MiB)
}

// An in-place attempt put back (persist.h) leaves the pages it wrote whole as
// the file holds them, their checksums as they were: those are forgotten
// (summed afresh by the next write-back) -- also for a page whose probe in
// that attempt found it changing little, so that its redo goes line by line
// and updates the checksum from the lines it compares.
TEST_CASE("a put-back attempt's whole pages are summed afresh by its redo, probed or not",
	  "[persist][log][whole]")
{
	scratch_dir d;
	const uint64_t n = 64;
	std::string path = d.file("putback.pool");
	auto o = options(path, n);
	o.nvm = NVM_LOG;
	o.log_size = 4 << 20;
	pool *p = open_or_fail(o);
	p->whole_min = 1;
	shadow_buf sh(n * page_size());
	auto pages = all_pages(n);
	// Epochs 1 and 2 whole: copy 0, then copy 1, each with its checksum.
	for (uint32_t e = 0; e < 2; e++) {
		fill_random(sh.mem, sh.len, 90 + e);
		for (uint64_t i = 0; i < n; i++)
			REQUIRE(persist_test_hint(p, i, PERSIST_TEST_WHOLE));
		REQUIRE(persist_epoch(p, sh.mem, pages.data(), n, nullptr) == 0);
	}
	// A line of every page.  Pages 0-31 written whole into copy 0 and
	// probed (a line changed: light from now on); pages 32-63 in place into
	// copy 1.  Not published: put back.
	for (uint64_t i = 0; i < n; i++) {
		sh.mem[i * page_size() + 64 * (i % 64) + 1] ^= 0x5c;
		REQUIRE(persist_test_hint(p, i, i < 32 ? PERSIST_TEST_WHOLE_PROBE : PERSIST_TEST_LIGHT));
	}
	persist_attempt e;
	persist_attempt_begin(&e, p, pages.data(), n);
	image_source src(p, sh.mem);
	persist_attempt_write(&e, &src.src, pages.data(), n);
	REQUIRE(persist_attempt_end(&e, false, nullptr) == 0);
	CHECK(e.st.pages_whole == 32);
	CHECK(e.st.pages_in_place == 32);
	CHECK(e.reverted);
	// The redo lists them all (epoch.c's redo list); pages 0-31 now line by
	// line into the copy 0 the attempt wrote whole.
	persist_stats st{};
	REQUIRE(persist_epoch(p, sh.mem, pages.data(), n, &st) == 0);
	CHECK(st.pages_whole == 0);
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	const std::vector<unsigned char> image = sh.bytes();
	pool_close(p);
	CHECK(recovered(path, n) == image);
}
