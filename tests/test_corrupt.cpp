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
#include "persist/nvm_log.h"
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

run_result program(const std::string &pool, std::vector<std::string> args, const char *restore = "auto",
		   const char *nvm = "auto")
{
	args.insert(args.begin(), ps());
	return subprocess::run(args, { { "PMTHREADS_POOL", pool }, { "PMTHREADS_POOL_SIZE", "4M" },
				       { "PMTHREADS_INTERVAL_MS", "20" }, { "PMTHREADS_RESTORE", restore },
				       { "PMTHREADS_NVM", nvm } });
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
	std::vector<uint64_t> copy_off;	// the file offset of each page's valid copy
	uint64_t ver_d = 0;
	explicit image(const std::string &path)
	{
		pool_open_options o{};
		o.path = path.c_str();
		o.read_only = true;
		pool *p = open_or_fail(o);
		bytes.resize(p->npages * p->page_size);
		copy.resize(p->npages);
		copy_off.resize(p->npages);
		for (uint64_t i = 0; i < p->npages; i++) {
			copy[i] = pool_valid_copy(p, i);
			copy_off[i] = copy[i] >= 0 ? pool_copy_offset(p, i, copy[i]) : 0;
			recovery_read_page(p, i, bytes.data() + i * p->page_size);
		}
		ver_d = *p->ver_d;
		pool_close(p);
	}
	off_t file_offset(uint64_t heap_off) const
	{
		uint64_t pg = heap_off / page_size();
		REQUIRE(copy.at(pg) >= 0);
		return (off_t)(copy_off[pg] + heap_off % page_size());
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

// Patch heap offset heap_off of the image and record the page's new checksum,
// as an epoch that wrote those bytes would: what is tested is the structure's
// own validation (a damaged page that keeps a matching checksum: a bug in a
// program or in the allocator), not the checksum.
template <typename T> void patch_sealed(const std::string &path, const image &img, uint64_t heap_off, T v)
{
	patch(path, img.file_offset(heap_off), v);
	pool_open_options o{};
	o.path = path.c_str();
	o.nvm = NVM_MSYNC;
	pool *p = open_or_fail(o);
	uint64_t pg = heap_off / p->page_size;
	int c = pool_valid_copy(p, pg);
	REQUIRE(c >= 0);
	p->sum[pg][c] = pool_page_sum(p, pg, pool_copy(p, pg, c));
	nvm_flush(p->nvm, &p->sum[pg][c], sizeof(uint64_t));
	nvm_fence(p->nvm);
	pool_close(p);
}

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
		patch_sealed(v, img, (uint64_t)img.probe(PROBE_HDR_MAGIC), (uint64_t)0x7fffffff);
		expect_refused(v, b.addrs, "no pmthreads heap there", "no pmthreads heap there");
	}
	SECTION("heap header high-water mark")
	{
		patch_sealed(v, img, (uint64_t)img.probe(PROBE_HDR_HWM), (uint64_t)0x7fffffff);
		expect_refused(v, b.addrs, "inconsistent layout", "inconsistent layout");
	}
	SECTION("page map entry")
	{
		patch_sealed(v, img, (uint64_t)img.probe(PROBE_PAGEMAP_FIRST), (uint32_t)0x7fffffff);
		expect_refused(v, b.addrs, "page map: page", "page map: page");
	}
	SECTION("partial list link")
	{
		int64_t at = img.probe(PROBE_PARTIAL_LIST);
		REQUIRE(at >= 0);
		patch_sealed(v, img, (uint64_t)at, (uint64_t)0x7fffffff);
		expect_refused(v, b.addrs, "partial list of class", "partial list of class");
	}
	SECTION("name table entry")
	{
		int64_t at = img.probe(PROBE_NAME_NODE);
		REQUIRE(at >= 0);
		patch_sealed(v, img, (uint64_t)at, (uint64_t)0x7fffffff);
		expect_refused(v, b.addrs, "name table", "name table");
	}
	SECTION("name table root")
	{
		patch_sealed(v, img, (uint64_t)img.probe(PROBE_NAME_BUCKETS), (uint64_t)7);
		expect_refused(v, b.addrs, "name table's root", "name table's root");
	}
}

