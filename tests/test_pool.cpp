/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/pool: creating and reopening pools, the format checks and
// the lock, each refusal leaving the file byte-identical, read-only opens,
// pool_check and pool_summarize.
#include "pool_test_util.h"

// pool_internal.h's C11 assertions, as C++ ones
#define _Static_assert static_assert
extern "C" {
#include "persist/pool_internal.h"
}
#undef _Static_assert

#include <signal.h>
#include <string>
#include <sys/stat.h>

using namespace pooltest;

namespace {

// The error of a pool_open that must fail with the code expect, with the
// file unchanged.
std::string refused(const pool_open_options &o, pool_error expect = POOL_ERR_REFUSED)
{
	file_snapshot before = file_snapshot::of(o.path);
	pool *p = nullptr;
	int rc = pool_open(&p, &o);
	std::string msg = err_get();
	INFO("message: " << msg);
	CHECK(rc == expect);
	CHECK(p == nullptr);
	CHECK_FALSE(msg.empty());
	file_snapshot after = file_snapshot::of(o.path);
	CHECK(after.same_as(before));
	if (p != nullptr)
		pool_close(p);
	return msg;
}

bool contains(const std::string &s, const std::string &what) { return s.find(what) != std::string::npos; }

// A child process that opens the pool and keeps it until told to go.
struct holder {
	pid_t pid = -1;
	int ready[2], go[2];
	holder(const pool_open_options &o)
	{
		REQUIRE(pipe(ready) == 0);
		REQUIRE(pipe(go) == 0);
		pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			pool *p = nullptr;
			char ok = pool_open(&p, &o) == 0 ? 'y' : 'n';
			if (write(ready[1], &ok, 1) != 1)
				_exit(2);
			char c;
			if (read(go[0], &c, 1) < 0)
				_exit(3);
			_exit(ok == 'y' ? 0 : 1);
		}
		char ok = 0;
		REQUIRE(read(ready[0], &ok, 1) == 1);
		REQUIRE(ok == 'y');
	}
	~holder()
	{
		char c = 'x';
		if (write(go[1], &c, 1) != 1)
			kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
		close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
	}
};

} // namespace

TEST_CASE("a new pool is sparse, mode 0600, and reopens with its parameters", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("a.pool");
	auto o = options(path, 16384); // 64 MiB of heap with 4 KiB pages
	o.shadow_base = 0x612300000000ULL;
	pool *p = open_or_fail(o);
	CHECK(p->created);
	CHECK(p->was_clean);
	CHECK(p->npages == 16384);
	CHECK(p->page_size == page_size());
	CHECK(*p->ver_d == 0);
	CHECK(std::string(p->creator) == "pooltest");
	CHECK(std::string(p->nvm->ops->name) == "msync");
	uint8_t uuid[16];
	memcpy(uuid, p->uuid, 16);
	uint8_t zero[16] = {};
	CHECK(memcmp(uuid, zero, 16) != 0);
	for (uint64_t i = 0; i < p->npages; i++)
		REQUIRE((p->seq[i][0] == 0 && p->seq[i][1] == 0));
	uint64_t file_size = p->file_size, log_size = p->log_size;
	CHECK(log_size == 16384 * page_size() / 4);	// a quarter of the heap
	pool_set_clean(p, false);
	pool_close(p);

	struct stat st;
	REQUIRE(stat(path.c_str(), &st) == 0);
	CHECK((st.st_mode & 0777) == 0600);
	CHECK((uint64_t)st.st_size == file_size);
	CHECK(file_size >= 2 * 16384 * page_size());
	// Sparse but for the log's ring, whose blocks are allocated at creation.
	CHECK((uint64_t)st.st_blocks * 512 < file_size / 64 + log_size);

	o.create = false;
	p = open_or_fail(o);
	CHECK_FALSE(p->created);
	CHECK_FALSE(p->was_clean);
	CHECK(p->shadow_base == 0x612300000000ULL);
	CHECK(memcmp(p->uuid, uuid, 16) == 0);
	pool_set_clean(p, true);
	pool_close(p);
	p = open_or_fail(o);
	CHECK(p->was_clean);
	pool_close(p);
}

TEST_CASE("capacity is rounded up to whole pages", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("r.pool");
	auto o = options(path);
	o.capacity = 3 * page_size() + 1;
	pool *p = open_or_fail(o);
	CHECK(p->npages == 4);
	pool_close(p);
}

