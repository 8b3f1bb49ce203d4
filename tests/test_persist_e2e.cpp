/* SPDX-License-Identifier: BSD-3-Clause */
// End to end over the real runtime (issue 3): tests/progs/persist_structs.c
// builds a named root, a linked list and a binary search tree in the
// persistent heap and is restarted -- after a clean exit and after kill -9
// following an epoch -- under each write tracker; it must find both
// structures whole at the addresses it printed, and the allocator usable.
// Also: read() into a persistent buffer, and a program's own SIGSEGV handler
// under the mprotect tracker.  The pool is on the run's medium
// (pool_medium.hpp: emulated pmem on /dev/shm, or a file on a disk and the
// log backend).  After each run pmthreads-recover check must find
// the pool and the heap consistent, and the heap's usage must not grow over
// a verify run (which frees all it allocates).
//
// Paths from meson: PMT_PS (linked with libpmthreads), PMT_PS_PLAIN (built
// without the link, run under LD_PRELOAD=PMT_LIB with PMTHREADS_HEAP=malloc),
// PMTHREADS_RECOVER_TOOL.
#include "pool_test_util.h"
#include "uffd_half.h"
#include "subprocess.hpp"

extern "C" {
#include "track/tracker.h"
}

#include <csignal>
#include <map>
#include <random>
#include <sstream>

using namespace pooltest;

namespace {

using subprocess::env_or_fail;
using subprocess::run_result;

// One scenario: a pool in a scratch directory and the environment the
// program runs with.
struct scenario {
	scratch_dir dir;
	std::string pool;
	std::map<std::string, std::string> env;

	scenario(const char *tracker) : pool(dir.file("ps.pool"))
	{
		env["PMTHREADS_POOL"] = pool;
		env["PMTHREADS_POOL_SIZE"] = "64M";
		// Short interval: epochs also fall in the middle of the work.
		env["PMTHREADS_INTERVAL_MS"] = "20";
		env["PMTHREADS_TRACKER"] = tracker;
		env["PMTHREADS_STATS"] = dir.file("stats.json");
		pool_medium::child_env(env);
	}

	// The last run's statistics name the medium's backend.
	void expect_backend() { pool_medium::expect_backend(subprocess::slurp(dir.file("stats.json"))); }

	// Run prog with args.  The environment is ours minus PMTHREADS_* and
	// LD_PRELOAD, plus env unless plain (the recovery tool: preloaded, it
	// would take the pool for itself).
	run_result run(const std::string &prog, const std::vector<std::string> &args,
		       bool plain = false)
	{
		std::vector<std::string> argv{ prog };
		argv.insert(argv.end(), args.begin(), args.end());
		return subprocess::run(argv, plain ? std::map<std::string, std::string>{} : env);
	}

	// pmthreads-recover check: the pool and the heap image it holds are
	// consistent.  Returns the heap's bytes in use.
	uint64_t check_pool()
	{
		run_result r = run(env_or_fail("PMTHREADS_RECOVER_TOOL"), { "check", pool }, true);
		INFO(r.describe());
		REQUIRE(r.exited_ok());
		REQUIRE(r.err.empty());
		size_t at = r.out.find("heap: consistent: ");
		REQUIRE(at != std::string::npos);
		unsigned long long names = 0, bytes = 0;
		REQUIRE(sscanf(r.out.c_str() + at, "heap: consistent: %llu named objects, %*u held "
			       "for nvrecover, %llu bytes in use", &names, &bytes) == 2);
		return bytes;
	}
};

// This half's trackers (uffd_half.h): persist-e2e-uffd, which meson skips
// where uffd tracking is unsupported, runs the uffd ones.
std::vector<const char *> trackers()
{
	return { uffd_half() ? "uffd" : "mprotect" };
}

// Build with ts[i], restart with ts[i + 1]: in the uffd half a pool written
// under uffd restarts under mprotect and the other way round.
std::vector<const char *> round_trip_trackers()
{
	if (uffd_half())
		return { "uffd", "mprotect" };
	return { "mprotect" };
}

// build, restart (verify), restart again (verify): structures, addresses,
// churn; the heap consistent after each run and its usage unchanged by the
// verify runs.  The second verify runs under other_tracker (a pool is not
// tied to a tracker).
void structs_round_trip(const std::string &prog, const char *tracker, const char *other_tracker,
			bool kill, bool use_malloc)
{
	scenario sc(tracker);
	if (use_malloc)
		sc.env["PMTHREADS_HEAP"] = "malloc";
	if (prog.find("plain") != std::string::npos)
		sc.env["LD_PRELOAD"] = env_or_fail("PMT_LIB");
	auto with_malloc = [&](std::vector<std::string> a) {
		if (use_malloc)
			a.push_back("--malloc");
		return a;
	};
	const char *n_list = "600", *n_tree = "500";
	run_result b = sc.run(prog, with_malloc({ "build", n_list, n_tree, kill ? "kill" : "exit" }));
	INFO("build: " << b.describe());
	if (kill)
		REQUIRE(b.killed());
	else
		REQUIRE(b.exited_ok());
	REQUIRE(b.out.find(std::string("built ") + n_list + " " + n_tree + "\n") != std::string::npos);
	std::string addrs = sc.dir.file("addrs");
	write_file(addrs, b.out.data(), b.out.size());
	uint64_t usage = sc.check_pool();

	run_result v = sc.run(prog, with_malloc({ "verify", addrs, kill ? "crashed" : "clean" }));
	INFO("verify: " << v.describe());
	REQUIRE(v.exited_ok());
	REQUIRE(v.out.find("verified 600 500\n") != std::string::npos);
	sc.expect_backend();
	uint64_t after = sc.check_pool();
	// With PMTHREADS_HEAP=malloc libc's own allocations (stdio buffers) are
	// in the heap too, and those of a previous run are unreachable garbage:
	// exact accounting only for nvmalloc.
	if (!use_malloc)
		REQUIRE(after == usage);

	sc.env["PMTHREADS_TRACKER"] = other_tracker;
	run_result v2 = sc.run(prog, with_malloc({ "verify", addrs, "clean" }));
	INFO("second verify: " << v2.describe());
	REQUIRE(v2.exited_ok());
	after = sc.check_pool();
	if (!use_malloc)
		REQUIRE(after == usage);
}

} // namespace

