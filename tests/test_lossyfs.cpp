/* SPDX-License-Identifier: BSD-3-Clause */
// Power loss and failing msyncs on the msync path (issue 22), on lossyfs
// (tests/lossyfs.c): a FUSE file system that keeps unsynced writes in memory
// and loses them when it is unmounted, fails an fsync on command, or tears
// the unsynced writes.  Its unmount is the power cut.  Also: atomic pool
// creation where O_TMPFILE does not exist (FUSE), and the warning for a file
// system that cannot keep a pool sparse.
#include "lossyfs_mount.hpp"
#include "pool_test_util.h"
#include "subprocess.hpp"

#include <algorithm>
#include <cerrno>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <sys/mman.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

namespace {

using lossyfs::mount_point;

struct mounted {
	subprocess::scratch_dir dir;
	mount_point m;
	std::string options;
	explicit mounted(const std::string &extra = "") : options(extra)
	{
		m = lossyfs::make(subprocess::env_or_fail("PMT_LOSSYFS"), dir.path);
		INFO(subprocess::slurp(m.log));
		REQUIRE(m.start(extra));
	}
	std::string ctl() const { return m.mnt + "/.lossyfs-ctl"; }
	void command(const std::string &c) const
	{
		std::ofstream f(ctl());
		f << c;
		f.close();
		REQUIRE(f.good());
	}
	// Power cut, then power back.
	void power_cycle()
	{
		m.stop();
		REQUIRE(m.start(options));
	}
};

std::map<std::string, std::string> pool_env(const std::string &pool,
					    const std::string &nvm = "msync")
{
	return { { "PMTHREADS_POOL", pool },
		 { "PMTHREADS_POOL_SIZE", "16M" },
		 { "PMTHREADS_NVM", nvm } };
}

size_t count(const std::string &s, const std::string &what)
{
	size_t n = 0;
	for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
		n++;
	return n;
}

// "counter N" from ackcount verify.
uint64_t verify_counter(const std::string &pool, const std::string &nvm = "msync")
{
	auto r = subprocess::run({ subprocess::env_or_fail("PMT_ACKCOUNT"), "verify" },
				 pool_env(pool, nvm));
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	REQUIRE(r.out.rfind("counter ", 0) == 0);
	return strtoull(r.out.c_str() + 8, nullptr, 10);
}

// The last durable epoch pmthreads-recover check reports.
uint64_t checked_epoch(const std::string &pool)
{
	auto r = subprocess::run({ subprocess::env_or_fail("PMTHREADS_RECOVER_TOOL"), "check", pool },
				 {});
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	size_t at = r.out.find("last durable epoch ");
	REQUIRE(at != std::string::npos);
	return strtoull(r.out.c_str() + at + 19, nullptr, 10);
}

// The unsynced bytes lossyfs holds now (its control file).
uint64_t unsynced_bytes(const std::string &ctl)
{
	std::string s = subprocess::slurp(ctl);
	size_t at = s.find("unsynced ");
	return at == std::string::npos ? 0 : strtoull(s.c_str() + at + 9, nullptr, 10);
}

// Whether the last power cut in lossyfs's log lost (or tore) any data.
bool last_cut_lost(const std::string &log)
{
	std::string s = subprocess::slurp(log);
	size_t at = s.rfind("power cut: ");
	return at != std::string::npos && strtoull(s.c_str() + at + 11, nullptr, 10) > 0;
}

struct ack_log {
	std::vector<std::pair<uint64_t, uint64_t>> acked;	// round, durable
	std::vector<std::pair<uint64_t, uint64_t>> failed;	// round, durable
	std::vector<int> errnos;
};

ack_log parse(const std::string &out)
{
	ack_log l;
	std::istringstream in(out);
	std::string w;
	while (in >> w) {
		if (w == "acked") {
			uint64_t r, d;
			in >> r >> d;
			l.acked.emplace_back(r, d);
		} else if (w == "syncfail") {
			int e;
			uint64_t r, d;
			in >> e >> r >> d;
			l.errnos.push_back(e);
			l.failed.emplace_back(r, d);
		}
	}
	return l;
}

} // namespace

TEST_CASE("a failed msync is never acknowledged", "[lossyfs]")
{
	const bool strict = GENERATE(false, true);
	const int err = GENERATE(EIO, ENOSPC);
	INFO((strict ? "PMTHREADS_STRICT=1" : "default") << ", msync fails with " << strerror(err));
	mounted fs;
	std::string pool = fs.m.mnt + "/ack.pool";
	std::string stats = fs.dir.path + "/stats.json";
	auto env = pool_env(pool);
	env["PMTHREADS_INTERVAL_MS"] = "100000";	// only the syncs persist
	env["PMTHREADS_STATS"] = stats;
	if (strict)
		env["PMTHREADS_STRICT"] = "1";
	// The sync of round 6 meets the failing msync.
	auto r = subprocess::run({ subprocess::env_or_fail("PMT_ACKCOUNT"), "run", "12", "1", fs.ctl(),
				   "6", std::to_string(err) },
				 env);
	INFO(r.describe());
	ack_log l = parse(r.out);
	REQUIRE(l.acked.size() == 5);
	const uint64_t last_acked = l.acked.back().second;
	CHECK(count(r.err, "WITHOUT persistence") == 1);
	CHECK(count(r.err, strerror(err)) >= 1);
	CHECK(subprocess::json_number(subprocess::slurp(stats), "io_error") == err);
	if (strict) {
		CHECK(r.status == 1);
		CHECK(l.failed.empty());
	} else {
		CHECK(r.exited_ok());
		REQUIRE(l.failed.size() == 7);
		for (size_t i = 0; i < l.failed.size(); i++) {
			CHECK(l.errnos[i] == err);
			CHECK(l.failed[i].second == last_acked);
		}
	}

	// What the page cache still shows, and then what survived a power cut.
	fs.power_cycle();
	CHECK(checked_epoch(pool) == last_acked);
	CHECK(verify_counter(pool) == 5);
}

