/* SPDX-License-Identifier: BSD-3-Clause */
// Lazy restore (lib/recovery/restore.c): the heap served from the pool on first touch
// through the uffd tracker's userfaultfd, with a background pass; and the
// eager path with the mprotect tracker.  Checked against the pool's
// consistent image (recovery_read_page), and against the tracker: restored pages
// are clean, writes after the restore are collected.
#include "pool_test_util.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <sys/mman.h>
#include <thread>

extern "C" {
#include "recovery/restore.h"
#include "track/tracker.h"
}

using namespace pooltest;

namespace {

const uint64_t kPages = 1024;

using image = std::vector<unsigned char>;

// A pool of kPages whose persisted pages have copies on both sides, some
// pages never persisted (zeros), and a torn copy left by an interrupted
// epoch (seq VER_d + 1, garbage) that recovery must not serve.
struct fixture {
	scratch_dir dir;
	std::string path;
	image img;	// the consistent image
	uint64_t limit = 0, persisted = 0;
	fixture() : path(dir.file("r.pool"))
	{
		const size_t ps = page_size();
		auto o = options(path, kPages);
		pool *p = open_or_fail(o);
		img.assign(kPages * ps, 0);
		std::mt19937 rng(7);
		std::vector<uint64_t> all;
		for (uint64_t i = 0; i < 900; i++)
			if (i % 7 != 3) // every 7th page never persisted
				all.push_back(i);
		for (int e = 0; e < 3; e++) {
			std::vector<uint64_t> dirty;
			for (uint64_t pg : all)
				if (e == 0 || rng() % 3 == 0) {
					dirty.push_back(pg);
					for (size_t b = 0; b < ps; b += 8)
						img[pg * ps + b] = (unsigned char)rng();
				}
			persist_epoch(p, img.data(), dirty.data(), dirty.size(), nullptr);
		}
		limit = all.back() + 1;
		persisted = all.size();
		// Torn: page 5's older copy gets seq VER_d + 1 and other bytes.
		int c = pool_valid_copy(p, 5) == 0 ? 1 : 0;
		memset(pool_copy(p, 5, c), 0xee, ps);
		p->seq[5][c] = *p->ver_d + 1;
		pool_set_clean(p, false);
		pool_close(p);
	}
	pool *open() const
	{
		auto o = options(path, kPages);
		o.create = false;
		return open_or_fail(o);
	}
};

struct heap_range {
	unsigned char *mem;
	size_t len;
	explicit heap_range(size_t bytes) : len(bytes)
	{
		mem = static_cast<unsigned char *>(shadow_reserve(0, bytes));
		REQUIRE(mem != nullptr);
	}
	~heap_range() { shadow_release(mem, len); }
};

std::vector<uint64_t> collect(tracker *t)
{
	std::vector<uint64_t> v(kPages);
	v.resize(tracker_collect_dirty(t, v.data(), v.size()));
	return v;
}

// Pages whose content differs from the image, touching every page from
// nthreads threads in a random order.
size_t touch_all_and_compare(const unsigned char *heap, const image &img, unsigned nthreads)
{
	const size_t ps = page_size();
	std::vector<uint64_t> order(kPages);
	for (uint64_t i = 0; i < kPages; i++)
		order[i] = i;
	std::shuffle(order.begin(), order.end(), std::mt19937(11));
	std::atomic<size_t> next{ 0 }, bad{ 0 };
	std::vector<std::thread> ts;
	for (unsigned k = 0; k < nthreads; k++)
		ts.emplace_back([&] {
			for (size_t n; (n = next.fetch_add(1)) < order.size();) {
				uint64_t pg = order[n];
				if (memcmp(heap + pg * ps, img.data() + pg * ps, ps) != 0)
					bad++;
			}
		});
	for (auto &t : ts)
		t.join();
	return bad.load();
}

} // namespace