TEST_CASE("a missing pool is not created without create", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("missing.pool");
	auto o = options(path);
	o.create = false;
	std::string msg = refused(o);
	CHECK(contains(msg, "does not exist"));
	CHECK_FALSE(file_snapshot::of(o.path).exists);
}

TEST_CASE("files that are not pools are refused and left untouched", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("x.pool");
	auto o = options(path);

	SECTION("a short text file")
	{
		write_file(path, "hello\n", 6);
		CHECK(contains(refused(o), "not a pmthreads pool"));
	}
	SECTION("a large file of other data")
	{
		std::vector<unsigned char> junk(3 * page_size() + 17);
		for (size_t i = 0; i < junk.size(); i++)
			junk[i] = (unsigned char)(i * 7 + 3);
		write_file(path, junk.data(), junk.size());
		CHECK(contains(refused(o), "not a pmthreads pool"));
		o.read_only = true;
		CHECK(contains(refused(o), "not a pmthreads pool"));
	}
	SECTION("a directory")
	{
		REQUIRE(mkdir(path.c_str(), 0700) == 0);
		std::string msg = refused(o);
		CHECK((contains(msg, "not a regular file") || contains(msg, "Is a directory")));
	}
	SECTION("an empty file is refused read-only")
	{
		write_file(path, "", 0);
		o.read_only = true;
		CHECK(contains(refused(o), "empty"));
	}
}

TEST_CASE("an existing empty file is initialised", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("empty.pool");
	write_file(path, "", 0);
	auto o = options(path);
	o.create = false;
	pool *p = open_or_fail(o);
	CHECK(p->created);
	CHECK(p->npages == 16);
	pool_close(p);
	o.create = false;
	p = open_or_fail(o);
	CHECK_FALSE(p->created);
	pool_close(p);
}

TEST_CASE("damaged pools are refused and left untouched", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("p.pool");
	auto o = options(path);
	pool_close(open_or_fail(o));
	o.create = false;

	SECTION("another format version")
	{
		uint32_t v = POOL_FORMAT_VERSION + 1;
		patch_file(path, 8, &v, sizeof(v)); // just after the magic
		std::string msg = refused(o);
		CHECK(contains(msg, "format version " + std::to_string(POOL_FORMAT_VERSION + 1)));
	}
	SECTION("format version 1 (before checksummed version records)")
	{
		uint32_t v = 1;
		patch_file(path, 8, &v, sizeof(v));
		std::string msg = refused(o);
		CHECK(contains(msg, "format version 1"));
		CHECK(contains(msg, "remove the file"));
	}
	SECTION("format version 2 (before checksummed heap metadata pages)")
	{
		uint32_t v = 2;
		patch_file(path, 8, &v, sizeof(v));
		file_snapshot before = file_snapshot::of(path);
		std::string msg = refused(o);
		CHECK(contains(msg, "format version 2,"));
		CHECK(contains(msg, "format version " + std::to_string(POOL_FORMAT_VERSION) + ":"));
		CHECK(contains(msg, "pmthreads-recover upgrade " + path));
		CHECK(file_snapshot::of(path).same_as(before));
	}
	SECTION("format version 3 (checksums of the heap's metadata pages only)")
	{
		uint32_t v = 3;
		patch_file(path, 8, &v, sizeof(v));
		file_snapshot before = file_snapshot::of(path);
		std::string msg = refused(o);
		CHECK(contains(msg, "format version 3,"));
		CHECK(contains(msg, "every page copy"));
		CHECK(contains(msg, "pmthreads-recover upgrade " + path));
		CHECK(file_snapshot::of(path).same_as(before));
	}
	SECTION("a checksum mismatch")
	{
		flip_file_byte(path, 20); // inside the UUID
		CHECK(contains(refused(o), "checksum"));
	}
	SECTION("a layout that does not follow from the page count, checksums intact")
	{
		// The header's seq_off, data_off and file_size (struct pool_header),
		// each moved by a page in turn and the header resealed: only the
		// layout check can refuse it.
		for (off_t at : { 56, 64, 72 }) {
			INFO("header offset " << at);
			file_snapshot good = file_snapshot::of(path);
			std::vector<unsigned char> head(POOL_RESEAL_BYTES);
			int fd = open(path.c_str(), O_RDWR);
			REQUIRE(fd >= 0);
			REQUIRE(pread(fd, head.data(), head.size(), 0) == (ssize_t)head.size());
			uint64_t v;
			memcpy(&v, head.data() + at, sizeof(v));
			v += page_size();
			memcpy(head.data() + at, &v, sizeof(v));
			pool_reseal(head.data(), head.size());
			REQUIRE(pwrite(fd, head.data(), head.size(), 0) == (ssize_t)head.size());
			file_snapshot before = file_snapshot::of(path);
			// file_size sets the log's size in format 6: one page more
			// is a consistent layout, and the file is then too short.
			CHECK(contains(refused(o), at == 72 ? "truncated" : "inconsistent layout"));
			CHECK(file_snapshot::of(path).same_as(before));
			REQUIRE(pwrite(fd, good.bytes.data(), head.size(), 0) == (ssize_t)head.size());
			close(fd);
		}
	}
	SECTION("truncated")
	{
		struct stat st;
		REQUIRE(stat(path.c_str(), &st) == 0);
		REQUIRE(truncate(path.c_str(), st.st_size / 2) == 0);
		CHECK(contains(refused(o), "truncated"));
	}
	SECTION("truncated inside the header")
	{
		REQUIRE(truncate(path.c_str(), 100) == 0);
		CHECK(contains(refused(o), "truncated"));
	}
	SECTION("grown")
	{
		struct stat st;
		REQUIRE(stat(path.c_str(), &st) == 0);
		REQUIRE(truncate(path.c_str(), st.st_size + 4096) == 0);
		CHECK(contains(refused(o), "larger than its header"));
	}
	SECTION("both version records corrupt")
	{
		uint64_t bad = 7;
		patch_file(path, 1024 + 8, &bad, sizeof(bad)); // VER_d of record 0
		patch_file(path, 1088 + 8, &bad, sizeof(bad)); // ... and of record 1
		std::string msg = refused(o);
		CHECK(contains(msg, "no valid version record"));
		CHECK(contains(msg, "offsets 1024 and 1088"));
	}
}

