/* SPDX-License-Identifier: BSD-3-Clause */
// Real pools with one structure corrupted at a time: the program refuses to
// start (naming the structure), pmthreads-recover check names it and exits 1,
// info and dump never crash, and the file's bytes are unchanged by all of
// them.  The pools are made by tests/progs/persist_structs (a named root, a
// list and a tree, then the allocator churned), so every structure exists.
#include "pool_test_util.h"
#include "subprocess.hpp"

#include "heap_probe.h"

extern "C" {
#include "heap/heap.h"
}

#include <csetjmp>
#include <sys/mman.h>
#include <functional>
#include <string>

using namespace pooltest;
using subprocess::run_result;

namespace {

bool contains(const std::string &s, const std::string &what) { return s.find(what) != std::string::npos; }

std::string ps() { return subprocess::env_or_fail("PMT_PS"); }
std::string tool() { return subprocess::env_or_fail("PMTHREADS_RECOVER_TOOL"); }

run_result program(const std::string &pool, std::vector<std::string> args)
{
	args.insert(args.begin(), ps());
	return subprocess::run(args, { { "PMTHREADS_POOL", pool }, { "PMTHREADS_POOL_SIZE", "4M" },
				       { "PMTHREADS_INTERVAL_MS", "20" } });
}

run_result run_tool(std::vector<std::string> args)
{
	args.insert(args.begin(), tool());
	return subprocess::run(args, {});
}

// A pool with a heap in use: built, then verified (which churns and frees).
struct base_pool {
	scratch_dir d;
	std::string path = d.file("base.pool");
	std::string addrs = d.file("addrs");
	base_pool()
	{
		run_result r = program(path, { "build", "40", "60", "exit" });
		INFO(r.err);
		REQUIRE(r.exited_ok());
		write_file(addrs, r.out.data(), r.out.size());
		r = program(path, { "verify", addrs, "clean" });
		INFO(r.err);
		REQUIRE(r.exited_ok());
		r = run_tool({ "check", path });
		INFO(r.out << r.err);
		REQUIRE(r.status == 0);
	}
};

// The pool's consistent heap image, and where heap offset x lives in the file.
struct image {
	std::vector<unsigned char> bytes;
	std::vector<int> copy;
	uint64_t data_off = 0, ver_d = 0;
	explicit image(const std::string &path)
	{
		pool_open_options o{};
		o.path = path.c_str();
		o.read_only = true;
		pool *p = open_or_fail(o);
		bytes.resize(p->npages * p->page_size);
		copy.resize(p->npages);
		for (uint64_t i = 0; i < p->npages; i++) {
			copy[i] = pool_valid_copy(p, i);
			pool_read_page(p, i, bytes.data() + i * p->page_size);
		}
		data_off = p->data_off;
		ver_d = *p->ver_d;
		pool_close(p);
	}
	off_t file_offset(uint64_t heap_off) const
	{
		uint64_t pg = heap_off / page_size();
		REQUIRE(copy.at(pg) >= 0);
		return (off_t)(data_off + (2 * pg + (uint64_t)copy[pg]) * page_size() +
			       heap_off % page_size());
	}
	int64_t probe(probe_target t) const { return heap_probe(bytes.data(), bytes.size(), t); }
};

// Every reader refuses the pool (or reports it) and leaves it unchanged.
void expect_refused(const std::string &path, const std::string &addrs, const std::string &what,
		    const std::string &check_says)
{
	file_snapshot before = file_snapshot::of(path);
	run_result r = program(path, { "verify", addrs, "clean" });
	INFO("program: " << r.status << "\n" << r.err);
	CHECK(r.status != 0);
	CHECK(r.status < 128); // refused, not crashed
	CHECK(contains(r.err, what));
	r = run_tool({ "check", path });
	INFO("check: " << r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.out + r.err, check_says));
	r = run_tool({ "check", "--json", path });
	CHECK(r.status == 1);
	CHECK(contains(r.out, "\"consistent\":false"));
	r = run_tool({ "info", path });
	CHECK(r.status < 128);
	r = run_tool({ "dump", path, path + ".out" });
	CHECK(r.status < 128);
	CHECK(file_snapshot::of(path).same_as(before));
}

template <typename T> void patch(const std::string &path, off_t off, T v) { patch_file(path, off, &v, sizeof(v)); }

} // namespace

