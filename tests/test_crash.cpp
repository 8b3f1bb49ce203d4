/* SPDX-License-Identifier: BSD-3-Clause */
// Crash tests with the strict persistence simulator (lib/persist/nvm_sim.c).
//
// A forked child opens a copy of a prepared pool with the simulator, runs an
// epoch (or a recovery, or both) and "loses power" after its k-th flush or
// fence: each line not yet durable keeps its new content or reverts, at
// random.  The parent then opens the file with the ordinary backend,
// recovers, and checks that
//   - the recovered heap is byte-identical to the image of the epoch VER_d
//     names, and VER_d is the old one while the crash came before the VER_d
//     store and the new one once its fence had completed;
//   - every copy that carries a valid seq s holds exactly the image of epoch
//     s (what the seq fence guarantees), and pool_check finds nothing.
// The sweep covers every k over several seeds; PMTHREADS_CRASH_SEEDS raises
// the number of random seeds (default 6, plus "all lines old" and "all lines
// new").  Deliberately broken persist orders (persist_set_fault) must be
// caught by the same sweep.
#include "pool_test_util.h"
#include "uffd_half.h"

extern "C" {
#include "persist/nvm_log_test.h"
#include "persist/nvm_sim_test.h"
#include "persist/persist_test.h"
#include "recovery/restore.h"
#include "track/tracker.h"
}

#include <algorithm>
#include <map>
#include <set>
#include <random>
#include <sstream>

using namespace pooltest;

namespace {

const uint64_t kPages = 16;

using image = std::vector<unsigned char>;
using image_map = std::map<uint64_t, image>; // VER_d -> heap image

struct sim_mode {
	uint64_t seed;
	nvm_sim_survival survival;
};

std::vector<sim_mode> sim_modes()
{
	unsigned n = 6;
	if (const char *e = getenv("PMTHREADS_CRASH_SEEDS"))
		n = (unsigned)strtoul(e, nullptr, 10);
	std::vector<sim_mode> v{ { 0, NVM_SIM_KEEP_OLD }, { 0, NVM_SIM_KEEP_NEW } };
	for (unsigned i = 1; i <= n; i++)
		v.push_back({ 1000 + i, NVM_SIM_RANDOM });
	return v;
}

// Changes to make to a heap image, page by page, for a varied epoch.
void mutate(image &img, const std::vector<uint64_t> &pages, uint32_t seed)
{
	std::mt19937 rng(seed);
	const size_t ps = page_size(), lines = ps / NVM_LINE;
	unsigned kind = 0;
	for (uint64_t pg : pages) {
		unsigned char *p = img.data() + pg * ps;
		auto touch = [&](size_t line) { p[line * NVM_LINE + rng() % NVM_LINE] ^= (unsigned char)(1 + rng() % 255); };
		switch (kind++ % 6) {
		case 0: touch(rng() % lines); break;			// one line
		case 1: for (size_t l = 0; l < lines; l++) touch(l); break; // whole page
		case 2: break;						// dirty, unchanged
		case 3: for (int i = 0; i < 5; i++) touch(rng() % lines); break; // scattered
		case 4: touch(0), touch(lines - 1); break;		// first and last
		case 5: { size_t s = rng() % (lines - 20); for (size_t l = s; l < s + 20; l++) touch(l); } break;
		}
	}
}

// A prepared pool: a few epochs already durable, the images of each.
struct prepared {
	scratch_dir dir;
	std::string base, work;
	image_map images;
	prepared() : base(dir.file("base.pool")), work(dir.file("work.pool"))
	{
		auto o = options(base, kPages);
		pool *p = open_or_fail(o);
		pool_set_clean(p, false);
		image img(kPages * page_size(), 0);
		images[0] = img;
		// Epoch 1 writes pages 0..11, epoch 2 changes some of them and adds
		// 12, epoch 3 changes others: the copies of a page now differ.
		std::vector<std::vector<uint64_t>> epochs = {
			{ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, { 1, 3, 5, 7, 9, 11, 12 }, { 0, 2, 5, 6, 12 }
		};
		for (size_t e = 0; e < epochs.size(); e++) {
			if (e == 0)
				for (uint64_t pg : epochs[0])
					for (size_t b = 0; b < page_size(); b++)
						img[pg * page_size() + b] = (unsigned char)(pg * 31 + b * 7 + 1);
			else
				mutate(img, epochs[e], (uint32_t)(77 + e));
			persist_epoch(p, img.data(), epochs[e].data(), epochs[e].size(), nullptr);
			images[(uint64_t)*p->ver_d] = img;
		}
		REQUIRE(*p->ver_d == 3);
		pool_close(p);
	}
	uint64_t ver() const { return images.rbegin()->first; }
	void reset_work() { copy_file(base, work); }
};

// The crashing epoch: 12 dirty pages including one never written before.
const std::vector<uint64_t> kDirty = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 13, 15 };

image next_image(const image &from, const std::vector<uint64_t> &dirty, uint32_t seed)
{
	image img = from;
	mutate(img, dirty, seed);
	return img;
}

// What the child does with the pool it opened under the simulator.
struct child_work {
	bool recover = false;		// recovery_restore_image first
	const image *persist = nullptr;	// then persist this image ...
	const std::vector<uint64_t> *dirty = nullptr; // ... these pages of it
	persist_fault fault = PERSIST_FAULT_NONE;
	// The runtime's path instead: restore_open (lazy restore through the
	// uffd tracker, nothing written), then, the pool accepted, the
	// invalidation (implies recover; issue 39: no write before every
	// check of the open has passed), the program
	// writes the dirty pages (each restored on its first touch), the
	// tracker collects them, the epoch persists them while the other
	// pages are still waiting for their restore.
	bool lazy = false;
	bool background = false;	// with the background pass racing the epoch
	// First an attempt that is not published (persist.h; epoch.c when the
	// program wrote a page while it was read): these pages of this image,
	// ended without VER_d; then, if persist is set, its redo.
	const image *carried = nullptr;
	const std::vector<uint64_t> *carried_dirty = nullptr;
	const image *expect = nullptr;	// lazy, no persist: the image to find
	// Where the backend writes pages straight (the log's): these pages are
	// written whole, however few (persist.h, "Whole pages"), the others
	// line by line.
	const std::vector<uint64_t> *whole = nullptr;
};

// The child's lazy path (see child_work); exits 12-15 on a mismatch.
void lazy_child(pool *p, const child_work &w)
{
	const size_t ps = page_size(), len = kPages * ps;
	auto *heap = static_cast<unsigned char *>(shadow_reserve(0, len));
	restore *r = nullptr;
	tracker *t = nullptr;
	restore_options ro{};
	ro.policy = RESTORE_LAZY;
	ro.no_background = !w.background;
	if (heap == nullptr || restore_open(&r, &t, p, heap, len, TRACKER_UFFD, &ro) != 0 || r == nullptr)
		_exit(12);
	persist_invalidate_torn(p);	/* as the runtime does once the heap passed */
	if (w.persist) {
		for (uint64_t pg : *w.dirty)
			memcpy(heap + pg * ps, w.persist->data() + pg * ps, ps);
		std::vector<uint64_t> got(kPages);
		got.resize(tracker_collect_dirty(t, got.data(), got.size()));
		// Exact: restored pages are clean, written ones dirty.
		if (std::set<uint64_t>(got.begin(), got.end()) !=
		    std::set<uint64_t>(w.dirty->begin(), w.dirty->end()))
			_exit(13);
		persist_epoch(p, heap, got.data(), got.size(), nullptr);
		if (memcmp(heap, w.persist->data(), len) != 0)
			_exit(14);
	} else if (w.expect && memcmp(heap, w.expect->data(), len) != 0) {
		_exit(15);
	}
	restore_close(r);
	tracker_close(t);
}

struct child_result {
	int status;
	uint64_t primitives; // when it ran to the end without crashing
};

// The backend the child crashes: the line simulator, or the log backend on
// its simulated device (whose primitives are its writes and syncs).
nvm_kind crash_backend = NVM_SIM;

child_result run_child(const std::string &path, const child_work &w, uint64_t crash_after,
		       sim_mode m)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	int status = in_child([&] {
		close(fds[0]);
		persist_set_fault(w.fault);
		nvm_sim_options so{};
		so.seed = m.seed;
		so.survival = m.survival;
		so.crash_after = crash_after;
		auto o = options(path, kPages);
		o.create = false;
		o.nvm = crash_backend;
		o.sim = &so;
		pool *p = nullptr;
		if (pool_open(&p, &o) != 0)
			_exit(10);
		if (w.whole != nullptr) {
			p->whole_min = 1;
			for (uint64_t pg : *w.whole)
				if (!persist_test_hint_whole(p, pg))
					_exit(16);
		}
		std::vector<uint64_t> redo;
		const std::vector<uint64_t> *dirty = w.dirty;
		if (w.lazy)
			lazy_child(p, w);
		else if (w.recover) {
			shadow_buf scratch(kPages * page_size());
			recovery_restore_image(p, scratch.mem);
		}
		if (w.carried) {
			const void *ctx[2] = { p, w.carried->data() };
			persist_source src = {
				[](void *c, size_t, uint64_t page) -> const void * {
					auto **v = (const void **)c;
					return (const unsigned char *)v[1] +
					       page * ((const pool *)v[0])->page_size;
				},
				[](void *, size_t, size_t) {}, (void *)ctx
			};
			persist_attempt e;
			persist_attempt_begin(&e, p, w.carried_dirty->data(), w.carried_dirty->size());
			persist_attempt_write(&e, &src, w.carried_dirty->data(), w.carried_dirty->size());
			persist_attempt_end(&e, false, nullptr);
			// Rewritten in place and put back (the log backend): the
			// redo lists the attempt's pages too, as epoch.c does.
			if (e.reverted && w.persist) {
				redo = *w.carried_dirty;
				redo.insert(redo.end(), w.dirty->begin(), w.dirty->end());
				std::sort(redo.begin(), redo.end());
				redo.erase(std::unique(redo.begin(), redo.end()), redo.end());
				dirty = &redo;
			}
		}
		if (w.persist && !w.lazy)
			persist_epoch(p, w.persist->data(), dirty->data(), dirty->size(), nullptr);
		uint64_t prims = crash_backend == NVM_LOG ? nvm_log_primitives(p->nvm)
							  : nvm_sim_primitives(p->nvm);
		if (write(fds[1], &prims, sizeof(prims)) != (ssize_t)sizeof(prims))
			_exit(11);
		_exit(0);
	});
	close(fds[1]);
	child_result r{ status, 0 };
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		REQUIRE(read(fds[0], &r.primitives, sizeof(r.primitives)) == (ssize_t)sizeof(r.primitives));
	close(fds[0]);
	return r;
}