TEST_CASE("lazy restore serves the consistent image, in any order, from several threads",
	  "[restore][uffd]")
{
	for (bool background : { false, true }) {
		INFO("background pass " << background);
		fixture f;
		pool *p = f.open();
		heap_range h(kPages * page_size());
		restore *r = nullptr;
		tracker *t = nullptr;
		restore_options o{};
		o.policy = RESTORE_LAZY;
		o.no_background = !background;
		REQUIRE(restore_open(&r, &t, p, h.mem, h.len, TRACKER_UFFD, &o) == 0);
		REQUIRE(r != nullptr);
		REQUIRE(strcmp(tracker_name(t), "uffd") == 0);
		// Restoring writes nothing (issue 39: a check after it may still
		// refuse the pool): the torn copy is still there, never served,
		// invalidated by the first write -- here the explicit one.
		CHECK((p->seq[5][0] == *p->ver_d + 1 || p->seq[5][1] == *p->ver_d + 1));
		CHECK(persist_invalidate_torn(p) == 1);
		for (int c = 0; c < 2; c++)
			CHECK((p->seq[5][c] <= *p->ver_d || p->seq[5][c] == POOL_SEQ_INVALID));

		CHECK(touch_all_and_compare(h.mem, f.img, 4) == 0);
		// Restored pages are already in the pool: not dirty.  (Above the
		// 2 MiB that hold the restored part nothing was write-protected
		// up front: a first touch there may count as a write.)
		for (uint64_t pg : collect(t))
			CHECK(pg * page_size() >= ((f.limit * page_size() + (2u << 20) - 1) & ~((size_t)(2u << 20) - 1)));

		// Writes after the restore are tracked, restored page or not,
		// below and above the restore bound.
		const size_t ps = page_size();
		std::set<uint64_t> written = { 0, 3, 10, 899, 950, 1023 };
		for (uint64_t pg : written)
			h.mem[pg * ps + 17] ^= 1;
		auto d = collect(t);
		CHECK(std::set<uint64_t>(d.begin(), d.end()) == written);
		CHECK(collect(t).empty());

		// The restorer counts a page just after the ioctl that woke its
		// toucher: wait for the count.
		restore_stats st;
		for (int i = 0; i < 1000; i++) {
			restore_get_stats(r, &st);
			if (st.complete_ns != 0)
				break;
			usleep(1000);
		}
		CHECK(st.lazy);
		CHECK(st.pages == f.persisted);
		CHECK(st.fault_pages + st.background_pages + st.finish_pages == st.pages);
		// Without the background pass: the touched pages, and their
		// neighbours restored before the toucher woke.
		if (!background)
			CHECK(st.fault_pages >= st.pages / (1 + 15));
		CHECK(st.complete_ns > 0);
		CHECK(st.zero_pages > 0);
		restore_close(r);
		tracker_close(t);
		pool_close(p);
	}
}

TEST_CASE("lazy restore: the background pass completes without any touch", "[restore][uffd]")
{
	fixture f;
	pool *p = f.open();
	heap_range h(kPages * page_size());
	restore *r = nullptr;
	tracker *t = nullptr;
	restore_options o{};
	o.policy = RESTORE_LAZY;
	REQUIRE(restore_open(&r, &t, p, h.mem, h.len, TRACKER_UFFD, &o) == 0);
	restore_stats st;
	for (int i = 0; i < 2000; i++) {
		restore_get_stats(r, &st);
		if (st.complete_ns != 0)
			break;
		usleep(1000);
	}
	CHECK(st.complete_ns != 0);
	CHECK(st.background_pages == st.pages);
	// Every persisted page is present now (mincore), without a fault.
	std::vector<unsigned char> vec(kPages);
	REQUIRE(mincore(h.mem, h.len, vec.data()) == 0);
	size_t present = 0;
	for (uint64_t i = 0; i < kPages; i++)
		present += (vec[i] & 1) && pool_valid_copy(p, i) >= 0;
	CHECK(present == st.pages);
	CHECK(touch_all_and_compare(h.mem, f.img, 2) == 0);
	CHECK(collect(t).empty());
	restore_close(r);
	tracker_close(t);
	pool_close(p);
}

