/* SPDX-License-Identifier: BSD-3-Clause */
// Output commit's kept descriptor kinds (lib/output/output.h, "Which
// descriptors"): a descriptor made by a call the preload sees has its kind
// (socket, pipe) read once, not by an fstat per held call; every way the
// number can come to name another file must forget it, or a regular file's
// writes would be held (or a socket's bytes sent to the wrong file).
//
// [unit]: the library calls the preload makes (output_fd_created,
// output_before_close, output_before_close_range, output_fd_handed_off,
// output_after_dup) against a real epoch thread.
// [preload]: tests/progs/outcommit_reuse under the preload: a held socket
// ended by close, dup2, close_range or fdopen+fclose, its number then taken
// by a regular file, whose write must reach the file at once.
#include <catch2/catch.hpp>

extern "C" {
#include "output/output.h"
#include "quiesce/quiesce.h"
}

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <linux/close_range.h>
#include <string>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

void on_pause(void *) {}

quiesce_outcome after_pause(void *)
{
	output_on_durable(quiesce_current_pause());
	return QUIESCE_DURABLE;
}

struct epoch_thread {
	epoch_thread()
	{
		REQUIRE(quiesce_start_split(3600000, on_pause, after_pause, nullptr) == 0);
		output_enable();
	}
	~epoch_thread()
	{
		output_disable();
		quiesce_stop(false);
	}
};

bool held(int fd)
{
	struct iovec v = { const_cast<char *>("x"), 1 };
	ssize_t r = -2;
	return output_hold(fd, &v, 1, MSG_DONTWAIT, nullptr, 0, &r);
}

// A socket made "seen" and held once (its kind kept), and a regular file.
struct reuse {
	int sv[2];
	int file;
	reuse()
	{
		REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		output_fd_created(sv[0]);
		CHECK(held(sv[0]));
		CHECK(held(sv[0]));
		FILE *f = tmpfile();
		REQUIRE(f != nullptr);
		file = dup(fileno(f));
		fclose(f);
	}
	// sv[0]'s number given to the file behind output commit's back.
	void take_number()
	{
		REQUIRE(syscall(SYS_dup2, file, sv[0]) == sv[0]);
	}
	~reuse()
	{
		output_before_close(sv[0]);
		close(sv[0]);
		close(sv[1]);
		close(file);
	}
};

} // namespace

TEST_CASE("a seen-made socket's kind is kept while it stays open", "[unit]")
{
	epoch_thread et;
	reuse r;
	// Nothing told output commit that the number changed: the kept kind
	// is used (what a raw close system call would get wrong -- the one
	// way the header says is not seen).  This is what shows no fstat is
	// made per call.
	r.take_number();
	CHECK(held(r.sv[0]));
	output_before_close(r.sv[0]);	// drops the queue it cannot send
}

TEST_CASE("close forgets a descriptor's kept kind", "[unit]")
{
	epoch_thread et;
	reuse r;
	output_before_close(r.sv[0]);
	r.take_number();
	CHECK_FALSE(held(r.sv[0]));
}

TEST_CASE("dup2 onto a descriptor forgets its kept kind", "[unit]")
{
	epoch_thread et;
	reuse r;
	// What the dup2 wrapper does around the real call.
	output_before_close(r.sv[0]);
	r.take_number();
	output_after_dup(r.file, r.sv[0]);
	CHECK_FALSE(held(r.sv[0]));
}

TEST_CASE("close_range forgets the kept kinds in its range", "[unit]")
{
	epoch_thread et;
	reuse r;
	output_before_close_range((unsigned)r.sv[0], (unsigned)r.sv[0]);
	r.take_number();
	CHECK_FALSE(held(r.sv[0]));
}

TEST_CASE("a descriptor given to fdopen is asked about at every call", "[unit]")
{
	epoch_thread et;
	reuse r;
	output_fd_handed_off(r.sv[0]);
	CHECK(held(r.sv[0]));	// still a socket
	r.take_number();	// as fclose and a later fopen would
	CHECK_FALSE(held(r.sv[0]));
}

TEST_CASE("a descriptor not seen made is asked about at every call", "[unit]")
{
	epoch_thread et;
	int sv[2];
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(held(sv[0]));
	FILE *f = tmpfile();
	REQUIRE(f != nullptr);
	REQUIRE(syscall(SYS_dup2, fileno(f), sv[0]) == sv[0]);
	CHECK_FALSE(held(sv[0]));
	output_before_close(sv[0]);
	close(sv[0]);
	close(sv[1]);
	fclose(f);
}

TEST_CASE("every way of ending a held socket forgets its kind, under the preload",
	  "[preload]")
{
	const char *progs = getenv("PMT_PROGS"), *lib = getenv("PMT_LIB");
	REQUIRE(progs != nullptr);
	REQUIRE(lib != nullptr);
	std::string prog = std::string(progs) + "/prog_outcommit_reuse";
	char dir[] = "/dev/shm/pmt-output-kind-XXXXXX";
	REQUIRE(mkdtemp(dir) != nullptr);
	std::string pool = std::string(dir) + "/kind.pool", file = std::string(dir) + "/file";
	for (const char *how : { "close", "dup2", "close_range", "fdopen" }) {
		INFO("ended with " << how);
		std::string cmd = "PMTHREADS_PROGRAM=" + prog + " LD_PRELOAD=" + lib +
				  " PMTHREADS_HEAP=malloc PMTHREADS_POOL=" + pool +
				  " PMTHREADS_POOL_SIZE=64M PMTHREADS_TRACKER=mprotect"
				  " PMTHREADS_INTERVAL_MS=200 PMTHREADS_OUTPUT=commit"
				  " PMEM_IS_PMEM_FORCE=1 " +
				  prog + " " + how + " " + file;
		FILE *p = popen(cmd.c_str(), "r");
		REQUIRE(p != nullptr);
		char line[512] = "";
		if (fgets(line, sizeof(line), p) == nullptr)
			line[0] = '\0';
		int st = pclose(p);
		INFO("it said: " << line);
		CHECK(std::string(line) == std::string("passed ") + how + "\n");
		CHECK(st == 0);
		unlink(pool.c_str());
		unlink(file.c_str());
	}
	rmdir(dir);
}