// Primitives the work takes on a fresh copy of from (no crash).
uint64_t count_primitives(prepared &pr, const std::string &from, const child_work &w)
{
	copy_file(from, pr.work);
	child_result r = run_child(pr.work, w, 0, { 0, NVM_SIM_RANDOM });
	REQUIRE(WIFEXITED(r.status));
	REQUIRE(WEXITSTATUS(r.status) == 0);
	REQUIRE(r.primitives > 0);
	return r.primitives;
}

struct outcome {
	std::string problem; // empty: consistent
	uint64_t ver_d = 0;
	image heap;
};

// Open path normally, recover (lazily when lazy_recovery), and compare
// against images.
bool lazy_recovery = false;
outcome check_recovery(const std::string &path, const image_map &images)
{
	outcome out;
	auto o = options(path, kPages);
	o.create = false;
	pool *p = nullptr;
	if (pool_open(&p, &o) != 0) {
		out.problem = std::string("reopen failed: ") + err_get();
		return out;
	}
	std::ostringstream why;
	if (unsigned n = pool_check(p, nullptr, nullptr))
		why << "pool_check before recovery: " << n << " problems; ";
	out.ver_d = *p->ver_d;
	if (lazy_recovery) {
		// The runtime's way: restore_open, every page restored on its
		// first touch (the background pass is off).
		const size_t len = kPages * page_size();
		auto *heap = static_cast<unsigned char *>(shadow_reserve(0, len));
		REQUIRE(heap != nullptr);
		restore *r = nullptr;
		tracker *t = nullptr;
		restore_options ro{};
		ro.policy = RESTORE_LAZY;
		ro.no_background = true;
		REQUIRE(restore_open(&r, &t, p, heap, len, TRACKER_UFFD, &ro) == 0);
		out.heap.assign(heap, heap + len);
		std::vector<uint64_t> d(kPages);
		if (tracker_collect_dirty(t, d.data(), d.size()) != 0)
			why << "lazily restored pages count as dirty; ";
		restore_close(r);
		tracker_close(t);
		shadow_release(heap, len);
	} else {
		shadow_buf sh(kPages * page_size());
		if (recovery_restore_image(p, sh.mem) == RECOVERY_REFUSED)
			why << "recovery refused the pool: " << err_get() << "; ";
		out.heap = sh.bytes();
	}
	auto it = images.find(out.ver_d);
	if (it == images.end()) {
		why << "VER_d " << out.ver_d << " names no epoch; ";
	} else {
		if (out.heap != it->second)
			why << "recovered heap differs from the image of epoch " << out.ver_d << "; ";
		for (uint64_t pg = 0; pg < kPages; pg++)
			for (int c = 0; c < 2; c++) {
				uint64_t s = p->seq[pg][c];
				if (s > out.ver_d)
					continue; // invalid (recovery marked it)
				auto img = images.find(s);
				if (img == images.end() ||
				    memcmp(pool_copy(p, pg, c), img->second.data() + pg * page_size(),
					   page_size()) != 0)
					why << "page " << pg << " copy " << c << " (seq " << s
					    << ") is not the image of epoch " << s << "; ";
			}
	}
	for (uint64_t pg = 0; pg < kPages && out.heap.size() == kPages * page_size(); pg++) {
		int c = pool_valid_copy(p, pg);
		if (c < 0)
			continue;
		// Every page of the image verifies against the checksum its copy's
		// epoch recorded: the checksum was durable whenever the copy was
		// (VER_d's fence), through carried-over attempts too.
		char what[512];
		if (pool_verify_page(p, pg, out.heap.data() + pg * page_size(), what, sizeof(what)) != 0)
			why << "page " << pg << ": " << what << "; ";
	}
	if (unsigned n = pool_check(p, nullptr, nullptr))
		why << "pool_check after recovery: " << n << " problems; ";
	pool_close(p);
	out.problem = why.str();
	return out;
}

