/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/diagnose/fase_checker (PMTHREADS_CHECK=1): writes to the persistent heap by
// a thread outside every FASE are reported once per call site, with a
// symbolised backtrace; writes inside FASEs (the allocator's own included)
// never are.  In process over an mprotect tracker, and end to end with
// tests/progs/unlocked.c under LD_PRELOAD.
#include "subprocess.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include "diagnose/fase_checker.h"
#include "heap/heap.h"
#include "quiesce/quiesce.h"
#include "track/tracker.h"
}


// Call sites with known names for the reports (extern "C": unmangled).
extern "C" {
__attribute__((noinline, noclone)) void fase_checker_test_store(long *p, long v)
{
	*(volatile long *)p = v;
}
// memset through a volatile pointer, so that the write happens inside the C
// library whatever the optimiser does.
void *(*volatile fase_checker_test_memset)(void *, int, size_t) = memset;
__attribute__((noinline, noclone)) void fase_checker_test_clear_a(void *p)
{
	fase_checker_test_memset(p, 0x5a, 128);
	__asm__ volatile("" ::: "memory");	// no tail call: keep this frame
}
__attribute__((noinline, noclone)) void fase_checker_test_clear_b(void *p)
{
	fase_checker_test_memset(p, 0xa5, 128);
	__asm__ volatile("" ::: "memory");	// no tail call: keep this frame
}
}

namespace {

using subprocess::read_fd;

// stderr of this process goes to a file while one of these lives; text()
// returns what was written meanwhile.
struct capture_stderr {
	int saved = -1, fd = -1;
	capture_stderr()
	{
		char path[] = "/tmp/pmt-checker-err-XXXXXX";
		fd = mkstemp(path);
		REQUIRE(fd >= 0);
		unlink(path);
		saved = dup(2);
		dup2(fd, 2);
	}
	std::string text()
	{
		lseek(fd, 0, SEEK_SET);
		return read_fd(fd);
	}
	~capture_stderr()
	{
		dup2(saved, 2);
		close(saved);
		close(fd);
	}
};

size_t count(const std::string &hay, const std::string &needle)
{
	size_t n = 0;
	for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
		n++;
	return n;
}

const std::string report_head = "outside any lock (not failure-atomic)";

// The report blocks in err: each starts at a header line and runs to the
// next one.
std::vector<std::string> reports(const std::string &err)
{
	std::vector<std::string> out;
	size_t at = err.find(report_head);
	while (at != std::string::npos) {
		size_t next = err.find(report_head, at + 1);
		out.push_back(err.substr(at, next == std::string::npos ? std::string::npos : next - at));
		at = next;
	}
	return out;
}

// The "#0" line of a report.
std::string frame0(const std::string &report)
{
	size_t at = report.find("#0 ");
	if (at == std::string::npos)
		return "";
	return report.substr(at, report.find('\n', at) - at);
}

fase_checker_stats stats()
{
	fase_checker_stats s;
	fase_checker_get_stats(&s);
	return s;
}

} // namespace

TEST_CASE("unlocked writes are reported once per site, FASE writes never", "[checker]")
{
	REQUIRE(fase_checker_init() == 0);
	const size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	const size_t len = 16u << 20;
	void *base = mmap(nullptr, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	REQUIRE(base != MAP_FAILED);
	tracker *t = nullptr;
	REQUIRE(tracker_open(&t, TRACKER_MPROTECT, base, len) == 0);
	tracker_set_write_hook(fase_checker_on_write);
	REQUIRE(fase_depth() == 0);

	std::string err;
	fase_checker_stats before = stats(), mid{}, after{};
	{
		capture_stderr cap;
		// The allocator's metadata and block writes: inside its FASEs.
		REQUIRE(heap_init(base, len, true) == 0);
		std::vector<void *> blocks;
		for (int i = 0; i < 64; i++)
			blocks.push_back(heap_calloc(1, 3000));
		for (void *b : blocks)
			heap_free(b);
		char *data = (char *)heap_memalign(ps, 8 * ps);
		REQUIRE(data != nullptr);
		mid = stats();
		// A quiescent point: every page is write-protected again, so
		// each store below is a first write.
		std::vector<uint64_t> pages(len / ps);
		tracker_collect_dirty(t, pages.data(), pages.size());

		// Three first writes from one site: one report.
		for (int i = 0; i < 3; i++)
			fase_checker_test_store((long *)(data + i * ps), i);
		// The same site inside a FASE: not even counted as unlocked.
		fase_enter();
		fase_checker_test_store((long *)(data + 3 * ps), 3);
		fase_leave();
		// memset from two callers: two sites, though the faulting PC is
		// the same instruction in the C library.
		fase_checker_test_clear_a(data + 4 * ps);
		fase_checker_test_clear_b(data + 5 * ps);
		fase_checker_test_clear_a(data + 6 * ps);
		after = stats();
		err = cap.text();
	}
	tracker_set_write_hook(nullptr);
	tracker_close(t);
	munmap(base, len);

	INFO("stderr:\n" << err);
	CHECK(mid.writes_checked > before.writes_checked);	// the heap's pages faulted
	CHECK(mid.unlocked_writes == before.unlocked_writes);
	CHECK(mid.sites_reported == before.sites_reported);
	CHECK(after.unlocked_writes - mid.unlocked_writes == 3 + 3);
	CHECK(after.sites_reported - mid.sites_reported == 3);
	std::vector<std::string> r = reports(err);
	REQUIRE(r.size() == 3);
	CHECK(frame0(r[0]).find(" fase_checker_test_store+0x") != std::string::npos);
	CHECK(r[0].find("#1 ") != std::string::npos);	// a backtrace, not one frame
	CHECK(r[1].find("fase_checker_test_clear_a+0x") != std::string::npos);
	CHECK(r[2].find("fase_checker_test_clear_b+0x") != std::string::npos);
	CHECK(count(err, "fase_checker_test_clear_a+0x") == 1);
	CHECK(err.find("heap_") == std::string::npos);
}

// ---- end to end: tests/progs/unlocked.c under LD_PRELOAD ----

namespace {

using namespace subprocess;

run_result run_unlocked(const scratch_dir &dir, const std::string &tracker, const char *check)
{
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", env_or_fail("PMT_LIB") },
		{ "PMTHREADS_POOL", dir.path + "/unlocked-" + tracker + ".pool" },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_TRACKER", tracker },
		{ "PMTHREADS_VERBOSE", "1" },
	};
	if (check != nullptr)
		env["PMTHREADS_CHECK"] = check;
	return run({ env_or_fail("PMT_PROGS") + "/prog_unlocked" }, env);
}

// "FASE checker: C first writes checked, U outside any lock, S call sites
// reported": U (-1 when the line is missing).
long long unlocked_count(const std::string &err)
{
	size_t at = err.find("first writes checked, ");
	if (at == std::string::npos)
		return -1;
	return std::atoll(err.c_str() + at + strlen("first writes checked, "));
}

} // namespace