// After the error the pool is not trusted (nothing becomes durable again),
// so a quiescent point would pause the program for nothing: there is none.
// The program goes on, unpersisted, with its memory intact.
TEST_CASE("after a failed write-back the program is never paused again", "[lossyfs]")
{
	mounted fs;
	std::string pool = fs.m.mnt + "/pause.pool";
	std::string log = fs.dir.path + "/epochs.csv";
	auto env = pool_env(pool);
	env["PMTHREADS_INTERVAL_MS"] = "5";
	env["PMTHREADS_EPOCH_LOG"] = log;
	// 12 rounds, the sync of round 6 fails; then 500 ms more rounds.
	auto r = subprocess::run({ subprocess::env_or_fail("PMT_ACKCOUNT"), "run", "12", "1", fs.ctl(),
				   "6", std::to_string(EIO), "500" },
				 env);
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	ack_log l = parse(r.out);
	REQUIRE(l.failed.size() == 7);
	const uint64_t stuck = l.failed.front().second;
	CHECK(count(r.err, "WITHOUT persistence") == 1);
	// FUSE has no fallocate: said once, before it matters.
	CHECK(count(r.err, "cannot reserve disk space") == 1);
	size_t ran = r.out.find("ran ");
	REQUIRE(ran != std::string::npos);
	CHECK(strtoull(r.out.c_str() + ran + 4, nullptr, 10) > 12);

	// Every quiescent point from the one that made `stuck` durable on
	// names it: that one, the empty ones before round 6's write-back, the
	// failed one.  Paused every 5 ms, the 500 ms would add about 100.
	std::istringstream csv(subprocess::slurp(log));
	std::string line;
	std::getline(csv, line);	// the header
	size_t at_stuck = 0, total = 0;
	while (std::getline(csv, line)) {
		total++;
		size_t comma = line.find(',');
		if (comma != std::string::npos &&
		    strtoull(line.c_str() + comma + 1, nullptr, 10) == stuck)
			at_stuck++;
	}
	INFO(total << " quiescent points, " << at_stuck << " at epoch " << stuck);
	CHECK(at_stuck >= 2);
	CHECK(at_stuck <= 10);

	fs.power_cycle();
	CHECK(checked_epoch(pool) == stuck);
}

// Both backends of an ordinary file: msync, and the redo log (whose ring
// and head the cut tears as well).  PMT_LOSSYFS_CUTS sets the number of cuts
// per backend (4 by default; the README's soak runs 200).
TEST_CASE("power loss keeps every acknowledged round", "[lossyfs]")
{
	std::string nvm = GENERATE(std::string("msync"), std::string("log"));
	INFO("PMTHREADS_NVM=" << nvm);
	const char *cuts_env = getenv("PMT_LOSSYFS_CUTS");
	const int cuts = cuts_env != nullptr ? atoi(cuts_env) : 4;
	mounted fs;
	std::string pool = fs.m.mnt + "/cut.pool";
	auto env = pool_env(pool, nvm);
	env["PMTHREADS_INTERVAL_MS"] = "5";
	uint64_t floor = 0;
	int cuts_losing_data = 0;
	for (int cut = 0; cut < cuts; cut++) {
		INFO("power cut " << cut << (cut % 2 ? " (torn writes)" : " (unsynced writes lost)"));
		std::string out = fs.dir.path + "/out" + std::to_string(cut);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
			dup2(fd, 1);
			unsetenv("PMTHREADS_RECOVER_TOOL");	// not a runtime variable
			for (auto &kv : env)
				setenv(kv.first.c_str(), kv.second.c_str(), 1);
			std::string exe = subprocess::env_or_fail("PMT_ACKCOUNT");
			execl(exe.c_str(), exe.c_str(), "run", "100000000", "7", (char *)nullptr);
			_exit(127);
		}
		// Until a few rounds were acknowledged, then in mid-flight: while
		// lossyfs holds written-back pages of an epoch not yet synced.
		for (int i = 0; i < 1000 && count(subprocess::slurp(out), "acked") < 3; i++)
			usleep(10000);
		for (int i = 0; i < 2000 && unsynced_bytes(fs.ctl()) == 0; i++)
			usleep(1000);
		kill(pid, SIGKILL);
		int st = 0;
		waitpid(pid, &st, 0);
		ack_log l = parse(subprocess::slurp(out));
		INFO(subprocess::slurp(out).substr(0, 400));
		REQUIRE(l.acked.size() >= 3);
		CHECK(l.failed.empty());
		if (cut % 2 == 1)
			fs.command("tear " + std::to_string(1000 + cut));
		fs.power_cycle();
		if (last_cut_lost(fs.m.log))
			cuts_losing_data++;
		uint64_t epoch = checked_epoch(pool);
		CHECK(epoch >= l.acked.back().second);
		uint64_t c = verify_counter(pool, nvm);
		CHECK(c >= l.acked.back().first);
		CHECK(c >= floor);
		floor = c;
	}
	// Each cut was aimed at an epoch in flight; the test means something
	// only when some of them did cut one.
	CHECK(cuts_losing_data >= 1);
}