// Sweep every crash point of w over every sim mode; VER_d must end as
// ver_old (before the work) or ver_new (after it); total is the work's
// primitive count.  With check_order the work ends with an epoch and VER_d's
// placement is checked too: old until the VER_d store, new once its fence
// completed.
struct sweep_result {
	uint64_t crash_points = 0;
	uint64_t new_image = 0; // crashes after which the new epoch survived
	std::vector<std::string> problems;
};

template <typename Prepare>
sweep_result sweep(prepared &pr, const child_work &w, const image_map &images, uint64_t ver_old,
		   uint64_t ver_new, uint64_t total, bool check_order, Prepare prepare_work)
{
	sweep_result res;
	for (const sim_mode &m : sim_modes()) {
		for (uint64_t k = 1; k <= total; k++) {
			prepare_work();
			child_result r = run_child(pr.work, w, k, m);
			std::ostringstream where;
			where << "crash after primitive " << k << "/" << total << ", seed " << m.seed
			      << " survival " << m.survival << ": ";
			if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != NVM_SIM_CRASH_EXIT) {
				res.problems.push_back(where.str() + "child did not crash (status " +
						       std::to_string(r.status) + ")");
				continue;
			}
			res.crash_points++;
			outcome o = check_recovery(pr.work, images);
			std::string problem = o.problem;
			if (o.ver_d != ver_old && o.ver_d != ver_new)
				problem += "VER_d " + std::to_string(o.ver_d) + " is neither old nor new; ";
			// The VER_d store follows the data fence (primitive total-2)
			// and its fence is the last primitive.
			if (check_order && k <= total - 2 && o.ver_d != ver_old)
				problem += "VER_d advanced before the data was durable; ";
			if (check_order && k >= total && o.ver_d != ver_new)
				problem += "VER_d fence completed but the new epoch was lost; ";
			res.new_image += o.ver_d == ver_new && ver_new != ver_old;
			if (!problem.empty())
				res.problems.push_back(where.str() + problem);
		}
	}
	return res;
}

std::string first_problems(const sweep_result &r)
{
	std::string s;
	for (size_t i = 0; i < r.problems.size() && i < 5; i++)
		s += r.problems[i] + "\n";
	return s;
}

} // namespace

TEST_CASE("simulator: unflushed, unfenced and re-stored lines are lost; fenced ones kept",
	  "[crash][sim]")
{
	scratch_dir d;
	std::string path = d.file("sim.bin");
	std::vector<unsigned char> zeros(4 * page_size(), 0);
	write_file(path, zeros.data(), zeros.size());
	auto scenario = [&](nvm_sim_survival survival) {
		write_file(path, zeros.data(), zeros.size());
		int st = in_child([&] {
			int fd = open(path.c_str(), O_RDWR);
			nvm_sim_options so{};
			so.survival = survival;
			nvm *n = nullptr;
			if (fd < 0 || nvm_map(&n, fd, path.c_str(), zeros.size(), NVM_SIM, 0, &so) != 0)
				_exit(10);
			unsigned char *b = static_cast<unsigned char *>(n->base);
			b[0] = 1;			// line 0: flushed and fenced
			nvm_flush(n, b, 1);
			nvm_fence(n);
			b[192] = 4;			// line 3: flushed, fenced, then stored again
			nvm_flush(n, b + 192, 1);
			nvm_fence(n);
			b[193] = 5;
			unsigned char src[128];
			memset(src, 6, sizeof(src));	// lines 4-5: copy_flush, fenced
			nvm_copy_flush(n, b + 256, src, sizeof(src));
			nvm_fence(n);
			b[64] = 2;			// line 1: flushed, no fence after it
			nvm_flush(n, b + 64, 1);
			b[128] = 3;			// line 2: never flushed
			if (nvm_sim_primitives(n) != 7)
				_exit(12);
			nvm_sim_crash(n);
		});
		REQUIRE(WIFEXITED(st));
		REQUIRE(WEXITSTATUS(st) == NVM_SIM_CRASH_EXIT);
		return file_snapshot::of(path).bytes;
	};
	auto old_ = scenario(NVM_SIM_KEEP_OLD);
	CHECK(old_[0] == 1);
	CHECK(old_[64] == 0);
	CHECK(old_[128] == 0);
	CHECK((old_[192] == 4 && old_[193] == 0));
	CHECK((old_[256] == 6 && old_[383] == 6));
	auto new_ = scenario(NVM_SIM_KEEP_NEW);
	CHECK(new_[0] == 1);
	CHECK(new_[64] == 2);
	CHECK(new_[128] == 3);
	CHECK((new_[192] == 4 && new_[193] == 5));
}

