// SPDX-License-Identifier: BSD-3-Clause
// test_nvm_log: the log backend (lib/persist/nvm_log.h) on a file laid out
// like a pool's -- a header page holding the head slots, data pages, the
// ring -- driven through the nvm contract: epochs of random line stores, two
// orders and a fence each (as persist.c does), crashes of a simulated device
// after every primitive (record writes, syncs, checkpoints, head moves, ring
// reuse), replay, double crashes.  After any crash the data must be exactly
// the image of one epoch, never older than the last fence that returned.
#include <catch2/catch.hpp>
#include <xxhash.h>

extern "C" {
#include "base/log.h"
#include "persist/nvm.h"
#include "persist/nvm_log.h"
#include "persist/nvm_log_test.h"
#include "persist/nvm_sim.h"
}

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <random>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr size_t PS = 4096;

// Replay's helper thread (nvm_log_set_helper): a plain thread.
int start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	return pthread_create(th, nullptr, fn, arg);
}

void use_helper(bool on)
{
	nvm_log_set_helper(on ? start_thread : nullptr, pthread_join, nullptr, true);
}
constexpr size_t DATA_PAGES = 64;
constexpr uint64_t HEAD_OFF = 1216;
constexpr uint64_t MARK_OFF = 2048;	// the epoch number: one line of page 0

struct rig {
	std::string path;
	uint64_t ring;
	nvm_log_region r;
	size_t len;

	explicit rig(uint64_t ring_bytes, size_t data_pages = DATA_PAGES, bool reloads = false)
		: ring(ring_bytes)
	{
		use_helper(true);	// every replay here with it, but where a test says

		char t[] = "/tmp/pmt-nvmlog-XXXXXX";
		int fd = mkstemp(t);
		REQUIRE(fd >= 0);
		path = t;
		len = PS * (1 + data_pages) + ring;
		REQUIRE(ftruncate(fd, (off_t)len) == 0);
		r = { PS * (1 + data_pages), ring, HEAD_OFF, 0x1234abcdULL, reloads };
		REQUIRE(nvm_log_format(fd, path.c_str(), &r, true) == 0);
		close(fd);
	}
	~rig() { unlink(path.c_str()); }

	nvm *open(const nvm_sim_options *sim = nullptr, bool ro = false, int *fdp = nullptr) const
	{
		int fd = ::open(path.c_str(), ro ? O_RDONLY : O_RDWR);
		REQUIRE(fd >= 0);
		nvm *n = nullptr;
		int rc = nvm_map_pool(&n, fd, path.c_str(), len, NVM_LOG, 0, sim, &r, ro);
		INFO(err_get());
		REQUIRE(rc == 0);
		if (fdp != nullptr)
			*fdp = fd;
		return n;
	}
};

// The epochs every run makes, from one seed: epoch e stores e into
// lines_per_epoch random lines of the data pages, then e into the mark.
struct workload {
	uint64_t seed;
	size_t lines_per_epoch;
	uint64_t big_every = 0;	// every big_every-th epoch stores 3000 lines

	std::vector<size_t> lines(uint64_t e) const
	{
		std::mt19937_64 g(seed * 1000003 + e);
		std::vector<size_t> v;
		size_t count = big_every != 0 && e % big_every == 0 ? 3000 : lines_per_epoch;
		for (size_t i = 0; i < count; i++)
			v.push_back(g() % (DATA_PAGES * PS / NVM_LINE));
		return v;
	}

	// The data the image holds after epochs [1, e].
	std::vector<uint64_t> image(uint64_t e) const
	{
		std::vector<uint64_t> img(DATA_PAGES * PS / NVM_LINE, 0);
		for (uint64_t k = 1; k <= e; k++)
			for (size_t l : lines(k))
				img[l] = k;
		return img;
	}

	// One epoch through the contract: a third of the data lines, order, the
	// rest and the mark, fence.  A big epoch's first half is a record
	// left unsynced, its second too large for the ring: written through.
	void run(nvm *n, uint64_t e) const
	{
		auto *base = static_cast<unsigned char *>(n->base);
		auto ls = lines(e);
		for (size_t i = 0; i < ls.size(); i++) {
			unsigned char *line = base + PS + ls[i] * NVM_LINE;
			memset(line, 0, NVM_LINE);
			memcpy(line, &e, 8);
			nvm_flush(n, line, NVM_LINE);
			if (i == ls.size() / 3)
				nvm_order(n);
		}
		memcpy(base + MARK_OFF, &e, 8);
		nvm_flush(n, base + MARK_OFF, 8);
		nvm_fence(n);
	}
};

