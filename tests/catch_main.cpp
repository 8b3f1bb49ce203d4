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
//   disk                PMT_DISK_DIR (default /var/tmp) writable and on block
//                       storage, and /proc/self/io (the epoch's bytes)
//   ipc-lock            CAP_IPC_LOCK in the effective set (mlockall without
//                       the RLIMIT_MEMLOCK bound)
//   sched-fifo          sched_setscheduler(SCHED_FIFO) allowed to a child
//   rename-noreplace    renameat2(RENAME_NOREPLACE) on /dev/shm (/tmp)
//   java                a `java` on PATH (the JVM case of the corpus)
//   node, redis-server, varnishd, unbound
//                       that program (find_program.hpp: PATH, then /usr/sbin
//                       and the other system directories): the corpus cases
//                       of programs tools/setup-deps may not install
// Several, comma-separated, when a test needs each (uffd,java).
//
// And a hang is a failure with backtraces, not a timeout: where meson.build
// gives a test PMT_TEST_TIMEOUT (its meson timeout, in seconds), a watchdog
// fires shortly before it, prints every thread's backtrace of the test and of
// each process under it (gdb), kills those processes and exits 1.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" {
#include "track/tracker.h"
}
#include "find_program.hpp"
#include "lossyfs_mount.hpp"
#include "pool_medium.hpp"

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
	if (strcmp(need, "setuid") == 0) {
		// no_new_privs (a seccomp filter such as no_userfaultfd's sets it)
		// makes exec ignore set-user-ID and set-group-ID bits.
		char buf[4096];
		FILE *f = fopen("/proc/self/status", "r");
		bool nnp = false;
		while (f != nullptr && fgets(buf, sizeof(buf), f) != nullptr)
			if (strncmp(buf, "NoNewPrivs:", 11) == 0)
				nnp = atoi(buf + 11) != 0;
		if (f != nullptr)
			fclose(f);
		return nnp ? "no_new_privs is set (under a seccomp filter, say): exec ignores "
			     "set-user-ID bits"
			   : "";
	}
	if (strcmp(need, "ptrace") == 0) {
		// A test stops threads of its child with ptrace: Yama's
		// ptrace_scope 3 or a seccomp filter may forbid even that.
		pid_t p = fork();
		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0)
			return "fork failed";
		bool ok = ptrace(PTRACE_SEIZE, p, nullptr, nullptr) == 0;
		int e = errno;
		kill(p, SIGKILL);
		waitpid(p, nullptr, 0);
		return ok ? "" : std::string("ptrace(PTRACE_SEIZE) of a child fails: ") + strerror(e) +
					 " (kernel.yama.ptrace_scope=3, or a seccomp filter)";
	}
	if (strcmp(need, "mountns") == 0)
		return system("/usr/bin/unshare -m /bin/true >/dev/null 2>&1") == 0
			       ? ""
			       : "`/usr/bin/unshare -m true` failed (no util-linux, or no right to make a "
				 "mount namespace: not root)";
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
	if (strcmp(need, "disk") == 0) {
		std::string why = pool_medium::disk_unusable(pool_medium::disk_dir());
		if (!why.empty())
			return why;
		return access("/proc/self/io", R_OK) == 0 ? "" : "this kernel keeps no /proc/self/io";
	}
	if (strcmp(need, "ipc-lock") == 0) {
		std::ifstream status("/proc/self/status");
		std::string line;
		while (std::getline(status, line))
			if (line.rfind("CapEff:", 0) == 0) {
				unsigned long long eff = strtoull(line.c_str() + 7, nullptr, 16);
				return (eff >> 14 /* CAP_IPC_LOCK */) & 1
					       ? ""
					       : "no CAP_IPC_LOCK: RLIMIT_MEMLOCK bounds mlockall";
			}
		return "no CapEff line in /proc/self/status";
	}
	if (strcmp(need, "sched-fifo") == 0) {
		pid_t child = fork();
		if (child == 0) {
			struct sched_param sp = { .sched_priority = sched_get_priority_min(SCHED_FIFO) };
			_exit(sched_setscheduler(0, SCHED_FIFO, &sp) == 0 ? 0 : 1);
		}
		int st = 0;
		if (child < 0 || waitpid(child, &st, 0) != child)
			return "fork failed";
		return WIFEXITED(st) && WEXITSTATUS(st) == 0
			       ? ""
			       : "this process may not use SCHED_FIFO (needs CAP_SYS_NICE or RLIMIT_RTPRIO)";
	}
	if (strcmp(need, "rename-noreplace") == 0) {
		const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		std::string a = std::string(base) + "/pmt-noreplace-probe-XXXXXX";
		std::vector<char> buf(a.begin(), a.end());
		buf.push_back('\0');
		int fd = mkstemp(buf.data());
		if (fd < 0)
			return std::string("cannot make a file in ") + base;
		close(fd);
		std::string to = std::string(buf.data()) + ".to";
		long r = syscall(SYS_renameat2, AT_FDCWD, buf.data(), AT_FDCWD, to.c_str(),
				 1 /* RENAME_NOREPLACE */);
		int e = errno;
		unlink(buf.data());
		unlink(to.c_str());
		return r == 0 ? "" : std::string("renameat2(RENAME_NOREPLACE) fails on ") + base + ": " +
					     strerror(e);
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

// The processes under pid, children before their parents.
void descendants(pid_t pid, std::vector<pid_t> &out)
{
	std::string tasks = "/proc/" + std::to_string(pid) + "/task";
	if (DIR *d = opendir(tasks.c_str())) {
		while (struct dirent *e = readdir(d)) {
			if (e->d_name[0] == '.')
				continue;
			std::ifstream kids(tasks + "/" + e->d_name + "/children");
			for (pid_t k; kids >> k;)
				descendants(k, out);
		}
		closedir(d);
	}
	out.push_back(pid);
}

[[noreturn]] void hang_report(unsigned ran, unsigned limit)
{
	std::vector<pid_t> tree;
	descendants(getpid(), tree);
	fprintf(stderr,
		"\nHANG: this test ran for %u s of the %u s meson gives it; the backtraces of its %zu "
		"process(es) follow, then they are killed\n",
		ran, limit, tree.size());
	fflush(nullptr);
	for (pid_t p : tree) {
		std::ifstream cmd("/proc/" + std::to_string(p) + "/cmdline");
		std::string line;
		std::getline(cmd, line, '\0');
		fprintf(stderr, "\n=== process %d (%s)\n", (int)p, line.c_str());
		fflush(nullptr);
		std::string gdb = "timeout 20 gdb -q -batch -nx -p " + std::to_string(p) +
				  " -ex 'thread apply all bt' </dev/null 1>&2 2>/dev/null";
		if (access("/usr/bin/gdb", X_OK) != 0)
			fprintf(stderr, "(no /usr/bin/gdb: tools/setup-deps installs it)\n");
		else
			(void)!system(gdb.c_str());
	}
	for (pid_t p : tree)
		if (p != getpid())
			kill(p, SIGKILL);
	fprintf(stderr, "HANG: failed\n");
	fflush(nullptr);
	_exit(1);
}

// The watchdog: PMT_TEST_TIMEOUT (seconds) is meson's timeout for this test;
// the report takes up to about 20 s a process, so it fires a tenth of the
// limit (at least 15 s) before it.
void start_watchdog()
{
	const char *t = getenv("PMT_TEST_TIMEOUT"), *mul = getenv("PMT_TEST_TIMEOUT_MULTIPLIER");
	unsigned limit = t != nullptr ? (unsigned)strtoul(t, nullptr, 10) : 0;
	if (mul != nullptr && strtod(mul, nullptr) > 0)
		limit = (unsigned)(limit * strtod(mul, nullptr));
	if (limit < 30)
		return;
	unsigned margin = limit / 10 < 15 ? 15 : limit / 10;
	unsigned at = limit - margin;
	std::thread([at, limit] {
		std::this_thread::sleep_for(std::chrono::seconds(at));
		hang_report(at, limit);
	}).detach();
}

// How many test cases ran (a listener: Catch2 2.13's session keeps no count
// it hands out).
int cases_started = 0;
struct case_counter : Catch::TestEventListenerBase {
	using TestEventListenerBase::TestEventListenerBase;
	void testCaseStarting(Catch::TestCaseInfo const &) override { cases_started++; }
};

} // namespace

CATCH_REGISTER_LISTENER(case_counter)

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
				"populate-write, disk, ipc-lock, sched-fifo, rename-noreplace, fuse, java, node, "
				"redis-server, varnishd or unbound)\n", why.c_str());
			return 2;
		}
		if (!why.empty()) {
			printf("SKIP: needs %s: %s\n", need.c_str(), why.c_str());
			return 77;
		}
	}
	start_watchdog();
	Catch::Session session;
	int r = session.run(argc, argv);
	// A filter that matches no case at all (a tag renamed, say) fails the
	// test instead of passing it with nothing run.  (Catch's --warn NoTests
	// would also fail a "[a],[b]" filter whose [a] alone matches nothing.)
	const auto &cfg = session.configData();
	if (r == 0 && cases_started == 0 && !cfg.listTests && !cfg.listTags && !cfg.listTestNamesOnly &&
	    !cfg.listReporters && !cfg.showHelp) {
		fprintf(stderr, "no test case matched the filters: nothing was tested\n");
		return 2;
	}
	return r;
}