TEST_CASE("simulator: crash_after stops after exactly k primitives", "[crash][sim]")
{
	scratch_dir d;
	std::string path = d.file("k.bin");
	std::vector<unsigned char> zeros(page_size(), 0);
	for (uint64_t k = 1; k <= 6; k++) {
		write_file(path, zeros.data(), zeros.size());
		int st = in_child([&] {
			int fd = open(path.c_str(), O_RDWR);
			nvm_sim_options so{};
			so.crash_after = k;
			so.survival = NVM_SIM_KEEP_OLD;
			nvm *n = nullptr;
			if (fd < 0 || nvm_map(&n, fd, path.c_str(), zeros.size(), NVM_SIM, 0, &so) != 0)
				_exit(10);
			unsigned char *b = static_cast<unsigned char *>(n->base);
			for (int i = 0; i < 3; i++) { // primitives: flush, fence, flush, fence, ...
				b[i * 64] = (unsigned char)(i + 1);
				nvm_flush(n, b + i * 64, 1);
				nvm_fence(n);
			}
			_exit(0);
		});
		INFO("k = " << k);
		REQUIRE(WIFEXITED(st));
		CHECK(WEXITSTATUS(st) == NVM_SIM_CRASH_EXIT);
		auto bytes = file_snapshot::of(path).bytes;
		for (int i = 0; i < 3; i++)
			CHECK(bytes[(size_t)i * 64] == ((uint64_t)(2 * i + 2) <= k ? i + 1 : 0));
	}
}

TEST_CASE("crash at every point of a multi-page epoch recovers the old or the new image",
	  "[crash][sweep]")
{
	prepared pr;
	image_map images = pr.images;
	image next = next_image(images[pr.ver()], kDirty, 5);
	images[pr.ver() + 1] = next;
	child_work w;
	w.persist = &next;
	w.dirty = &kDirty;
	uint64_t total = count_primitives(pr, pr.base, w);
	// 12 seq flushes + fence, the data runs, fence, VER_d flush + fence.
	CHECK(total > 12 + 1 + 12 + 3);
	sweep_result r = sweep(pr, w, images, pr.ver(), pr.ver() + 1, total, true,
			       [&] { pr.reset_work(); });
	INFO(first_problems(r));
	CHECK(r.problems.empty());
	CHECK(r.crash_points == total * sim_modes().size());
	CHECK(r.new_image > 0);
	CHECK(r.new_image < r.crash_points);
	WARN("epoch sweep: " << r.crash_points << " crash points (" << total << " primitives x "
			     << sim_modes().size() << " seeds), new image after " << r.new_image);
}

TEST_CASE("lazy restore: crash at every point of an epoch persisted while pages wait for "
	  "their restore", "[crash][sweep][lazy][uffd]")
{
	prepared pr;
	image_map images = pr.images;
	image next = next_image(images[pr.ver()], kDirty, 5);
	images[pr.ver() + 1] = next;
	for (bool background : { false, true }) {
		INFO("background pass " << background);
		child_work w;
		w.lazy = true;
		w.background = background;
		w.persist = &next;
		w.dirty = &kDirty;
		uint64_t total = count_primitives(pr, pr.base, w);
		lazy_recovery = true;
		sweep_result r = sweep(pr, w, images, pr.ver(), pr.ver() + 1, total, true,
				       [&] { pr.reset_work(); });
		lazy_recovery = false;
		INFO(first_problems(r));
		CHECK(r.problems.empty());
		CHECK(r.crash_points == total * sim_modes().size());
		CHECK(r.new_image > 0);
		WARN("lazy epoch sweep: " << r.crash_points << " crash points, background "
					  << background);
	}
}

namespace {

uint64_t durable_ver(const std::string &path)
{
	auto o = options(path, kPages);
	o.read_only = true;
	o.create = false;
	pool *p = open_or_fail(o);
	uint64_t v = *p->ver_d;
	pool_close(p);
	return v;
}

// Copies whose seq is beyond VER_d and whose data differs from the image of
// that epoch: what a missing invalidation would bring back.
unsigned torn_and_different(const std::string &path, const image &would_be)
{
	auto o = options(path, kPages);
	o.read_only = true;
	o.create = false;
	pool *p = open_or_fail(o);
	unsigned n = 0;
	for (uint64_t pg = 0; pg < kPages; pg++)
		for (int c = 0; c < 2; c++)
			if (p->seq[pg][c] != POOL_SEQ_INVALID && p->seq[pg][c] > *p->ver_d &&
			    memcmp(pool_copy(p, pg, c), would_be.data() + pg * page_size(), page_size()) != 0)
				n++;
	pool_close(p);
	return n;
}

// Crash points inside the data phase of the epoch: torn copies exist there.
std::vector<uint64_t> data_phase_points(uint64_t total)
{
	return { 14, (total + 13) / 2, total - 3 };
}

} // namespace