uint64_t mark_of(const nvm *n)
{
	uint64_t m;
	memcpy(&m, static_cast<const unsigned char *>(n->base) + MARK_OFF, 8);
	return m;
}

// The image of n is epoch mark's, line by line -- but for lines of the next
// epoch, which it orders before its mark: those may hold the next epoch
// already (as a working copy does on a pool before VER_d is published).
void check_image(const nvm *n, const workload &w)
{
	uint64_t m = mark_of(n);
	auto img = w.image(m);
	std::vector<bool> next(img.size(), false);
	for (size_t l : w.lines(m + 1))
		next[l] = true;
	auto *base = static_cast<const unsigned char *>(n->base);
	for (size_t l = 0; l < img.size(); l++) {
		uint64_t v;
		memcpy(&v, base + PS + l * NVM_LINE, 8);
		if (v != img[l] && !(next[l] && v == m + 1)) {
			INFO("line " << l << " holds epoch " << v << ", epoch " << m << "'s image has "
				     << img[l]);
			REQUIRE(v == img[l]);
		}
	}
}

// Run epochs [from, to] in a child on a simulated device that crashes after
// its crash_after-th primitive; the child writes to pipe fd each epoch whose
// fence returned.  Returns the last such epoch (from - 1: none).
uint64_t crash_child(const rig &rg, const workload &w, uint64_t from, uint64_t to,
		     uint64_t crash_after, uint64_t seed, nvm_sim_survival surv, bool *crashed)
{
	int p[2];
	REQUIRE(pipe(p) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		nvm_sim_options so{};
		so.seed = seed;
		so.crash_after = crash_after;
		so.survival = surv;
		int fd = ::open(rg.path.c_str(), O_RDWR);
		nvm *n = nullptr;
		if (fd < 0 || nvm_map_pool(&n, fd, rg.path.c_str(), rg.len, NVM_LOG, 0, &so, &rg.r,
					   false) != 0)
			_exit(3);
		for (uint64_t e = from; e <= to; e++) {
			w.run(n, e);
			if (nvm_error(n) != 0)
				_exit(4);
			if (write(p[1], &e, 8) != 8)
				_exit(5);
		}
		nvm_unmap(n);	// a clean close checkpoints: more primitives
		_exit(0);
	}
	close(p[1]);
	uint64_t last = from - 1, e;
	while (read(p[0], &e, 8) == 8)
		last = e;
	close(p[0]);
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	REQUIRE(WIFEXITED(st));
	REQUIRE((WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == NVM_SIM_CRASH_EXIT));
	*crashed = WEXITSTATUS(st) == NVM_SIM_CRASH_EXIT;
	return last;
}

} // namespace

TEST_CASE("fenced stores survive a reopen; unfenced ones do not reach the file", "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload w{ 7, 20 };
	nvm *n = rg.open();
	for (uint64_t e = 1; e <= 5; e++)
		w.run(n, e);
	// Stored and flushed, never fenced: a crash (here: no unmap's checkpoint,
	// the process simply stops using the mapping) must not keep it.
	auto *base = static_cast<unsigned char *>(n->base);
	uint64_t junk = 999;
	memcpy(base + PS, &junk, 8);
	nvm_flush(n, base + PS, 8);
	// One per fence, none per order; and the head slot the first append
	// writes (its seq moves past whatever a crashed run left: nvm_log.c).
	CHECK(n->stats.device_flushes == 5 + 1);
	CHECK(n->stats.log_records == 10);
	CHECK(n->stats.orders == 5);
	nvm_log_info li;
	REQUIRE(nvm_log_get_info(n, &li) == 0);
	CHECK(li.next_seq == 1 + (NVM_LOG_MIN_SIZE / NVM_LINE + 1) + 10);
	// The file's data pages were never written: the records hold it all.
	int fd = ::open(rg.path.c_str(), O_RDONLY);
	std::vector<unsigned char> page(PS);
	REQUIRE(pread(fd, page.data(), PS, PS) == (ssize_t)PS);
	CHECK(std::vector<unsigned char>(PS, 0) == page);
	close(fd);

	// Another opener (read-only) replays the log: epoch 5, not the junk.
	nvm *ro = rg.open(nullptr, true);
	CHECK(mark_of(ro) == 5);
	check_image(ro, w);
	nvm_log_info ri;
	REQUIRE(nvm_log_get_info(ro, &ri) == 0);
	CHECK(ri.records_replayed == 10);
	nvm_unmap(ro);
	// Leaving n without unmapping is what a crash does to it; unmap it
	// only after the check, as the abandoned process's, so no checkpoint.
	n->read_only = true;	// no clean-close checkpoint
	nvm_unmap(n);
}

