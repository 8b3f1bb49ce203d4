/* SPDX-License-Identifier: BSD-3-Clause */
// pmthreads-recover upgrade (recover/upgrade.c, lib/persist/pool_upgrade.c):
// a pool of format version 6, 5, 4, 3 or 2 becomes a current one with the same
// data.  The old pools are made from the documented layouts (pool.h): a real
// program (examples/bank) writes a current pool, which is rewritten here as
// the older pmthreads laid it out -- every version before 7: the two copies
// of a page side by side; version 6: the same log ring; version 5: no log;
// version 4: the same layout, every
// valid copy's checksum the XXH3 of the page (pool_page_sum_v4); version 3:
// the same, but only where that version kept them (here: page 0's, the
// heap's header); version 2: no sum table, the data where version 3's sum
// table starts.
// Then the tool upgrades it and the program finds its accounts again.
#include "pool_test_util.h"
#include "subprocess.hpp"

// pool_internal.h's C11 assertions, as C++ ones
#define _Static_assert static_assert
extern "C" {
#include "persist/pool_internal.h"
}
#undef _Static_assert

#include <signal.h>

using namespace pooltest;

namespace {

std::string env_path(const char *name)
{
	const char *v = getenv(name);
	INFO(name << " must be set (meson test sets it)");
	REQUIRE(v != nullptr);
	REQUIRE(access(v, X_OK) == 0);
	return v;
}

bool contains(const std::string &s, const std::string &what) { return s.find(what) != std::string::npos; }

subprocess::run_result tool(std::vector<std::string> args,
			    const std::map<std::string, std::string> &env = {})
{
	args.insert(args.begin(), env_path("PMTHREADS_RECOVER_TOOL"));
	return subprocess::run(args, env);
}

subprocess::run_result bank(const std::string &pool, std::vector<std::string> args)
{
	args.insert(args.begin(), env_path("PMT_BANK"));
	return subprocess::run(args, { { "PMTHREADS_POOL", pool }, { "PMTHREADS_POOL_SIZE", "8M" },
				       { "PMTHREADS_INTERVAL_MS", "5" } });
}

// A bank pool: run for a moment and exit cleanly, or be killed mid-run
// (a crashed pool, recovery pending).
void make_bank_pool(const std::string &pool, bool crash)
{
	if (!crash) {
		auto r = bank(pool, { "-t", "2", "-s", "1", "-n", "64" });
		INFO(r.out << r.err);
		REQUIRE(r.status == 0);
		return;
	}
	subprocess::spawned c = subprocess::spawn(
		{ env_path("PMT_BANK"), "-t", "2", "-s", "30", "-n", "64", "--progress" },
		{ { "PMTHREADS_POOL", pool }, { "PMTHREADS_POOL_SIZE", "8M" },
		  { "PMTHREADS_INTERVAL_MS", "5" } });
	// Wait for a few progress lines with a durable epoch, then kill -9.
	std::string out;
	char buf[4096];
	int lines = 0;
	while (lines < 20) {
		ssize_t n = read(c.out_fd, buf, sizeof(buf));
		REQUIRE(n > 0);
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
		out.append(buf, (size_t)n);
	}
	kill(c.pid, SIGKILL);
	close(c.out_fd);
	subprocess::run_result r;
	subprocess::finish(c, r);
	REQUIRE(r.status == 128 + SIGKILL);
}

int open_or_die(const std::string &path, int flags)
{
	int fd = open(path.c_str(), flags, 0600);
	INFO(path);
	REQUIRE(fd >= 0);
	return fd;
}

// Copy [from, from + len) of in to out at to, the data extents only (holes
// stay holes, as in the pools).
void copy_extents(int in, off_t from, int out, off_t to, off_t len)
{
	std::vector<char> buf(1 << 16);
	off_t off = from, end = from + len;
	while (off < end) {
		off_t d = lseek(in, off, SEEK_DATA);
		if (d < 0 || d >= end)
			break;
		off_t h = lseek(in, d, SEEK_HOLE);
		REQUIRE(h > d);
		if (h > end)
			h = end;
		for (off_t p = d; p < h;) {
			size_t n = (size_t)std::min<off_t>(h - p, (off_t)buf.size());
			REQUIRE(pread(in, buf.data(), n, p) == (ssize_t)n);
			REQUIRE(pwrite(out, buf.data(), n, to + (p - from)) == (ssize_t)n);
			p += (off_t)n;
		}
		off = h;
	}
}

// A copy of the pool at from as to, holes kept, put in place by a rename.
void copy_pool(const std::string &from, const std::string &to)
{
	struct stat st;
	REQUIRE(stat(from.c_str(), &st) == 0);
	int in = open_or_die(from, O_RDONLY);
	int out = open_or_die(to + ".copying", O_RDWR | O_CREAT | O_TRUNC);
	REQUIRE(ftruncate(out, st.st_size) == 0);
	copy_extents(in, 0, out, 0, st.st_size);
	close(in);
	close(out);
	REQUIRE(rename((to + ".copying").c_str(), to.c_str()) == 0);
}

pool_header read_header(const std::string &path)
{
	pool_header h;
	int fd = open_or_die(path, O_RDONLY);
	REQUIRE(pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h));
	close(fd);
	return h;
}

