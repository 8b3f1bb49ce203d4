/* SPDX-License-Identifier: BSD-3-Clause */
// A failed write-back is never acknowledged (issue 22, item 1), at the
// persist layer: the simulator fails one fence of an epoch, and the epoch
// must not be published, VER_d must stay, every later epoch must fail with
// the same errno without writing (no blind retry), and the pool -- as the
// media holds it, and as the file holds it with every store that did land
// -- must recover the last published epoch.  The runtime and the msync
// backend on a failing file system are tested in test_fusefs.cpp.
#include "pool_test_util.h"
#include "subprocess.hpp"

extern "C" {
#include "persist/nvm_sim_test.h"
#include "track/fault_signal.h"
}

#include <cerrno>
#include <csignal>
#include <cstring>
#include <atomic>
#include <thread>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace pooltest;

namespace {

constexpr uint64_t kPages = 8;

// Epoch e's image: every byte of every page is e.
void fill(shadow_buf &sh, unsigned char e) { memset(sh.mem, e, sh.len); }

std::vector<uint64_t> all_pages()
{
	std::vector<uint64_t> v(kPages);
	for (uint64_t i = 0; i < kPages; i++)
		v[i] = i;
	return v;
}

// The image recovered from the file at path, and its VER_d.
std::vector<unsigned char> recover_file(const std::string &path, uint64_t *ver_d)
{
	auto o = options(path, kPages);
	o.create = false;
	pool *p = open_or_fail(o);
	shadow_buf out(kPages * page_size());
	recovery_restore_image(p, out.mem);
	*ver_d = *p->ver_d;
	pool_close(p);
	return out.bytes();
}

bool all_bytes(const std::vector<unsigned char> &v, unsigned char b)
{
	for (unsigned char c : v)
		if (c != b)
			return false;
	return true;
}

} // namespace

// Fence 1 of epoch 3 is its seq fence, 2 its data fence, 3 the publish.
TEST_CASE("a failed fence is latched and the epoch is not published", "[iofail]")
{
	const uint64_t which = GENERATE(1, 2, 3);
	const int err = GENERATE(EIO, ENOSPC);
	INFO("fence " << which << " of epoch 3 fails with " << strerror(err));
	scratch_dir d;
	std::string path = d.file("iofail.pool");
	auto o = options(path, kPages);
	nvm_sim_options sim{};
	sim.survival = NVM_SIM_KEEP_OLD;
	o.nvm = NVM_SIM;
	o.sim = &sim;
	pool *p = open_or_fail(o);
	shadow_buf sh(kPages * page_size());
	auto pages = all_pages();
	for (unsigned char e = 1; e <= 2; e++) {
		fill(sh, e);
		REQUIRE(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == 0);
	}
	REQUIRE(*p->ver_d == 2);

	nvm_sim_fail_fence(p->nvm, which, err);
	fill(sh, 3);
	CHECK(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == err);
	CHECK(*p->ver_d == 2);
	CHECK(nvm_error(p->nvm) == err);
	CHECK(p->nvm->stats.errors == 1);

	// No blind retry: later epochs write nothing and issue no fence.
	const uint64_t fences = p->nvm->stats.fences;
	std::vector<unsigned char> before((unsigned char *)p->nvm->base,
					  (unsigned char *)p->nvm->base + p->nvm->len);
	fill(sh, 4);
	CHECK(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == err);
	CHECK(*p->ver_d == 2);
	CHECK(pool_set_clean(p, true) == err);
	CHECK(pool_publish(p, 3) == err);
	CHECK(*p->ver_d == 2);
	CHECK(p->nvm->stats.fences == fences);
	CHECK(memcmp(before.data(), p->nvm->base, before.size()) == 0);

	// What the media holds (every unfenced store lost) ...
	std::string media = d.file("media.pool");
	write_file(media, nvm_sim_media(p->nvm), p->nvm->len);
	pool_close(p);
	uint64_t v = 0;
	auto img = recover_file(media, &v);
	CHECK(v == 2);
	CHECK(all_bytes(img, 2));

	// ... and the file with every store that was made (the page cache
	// wrote them back after all): epoch 3 is whole only when its record's
	// own fence was the one that failed -- the data had been fenced.
	img = recover_file(path, &v);
	if (which == 3) {
		CHECK((v == 3 || v == 2));
		CHECK(all_bytes(img, (unsigned char)v));
	} else {
		CHECK(v == 2);
		CHECK(all_bytes(img, 2));
	}
}