TEST_CASE("a legacy open (for upgrade) reads a version-3 pool under an exclusive lock",
	  "[pool][readonly]")
{
	scratch_dir d;
	std::string path = d.file("p.pool");
	auto o = options(path);
	pool_close(open_or_fail(o));
	uint32_t v = 3;
	patch_file(path, 8, &v, sizeof(v));
	std::vector<unsigned char> head(POOL_RESEAL_BYTES);
	int fd = open(path.c_str(), O_RDWR);
	REQUIRE(fd >= 0);
	REQUIRE(pread(fd, head.data(), head.size(), 0) == (ssize_t)head.size());
	// Version 3 had no log: the file ends with the page pairs.
	pool_header h;
	memcpy(&h, head.data(), sizeof(h));
	h.file_size = pool_layout_for(h.npages, h.page_size).file_size;
	memcpy(head.data(), &h, sizeof(h));
	REQUIRE(ftruncate(fd, (off_t)h.file_size) == 0);
	pool_reseal(head.data(), head.size());
	REQUIRE(pwrite(fd, head.data(), head.size(), 0) == (ssize_t)head.size());
	close(fd);
	file_snapshot before = file_snapshot::of(path);
	o.create = false;
	o.read_only = true;
	CHECK(contains(refused(o), "pmthreads-recover upgrade"));	// not without .legacy
	auto lo = o;
	lo.legacy = true;
	pool *p = open_or_fail(lo);
	CHECK(p->format_version == 3);
	CHECK(p->sum != nullptr);
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	// Exclusive: not even a reader gets in meanwhile.
	pool *q = nullptr;
	CHECK(pool_open(&q, &o) == POOL_ERR_LOCKED);
	pool_close(p);
	CHECK(file_snapshot::of(path).same_as(before));
}

TEST_CASE("a pool made by another program is refused, naming both", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("c.pool");
	auto o = options(path, 16, "/usr/bin/alpha");
	pool_close(open_or_fail(o));
	o.creator = "/usr/bin/beta";
	std::string msg = refused(o);
	CHECK(contains(msg, "/usr/bin/alpha"));
	CHECK(contains(msg, "/usr/bin/beta"));
	CHECK(contains(msg, "PMTHREADS_POOL"));
	o.creator = nullptr; // tools do not check
	pool_close(open_or_fail(o));
}