// Copying recovery in the crash test, lazy restore in crash-uffd (uffd_half.h).
TEST_CASE("a crash during recovery is followed by the same recovery", "[crash][recovery][trackers]")
{
	prepared pr;
	image_map images = pr.images;
	image next = next_image(images[pr.ver()], kDirty, 6);
	images[pr.ver() + 1] = next;
	child_work epoch;
	epoch.persist = &next;
	epoch.dirty = &kDirty;
	uint64_t total = count_primitives(pr, pr.base, epoch);
	std::string torn = pr.dir.file("torn.pool");
	uint64_t points = 0;
	for (bool lazy : { uffd_half() }) {
	lazy_recovery = lazy;
	for (uint64_t k1 : data_phase_points(total)) {
		INFO("first crash after primitive " << k1 << (lazy ? ", lazy restore" : ""));
		pr.reset_work();
		child_result c1 = run_child(pr.work, epoch, k1, { 0, NVM_SIM_KEEP_OLD });
		REQUIRE(WEXITSTATUS(c1.status) == NVM_SIM_CRASH_EXIT);
		copy_file(pr.work, torn);
		uint64_t v1 = durable_ver(torn);
		REQUIRE(v1 == pr.ver());
		REQUIRE(torn_and_different(torn, next) + torn_and_different(torn, images[v1]) > 0);
		child_work rec;
		rec.recover = true;
		rec.lazy = lazy;
		rec.expect = &images[v1];
		uint64_t rtotal = count_primitives(pr, torn, rec);
		REQUIRE(rtotal >= 2); // invalidations + one fence
		sweep_result r = sweep(pr, rec, images, v1, v1, rtotal, false,
				       [&] { copy_file(torn, pr.work); });
		INFO(first_problems(r));
		CHECK(r.problems.empty());
		points += r.crash_points;
	}
	}
	lazy_recovery = false;
	WARN("recovery sweep (" << (uffd_half() ? "lazy restore" : "copying") << "): " << points
				<< " crash points");
}

// Copying recovery in the crash test, the lazy paths in crash-uffd (uffd_half.h).
TEST_CASE("double crash: crash mid-epoch, recover, crash mid-epoch again", "[crash][double][trackers]")
{
	prepared pr;
	image next = next_image(pr.images[pr.ver()], kDirty, 8);
	child_work epoch;
	epoch.persist = &next;
	epoch.dirty = &kDirty;
	uint64_t total = count_primitives(pr, pr.base, epoch);
	std::string first = pr.dir.file("first.pool");
	const std::vector<uint64_t> dirty2_all = { 1, 2, 4, 9, 13, 14 };
	// After the third first crash the second epoch stays out of the first
	// seq-table lines (pages 0-11, torn by the first): only recovery's own
	// flushes make their invalidations durable before VER_d is reused.
	const std::vector<uint64_t> dirty2_low = { 13, 14 };
	uint64_t points = 0;
	// First crashes: in the data phase (torn copies left), and between the
	// VER_d flush and its fence with the line surviving (the epoch is kept).
	std::vector<uint64_t> d = data_phase_points(total);
	const std::vector<std::pair<uint64_t, sim_mode>> firsts = {
		{ d[0], { 0, NVM_SIM_KEEP_OLD } }, { d[1], { 3, NVM_SIM_RANDOM } },
		{ d[2], { 0, NVM_SIM_KEEP_OLD } }, { total - 1, { 0, NVM_SIM_KEEP_NEW } },
	};
	// Copying recovery, then the runtime's path: lazy restore with the
	// epoch racing the background pass or not, recovered lazily again.
	for (int path : uffd_half() ? std::vector<int>{ 1, 2 } : std::vector<int>{ 0 }) {
	lazy_recovery = path > 0;
	for (size_t fi = 0; fi < firsts.size(); fi++) {
		auto [k1, m1] = firsts[fi];
		const std::vector<uint64_t> &dirty2 = fi == 2 ? dirty2_low : dirty2_all;
		INFO("first crash after primitive " << k1 << " seed " << m1.seed << " path " << path);
		pr.reset_work();
		REQUIRE(WEXITSTATUS(run_child(pr.work, epoch, k1, m1).status) == NVM_SIM_CRASH_EXIT);
		copy_file(pr.work, first);
		uint64_t v1 = durable_ver(first);
		CHECK(v1 == (k1 == total - 1 ? pr.ver() + 1 : pr.ver()));
		// The second run recovers image v1 and persists a new epoch
		// over it, which reuses VER_d v1 + 1.
		image_map images;
		for (auto &e : pr.images)
			if (e.first <= v1)
				images.insert(e);
		if (v1 == pr.ver() + 1)
			images[v1] = next;
		image second = next_image(images[v1], dirty2, (uint32_t)(9 + k1));
		images[v1 + 1] = second;
		child_work w;
		w.recover = true;
		w.persist = &second;
		w.dirty = &dirty2;
		w.lazy = path > 0;
		w.background = path == 2;
		uint64_t total2 = count_primitives(pr, first, w);
		sweep_result r = sweep(pr, w, images, v1, v1 + 1, total2, true,
				       [&] { copy_file(first, pr.work); });
		INFO(first_problems(r));
		CHECK(r.problems.empty());
		CHECK(r.new_image > 0);
		points += r.crash_points;
	}
	}
	lazy_recovery = false;
	WARN("double-crash sweep (" << (uffd_half() ? "lazy, lazy with background" : "copying")
				    << "): " << points << " crash points");
}

// An attempt carried over (epoch.c: a page read live was written meanwhile)
// writes every page of its batch, some of them with a state the program never
// had at a quiescent point, and is not published; its redo rewrites only the
// pages written since, and publishes.  The unpublished copies must never
// come back after a crash, and those the redo does not rewrite must come back
// exactly as the attempt wrote them once it is published.
namespace {
struct carried_case {
	image final_img, mixed;
	std::vector<uint64_t> conflicted = { 1, 5, 13 }, redo = { 1, 5, 9, 13 };
	carried_case(const image &prev)
	{
		final_img = next_image(prev, kDirty, 21);
		mutate(final_img, redo, 22);
		// What the attempt read: the pages that conflicted mid-change.
		mixed = final_img;
		mutate(mixed, conflicted, 23);
	}
	child_work work() const
	{
		child_work w;
		w.carried = &mixed;
		w.carried_dirty = &kDirty;
		w.persist = &final_img;
		w.dirty = &redo;
		return w;
	}
};
} // namespace