// Needs a userfaultfd whose kernel accesses wait for the restorer (root, or
// vm.unprivileged_userfaultfd=1): the restore-uffd-kernel test, skipped
// (PMT_TEST_NEEDS=uffd-kernel-faults) where userfaultfd is user-mode-only.
TEST_CASE("lazy restore: a system call reads and writes pages not yet restored",
	  "[restore][uffd-kernel]")
{
	fixture f;
	pool *p = f.open();
	const size_t ps = page_size();
	heap_range h(kPages * ps);
	restore *r = nullptr;
	tracker *t = nullptr;
	restore_options o{};
	o.policy = RESTORE_LAZY;
	o.no_background = true;
	REQUIRE(restore_open(&r, &t, p, h.mem, h.len, TRACKER_UFFD, &o) == 0);
	restore_stats st;
	restore_get_stats(r, &st);
	REQUIRE(st.kernel_faults);
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	// write() reads page 20 in the kernel: it waits for the restore.
	REQUIRE(write(fds[1], h.mem + 20 * ps, ps) == (ssize_t)ps);
	// read() writes page 30 in the kernel.
	REQUIRE(read(fds[0], h.mem + 30 * ps, ps) == (ssize_t)ps);
	close(fds[0]);
	close(fds[1]);
	CHECK(memcmp(h.mem + 30 * ps, f.img.data() + 20 * ps, ps) == 0);
	auto d = collect(t);
	CHECK(d == std::vector<uint64_t>{ 30 });
	restore_close(r);
	tracker_close(t);
	pool_close(p);
}

TEST_CASE("lazy restore: prefault, discarded pages, fork", "[restore][uffd]")
{
	fixture f;
	pool *p = f.open();
	const size_t ps = page_size();
	heap_range h(kPages * ps);
	restore *r = nullptr;
	tracker *t = nullptr;
	restore_options o{};
	o.policy = RESTORE_LAZY;
	o.no_background = true;
	REQUIRE(restore_open(&r, &t, p, h.mem, h.len, TRACKER_UFFD, &o) == 0);
	restore_stats st;
	restore_get_stats(r, &st);

	SECTION("restore_prefault restores a range on the calling thread")
	{
		restore_prefault(h.mem + 40 * ps + 100, 3 * ps);
		restore_get_stats(r, &st);
		CHECK(st.finish_pages == 4);
		CHECK(memcmp(h.mem + 40 * ps, f.img.data() + 40 * ps, 4 * ps) == 0);
		CHECK(collect(t).empty());
	}
	SECTION("a page discarded after its restore reads zeros and counts as written")
	{
		CHECK(memcmp(h.mem + 50 * ps, f.img.data() + 50 * ps, ps) == 0);
		REQUIRE(madvise(h.mem + 50 * ps, ps, MADV_DONTNEED) == 0);
		image zeros(ps, 0);
		CHECK(memcmp(h.mem + 50 * ps, zeros.data(), ps) == 0);
		CHECK(collect(t) == std::vector<uint64_t>{ 50 });
	}
	SECTION("fork completes the restore first: the child sees the whole image")
	{
		CHECK(memcmp(h.mem + 60 * ps, f.img.data() + 60 * ps, ps) == 0);
		int status = in_child([&] {
			// No restorer in the child, no registration either.
			for (uint64_t i = 0; i < kPages; i++)
				if (memcmp(h.mem + i * ps, f.img.data() + i * ps, ps) != 0)
					_exit(20);
			_exit(0);
		});
		CHECK(WIFEXITED(status));
		CHECK(WEXITSTATUS(status) == 0);
		restore_get_stats(r, &st);
		CHECK(st.complete_ns != 0);
	}
	restore_close(r);
	tracker_close(t);
	pool_close(p);
}

