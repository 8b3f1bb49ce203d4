// SPDX-License-Identifier: BSD-3-Clause
// test_nvthreads: programs written for NVthreads (tests/nvthreads/), built
// unchanged against nvrecovery.h as C and as C++, killed with SIGKILL and
// restarted: each gets its data back.  PMT_NVT_DIR names the directory of
// the built programs (meson's build directory, or the programs
// tests/nvthreads/install-check.sh built against an installed pmthreads).
#include <catch2/catch.hpp>

#include "subprocess.hpp"
#include "uffd_half.h"

#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace subprocess;

namespace {

std::string prog(const std::string &name)
{
	return env_or_fail("PMT_NVT_DIR") + "/nvt_" + name;
}

// A new pool in a scratch directory, and the environment that uses it: this
// half's tracker (uffd_half.h: nvthreads-uffd runs the [trackers] cases over
// uffd, nvthreads over mprotect).
struct pool_env {
	scratch_dir dir;
	std::map<std::string, std::string> env;
	std::string pool;
	pool_env() : pool(dir.path + "/nvt.pool")
	{
		env = { { "PMTHREADS_POOL", pool }, { "PMTHREADS_POOL_SIZE", "64M" },
			{ "PMTHREADS_INTERVAL_MS", "50" },
			{ "PMTHREADS_TRACKER", uffd_half() ? "uffd" : "mprotect" } };
	}
};

// Run argv; once a line of its output starts with `until`, wait after_ms and
// kill it with SIGKILL (subprocess::spawn and finish).
run_result run_and_kill(const std::vector<std::string> &argv,
			const std::map<std::string, std::string> &extra, const std::string &until,
			unsigned after_ms)
{
	spawned c = spawn(argv, extra);
	FILE *f = fdopen(c.out_fd, "r");
	REQUIRE(f != nullptr);
	run_result r;
	char line[512];
	while (fgets(line, sizeof(line), f) != nullptr) {
		r.out += line;
		if (strncmp(line, until.c_str(), until.size()) == 0) {
			usleep(after_ms * 1000);
			kill(c.pid, SIGKILL);
			break;
		}
	}
	r.out += read_fd(c.out_fd);
	fclose(f);
	finish(c, r);
	return r;
}

// The number after `key` in out (-1: none).
long long number_after(const std::string &out, const std::string &key)
{
	auto at = out.find(key);
	return at == std::string::npos ? -1 : std::atoll(out.c_str() + at + key.size());
}

struct heap_facts {
	unsigned long long names = 0, held = 0, bytes = 0;
};

// pmthreads-recover check over the pool: consistent, and what it holds.
heap_facts check_pool(const std::string &pool)
{
	run_result r = run({ env_or_fail("PMTHREADS_RECOVER_TOOL"), "check", pool }, {});
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	size_t at = r.out.find("heap: consistent: ");
	REQUIRE(at != std::string::npos);
	heap_facts h;
	REQUIRE(sscanf(r.out.c_str() + at, "heap: consistent: %llu named objects, %llu held for "
		       "nvrecover, %llu bytes in use", &h.names, &h.held, &h.bytes) == 3);
	return h;
}

} // namespace