namespace {
// Every crash point of a carried-over attempt and its redo, under the
// backend crash_backend names; check_order: the line simulator's placement
// of VER_d (sweep).
sweep_result carried_sweep(bool check_order)
{
	prepared pr;
	image_map images = pr.images;
	carried_case cc(images[pr.ver()]);
	images[pr.ver() + 1] = cc.final_img;
	child_work w = cc.work();
	uint64_t total = count_primitives(pr, pr.base, w);
	sweep_result r = sweep(pr, w, images, pr.ver(), pr.ver() + 1, total, check_order,
			       [&] { pr.reset_work(); });
	INFO(first_problems(r));
	CHECK(r.problems.empty());
	CHECK(r.crash_points == total * sim_modes().size());
	CHECK(r.new_image > 0);
	return r;
}
} // namespace

TEST_CASE("crash at every point of a carried-over attempt and its redo", "[crash][sweep][carried]")
{
	sweep_result r = carried_sweep(true);
	WARN("carried-over sweep: " << r.crash_points << " crash points, new image after "
				    << r.new_image);
}

TEST_CASE("a crash between a carried-over attempt and its redo: recovery, crashed recovery, "
	  "double crash", "[crash][carried][recovery][double]")
{
	prepared pr;
	image_map images = pr.images;
	carried_case cc(images[pr.ver()]);
	// The attempt alone, to its end: its copies at VER_d+1 all durable.
	child_work attempt;
	attempt.carried = &cc.mixed;
	attempt.carried_dirty = &kDirty;
	uint64_t total = count_primitives(pr, pr.base, attempt);
	std::string between = pr.dir.file("between.pool");
	copy_file(pr.work, between);	// count_primitives ran it whole
	REQUIRE(durable_ver(between) == pr.ver());
	// Recovery of that pool, crashing at each of its primitives, then
	// recovered again: always the old image.
	child_work rec;
	rec.recover = true;
	rec.expect = &images[pr.ver()];
	uint64_t rtotal = count_primitives(pr, between, rec);
	REQUIRE(rtotal >= 2);	// the invalidations of the attempt's copies + a fence
	sweep_result r1 = sweep(pr, rec, images, pr.ver(), pr.ver(), rtotal, false,
				[&] { copy_file(between, pr.work); });
	INFO(first_problems(r1));
	CHECK(r1.problems.empty());
	// Double crash: the next run recovers it and persists a new epoch,
	// which reuses VER_d+1, crashing at each point; and crashes inside the
	// attempt itself, followed by that same recovery and epoch.
	image second = next_image(images[pr.ver()], { 2, 5, 14 }, 31);
	const std::vector<uint64_t> dirty2 = { 2, 5, 14 };
	image_map images2 = images;
	images2[pr.ver() + 1] = second;
	child_work w2;
	w2.recover = true;
	w2.persist = &second;
	w2.dirty = &dirty2;
	uint64_t total2 = count_primitives(pr, between, w2);
	sweep_result r2 = sweep(pr, w2, images2, pr.ver(), pr.ver() + 1, total2, true,
				[&] { copy_file(between, pr.work); });
	INFO(first_problems(r2));
	CHECK(r2.problems.empty());
	CHECK(r2.new_image > 0);
	std::string first = pr.dir.file("first.pool");
	uint64_t points = r1.crash_points + r2.crash_points;
	for (uint64_t k1 : { total / 3, total / 2, total - 1 }) {
		INFO("first crash after primitive " << k1 << " of the attempt's " << total);
		pr.reset_work();
		REQUIRE(WEXITSTATUS(run_child(pr.work, attempt, k1, { 5, NVM_SIM_RANDOM }).status) ==
			NVM_SIM_CRASH_EXIT);
		copy_file(pr.work, first);
		REQUIRE(durable_ver(first) == pr.ver());
		uint64_t t2 = count_primitives(pr, first, w2);
		sweep_result r3 = sweep(pr, w2, images2, pr.ver(), pr.ver() + 1, t2, true,
					[&] { copy_file(first, pr.work); });
		INFO(first_problems(r3));
		CHECK(r3.problems.empty());
		points += r3.crash_points;
	}
	WARN("carried-over recovery and double-crash sweeps: " << points << " crash points");
}

TEST_CASE("torn copies are not resurrected by the next epoch", "[crash][resurrection]")
{
	prepared pr;
	image next = next_image(pr.images[pr.ver()], kDirty, 10);
	child_work epoch;
	epoch.persist = &next;
	epoch.dirty = &kDirty;
	uint64_t total = count_primitives(pr, pr.base, epoch);
	const std::vector<uint64_t> other = { 14 }; // not in kDirty

	// Crash inside the epoch, recover in a new process, persist an epoch
	// that touches none of the torn pages (so VER_d + 1 is reused), then
	// recover again.  Returns how many crash points ended inconsistent.
	auto run = [&](persist_fault recovery_fault, unsigned *torn_cases) {
		unsigned bad = 0;
		*torn_cases = 0;
		for (uint64_t k = 14; k < total - 2; k++) {
			for (sim_mode m : { sim_mode{ 0, NVM_SIM_KEEP_OLD }, sim_mode{ 21, NVM_SIM_RANDOM } }) {
				pr.reset_work();
				REQUIRE(WEXITSTATUS(run_child(pr.work, epoch, k, m).status) ==
					NVM_SIM_CRASH_EXIT);
				uint64_t v1 = durable_ver(pr.work);
				REQUIRE(v1 == pr.ver());
				image after = pr.images[v1];
				*torn_cases += torn_and_different(pr.work, after) > 0;
				persist_set_fault(recovery_fault);
				auto o = options(pr.work, kPages);
				o.create = false;
				pool *p = open_or_fail(o);
						shadow_buf sh(kPages * page_size());
				recovery_restore_image(p, sh.mem);
				REQUIRE(sh.bytes() == after);
				sh.mem[14 * page_size() + 100] ^= 0x5a;
				after[14 * page_size() + 100] ^= 0x5a;
				persist_epoch(p, sh.mem, other.data(), other.size(), nullptr);
				REQUIRE(*p->ver_d == v1 + 1);
				pool_close(p);
				persist_set_fault(PERSIST_FAULT_NONE);
				image_map images;
				for (auto &e : pr.images)
					if (e.first <= v1)
						images.insert(e);
				images[v1 + 1] = after;
				bad += !check_recovery(pr.work, images).problem.empty();
			}
		}
		return bad;
	};
	unsigned torn_cases = 0;
	CHECK(run(PERSIST_FAULT_NONE, &torn_cases) == 0);
	CHECK(torn_cases > 0);
	// The same scenario without the invalidation brings torn data back: the
	// test can see the bug it guards against.
	CHECK(run(PERSIST_FAULT_SKIP_INVALIDATE, &torn_cases) > 0);
}