TEST_CASE("a clean close checkpoints: the file holds the image, the log is empty", "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload w{ 11, 30 };
	nvm *n = rg.open();
	for (uint64_t e = 1; e <= 8; e++)
		w.run(n, e);
	nvm_unmap(n);
	nvm *m = rg.open();
	nvm_log_info li;
	REQUIRE(nvm_log_get_info(m, &li) == 0);
	CHECK(li.records_replayed == 0);
	CHECK(li.head == li.tail);
	CHECK(mark_of(m) == 8);
	check_image(m, w);
	// And the file itself, read without the log, holds it too.
	int fd = ::open(rg.path.c_str(), O_RDONLY);
	uint64_t mark;
	REQUIRE(pread(fd, &mark, 8, MARK_OFF) == 8);
	CHECK(mark == 8);
	close(fd);
	nvm_unmap(m);
}

// A pool written before groups: its head slots carry the older tag and no
// resume fields, its records the older magic (each its own commit).  Such a
// head is still read (and replay from it); the heads written since carry the
// new tag, so that a binary from before groups refuses the pool.
TEST_CASE("a head slot written before groups is still read", "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload w{ 31, 30 };
	nvm *n = rg.open();
	for (uint64_t e = 1; e <= 4; e++)
		w.run(n, e);
	nvm_unmap(n);	// a clean close: the image in the file, the log empty
	int fd = ::open(rg.path.c_str(), O_RDWR);
	REQUIRE(fd >= 0);
	for (int slot = 0; slot < 2; slot++) {
		uint64_t h[8];
		REQUIRE(pread(fd, h, sizeof(h), (off_t)(HEAD_OFF + slot * NVM_LINE)) == sizeof(h));
		// {gen, pos, seq, check}, checked with the older tag, then zeros.
		uint64_t old = XXH3_64bits_withSeed(h, 24, rg.r.seed ^ (0x4c4f4748ULL + (uint64_t)slot));
		CHECK(h[3] != old);	// written with the new tag
		h[3] = old;
		h[4] = h[5] = h[6] = h[7] = 0;
		REQUIRE(pwrite(fd, h, sizeof(h), (off_t)(HEAD_OFF + slot * NVM_LINE)) == sizeof(h));
	}
	close(fd);
	nvm *m = rg.open();
	CHECK(mark_of(m) == 4);
	check_image(m, w);
	w.run(m, 5);
	m->read_only = true;	// a crash after epoch 5
	nvm_unmap(m);
	nvm *ro = rg.open(nullptr, true);
	CHECK(mark_of(ro) == 5);
	check_image(ro, w);
	nvm_unmap(ro);
}

TEST_CASE("the ring is reused after checkpoints, and replay follows it around", "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload w{ 3, 200 };	// ~16 KiB a record: a lap every ~16 epochs
	nvm *n = rg.open();
	for (uint64_t e = 1; e <= 100; e++)
		w.run(n, e);
	CHECK(n->stats.checkpoints >= 4);
	nvm_log_info li;
	REQUIRE(nvm_log_get_info(n, &li) == 0);
	CHECK(li.tail > 3 * rg.ring);	// around the ring several times
	CHECK(li.tail - li.head <= rg.ring / 4 * 3);	// a wave finishes by then
	nvm *ro = rg.open(nullptr, true);
	CHECK(mark_of(ro) == 100);
	check_image(ro, w);
	nvm_unmap(ro);
	n->read_only = true;
	nvm_unmap(n);
}