TEST_CASE("a pool is created atomically where O_TMPFILE is missing", "[lossyfs]")
{
	mounted fs;
	std::string path = fs.m.mnt + "/new.pool";
	std::string leftover = fs.m.mnt + "/.new.pool.pmthreads-creating";
	// What a creation killed half-way leaves: not at the pool's name.
	pooltest::write_file(leftover, "half a pool", 11);
	auto o = pooltest::options(path);
	pool *p = pooltest::open_or_fail(o);
	CHECK(p->created);
	CHECK(access(leftover.c_str(), F_OK) != 0);
	CHECK(access((fs.m.backing + "/new.pool").c_str(), F_OK) == 0);
	pool_close(p);

	// A header written in place whose magic never came (the in-place
	// format of an empty file, cut short) is an unfinished creation ...
	std::string inplace = fs.m.mnt + "/inplace.pool";
	auto oi = pooltest::options(inplace);
	p = pooltest::open_or_fail(oi);
	pool_close(p);
	const unsigned char zero[8] = {};
	pooltest::patch_file(inplace, 0, zero, 8);
	auto ro = oi;
	ro.read_only = true;
	ro.create = false;
	pool *r = nullptr;
	CHECK(pool_open(&r, &ro) != 0);	// the tools only say what it is
	CHECK(std::string(err_get()).find("creation was interrupted") != std::string::npos);
	p = pooltest::open_or_fail(oi);
	CHECK(p->created);
	// ... but not once the pool was used: that is refused, untouched.
	CHECK(pool_set_clean(p, false) == 0);
	pool_close(p);
	pooltest::patch_file(inplace, 0, zero, 8);
	auto before = pooltest::file_snapshot::of(inplace);
	pool *q = nullptr;
	CHECK(pool_open(&q, &oi) != 0);
	CHECK(pooltest::file_snapshot::of(inplace).same_as(before));
}

// The names in dir, sorted (. and .. left out).
std::vector<std::string> names_in(const std::string &dir)
{
	std::vector<std::string> names;
	DIR *d = opendir(dir.c_str());
	if (d == nullptr)
		return names;
	for (struct dirent *e; (e = readdir(d)) != nullptr;)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			names.push_back(e->d_name);
	closedir(d);
	std::sort(names.begin(), names.end());
	return names;
}

// Issue 46 item 4: where rename cannot refuse to replace (sshfs, LazyFS and
// other FUSE servers: lossyfs --no-rename-flags), the new pool was linked at
// its name and the temporary name unlinked while the file was open, which a
// FUSE file system keeps as .fuse_hiddenN for as long as the pool is open
// (and for good if the file system goes first); where the server reports its
// own inode numbers (sshfs by default), the link even had another one, and
// the open refused the pool as replaced while being opened.  Now the file is
// closed before its temporary name goes, and opened again at its name:
// nothing else is in the directory while the pool is open, nor after.
TEST_CASE("a pool created where rename cannot refuse to replace leaves nothing beside it",
	  "[lossyfs]")
{
	for (const char *opts : { "--no-rename-flags --inode-numbers", "--no-rename-flags" }) {
		INFO("lossyfs " << opts);
		mounted fs(opts);
		const std::vector<std::string> just_it = { "new.pool" };
		std::string path = fs.m.mnt + "/new.pool";
		auto o = pooltest::options(path);
		pool *p = nullptr;
		if (pool_open(&p, &o) != 0) {
			FAIL_CHECK(err_get());
			continue;
		}
		CHECK(p->created);
		CHECK(names_in(fs.m.backing) == just_it);
		CHECK(pool_set_clean(p, false) == 0);
		pool_close(p);
		CHECK(names_in(fs.m.backing) == just_it);
		o.create = false;
		p = pooltest::open_or_fail(o);
		CHECK_FALSE(p->created);
		pool_close(p);
		// The tool creates its pools the same way.
		auto r = subprocess::run({ subprocess::env_or_fail("PMTHREADS_RECOVER_TOOL"), "create",
					   fs.m.mnt + "/tool.pool", "--size", "16M" },
					 {});
		INFO(r.describe());
		CHECK(r.exited_ok());
		CHECK(names_in(fs.m.backing) == std::vector<std::string>{ "new.pool", "tool.pool" });
	}
}

TEST_CASE("a file system without sparse files is named before a pool is sized", "[lossyfs]")
{
	mounted fs("--no-holes");
	std::string pool = fs.m.mnt + "/full.pool";
	auto r = subprocess::run({ subprocess::env_or_fail("PMTHREADS_RECOVER_TOOL"), "create", pool,
				   "--size", "40M" },
				 {});
	INFO(r.describe());
	CHECK(r.exited_ok());
	CHECK(count(r.err, "cannot hold a sparse file") == 1);

	mounted sparse;
	std::string pool2 = sparse.m.mnt + "/holes.pool";
	auto r2 = subprocess::run({ subprocess::env_or_fail("PMTHREADS_RECOVER_TOOL"), "create", pool2,
				    "--size", "40M" },
				  {});
	INFO(r2.describe());
	CHECK(r2.exited_ok());
	CHECK(count(r2.err, "cannot hold a sparse file") == 0);
}

TEST_CASE("concurrent creators of one pool where O_TMPFILE is missing", "[lossyfs]")
{
	// Also where rename cannot refuse to replace: the pool is linked at
	// its name, and the temporary name goes once the file is closed.
	for (const char *opts : { "", "--no-rename-flags --inode-numbers" }) {
	INFO("lossyfs " << opts);
	mounted fs(opts);
	std::string path = fs.m.mnt + "/race.pool";
	const int kids = 4;
	std::vector<pid_t> pids;
	for (int k = 0; k < kids; k++) {
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			auto o = pooltest::options(path);
			pool *p = nullptr;
			if (pool_open(&p, &o) != 0) {
				bool busy = strstr(err_get(), "in use") != nullptr ||
					    strstr(err_get(), "locked") != nullptr;
				if (!busy)
					fprintf(stderr, "creator %d: %s\n", k, err_get());
				_exit(busy ? 12 : 1);
			}
			bool created = p->created;
			usleep(100000);	// holds it while the others try
			pool_close(p);
			_exit(created ? 10 : 11);
		}
		pids.push_back(pid);
	}
	int created = 0;
	for (pid_t pid : pids) {
		int st = 0;
		REQUIRE(waitpid(pid, &st, 0) == pid);
		REQUIRE(WIFEXITED(st));
		INFO("exit " << WEXITSTATUS(st));
		CHECK((WEXITSTATUS(st) == 10 || WEXITSTATUS(st) == 11 || WEXITSTATUS(st) == 12));
		created += WEXITSTATUS(st) == 10;
	}
	CHECK(created == 1);
	CHECK(access((fs.m.mnt + "/.race.pool.pmthreads-creating").c_str(), F_OK) != 0);
	CHECK(names_in(fs.m.backing) == std::vector<std::string>{ "race.pool" });
	auto o = pooltest::options(path);
	o.create = false;
	pool *p = pooltest::open_or_fail(o);
	pool_close(p);
	}
}