TEST_CASE("a pool whose fence failed is recovered and usable again", "[iofail]")
{
	scratch_dir d;
	std::string path = d.file("again.pool");
	auto o = options(path, kPages);
	nvm_sim_options sim{};
	o.nvm = NVM_SIM;
	o.sim = &sim;
	pool *p = open_or_fail(o);
	shadow_buf sh(kPages * page_size());
	auto pages = all_pages();
	fill(sh, 1);
	REQUIRE(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == 0);
	nvm_sim_fail_fence(p->nvm, 2, EIO);
	fill(sh, 2);
	CHECK(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == EIO);
	pool_close(p);

	// A new mapping starts trusted: the latch is per mapping.
	o.create = false;
	o.nvm = NVM_MSYNC;
	o.sim = nullptr;
	p = open_or_fail(o);
	CHECK(nvm_error(p->nvm) == 0);
	CHECK(*p->ver_d == 1);
	shadow_buf out(kPages * page_size());
	recovery_restore_image(p, out.mem);
	CHECK(all_bytes(out.bytes(), 1));
	fill(sh, 5);
	CHECK(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == 0);
	CHECK(*p->ver_d == 2);
	pool_close(p);
	uint64_t v = 0;
	CHECK(all_bytes(recover_file(path, &v), 5));
	CHECK(v == 2);
}

// Issue 22: a store into a pool page the file system cannot provide raises
// SIGBUS (a full file system where the space could not be reserved, a
// copy-on-write file system, the file truncated).  Truncation is the one
// every machine can do unprivileged: the data copies' pages are gone from
// under the mapping, so the write-back's next load and store there fault
// exactly as on a full file system.  The runtime installs the same claim
// function (runtime.c); before it, this ended the test with SIGBUS.
TEST_CASE("a store the file system refuses is a latched error, not a SIGBUS", "[iofail]")
{
	scratch_dir d;
	std::string path = d.file("bus.pool");
	auto o = options(path, kPages);
	o.nvm = NVM_MSYNC;
	pool *p = open_or_fail(o);
	REQUIRE(fault_signal_install_for(SIGBUS, nvm_claim_fault) == 0);
	nvm_watch_faults(p->nvm);
	shadow_buf sh(kPages * page_size());
	auto pages = all_pages();
	fill(sh, 1);
	REQUIRE(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == 0);
	REQUIRE(*p->ver_d == 1);
	// The header and tables stay; every data copy goes.
	REQUIRE(truncate(path.c_str(), (off_t)p->data_off) == 0);

	fill(sh, 2);
	CHECK(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == EIO);
	CHECK(*p->ver_d == 1);
	CHECK(nvm_error(p->nvm) == EIO);
	CHECK(p->nvm->stats.bus_faults >= 1);

	// Nothing is stored in the data copies again: each holds epoch 1's
	// bytes or, past the file's end, zeros.
	fill(sh, 3);
	CHECK(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == EIO);
	CHECK(*p->ver_d == 1);
	for (uint64_t i = 0; i < kPages; i++)
		for (int c = 0; c < 2; c++) {
			unsigned char b = *(volatile unsigned char *)pool_copy(p, i, c);
			INFO("page " << i << " copy " << c);
			CHECK((b == 0 || b == 1));
		}

	nvm_watch_faults(nullptr);
	fault_signal_uninstall_for(SIGBUS);
	pool_close(p);
}

// A SIGBUS that is not the pool's still ends the program, as without us.
TEST_CASE("a SIGBUS outside the pool is not taken", "[iofail]")
{
	scratch_dir d;
	std::string path = d.file("other.pool");
	auto o = options(path, kPages);
	o.nvm = NVM_MSYNC;
	pool *p = open_or_fail(o);
	std::string other = d.file("other.bin");
	int fd = open(other.c_str(), O_RDWR | O_CREAT, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, (off_t)page_size()) == 0);
	void *m = mmap(nullptr, page_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	REQUIRE(m != MAP_FAILED);
	REQUIRE(ftruncate(fd, 0) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		signal(SIGBUS, SIG_DFL);	// a sanitizer's own handler aside
		fault_signal_install_for(SIGBUS, nvm_claim_fault);
		nvm_watch_faults(p->nvm);
		*(volatile unsigned char *)m = 1;
		_exit(0);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFSIGNALED(st));
	CHECK(WTERMSIG(st) == SIGBUS);
	CHECK(nvm_error(p->nvm) == 0);
	munmap(m, page_size());
	close(fd);
	pool_close(p);
}