TEST_CASE("records larger than the replay's reads, groups across them and the ring's end, "
	  "replay to the last epoch's image", "[log]")
{
	// Replay reads the ring once, in reads that grow from 64 KiB to 1 MiB,
	// and keeps a group in its buffer until the commit: here records of
	// ~70 KiB to ~2.2 MiB (orders at a third of an epoch's lines), every
	// line stored again by later epochs, and the log wraps the ring's end.
	// A record read in the wrong place fails its checksum and ends the
	// replay early; one applied out of order leaves an older epoch's line.
	// With the helper, groups are applied 4 MiB behind the reading, and
	// the helper makes pages private ahead of them: the image must be the
	// same with it and without.
	bool helper = GENERATE(true, false);
	for (size_t lines : { 3000u, 18000u, 45000u }) {
		rig rg(8u << 20);
		use_helper(helper);
		workload w{ 11 + lines, lines };
		nvm *n = rg.open();
		uint64_t last = 0;
		nvm_log_info li;
		REQUIRE(nvm_log_get_info(n, &li) == 0);
		const uint64_t start = li.tail;
		do {
			w.run(n, ++last);
			REQUIRE(nvm_error(n) == 0);
			REQUIRE(nvm_log_get_info(n, &li) == 0);
		} while ((li.tail < start + rg.ring || li.head % rg.ring < li.tail % rg.ring ||
			  li.tail - li.head < rg.ring / 3) && last < 400);
		INFO(lines << " lines an epoch, " << last << " epochs, " << li.tail - li.head
			   << " bytes of records live" << (helper ? ", helper" : ", one thread"));
		CHECK(li.head % rg.ring > li.tail % rg.ring);	// the live part wraps
		// A third of the next epoch ordered, never fenced: a record read
		// and checked, larger than the helper's lag, never applied.
		auto *base = static_cast<unsigned char *>(n->base);
		auto next = w.lines(last + 1);
		for (size_t i = 0; i < next.size() / 3; i++) {
			unsigned char *line = base + PS + next[i] * NVM_LINE;
			uint64_t e = last + 1;
			memcpy(line, &e, 8);
			nvm_flush(n, line, NVM_LINE);
		}
		nvm_order(n);
		REQUIRE(nvm_error(n) == 0);
		REQUIRE(n->stats.writes_through == 0);
		nvm_abandon(n);	// as a crash leaves it: no checkpoint
		nvm *r = rg.open(nullptr, true);
		CHECK(mark_of(r) == last);
		nvm_log_info ri;
		REQUIRE(nvm_log_get_info(r, &ri) == 0);
		CHECK(ri.tail == li.tail);
		CHECK(r->stats.log_replayed_bytes == li.tail - li.head);
		auto img = w.image(last);
		size_t wrong = 0;
		for (size_t l = 0; l < img.size(); l++) {
			uint64_t v;
			memcpy(&v, static_cast<const unsigned char *>(r->base) + PS + l * NVM_LINE, 8);
			wrong += v != img[l];
		}
		CHECK(wrong == 0);
		if (!helper)	// with it, how far it got is the scheduler's
			CHECK(r->stats.log_replay_prefaulted == 0);
		nvm_unmap(r);
	}
}

TEST_CASE("replay's helper changes no byte: what it made private holds the file's bytes and the "
	  "records'", "[log]")
{
	// 1536 data pages (three 2 MiB blocks: the helper takes two of them),
	// each holding its own pattern in the file; each epoch stores one line
	// of every page, so most of every page is the file's bytes after the
	// replay -- and a group left uncommitted, whose pages the helper may
	// make private too, must leave them as they were.
	constexpr size_t pages = 1536;
	rig rg(8u << 20, pages);
	std::vector<unsigned char> ref(pages * PS);
	for (size_t i = 0; i < ref.size(); i += 8) {
		uint64_t v = 0x9e3779b97f4a7c15ULL * (i + 1);
		memcpy(&ref[i], &v, 8);
	}
	{
		int fd = ::open(rg.path.c_str(), O_RDWR);
		REQUIRE(fd >= 0);
		REQUIRE(pwrite(fd, ref.data(), ref.size(), PS) == (ssize_t)ref.size());
		close(fd);
	}
	nvm *n = rg.open();
	auto *base = static_cast<unsigned char *>(n->base);
	auto store = [&](uint64_t e) {
		for (size_t p = 0; p < pages; p++) {
			size_t at = p * PS + (e * 7 + p) % 64 * NVM_LINE;
			memcpy(base + PS + at, &e, 8);
			nvm_flush(n, base + PS + at, 8);
		}
	};
	uint64_t e = 0;
	nvm_log_info li;
	do {
		store(++e);
		nvm_fence(n);
		REQUIRE(nvm_error(n) == 0);
		for (size_t p = 0; p < pages; p++)
			memcpy(&ref[p * PS + (e * 7 + p) % 64 * NVM_LINE], &e, 8);
		REQUIRE(nvm_log_get_info(n, &li) == 0);
	} while (li.tail - li.head < (2u << 20));
	store(e + 1);	// ordered, never fenced
	nvm_order(n);
	REQUIRE(n->stats.checkpoints == 0);	// the pages are the file's but for the log
	nvm_abandon(n);
	bool helper = GENERATE(true, false);
	use_helper(helper);
	nvm *r = rg.open(nullptr, true);
	INFO((helper ? "helper" : "one thread") << ", " << e << " epochs, " << r->stats.log_replay_prefaulted << " pages made private by the helper");
	CHECK(r->stats.log_replayed_bytes == li.tail - li.head);
	size_t wrong = 0;
	for (size_t p = 0; p < pages; p++)
		wrong += memcmp(static_cast<unsigned char *>(r->base) + PS + p * PS, &ref[p * PS], PS) != 0;
	CHECK(wrong == 0);
	nvm_unmap(r);
}