// Issue 39: an I/O error at any step of an epoch -- the k-th fsync or the
// k-th write (a pwrite of the log backend, a page written back for an msync)
// from epoch 3 on failing, for every k that epochs 3 to 5 and the close take
// (counted from lossyfs's counters in a clean run, never hard-coded), on
// both backends of an ordinary file -- leaves the last acknowledged epoch
// openable, both by the next run of the same boot and after a power cut.
// The next run redoes the failed epoch's writes (a program recomputing the
// same state): those bytes may have been in the page cache, not on the
// device, so a write-back that trusted the cache would write none of them,
// record their checksum, and lose the epoch it acknowledged to a refusal
// after the cut.
namespace {

constexpr uint64_t kPages = 8;

const char *nvm_label(nvm_kind k) { return k == NVM_LOG ? "log" : "msync"; }

void fill_epoch(pooltest::shadow_buf &sh, unsigned e) { memset(sh.mem, (int)e, sh.len); }

bool all_of(const pooltest::shadow_buf &sh, unsigned char b)
{
	for (size_t i = 0; i < sh.len; i++)
		if (sh.mem[i] != b)
			return false;
	return true;
}

std::vector<uint64_t> all_pages()
{
	std::vector<uint64_t> pages(kPages);
	for (uint64_t i = 0; i < kPages; i++)
		pages[i] = i;
	return pages;
}

// lossyfs's counters (its control file): the I/O steps taken so far.
struct io_steps {
	uint64_t fsyncs = 0, writes = 0, failed = 0;	// failed: fsyncs and writes
	io_steps operator-(const io_steps &o) const
	{
		return { fsyncs - o.fsyncs, writes - o.writes, failed - o.failed };
	}
};

io_steps io_now(const mounted &fs)
{
	const std::string s = "\n" + subprocess::slurp(fs.ctl());
	auto field = [&](const std::string &name) {
		size_t at = s.find("\n" + name + " ");
		INFO(s);
		REQUIRE(at != std::string::npos);
		return strtoull(s.c_str() + at + name.size() + 2, nullptr, 10);
	};
	return { field("fsyncs"), field("writes"), field("failed") + field("failed-writes") };
}

// The I/O step that fails: the k-th fsync or the k-th write from now (EIO).
struct io_fault {
	bool write;
	uint64_t k;
	std::string command() const
	{
		return std::string(write ? "fail-write-nth " : "fail-fsync-nth ") + std::to_string(k) +
		       " " + std::to_string(EIO);
	}
};

std::ostream &operator<<(std::ostream &os, const io_fault &f)
{
	return os << "the " << f.k << "-th " << (f.write ? "write" : "fsync") << " fails (EIO)";
}

// Every fault of the steps counted: each fsync, each write.
std::vector<io_fault> every_step(const io_steps &steps)
{
	std::vector<io_fault> v;
	for (uint64_t k = 1; k <= steps.fsyncs; k++)
		v.push_back({ false, k });
	for (uint64_t k = 1; k <= steps.writes; k++)
		v.push_back({ true, k });
	return v;
}

pool_open_options step_options(const std::string &path, nvm_kind kind)
{
	auto o = pooltest::options(path, kPages);
	o.nvm = kind;
	return o;
}

// Open path, check its VER_d is want and its image all want (every page
// verified against its checksum); then optionally persist epoch redo and
// close.
void open_expect(const std::string &path, nvm_kind kind, uint64_t want, unsigned redo)
{
	auto o = step_options(path, kind);
	o.create = false;
	pool *p = pooltest::open_or_fail(o);
	CHECK(*p->ver_d == want);
	pooltest::shadow_buf sh(kPages * pooltest::page_size());
	uint64_t got = recovery_restore_image(p, sh.mem);
	INFO(err_get());
	REQUIRE(got != RECOVERY_REFUSED);
	CHECK(all_of(sh, (unsigned char)want));
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	if (redo != 0) {
		std::vector<uint64_t> pages = all_pages();
		fill_epoch(sh, redo);
		CHECK(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == 0);
		CHECK(*p->ver_d == want + 1);
	}
	pool_close(p);
}

struct step_run {
	uint64_t acked;	// the last epoch persist_epoch acknowledged
	int error;	// the first it returned (0: none)
	io_steps used;	// from the fault's command on, the close included
};

// Epochs 1 and 2; then the fault (none: a clean run, to count the steps);
// epochs 3 to 5; the close (the log backend checkpoints there).
step_run run_epochs(const mounted &fs, const std::string &path, nvm_kind kind, const io_fault *f)
{
	auto o = step_options(path, kind);
	pool *p = pooltest::open_or_fail(o);
	pooltest::shadow_buf sh(kPages * pooltest::page_size());
	std::vector<uint64_t> pages = all_pages();
	for (unsigned e = 1; e <= 2; e++) {
		fill_epoch(sh, e);
		REQUIRE(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == 0);
	}
	const io_steps from = io_now(fs);
	if (f != nullptr)
		fs.command(f->command());
	step_run r{ *p->ver_d, 0, {} };
	for (unsigned e = 3; e <= 5; e++) {
		fill_epoch(sh, e);
		int rc = persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr);
		if (rc == 0)
			r.acked = *p->ver_d;
		else if (r.error == 0)
			r.error = rc;
	}
	pool_close(p);
	r.used = io_now(fs) - from;
	return r;
}

} // namespace

