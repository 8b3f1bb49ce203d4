/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/track/shadow.c and the write trackers (tracker.c, tracker_uffd.c,
// tracker_mprotect.c): exact dirty sets, syscalls writing into the heap,
// signal chaining, genuine crashes, the VMA bound, fork.
#include <catch2/catch.hpp>

#include "uffd_half.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include "base/log.h"
#include "track/fault_signal.h"
#include "track/tracker.h"
}

namespace {

const size_t page = (size_t)sysconf(_SC_PAGESIZE);

// The backends of this half (uffd_half.h): mprotect, or uffd in the
// tracker-uffd test, which meson skips where uffd tracking is unsupported.
std::vector<tracker_kind> backends()
{
	return { uffd_half() ? TRACKER_UFFD : TRACKER_MPROTECT };
}

const char *kind_name(tracker_kind k) { return config_tracker_name(k); }

// A fresh anonymous range with a tracker over it.
struct tracked {
	size_t npages;
	unsigned char *base;
	tracker *t = nullptr;

	// Exact unless asked otherwise: the cases below check exactly
	// which pages are reported (the fault-ahead case turns it off).
	tracked(tracker_kind kind, size_t n, unsigned flags = TRACKER_OPEN_EXACT) : npages(n)
	{
		base = static_cast<unsigned char *>(shadow_reserve(0, n * page));
		REQUIRE(base != nullptr);
		INFO(err_get());
		REQUIRE(tracker_open_flags(&t, kind, base, n * page, flags) == 0);
	}
	~tracked()
	{
		tracker_close(t);
		shadow_release(base, npages * page);
	}
	unsigned char *at(size_t pg, size_t off = 0) { return base + pg * page + off; }
	tracker_stats stats() const
	{
		tracker_stats st;
		tracker_get_stats(t, &st);
		return st;
	}

	std::vector<uint64_t> collect(size_t max = SIZE_MAX)
	{
		std::vector<uint64_t> out(npages);
		size_t n = tracker_collect_dirty(t, out.data(), std::min(max, npages));
		out.resize(n);
		return out;
	}
};

// Deliberate stores to NULL (the genuine-crash test) must reach the CPU even
// in a UBSan build run with halt_on_error.
__attribute__((no_sanitize("undefined")))
void write_byte(unsigned char *p, unsigned char v) { *(volatile unsigned char *)p = v; }
unsigned char read_byte(const unsigned char *p) { return *(const volatile unsigned char *)p; }

std::vector<uint64_t> sorted(const std::set<uint64_t> &s) { return { s.begin(), s.end() }; }

// VMAs the range may differ by between two counts.
const size_t slack = 4;

// The mappings (VMAs) that overlap [lo, hi): only the tracked range's, so
// that what the rest of the process maps meanwhile (a sanitizer's shadow,
// thread stacks) does not count.
size_t count_vmas(const void *lo, size_t len)
{
	std::ifstream maps("/proc/self/maps");
	std::string line;
	size_t n = 0;
	const uintptr_t a = (uintptr_t)lo, b = a + len;
	while (std::getline(maps, line)) {
		unsigned long start = 0, end = 0;
		if (sscanf(line.c_str(), "%lx-%lx", &start, &end) == 2 && start < b && end > a)
			n++;
	}
	return n;
}

// A temporary file holding len bytes of pattern, opened for reading.
struct temp_input {
	int fd;
	explicit temp_input(size_t len)
	{
		char path[] = "/tmp/pmthreads-tracker-XXXXXX";
		fd = mkstemp(path);
		REQUIRE(fd >= 0);
		unlink(path);
		std::vector<unsigned char> data(len);
		for (size_t i = 0; i < len; i++)
			data[i] = (unsigned char)(i * 7 + 1);
		REQUIRE(write(fd, data.data(), len) == (ssize_t)len);
		REQUIRE(lseek(fd, 0, SEEK_SET) == 0);
	}
	~temp_input() { close(fd); }
};

} // namespace

TEST_CASE("shadow_reserve maps at the requested address, elsewhere when it is taken", "[shadow]")
{
	const uint64_t want = 0x5e0000000000ULL;
	const size_t len = 16 * page;
	void *a = shadow_reserve(want, len);
	REQUIRE(a == (void *)want);
	auto *p = static_cast<unsigned char *>(a);
	CHECK(p[0] == 0);
	CHECK(p[len - 1] == 0);
	p[5] = 42;	// writable

	void *b = shadow_reserve(want, len);
	REQUIRE(b != nullptr);
	CHECK(b != a);	// the caller sees the relocation
	CHECK(static_cast<unsigned char *>(a)[5] == 42);	// the first mapping is untouched
	shadow_release(b, len);
	shadow_release(a, len);

	CHECK(shadow_reserve(want, page + 1) == nullptr);
	CHECK(std::string(err_get()).find("page size") != std::string::npos);
	shadow_release(nullptr, len);	// no-op
}

TEST_CASE("the auto choice and the uffd support report agree", "[tracker]")
{
	bool ok = tracker_uffd_supported();
	CHECK(ok == (tracker_uffd_unsupported_reason()[0] == '\0'));
	tracked r(TRACKER_AUTO, 4);
	CHECK(std::string(tracker_name(r.t)) == (ok ? "uffd" : "mprotect"));
	if (!ok) {
		tracker *t = nullptr;
		CHECK(tracker_open(&t, TRACKER_UFFD, r.base, 4 * page) == -1);
		CHECK(std::string(err_get()).find("PMTHREADS_TRACKER=mprotect") != std::string::npos);
	}
}