TEST_CASE("a group larger than half the ring is written through, in order", "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload small{ 5, 10 }, big{ 5, 3000 };	// 2000 lines after the order: ~144 KiB
	nvm *n = rg.open();
	small.run(n, 1);
	big.run(n, 2);
	CHECK(n->stats.writes_through == 1);
	nvm *ro = rg.open(nullptr, true);
	CHECK(mark_of(ro) == 2);
	n->read_only = true;
	nvm_unmap(n);
	nvm_unmap(ro);
}

// The records from one fence to the next are a group: replay applies all of
// them or none (nvm_group_room; persist.c's in-place write-back depends on
// it).
TEST_CASE("ordered records without their group's fence are not replayed", "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload w{ 23, 40 };
	nvm *n = rg.open();
	for (uint64_t e = 1; e <= 3; e++)
		w.run(n, e);
	size_t room = nvm_group_room(n);
	CHECK(room > 0);
	CHECK(room <= NVM_LOG_MIN_SIZE / 2);
	// Epoch 4's lines and its mark, ordered twice, never fenced.
	auto *base = static_cast<unsigned char *>(n->base);
	uint64_t four = 4;
	for (size_t l : w.lines(4)) {
		memcpy(base + PS + l * NVM_LINE, &four, 8);
		nvm_flush(n, base + PS + l * NVM_LINE, 8);
	}
	nvm_order(n);
	memcpy(base + MARK_OFF, &four, 8);
	nvm_flush(n, base + MARK_OFF, 8);
	nvm_order(n);
	nvm_log_info li;
	REQUIRE(nvm_log_get_info(n, &li) == 0);
	nvm *ro = rg.open(nullptr, true);
	nvm_log_info ri;
	REQUIRE(nvm_log_get_info(ro, &ri) == 0);
	// Both records are in the file, complete; neither is replayed.
	CHECK(ri.tail + 2 * NVM_LINE < li.tail);
	CHECK(mark_of(ro) == 3);
	auto *rb = static_cast<const unsigned char *>(ro->base);
	for (size_t l : w.lines(4)) {
		uint64_t v;
		memcpy(&v, rb + PS + l * NVM_LINE, 8);
		REQUIRE(v != 4);
	}
	check_image(ro, w);
	nvm_unmap(ro);
	n->read_only = true;
	nvm_unmap(n);
}

// A run that crashed can leave records past those replayed: behind a torn
// one, or of a group never committed.  The next run's records take their
// positions; one of them that is complete must not let a stale commit that
// follows it be replayed as its group's.
TEST_CASE("records a crashed run left past the replayed ones are never replayed after a new run's",
	  "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload w{ 29, 40 };
	nvm *n = rg.open();
	for (uint64_t e = 1; e <= 3; e++)
		w.run(n, e);
	nvm_log_info before;
	REQUIRE(nvm_log_get_info(n, &before) == 0);
	w.run(n, 4);	// two records: the first third ordered, then the commit
	n->read_only = true;
	nvm_unmap(n);	// the crash
	// The first of them torn: a byte of its payload lost.
	int fd = ::open(rg.path.c_str(), O_RDWR);
	REQUIRE(fd >= 0);
	uint64_t at = rg.r.off + before.tail % rg.ring + 2 * NVM_LINE;
	unsigned char b;
	REQUIRE(pread(fd, &b, 1, (off_t)at) == 1);
	b ^= 0x5a;
	REQUIRE(pwrite(fd, &b, 1, (off_t)at) == 1);
	close(fd);

	// The next run: epoch 3 replayed; then the same lines ordered with other
	// values (a record of the torn one's length at its position), and
	// the run crashes before its fence.
	nvm *m = rg.open();
	CHECK(mark_of(m) == 3);
	auto *base = static_cast<unsigned char *>(m->base);
	auto ls = w.lines(4);
	uint64_t other = 44;
	for (size_t i = 0; i <= ls.size() / 3; i++) {
		unsigned char *line = base + PS + ls[i] * NVM_LINE;
		memset(line, 0, NVM_LINE);
		memcpy(line, &other, 8);
		nvm_flush(m, line, NVM_LINE);
	}
	nvm_order(m);
	m->read_only = true;
	nvm_unmap(m);

	nvm *ro = rg.open(nullptr, true);
	CHECK(mark_of(ro) == 3);
	check_image(ro, w);
	nvm_unmap(ro);
}

