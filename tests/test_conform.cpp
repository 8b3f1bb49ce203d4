/* SPDX-License-Identifier: BSD-3-Clause */
// POSIX conformance under the preload: each cause by which a program of the
// Open POSIX Test Suite behaved differently under pmthreads than natively
// (issue 21), as an ordinary program of tests/progs/ (never linked with
// pmthreads) that must exit with the same status and print exactly the same,
// on stdout and stderr, natively and under LD_PRELOAD=libpmthreads.so in
// both heap modes and with both trackers (uffd_half.h).  Every run has a
// time limit (timeout -s KILL): a process that does not end is a failure,
// not a hang of the suite.
#include "subprocess.hpp"
#include "uffd_half.h"

#include <string>
#include <vector>

namespace {
using namespace subprocess;

const char *const time_limit = "60";

run_result run_limited(const std::string &path, const std::vector<std::string> &args,
		       std::map<std::string, std::string> env)
{
	std::vector<std::string> argv = { "/usr/bin/timeout", "-s", "KILL", time_limit, path };
	argv.insert(argv.end(), args.begin(), args.end());
	// timeout itself runs with the library inert (not the target).
	env["PMTHREADS_PROGRAM"] = path;
	return run(argv, env);
}

struct outcome {
	run_result native;
	std::vector<std::string> stats;	// per mode, the stats JSON
};

// Run prog natively, then in every mode of this half; every run must end as
// the native one did and print the same.
outcome same_as_native(const std::string &prog, const std::vector<std::string> &args = {},
		       const std::map<std::string, std::string> &extra = {},
		       unsigned interval_ms = 10, const char *pool_size = "64M")
{
	std::string path = env_or_fail("PMT_PROGS") + "/" + prog, lib = env_or_fail("PMT_LIB");
	outcome o;
	o.native = run_limited(path, args, {});
	INFO(prog << " natively: " << o.native.describe());
	REQUIRE(WIFEXITED(o.native.wait_status));
	REQUIRE_FALSE(o.native.out.empty());
	scratch_dir dir;
	for (const preload_mode &m : preload_modes()) {
		std::string base = dir.path + "/" + m.heap + "-" + m.tracker;
		std::map<std::string, std::string> env = extra;	// extra wins
		env.insert({ { "LD_PRELOAD", lib },
			     { "PMTHREADS_POOL", base + ".pool" },
			     { "PMTHREADS_POOL_SIZE", pool_size },
			     { "PMTHREADS_HEAP", m.heap },
			     { "PMTHREADS_TRACKER", m.tracker },
			     { "PMTHREADS_INTERVAL_MS", std::to_string(interval_ms) },
			     { "PMTHREADS_STATS", base + ".json" },
			     { "PMTHREADS_VERBOSE", "0" } });
		run_result r = run_limited(path, args, env);
		INFO(prog << ", " << m.name << ": " << r.describe());
		CHECK(r.wait_status == o.native.wait_status);
		CHECK(r.out == o.native.out);
		CHECK(r.err == o.native.err);
		std::string s = slurp(base + ".json");
		if (std::string(m.heap) == "malloc" && WIFEXITED(r.wait_status)) {
			// The final epoch ran: the exit went through the runtime's
			// shutdown.
			CHECK(json_number(s, "epochs") >= 1);
		}
		o.stats.push_back(s);
	}
	return o;
}
} // namespace

TEST_CASE("pthread_exit from main ends the process with its last thread", "[conform][trackers]")
{
	// Before: main stayed a zombie and the epoch thread kept the process
	// alive until SIGKILL (here: the time limit).
	outcome o = same_as_native("conf_mainexit");
	CHECK(o.native.status == 0);
	CHECK(o.native.out.find("total 600") != std::string::npos);
}

TEST_CASE("a signal the program blocked is never taken by a runtime thread", "[conform][trackers]")
{
	// The runtime's threads start just before main; one not yet running
	// with every signal blocked took the SIGUSR1 that main blocked and
	// sent to itself at once, and the process died of it.  A race: several
	// runs.
	for (int i = 0; i < 5; i++) {
		outcome o = same_as_native("conf_sigmask");
		CHECK(o.native.out == "SIGUSR1 pending: yes\nother threads that would take it: 0\n");
	}
}

TEST_CASE("every pthread key is the program's", "[conform][trackers]")
{
	// libpmem's constructor took one before main (EAGAIN at 1023); now it
	// is loaded only for a pool on persistent memory.
	outcome o = same_as_native("conf_keys");
	CHECK(o.native.out.find("1024 keys") != std::string::npos);
}