TEST_CASE("tracker_open rejects a range that is not page-aligned", "[tracker][trackers]")
{
	for (auto kind : backends()) {
		tracker *t = nullptr;
		void *mem = shadow_reserve(0, 2 * page);
		CHECK(tracker_open(&t, kind, static_cast<char *>(mem) + 8, page) == -1);
		CHECK(std::string(err_get()).find("page-aligned") != std::string::npos);
		CHECK(t == nullptr);
		CHECK(tracker_open(&t, kind, mem, 0) == -1);
		shadow_release(mem, 2 * page);
	}
}

TEST_CASE("a first write to a never-touched page is reported, a read is not", "[tracker][trackers]")
{
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		tracked r(kind, 64);
		CHECK(r.collect().empty());
		write_byte(r.at(10, 100), 1);	// never touched before
		CHECK(read_byte(r.at(20)) == 0);	// never touched, only read
		CHECK(read_byte(r.at(10, 5)) == 0);
		CHECK(r.collect() == std::vector<uint64_t>{ 10 });
		// Re-armed: reading it again is not a write, writing it is.
		CHECK(read_byte(r.at(10, 100)) == 1);
		CHECK(read_byte(r.at(20)) == 0);
		CHECK(r.collect().empty());
		write_byte(r.at(20, page - 1), 2);
		write_byte(r.at(10), 3);
		CHECK(r.collect() == (std::vector<uint64_t>{ 10, 20 }));
		CHECK(r.collect().empty());
		CHECK(r.stats().collections == 5);
		CHECK(r.stats().pages_collected == 3);
	}
}

TEST_CASE("random writes over many rounds are reported exactly", "[tracker][trackers]")
{
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		const size_t n = 300;
		tracked r(kind, n);
		std::mt19937_64 rng(12345 + kind);
		for (int round = 0; round < 60; round++) {
			INFO("round " << round);
			std::set<uint64_t> written;
			// Early rounds touch few pages, so later rounds keep
			// finding never-touched ones.
			unsigned write_pct = 2 + (unsigned)round / 4, read_pct = 10;
			for (size_t pg = 0; pg < n; pg++) {
				unsigned d = (unsigned)(rng() % 100);
				size_t off = rng() % page;
				if (d < write_pct) {
					write_byte(r.at(pg, off), (unsigned char)(round + 1));
					written.insert(pg);
				} else if (d < write_pct + read_pct) {
					(void)read_byte(r.at(pg, off));
				}
			}
			// Runs of adjacent pages too, which the mprotect backend
			// coalesces.
			size_t run = rng() % (n - 8);
			for (size_t pg = run; pg < run + 1 + rng() % 8; pg++) {
				write_byte(r.at(pg, rng() % page), 9);
				written.insert(pg);
			}
			CHECK(r.collect() == sorted(written));
		}
		CHECK(r.stats().overflows == 0);
	}
}

TEST_CASE("mprotect: a thread writing in order opens the pages ahead, which are reported",
	  "[tracker]")
{
	const size_t n = 256;
	tracked r(TRACKER_MPROTECT, n, 0);
	uint64_t f0 = r.stats().faults;
	// 100 pages in order from page 10: the first two fault alone, then
	// one fault per 16 pages.
	for (size_t pg = 10; pg < 110; pg++)
		write_byte(r.at(pg, 5), 1);
	uint64_t faults = r.stats().faults - f0;
	CHECK(faults <= 2 + 98 / 16 + 1);
	auto got = r.collect();
	// Every page written, and nothing beyond the last block opened.
	std::vector<uint64_t> want;
	for (uint64_t pg = 10; pg < 110; pg++)
		want.push_back(pg);
	CHECK(std::includes(got.begin(), got.end(), want.begin(), want.end()));
	CHECK(got.back() < 110 + 16);
	CHECK(got.front() == 10);
	// Scattered writes open nothing ahead: exact.
	write_byte(r.at(200), 1);
	write_byte(r.at(150), 1);
	CHECK(r.collect() == std::vector<uint64_t>{ 150, 200 });
	// The pages opened ahead were protected again by the collection:
	// writing them now faults and is reported.
	write_byte(r.at(112), 1);
	CHECK(r.collect() == std::vector<uint64_t>{ 112 });
}

TEST_CASE("written_since says which pages of a batch were written since, and re-arms nothing",
	  "[tracker][trackers]")
{
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		const size_t n = 200;
		tracked r(kind, n);
		std::mt19937_64 rng(777 + kind);
		for (int round = 0; round < 30; round++) {
			INFO("round " << round);
			std::set<uint64_t> batch_set;
			for (size_t pg = 0; pg < n; pg++)
				if (rng() % 4 == 0) {
					write_byte(r.at(pg, rng() % page), (unsigned char)round);
					batch_set.insert(pg);
				}
			std::vector<uint64_t> batch = r.collect();
			REQUIRE(batch == sorted(batch_set));
			if (batch.empty())
				continue;
			// After the collection: some batch pages and some others
			// written (the write-back's window), some only read.
			std::set<uint64_t> later;
			for (size_t pg = 0; pg < n; pg++) {
				unsigned d = (unsigned)(rng() % 100);
				if (d < 15) {
					write_byte(r.at(pg, rng() % page), 0x5a);
					later.insert(pg);
				} else if (d < 30) {
					(void)read_byte(r.at(pg, rng() % page));
				}
			}
			std::vector<uint8_t> w(batch.size(), 7);
			REQUIRE(tracker_written_since(r.t, batch.data(), batch.size(), w.data()) == 0);
			for (size_t k = 0; k < batch.size(); k++) {
				INFO("page " << batch[k]);
				CHECK(w[k] == (later.count(batch[k]) ? 1 : 0));
			}
			// Asking twice changes nothing, and the next collection
			// still reports every page written since.
			std::vector<uint8_t> w2(batch.size(), 7);
			REQUIRE(tracker_written_since(r.t, batch.data(), batch.size(), w2.data()) == 0);
			CHECK(w2 == w);
			CHECK(r.collect() == sorted(later));
		}
		CHECK(r.stats().rescan_failures == 0);
	}
}

