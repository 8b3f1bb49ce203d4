/* SPDX-License-Identifier: BSD-3-Clause */
// PMT_ASSERT in a debug build: a child calls an internal function with a
// broken invariant and must die with SIGABRT after printing file:line, the
// function and the expression.  meson runs this only as a debug-build test
// (PMT_TEST_NEEDS=debug: exit 77 otherwise, see catch_main.cpp).
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdint>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include "track/tracker.h"
}

namespace {

struct child_result {
	int status = 0;
	std::string err;
};

// Run f in a child with its stderr captured.
template <class F> child_result in_child(F f)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDERR_FILENO);
		signal(SIGABRT, SIG_DFL);	// not Catch's handler: the parent judges
		f();
		_exit(0);
	}
	close(fds[1]);
	child_result r;
	char buf[4096];
	ssize_t n;
	while ((n = read(fds[0], buf, sizeof(buf))) > 0)
		r.err.append(buf, (size_t)n);
	close(fds[0]);
	REQUIRE(waitpid(pid, &r.status, 0) == pid);
	return r;
}

bool contains(const std::string &s, const char *what) { return s.find(what) != std::string::npos; }

} // namespace

TEST_CASE("a batch out of order given to the written-page query fails its assertion", "[assert]")
{
	const size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	child_result r = in_child([ps] {
		void *mem = shadow_reserve(0, 8 * ps);
		tracker *t = nullptr;
		if (mem == nullptr || tracker_open(&t, TRACKER_MPROTECT, mem, 8 * ps) != 0)
			_exit(3);
		const uint64_t pages[] = { 4, 2 };	// walked beside the regions: must ascend
		uint8_t written[2];
		tracker_written_since(t, pages, 2, written);
		_exit(4);	// not reached in a debug build
	});
	INFO("child stderr: " << r.err);
	REQUIRE(WIFSIGNALED(r.status));
	CHECK(WTERMSIG(r.status) == SIGABRT);
	CHECK(contains(r.err, "pmthreads: assertion failed: "));
	CHECK(contains(r.err, "track/tracker.c:"));
	CHECK(contains(r.err, ": tracker_written_since: pages[k - 1] < pages[k]"));
}

TEST_CASE("a sorted batch passes the same assertions", "[assert]")
{
	const size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	child_result r = in_child([ps] {
		void *mem = shadow_reserve(0, 8 * ps);
		tracker *t = nullptr;
		if (mem == nullptr || tracker_open(&t, TRACKER_MPROTECT, mem, 8 * ps) != 0)
			_exit(3);
		const uint64_t pages[] = { 2, 4 };
		uint8_t written[2];
		if (tracker_written_since(t, pages, 2, written) != 0 || written[0] || written[1])
			_exit(5);
		tracker_close(t);
		_exit(0);
	});
	INFO("child stderr: " << r.err);
	REQUIRE(WIFEXITED(r.status));
	CHECK(WEXITSTATUS(r.status) == 0);
	CHECK(r.err.empty());
}
