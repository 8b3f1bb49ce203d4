/* SPDX-License-Identifier: BSD-3-Clause */
// Catch2's main for every unit test, plus the skip that Debian 12's Catch2
// 2.13 lacks: a meson test whose cases need something this machine may not
// have sets PMT_TEST_NEEDS, and the executable then exits 77 (meson: SKIP)
// with the reason when it is missing, before any case runs.  Values:
//   uffd                the uffd write tracker (WP async + PAGEMAP_SCAN)
//   uffd-kernel-faults  a userfaultfd whose kernel accesses wait (root or
//                       vm.unprivileged_userfaultfd=1): lazy restore's
//                       system-call cases
//   debug               a -Dbuildtype=debug build (PMT_ASSERT compiled in)
//   root                root, and /usr/bin/setpriv to run a program as nobody
//   userns              `/usr/bin/unshare -rm` works (user and mount namespaces)
//   populate-write      madvise(MADV_POPULATE_WRITE), Linux >= 5.14
//   java                a `java` on PATH (the JVM case of the corpus)
//   node, redis-server, varnishd, unbound
//                       that program (find_program.hpp: PATH, then /usr/sbin
//                       and the other system directories): the corpus cases
//                       of programs tools/setup-deps may not install
// Several, comma-separated, when a test needs each (uffd,java).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

extern "C" {
#include "track/tracker.h"
}
#include "find_program.hpp"
#include "lossyfs_mount.hpp"

namespace {

// Empty when this machine has what `need` names, else why not.
std::string missing(const char *need)
{
	if (strcmp(need, "uffd") == 0)
		return tracker_uffd_supported() ? "" : tracker_uffd_unsupported_reason();
	if (strcmp(need, "uffd-kernel-faults") == 0) {
		if (!tracker_uffd_supported())
			return tracker_uffd_unsupported_reason();
		return tracker_uffd_kernel_faults_possible()
			       ? ""
			       : "userfaultfd is user-mode-only here (needs root, CAP_SYS_PTRACE or "
				 "vm.unprivileged_userfaultfd=1)";
	}
	if (strcmp(need, "debug") == 0) {
#ifdef PMT_DEBUG
		return "";
#else
		return "not a -Dbuildtype=debug build: PMT_ASSERT is compiled out";
#endif
	}
	if (strcmp(need, "root") == 0) {
		if (geteuid() != 0)
			return "not root";
		return access("/usr/bin/setpriv", X_OK) == 0 ? "" : "no /usr/bin/setpriv";
	}
	if (strcmp(need, "userns") == 0)
		return system("/usr/bin/unshare -rm true >/dev/null 2>&1") == 0
			       ? ""
			       : "`/usr/bin/unshare -rm true` failed (no util-linux, or no user "
				 "namespaces for this user)";
	if (strcmp(need, "populate-write") == 0) {
		size_t ps = (size_t)sysconf(_SC_PAGESIZE);
		void *p = mmap(nullptr, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return "mmap failed";
		bool ok = madvise(p, ps, 23 /* MADV_POPULATE_WRITE */) == 0;
		munmap(p, ps);
		return ok ? "" : "madvise(MADV_POPULATE_WRITE) is not supported (Linux < 5.14)";
	}
	if (strcmp(need, "fuse") == 0) {
		if (access("/dev/fuse", R_OK | W_OK) != 0)
			return "no usable /dev/fuse";
		const char *exe = getenv("PMT_LOSSYFS");
		if (exe == nullptr)
			return "PMT_LOSSYFS is not set (meson test sets it)";
		char dir[] = "/tmp/pmt-fuse-probe-XXXXXX";
		if (mkdtemp(dir) == nullptr)
			return "cannot make a directory in /tmp";
		bool ok;
		{
			lossyfs::mount_point m = lossyfs::make(exe, dir);
			ok = m.start();
		}
		(void)!system((std::string("rm -rf '") + dir + "'").c_str());
		return ok ? "" : "mounting a FUSE file system is not allowed here (or fusermount3 is missing)";
	}
	// The corpus' programs, with the Debian package that has each and
	// why tools/setup-deps leaves it out or where a user may lack it.
	static const struct {
		const char *program, *why;
	} programs[] = {
		{ "java", "no `java` on PATH (Debian: default-jre-headless, about 230 MB installed: "
			  "tools/setup-deps leaves it out)" },
		{ "node", "no `node` (Debian: nodejs, about 90 MB installed with libnode and ICU: "
			  "tools/setup-deps leaves it out)" },
		{ "redis-server", "no `redis-server` (Debian: redis-server; tools/setup-deps installs it)" },
		{ "varnishd", "no `varnishd` on PATH or in /usr/sbin (Debian: varnish; tools/setup-deps "
			      "installs it)" },
		{ "unbound", "no `unbound` on PATH or in /usr/sbin (Debian: unbound; tools/setup-deps "
			     "installs it)" },
	};
	for (const auto &p : programs)
		if (strcmp(need, p.program) == 0)
			return find_program(p.program).empty() ? p.why : "";
	return std::string("unknown PMT_TEST_NEEDS value '") + need + "'";
}

} // namespace

int main(int argc, char **argv)
{
	const char *needs = getenv("PMT_TEST_NEEDS");
	std::string list = needs != nullptr ? needs : "";
	for (size_t at = 0; at < list.size();) {
		size_t comma = list.find(',', at);
		if (comma == std::string::npos)
			comma = list.size();
		std::string need = list.substr(at, comma - at);
		at = comma + 1;
		std::string why = missing(need.c_str());
		if (why.rfind("unknown", 0) == 0) {
			fprintf(stderr, "%s (expected uffd, uffd-kernel-faults, debug, root, userns, "
				"populate-write, fuse, java, node, redis-server, varnishd or unbound)\n", why.c_str());
			return 2;
		}
		if (!why.empty()) {
			printf("SKIP: needs %s: %s\n", need.c_str(), why.c_str());
			return 77;
		}
	}
	return Catch::Session().run(argc, argv);
}
