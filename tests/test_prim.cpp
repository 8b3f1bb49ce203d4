/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/prim/'s CPU part (cpu_<arch>.c, chosen by -Dprim): what a
// real SIGSEGV was, decoded from its signal frame, and the interrupted
// context's signal mask.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "prim_probe.h"

namespace {

// The CPU part this build uses (lib/meson.build's prim_cpu).
std::string cpu_part()
{
	const char *c = getenv("PMT_PRIM_CPU");
	REQUIRE(c != nullptr);
	return c;
}

// What prim_fault_access must say for an access of the kind named: the
// generic part cannot tell any of them apart.
std::string expected(const char *kind)
{
	return cpu_part() == "generic" ? "unknown" : kind;
}

} // namespace

TEST_CASE("prim: a fault's access kind from the signal frame", "[prim]")
{
	INFO("cpu part: cpu_" << cpu_part() << ".c");
	int usr1 = 0;
	CHECK(probe_fault(PROBE_READ, &usr1) == expected("read"));
	CHECK(usr1 == 1);
	CHECK(probe_fault(PROBE_WRITE, &usr1) == expected("write"));
	CHECK(usr1 == 1);
	// Jumping into data must not look like a write (the mprotect tracker
	// would unprotect the page and fault again forever).
	CHECK(probe_fault(PROBE_EXEC, &usr1) == expected("exec"));
	CHECK(usr1 == 1);
}