TEST_CASE("corrupt pools: check lists every problem, not just the first", "[corrupt]")
{
	base_pool b;
	std::string v = b.d.file("victim.pool");
	copy_file(b.path, v);
	image img(v);
	patch_sealed(v, img, (uint64_t)img.probe(PROBE_NAME_BUCKETS), (uint64_t)7);
	patch_sealed(v, img, (uint64_t)img.probe(PROBE_PARTIAL_LIST), (uint64_t)0x7fffffff);
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

// A value changed into another plausible one passes every structural check
// (a byte counter, the page-map entry of a page not yet in use); only the
// checksum of the metadata page holding it, recorded by the epoch that made
// the page durable, tells.  One case per kind of metadata page, after a clean
// exit and after kill -9.
namespace {

// The pool after kill -9: torn copies (an epoch interrupted by the kill)
// are invalidated first, as any recovery does, so that the refusal is what
// is left to leave the file untouched.
void settle_torn(const std::string &path)
{
	pool_open_options o{};
	o.path = path.c_str();
	o.nvm = NVM_MSYNC;
	pool *p = open_or_fail(o);
	persist_invalidate_torn(p);
	pool_close(p);
}

struct killed_pool {
	scratch_dir d;
	std::string path = d.file("killed.pool");
	std::string addrs = d.file("addrs");
	killed_pool()
	{
		run_result r = program(path, { "build", "40", "60", "kill" });
		INFO(r.err);
		REQUIRE(r.status == 128 + SIGKILL);
		write_file(addrs, r.out.data(), r.out.size());
		settle_torn(path);
		r = run_tool({ "check", path });
		INFO(r.out << r.err);
		REQUIRE(r.status == 0);
	}
};

// The same without settling: the log (on the log backend) still holds the
// last epochs and torn copies are still there, for the sweep below.
struct killed_pool_unsettled {
	scratch_dir d;
	std::string path = d.file("killed.pool");
	std::string addrs = d.file("addrs");
	killed_pool_unsettled()
	{
		run_result r = program(path, { "build", "40", "60", "kill" });
		INFO(r.err);
		REQUIRE(r.status == 128 + SIGKILL);
		write_file(addrs, r.out.data(), r.out.size());
	}
};

void expect_checksum_refusal(const std::string &base, const std::string &addrs, const std::string &dir)
{
	std::string v = dir + "/sum-victim.pool";
	copy_file(base, v);
	image img(v);
	SECTION("heap header: the byte counter of released slots, 4 KiB more")
	{
		int64_t at = img.probe(PROBE_HDR_IN_USE);
		int64_t was;
		memcpy(&was, img.bytes.data() + at, sizeof(was));
		patch(v, img.file_offset((uint64_t)at), was + 4096);
		// Restore verifies every page first and names it by index and
		// heap address; check names the structure too.
		expect_refused(v, addrs, "page 0 (heap address", "heap header page 0 of");
		run_result r = run_tool({ "check", v });
		CHECK(contains(r.out, "fails its checksum"));
	}
	SECTION("page map: the entry of the first unused page made a one-page run")
	{
		int64_t at = img.probe(PROBE_PAGEMAP_ABOVE_HWM);
		REQUIRE(at >= 0);
		patch(v, img.file_offset((uint64_t)at), (uint32_t)0x40000001);
		expect_refused(v, addrs, "fails its checksum", "page map page 0 of");
		run_result r = run_tool({ "check", "--json", v });
		CHECK(contains(r.out, "page map page 0 of 1 (heap page"));
		CHECK(contains(r.out, "fails its checksum"));
	}
	SECTION("name table: one byte of an empty bucket")
	{
		int64_t at = img.probe(PROBE_NAME_BUCKET_EMPTY);
		REQUIRE(at >= 0);
		patch(v, img.file_offset((uint64_t)at), (uint8_t)1);
		// Check lists the structure's checksum as well.
		expect_refused(v, addrs, "fails its checksum", "name table bucket array page 0 of 1");
	}
}

} // namespace

TEST_CASE("corrupt pools: plausible values in metadata pages fail their checksums (clean exit)",
	  "[corrupt][checksum]")
{
	base_pool b;
	expect_checksum_refusal(b.path, b.addrs, b.d.path);
}

TEST_CASE("corrupt pools: plausible values in metadata pages fail their checksums (kill -9)",
	  "[corrupt][checksum]")
{
	killed_pool b;
	expect_checksum_refusal(b.path, b.addrs, b.d.path);
}

// Every page of the image has a checksum, data pages too: one bit flipped in
// the valid copy of a data page (a bad block) is refused by the program's
// restore, eager or lazy, naming the page, its heap address and the fix;
// check reports it; nothing of the page is overwritten.  An undamaged pool
// passes, check saying how many pages it verified.
namespace {

// The highest page with a persisted copy: the heap's data, not metadata.
uint64_t last_data_page(const image &img)
{
	for (uint64_t pg = img.copy.size(); pg-- > 0;)
		if (img.copy[pg] >= 0)
			return pg;
	FAIL("no persisted page");
	return 0;
}

std::string heap_addr(const std::string &path, uint64_t pg)
{
	pool_open_options o{};
	o.path = path.c_str();
	o.read_only = true;
	pool *p = open_or_fail(o);
	char b[32];
	snprintf(b, sizeof(b), "%#llx", (unsigned long long)(p->shadow_base + pg * p->page_size));
	pool_close(p);
	return b;
}

} // namespace

TEST_CASE("corrupt pools: an undamaged pool verifies every page", "[corrupt][checksum]")
{
	base_pool b;
	image img(b.path);
	uint64_t persisted = 0;
	for (int c : img.copy)
		persisted += c >= 0;
	REQUIRE(persisted > 4);
	run_result r = run_tool({ "check", b.path });
	INFO(r.out << r.err);
	CHECK(r.status == 0);
	CHECK(contains(r.out, "pages: " + std::to_string(persisted) + " of the image verified"));
	r = run_tool({ "check", "--json", b.path });
	CHECK(r.status == 0);
	CHECK(contains(r.out, "\"pages_verified\":" + std::to_string(persisted) + ","));
}

TEST_CASE("corrupt pools: a flipped bit in a data page is refused, naming the page and its "
	  "address", "[corrupt][checksum]")
{
	base_pool b;
	std::string v = b.d.file("bit.pool");
	copy_file(b.path, v);
	image img(v);
	uint64_t pg = last_data_page(img);
	REQUIRE(pg > 8); // beyond the heap's header and page map
	uint64_t heap_off = pg * page_size() + 777;
	uint8_t byte = img.bytes.at(heap_off);
	patch(v, img.file_offset(heap_off), (uint8_t)(byte ^ 0x04));
	const std::string names = "page " + std::to_string(pg) + " (heap address " + heap_addr(v, pg) +
				  ") fails its checksum";
	const std::string epoch = "written by epoch ";
	file_snapshot before = file_snapshot::of(v);

	run_result r = run_tool({ "check", v });
	INFO("check: " << r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.out, names));
	CHECK(contains(r.out, epoch));
	CHECK(contains(r.out, "restore the pool from a backup"));
	r = run_tool({ "check", "--json", v });
	CHECK(r.status == 1);
	CHECK(contains(r.out, "\"consistent\":false"));
	CHECK(contains(r.out, names));
	CHECK(file_snapshot::of(v).same_as(before));

	for (const char *how : { "eager", "lazy" }) {
		INFO("PMTHREADS_RESTORE=" << how);
		r = program(v, { "verify", b.addrs, "clean" }, how);
		INFO("program: " << r.status << "\n" << r.err);
		CHECK(r.status != 0);
		CHECK(r.status < 128); // refused, not crashed
		CHECK(contains(r.err, names));
		CHECK(contains(r.err, epoch));
		CHECK(contains(r.err, "pmthreads-recover check"));
		if (std::string(how) == "eager") // refused before anything was written
			CHECK(file_snapshot::of(v).same_as(before));
		// The damaged copy is still there: found again.
		CHECK(image(v).bytes.at(heap_off) == (uint8_t)(byte ^ 0x04));
		r = run_tool({ "check", v });
		CHECK(r.status == 1);
		CHECK(contains(r.out, names));
	}
}