TEST_CASE("an unlocked store in a preloaded program is named exactly once", "[checker]")
{
	scratch_dir dir;
	run_result native = run({ env_or_fail("PMT_PROGS") + "/prog_unlocked" }, {});
	REQUIRE(native.status == 0);
	for (const char *tracker : { "auto", "mprotect" }) {
		run_result r = run_unlocked(dir, tracker, "1");
		INFO("tracker " << tracker << ", stderr:\n" << r.err);
		CHECK(r.status == 0);
		CHECK(r.out == native.out);
		CHECK(r.err.find("tracker mprotect") != std::string::npos);
		size_t site = 0;
		for (const std::string &rep : reports(r.err))
			if (frame0(rep).find(" store_without_lock+0x") != std::string::npos)
				site++;
		CHECK(site == 1);
		CHECK(count(r.err, "store_without_lock+") == 1);
		CHECK(r.err.find("store_under_mutex") == std::string::npos);
		// It faulted in many epochs (two threads, ~10 ms interval over
		// >100 ms), and was still reported once.
		CHECK(unlocked_count(r.err) >= 4);
		// The allocator's own writes are inside its FASEs.
		for (const std::string &rep : reports(r.err))
			CHECK(frame0(rep).find("heap_") == std::string::npos);
	}
}

TEST_CASE("PMTHREADS_TRACKER=uffd with the checker says it uses mprotect", "[checker]")
{
	scratch_dir dir;
	run_result r = run_unlocked(dir, "uffd", "1");
	INFO("stderr:\n" << r.err);
	CHECK(r.status == 0);
	CHECK(r.err.find("PMTHREADS_CHECK=1 needs the mprotect write tracker") != std::string::npos);
	CHECK(r.err.find("tracker mprotect") != std::string::npos);
	CHECK(count(r.err, "store_without_lock+") == 1);
}

TEST_CASE("without PMTHREADS_CHECK nothing is reported", "[checker]")
{
	scratch_dir dir;
	for (const char *check : { (const char *)nullptr, "0" }) {
		run_result r = run_unlocked(dir, "mprotect", check);
		INFO("stderr:\n" << r.err);
		CHECK(r.status == 0);
		CHECK(r.err.find(report_head) == std::string::npos);
		CHECK(r.err.find("FASE checker") == std::string::npos);
	}
}

TEST_CASE("reports at many sites under frequent epochs never wait on the gate", "[checker]")
{
	// The report unwinds with libunwind in the fault handler, whose locks
	// and allocations went through the lock and malloc wrappers and waited
	// at the gate of an epoch whose collection waited for that handler:
	// the program hung (3 of 3 at a 5 ms interval).  A runtime scope
	// (quiesce.h) lets them through.  The bound is generous: the run takes
	// well under a second alone.
	scratch_dir dir;
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", env_or_fail("PMT_LIB") },
		{ "PMTHREADS_POOL", dir.path + "/manysites.pool" },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_TRACKER", "mprotect" },
		{ "PMTHREADS_INTERVAL_MS", "2" },
		{ "PMTHREADS_CHECK", "1" },
	};
	spawned c = spawn({ env_or_fail("PMT_PROGS") + "/prog_manysites" }, env);
	bool ended = false;
	for (int i = 0; i < 600 && !ended; i++) {
		int st;
		pid_t p = waitpid(c.pid, &st, WNOHANG);
		if (p == c.pid) {
			// Put it back for finish(): reap it there.
			ended = true;
			run_result r;
			r.wait_status = st;
			r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			r.out = read_fd(c.out_fd);
			lseek(c.err_fd, 0, SEEK_SET);
			r.err = read_fd(c.err_fd);
			close(c.out_fd);
			close(c.err_fd);
			INFO(r.describe());
			CHECK(r.exited_ok());
			CHECK(r.out == "done\n");
			// Every one of the 90 sites, each once.
			CHECK(reports(r.err).size() == 90);
			CHECK(count(r.err, "unlocked_site_") >= 90);
			break;
		}
		usleep(100000);
	}
	if (!ended) {
		kill(c.pid, SIGKILL);
		run_result r;
		r.out = read_fd(c.out_fd);
		close(c.out_fd);
		finish(c, r);
		FAIL("prog_manysites under the checker did not end within 60 s (it waits on the "
		     "gate):\n" << r.describe());
	}
}