TEST_CASE("eager restore with the mprotect tracker, and new pools", "[restore]")
{
	fixture f;
	pool *p = f.open();
	heap_range h(kPages * page_size());
	restore *r = nullptr;
	tracker *t = nullptr;
	restore_options o{};
	o.policy = RESTORE_AUTO;
	REQUIRE(restore_open(&r, &t, p, h.mem, h.len, TRACKER_MPROTECT, &o) == 0);
	CHECK(r == nullptr);
	restore_stats st;
	restore_get_stats(nullptr, &st);
	CHECK(!st.lazy);
	CHECK(st.eager_pages == st.pages);
	CHECK(st.pages > 0);
	CHECK(touch_all_and_compare(h.mem, f.img, 2) == 0);
	CHECK(collect(t).empty());
	h.mem[7 * page_size()] ^= 1;
	CHECK(collect(t) == std::vector<uint64_t>{ 7 });
	tracker_close(t);
	pool_close(p);
}

TEST_CASE("eager restore with the uffd tracker (PMTHREADS_RESTORE=eager)", "[restore][uffd]")
{
	fixture f;
	pool *p = f.open();
	heap_range h(kPages * page_size());
	restore *r = nullptr;
	tracker *t = nullptr;
	restore_options o{};
	o.policy = RESTORE_EAGER;
	REQUIRE(restore_open(&r, &t, p, h.mem, h.len, TRACKER_UFFD, &o) == 0);
	CHECK(r == nullptr);
	CHECK(touch_all_and_compare(h.mem, f.img, 2) == 0);
	CHECK(collect(t).empty());
	tracker_close(t);
	pool_close(p);
}

// Every page restored is verified against the checksum its copy's epoch
// recorded.  One bit flipped in the valid copy of a persisted page (a closed
// pool): the eager path refuses the pool before anything runs; the lazy path
// finds it when the page is first touched, after start-up, and ends the
// process.  Either way the message names the page, its heap address, the
// copy's epoch and the fix, and the damaged page's copies are not written.
namespace {

const uint64_t kBadPage = 300;

bool contains(const std::string &s, const std::string &what) { return s.find(what) != std::string::npos; }

std::string read_file_str(const std::string &path)
{
	std::string s;
	FILE *fp = fopen(path.c_str(), "r");
	if (fp == nullptr)
		return s;
	char buf[4096];
	for (size_t n; (n = fread(buf, 1, sizeof(buf), fp)) > 0;)
		s.append(buf, n);
	fclose(fp);
	return s;
}

struct damaged_page {
	uint64_t seq[2], sum[2];
	image copies;
	uint64_t addr;
	explicit damaged_page(pool *p)
	{
		const size_t ps = page_size();
		for (int c = 0; c < 2; c++) {
			seq[c] = p->seq[kBadPage][c];
			sum[c] = p->sum[kBadPage][c];
		}
		copies.assign(pool_copy(p, kBadPage, 0), pool_copy(p, kBadPage, 0) + 2 * ps);
		addr = p->shadow_base + kBadPage * ps;
	}
	bool same(pool *p) const
	{
		for (int c = 0; c < 2; c++)
			if (p->seq[kBadPage][c] != seq[c] || p->sum[kBadPage][c] != sum[c])
				return false;
		return memcmp(pool_copy(p, kBadPage, 0), copies.data(), copies.size()) == 0;
	}
};

// Flip one bit of page kBadPage's valid copy, as a bad block of the medium
// would.  Returns the epoch that wrote that copy.
uint64_t flip_bit(const fixture &f)
{
	pool *p = f.open();
	int c = pool_valid_copy(p, kBadPage);
	REQUIRE(c >= 0);
	uint64_t epoch = p->seq[kBadPage][c];
	pool_copy(p, kBadPage, c)[1234] ^= 0x10;
	REQUIRE(msync(pool_copy(p, kBadPage, 0), 2 * page_size(), MS_SYNC) == 0);
	pool_close(p);
	return epoch;
}

std::string hex(uint64_t v)
{
	char b[32];
	snprintf(b, sizeof(b), "%#llx", (unsigned long long)v);
	return b;
}

} // namespace

