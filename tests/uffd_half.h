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

inline bool uffd_half()
{
	const char *need = getenv("PMT_TEST_NEEDS");
	return need != nullptr && strncmp(need, "uffd", 4) == 0;
}

#endif