TEST_CASE("corrupt pools: each structure is refused by name, the file untouched", "[corrupt]")
{
	base_pool b;
	std::string v = b.d.file("victim.pool");
	copy_file(b.path, v);
	image img(v);

	SECTION("seq entry beyond the next epoch")
	{
		int c = img.copy.at(0);
		patch(v, (off_t)(page_size() + 16 * 0 + 8 * c), img.ver_d + 5);
		expect_refused(v, b.addrs, "seq table is corrupt", "is beyond the next epoch");
	}
	SECTION("seq entries: neither copy of page 0 valid (once wiped the heap)")
	{
		patch(v, (off_t)page_size(), POOL_SEQ_INVALID);
		patch(v, (off_t)page_size() + 8, POOL_SEQ_INVALID);
		expect_refused(v, b.addrs, "neither copy of page 0 is valid", "page 0: neither copy is valid");
	}
	SECTION("both version records")
	{
		patch(v, 1024 + 8, (uint64_t)0x7fff);
		patch(v, 1088 + 8, (uint64_t)0x7fff);
		expect_refused(v, b.addrs, "no valid version record", "version records (offsets 1024 and 1088)");
	}
	SECTION("heap header magic")
	{
		patch(v, img.file_offset((uint64_t)img.probe(PROBE_HDR_MAGIC)), (uint64_t)0x7fffffff);
		expect_refused(v, b.addrs, "no pmthreads heap there", "no pmthreads heap there");
	}
	SECTION("heap header high-water mark")
	{
		patch(v, img.file_offset((uint64_t)img.probe(PROBE_HDR_HWM)), (uint64_t)0x7fffffff);
		expect_refused(v, b.addrs, "inconsistent layout", "inconsistent layout");
	}
	SECTION("page map entry")
	{
		patch(v, img.file_offset((uint64_t)img.probe(PROBE_PAGEMAP_FIRST)), (uint32_t)0x7fffffff);
		expect_refused(v, b.addrs, "page map: page", "page map: page");
	}
	SECTION("partial list link")
	{
		int64_t at = img.probe(PROBE_PARTIAL_LIST);
		REQUIRE(at >= 0);
		patch(v, img.file_offset((uint64_t)at), (uint64_t)0x7fffffff);
		expect_refused(v, b.addrs, "partial list of class", "partial list of class");
	}
	SECTION("name table entry")
	{
		int64_t at = img.probe(PROBE_NAME_NODE);
		REQUIRE(at >= 0);
		patch(v, img.file_offset((uint64_t)at), (uint64_t)0x7fffffff);
		expect_refused(v, b.addrs, "name table", "name table");
	}
	SECTION("name table root")
	{
		patch(v, img.file_offset((uint64_t)img.probe(PROBE_NAME_BUCKETS)), (uint64_t)7);
		expect_refused(v, b.addrs, "name table's root", "name table's root");
	}
}

TEST_CASE("corrupt pools: check lists every problem, not just the first", "[corrupt]")
{
	base_pool b;
	std::string v = b.d.file("victim.pool");
	copy_file(b.path, v);
	image img(v);
	patch(v, img.file_offset((uint64_t)img.probe(PROBE_NAME_BUCKETS)), (uint64_t)7);
	patch(v, img.file_offset((uint64_t)img.probe(PROBE_PARTIAL_LIST)), (uint64_t)0x7fffffff);
	patch(v, (off_t)(page_size() + 16 * 100), img.ver_d + 9); // page 100's seq entry
	file_snapshot before = file_snapshot::of(v);
	run_result r = run_tool({ "check", v });
	INFO(r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.out, "name table's root"));
	CHECK(contains(r.out, "partial list of class"));
	CHECK(contains(r.out, "page 100 copy 0"));
	r = run_tool({ "check", "--json", v });
	CHECK(r.status == 1);
	CHECK(contains(r.out, "name table's root"));
	CHECK(contains(r.out, "partial list of class"));
	CHECK(contains(r.out, "page 100 copy 0"));
	CHECK_FALSE(contains(r.out, "\"problem_count\":0,"));
	CHECK_FALSE(contains(r.out, "\"problem_count\":1,"));
	CHECK(file_snapshot::of(v).same_as(before));
}

// Span headers and span free lists are not walked at start-up (that would
// touch every span page); the allocator checks each link the first time it
// reads it, and the full check finds them.
namespace {
sigjmp_buf corrupt_jump;
std::string corrupt_msg;
void on_corrupt(const char *msg)
{
	corrupt_msg = msg;
	siglongjmp(corrupt_jump, 1);
}
} // namespace