TEST_CASE("an fsync or a write failing at any step of an epoch keeps the acknowledged one openable",
	  "[lossyfs][iofail]")
{
	const nvm_kind kind = GENERATE(NVM_MSYNC, NVM_LOG);
	INFO("PMTHREADS_NVM=" << nvm_label(kind));
	io_steps steps;
	{
		mounted fs;
		std::string path = fs.m.mnt + "/steps.pool";
		step_run clean = run_epochs(fs, path, kind, nullptr);
		REQUIRE(clean.error == 0);
		REQUIRE(clean.acked == 5);
		REQUIRE(clean.used.failed == 0);
		steps = clean.used;
	}
	INFO("epochs 3 to 5 and the close: " << steps.fsyncs << " fsyncs, " << steps.writes << " writes");
	// Both kinds of step exist on both backends: the sweep is never empty.
	REQUIRE(steps.fsyncs > 0);
	REQUIRE(steps.writes > 0);
	unsigned i = 0;
	for (const io_fault &f : every_step(steps)) {
		// The power cut: after the next run (its unsynced writes lost,
		// or torn), or right after the failing run (torn).
		const unsigned cut = i++ % 3;
		INFO(f << ", power cut " << (cut == 2 ? "torn, before the next run"
					   : cut == 1 ? "torn, after the next run" : "after the next run"));
		mounted fs;
		std::string path = fs.m.mnt + "/steps.pool";
		step_run r = run_epochs(fs, path, kind, &f);
		// The step was there, and it failed.
		REQUIRE(r.used.failed == 1);
		if (r.acked < 5)
			CHECK(r.error == EIO);
		if (cut == 2) {
			fs.command("tear " + std::to_string(100 + i));
			fs.power_cycle();
		}
		// The next run of the same boot: the acknowledged epoch, and the
		// failed one redone ...
		open_expect(path, kind, r.acked, (unsigned)r.acked + 1);
		if (cut == 1)
			fs.command("tear " + std::to_string(100 + i));
		// ... which survives a power cut, every page verified.
		fs.power_cycle();
		open_expect(path, kind, r.acked + 1, 0);
	}
}

// Issue 39 item 4: the kernel's page cache after a failed fsync.  lossyfs
// drops a file's unsynced writes when an fsync fails, but the kernel keeps the
// pages it wrote back, marked clean, as ext4 does: the next run of the same
// boot reads them, or -- once memory pressure evicted some -- the device's
// older bytes beside the kept ones, a mixture no power cut leaves (seq and sum
// tables, data and version records of different ages).  FUSE hides this by
// dropping the cache at each open; lossyfs --keep-cache keeps it as a local
// file system does, and the test evicts what it chooses: a pool file no one
// maps with posix_fadvise(POSIX_FADV_DONTNEED), the mapping of a run still
// under way with madvise(MADV_PAGEOUT) (a clean page of a shared mapping
// leaves the cache; a private one's unwritten pages are the file's).
namespace {

enum class evict { none, all, half };

const char *evict_label(evict e)
{
	return e == evict::none ? "none" : e == evict::all ? "all" : "a pseudo-random half";
}

// Whether page k is chosen (all, none, or from seed).
struct page_choice {
	evict how;
	uint64_t rng;
	bool next()
	{
		if (how != evict::half)
			return how == evict::all;
		uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		return ((z ^ (z >> 31)) & 1) != 0;
	}
};

// The pages of a file no one maps leave the page cache (clean ones: after a
// failed fsync the kernel marks what it wrote back clean).
void evict_file(const std::string &path, evict how, uint64_t seed)
{
	if (how == evict::none)
		return;
	int fd = open(path.c_str(), O_RDONLY);
	REQUIRE(fd >= 0);
	struct stat st;
	REQUIRE(fstat(fd, &st) == 0);
	const off_t ps = (off_t)pooltest::page_size();
	page_choice c{ how, seed };
	for (off_t off = 0; off < st.st_size; off += ps)
		if (c.next())
			CHECK(posix_fadvise(fd, off, ps, POSIX_FADV_DONTNEED) == 0);
	close(fd);
}

// The same for the pool's own mapping while the run goes on.
void evict_mapping(const pool *p, evict how, uint64_t seed)
{
	if (how == evict::none)
		return;
	const size_t ps = pooltest::page_size();
	unsigned char *base = static_cast<unsigned char *>(p->nvm->base);
	page_choice c{ how, seed };
	for (size_t off = 0; off < p->nvm->len; off += ps)
		if (c.next())
			CHECK(madvise(base + off, ps, MADV_PAGEOUT) == 0);
}

// run_epochs as the runtime runs them (runtime.c): the pool marked unclean at
// the start and clean at an exit with no error; its mapping evicted (how)
// right after the first epoch that failed, and after each later one.
step_run run_epochs_evicting(const mounted &fs, const std::string &path, nvm_kind kind,
			     const io_fault &f, evict how, uint64_t seed)
{
	auto o = step_options(path, kind);
	pool *p = pooltest::open_or_fail(o);
	REQUIRE(pool_set_clean(p, false) == 0);
	pooltest::shadow_buf sh(kPages * pooltest::page_size());
	std::vector<uint64_t> pages = all_pages();
	for (unsigned e = 1; e <= 2; e++) {
		fill_epoch(sh, e);
		REQUIRE(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == 0);
	}
	const io_steps from = io_now(fs);
	fs.command(f.command());
	step_run r{ *p->ver_d, 0, {} };
	for (unsigned e = 3; e <= 5; e++) {
		fill_epoch(sh, e);
		int rc = persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr);
		if (rc == 0)
			r.acked = *p->ver_d;
		else if (r.error == 0)
			r.error = rc;
		if (r.error == 0)
			continue;
		evict_mapping(p, how, seed + e);
		// What lazy restore would read of msync's shared mapping now,
		// evicted pages read back from the device: the acknowledged
		// image, every page verified.  (The log backend's private mapping
		// keeps what the failed epoch rewrote in place -- its undo is not
		// run after an error -- which no restore reads: the program wrote
		// those pages, so they were restored before.)
		if (kind != NVM_MSYNC)
			continue;
		pooltest::shadow_buf img(kPages * pooltest::page_size());
		if (recovery_copy_image(p, img.mem) == RECOVERY_REFUSED)
			FAIL_CHECK("after the error, epoch " << e << ": the image is refused: " << err_get());
		else
			CHECK(all_of(img, (unsigned char)r.acked));
	}
	if (r.error == 0)
		r.error = pool_set_clean(p, true);
	pool_close(p);
	r.used = io_now(fs) - from;
	return r;
}

