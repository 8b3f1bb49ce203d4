/* SPDX-License-Identifier: BSD-3-Clause */
// A program linked against jemalloc (tests/progs/allocmix.c) gets the whole
// malloc family from one allocator under the preload: jemalloc in nvmalloc
// mode, as natively, and the persistent heap in malloc mode; a block never
// reaches another allocator's function.
#include "subprocess.hpp"
#include "uffd_half.h"

#include <cstring>
#include <sstream>
#include <string>

namespace {
using namespace subprocess;

// The allocating entry points allocmix reports, in its order.
const char *const entries[] = { "malloc", "calloc", "realloc", "reallocarray", "memalign",
				"posix_memalign", "aligned_alloc", "valloc", "pvalloc", "mallocx",
				"mallocx(align, zero)" };
const long long keep_bytes = 256 << 10; // allocmix.c's KEEP_BYTES

std::string expected(const char *server, bool native)
{
	std::ostringstream s;
	for (const char *e : entries) {
		if (native && (strcmp(e, "pvalloc") == 0 || strcmp(e, "reallocarray") == 0))
			continue;
		s << e << ": " << server << "\n";
	}
	s << "ok\n";
	return s.str();
}
} // namespace

TEST_CASE("allocmix natively: every entry point jemalloc defines is jemalloc's", "[allocmix]")
{
	run_result r = run({ env_or_fail("PMT_ALLOCMIX"), "native" }, {});
	INFO(r.describe());
	CHECK(r.status == 0);
	CHECK(r.out == expected("jemalloc", true));
}

TEST_CASE("allocmix under the preload: one allocator behind every entry point",
	  "[allocmix][trackers]")
{
	std::string prog = env_or_fail("PMT_ALLOCMIX"), lib = env_or_fail("PMT_LIB");
	scratch_dir dir;
	for (const preload_mode &m : preload_modes()) {
		INFO(m.name);
		std::string json = dir.path + "/" + m.heap + "-" + m.tracker + ".json";
		run_result r = run({ prog }, {
						     { "LD_PRELOAD", lib },
						     { "PMTHREADS_POOL", dir.path + "/" + m.heap + ".pool" },
						     { "PMTHREADS_POOL_SIZE", "64M" },
						     { "PMTHREADS_HEAP", m.heap },
						     { "PMTHREADS_TRACKER", m.tracker },
						     { "PMTHREADS_INTERVAL_MS", "10" },
						     { "PMTHREADS_STATS", json },
					     });
		INFO(r.describe());
		CHECK(r.status == 0);
		bool heap = strcmp(m.heap, "malloc") == 0;
		// nvmalloc mode: what the program gets natively, jemalloc, for
		// glibc's pvalloc and reallocarray too; malloc mode: never
		// jemalloc, and the kept blocks are in the persistent heap.
		CHECK(r.out == expected(heap ? "other" : "jemalloc", false));
		std::string s = slurp(json);
		REQUIRE_FALSE(s.empty());
		long long in_use = json_number(s, "heap_bytes_in_use");
		if (heap)
			CHECK(in_use >= (long long)(sizeof(entries) / sizeof(entries[0])) * keep_bytes);
		else
			CHECK(in_use == 0);
	}
}