TEST_CASE("every glibc entry point that installs a handler is seen", "[conform][trackers]")
{
	// Built with -std=c99: signal() is __sysv_signal, which installed the
	// program's SIGSEGV handler past the mprotect tracker's (the next write
	// to a clean heap page went to the program's handler).
	same_as_native("conf_sysvsignal");
}

TEST_CASE("heap memory the kernel writes as a stack never faults", "[conform][trackers]")
{
	// Thread stacks from posix_memalign/malloc (pthread_attr_setstack), an
	// alternate signal stack from malloc, glibc's SIGEV_THREAD helper
	// thread: under the mprotect tracker each killed the process (the
	// kernel cannot deliver a stack's fault on that stack; the helper
	// runs with SIGSEGV blocked).  Under uffd the guarded write-back
	// (since removed) killed it the same way.
	outcome o = same_as_native("conf_heapstacks", {}, {});
	CHECK(o.native.out == "threads on heap stacks: total 16652\n"
			      "signals 21, on the alternate stack 20\n"
			      "timer callbacks: at least 20: yes\n");
}

TEST_CASE("malloc honours RLIMIT_AS and RLIMIT_DATA", "[conform][trackers]")
{
	// In malloc mode the heap grew until the pool was full (8 GiB by
	// default); and a limit below the runtime's own mappings made the
	// kernel refuse every later mapping, and under the mprotect tracker
	// every page made writable again (RLIMIT_DATA).
	for (const char *which : { "as", "data" }) {
		// A pool larger than the limit: the limit must stop it first.
		outcome o = same_as_native("conf_rlimit", { which },
					   { { "PMTHREADS_POOL_SIZE", "256M" } });
		CHECK(o.native.out.find("ENOMEM") != std::string::npos);
		CHECK(o.native.out.find(": yes") != std::string::npos);
	}
}

TEST_CASE("pthread corners: robust, error-checking, recursive, cancelled, ended holding, "
	  "process-shared, locks in signal handlers", "[conform][trackers]")
{
	outcome o = same_as_native("conf_corners");
	CHECK(o.native.out.find("robust: lock after the owner died: EOWNERDEAD") != std::string::npos);
	CHECK(o.native.out.find("errorcheck: timedlock held elsewhere: ETIMEDOUT") !=
	      std::string::npos);
	CHECK(o.native.out.find("done\n") != std::string::npos);
	for (const std::string &s : o.stats) {
		INFO(s);
		if (json_text(s, "persistence") != "true")
			continue;
		// About 1 s at a 10 ms interval.  A level left behind by a failed
		// lock call, a cancelled thread or a thread that ended holding a
		// lock would have every later attempt abandoned.
		CHECK(json_number(s, "epochs") >= 20);
		CHECK(json_number(s, "abandoned") * 4 < json_number(s, "epochs"));
	}
}

TEST_CASE("a thread cancelled in a condition wait keeps its critical section", "[conform]")
{
	// The cleanup handler of the program's outer lock writes the heap
	// while that lock is held: after a cancelled pthread_cond_wait the
	// thread counted one level short, and the FASE checker saw that write
	// as outside any lock.
	std::string path = env_or_fail("PMT_PROGS") + "/conf_corners", lib = env_or_fail("PMT_LIB");
	scratch_dir dir;
	run_result native = run_limited(path, {}, {});
	run_result r = run_limited(path, {}, { { "LD_PRELOAD", lib },
					       { "PMTHREADS_POOL", dir.path + "/p.pool" },
					       { "PMTHREADS_POOL_SIZE", "64M" },
					       { "PMTHREADS_HEAP", "malloc" },
					       { "PMTHREADS_CHECK", "fail" } });
	INFO(r.describe());
	CHECK(r.status == 0);
	CHECK(r.out == native.out);
	CHECK(r.err.find("outside any lock") == std::string::npos);
}

TEST_CASE("errno is 0 at main", "[conform][trackers]")
{
	outcome o = same_as_native("conf_errno");
	CHECK(o.native.out == "errno at main: 0\n");
}