TEST_CASE("an extent bounds collection: every page written below it is reported",
	  "[tracker][trackers]")
{
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		const size_t n = 1000;
		tracked r(kind, n);
		std::mt19937_64 rng(777 + kind);
		// The extent grows like the heap's high-water mark, in steps that
		// are neither page- nor 64-page-aligned.
		size_t extent = 5 * page + 123;
		for (int round = 0; round < 40; round++) {
			INFO("round " << round << ", extent " << extent);
			tracker_set_extent(r.t, extent);
			size_t below = (extent + page - 1) / page;
			std::set<uint64_t> written;
			for (size_t pg = 0; pg < below; pg++)
				if (rng() % 100 < 20) {
					write_byte(r.at(pg, rng() % page), (unsigned char)round);
					written.insert(pg);
				}
			// The last page of the extent, always.
			write_byte(r.at(below - 1), 1);
			written.insert(below - 1);
			CHECK(r.collect() == sorted(written));
			extent += (rng() % 40) * page + rng() % page;
			if (extent > (n - 200) * page)
				extent = (n - 200) * page;
		}
		// A write above the extent (which the runtime never makes) is
		// deferred, not lost: a wider collection reports it.
		size_t far = (extent + page - 1) / page + 100;
		write_byte(r.at(far), 7);
		CHECK(r.collect().empty());
		// Capped at len: the last page of the range is collected too.
		write_byte(r.at(n - 1), 7);
		tracker_set_extent(r.t, SIZE_MAX);
		CHECK(r.collect() == std::vector<uint64_t>{ far, n - 1 });
	}
}

TEST_CASE("more dirty pages than max: the first max now, the rest later", "[tracker][trackers]")
{
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		tracked r(kind, 200);
		std::set<uint64_t> written;
		for (size_t pg = 3; pg < 200; pg += 2) {
			write_byte(r.at(pg), 1);
			written.insert(pg);
		}
		std::vector<uint64_t> expect = sorted(written);	// 3, 5, ..., 199
		auto first = r.collect(30);
		CHECK(first == std::vector<uint64_t>(expect.begin(), expect.begin() + 30));
		// A page already reported is written again, a pending one too.
		write_byte(r.at(3), 2);
		write_byte(r.at(99), 2);
		auto second = r.collect(30);
		std::vector<uint64_t> want2{ 3 };
		want2.insert(want2.end(), expect.begin() + 30, expect.begin() + 59);
		CHECK(second == want2);
		auto rest = r.collect();
		CHECK(rest == std::vector<uint64_t>(expect.begin() + 59, expect.end()));
		CHECK(r.collect().empty());
	}
}

TEST_CASE("threads faulting at once are all recorded", "[tracker][trackers]")
{
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		const size_t n = 512;
		tracked r(kind, n);
		for (int round = 0; round < 20; round++) {
			std::vector<std::set<uint64_t>> sets(4);
			std::vector<std::thread> threads;
			for (int k = 0; k < 4; k++) {
				std::mt19937_64 rng((uint64_t)round * 131 + (uint64_t)k);
				for (size_t pg = 0; pg < n; pg++)
					if (rng() % 4 == 0)
						sets[k].insert(pg);	// overlapping sets
			}
			std::atomic<int> ready{ 0 };
			for (int k = 0; k < 4; k++)
				threads.emplace_back([&, k] {
					ready++;
					while (ready.load() < 4) {
					}
					for (uint64_t pg : sets[k])
						write_byte(r.at(pg, (size_t)k * 8), (unsigned char)k);
				});
			for (auto &th : threads)
				th.join();
			std::set<uint64_t> all;
			for (auto &s : sets)
				all.insert(s.begin(), s.end());
			CHECK(r.collect() == sorted(all));
		}
	}
}

TEST_CASE("read() into the heap works and is reported", "[tracker]")
{
	temp_input in(2 * page);
	SECTION("mprotect: EFAULT without prefault, works with it")
	{
		tracked r(TRACKER_MPROTECT, 16);
		errno = 0;
		CHECK(read(in.fd, r.at(4, 100), 2 * page - 200) == -1);
		CHECK(errno == EFAULT);
		CHECK(r.collect().empty());
		REQUIRE(lseek(in.fd, 0, SEEK_SET) == 0);
		tracker_prefault(r.at(4, 100), 2 * page - 200);
		ssize_t got = read(in.fd, r.at(4, 100), 2 * page - 200);
		CHECK(got == (ssize_t)(2 * page - 200));
		CHECK(r.at(4, 100)[1] == 8);
		CHECK(r.collect() == (std::vector<uint64_t>{ 4, 5 }));
		// Re-protected: a write faults and is recorded again.
		write_byte(r.at(5), 1);
		CHECK(r.collect() == std::vector<uint64_t>{ 5 });
	}
}