// Found by the fuzzer: a thread cache's bin whose count claims 4 billion
// blocks and whose list is a cycle made every reader walk it 4 billion steps
// (the count bounds the walk).  A count beyond what a cache holds is refused
// at once.
TEST_CASE("corrupt pools: a cache bin counting billions of blocks in a cycle", "[corrupt][fuzz]")
{
	killed_pool b;
	std::string v = b.d.file("bin.pool");
	copy_file(b.path, v);
	image img(v);
	int64_t bin = img.probe(PROBE_CACHE_BIN);
	REQUIRE(bin >= 0); // the killed program's thread left blocks in its cache
	uint64_t head;
	memcpy(&head, img.bytes.data() + bin, sizeof(head));
	patch_sealed(v, img, (uint64_t)bin + 8, (uint32_t)0xffffffff); // count
	patch_sealed(v, img, head, head);	// the first block's next: itself
	expect_refused(v, b.addrs, "more than a cache holds", "more than a cache holds");
}

// Found by the fuzzer (the program path without the metadata checksums): a
// page-map tag above the high-water mark is not looked at by adoption; when
// the heap later grew over it, it became the end of a "free extent" of a
// billion pages.  The allocator clears such tags as it raises hwm, and the
// full check reports them.
TEST_CASE("corrupt pools: a page-map tag above the high-water mark (no checksums)", "[corrupt][fuzz]")
{
	base_pool b;
	image img(b.path);
	int64_t at = img.probe(PROBE_PAGEMAP_ABOVE_HWM);
	REQUIRE(at >= 0);
	size_t len = img.bytes.size();
	void *heap = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(heap != MAP_FAILED);
	memcpy(heap, img.bytes.data(), len);
	// Every entry above hwm a stray tag: the first run taken from the top
	// leaves one right below hwm, where the next growth looked for a free
	// extent ending at hwm.
	const int64_t end = img.probe(PROBE_PAGEMAP_FIRST) - img.probe(PROBE_PAGEMAP_FIRST) % 4096 +
			    (int64_t)(len / 4096) * 4;	// past the last entry
	uint32_t stray = 0xffffffff;
	for (int64_t o = at; o < end; o += 4)
		memcpy(static_cast<char *>(heap) + o, &stray, sizeof(stray));
	heap_validate_report rep;
	REQUIRE(heap_validate_image(heap, len, &rep, nullptr, nullptr) > 0); // the full check sees it
	REQUIRE(heap_init(heap, len, false) == 0);	// adoption does not look there
	const size_t hwm = heap_high_water();
	std::vector<void *> runs;
	while (heap_high_water() < hwm + 16 * 4096 && runs.size() < 128) { // crashed here
		void *r = heap_malloc(8 * 4096);
		REQUIRE(r != nullptr);
		runs.push_back(r);
	}
	CHECK(heap_high_water() >= hwm + 16 * 4096);
	for (void *r : runs)
		heap_free(r);
	// What is left: only the stray tags still above hwm.
	std::vector<std::string> problems;
	heap_validate_all(&rep, [](const char *m, void *v) { static_cast<std::vector<std::string> *>(v)->push_back(m); },
			  &problems);
	REQUIRE(problems.size() == 1);
	CHECK(contains(problems[0], "above the high-water mark"));
	munmap(heap, len);
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
		patch_sealed(v, img, (uint64_t)at, (uint32_t)0x7fffffff);
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
			recovery_read_page(p, i, static_cast<char *>(heap) + i * p->page_size);
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
		"PMTHREADS_POOL='" + mnt + "/p.pool' PMTHREADS_POOL_SIZE=64M PMTHREADS_LOG_SIZE=256K '" + ps() +
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

// Issue 39, item 3: a refused pool is never written.  A few hundred seeded
// corruptions of a pool left by kill -9 (its log holding the last epochs on
// the log backend, a torn copy or more on either), each of a few bytes of the
// structures an open reads before it trusts the pool: the header page (header,
// version records, the log's head slots), the seq and sum tables, the live
// part of the log, the valid copies of the heap's first pages.  Whenever the
// program refuses the pool (restored eagerly, so that every check runs before
// the program starts), the file must be byte for byte, size and mtime what it
// was: every check runs before the first write (replay included).
namespace {

uint64_t splitmix(uint64_t &s)
{
	uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

struct layout {
	uint64_t seq_off, sum_off, data_off, npages, log_off, log_size;
	uint64_t log_head = 0, log_tail = 0;
	std::vector<int> copy;
	std::vector<uint64_t> copy_off[2];	// the file offsets of each page's copies
	explicit layout(const std::string &path)
	{
		pool_open_options o{};
		o.path = path.c_str();
		o.read_only = true;
		pool *p = open_or_fail(o);
		seq_off = p->seq_off;
		sum_off = p->sum_off;
		data_off = p->data_off;
		npages = p->npages;
		log_off = p->log_off;
		log_size = p->log_size;
		nvm_log_info li{};
		if (nvm_log_get_info(p->nvm, &li) == 0) {
			log_head = li.head;
			log_tail = li.tail;
		}
		for (uint64_t i = 0; i < p->npages && i < 64; i++) {
			copy.push_back(pool_valid_copy(p, i));
			for (int c = 0; c < 2; c++)
				copy_off[c].push_back(pool_copy_offset(p, i, c));
		}
		pool_close(p);
	}
};

// One corruption: where (a file offset) and what.
struct damage {
	off_t off;
	std::vector<unsigned char> bytes;
	std::string where;
};

damage pick(const layout &l, const std::vector<unsigned char> &file, uint64_t seed)
{
	uint64_t s = seed * 0x2545f4914f6cdd1dULL + 1;
	const uint64_t ps = page_size();
	damage d;
	uint64_t lo = 0, len = ps;
	switch (splitmix(s) % 6) {
	case 0:	// the header, its version records, the log's head slots
		lo = 0, len = 1344, d.where = "header page";
		break;
	case 1:	// the version records and head slots alone, where most refusals are
		lo = 1024, len = 320, d.where = "records and head slots";
		break;
	case 2:
		lo = l.seq_off, len = l.copy.size() * 16, d.where = "seq table";
		break;
	case 3:
		lo = l.sum_off, len = l.copy.size() * 16, d.where = "sum table";
		break;
	case 4:
		if (l.log_size != 0 && l.log_tail > l.log_head) {
			uint64_t live = l.log_tail - l.log_head;
			uint64_t at = l.log_head + splitmix(s) % live;
			lo = l.log_off + at % l.log_size, len = 8, d.where = "log record";
			break;
		}
		[[fallthrough]];
	default: {	// a valid copy of one of the heap's first pages
		uint64_t pg = splitmix(s) % l.copy.size();
		int c = l.copy[pg] >= 0 ? l.copy[pg] : 0;
		lo = l.copy_off[c][pg], len = ps, d.where = "heap page copy";
		break;
	}
	}
	uint64_t at = lo + splitmix(s) % len;
	if (splitmix(s) & 1) {	// a plausible word: small, or one bit of an old one
		at &= ~7ULL;
		uint64_t old = 0;
		memcpy(&old, file.data() + at, 8);
		uint64_t v = splitmix(s) & 1 ? splitmix(s) % 64 : old ^ (1ULL << (splitmix(s) % 64));
		d.bytes.resize(8);
		memcpy(d.bytes.data(), &v, 8);
	} else {	// bytes flipped
		size_t n = 1 + splitmix(s) % 4;
		for (size_t i = 0; i < n && at + i < file.size(); i++)
			d.bytes.push_back(file[at + i] ^ (unsigned char)(1 + splitmix(s) % 255));
	}
	d.off = (off_t)at;
	d.where += " @" + std::to_string(at);
	return d;
}

} // namespace

TEST_CASE("corrupt pools: a refused open writes nothing (seeded sweep)", "[corrupt][sweep]")
{
	// On a disk also with the msync backend forced on the log's pool: the
	// log is emptied into the file, once the open has passed every check.
	const char *nvm = pool_medium::on_disk() ? GENERATE("auto", "msync") : "auto";
	INFO("PMTHREADS_NVM=" << nvm);
	killed_pool_unsettled b;
	layout l(b.path);
	file_snapshot base = file_snapshot::of(b.path);
	REQUIRE(base.exists);
	INFO("medium " << pool_medium::name() << ", log " << l.log_head << ".." << l.log_tail);
	if (l.log_size != 0 && pool_medium::name() == std::string("disk"))
		REQUIRE(l.log_tail > l.log_head);	// the log holds epochs to replay
	const uint64_t seeds = std::string(nvm) == "auto" ? 240 : 120;
	uint64_t refused = 0;
	std::string v = b.d.file("sweep.pool");
	for (uint64_t seed = 1; seed <= seeds; seed++) {
		write_file(v, base.bytes.data(), base.bytes.size());
		damage d = pick(l, base.bytes, seed);
		patch_file(v, d.off, d.bytes.data(), d.bytes.size());
		file_snapshot before = file_snapshot::of(v);
		run_result r = program(v, { "verify", b.addrs, "crashed" }, "eager", nvm);
		// Accepted: the damage was harmless, or it only lost epochs (a
		// torn log record ends the replay early), which the program
		// may find and fail itself -- after the pool was written.
		if (!contains(r.err, "pmthreads: error: "))
			continue;
		refused++;
		INFO("seed " << seed << ": " << d.where << "; status " << r.status << "\n" << r.err);
		CHECK(r.status < 128);	// refused, not crashed
		CHECK(file_snapshot::of(v).same_as(before));
	}
	WARN(refused << " of " << seeds << " corruptions refused (" << pool_medium::name() << ", PMTHREADS_NVM="
		     << nvm << ")");
	CHECK(refused > seeds / 5);
}