// The current-format pool at path, opened read-only whatever program made it.
struct pool *open_read_only(const std::string &path)
{
	pool_open_options o = options(path);
	o.read_only = true;
	o.create = false;
	o.creator = nullptr;
	return open_or_fail(o);
}

// The sum table of the current-format pool at path as version 4 (every
// valid copy) or 3 (page 0's copies only) recorded it.
std::vector<uint64_t> legacy_sums(const std::string &path, uint32_t version)
{
	struct pool *p = open_read_only(path);
	uint64_t n = version == 3 ? 1 : p->npages;
	std::vector<uint64_t> sums(2 * p->npages, 0);
	for (uint64_t i = 0; i < n && i < p->seq_pages; i++)
		for (int c = 0; c < 2; c++)
			if (p->seq[i][c] != 0 && p->seq[i][c] <= *p->ver_d)
				sums[2 * i + (uint64_t)c] =
					pool_page_sum_v4(p->uuid, p->page_size, i, pool_copy(p, i, c));
	pool_close(p);
	return sums;
}

// The copies of the heap's pages, from in's layout from to out's layout to
// (format 7's planes to the copies side by side of the versions before it),
// the data extents only.
void copy_copies(int in, const pool_layout &from, int out, const pool_layout &to, uint64_t npages,
		 uint64_t ps)
{
	std::vector<char> buf(ps);
	off_t off = (off_t)from.data_off, end = (off_t)(from.data_off + 2 * npages * ps);
	while (off < end) {
		off_t d = lseek(in, off, SEEK_DATA);
		if (d < 0 || d >= end)
			break;
		off_t h = lseek(in, d, SEEK_HOLE);
		REQUIRE(h > d);
		if (h > end)
			h = end;
		for (off_t p = d / (off_t)ps * (off_t)ps; p < h; p += (off_t)ps) {
			uint64_t rel = (uint64_t)p - from.data_off;
			uint64_t page = rel % from.copy_step / from.page_step;
			int c = (int)(rel / from.copy_step);
			if (from.copy_step < from.page_step) {	// side by side
				page = rel / from.page_step;
				c = (int)(rel % from.page_step / from.copy_step);
			}
			REQUIRE(pool_layout_copy_off(&from, page, c) == (uint64_t)p);
			REQUIRE(pread(in, buf.data(), ps, p) == (ssize_t)ps);
			off_t at = (off_t)pool_layout_copy_off(&to, page, c);
			REQUIRE(pwrite(out, buf.data(), ps, at) == (ssize_t)ps);
		}
		off = h;
	}
}