// open_expect as the runtime opens: the pool marked unclean before the
// image is read, and clean again at the end.
void open_expect_as_runtime(const std::string &path, nvm_kind kind, uint64_t want, unsigned redo)
{
	auto o = step_options(path, kind);
	o.create = false;
	pool *p = pooltest::open_or_fail(o);
	CHECK(*p->ver_d == want);
	(void)persist_invalidate_torn(p);
	CHECK(pool_set_clean(p, false) == 0);
	pooltest::shadow_buf sh(kPages * pooltest::page_size());
	if (recovery_restore_image(p, sh.mem) == RECOVERY_REFUSED) {
		// Every step that fails is listed, not only the first.
		FAIL_CHECK("the image is refused: " << err_get());
		pool_abandon(p);
		return;
	}
	CHECK(all_of(sh, (unsigned char)want));
	CHECK(pool_check(p, nullptr, nullptr) == 0);
	if (redo != 0) {
		std::vector<uint64_t> pages = all_pages();
		fill_epoch(sh, redo);
		CHECK(persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) == 0);
		CHECK(*p->ver_d == want + 1);
	}
	CHECK(pool_set_clean(p, true) == 0);
	pool_close(p);
}

} // namespace

TEST_CASE("the page cache a failed fsync or write leaves, kept or evicted, never loses the acknowledged epoch",
	  "[lossyfs][iofail]")
{
	const nvm_kind kind = GENERATE(NVM_MSYNC, NVM_LOG);
	INFO("PMTHREADS_NVM=" << nvm_label(kind) << ", lossyfs --keep-cache");
	io_steps steps;
	{
		mounted fs("--keep-cache");
		std::string path = fs.m.mnt + "/evict.pool";
		step_run clean = run_epochs(fs, path, kind, nullptr);
		REQUIRE(clean.error == 0);
		REQUIRE(clean.acked == 5);
		REQUIRE(clean.used.failed == 0);
		steps = clean.used;
	}
	INFO("epochs 3 to 5 and the close: " << steps.fsyncs << " fsyncs, " << steps.writes << " writes");
	REQUIRE(steps.fsyncs > 0);
	REQUIRE(steps.writes > 0);
	// Each step three times: the cache kept whole (ext4 without memory
	// pressure); evicted whole between the runs, half of the mapping
	// during the failed run; half between the runs, all of the mapping
	// during it.
	const std::pair<evict, evict> rounds[] = { { evict::none, evict::none },
						   { evict::half, evict::all },
						   { evict::all, evict::half } };
	uint64_t seed = 0;
	for (const io_fault &f : every_step(steps)) {
		for (const auto &rd : rounds) {
			const evict during = rd.first, between = rd.second;
			seed += 1000;
			INFO(f << "; evicted during the failed run: " << evict_label(during)
			       << ", between the runs: " << evict_label(between) << " (seed " << seed
			       << ")");
			mounted fs("--keep-cache");
			std::string path = fs.m.mnt + "/evict.pool";
			step_run r = run_epochs_evicting(fs, path, kind, f, during, seed);
			REQUIRE(r.used.failed == 1);
			if (r.acked < 5)
				CHECK(r.error == EIO);
			evict_file(path, between, seed);
			// The next run of the same boot: the acknowledged epoch,
			// every page verified, and the failed one redone ...
			open_expect_as_runtime(path, kind, r.acked, (unsigned)r.acked + 1);
			// ... which survives a power cut.
			fs.power_cycle();
			open_expect_as_runtime(path, kind, r.acked + 1, 0);
		}
	}
}