TEST_CASE("restore: an undamaged pool verifies every page it restores", "[restore][checksum]")
{
	fixture f;
	pool *p = f.open();
	heap_range h(kPages * page_size());
	REQUIRE(recovery_restore_image(p, h.mem) == f.persisted);
	for (uint64_t pg = 0; pg < kPages; pg++) {
		int c = pool_valid_copy(p, pg);
		if (c >= 0)
			CHECK(p->sum[pg][c] != 0); // every persisted copy has its checksum
	}
	pool_close(p);
}

TEST_CASE("restore: a flipped bit in a data page is refused by the eager path, naming the page",
	  "[restore][checksum]")
{
	fixture f;
	uint64_t epoch = flip_bit(f);
	pool *p = f.open();
	damaged_page before(p);
	heap_range h(kPages * page_size());
	SECTION("restore_open, eager")
	{
		restore *r = nullptr;
		tracker *t = nullptr;
		restore_options o{};
		o.policy = RESTORE_EAGER;
		REQUIRE(restore_open(&r, &t, p, h.mem, h.len, TRACKER_MPROTECT, &o) == -1);
		CHECK(r == nullptr);
		CHECK(t == nullptr);
	}
	SECTION("recovery_restore_image")
	{
		REQUIRE(recovery_restore_image(p, h.mem) == RECOVERY_REFUSED);
	}
	std::string msg = err_get();
	INFO(msg);
	CHECK(contains(msg, "page 300 (heap address " + hex(before.addr) + ") fails its checksum"));
	CHECK(contains(msg, "written by epoch " + std::to_string(epoch)));
	CHECK(contains(msg, "pmthreads-recover check"));
	CHECK(contains(msg, "backup"));
	CHECK(before.same(p)); // nothing of the damaged page was written
	pool_close(p);
}

TEST_CASE("restore: a flipped bit in a data page, found by lazy restore on first touch after "
	  "start-up, ends the process naming the page", "[restore][uffd][checksum]")
{
	fixture f;
	uint64_t epoch = flip_bit(f);
	scratch_dir d;
	std::string err = d.file("stderr");
	uint64_t addr = 0;
	int status = in_child([&] {
		int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(20);
		pool *p = f.open();
		heap_range h(kPages * page_size());
		restore *r = nullptr;
		tracker *t = nullptr;
		restore_options o{};
		o.policy = RESTORE_LAZY;
		o.no_background = true;
		if (restore_open(&r, &t, p, h.mem, h.len, TRACKER_UFFD, &o) != 0 || r == nullptr)
			_exit(21);
		// The program runs: pages far from the damaged one are served.
		const size_t ps = page_size();
		for (uint64_t pg = 0; pg < 64; pg++)
			if (memcmp(h.mem + pg * ps, f.img.data() + pg * ps, ps) != 0)
				_exit(22);
		volatile unsigned char x = h.mem[kBadPage * ps]; // the restorer ends the process
		(void)x;
		_exit(23);
	});
	{
		pool *p = f.open();
		addr = p->shadow_base + kBadPage * page_size();
		pool_close(p);
	}
	std::string msg = read_file_str(err);
	INFO(msg);
	REQUIRE(WIFEXITED(status));
	CHECK(WEXITSTATUS(status) == RESTORE_REFUSED_EXIT);
	CHECK(contains(msg, "lazy restore"));
	CHECK(contains(msg, "page 300 (heap address " + hex(addr) + ") fails its checksum"));
	CHECK(contains(msg, "written by epoch " + std::to_string(epoch)));
	CHECK(contains(msg, "pmthreads-recover check"));
	// Found again by the next start: nothing was overwritten.
	pool *p = f.open();
	heap_range h(kPages * page_size());
	CHECK(recovery_restore_image(p, h.mem) == RECOVERY_REFUSED);
	pool_close(p);
}