// Rewrite the current-format pool at path as format version 6, 5, 4, 3 or 2
// (see the top of the file).
void make_old_format(const std::string &path, uint32_t version)
{
	// What the log holds goes into the file first: an open with another
	// backend checkpoints it (a crashed pool stays crashed).
	{
		pool_open_options o = options(path);
		o.create = false;
		o.creator = nullptr;
		o.nvm = NVM_MSYNC;
		pool_close(open_or_fail(o));
	}
	std::vector<uint64_t> sums = version >= 3 && version <= 4 ? legacy_sums(path, version)
								   : std::vector<uint64_t>();
	pool_header h = read_header(path);
	REQUIRE(h.format_version == POOL_FORMAT_VERSION);
	pool_layout l;
	REQUIRE(pool_layout_of_header(&h, &l));
	pool_layout lv = pool_layout_of_version(version, h.npages, h.page_size);
	std::string old = path + ".v" + std::to_string(version);
	int in = open_or_die(path, O_RDONLY);
	int out = open_or_die(old, O_RDWR | O_CREAT | O_TRUNC);
	std::vector<unsigned char> head(h.page_size);
	REQUIRE(pread(in, head.data(), head.size(), 0) == (ssize_t)head.size());
	h.format_version = version;
	// No log before format 6; format 6's where format 7 has it.
	h.file_size = version == 6 ? l.file_size : lv.file_size;
	h.data_off = lv.data_off;
	REQUIRE(ftruncate(out, (off_t)h.file_size) == 0);
	copy_extents(in, (off_t)l.seq_off, out, (off_t)l.seq_off, (off_t)(l.sum_off - l.seq_off));
	copy_copies(in, l, out, lv, h.npages, h.page_size);
	if (version == 6)
		copy_extents(in, (off_t)l.log_off, out, (off_t)l.log_off, (off_t)l.log_size);
	if (version >= 5) {	// the same checksums as now
		copy_extents(in, (off_t)l.sum_off, out, (off_t)l.sum_off,
			     (off_t)(l.data_off - l.sum_off));
	} else if (version >= 3) {
		size_t len = (version == 3 ? 2 : sums.size()) * sizeof(uint64_t);
		REQUIRE(pwrite(out, sums.data(), len, (off_t)l.sum_off) == (ssize_t)len);
	} else {
		REQUIRE(lv.data_off == l.sum_off);	// version 2: no sum table
	}
	memcpy(head.data(), &h, sizeof(h));
	pool_reseal(head.data(), head.size());
	REQUIRE(pwrite(out, head.data(), head.size(), 0) == (ssize_t)head.size());
	close(in);
	close(out);
	REQUIRE(rename(old.c_str(), path.c_str()) == 0);
}

// What a crash mid-epoch leaves: page 0's other copy written by the epoch
// after VER_d (garbage here), not yet published.  The pool must be marked
// crashed already (a killed program's).
void add_torn_copy(const std::string &path)
{
	pool_header h = read_header(path);
	pool_layout l = pool_layout_of_version(h.format_version, h.npages, h.page_size);
	int fd = open_or_die(path, O_RDWR);
	ver_record rec[2];
	REQUIRE(pread(fd, rec, sizeof(rec[0]), POOL_REC_OFF(0)) == (ssize_t)sizeof(rec[0]));
	REQUIRE(pread(fd, rec + 1, sizeof(rec[1]), POOL_REC_OFF(1)) == (ssize_t)sizeof(rec[1]));
	int cur = pool_current_record(rec, h.uuid);
	REQUIRE(cur >= 0);
	REQUIRE(rec[cur].clean == 0);
	uint64_t ver_d = rec[cur].ver_d, seq[2];
	REQUIRE(pread(fd, seq, sizeof(seq), (off_t)l.seq_off) == (ssize_t)sizeof(seq));
	int valid = seq[1] > seq[0] && seq[1] <= ver_d ? 1 : 0;
	REQUIRE(seq[valid] != 0);
	REQUIRE(seq[valid] <= ver_d);
	seq[1 - valid] = ver_d + 1;
	REQUIRE(pwrite(fd, seq, sizeof(seq), (off_t)l.seq_off) == (ssize_t)sizeof(seq));
	std::vector<unsigned char> junk(h.page_size, 0xab);
	REQUIRE(pwrite(fd, junk.data(), junk.size(), (off_t)pool_layout_copy_off(&l, 0, 1 - valid)) ==
		(ssize_t)junk.size());
	close(fd);
}

// The consistent image as pmthreads-recover dump writes it.
std::string dump(const std::string &pool, const std::string &out)
{
	auto r = tool({ "dump", pool, out, "--force" });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	return subprocess::slurp(out);
}

std::string ver_d_of(const std::string &pool)
{
	auto r = tool({ "info", "--json", pool });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	size_t at = r.out.find("\"ver_d\":");
	REQUIRE(at != std::string::npos);
	return r.out.substr(at + 8, r.out.find_first_of(",}", at) - at - 8);
}

bool no_upgrade_leftovers(const scratch_dir &d)
{
	return access(d.file(".bank.pool.pmthreads-upgrading").c_str(), F_OK) != 0;
}

} // namespace