TEST_CASE("uffd: read() into the heap resolves itself and shows as written", "[tracker][uffd]")
{
	temp_input in(2 * page);
	tracked r(TRACKER_UFFD, 16);
	CHECK(r.collect().empty());
	ssize_t got = read(in.fd, r.at(4, 100), 2 * page - 200);
	CHECK(got == (ssize_t)(2 * page - 200));
	CHECK(r.at(4, 100)[1] == 8);
	CHECK(r.collect() == (std::vector<uint64_t>{ 4, 5 }));
}

TEST_CASE("tracker_prefault counts exactly the pages it covers", "[tracker]")
{
	tracked r(TRACKER_MPROTECT, 32);
	tracker_prefault(r.at(5, page - 1), page + 2);	// touches pages 5, 6, 7
	tracker_prefault(r.base - 3 * page, 4 * page + 1);	// partly outside: page 0, 1
	tracker_prefault(r.at(40), page);	// outside entirely
	tracker_prefault(r.at(9), 0);	// empty
	CHECK(r.collect() == (std::vector<uint64_t>{ 0, 1, 5, 6, 7 }));
}

TEST_CASE("uffd: tracker_prefault writes nothing", "[tracker][uffd]")
{
	tracked u(TRACKER_UFFD, 8);
	tracker_prefault(u.at(2), page);	// no-op: nothing written
	CHECK(u.collect().empty());
}

namespace {
sigjmp_buf app_jump;
std::atomic<int> app_calls{ 0 };
std::atomic<void *> app_fault_addr{ nullptr };

void app_handler(int, siginfo_t *si, void *)
{
	app_calls++;
	app_fault_addr = si->si_addr;
	siglongjmp(app_jump, 1);
}

// Touch p, which faults outside every tracked range; true when the
// application's handler caught it.
bool faults_to_app(unsigned char *p)
{
	if (sigsetjmp(app_jump, 1) == 0) {
		write_byte(p, 1);
		return false;
	}
	return true;
}
} // namespace