// Issue 39: the open of a pool a crashed run left -- the log backend's
// replay and the checkpoint it defers to the acceptance, the invalidation of
// the torn copies, the clean flag -- with its k-th fsync or k-th write
// failing, for every k the open takes (counted in a clean open of the same
// pool).  The open either succeeds with the acknowledged image or fails with
// the I/O error; either way it writes nothing that makes the pool worse: the
// next open of the same boot, and the open after a power cut, give the
// acknowledged epoch with every page verified.
namespace {

// A run that crashes: epochs from to to acknowledged (the log backend's in
// its log only: the ring stays under half full, no checkpoint), then an
// attempt at the next epoch written and not published (its working copies
// torn), and no close.
void run_and_crash(const std::string &path, nvm_kind kind, unsigned from, unsigned to)
{
	int st = pooltest::in_child([&] {
		auto o = step_options(path, kind);
		pool *p = nullptr;
		if (pool_open(&p, &o) != 0)
			_exit(2);
		pooltest::shadow_buf sh(kPages * pooltest::page_size());
		std::vector<uint64_t> pages = all_pages();
		for (unsigned e = from; e <= to; e++) {
			fill_epoch(sh, e);
			if (persist_epoch(p, sh.mem, pages.data(), pages.size(), nullptr) != 0)
				_exit(3);
		}
		fill_epoch(sh, to + 1);
		persist_attempt a;
		persist_attempt_begin(&a, p, pages.data(), pages.size());
		persist_source src = { [](void *c, size_t, uint64_t page) -> const void * {
					       return static_cast<const unsigned char *>(c) +
						      page * pooltest::page_size();
				       },
				       [](void *, size_t, size_t) {}, sh.mem };
		persist_attempt_write(&a, &src, pages.data(), pages.size());
		if (persist_attempt_end(&a, false, nullptr) != 0)
			_exit(4);
		_exit(0);	// the crash: no close
	});
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
}

struct open_result {
	bool opened = false;	// pool_open succeeded
	int error = 0;		// pool_accept's, the invalidation's or the clean flag's
	std::string message;	// pool_open's err_get() when it failed
	uint64_t ver = 0;
	uint64_t replayed = 0;	// log records the open replayed
	uint64_t checkpoints = 0;	// log checkpoints it wrote
	uint64_t torn = 0;	// copies it invalidated
};

// The open as the runtime makes it (runtime.c): pool_open deferring every
// write, pool_accept (what the log deferred), the torn copies' invalidation,
// the clean flag; then the image, every page verified.  The process then
// dies: nothing more is written (pool_abandon).
open_result open_as_runtime(const std::string &path, nvm_kind kind)
{
	auto o = step_options(path, kind);
	o.create = false;
	o.accept_later = true;
	open_result r;
	pool *p = nullptr;
	if (pool_open(&p, &o) != 0) {
		r.message = err_get();
		return r;
	}
	r.opened = true;
	r.ver = *p->ver_d;
	r.replayed = p->nvm->stats.log_replayed_records;
	r.error = pool_accept(p);
	if (r.error == 0)
		r.torn = persist_invalidate_torn(p);
	if (r.error == 0)
		r.error = pool_set_clean(p, false);
	if (r.error == 0) {
		pooltest::shadow_buf sh(kPages * pooltest::page_size());
		uint64_t got = recovery_copy_image(p, sh.mem);
		INFO(err_get());
		CHECK(got != RECOVERY_REFUSED);
		CHECK(all_of(sh, (unsigned char)r.ver));
	}
	r.checkpoints = p->nvm->stats.checkpoints;
	pool_abandon(p);
	return r;
}

} // namespace

TEST_CASE("an fsync or a write failing at any step of the open after a crash writes nothing worse",
	  "[lossyfs][iofail]")
{
	// The backend of the runs that crashed, and the open's: the log's
	// epochs are written into the file and the mapping becomes msync's
	// when a pool the log backend left is opened with msync.
	const auto kinds = GENERATE(values<std::pair<nvm_kind, nvm_kind>>(
		{ { NVM_MSYNC, NVM_MSYNC }, { NVM_LOG, NVM_LOG }, { NVM_LOG, NVM_MSYNC } }));
	const nvm_kind crashed_by = kinds.first, kind = kinds.second;
	// And with the kernel's page cache kept, as a local file system keeps
	// it: the next open of the same boot sees what the failed one left
	// cached (pool_open reads an unclean pool from the device).
	const std::string options = GENERATE(std::string(""), std::string("--keep-cache"));
	INFO("crashed under PMTHREADS_NVM=" << nvm_label(crashed_by) << ", opened with "
					    << nvm_label(kind) << ", lossyfs " << options);
	constexpr uint64_t acked = 3;
	mounted fs(options);
	const std::string name = "crashed.pool";
	const std::string path = fs.m.mnt + "/" + name;
	const std::string saved = fs.dir.path + "/crashed.saved";
	// Two runs that crashed: the second replayed the first's epochs and
	// appended its own after a skip of seq numbers (the log's resume
	// fields), so the open checkpoints them all at the acceptance.
	run_and_crash(path, crashed_by, 1, 2);
	run_and_crash(path, crashed_by, 3, 3);
	fs.power_cycle();
	pooltest::copy_file(fs.m.backing + "/" + name, saved);
	// Power back on with the crashed pool as the device holds it.
	auto restart = [&] {
		fs.m.stop();
		pooltest::copy_file(saved, fs.m.backing + "/" + name);
		REQUIRE(fs.m.start(fs.options));
	};

	io_steps steps;
	{
		restart();
		const io_steps from = io_now(fs);
		open_result clean = open_as_runtime(path, kind);
		steps = io_now(fs) - from;
		INFO(clean.message);
		REQUIRE(clean.opened);
		REQUIRE(clean.error == 0);
		REQUIRE(clean.ver == acked);
		REQUIRE(steps.failed == 0);
		// What the open is there for: the log's epochs replayed and
		// written in place, the interrupted epoch's copies invalidated
		// (msync; the log's in-place attempt left none).
		if (crashed_by == NVM_LOG) {
			REQUIRE(clean.replayed > 0);
			REQUIRE(clean.checkpoints > 0);
		} else {
			REQUIRE(clean.torn > 0);
		}
	}
	INFO("the open: " << steps.fsyncs << " fsyncs, " << steps.writes << " writes");
	REQUIRE(steps.fsyncs > 0);
	REQUIRE(steps.writes > 0);
	unsigned i = 0;
	for (const io_fault &f : every_step(steps)) {
		const unsigned cut = i++ % 3;
		INFO(f << ", power cut " << (cut == 2 ? "torn, before the next open"
					   : cut == 1 ? "torn, after the next open" : "after the next open"));
		restart();
		fs.command(f.command());
		open_result r = open_as_runtime(path, kind);
		// The step was there, and it failed.
		REQUIRE(io_now(fs).failed == 1);
		INFO(r.message);
		CHECK(r.opened);	// pool_open writes nothing: it cannot fail so
		CHECK(r.ver == acked);
		CHECK((r.error == 0 || r.error == EIO));
		if (cut == 2) {
			fs.command("tear " + std::to_string(200 + i));
			fs.power_cycle();
		}
		if (cut != 2) {
			// The next open of the same boot.
			open_result again = open_as_runtime(path, kind);
			INFO(again.message);
			CHECK(again.opened);
			CHECK(again.error == 0);
			CHECK(again.ver == acked);
			if (cut == 1)
				fs.command("tear " + std::to_string(200 + i));
			fs.power_cycle();
		}
		// After the power cut: the acknowledged epoch, every page
		// verified, and a new epoch on it.
		open_expect(path, kind, acked, acked + 1);
	}
}