TEST_CASE("upgrade: a version-5, -4, -3 or -2 bank pool keeps its accounts", "[upgrade]")
{
	scratch_dir d;
	std::string pool = d.file("bank.pool");
	bool crash = GENERATE(false, true);
	uint32_t version = GENERATE(5u, 4u, 3u, 2u);
	INFO("format version " << version << (crash ? ", crashed pool" : ", clean pool"));
	make_bank_pool(pool, crash);
	std::string before = dump(pool, d.file("before.img"));
	std::string ver_d = ver_d_of(pool);
	make_old_format(pool, version);
	if (crash)
		add_torn_copy(pool);

	// The runtime refuses it, naming the upgrade.
	auto refused = bank(pool, { "--check" });
	INFO(refused.out << refused.err);
	CHECK(refused.status != 0);
	CHECK(contains(refused.err, "format version " + std::to_string(version) + ","));
	CHECK(contains(refused.err, "pmthreads-recover upgrade " + pool));

	REQUIRE(chmod(pool.c_str(), 0640) == 0);	// kept by the upgrade
	auto r = tool({ "upgrade", pool });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	struct stat st;
	REQUIRE(stat(pool.c_str(), &st) == 0);
	CHECK((st.st_mode & 07777) == 0640);
	CHECK(contains(r.out, "upgraded from format version " + std::to_string(version) + " to " +
				      std::to_string(POOL_FORMAT_VERSION)));
	CHECK(contains(r.out, "VER_d " + ver_d + " kept"));
	if (version >= 4)	// every page verified by its version's checksum
		CHECK(contains(r.out, "of the image verified"));
	else
		CHECK(contains(r.out, version == 2 ? "format version 2 has no checksums"
						   : "those were verified"));
	if (crash)	// the interrupted epoch's copy: a warning, and dropped
		CHECK(contains(r.out, "consistent (VER_d " + ver_d + ", 1 warning)"));
	CHECK(no_upgrade_leftovers(d));
	CHECK(read_header(pool).format_version == POOL_FORMAT_VERSION);

	auto check = tool({ "check", pool });
	INFO(check.out << check.err);
	CHECK(check.status == 0);
	CHECK(contains(check.out, "0 warnings"));
	CHECK(ver_d_of(pool) == ver_d);
	CHECK((dump(pool, d.file("after.img")) == before)); // (not printed: binary)

	auto found = bank(pool, { "--check" });
	INFO(found.out << found.err);
	CHECK(found.status == 0);
	CHECK(contains(found.out, "found the accounts"));
	CHECK(contains(found.out, crash ? "previous run crashed" : "previous run exited cleanly"));
	// And it runs on from there.
	auto more = bank(pool, { "-t", "2", "-s", "1", "-n", "64" });
	INFO(more.out << more.err);
	CHECK(more.status == 0);
	CHECK(contains(more.out, "found the accounts"));
	auto after = bank(pool, { "--check" });
	INFO(after.out << after.err);
	CHECK(after.status == 0);
	CHECK(tool({ "check", pool }).status == 0);

	// A second upgrade has nothing to do.
	auto again = tool({ "upgrade", pool });
	INFO(again.out << again.err);
	CHECK(again.status == 0);
	CHECK(contains(again.out, "nothing to do"));
}

TEST_CASE("format 6: the runtime runs a version-6 pool as it is, and upgrade makes it version 7",
	  "[upgrade]")
{
	scratch_dir d;
	std::string pool = d.file("bank.pool");
	bool crash = GENERATE(false, true);
	INFO((crash ? "crashed pool" : "clean pool"));
	make_bank_pool(pool, crash);
	std::string before = dump(pool, d.file("before.img"));
	make_old_format(pool, 6);
	if (crash)
		add_torn_copy(pool);
	// The copies side by side as format 6 had them: the same image.
	CHECK((dump(pool, d.file("v6.img")) == before));

	// The runtime finds the accounts and runs on in the same format.
	auto found = bank(pool, { "--check" });
	INFO(found.out << found.err);
	CHECK(found.status == 0);
	CHECK(contains(found.out, "found the accounts"));
	auto more = bank(pool, { "-t", "2", "-s", "1", "-n", "64" });
	INFO(more.out << more.err);
	CHECK(more.status == 0);
	CHECK(read_header(pool).format_version == 6);
	auto check6 = tool({ "check", pool });
	INFO(check6.out << check6.err);
	CHECK(check6.status == 0);
	std::string ran = dump(pool, d.file("ran.img"));
	std::string ver_d = ver_d_of(pool);

	auto r = tool({ "upgrade", pool });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	CHECK(contains(r.out, "upgraded from format version 6 to 7"));
	CHECK(contains(r.out, "VER_d " + ver_d + " kept"));
	CHECK(read_header(pool).format_version == 7);
	CHECK(no_upgrade_leftovers(d));
	CHECK(tool({ "check", pool }).status == 0);
	CHECK((dump(pool, d.file("v7.img")) == ran));
	auto after = bank(pool, { "--check" });
	INFO(after.out << after.err);
	CHECK(after.status == 0);
	CHECK(contains(after.out, "found the accounts"));
}