TEST_CASE("a symbolic link is refused (O_NOFOLLOW)", "[pool]")
{
	scratch_dir d;
	std::string real = d.file("real.pool"), link = d.file("link.pool");
	auto o = options(real);
	pool_close(open_or_fail(o));
	REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
	file_snapshot before = file_snapshot::of(real);
	auto ol = options(link);
	std::string msg = refused(ol);
	CHECK(contains(msg, "symbolic link"));
	CHECK(file_snapshot::of(real).same_as(before));

	SECTION("a dangling link is not created through")
	{
		std::string dangling = d.file("dangling.pool");
		REQUIRE(symlink(d.file("nowhere.pool").c_str(), dangling.c_str()) == 0);
		auto od = options(dangling);
		CHECK(contains(refused(od), "symbolic link"));
		CHECK_FALSE(file_snapshot::of(d.file("nowhere.pool")).exists);
	}
}

TEST_CASE("a pool in use by another process is refused, naming its pid", "[pool][lock]")
{
	scratch_dir d;
	std::string path = d.file("l.pool");
	auto o = options(path);
	pool_close(open_or_fail(o));
	o.create = false;

	pid_t held_by = -1;
	SECTION("read-write holder")
	{
		holder h(o);
		std::string msg = refused(o, POOL_ERR_LOCKED);
		CHECK(contains(msg, "process " + std::to_string(h.pid)));
		auto ro = o;
		ro.read_only = true;
		ro.lock_holder = &held_by;
		msg = refused(ro, POOL_ERR_LOCKED);
		CHECK(contains(msg, std::to_string(h.pid)));
		CHECK(held_by == h.pid);
	}
	SECTION("read-only holder")
	{
		auto ro = o;
		ro.read_only = true;
		holder h(ro);
		o.lock_holder = &held_by;
		std::string msg = refused(o, POOL_ERR_LOCKED);
		CHECK(held_by == h.pid);
		CHECK(contains(msg, "process " + std::to_string(h.pid)));
		CHECK(contains(msg, "shared lock"));
		// Readers share.
		pool *p = open_or_fail(ro);
		pool_close(p);
	}
	SECTION("the lock is gone when the holder exits")
	{
		{
			holder h(o);
		}
		pool_close(open_or_fail(o));
	}
	SECTION("a second open in the same process")
	{
		pool *p = open_or_fail(o);
		o.lock_holder = &held_by;
		std::string msg = refused(o, POOL_ERR_LOCKED);
		CHECK(contains(msg, "already open in this process"));
		CHECK(held_by == getpid());
		pool_close(p);
	}
}

TEST_CASE("read-only opens write nothing", "[pool][readonly]")
{
	scratch_dir d;
	std::string path = d.file("ro.pool");
	auto o = options(path, 8);
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	// Give it content: two epochs, and a torn copy as a crash would leave.
	shadow_buf sh(8 * page_size());
	uint64_t pages[] = { 1, 5 };
	memset(sh.mem + page_size(), 0x11, page_size());
	memset(sh.mem + 5 * page_size(), 0x55, page_size());
	persist_epoch(p, sh.mem, pages, 2, nullptr);
	memset(sh.mem + page_size(), 0x22, 64);
	persist_epoch(p, sh.mem, pages, 1, nullptr);
	uint64_t v = *p->ver_d;
	int torn_copy = p->seq[5][0] < p->seq[5][1] ? 0 : 1;
	p->seq[5][torn_copy] = v + 1;
	memset(pool_copy(p, 5, torn_copy), 0xee, page_size());
	pool_close(p);

	file_snapshot before = file_snapshot::of(path);
	auto ro = o;
	ro.read_only = true;
	ro.create = false;
	p = open_or_fail(ro);
	CHECK(p->read_only);
	CHECK(p->created == false);
	// Mapped private with the log replayed into the mapping, or shared.
	CHECK(std::string(p->nvm->ops->name).find("read-only") != std::string::npos);
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	pool_summary s;
	pool_summarize(p, &s);
	CHECK(s.ver_d == 2);
	CHECK(s.pages_written == 2);
	CHECK(s.torn_copies == 1);
	CHECK(s.invalid_copies == 0);
	std::vector<unsigned char> page(page_size());
	recovery_read_page(p, 5, page.data());
	CHECK(std::vector<unsigned char>(sh.mem + 5 * page_size(), sh.mem + 6 * page_size()) == page);
	recovery_read_page(p, 1, page.data());
	CHECK(std::vector<unsigned char>(sh.mem + page_size(), sh.mem + 2 * page_size()) == page);
	recovery_read_page(p, 7, page.data());
	CHECK(std::vector<unsigned char>(page_size(), 0) == page);
	shadow_buf out(8 * page_size());
	CHECK(recovery_restore_image(p, out.mem) == 2);
	CHECK(out.bytes() == sh.bytes());
	CHECK(persist_invalidate_torn(p) == 0);
	pool_close(p);
	CHECK(file_snapshot::of(path).same_as(before));
}

