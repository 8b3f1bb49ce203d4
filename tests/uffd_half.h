/* SPDX-License-Identifier: BSD-3-Clause */
// Which half of a split test this run is.  An executable whose cases need
// the uffd tracker runs as two meson tests (tests/meson.build):
//   NAME       cases "~[uffd]"; per-tracker cases over mprotect only
//   NAME-uffd  PMT_TEST_NEEDS=uffd (catch_main.cpp exits 77, meson SKIP,
//              when this kernel or its permissions lack the uffd tracker);
//              cases "[uffd],[trackers]": the uffd-only ones, and the
//              per-tracker ones over uffd
// so that a machine without userfaultfd shows the uffd half as skipped
// rather than passing it silently.  A case tagged [trackers] loops over its
// file's list for this half (backends(), cases(), trackers(), modes(), the
// restore paths); one tagged [uffd] needs the uffd tracker outright.
#ifndef PMT_TESTS_UFFD_HALF_H
#define PMT_TESTS_UFFD_HALF_H

#include <cstdlib>
#include <cstring>
#include <vector>

inline bool uffd_half()
{
	const char *need = getenv("PMT_TEST_NEEDS");
	return need != nullptr && strncmp(need, "uffd", 4) == 0;
}

// How the end-to-end tests (test_preload, test_conform, test_corpus) run an
// unmodified program under the library: the uffd half runs the persistent
// heap under the uffd tracker; the other, interception alone (nvmalloc mode,
// no pool) and the persistent heap under mprotect.
struct preload_mode {
	const char *name, *heap, *tracker;
};

inline std::vector<preload_mode> preload_modes()
{
	if (uffd_half())
		return { { "malloc heap, uffd tracker", "malloc", "uffd" } };
	return { { "interception only", "nvmalloc", "auto" },
		 { "malloc heap, mprotect tracker", "malloc", "mprotect" } };
}

#endif