TEST_CASE("upgrade: a corrupt version-3 pool is refused and left untouched", "[upgrade]")
{
	scratch_dir d;
	std::string pool = d.file("bank.pool");
	make_bank_pool(pool, false);
	make_old_format(pool, 3);
	pool_header h = read_header(pool);
	pool_layout l = pool_layout_of_version(3, h.npages, h.page_size);
	std::string expect;
	SECTION("page 0 (summed in version 3) changed")
	{
		// Page 0's valid copy: flip a byte of both copies, whichever it is.
		for (int c = 0; c < 2; c++)
			flip_file_byte(pool, (off_t)(pool_layout_copy_off(&l, 0, c) + 100), 0x40);
		expect = "fails its checksum";
	}
	SECTION("a seq entry beyond the next epoch")
	{
		uint64_t seq = 1ull << 40;
		patch_file(pool, (off_t)l.seq_off, &seq, sizeof(seq));
		expect = "beyond the next epoch";
	}
	file_snapshot snap = file_snapshot::of(pool);
	auto r = tool({ "upgrade", pool });
	INFO(r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.out + r.err, expect));
	CHECK(contains(r.out + r.err, "not upgraded"));
	CHECK(file_snapshot::of(pool).same_as(snap));
	CHECK(no_upgrade_leftovers(d));
}

TEST_CASE("upgrade: a version-4 pool with a damaged data page is refused and left untouched",
	  "[upgrade]")
{
	scratch_dir d;
	std::string pool = d.file("bank.pool");
	make_bank_pool(pool, false);
	// The last persisted page (account data, not summed by version 3): a
	// byte of its valid copy.
	struct pool *p = open_read_only(pool);
	uint64_t page = 0;
	int c = -1;
	for (uint64_t i = 1; i < p->seq_pages; i++)
		if (pool_valid_copy(p, i) >= 0) {
			page = i;
			c = pool_valid_copy(p, i);
		}
	pool_close(p);
	REQUIRE(c >= 0);
	make_old_format(pool, 4);
	pool_header h = read_header(pool);
	pool_layout l = pool_layout_of_version(4, h.npages, h.page_size);
	flip_file_byte(pool, (off_t)(pool_layout_copy_off(&l, page, c) + 700), 0x08);
	file_snapshot snap = file_snapshot::of(pool);
	auto r = tool({ "upgrade", pool });
	INFO(r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.out + r.err, "page " + std::to_string(page) + " "));
	CHECK(contains(r.out + r.err, "fails its checksum"));
	CHECK(contains(r.out + r.err, "not upgraded"));
	CHECK(file_snapshot::of(pool).same_as(snap));
	CHECK(no_upgrade_leftovers(d));
}

TEST_CASE("upgrade: a pool in use is refused", "[upgrade]")
{
	scratch_dir d;
	std::string pool = d.file("bank.pool");
	make_bank_pool(pool, false);
	make_old_format(pool, 3);
	// Hold it as a running process would: its exclusive lock.
	int fd = open_or_die(pool, O_RDWR);
	REQUIRE(pool_lock_fd(fd, false) == 0);
	file_snapshot snap = file_snapshot::of(pool);
	auto r = tool({ "upgrade", pool });
	INFO(r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.err, "in use"));
	CHECK(file_snapshot::of(pool).same_as(snap));
	close(fd);
	CHECK(no_upgrade_leftovers(d));
}