TEST_CASE("mprotect: the application's SIGSEGV handler still gets its faults", "[tracker]")
{
	struct sigaction saved;
	REQUIRE(sigaction(SIGSEGV, nullptr, &saved) == 0);

	struct sigaction app {};
	app.sa_sigaction = app_handler;
	app.sa_flags = SA_SIGINFO;
	sigemptyset(&app.sa_mask);
	auto *guard = static_cast<unsigned char *>(
		mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	REQUIRE(guard != MAP_FAILED);
	app_calls = 0;

	SECTION("handler installed before the tracker attaches")
	{
		REQUIRE(fault_signal_sigaction(SIGSEGV, &app, nullptr) == 0);
		tracked r(TRACKER_MPROTECT, 8);
		write_byte(r.at(2), 1);	// ours: no call
		CHECK(app_calls == 0);
		CHECK(faults_to_app(guard + 10));
		CHECK(app_calls == 1);
		CHECK(app_fault_addr.load() == guard + 10);
		write_byte(r.at(3), 1);	// tracking still works after a longjmp
		CHECK(r.collect() == (std::vector<uint64_t>{ 2, 3 }));
	}
	SECTION("handler installed while the tracker is attached")
	{
		tracked r(TRACKER_MPROTECT, 8);
		struct sigaction before;
		REQUIRE(fault_signal_sigaction(SIGSEGV, &app, &before) == 0);
		CHECK(before.sa_sigaction == saved.sa_sigaction);	// what was there
		struct sigaction now;
		REQUIRE(fault_signal_sigaction(SIGSEGV, nullptr, &now) == 0);
		CHECK(now.sa_sigaction == app_handler);	// the app sees its own
		CHECK(faults_to_app(guard));
		CHECK(app_calls == 1);
		write_byte(r.at(7), 1);
		CHECK(r.collect() == std::vector<uint64_t>{ 7 });
		CHECK(app_calls == 1);
	}
	// After the last tracker detaches, the kernel has the application's
	// handler.
	struct sigaction kernel;
	REQUIRE(sigaction(SIGSEGV, nullptr, &kernel) == 0);
	CHECK(kernel.sa_sigaction == app_handler);
	CHECK(faults_to_app(guard + 1));

	munmap(guard, page);
	REQUIRE(sigaction(SIGSEGV, &saved, nullptr) == 0);
}

TEST_CASE("mprotect: a genuine crash dies with SIGSEGV and says so", "[tracker]")
{
	int pipefd[2];
	REQUIRE(pipe(pipefd) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		dup2(pipefd[1], STDERR_FILENO);
		// Catch2's own handler is inherited: the program under test has
		// none.
		signal(SIGSEGV, SIG_DFL);
		void *mem = shadow_reserve(0, 4 * page);
		tracker *t = nullptr;
		if (mem == nullptr || tracker_open(&t, TRACKER_MPROTECT, mem, 4 * page) != 0)
			_exit(2);
		write_byte(static_cast<unsigned char *>(mem), 1);	// ours, survives
		write_byte(static_cast<unsigned char *>(nullptr), 1);	// not ours
		_exit(3);
	}
	close(pipefd[1]);
	std::string out;
	char buf[512];
	ssize_t k;
	while ((k = read(pipefd[0], buf, sizeof(buf))) > 0)
		out.append(buf, (size_t)k);
	close(pipefd[0]);
	int status = 0;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	INFO("stderr: " << out);
	REQUIRE(WIFSIGNALED(status));
	CHECK(WTERMSIG(status) == SIGSEGV);
	CHECK(out.find("pmthreads: error: SIGSEGV at address (nil)") != std::string::npos);
	// One line from us (a sanitizer build may add its own report).
	size_t ours = 0;
	for (size_t at = out.find("pmthreads:"); at != std::string::npos;
	     at = out.find("pmthreads:", at + 1))
		ours++;
	CHECK(ours == 1);
}

TEST_CASE("mprotect: the VMA count stays bounded", "[tracker]")
{
	SECTION("under the run budget: one VMA pair per run, all merged back at collection")
	{
		tracked r(TRACKER_MPROTECT, 2000);
		size_t before = count_vmas(r.base, r.npages * page);
		std::set<uint64_t> written;
		for (size_t pg = 0; pg < 2000; pg += 2) {
			write_byte(r.at(pg), 1);
			written.insert(pg);
		}
		size_t during = count_vmas(r.base, r.npages * page);
		CHECK(during > before + 900);	// the runs really are separate
		CHECK(during <= before + 2 * 1000 + slack);
		CHECK(r.collect() == sorted(written));
		CHECK(count_vmas(r.base, r.npages * page) <= before + slack);
		CHECK(r.stats().overflows == 0);
	}
	SECTION("over it: the range is unprotected, touched pages are reported")
	{
		const size_t runs = TRACKER_MPROTECT_MAX_RUNS + 1000;
		const size_t n = 2 * runs + 16;
		tracked r(TRACKER_MPROTECT, n);
		size_t before = count_vmas(r.base, r.npages * page);
		std::set<uint64_t> written{ 0 };
		write_byte(r.at(0), 1);
		size_t peak = 0;
		for (size_t i = 0; i < runs; i++) {
			write_byte(r.at(2 * i + 1), 1);	// every other page
			written.insert(2 * i + 1);
			if (i % 512 == 0)
				peak = std::max(peak, count_vmas(r.base, r.npages * page));
		}
		peak = std::max(peak, count_vmas(r.base, r.npages * page));
		CHECK(peak <= before + 2 * TRACKER_MPROTECT_MAX_RUNS + slack);
		CHECK(count_vmas(r.base, r.npages * page) <= before + slack);	// unprotected as one VMA
		CHECK(r.stats().overflows == 1);
		// Writes are not seen any more: the write-back must not trust
		// a read-only look until the next collection.
		const uint64_t some[] = { 0, 1, 3 };
		uint8_t w[3] = { 0, 0, 0 };
		CHECK(tracker_written_since(r.t, some, 3, w) == -1);
		CHECK((w[0] == 1 && w[1] == 1 && w[2] == 1));
		CHECK(r.stats().rescan_failures == 1);
		// Only the written pages were ever touched, so "touched" is
		// exact here.
		SECTION("collected at once")
		{
			CHECK(r.collect() == sorted(written));
		}
		SECTION("collected in two parts")
		{
			std::vector<uint64_t> all = sorted(written);
			CHECK(r.collect(100) == std::vector<uint64_t>(all.begin(), all.begin() + 100));
			// Still over budget, so still unprotected: the second
			// part may repeat pages of the first, never miss one.
			auto rest = r.collect();
			CHECK(std::includes(rest.begin(), rest.end(), all.begin() + 100, all.end()));
			CHECK(std::is_sorted(rest.begin(), rest.end()));
		}
		CHECK(count_vmas(r.base, r.npages * page) <= before + slack);
		// Protection is back: tracking is exact again.
		write_byte(r.at(4), 1);
		(void)read_byte(r.at(6));
		CHECK(r.collect() == std::vector<uint64_t>{ 4 });
		CHECK(r.stats().overflows == 1);
	}
}

TEST_CASE("opened to be covered later: exact inside tracker_cover, never lost above it",
	  "[tracker][trackers]")
{
	const size_t mib = (size_t)1 << 20;
	const size_t npages = 128 * mib / page;
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		// As the runtime does: cover, then use, collecting up to the
		// part in use (the heap's high-water mark).
		tracked r(kind, npages, TRACKER_OPEN_COVER_LATER | TRACKER_OPEN_EXACT);
		INFO(err_get());
		REQUIRE(tracker_cover(r.t, 4 * mib) == 0);
		tracker_set_extent(r.t, 4 * mib);
		CHECK(r.collect().empty());
		write_byte(r.at(10), 1);
		CHECK(read_byte(r.at(20)) == 0);	// a read is not a write
		CHECK(r.collect() == std::vector<uint64_t>{ 10 });

		// A write above what was covered (uffd covers in 64 MiB
		// steps) is never lost: the first collection that reaches it
		// reports it, with (uffd) the rest of the uncovered part, once.
		const size_t hi = 100 * mib / page;
		write_byte(r.at(hi), 2);
		CHECK(r.collect().empty());		// above the extent: deferred
		tracker_set_extent(r.t, npages * page);
		std::vector<uint64_t> got = r.collect();
		CHECK(std::find(got.begin(), got.end(), hi) != got.end());
		if (kind == TRACKER_MPROTECT)
			CHECK(got == std::vector<uint64_t>{ hi });
		CHECK(r.collect().empty());
		write_byte(r.at(hi), 3);
		CHECK(r.collect() == std::vector<uint64_t>{ hi });

		// Covered all the way: exact there too.
		REQUIRE(tracker_cover(r.t, npages * page) == 0);
		const size_t top = npages - 7;
		write_byte(r.at(top), 4);
		CHECK(read_byte(r.at(top - 300)) == 0);
		CHECK(r.collect() == std::vector<uint64_t>{ top });
	}
}