// The same through the runtime: the SIGBUS arrives on its epoch thread (the
// write-back of a pmthreads_sync) and must become the storage error -- one
// message, the sync failing with EIO, the durable epoch kept, the program
// running on -- not the end of the program.  ackcount writes its command to
// a FIFO before the sync of round 4 and waits for the answer; reading it,
// the test cuts the pool's data copies off, then answers.
namespace {

// ackcount syncing every 4th of 8 rounds, its pool (msync) cut short under it
// before the 5th round's sync (the cutter truncates the data copies when
// ackcount writes its FIFO): the write-back's stores then fail (SIGBUS on the
// mapping, latched as EIO).  extra: more environment.
subprocess::run_result run_ackcount_cut(std::map<std::string, std::string> extra)
{
	subprocess::scratch_dir d;
	std::string pool = d.path + "/bus.pool";
	std::string fifo = d.path + "/cmd";
	REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
	const uint64_t capacity = 16ull << 20, log_size = 256ull << 10;
	std::atomic<bool> ended{ false };
	std::thread cutter([&] {
		int fd = open(fifo.c_str(), O_RDONLY);
		char buf[64];
		while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0) {
		}
		if (ended) {	// ackcount ended without its command
			if (fd >= 0)
				close(fd);
			return;
		}
		struct stat st;
		// The page pairs cut off (the log ring after them goes too).
		if (stat(pool.c_str(), &st) == 0 && (uint64_t)st.st_size > 2 * capacity + log_size)
			truncate(pool.c_str(), st.st_size - (off_t)(2 * capacity + log_size));
		if (fd >= 0)
			close(fd);
		// Done: ackcount reads the FIFO back until this end closes.
		fd = open(fifo.c_str(), O_WRONLY);
		if (fd >= 0)
			close(fd);
	});
	std::map<std::string, std::string> env = { { "PMTHREADS_POOL", pool },
						   { "PMTHREADS_POOL_SIZE", "16M" },
						   { "PMTHREADS_LOG_SIZE", "256K" },
						   { "PMTHREADS_NVM", "msync" },
						   { "PMTHREADS_INTERVAL_MS", "100000" } };
	env.insert(extra.begin(), extra.end());
	auto r = subprocess::run({ subprocess::env_or_fail("PMT_ACKCOUNT"), "run", "8", "1", fifo,
				   "4", "5", "100" },
				 env);
	// Whichever open or read the cutter waits in, should ackcount have
	// ended early, ends now: a reader lets its open for writing through
	// and makes a writer's open possible; that writer, closed at once, lets
	// its open for reading through and ends its reading.
	ended = true;
	int rd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
	int w = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
	if (w >= 0)
		close(w);
	cutter.join();
	if (rd >= 0)
		close(rd);
	return r;
}

} // namespace

TEST_CASE("a write-back the file system refuses does not end the program", "[runtime]")
{
	auto r = run_ackcount_cut({});
	INFO(r.describe());
	CHECK(r.exited_ok());
	CHECK(r.err.find("WITHOUT persistence") != std::string::npos);
	CHECK(r.err.find(strerror(EIO)) != std::string::npos);
	CHECK(r.out.find("acked 3 ") != std::string::npos);
	CHECK(r.out.find("syncfail " + std::to_string(EIO) + " 4 ") != std::string::npos);
	CHECK(r.out.find("syncfail " + std::to_string(EIO) + " 8 ") != std::string::npos);
	CHECK(r.out.find("ran ") != std::string::npos);
}

// With output commit what the program holds waits for an epoch that can no
// longer become durable: it ends (status 1), and nothing it wrote after the
// last durable epoch reaches its reader (its stdout, a pipe, is held).
TEST_CASE("with output commit a failed write-back ends the program and releases nothing more",
	  "[runtime][output]")
{
	auto r = run_ackcount_cut({ { "PMTHREADS_OUTPUT", "commit" } });
	INFO(r.describe());
	CHECK(WIFEXITED(r.wait_status));
	CHECK(WEXITSTATUS(r.wait_status) == 1);
	CHECK(r.err.find("output commit") != std::string::npos);
	CHECK(r.err.find(strerror(EIO)) != std::string::npos);
	CHECK(r.out.find("acked 3 ") != std::string::npos);	// durable, then released
	CHECK(r.out.find("syncfail") == std::string::npos);
	CHECK(r.out.find("ran ") == std::string::npos);
}