TEST_CASE("upgrade: killed after any step, the pool at its path opens", "[upgrade]")
{
	scratch_dir d;
	std::string pool = d.file("bank.pool");
	make_bank_pool(pool, false);
	std::string before = dump(pool, d.file("before.img"));
	make_old_format(pool, 3);
	copy_pool(pool, d.file("old.copy"));
	file_snapshot old = file_snapshot::of(pool);
	// Steps: 1 temporary file created, 2 header written, 3 space reserved,
	// 4 pages copied, 5 tables written, 6 synced, 7 renamed, 8 directory
	// synced.
	for (int step = 1; step <= 8; step++) {
		INFO("killed after step " << step);
		auto r = tool({ "upgrade", pool },
			      { { "PMTHREADS_RECOVER_UPGRADE_KILL_AT", std::to_string(step) } });
		INFO(r.out << r.err);
		REQUIRE(r.status == 128 + SIGKILL);
		CHECK(contains(r.err, "killed after step " + std::to_string(step)));
		if (step >= 7)
			CHECK((dump(pool, d.file("after.img")) == before)); // before the program runs
		auto opened = bank(pool, { "--check" });
		INFO(opened.out << opened.err);
		if (step < 7) {
			// The old pool, untouched: refused with the way out.
			CHECK(file_snapshot::of(pool).same_as(old));
			CHECK(opened.status != 0);
			CHECK(contains(opened.err, "pmthreads-recover upgrade"));
			continue;
		}
		// The new one, complete; the next upgrade has nothing to do.
		CHECK(opened.status == 0);
		CHECK(contains(opened.out, "found the accounts"));
		auto again = tool({ "upgrade", pool });
		CHECK(again.status == 0);
		CHECK(contains(again.out, "nothing to do"));
		CHECK(no_upgrade_leftovers(d));
		// Back to the old pool for the next step.
		copy_pool(d.file("old.copy"), pool);
		old = file_snapshot::of(pool);
	}
	// What the interrupted runs left beside it goes with the next upgrade.
	copy_pool(d.file("old.copy"), pool);
	REQUIRE(tool({ "upgrade", pool, }, { { "PMTHREADS_RECOVER_UPGRADE_KILL_AT", "3" } }).status ==
		128 + SIGKILL);
	CHECK_FALSE(no_upgrade_leftovers(d));
	auto r = tool({ "upgrade", pool });
	INFO(r.out << r.err);
	CHECK(r.status == 0);
	CHECK(no_upgrade_leftovers(d));
	CHECK((dump(pool, d.file("after.img")) == before)); // (not printed: binary)
}

TEST_CASE("upgrade: killed at random moments, the pool is the old one or the new one",
	  "[upgrade]")
{
	scratch_dir d;
	std::string pool = d.file("bank.pool");
	make_bank_pool(pool, false);
	std::string before = dump(pool, d.file("before.img"));
	make_old_format(pool, 2);
	copy_pool(pool, d.file("old.copy"));
	file_snapshot old = file_snapshot::of(pool);
	unsigned seed = (unsigned)time(nullptr);
	INFO("seed " << seed);
	srand(seed);
	int olds = 0, news = 0;
	for (int i = 0; i < 12; i++) {
		subprocess::spawned c = subprocess::spawn(
			{ env_path("PMTHREADS_RECOVER_TOOL"), "upgrade", pool }, {});
		usleep((useconds_t)(rand() % 15000));
		kill(c.pid, SIGKILL);
		close(c.out_fd);
		subprocess::run_result r;
		subprocess::finish(c, r);
		INFO("iteration " << i << ", status " << r.status << ": " << r.err);
		CHECK((r.status == 0 || r.status == 128 + SIGKILL));
		uint32_t v = read_header(pool).format_version;
		if (v != POOL_FORMAT_VERSION) {
			CHECK(file_snapshot::of(pool).same_as(old));
			olds++;
			continue;
		}
		news++;
		CHECK((dump(pool, d.file("after.img")) == before));
		CHECK(tool({ "check", pool }).status == 0);
		copy_pool(d.file("old.copy"), pool);
		old = file_snapshot::of(pool);
	}
	// Which it was depends on the machine's speed: both are right.
	WARN("killed " << olds << " times before the rename, " << news << " after");
	auto r = tool({ "upgrade", pool });
	CHECK(r.status == 0);
	CHECK(no_upgrade_leftovers(d));
	CHECK((dump(pool, d.file("after.img")) == before));
}