TEST_CASE("a crash after every primitive recovers one epoch's image, none older than acknowledged",
	  "[log][crash]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload w{ 19, 150, 13 };
	// Two laps of the ring, checkpoints, three epochs written through, a
	// clean close.
	const uint64_t epochs = 40;
	bool crashed;
	// Crash after primitive k = 1, 2, ... until a run ends without one.
	std::vector<unsigned char> clean;
	{
		int fd = ::open(rg.path.c_str(), O_RDONLY);
		clean.resize(rg.len);
		REQUIRE(pread(fd, clean.data(), rg.len, 0) == (ssize_t)rg.len);
		close(fd);
	}
	auto reset = [&] {
		int fd = ::open(rg.path.c_str(), O_WRONLY);
		REQUIRE(pwrite(fd, clean.data(), rg.len, 0) == (ssize_t)rg.len);
		close(fd);
	};
	uint64_t k = 1;
	for (;; k++) {
		reset();
		nvm_sim_survival surv = k % 3 == 0 ? NVM_SIM_KEEP_OLD
					: k % 3 == 1 ? NVM_SIM_KEEP_NEW
						     : NVM_SIM_RANDOM;
		uint64_t acked = crash_child(rg, w, 1, epochs, k, 100 + k, surv, &crashed);
		if (!crashed)
			break;
		nvm *n = rg.open();
		INFO("crash after primitive " << k << ", epoch " << acked << " acknowledged");
		uint64_t m = mark_of(n);
		CHECK(m >= acked);
		CHECK(m <= acked + 1);
		check_image(n, w);
		// A second crash while continuing from the recovered image.
		uint64_t from = m + 1;
		n->read_only = true;
		nvm_unmap(n);
		if (k % 5 == 0) {
			uint64_t acked2 = crash_child(rg, w, from, from + 6, 7 + k % 11, 7 * k,
						      NVM_SIM_RANDOM, &crashed);
			nvm *n2 = rg.open();
			uint64_t m2 = mark_of(n2);
			CHECK(m2 >= acked2);
			check_image(n2, w);
			n2->read_only = true;
			nvm_unmap(n2);
		}
	}
	CHECK(k > 2 * epochs);	// every epoch has a record write and a sync at least
}

TEST_CASE("a log whose head slots are both corrupt is refused, nothing written", "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	int fd = ::open(rg.path.c_str(), O_RDWR);
	unsigned char junk[2 * NVM_LINE];
	memset(junk, 0xa5, sizeof(junk));
	REQUIRE(pwrite(fd, junk, sizeof(junk), HEAD_OFF) == (ssize_t)sizeof(junk));
	struct stat before;
	REQUIRE(fstat(fd, &before) == 0);
	nvm *n = nullptr;
	CHECK(nvm_map_pool(&n, fd, rg.path.c_str(), rg.len, NVM_LOG, 0, nullptr, &rg.r, false) != 0);
	CHECK(std::string(err_get()).find("head slots") != std::string::npos);
	close(fd);	// (own_fds may have moved the number: read through a new one)
	unsigned char back[sizeof(junk)];
	fd = ::open(rg.path.c_str(), O_RDONLY);
	REQUIRE(pread(fd, back, sizeof(back), HEAD_OFF) == (ssize_t)sizeof(back));
	CHECK(memcmp(back, junk, sizeof(junk)) == 0);
	close(fd);
}

TEST_CASE("an I/O error at any write or sync refuses the epoch and every later one", "[log]")
{
	workload w{ 23, 40, 4 };	// epoch 4 is big: written through
	uint64_t failed = 0;	// the k whose primitive was there to fail
	for (uint64_t k = 1; k <= 8; k++) {
		INFO("the " << k << "-th device primitive of epochs 3 and 4 fails");
		rig rg(NVM_LOG_MIN_SIZE);
		nvm *n = rg.open();
		w.run(n, 1);
		w.run(n, 2);
		REQUIRE(nvm_error(n) == 0);
		nvm_log_fail_io(n, k, EIO);
		w.run(n, 3);
		w.run(n, 4);
		uint64_t acked = nvm_error(n) == 0 ? 4 : 2;
		if (nvm_error(n) == 0) {	// fewer primitives than k: no failure
			nvm_log_fail_io(n, 0, 0);
		} else {
			failed++;
			CHECK(nvm_error(n) == EIO);
			uint64_t flushes = n->stats.device_flushes;
			w.run(n, 5);	// nothing more reaches the device
			CHECK(n->stats.device_flushes == flushes);
			CHECK(n->stats.fences_skipped >= 1);
		}
		n->read_only = true;	// as a crash: no clean-close checkpoint
		nvm_unmap(n);
		nvm *m = rg.open();
		uint64_t mark = mark_of(m);
		CHECK(mark >= acked);
		CHECK(mark <= 4);	// epoch 5 never
		check_image(m, w);
		m->read_only = true;
		nvm_unmap(m);
	}
	// Epochs 3 and 4 take more than 8 writes and syncs: every k failed one
	// (none did if the injection were not built in: nvm_log_test.h).
	CHECK(failed == 8);
}