TEST_CASE("uffd: dirtying pages does not split the VMA", "[tracker][uffd]")
{
	tracked r(TRACKER_UFFD, 4000);
	size_t before = count_vmas(r.base, r.npages * page);
	std::set<uint64_t> written;
	for (size_t pg = 0; pg < 4000; pg += 2) {
		write_byte(r.at(pg), 1);
		written.insert(pg);
	}
	CHECK(count_vmas(r.base, r.npages * page) <= before + slack);
	// 2000 separate runs: more than one PAGEMAP_SCAN batch of regions.
	CHECK(r.collect() == sorted(written));
}

TEST_CASE("detach leaves the range writable; trackers can be reopened and combined", "[tracker][trackers]")
{
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		const size_t n = 16;
		auto *mem = static_cast<unsigned char *>(shadow_reserve(0, n * page));
		REQUIRE(mem != nullptr);
		tracker *t = nullptr;
		REQUIRE(tracker_open(&t, kind, mem, n * page) == 0);
		write_byte(mem + 3 * page, 7);
		tracker_close(t);
		write_byte(mem + 5 * page, 8);	// untracked, must not fault
		REQUIRE(tracker_open(&t, kind, mem, n * page) == 0);
		CHECK(mem[3 * page] == 7);
		CHECK(mem[5 * page] == 8);
		uint64_t pages[n];
		CHECK(tracker_collect_dirty(t, pages, n) == 0);	// clean at attach

		// A second tracker over another range at the same time.
		tracked other(TRACKER_MPROTECT, 8);
		write_byte(other.at(1), 1);
		write_byte(mem + 9 * page, 1);
		CHECK(other.collect() == std::vector<uint64_t>{ 1 });
		REQUIRE(tracker_collect_dirty(t, pages, n) == 1);
		CHECK(pages[0] == 9);
		tracker_close(t);
		tracker_close(nullptr);
		shadow_release(mem, n * page);
	}
}

TEST_CASE("a fork child closing its tracker leaves the parent's tracking intact", "[tracker][trackers]")
{
	for (auto kind : backends()) {
		INFO("backend " << kind_name(kind));
		tracked r(kind, 16);
		write_byte(r.at(1), 1);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			tracker_close(r.t);	// as runtime_atfork_child does
			r.t = nullptr;
			write_byte(r.at(2), 2);	// the child's copy: plain memory
			write_byte(r.at(3), 2);
			_exit(r.base[2 * page] == 2 ? 0 : 1);
		}
		int status = 0;
		REQUIRE(waitpid(pid, &status, 0) == pid);
		CHECK(WIFEXITED(status));
		CHECK(WEXITSTATUS(status) == 0);
		write_byte(r.at(5), 1);
		CHECK(r.collect() == (std::vector<uint64_t>{ 1, 5 }));
		write_byte(r.at(2), 1);
		CHECK(r.collect() == std::vector<uint64_t>{ 2 });
	}
}

TEST_CASE("mprotect: pinned pages stay writable and are reported every epoch until unpinned",
	  "[tracker]")
{
	// Stacks in the heap (kernel_stacks.h): the kernel writes them where a
	// fault cannot be delivered, so they never become read-only.
	tracked r(TRACKER_MPROTECT, 32);
	REQUIRE(tracker_pin_writable(r.t, r.at(4, 100), 2 * page) == 0);	// pages 4, 5, 6
	REQUIRE(tracker_pin_writable(r.t, r.at(6), page) == 0);		// page 6 again
	write_byte(r.at(10), 1);
	CHECK(r.collect() == (std::vector<uint64_t>{ 4, 5, 6, 10 }));
	uint64_t faults = r.stats().faults;
	for (int epoch = 0; epoch < 3; epoch++) {
		// No fault, and reported again although nothing was written.
		write_byte(r.at(5, 8), (unsigned char)epoch);
		CHECK(r.stats().faults == faults);
		CHECK(r.collect() == (std::vector<uint64_t>{ 4, 5, 6 }));
	}
	// The first pin goes: its pages are written once more at most, then
	// tracked as usual; page 6 stays pinned by the second.
	tracker_unpin(r.t, r.at(4, 100), 2 * page);
	CHECK(r.collect() == (std::vector<uint64_t>{ 4, 5, 6 }));
	CHECK(r.collect() == (std::vector<uint64_t>{ 6 }));
	write_byte(r.at(5), 9);
	CHECK(r.stats().faults == faults + 1);
	CHECK(r.collect() == (std::vector<uint64_t>{ 5, 6 }));
	tracker_unpin(r.t, r.at(6), page);
	CHECK(r.collect() == (std::vector<uint64_t>{ 6 }));
	CHECK(r.collect().empty());
	// Outside the range: nothing.
	CHECK(tracker_pin_writable(r.t, r.at(40), page) == 0);
	CHECK(r.collect().empty());
}

