/* SPDX-License-Identifier: BSD-3-Clause */
// A signal whose default action ends the process ends it as an exit does
// (pmthreads(7) "Ending"): a final epoch, the pool marked clean, then death
// by the same signal.  tests/progs/endsignal.c counts in the persistent heap
// under LD_PRELOAD with a 10 s interval, so that without the final epoch
// nothing of the run would be durable; it is sent SIGTERM, SIGINT or SIGHUP
// mid-work.  The next run must find every count printed before the signal
// and no crash, and the wait status must be "killed by" the signal, as
// natively.  A program with its own SIGTERM handler keeps it; sigaction
// reports SIG_DFL; a fork child dies of SIGTERM as natively; SIGKILL stays a
// crash.  On the medium of the test setup (pool_medium.hpp).
#include "pool_medium.hpp"
#include "subprocess.hpp"

#include <csignal>
#include <cstdlib>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace subprocess;

struct signalled_run {
	run_result r;
	long last_count = -1;	// the last "count N" printed before the signal
};

// Run endsignal (mode: "" or "handler") on pool, wait until it has printed
// `counts` counts, send sig, read it to its end.  Bounded: a run that does
// not end within 60 s after the signal is killed and the test fails.
signalled_run run_and_signal(const std::string &pool, int sig, const char *mode, int counts,
			     const char *interval_ms = "10000")
{
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", env_or_fail("PMT_LIB") },
		{ "PMTHREADS_POOL", pool },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_INTERVAL_MS", interval_ms },
	};
	pool_medium::child_env(env);
	std::vector<std::string> argv = { env_or_fail("PMT_PROGS") + "/prog_endsignal" };
	if (*mode != '\0')
		argv.push_back(mode);
	spawned c = spawn(argv, env);
	signalled_run s;
	std::string buf;
	int seen = 0;
	bool sent = false, eof = false;
	for (int waited_ms = 0; waited_ms < 60000;) {
		pollfd p{ c.out_fd, POLLIN, 0 };
		int n = poll(&p, 1, 100);
		waited_ms += 100;
		if (n <= 0)
			continue;
		char chunk[4096];
		ssize_t got = read(c.out_fd, chunk, sizeof(chunk));
		if (got <= 0) {
			eof = true;
			break;
		}
		buf.append(chunk, (size_t)got);
		if (sent)
			continue;
		size_t at = 0, nl;
		seen = 0;
		while ((nl = buf.find('\n', at)) != std::string::npos) {
			if (buf.compare(at, 6, "count ") == 0) {
				seen++;
				s.last_count = std::atol(buf.c_str() + at + 6);
			}
			at = nl + 1;
		}
		if (seen >= counts) {
			REQUIRE(kill(c.pid, sig) == 0);
			sent = true;
		}
	}
	if (!sent || !eof)	// never reached its counts, or did not end after the signal
		kill(c.pid, SIGKILL);
	s.r.out = buf + read_fd(c.out_fd);
	close(c.out_fd);
	finish(c, s.r);
	INFO(s.r.describe());
	REQUIRE(sent);
	return s;
}

// "start N crashed C" of a run's output.
struct start_line {
	long count = -1;
	int crashed = -2;
};

start_line start_of(const std::string &out)
{
	start_line l;
	if (sscanf(out.c_str(), "start %ld crashed %d", &l.count, &l.crashed) != 2)
		FAIL("no start line in:\n" << out.substr(0, 500));
	return l;
}

} // namespace