TEST_CASE("a pool file cut short under the log refuses the next epoch", "[log]")
{
	rig rg(NVM_LOG_MIN_SIZE);
	workload w{ 29, 20 };
	nvm *n = rg.open();
	w.run(n, 1);
	REQUIRE(nvm_error(n) == 0);
	REQUIRE(truncate(rg.path.c_str(), (off_t)(rg.len - rg.ring)) == 0);	// the ring is gone
	w.run(n, 2);
	CHECK(nvm_error(n) == EIO);
	n->read_only = true;
	nvm_unmap(n);
}

// A checkpoint runs right after the fence whose records made the ring half
// full; those records were synced before it began.  Its failure leaves that
// fence's epoch durable (the head moves only past records whose pages were
// synced), so the epoch is acknowledged, and the next fence fails before it
// writes anything.  Latched at once, the error failed an epoch that the next
// open then recovered (found by test_lossyfs's step sweep).
TEST_CASE("a checkpoint failing after a fence keeps that fence's epoch and fails the next", "[log]")
{
	workload w{ 37, 200 };
	// The first epoch whose fence checkpoints, from a clean run.
	uint64_t cp = 0;
	{
		rig rg(NVM_LOG_MIN_SIZE);
		nvm *n = rg.open();
		for (uint64_t e = 1; e <= 100 && cp == 0; e++) {
			uint64_t before = n->stats.checkpoints;
			w.run(n, e);
			REQUIRE(nvm_error(n) == 0);
			if (n->stats.checkpoints != before)
				cp = e;
		}
		n->read_only = true;
		nvm_unmap(n);
	}
	REQUIRE(cp > 1);
	unsigned in_checkpoint = 0;
	for (uint64_t k = 1; k <= 16; k++) {
		INFO("the " << k << "-th write or sync of epoch " << cp << " (it checkpoints) fails");
		rig rg(NVM_LOG_MIN_SIZE);
		nvm *n = rg.open();
		for (uint64_t e = 1; e < cp; e++)
			w.run(n, e);
		REQUIRE(nvm_error(n) == 0);
		nvm_log_fail_io(n, k, EIO);
		const uint64_t checkpoints = n->stats.checkpoints;
		w.run(n, cp);
		const bool acked = nvm_error(n) == 0;
		if (acked && n->stats.checkpoints != checkpoints) {
			nvm_log_fail_io(n, 0, 0);	// past the checkpoint's primitives
			n->read_only = true;
			nvm_unmap(n);
			break;
		}
		if (acked) {	// the checkpoint failed: the next fence fails unwritten
			in_checkpoint++;
			const uint64_t flushes = n->stats.device_flushes;
			w.run(n, cp + 1);
			CHECK(nvm_error(n) == EIO);
			CHECK(n->stats.device_flushes == flushes);
		}
		n->read_only = true;	// as a crash: no clean-close checkpoint
		nvm_unmap(n);
		nvm *m = rg.open();
		if (acked)
			CHECK(mark_of(m) == cp);
		else	// the record's write or sync: it may have reached the file
			CHECK((mark_of(m) == cp - 1 || mark_of(m) == cp));
		check_image(m, w);
		m->read_only = true;
		nvm_unmap(m);
	}
	// Some of the primitives were the checkpoint's (none were, were the
	// error latched at once).
	CHECK(in_checkpoint >= 1);
}