TEST_CASE("mprotect: a page written in consecutive epochs stays writable while it changes",
	  "[tracker]")
{
	// Not exact: hot pages are the reports beyond the writes.  At any
	// rate of collections: this test's is the machine's to decide.
	tracked r(TRACKER_MPROTECT, 64, TRACKER_OPEN_HOT_AT_ANY_RATE);
	const uint64_t seven[] = { 7 };
	const uint8_t changed[] = { 1 };
	write_byte(r.at(7), 1);
	CHECK(r.collect() == std::vector<uint64_t>{ 7 });
	write_byte(r.at(20), 1);
	CHECK(r.collect() == std::vector<uint64_t>{ 20 });	// 7 was protected again
	write_byte(r.at(7), 2);
	CHECK(r.collect() == std::vector<uint64_t>{ 7 });
	write_byte(r.at(7), 3);					// the next epoch too: hot
	CHECK(r.stats().hot_pages == 0);
	CHECK(r.collect() == std::vector<uint64_t>{ 7 });
	CHECK(r.stats().hot_pages == 1);
	uint64_t faults = r.stats().faults;
	for (int epoch = 0; epoch < 50; epoch++) {
		// Writable: no fault, and reported whether written or not.
		if (epoch % 3 == 0)
			write_byte(r.at(7, (size_t)epoch), (unsigned char)epoch);
		uint8_t w = 0;
		CHECK(tracker_written_since(r.t, seven, 1, &w) == 0);
		CHECK(w == 1);	// cannot tell: counted as written
		CHECK(r.collect() == std::vector<uint64_t>{ 7 });
		tracker_note_changed(r.t, seven, 1, changed);
	}
	CHECK(r.stats().faults == faults);
	// Never found changed again: protected again within the idle bound
	// (at most 255 collections).
	int reported = 0;
	while (!r.collect().empty())
		REQUIRE(++reported <= 255);
	CHECK(reported >= 1);
	write_byte(r.at(7), 4);
	CHECK(r.stats().faults == faults + 1);
	CHECK(r.collect() == std::vector<uint64_t>{ 7 });
	CHECK(r.collect().empty());
	CHECK(r.stats().hot_pages == 1);
}

TEST_CASE("mprotect: the pages reported only because they are hot are said to be of unknown writes",
	  "[tracker]")
{
	tracked r(TRACKER_MPROTECT, 64, TRACKER_OPEN_HOT_AT_ANY_RATE);
	auto unknown = [&](const std::vector<uint64_t> &pages, size_t *count) {
		std::vector<uint8_t> u(pages.size(), 7);
		*count = tracker_written_unknown(r.t, pages.data(), pages.size(), u.data());
		return u;
	};
	size_t count = 0;
	write_byte(r.at(7), 1);
	auto got = r.collect();
	CHECK(got == std::vector<uint64_t>{ 7 });
	unknown(got, &count);
	CHECK(count == 0);	// seen written (it faulted)
	write_byte(r.at(7), 2);
	got = r.collect();	// made hot by this collection, after a fault
	CHECK(r.stats().hot_pages == 1);
	unknown(got, &count);
	CHECK(count == 0);
	// Hot from here on: 7 reported whether written or not, 20 faults.
	uint64_t faults = r.stats().faults;
	write_byte(r.at(7), 3);
	write_byte(r.at(20), 1);
	CHECK(r.stats().faults == faults + 1);
	got = r.collect();
	CHECK(got == (std::vector<uint64_t>{ 7, 20 }));
	CHECK(unknown(got, &count) == (std::vector<uint8_t>{ 1, 0 }));
	CHECK(count == 1);
	got = r.collect();	// nothing written: 7 again
	CHECK(got == std::vector<uint64_t>{ 7 });
	CHECK(unknown(got, &count) == std::vector<uint8_t>{ 1 });
	// A subset of the collection may be asked about.
	const uint64_t seven[] = { 7 };
	uint8_t u = 0;
	CHECK(tracker_written_unknown(r.t, seven, 1, &u) == 1);
	CHECK(u == 1);
	// Re-protected once idle: then its next write is seen again.
	while (!r.collect().empty()) {
	}
	write_byte(r.at(7), 4);
	got = r.collect();
	CHECK(got == std::vector<uint64_t>{ 7 });
	unknown(got, &count);
	CHECK(count == 0);
}

TEST_CASE("every page a collection reports is seen written without hot pages", "[tracker][trackers]")
{
	for (tracker_kind kind : backends()) {
		INFO(kind_name(kind));
		// Exact: no hot pages in the mprotect backend; uffd has none.
		tracked r(kind, 16);
		for (int epoch = 0; epoch < 4; epoch++) {
			write_byte(r.at(3), (unsigned char)epoch);
			auto got = r.collect();
			CHECK(got == std::vector<uint64_t>{ 3 });
			uint8_t u = 9;
			CHECK(tracker_written_unknown(r.t, got.data(), got.size(), &u) == 0);
		}
	}
}

TEST_CASE("mprotect: collections further apart than a few milliseconds make no page hot",
	  "[tracker]")
{
	// As at the default 100 ms interval: a fault per written page and
	// epoch is cheap there, copies of hot pages inside the pause are not.
	tracked r(TRACKER_MPROTECT, 16, 0);
	for (int epoch = 0; epoch < 5; epoch++) {
		write_byte(r.at(3), (unsigned char)epoch);
		CHECK(r.collect() == std::vector<uint64_t>{ 3 });
		std::this_thread::sleep_for(std::chrono::milliseconds(8));
	}
	CHECK(r.stats().hot_pages == 0);
	CHECK(r.stats().faults == 5);
}