TEST_CASE("SIGTERM, SIGINT and SIGHUP end the program as an exit does", "[ending]")
{
	pool_medium::dir d("ending");
	for (int sig : { SIGTERM, SIGINT, SIGHUP }) {
		std::string pool = d.file((std::string("end-") + std::to_string(sig) + ".pool").c_str());
		signalled_run first = run_and_signal(pool, sig, "", 5);
		INFO("signal " << sig << ", first run: " << first.r.describe());
		CHECK(WIFSIGNALED(first.r.wait_status));
		CHECK(WTERMSIG(first.r.wait_status) == sig);
		// What the program sees is unchanged: SIG_DFL (SIGINT may be
		// ignored by whoever started the suite: then not asked), and a
		// fork child that raises SIGTERM dies of it.
		CHECK(first.r.out.find("dfl 1 ") != std::string::npos);
		CHECK(first.r.out.find("child 0 15\n") != std::string::npos);
		CHECK(first.r.err.find("error") == std::string::npos);
		REQUIRE(first.last_count > 0);
		// The next run: no crash, and every count printed before the
		// signal is there (the 10 s interval made none durable before).
		signalled_run second = run_and_signal(pool, SIGTERM, "", 1);
		INFO("second run: " << second.r.describe());
		start_line l = start_of(second.r.out);
		CHECK(l.crashed == 0);
		CHECK(l.count >= first.last_count);
	}
}

TEST_CASE("SIGKILL stays a crash", "[ending]")
{
	pool_medium::dir d("ending");
	std::string pool = d.file("kill.pool");
	signalled_run first = run_and_signal(pool, SIGTERM, "", 1);
	REQUIRE(WTERMSIG(first.r.wait_status) == SIGTERM);
	long durable = start_of(run_and_signal(pool, SIGKILL, "", 5).r.out).count;
	signalled_run third = run_and_signal(pool, SIGTERM, "", 1);
	start_line l = start_of(third.r.out);
	INFO(third.r.describe());
	CHECK(l.crashed == 1);
	// The killed run's counts were never durable (10 s interval): the
	// third starts where the killed one did.
	CHECK(l.count == durable);
}

TEST_CASE("a signal inside a FASE ends at the last quiescent point", "[ending]")
{
	// The main thread holds a lock of its own when SIGTERM reaches it: no
	// quiescent point can come (it cannot leave its FASE), so the process
	// ends by the signal after the attempt's bound, with what the last
	// quiescent point made durable -- here nothing of this run -- and the
	// next run is told of a crash, as after an exit inside a lock.
	pool_medium::dir d("ending");
	std::string pool = d.file("infase.pool");
	REQUIRE(WTERMSIG(run_and_signal(pool, SIGTERM, "", 3).r.wait_status) == SIGTERM);
	signalled_run s = run_and_signal(pool, SIGTERM, "infase", 3, "1000");
	INFO(s.r.describe());
	CHECK(WIFSIGNALED(s.r.wait_status));
	CHECK(WTERMSIG(s.r.wait_status) == SIGTERM);
	long durable = start_of(s.r.out).count;
	start_line l = start_of(run_and_signal(pool, SIGTERM, "", 1).r.out);
	CHECK(l.crashed == 1);
	CHECK(l.count == durable);
}

TEST_CASE("a program's own SIGTERM handler is kept", "[ending]")
{
	pool_medium::dir d("ending");
	std::string pool = d.file("handler.pool");
	signalled_run s = run_and_signal(pool, SIGTERM, "handler", 3);
	INFO(s.r.describe());
	// Ended by its handler as natively: exit(3) after "handled".
	CHECK(WIFEXITED(s.r.wait_status));
	CHECK(s.r.status == 3);
	CHECK(s.r.out.find("handled ") != std::string::npos);
	// Its exit was an exit: the next run finds no crash.
	start_line l = start_of(run_and_signal(pool, SIGTERM, "", 1).r.out);
	CHECK(l.crashed == 0);
	CHECK(l.count >= s.last_count);
}

TEST_CASE("natively the same program dies of the same signals", "[ending]")
{
	// The reference for the status checks above.
	for (int sig : { SIGTERM, SIGHUP }) {
		spawned c = spawn({ env_or_fail("PMT_PROGS") + "/prog_endsignal" }, {});
		char b[256];
		(void)!read(c.out_fd, b, sizeof(b));	// started
		kill(c.pid, sig);
		run_result r;
		r.out = read_fd(c.out_fd);
		close(c.out_fd);
		finish(c, r);
		CHECK(WIFSIGNALED(r.wait_status));
		CHECK(WTERMSIG(r.wait_status) == sig);
	}
}