TEST_CASE("PMTHREADS_VERBOSE=0 silences what is not an error", "[conform]")
{
	std::string path = env_or_fail("PMT_PROGS") + "/conf_errno", lib = env_or_fail("PMT_LIB");
	scratch_dir dir;
	std::map<std::string, std::string> env = { { "LD_PRELOAD", lib },
						   { "PMTHREADS_POOL", dir.path + "/p.pool" },
						   { "PMTHREADS_POOL_SIZE", "64M" } };
	// A program that does not call the API is told so by default...
	run_result told = run_limited(path, {}, env);
	CHECK(told.status == 0);
	CHECK(told.err.find("does not call the pmthreads API") != std::string::npos);
	// ...and not when the user asked for quiet.
	env["PMTHREADS_VERBOSE"] = "0";
	run_result quiet = run_limited(path, {}, env);
	CHECK(quiet.status == 0);
	CHECK(quiet.err == "");
	// An error still is: a pool that cannot be opened.
	env["PMTHREADS_POOL"] = dir.path + "/no/such/dir/p.pool";
	env["PMTHREADS_HEAP"] = "malloc";
	run_result error = run_limited(path, {}, env);
	CHECK(error.status == 0);
	CHECK(error.err.find("pmthreads: ") != std::string::npos);
}

TEST_CASE("SIGSEGV is blocked as the program asks, and the heap's first writes are still served",
	  "[conform][trackers]")
{
	// Issue 33: a SIGSEGV handler without SA_NODEFER (HotSpot's) ran with
	// SIGSEGV blocked and stayed so when it unblocked it, and its first
	// write to a write-protected heap page ended the process; SIGSEGV was
	// taken out of every handler's sa_mask (sigaction/8-13: a SIGSEGV
	// raised in a SIGTERM handler was delivered at once).  Each line is
	// one of the program's observations, the same natively and in every
	// mode.
	outcome o = same_as_native("conf_segvmask");
	const std::string &out = o.native.out;
	CHECK(out.find("fault, handler unblocks SIGSEGV: calls 1, a fault yes, SIGSEGV blocked "
		       "in it yes (ucontext: no), after unblocking no; heap written 2080") !=
	      std::string::npos);
	CHECK(out.find("in the SIGTERM handler: SIGSEGV blocked yes, pending yes, caught 0; "
		       "after it: caught 1") != std::string::npos);
	CHECK(out.find("raised while blocked: caught 0, pending yes") != std::string::npos);
	CHECK(out.find("old mask holds SIGSEGV yes") != std::string::npos);
	CHECK(out.find("exec child: SIGSEGV arrived blocked: yes") != std::string::npos);
}

TEST_CASE("asynchronous I/O reads into heap pages the tracker protects", "[conform][trackers]")
{
	// Issue 33 (aio_suspend/1-1, 4-1, 9-1, lio_listio/15-1 under the
	// mprotect tracker): glibc's helper thread, every signal blocked, read
	// into a write-protected buffer (EFAULT) and stored the result in a
	// write-protected control block or request (the process died).
	outcome o = same_as_native("conf_aio");
	const std::string &out = o.native.out;
	CHECK(out.find("aio_read + aio_suspend: 4 of 4 read") != std::string::npos);
	CHECK(out.find("lio_listio(LIO_WAIT): 4 of 4 read") != std::string::npos);
	CHECK(out.find("lio_listio(LIO_NOWAIT): 4 of 4 read") != std::string::npos);
	CHECK(out.find("error") == std::string::npos);
	CHECK(out.find("done\n") != std::string::npos);
}

TEST_CASE("mlockall locks what the program mapped, not the heap's reserve", "[conform][trackers][mlock]")
{
	// Issue 33 (mlockall/3-6, 3-7, 8-1 in the malloc modes):
	// mlockall(MCL_CURRENT) faulted in and locked the heap's whole range,
	// the pool's mapping and the epoch's reserves.  A 256 MiB pool here.
	// Without CAP_IPC_LOCK, RLIMIT_MEMLOCK (which only a privileged process
	// raises) bounds mlockall: the meson tests conform-mlock(-uffd) run this
	// case and are skipped there (PMT_TEST_NEEDS=ipc-lock).
	outcome o = same_as_native("conf_mlockall", {}, {}, 10, "256M");
	const std::string &out = o.native.out;
	REQUIRE(out.rfind("skip:", 0) != 0);
	CHECK(out.find("mlockall(MCL_CURRENT): 0, errno untouched") != std::string::npos);
	CHECK(out.find("less than 64 MiB yes") != std::string::npos);
	CHECK(out.find("(msync EBUSY): yes") != std::string::npos);
	CHECK(out.find("malloc is locked: yes") != std::string::npos);
	CHECK(out.find("locked after it 0 KiB") != std::string::npos);
}