TEST_CASE("mprotect: no page becomes hot while a write hook wants every first write",
	  "[tracker]")
{
	tracked r(TRACKER_MPROTECT, 16, TRACKER_OPEN_HOT_AT_ANY_RATE);
	static std::atomic<int> seen{ 0 };
	seen = 0;
	tracker_set_write_hook([](void *, void *) { seen++; });
	for (int epoch = 0; epoch < 5; epoch++) {
		write_byte(r.at(3), (unsigned char)epoch);
		CHECK(r.collect() == std::vector<uint64_t>{ 3 });
	}
	CHECK(seen == 5);
	// Hot pages made before the hook are protected again by the next
	// collection.
	tracker_set_write_hook(nullptr);
	for (int epoch = 0; epoch < 3; epoch++) {
		write_byte(r.at(5), (unsigned char)epoch);
		(void)r.collect();
	}
	CHECK(r.stats().hot_pages == 1);
	tracker_set_write_hook([](void *, void *) { seen++; });
	CHECK(r.collect() == std::vector<uint64_t>{ 5 });	// its last report
	write_byte(r.at(5), 9);
	CHECK(seen == 6);
	CHECK(r.collect() == std::vector<uint64_t>{ 5 });
	tracker_set_write_hook(nullptr);
}

TEST_CASE("mprotect: with hot pages, random writes over many rounds are all reported",
	  "[tracker]")
{
	const size_t n = 200;
	tracked r(TRACKER_MPROTECT, n, TRACKER_OPEN_HOT_AT_ANY_RATE);
	std::mt19937_64 rng(777);
	std::vector<uint8_t> prev(n, 0);
	for (int round = 0; round < 300; round++) {
		INFO("round " << round);
		std::set<uint64_t> written;
		// A few pages written nearly every round, the rest seldom.
		for (size_t pg = 0; pg < n; pg++) {
			unsigned pct = pg < 10 ? 90 : 3;
			if (rng() % 100 < pct) {
				write_byte(r.at(pg, rng() % page), (unsigned char)(round + 1));
				written.insert(pg);
			}
		}
		auto got = r.collect();
		CHECK(std::is_sorted(got.begin(), got.end()));
		CHECK(std::includes(got.begin(), got.end(), written.begin(), written.end()));
		// As the write-back would say: changed when written.
		std::vector<uint8_t> ch(got.size());
		for (size_t k = 0; k < got.size(); k++)
			ch[k] = written.count(got[k]) != 0;
		tracker_note_changed(r.t, got.data(), got.size(), ch.data());
	}
	CHECK(r.stats().hot_pages >= 10);
	CHECK(r.stats().overflows == 0);
}

TEST_CASE("mprotect: writes racing collections outside any FASE are never lost, hot pages or not",
	  "[tracker]")
{
	// A collection runs at a quiescent point, but a thread outside any
	// FASE may still write (memcached's reference counts): a page the
	// collection makes read-only may fault, and be marked and made
	// writable, before the collection is done with its bitmap word.
	const size_t n = 128;
	tracked r(TRACKER_MPROTECT, n, TRACKER_OPEN_HOT_AT_ANY_RATE);
	// Some pages hot from the start.
	for (int epoch = 0; epoch < 3; epoch++) {
		for (size_t pg = 0; pg < 64; pg += 2)
			write_byte(r.at(pg), 1);
		(void)r.collect();
	}
	REQUIRE(r.stats().hot_pages == 32);
	std::atomic<bool> stop{ false };
	std::atomic<uint64_t> writes{ 0 };
	std::thread writer([&] {
		std::mt19937_64 rng(99);
		while (!stop.load(std::memory_order_relaxed)) {
			// Half the pages written often (hot), the rest now and then.
			size_t pg = rng() % 4 != 0 ? (rng() % 32) * 2 : rng() % n;
			write_byte(r.at(pg, rng() % page), 1);
			writes.fetch_add(1, std::memory_order_relaxed);
		}
	});
	while (writes.load() == 0)
		std::this_thread::yield();
	std::vector<uint8_t> ones(n, 1);
	// 20,000 collections racing at least 200,000 writes.
	for (int epoch = 0; epoch < 20000 || writes.load() < 200000; epoch++) {
		auto got = r.collect();
		tracker_note_changed(r.t, got.data(), got.size(), ones.data());
	}
	stop = true;
	writer.join();
	// A page left writable but unmarked would take this write unseen.
	for (size_t pg = 0; pg < n; pg++) {
		INFO("page " << pg);
		write_byte(r.at(pg), 2);
		auto got = r.collect();
		CHECK(std::binary_search(got.begin(), got.end(), (uint64_t)pg));
	}
}

TEST_CASE("uffd: pinning is a no-op", "[tracker][uffd]")
{
	tracked r(TRACKER_UFFD, 16);
	REQUIRE(tracker_pin_writable(r.t, r.at(2), page) == 0);
	CHECK(r.collect().empty());
	write_byte(r.at(2), 1);
	CHECK(r.collect() == (std::vector<uint64_t>{ 2 }));
	tracker_unpin(r.t, r.at(2), page);
	CHECK(r.collect().empty());
}