TEST_CASE("the sweep catches deliberately broken persist orders", "[crash][faults]")
{
	prepared pr;
	image_map images = pr.images;
	image next = next_image(images[pr.ver()], kDirty, 11);
	images[pr.ver() + 1] = next;
	struct fault_case {
		persist_fault fault;
		const char *name;
	};
	for (fault_case f : { fault_case{ PERSIST_FAULT_SKIP_SEQ_FENCE, "seq writes without their fence" },
			      fault_case{ PERSIST_FAULT_SKIP_DATA_FENCE, "data without its fence" },
			      fault_case{ PERSIST_FAULT_SKIP_DATA_FLUSH, "data lines never flushed" },
			      fault_case{ PERSIST_FAULT_VER_BEFORE_DATA, "VER_d before the data" },
			      fault_case{ PERSIST_FAULT_SKIP_SUM_FLUSH, "checksums never flushed" } }) {
		INFO(f.name);
		child_work w;
		w.persist = &next;
		w.dirty = &kDirty;
		w.fault = f.fault;
		uint64_t total = count_primitives(pr, pr.base, w);
		// Only the image checks count here, not the placement of VER_d.
		sweep_result r = sweep(pr, w, images, pr.ver(), pr.ver() + 1, total, false,
				       [&] { pr.reset_work(); });
		CHECK(r.problems.size() > 0);
		WARN("broken order '" << f.name << "': caught at " << r.problems.size() << " of "
				      << r.crash_points << " crash points");
	}
}

// The log backend (nvm_log.h) under the same sweeps: its device crashes after
// every write and every sync, each unsynced write keeping, sector by sector,
// its new or its old bytes.  An epoch is three records (two orders and the
// VER_d fence) written as one group in one write, and one sync, after the
// head slot the first append of a run writes.
struct log_backend_scope {
	log_backend_scope() { crash_backend = NVM_LOG; }
	~log_backend_scope() { crash_backend = NVM_SIM; }
};

TEST_CASE("log backend: a crash after every write and sync of an epoch recovers the old or the new "
	  "image", "[crash][sweep][log]")
{
	log_backend_scope scope;
	prepared pr;
	image_map images = pr.images;
	image next = next_image(images[pr.ver()], kDirty, 15);
	images[pr.ver() + 1] = next;
	child_work w;
	w.persist = &next;
	w.dirty = &kDirty;
	uint64_t total = count_primitives(pr, pr.base, w);
	// The head slot the first append after an open writes (nvm_log.c's
	// jump_past_stale: a write and a sync), the group's three records in
	// one write (each sector of it new or old at a crash), one sync.
	CHECK(total == 2 + 2);
	sweep_result r = sweep(pr, w, images, pr.ver(), pr.ver() + 1, total, false,
			       [&] { pr.reset_work(); });
	INFO(first_problems(r));
	CHECK(r.problems.empty());
	CHECK(r.crash_points == total * sim_modes().size());
	CHECK(r.new_image > 0);
	CHECK(r.new_image < r.crash_points);
	// Once the sync returned, the epoch is kept even if every unsynced
	// write would be lost; before it, with all of them lost, it is not.
	for (uint64_t k : { total - 1, total }) {
		pr.reset_work();
		child_result c = run_child(pr.work, w, k, { 0, NVM_SIM_KEEP_OLD });
		REQUIRE(WEXITSTATUS(c.status) == NVM_SIM_CRASH_EXIT);
		outcome o = check_recovery(pr.work, images);
		INFO("crash after primitive " << k << ": " << o.problem);
		CHECK(o.problem.empty());
		CHECK(o.ver_d == (k == total ? pr.ver() + 1 : pr.ver()));
	}
}

TEST_CASE("log backend: a carried-over attempt and its redo, crashed at every write and sync",
	  "[crash][sweep][log][carried]")
{
	log_backend_scope scope;
	carried_sweep(false);
}

// Whole pages (persist.h): written straight to the file, outside the log's
// groups, so their order is the fences': the torn seq of their copies
// durable first, the pages synced before the commit that publishes them.
// Each crash point keeps the old image or the new one, whichever of the
// pages (never written, or over an older valid copy) and whatever mix with
// pages written line by line.
TEST_CASE("log backend: an epoch of whole pages, crashed at every write and sync", "[crash][sweep][log][whole]")
{
	log_backend_scope scope;
	prepared pr;
	image_map images = pr.images;
	image next = next_image(images[pr.ver()], kDirty, 41);
	images[pr.ver() + 1] = next;
	// All of them; and half (with the one never written, 15, which is
	// written whole anyway), beside pages written in place.
	const std::vector<uint64_t> half = { 0, 2, 4, 6, 8, 13, 15 };
	for (const std::vector<uint64_t> *whole : { &kDirty, &half }) {
		INFO((whole == &kDirty ? "every dirty page whole" : "half of them whole"));
		child_work w;
		w.persist = &next;
		w.dirty = &kDirty;
		w.whole = whole;
		uint64_t total = count_primitives(pr, pr.base, w);
		{
			// They were written whole, in runs: the device took the
			// pages, and fewer writes than pages.
			pr.reset_work();
			auto o = options(pr.work, kPages);
			o.create = false;
			o.nvm = NVM_LOG;
			pool *p = open_or_fail(o);
			p->whole_min = 1;
			for (uint64_t pg : *whole)
				REQUIRE(persist_test_hint_whole(p, pg));
			persist_stats st{};
			REQUIRE(persist_epoch(p, next.data(), kDirty.data(), kDirty.size(), &st) == 0);
			// (And a page whose working copy was never written: whole
			// too, rather than read to be compared.)
			CHECK(st.pages_whole >= whole->size());
			CHECK(p->nvm->stats.direct_bytes == st.pages_whole * page_size());
			pool_close(p);
		}
		sweep_result r = sweep(pr, w, images, pr.ver(), pr.ver() + 1, total, false,
				       [&] { pr.reset_work(); });
		INFO(first_problems(r));
		CHECK(r.problems.empty());
		CHECK(r.crash_points == total * sim_modes().size());
		CHECK(r.new_image > 0);
		CHECK(r.new_image < r.crash_points);
	}
}