TEST_CASE("NVthreads idiom: an int, an array and an aggregate come back after each SIGKILL",
	  "[nvthreads][trackers]")
{
	std::string lang = GENERATE(as<std::string>{}, "c", "cpp");
	std::string p = prog("idiom_" + lang);
	INFO(p);
	pool_env pe;
	run_result r = run_and_kill({ p, "2000" }, pe.env, "durable ", 20);
	INFO(r.describe());
	REQUIRE(r.killed());
	REQUIRE(r.out.find("start crashed=0 counter=0\n") != std::string::npos);
	long long durable = number_after(r.out, "durable ");
	REQUIRE(durable == 2000);
	heap_facts first = check_pool(pe.pool);
	CHECK(first.names == 3);
	for (unsigned round = 0; round < 3; round++) {
		r = run_and_kill({ p, "2000" }, pe.env, "durable ", 20 + 60 * round);
		INFO("round " << round << ": " << r.describe());
		REQUIRE(r.killed());	// not exit 2: the recovered state held its invariants
		REQUIRE(r.out.find("start crashed=1 counter=") != std::string::npos);
		long long start = number_after(r.out, "counter=");
		CHECK(start >= durable);	// nothing made durable is lost
		long long now = number_after(r.out, "durable ");
		CHECK(now == start + 2000);
		durable = now;
		// each restart leaves the three objects, none held, nothing leaked
		heap_facts h = check_pool(pe.pool);
		CHECK(h.names == 3);
		CHECK(h.held == 0);
		CHECK(h.bytes == first.bytes);
	}
	r = run({ p, "100", "exit" }, pe.env);
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	CHECK(r.out.find("start crashed=1 counter=") != std::string::npos);
	CHECK(number_after(r.out, "counter=") >= durable);
	// After a clean exit an NVthreads program starts over (isCrashed() is
	// false), and the previous run's objects are not kept for it.
	r = run({ p, "100", "exit" }, pe.env);
	REQUIRE(r.exited_ok());
	CHECK(r.out.find("start crashed=0 counter=0\n") != std::string::npos);
	heap_facts h = check_pool(pe.pool);
	CHECK(h.names == 3);
	CHECK(h.held == 0);
	CHECK(h.bytes == first.bytes);
	// Started over after a clean exit and killed: the next run gets that
	// run's work, not the older clean run's objects it went on without.
	r = run_and_kill({ p, "2000" }, pe.env, "durable ", 20);
	REQUIRE(r.killed());
	CHECK(r.out.find("start crashed=0 counter=0\n") != std::string::npos);
	r = run_and_kill({ p, "2000" }, pe.env, "durable ", 20);
	INFO(r.describe());
	REQUIRE(r.killed());
	CHECK(r.out.find("start crashed=1 counter=") != std::string::npos);
	CHECK(number_after(r.out, "counter=") >= 2000);
}

TEST_CASE("NVthreads idiom: a Phoenix-style job resumes from the iteration it reached",
	  "[nvthreads][trackers]")
{
	std::string lang = GENERATE(as<std::string>{}, "c", "cpp");
	std::string p = prog("kmeans_" + lang);
	INFO(p);
	const std::string iterations = "20";
	pool_env whole;
	run_result r = run({ p, iterations }, whole.env);
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	REQUIRE(r.out.find("starting\n") != std::string::npos);
	auto at = r.out.find("result ");
	REQUIRE(at != std::string::npos);
	std::string result = r.out.substr(at);

	// Killed halfway through iteration 4, then through iteration 9.
	pool_env pe;
	r = run({ p, iterations, "3" }, pe.env);
	INFO(r.describe());
	REQUIRE(r.killed());
	REQUIRE(r.out.find("iteration 3 done\n") != std::string::npos);
	REQUIRE(r.out.find("iteration 4 done") == std::string::npos);
	r = run({ p, iterations, "8" }, pe.env);
	INFO(r.describe());
	REQUIRE(r.killed());
	CHECK(number_after(r.out, "resuming at iteration ") == 3);
	REQUIRE(r.out.find("iteration 8 done\n") != std::string::npos);
	r = run({ p, iterations }, pe.env);
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	CHECK(number_after(r.out, "resuming at iteration ") == 8);
	at = r.out.find("result ");
	REQUIRE(at != std::string::npos);
	CHECK(r.out.substr(at) == result);	// as if it had never been killed
}

TEST_CASE("NVthreads idiom: nvrecover's size rule and 127-byte names across a SIGKILL",
	  "[nvthreads][trackers]")
{
	std::string lang = GENERATE(as<std::string>{}, "c", "cpp");
	pool_env pe;
	run_result r = run({ prog("rules_" + lang), "make" }, pe.env);
	INFO(r.describe());
	REQUIRE(r.killed());
	r = run({ prog("rules_" + lang), "check" }, pe.env);
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	CHECK(r.out == "ok\n");
	CHECK(check_pool(pe.pool).held == 0);
}

TEST_CASE("nvrecovery.h: NVthreads' prototypes beside pmthreads.h; pmthreads.h takes no short "
	  "names", "[nvthreads]")
{
	for (std::string name : { "headers_c", "headers_cpp", "headers_first_c", "headers_first_cpp" }) {
		pool_env pe;
		run_result r = run({ prog(name) }, pe.env);
		INFO(name << ": " << r.describe());
		CHECK(r.exited_ok());
		CHECK(r.out == "crashed=0 recover=0 value=5\n");
	}
	for (std::string name : { "own_crashed_c", "own_crashed_cpp" }) {
		pool_env pe;
		run_result r = run({ prog(name) }, pe.env);
		INFO(name << ": " << r.describe());
		CHECK(r.exited_ok());
		CHECK(r.out == "crashed=0 isCrashed=7 nvcheckpoint=mine\n");
	}
}