TEST_CASE("a named list and tree survive a clean restart at the same addresses", "[e2e][trackers]")
{
	auto ts = round_trip_trackers();
	for (size_t i = 0; i < ts.size(); i++) {
		INFO("tracker " << ts[i]);
		structs_round_trip(env_or_fail("PMT_PS"), ts[i], ts[(i + 1) % ts.size()], false, false);
	}
}

TEST_CASE("a named list and tree survive kill -9 after an epoch at the same addresses", "[e2e][trackers]")
{
	auto ts = round_trip_trackers();
	for (size_t i = 0; i < ts.size(); i++) {
		INFO("tracker " << ts[i]);
		structs_round_trip(env_or_fail("PMT_PS"), ts[i], ts[(i + 1) % ts.size()], true, false);
	}
}

TEST_CASE("an unlinked program under LD_PRELOAD with PMTHREADS_HEAP=malloc keeps its structures",
	  "[e2e][preload][trackers]")
{
	auto ts = round_trip_trackers();
	for (size_t i = 0; i < ts.size(); i++) {
		INFO("tracker " << ts[i]);
		structs_round_trip(env_or_fail("PMT_PS_PLAIN"), ts[i], ts[(i + 1) % ts.size()], true, true);
	}
}

TEST_CASE("read() from a file into a persistent buffer, under both trackers", "[e2e][trackers]")
{
	std::vector<std::pair<std::string, bool>> progs = { { env_or_fail("PMT_PS"), false },
							    { env_or_fail("PMT_PS_PLAIN"), true } };
	for (const char *tracker : trackers()) {
		for (auto &pr : progs) {
			INFO("tracker " << tracker << ", " << pr.first);
			scenario sc(tracker);
			if (pr.second)
				sc.env["LD_PRELOAD"] = env_or_fail("PMT_LIB");
			// 300 KiB + a bit: not page-aligned, many pages.
			std::vector<unsigned char> data(300 * 1024 + 123);
			std::mt19937 rng(42);
			for (auto &c : data)
				c = (unsigned char)rng();
			std::string file = sc.dir.file("input");
			write_file(file, data.data(), data.size());
			run_result r = sc.run(pr.first, { "readfile", file, "kill" });
			INFO("readfile: " << r.describe());
			REQUIRE(r.killed());
			REQUIRE(r.out == "read " + std::to_string(data.size()) + "\n");
			sc.check_pool();
			run_result v = sc.run(pr.first, { "readverify", file });
			INFO("readverify: " << v.describe());
			REQUIRE(v.exited_ok());
			sc.check_pool();
		}
	}
}

// pmthreads_sync promises durability, not a staged snapshot: with epochs
// persisted after the gate reopens, a sync that returned at the quiescent
// point would let the kill right after it lose the last round.
TEST_CASE("pmthreads_sync makes the data durable before it returns", "[e2e][trackers]")
{
	std::vector<std::pair<std::string, bool>> progs = { { env_or_fail("PMT_PS"), false },
							    { env_or_fail("PMT_PS_PLAIN"), true } };
	for (const char *tracker : trackers()) {
		for (auto &pr : progs) {
			INFO("tracker " << tracker << ", " << pr.first);
			scenario sc(tracker);
			if (pr.second)
				sc.env["LD_PRELOAD"] = env_or_fail("PMT_LIB");
			// Only the syncs persist: no timed epoch within the test.
			sc.env["PMTHREADS_INTERVAL_MS"] = "3600000";
			const std::string rounds = "5";
			run_result r = sc.run(pr.first, { "synckill", rounds });
			INFO("synckill: " << r.describe());
			REQUIRE(r.killed());
			sc.check_pool();
			run_result v = sc.run(pr.first, { "syncverify", rounds });
			INFO("syncverify: " << v.describe());
			REQUIRE(v.exited_ok());
			REQUIRE(v.out == "synced " + rounds + "\n");
			sc.check_pool();
		}
	}
}

TEST_CASE("a program's own SIGSEGV handler gets its faults, heap writes keep working", "[e2e][trackers]")
{
	std::vector<std::pair<std::string, bool>> progs = { { env_or_fail("PMT_PS"), false },
							    { env_or_fail("PMT_PS_PLAIN"), true } };
	for (const char *tracker : trackers()) {
		for (auto &pr : progs) {
			INFO("tracker " << tracker << ", " << pr.first);
			scenario sc(tracker);
			if (pr.second)
				sc.env["LD_PRELOAD"] = env_or_fail("PMT_LIB");
			run_result r = sc.run(pr.first, { "segv" });
			INFO("segv: " << r.describe());
			REQUIRE(r.exited_ok());
			REQUIRE(r.out == "segv handled 2 2\n");
			sc.check_pool();
		}
	}
}