TEST_CASE("pool_check finds broken invariants", "[pool][check]")
{
	scratch_dir d;
	std::string path = d.file("chk.pool");
	auto o = options(path, 8);
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	shadow_buf sh(8 * page_size());
	uint64_t pages[] = { 0, 1, 2 };
	memset(sh.mem, 1, 3 * page_size());
	persist_epoch(p, sh.mem, pages, 3, nullptr);
	persist_epoch(p, sh.mem, pages, 3, nullptr);
	std::vector<std::string> msgs;
	auto collect = [](const char *m, void *arg) {
		static_cast<std::vector<std::string> *>(arg)->push_back(m);
	};
	CHECK(pool_check(p, collect, &msgs) == 0);
	CHECK(msgs.empty());

	SECTION("two copies with one seq")
	{
		p->seq[1][0] = p->seq[1][1] = 2;
		CHECK(pool_check(p, collect, &msgs) == 1);
		REQUIRE(msgs.size() == 1);
		CHECK(contains(msgs[0], "page 1"));
	}
	SECTION("no valid copy")
	{
		p->seq[2][0] = POOL_SEQ_INVALID;
		p->seq[2][1] = POOL_SEQ_INVALID;
		CHECK(pool_check(p, collect, &msgs) == 1);
		CHECK(contains(msgs.at(0), "neither copy"));
	}
	SECTION("a torn copy in a pool marked clean")
	{
		pool_set_clean(p, true);
		p->seq[0][0] = *p->ver_d + 1;
		CHECK(pool_check(p, collect, &msgs) == 1);
		CHECK(contains(msgs.at(0), "interrupted epoch"));
	}
	SECTION("a seq far beyond VER_d")
	{
		p->seq[0][0] = *p->ver_d + 5;
		CHECK(pool_check(p, collect, &msgs) == 1);
	}
	SECTION("the header changed after open")
	{
		char *creator = static_cast<char *>(p->nvm->base) + 100;
		creator[0] ^= 1;
		CHECK(pool_check(p, collect, &msgs) >= 1);
		CHECK(contains(msgs.at(0), "checksum"));
		creator[0] ^= 1;
	}
	pool_close(p);
}

TEST_CASE("special files are refused without being read or blocking", "[pool]")
{
	scratch_dir d;
	SECTION("a FIFO (opening it for reading would wait for a writer)")
	{
		std::string fifo = d.file("fifo");
		REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
		for (bool ro : { true, false }) {
			auto o = options(fifo);
			o.read_only = ro;
			CHECK(contains(refused(o), "is a FIFO, not a regular file"));
		}
	}
	SECTION("a character device")
	{
		const std::string dev = "/dev/null";
		auto o = options(dev);
		o.create = false;
		CHECK(contains(refused(o), "is a character device"));
	}
	SECTION("/proc/self/mem (a regular file of size 0 to stat)")
	{
		const std::string mem = "/proc/self/mem";
		auto o = options(mem);
		o.read_only = true;
		CHECK(contains(refused(o), "kernel pseudo-file"));
		o.read_only = false;
		CHECK(contains(refused(o), "kernel pseudo-file"));
	}
}