// A copy written whole though records in the ring still touch it: a reload
// follows those records (format 7, nvm_log.h).  The pool the sweep starts
// from is left as a crash leaves it, its last two epochs in the log only
// (a line of each page rewritten in place into its valid copy, then every
// page whole into the other); the swept epoch writes the pages whole again,
// into the copies those in-place records touched.
TEST_CASE("log backend: whole pages over copies the ring still holds records for, crashed at "
	  "every write and sync", "[crash][sweep][log][whole]")
{
	log_backend_scope scope;
	prepared pr;
	image_map images = pr.images;
	const std::string base = pr.dir.file("touched.pool");
	copy_file(pr.base, base);
	image img = images[pr.ver()];
	{
		auto o = options(base, kPages);
		o.create = false;
		o.nvm = NVM_LOG;
		pool *p = open_or_fail(o);
		p->whole_min = 1;
		// In place: a line of each dirty page into its valid copy.
		img = next_image(img, {}, 0);
		for (uint64_t pg : kDirty)
			img[pg * page_size() + 64 * (pg % 64) + 2] ^= 0x77;
		REQUIRE(persist_epoch(p, img.data(), kDirty.data(), kDirty.size(), nullptr) == 0);
		images[(uint64_t)*p->ver_d] = img;
		// Whole, into the other copies.
		img = next_image(img, kDirty, 51);
		for (uint64_t pg : kDirty) {
			for (size_t b = 0; b < page_size(); b += 64)
				img[pg * page_size() + b] ^= 0x3c;
			REQUIRE(persist_test_hint_whole(p, pg));
		}
		persist_stats st{};
		REQUIRE(persist_epoch(p, img.data(), kDirty.data(), kDirty.size(), &st) == 0);
		REQUIRE(st.pages_whole == kDirty.size());
		images[(uint64_t)*p->ver_d] = img;
		p->read_only = true;	// a crash: nothing checkpointed
		pool_abandon(p);
	}
	const uint64_t ver = images.rbegin()->first;
	REQUIRE(ver == pr.ver() + 2);
	image next = next_image(img, kDirty, 52);
	for (uint64_t pg : kDirty)
		for (size_t b = 0; b < page_size(); b += 64)
			next[pg * page_size() + b + 8] ^= 0x5a;
	images[ver + 1] = next;
	child_work w;
	w.persist = &next;
	w.dirty = &kDirty;
	w.whole = &kDirty;
	uint64_t total = count_primitives(pr, base, w);
	sweep_result r = sweep(pr, w, images, ver, ver + 1, total, false,
			       [&] { copy_file(base, pr.work); });
	INFO(first_problems(r));
	CHECK(r.problems.empty());
	CHECK(r.crash_points == total * sim_modes().size());
	CHECK(r.new_image > 0);
	CHECK(r.new_image < r.crash_points);
}

TEST_CASE("log backend: a carried-over attempt of whole pages and its redo, crashed at every "
	  "write and sync", "[crash][sweep][log][carried][whole]")
{
	log_backend_scope scope;
	prepared pr;
	image_map images = pr.images;
	carried_case cc(images[pr.ver()]);
	images[pr.ver() + 1] = cc.final_img;
	child_work w = cc.work();
	// The attempt writes all its pages whole; the redo too (its pages
	// were chosen by the attempt: written whole again, or compared).
	w.whole = &kDirty;
	uint64_t total = count_primitives(pr, pr.base, w);
	sweep_result r = sweep(pr, w, images, pr.ver(), pr.ver() + 1, total, false,
			       [&] { pr.reset_work(); });
	INFO(first_problems(r));
	CHECK(r.problems.empty());
	CHECK(r.crash_points == total * sim_modes().size());
	CHECK(r.new_image > 0);
}

TEST_CASE("log backend: double crash -- records torn mid-epoch, then recovery and a second epoch "
	  "crashed at every write and sync", "[crash][double][log]")
{
	log_backend_scope scope;
	prepared pr;
	image next = next_image(pr.images[pr.ver()], kDirty, 16);
	child_work epoch;
	epoch.persist = &next;
	epoch.dirty = &kDirty;
	uint64_t total = count_primitives(pr, pr.base, epoch);
	std::string first = pr.dir.file("first.pool");
	const std::vector<uint64_t> dirty2 = { 1, 2, 4, 9, 13, 14 };
	uint64_t points = 0;
	for (uint64_t k1 = 1; k1 < total; k1++) {	// before the sync: nothing durable
		INFO("first crash after primitive " << k1);
		pr.reset_work();
		child_result c1 = run_child(pr.work, epoch, k1, { 7, NVM_SIM_RANDOM });
		REQUIRE(WEXITSTATUS(c1.status) == NVM_SIM_CRASH_EXIT);
		copy_file(pr.work, first);
		image_map images = pr.images;
		// What the first crash kept: the old epoch, or -- every record
		// complete though never synced -- the new one.
		outcome o1 = check_recovery(first, images);
		image_map with_next = images;
		with_next[pr.ver() + 1] = next;
		uint64_t v1 = o1.ver_d;
		if (!o1.problem.empty()) {
			copy_file(pr.work, first);
			o1 = check_recovery(first, with_next);
		}
		INFO(o1.problem);
		REQUIRE(o1.problem.empty());
		v1 = o1.ver_d;
		copy_file(pr.work, first);
		image_map all = v1 == pr.ver() ? images : with_next;
		image second = next_image(all[v1], dirty2, 17 + (uint32_t)k1);
		all[v1 + 1] = second;
		child_work w2;
		w2.recover = true;
		w2.persist = &second;
		w2.dirty = &dirty2;
		uint64_t total2 = count_primitives(pr, first, w2);
		sweep_result r = sweep(pr, w2, all, v1, v1 + 1, total2, false,
				       [&] { copy_file(first, pr.work); });
		INFO(first_problems(r));
		CHECK(r.problems.empty());
		CHECK(r.new_image > 0);
		points += r.crash_points;
	}
	CHECK(points > 0);
}