// An fsync failing at the start's first write to the pool (the log's
// replay checkpoint, the torn copies' invalidation, the clean flag), after
// the heap was set up in the pool's range: the start fails, the range is
// released, and a program whose malloc the heap served (PMTHREADS_HEAP=
// malloc) must go on with the C library's, without persistence.  Before,
// its next malloc went into the released range: SIGSEGV (found while
// trying to reproduce issue 39 item 4).
TEST_CASE("an fsync failing at the start's first write: a malloc-mode program runs on, unpersisted",
	  "[lossyfs][iofail]")
{
	const std::string nvm = GENERATE(std::string("log"), std::string("msync"));
	const int k = GENERATE(1, 2, 3);
	INFO("PMTHREADS_NVM=" << nvm << ", the " << k << "-th fsync of the second run fails (EIO)");
	mounted fs;
	std::string pool = fs.m.mnt + "/start.pool";
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", subprocess::env_or_fail("PMT_LIB") },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_POOL", pool },
		{ "PMTHREADS_POOL_SIZE", "16M" },
		{ "PMTHREADS_NVM", nvm },
		{ "PMTHREADS_INTERVAL_MS", "5" },
	};
	const std::string prog = subprocess::env_or_fail("PMT_SLOWSYNC");
	auto first = subprocess::run({ prog, "1" }, env);
	INFO(first.describe());
	REQUIRE(first.exited_ok());
	REQUIRE(first.out.rfind("sync ok ", 0) == 0);
	const uint64_t before = checked_epoch(pool);
	fs.command("fail-fsync-nth " + std::to_string(k) + " " + std::to_string(EIO));
	auto r = subprocess::run({ prog, "4" }, env);
	INFO(r.describe());
	CHECK(r.exited_ok());
	CHECK(r.out.rfind("sync Input/output error ", 0) == 0);
	CHECK(r.err.find("Input/output error") != std::string::npos);
	// Nothing of the failed run is in the pool, whichever step failed.
	fs.power_cycle();
	CHECK(checked_epoch(pool) >= before);
	auto again = subprocess::run({ prog, "1" }, env);
	INFO(again.describe());
	CHECK(again.exited_ok());
	CHECK(again.out.rfind("sync ok ", 0) == 0);
}

// Issue 46 item 2: the storage failing under a restore.  A pool whose
// acknowledged counter is 3 (ackcount), then its highest persisted page's
// copies unreadable (lossyfs fail-read: the device's sectors gone bad), and
// the program restarted: the restore's read of the pool raises SIGBUS in the
// pool's mapping.  Before, that ended the program with the fault handler's
// "SIGBUS at address 0x7f..., not a write-back to the pool" -- or, where the
// restore ran before the handler was installed, with no message at all.  It
// must say which pool, that its storage failed during the restore, that the
// pool was left as it was, and exit 1; once the storage reads again, the pool
// gives back what was acknowledged.
static void restore_read_fails(const char *restore, const char *tracker)
{
	mounted fs;
	std::string pool = fs.m.mnt + "/restore.pool";
	auto env = pool_env(pool);
	const std::string ackcount = subprocess::env_or_fail("PMT_ACKCOUNT");
	auto first = subprocess::run({ ackcount, "run", "3", "1" }, env);
	INFO(first.describe());
	REQUIRE(first.exited_ok());
	REQUIRE(first.out.find("acked 3 ") != std::string::npos);
	uint64_t page = 0, off = 0, len = 0;
	{
		auto o = pooltest::options(pool, 16, nullptr);
		o.create = false;
		o.read_only = true;
		struct pool *p = pooltest::open_or_fail(o);
		int c = -1;
		for (uint64_t i = 0; i < p->npages; i++)
			if (pool_valid_copy(p, i) >= 0) {
				page = i;
				c = pool_valid_copy(p, i);
			}
		// The copy the restore reads (format 7: the copies are in two
		// planes, far apart).
		off = c >= 0 ? pool_copy_offset(p, page, c) : 0;
		len = p->page_size;
		pool_close(p);
	}
	REQUIRE(page > 0);	// data, not the heap's header
	const std::string backing = fs.m.backing + "/restore.pool";
	auto before = pooltest::file_snapshot::of(backing);
	fs.command("fail-read " + std::to_string(off) + " " + std::to_string(len));
	env["PMTHREADS_RESTORE"] = restore;
	env["PMTHREADS_TRACKER"] = tracker;
	auto r = subprocess::run({ ackcount, "verify" }, env);
	INFO(r.describe());
	CHECK(WIFEXITED(r.wait_status));
	CHECK(r.status == 1);
	CHECK(r.out.find("counter") == std::string::npos);
	CHECK(r.err.find("pmthreads: error: pool " + pool + ": its storage failed while the heap was "
			 "restored from it: reading copy ") != std::string::npos);
	CHECK(r.err.find("raised SIGBUS (the file system could not read it)") != std::string::npos);
	CHECK(r.err.find("the pool was left as it was") != std::string::npos);
	CHECK(r.err.find("SIGBUS at address") == std::string::npos);
	std::string ctl = subprocess::slurp(fs.ctl());
	CHECK(ctl.find("failed-reads 0\n") == std::string::npos);
	if (std::string(restore) == "eager")	// before the first write of the open
		CHECK(pooltest::file_snapshot::of(backing).same_as(before));
	fs.command("fail-read 0 0");
	CHECK(verify_counter(pool) == 3);
}

TEST_CASE("the storage failing under the eager restore is said, the pool left as it was",
	  "[lossyfs][restore]")
{
	restore_read_fails("eager", "mprotect");
}

TEST_CASE("the storage failing under the lazy restore is said, the pool left as it was",
	  "[lossyfs][restore][uffd]")
{
	restore_read_fails("lazy", "uffd");
}