TEST_CASE("corrupt pools: span free lists are checked where the allocator reads them",
	  "[corrupt]")
{
	base_pool b;
	for (probe_target t : { PROBE_SPAN_FREE_LIST, PROBE_SPAN_HEADER }) {
		std::string v = b.d.file("span.pool");
		copy_file(b.path, v);
		image img(v);
		int64_t at = img.probe(t);
		REQUIRE(at >= 0);
		patch(v, img.file_offset((uint64_t)at), (uint32_t)0x7fffffff);
		file_snapshot before = file_snapshot::of(v);
		run_result r = run_tool({ "check", v });
		INFO(r.out << r.err);
		CHECK(r.status == 1);
		CHECK(contains(r.out, "span at heap offset"));
		CHECK(file_snapshot::of(v).same_as(before));

		// The allocator, in process, on the recovered image: a small
		// allocation of every class reaches the span.
		pool_open_options o{};
		o.path = v.c_str();
		o.read_only = true;
		pool *p = open_or_fail(o);
		size_t len = p->npages * p->page_size;
		void *heap = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		REQUIRE(heap != MAP_FAILED);
		for (uint64_t i = 0; i < p->npages; i++)
			pool_read_page(p, i, static_cast<char *>(heap) + i * p->page_size);
		pool_close(p);
		corrupt_msg.clear();
		heap_set_corruption_handler(on_corrupt);
		if (heap_init(heap, len, false) != 0) {
			// A span on a partial list or holding cached blocks is
			// reached by adoption already.
			corrupt_msg = err_get();
			CHECK(t == PROBE_SPAN_HEADER);
		} else if (sigsetjmp(corrupt_jump, 0) == 0) {
			for (int round = 0; round < 64; round++)
				for (size_t sz = 16; sz <= 3584; sz += 16)
					(void)heap_malloc(sz);
		}
		heap_set_corruption_handler(nullptr);
		INFO("corruption message: " << corrupt_msg);
		CHECK((contains(corrupt_msg, "span at heap offset") ||
		       contains(corrupt_msg, "partial list of class")));
		munmap(heap, len);
		CHECK(file_snapshot::of(v).same_as(before));
	}
}

TEST_CASE("corrupt pools: the issue's reproducer (0x7fffffff at offset 156128 of a 1 MiB pool)",
	  "[corrupt]")
{
	scratch_dir d;
	std::string path = d.file("small.pool");
	run_result r = subprocess::run({ ps(), "build", "10", "10", "exit" },
				       { { "PMTHREADS_POOL", path }, { "PMTHREADS_POOL_SIZE", "1M" } });
	INFO(r.err);
	REQUIRE(r.exited_ok());
	patch(path, 156128, (uint32_t)0x7fffffff);
	file_snapshot before = file_snapshot::of(path);
	for (const char *cmd : { "check", "info" }) {
		r = run_tool({ cmd, path });
		INFO(cmd << ": " << r.out << r.err);
		CHECK(r.status <= 1);
	}
	r = run_tool({ "dump", path, path + ".out" });
	CHECK(r.status <= 1);
	CHECK(file_snapshot::of(path).same_as(before));
	r = subprocess::run({ ps(), "verify", d.file("none"), "clean" },
			    { { "PMTHREADS_POOL", path }, { "PMTHREADS_POOL_SIZE", "1M" } });
	INFO("program: " << r.err);
	CHECK(r.status < 128);
}

// The pool's file system fills up while the heap grows: the allocation that
// needs new disk space fails with a clear message (no SIGBUS), and what was
// persisted is intact.  A 3 MiB tmpfs in a private mount namespace (needs
// unprivileged user namespaces, or root): the corrupt-enospc test, which
// meson skips where `unshare -rm` fails (PMT_TEST_NEEDS=userns).
TEST_CASE("a full file system is an allocation failure, not a SIGBUS", "[corrupt][enospc][userns]")
{
	scratch_dir d;
	std::string mnt = d.file("mnt");
	REQUIRE(mkdir(mnt.c_str(), 0700) == 0);
	std::string script =
		"mount -t tmpfs -o size=3m tmpfs '" + mnt + "' || exit 97; "
		"PMTHREADS_POOL='" + mnt + "/p.pool' PMTHREADS_POOL_SIZE=64M '" + ps() +
		"' build 20000 20000 exit >/dev/null; echo \"program $?\"; '" + tool() +
		"' check '" + mnt + "/p.pool'; echo \"check $?\"";
	// subprocess::run execs without a PATH search.
	run_result r = subprocess::run({ "/usr/bin/unshare", "-rm", "/bin/sh", "-c", script }, {});
	INFO(r.out << r.err);
	REQUIRE(r.status != 97);
	CHECK(contains(r.out, "program 1"));	// refused an allocation, not killed
	CHECK(contains(r.err, "its file system is full"));
	CHECK(contains(r.out, "consistent (VER_d"));
	CHECK(contains(r.out, "check 0"));
}
