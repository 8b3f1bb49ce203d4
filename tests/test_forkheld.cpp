/* SPDX-License-Identifier: BSD-3-Clause */
// A fork child never waits on a lock of the runtime's (issue 46): fork() copies
// a lock another thread holds as held, and that thread is not in the child.
// tests/progs/forkheld.c forks while another of its threads holds each lock
// the runtime names (lib/prim/prim.h: every prim_lock_t of lib/ is named, the
// file-state test checks it), in turn, under the tests' build of the preload
// (libpmthreads_hooked, whose hooks hold a lock on demand); each child must
// find every lock free, use the runtime (heap, nvmalloc, sigaction,
// descriptors, threads, a fork of its own) and exit normally, its exit handler
// included.  In both heap modes, on both trackers (this half's), with output
// commit holding bytes (so that output queues exist), and under the FASE
// checker with a fault handler waiting inside the tracker at the fork.  The
// statistics go to standard error: a child writes none (pmthreads(7)).
#include "pool_medium.hpp"
#include "subprocess.hpp"
#include "uffd_half.h"

#include <map>
#include <string>
#include <vector>

namespace {
using namespace subprocess;

struct config {
	const char *name, *heap, *output, *check;
};

std::vector<config> configs()
{
	if (uffd_half())
		return { { "nvmalloc heap", "nvmalloc", "off", "0" },
			 { "malloc heap, output commit", "malloc", "commit", "0" } };
	return { { "nvmalloc heap, output commit", "nvmalloc", "commit", "0" },
		 { "malloc heap", "malloc", "off", "0" },
		 { "FASE checker, nvmalloc heap", "nvmalloc", "off", "1" } };
}

size_t count(const std::string &s, const std::string &what)
{
	size_t n = 0;
	for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
		n++;
	return n;
}
} // namespace

TEST_CASE("a fork child runs and exits normally whichever of the runtime's locks another "
	  "thread held", "[forkheld][trackers]")
{
	const std::string prog = env_or_fail("PMT_FORKHELD"), lib = env_or_fail("PMT_LIB_HOOKED");
	pool_medium::dir dir("forkheld");
	for (const config &c : configs()) {
		INFO(c.name << ", tracker " << (uffd_half() ? "uffd" : "mprotect"));
		std::string pool = dir.file((std::string(c.heap) + c.output + c.check + ".pool").c_str());
		unlink(pool.c_str());
		std::map<std::string, std::string> env = {
			{ "LD_PRELOAD", lib },
			{ "PMTHREADS_POOL", pool },
			{ "PMTHREADS_POOL_SIZE", "64M" },
			{ "PMTHREADS_HEAP", c.heap },
			{ "PMTHREADS_TRACKER", uffd_half() ? "uffd" : "mprotect" },
			{ "PMTHREADS_OUTPUT", c.output },
			{ "PMTHREADS_CHECK", c.check },
			{ "PMTHREADS_STATS", "-" },
			// No epoch comes due while a lock is held (each one a
			// pmthreads_sync or output commit asks for is over
			// before the next hold); the checker has its own 10 ms.
			{ "PMTHREADS_INTERVAL_MS", "600000" },
		};
		pool_medium::child_env(env);
		run_result r = run({ prog }, env);
		INFO(r.describe());
		CHECK(r.status == 0);
		CHECK(r.out.find("FAILED") == std::string::npos);
		size_t forks = 0, kinds = 0, of = 0;
		auto at = r.out.find("\nforks ");
		if (at != std::string::npos)
			forks = std::stoul(r.out.substr(at + 7));
		at = r.out.find("\nkinds ");
		if (at != std::string::npos && sscanf(r.out.c_str() + at + 7, "%zu of %zu", &kinds, &of) != 2)
			kinds = 0;
		// Every child said it was done: none died quietly.
		CHECK(count(r.out, " done\n") >= forks);
		// The locks that exist in every run: the runtime's start-up, the
		// heap's (names, shared slot, every class, pages), the tracker's
		// attaching, quiesce's, the signal dispositions' ...
		CHECK(forks >= 40);
		CHECK(kinds >= 20);
		CHECK(r.out.find(" heap: ") != std::string::npos);
		CHECK(r.out.find(" runtime/stats: the statistics file's writer") != std::string::npos);
		if (std::string(c.output) == "commit")
			CHECK(r.out.find(" output: a descriptor's queue of held bytes") != std::string::npos);
		if (std::string(c.check) == "1")
			CHECK(r.out.find("handler waiting at fork") != std::string::npos);
		// One statistics report: the parent's, at its exit; the children
		// wrote none.
		CHECK(count(r.err, "\"persistence\"") == 1);
	}
}