// Pages written straight (nvm_write_direct) reach the file outside the ring:
// a replay applies every record from the head on, in order, onto the file, so
// a record that touched such a page before it was written would be applied
// over it.  So a page may be written straight only once the head has moved
// past every record that touched it -- not when a wave of the checkpoint has
// written it, while the head still waits for the rest of the wave.
TEST_CASE("without reloads (format 6) a page is written straight only once no record that "
	  "touched it can be replayed", "[log][direct]")
{
	const size_t pages = 512;
	rig rg(NVM_LOG_MIN_SIZE, pages);
	nvm *n = rg.open();
	REQUIRE(nvm_has_direct(n));
	auto *base = static_cast<unsigned char *>(n->base);
	auto page = [&](size_t i) { return base + PS * (1 + i); };
	// A line of every page, fence after fence, until a wave of the
	// checkpoint starts (the ring past half full) and writes its first
	// pages -- but not all 512 (a wave writes an eighth a fence, at least
	// 64 pages).
	uint64_t e = 0;
	while (n->stats.checkpoint_bytes == 0) {
		REQUIRE(++e < 64);
		for (size_t i = 0; i < pages; i++) {
			memcpy(page(i) + 64 * (e % 64), &e, 8);
			nvm_flush(n, page(i) + 64 * (e % 64), 8);
		}
		nvm_fence(n);
	}
	REQUIRE(n->stats.checkpoints == 0);	// the head has not moved
	REQUIRE(n->stats.checkpoint_bytes < pages * PS);
	// Page 1 was written by the wave; its records are still the ring's.
	CHECK_FALSE(nvm_direct_allowed(n, page(1), PS));
	CHECK_FALSE(nvm_direct_allowed(n, page(pages - 1), PS));
	// Once the head is past them (the whole checkpoint), it may be.
	REQUIRE(nvm_log_checkpoint(n) == 0);
	CHECK(nvm_direct_allowed(n, page(1), PS));
	// Written straight, then a record of another page and a fence: the
	// replay of a reopen finds the page as written, the mapping reads it
	// too.
	std::vector<unsigned char> whole(PS, 0x5a);
	nvm_write_direct(n, page(1), whole.data(), PS);
	CHECK(memcmp(page(1), whole.data(), PS) == 0);
	CHECK(n->stats.direct_bytes == PS);
	memcpy(page(2), &e, 8);
	nvm_flush(n, page(2), 8);
	nvm_fence(n);
	CHECK_FALSE(nvm_direct_allowed(n, page(2), PS));
	CHECK(nvm_direct_allowed(n, page(1), PS));
	nvm *ro = rg.open(nullptr, true);
	CHECK(memcmp(static_cast<unsigned char *>(ro->base) + PS * 2, whole.data(), PS) == 0);
	n->read_only = true;	// as a crash leaves it
	nvm_unmap(n);
	nvm_unmap(ro);
}

// With reloads (format 7) a page the ring still holds records for may be
// written straight: a reload after those records, in the group that the
// fence commits once the page is durable, makes a replay read it from the
// file afresh; records after the reload apply on top.  Without its fence,
// the reload is not replayed and neither is anything after it.
TEST_CASE("a page written straight over records in the ring is replayed as written, through its "
	  "reload", "[log][direct]")
{
	rig rg(NVM_LOG_MIN_SIZE, DATA_PAGES, true);
	nvm *n = rg.open();
	auto *base = static_cast<unsigned char *>(n->base);
	auto page = [&](unsigned char *b, size_t i) { return b + PS * (1 + i); };
	// Records of pages 1-3 in the ring (a committed group).
	uint64_t v = 0x1111;
	for (size_t i = 1; i <= 3; i++) {
		memcpy(page(base, i) + 128, &v, 8);
		nvm_flush(n, page(base, i) + 128, 8);
	}
	nvm_fence(n);
	CHECK(nvm_direct_allowed(n, page(base, 2), PS));
	// Page 2 written straight; then a line on top of it, and a line of
	// page 3, in the same group, committed.
	std::vector<unsigned char> whole(PS, 0x6b);
	nvm_write_direct(n, page(base, 2), whole.data(), PS);
	uint64_t w = 0x2222;
	memcpy(page(base, 2) + 64, &w, 8);
	nvm_flush(n, page(base, 2) + 64, 8);
	memcpy(page(base, 3) + 64, &w, 8);
	nvm_flush(n, page(base, 3) + 64, 8);
	nvm_fence(n);
	// A replay (a read-only open: private mapping, the ring replayed).
	std::vector<unsigned char> want2 = whole;
	memcpy(want2.data() + 64, &w, 8);
	{
		nvm *ro = rg.open(nullptr, true);
		auto *rb = static_cast<unsigned char *>(ro->base);
		CHECK(memcmp(page(rb, 2), want2.data(), PS) == 0);
		uint64_t x;
		memcpy(&x, page(rb, 3) + 128, 8);
		CHECK(x == v);
		memcpy(&x, page(rb, 3) + 64, 8);
		CHECK(x == w);
		memcpy(&x, page(rb, 1) + 128, 8);
		CHECK(x == v);
		nvm_unmap(ro);
	}
	// Written straight again, its group left without a fence: a replay
	// ends before the reload, and the page is what the last fence made
	// it -- as far as the reload goes (the file holds the new bytes; a
	// pool never publishes such a copy, whose seq marks it torn).
	std::vector<unsigned char> again(PS, 0x7c);
	nvm_write_direct(n, page(base, 1), again.data(), PS);
	nvm_order(n);
	{
		nvm *ro = rg.open(nullptr, true);
		auto *rb = static_cast<unsigned char *>(ro->base);
		uint64_t x;
		memcpy(&x, page(rb, 1) + 128, 8);
		CHECK(x == v);	// record over the file's new bytes: no reload
		nvm_unmap(ro);
	}
	n->read_only = true;	// as a crash leaves it
	nvm_unmap(n);
}