TEST_CASE("version records: the newest valid one wins, a torn one falls back", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("v.pool");
	auto o = options(path, 8);
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	shadow_buf sh(8 * page_size());
	uint64_t pages[] = { 1 };
	for (int i = 0; i < 3; i++) {
		sh.mem[page_size() + i] = (unsigned char)(i + 1);
		persist_epoch(p, sh.mem, pages, 1, nullptr);
	}
	REQUIRE(*p->ver_d == 3);
	int slot = p->rec_slot;
	pool_close(p);
	o.create = false;

	SECTION("intact: VER_d 3")
	{
		p = open_or_fail(o);
		CHECK(*p->ver_d == 3);
		pool_close(p);
	}
	SECTION("the newest record torn (a crash while VER_d 3 was written): VER_d 2")
	{
		// Flip a bit of the newest record's VER_d: its checksum fails,
		// and the copy with seq 3 is then the torn copy of epoch 3.
		std::vector<unsigned char> rec(8);
		uint64_t bad = 0x7fffffff;
		patch_file(path, 1024 + 64 * slot + 8, &bad, sizeof(bad));
		p = open_or_fail(o);
		CHECK(*p->ver_d == 2);
		pool_close(p);
	}
	SECTION("a record copied into the other slot does not pass")
	{
		file_snapshot s = file_snapshot::of(path);
		patch_file(path, 1024 + 64 * (1 - slot), s.bytes.data() + 1024 + 64 * slot, 32);
		p = open_or_fail(o);
		CHECK(*p->ver_d == 3);	// the copy is ignored, the current one stands
		pool_close(p);
		patch_file(path, 1024 + 64 * slot, s.bytes.data() + 1024 + 64 * slot, 8);
	}
}

TEST_CASE("opening a pool writes nothing until it is taken into use", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("w.pool");
	auto o = options(path, 8);
	pool_close(open_or_fail(o));
	o.create = false;
	file_snapshot before = file_snapshot::of(path);
	pool *p = open_or_fail(o);
	pool_close(p);
	CHECK(file_snapshot::of(path).same_as(before));
}

TEST_CASE("seq entries no crash can leave are refused at open", "[pool]")
{
	scratch_dir d;
	std::string path = d.file("s.pool");
	auto o = options(path, 8);
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	shadow_buf sh(8 * page_size());
	uint64_t pages[] = { 0, 3 };
	sh.mem[1] = 1;
	persist_epoch(p, sh.mem, pages, 2, nullptr);
	persist_epoch(p, sh.mem, pages, 2, nullptr);
	pool_close(p);
	o.create = false;
	const off_t seq = (off_t)page_size();
	SECTION("beyond VER_d + 1")
	{
		uint64_t v = 9;
		patch_file(path, seq + 16 * 3, &v, sizeof(v));
		std::string msg = refused(o);
		CHECK(contains(msg, "page 3 copy 0 (offset " + std::to_string(seq + 48) + ")"));
		CHECK(contains(msg, "beyond the next epoch 3"));
	}
	SECTION("both copies invalid")
	{
		uint64_t v[2] = { POOL_SEQ_INVALID, POOL_SEQ_INVALID };
		patch_file(path, seq, v, sizeof(v));
		CHECK(contains(refused(o), "neither copy of page 0 is valid"));
	}
	SECTION("both copies one seq")
	{
		uint64_t v[2] = { 1, 1 };
		patch_file(path, seq + 16 * 3, v, sizeof(v));
		CHECK(contains(refused(o), "both copies of page 3 have seq 1"));
	}
	SECTION("a torn copy (VER_d + 1) is not corruption")
	{
		uint64_t v = 3;
		patch_file(path, seq + 16 * 3 + 8 * 0, &v, sizeof(v));
		// copy 0 of page 3 held seq 1 (the older one): now it is torn
		pool *q = open_or_fail(o);
		CHECK(pool_valid_copy(q, 3) == 1);
		pool_close(q);
	}
}

TEST_CASE("the seq table's holes are not scanned: a large pool opens in time ~ its use",
	  "[pool]")
{
	scratch_dir d;
	std::string path = d.file("big.pool");
	auto o = options(path, (64ULL << 30) / page_size());	// 64 GiB, 256 MiB of seq table
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	CHECK(pool_reserve(p, 0, 300) == 0);
	shadow_buf sh(4 * page_size());
	uint64_t pages[] = { 0, 2 };
	sh.mem[0] = 1;
	persist_epoch(p, sh.mem, pages, 2, nullptr);
	pool_close(p);
	o.create = false;
	p = open_or_fail(o);
	CHECK(p->seq_pages < 4096); // the reserved seq-table page, not 16 M entries
	CHECK(p->seq_pages >= 3);
	CHECK(pool_valid_copy(p, 0) >= 0);
	pool_close(p);
	struct stat st;
	REQUIRE(stat(path.c_str(), &st) == 0);
	CHECK((uint64_t)st.st_blocks * 512 < (64ULL << 20) + POOL_LOG_DEFAULT_MAX); // sparse but the log
}
