/* SPDX-License-Identifier: BSD-3-Clause */
// The allocator's metadata across a simulated crash in the middle of an
// epoch (issue 3).  The heap lives in a shadow range at a fixed address; two
// epochs of allocator churn (random sizes including page runs, frees, names,
// rewritten blocks) are made; the second is persisted by a forked child
// under the strict persistence simulator (lib/persist/nvm_sim.c) that loses power
// after its k-th flush or fence, for a sweep of k over several survival
// seeds.  The parent then recovers into a fresh range at the same address
// and adopts the heap: heap_validate must pass, every block live at the epoch
// VER_d names (the old or the new one) must hold its contents and names, the
// byte count must be that epoch's, allocation must go on without overlapping
// any of them, and freeing everything must bring usage back to zero (nothing
// leaked beyond the lost epoch).  The heap then persists a further epoch
// over the recovered pool and comes back from it whole.
//
// With PMT_POOL_MEDIUM=disk (pool_medium.hpp) the pools are files on a disk
// opened with the log backend, and the child crashes the log's simulated
// device (nvm_log.h) after its k-th write or sync instead: every k, since an
// epoch there is a handful of primitives, not one per flushed line.
//
// Dirty pages are found by diffing the shadow against the previous epoch's
// image: exactly the pages a tracker would have reported with changed
// content (a page written with identical bytes persists nothing anyway).
#include "pool_test_util.h"
#include "uffd_half.h"

extern "C" {
#include "heap/heap.h"
#include "persist/nvm_log_test.h"
#include "persist/nvm_sim_test.h"
#include "runtime/meta_sums.h"
#include "quiesce/quiesce.h"
#include "recovery/restore.h"
#include "track/tracker.h"
}

#include <algorithm>
#include <map>
#include <random>
#include <sstream>

#include <sys/mman.h>

using namespace pooltest;

namespace {

// The pools' backend: msync on the pmem medium (the crashing child opens
// them with the line simulator), the log backend on a disk (the child with
// the log's simulated device).
nvm_kind pool_backend() { return pool_medium::on_disk() ? NVM_LOG : NVM_MSYNC; }

const uint64_t kBase = 0x520000000000ULL; // the shadow range (test_pool uses 0x5000...)
const size_t kHeapLen = 4u << 20;

size_t npages() { return kHeapLen / page_size(); }

// Fresh zero-filled memory at exactly kBase.
void map_shadow()
{
	void *p = mmap((void *)kBase, kHeapLen, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	REQUIRE(p == (void *)kBase);
}

void unmap_shadow() { REQUIRE(munmap((void *)kBase, kHeapLen) == 0); }

unsigned char *shadow() { return reinterpret_cast<unsigned char *>(kBase); }

// Blocks carry a fill pattern from a seed unique to the block and version,
// so a block rewritten in the second epoch differs from its first version.
unsigned char pat(uint32_t seed, size_t i) { return (unsigned char)(seed * 167u + (seed >> 9) + i * 11u + 1); }

void fill(void *p, size_t n, uint32_t seed)
{
	auto *b = static_cast<unsigned char *>(p);
	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, i);
}

bool intact(const void *p, size_t n, uint32_t seed)
{
	auto *b = static_cast<const unsigned char *>(p);
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(seed, i))
			return false;
	return true;
}

struct block {
	void *p;
	size_t size;
	uint32_t seed;
	std::string name; // "" when unnamed
};

using image = std::vector<unsigned char>;

// What an epoch made durable.
struct epoch_state {
	image img;		 // the whole heap range
	std::vector<block> live; // the blocks the program held
	uint64_t in_use;
};

uint64_t in_use()
{
	heap_stats st;
	heap_get_stats(&st);
	return st.bytes_in_use;
}

std::string check_heap()
{
	heap_validate_report r;
	if (heap_validate_full(&r) != 0)
		return err_get();
	return "";
}

size_t random_size(std::mt19937_64 &rng)
{
	switch (rng() % 10) {
	case 0: return 1 + rng() % 16;
	case 1: case 2: case 3: return 1 + rng() % 300;
	case 4: case 5: return 1 + rng() % 3584;
	case 6: case 7: return 3585 + rng() % 12000;	// small page runs
	case 8: return 16384 + rng() % 50000;
	default: return 1 + rng() % 1000;
	}
}

// Allocate/free churn over live: ops operations, some blocks named, some of
// the survivors rewritten with a new version of their pattern.
void churn(std::vector<block> &live, std::mt19937_64 &rng, int ops, uint32_t &seed, size_t max_live)
{
	for (int i = 0; i < ops; i++) {
		unsigned what = (unsigned)(rng() % 10);
		if (!live.empty() && (what < 4 || live.size() >= max_live)) {
			size_t at = rng() % live.size();
			block b = live[at];
			live[at] = live.back();
			live.pop_back();
			if (!b.name.empty())
				heap_name_remove_ptr(b.p);
			heap_free(b.p);
		} else if (!live.empty() && what < 5) {
			block &b = live[rng() % live.size()];
			b.seed = ++seed;
			fill(b.p, b.size, b.seed);
		} else {
			block b{ nullptr, random_size(rng), ++seed, "" };
			b.p = heap_malloc(b.size);
			REQUIRE(b.p != nullptr);
			fill(b.p, b.size, b.seed);
			if (rng() % 6 == 0) {
				b.name = "blk-" + std::to_string(b.seed);
				REQUIRE(heap_name_set(b.name.c_str(), b.p) == 0);
			}
			live.push_back(b);
		}
	}
}

std::vector<uint64_t> dirty_pages(const image &before)
{
	std::vector<uint64_t> d;
	const size_t ps = page_size();
	for (uint64_t i = 0; i < npages(); i++)
		if (memcmp(shadow() + i * ps, before.data() + i * ps, ps) != 0)
			d.push_back(i);
	return d;
}

// Make the shadow's current state an epoch of the pool (msync backend).
epoch_state persist_epoch(pool *p, const image &before, const std::vector<block> &live)
{
	REQUIRE(fase_depth() == 0); // a quiescent point
	std::string bad = check_heap();
	INFO(bad);
	REQUIRE(bad.empty());
	std::vector<uint64_t> d = dirty_pages(before);
	REQUIRE(!d.empty());
	persist_epoch(p, shadow(), d.data(), d.size(), nullptr);
	return { image(shadow(), shadow() + kHeapLen), live, in_use() };
}

// The prepared pool: epoch 1 durable in base; the image of epoch 2 and its
// dirty pages, to be persisted by the crashing child.
struct prepared {
	scratch_dir dir;
	std::string base, work;
	std::map<uint64_t, epoch_state> epochs; // VER_d -> state
	std::vector<uint64_t> dirty2;

	// idiom: the epochs of idiom_runs() instead of the churn.
	explicit prepared(bool idiom = false) : base(dir.file("base.pool")), work(dir.file("work.pool"))
	{
		pool_open_options o = opts(base);
		pool *p = open_or_fail(o);
		meta_sums_bind(p); // metadata pages verified, as in the runtime
		pool_set_clean(p, false);
		map_shadow();
		REQUIRE(heap_init(shadow(), kHeapLen, true) == 0);
		if (idiom)
			idiom_runs(p);
		else
			churn_epochs(p);
		REQUIRE(dirty2.size() > 10);
		REQUIRE(page_size() == 4096);
		meta_sums_bind(nullptr);
		pool_close(p);
		unmap_shadow();
	}

	void churn_epochs(pool *p)
	{
		std::mt19937_64 rng(2024);
		uint32_t seed = 0;
		std::vector<block> live;
		churn(live, rng, 1500, seed, 120);
		epochs[1] = persist_epoch(p, image(kHeapLen, 0), live);
		REQUIRE(*p->ver_d == 1);
		// Epoch 2: frees (named blocks too), new blocks, rewrites.
		churn(live, rng, 150, seed, 120);
		image before = epochs[1].img;
		epochs[2] = { image(shadow(), shadow() + kHeapLen), live, in_use() };
		dirty2 = dirty_pages(before);
	}

	// NVthreads' idiom over two runs.  Run 1 names kIdiomNames objects
	// (epoch 1).  Run 2 adopts the heap again and nvmallocs every name:
	// a third it recovers into the new object (the held one is freed), a
	// third into memory of its own and then writes into the new object (a
	// program going on from the copy), a third it leaves held (epoch 2).
	void idiom_runs(pool *p)
	{
		for (int i = 0; i < kIdiomNames; i++) {
			void *q = heap_name_alloc(idiom_name(i).c_str(), idiom_size(i));
			REQUIRE(q != nullptr);
			fill(q, idiom_size(i), idiom_seed(i));
		}
		epochs[1] = persist_epoch(p, image(kHeapLen, 0), {});
		REQUIRE(heap_init(shadow(), kHeapLen, false) == 0);
		for (int i = 0; i < kIdiomNames; i++) {
			std::string name = idiom_name(i);
			size_t n = idiom_size(i);
			void *q = heap_name_alloc(name.c_str(), n);
			REQUIRE(q != nullptr);
			if (i % 3 == 0) {
				REQUIRE(heap_name_recover(name.c_str(), q, n, nullptr) == 0);
			} else if (i % 3 == 1) {
				std::vector<unsigned char> mine(n);
				REQUIRE(heap_name_recover(name.c_str(), mine.data(), n, nullptr) == 0);
				memcpy(q, mine.data(), n);
			}
		}
		REQUIRE(heap_name_held() == (uint64_t)(kIdiomNames - (kIdiomNames + 2) / 3));
		image before = epochs[1].img;
		epochs[2] = persist_state();
		dirty2 = dirty_pages(before);
	}
	epoch_state persist_state() { return { image(shadow(), shadow() + kHeapLen), {}, in_use() }; }
	static const int kIdiomNames = 24;
	static std::string idiom_name(int i) { return "nvt-" + std::to_string(i) + std::string(100, 'x'); }
	static size_t idiom_size(int i) { return i % 4 == 3 ? 5000 + (size_t)i : 40 + 13 * (size_t)i; }
	static uint32_t idiom_seed(int i) { return 7000 + (uint32_t)i; }

	pool_open_options opts(const std::string &path)
	{
		pool_open_options o = options(path, npages());
		o.shadow_base = kBase;
		o.nvm = pool_backend();
		return o;
	}

	// Reset work to base.  Rewriting the same file in place (it never
	// changes size) only copies bytes into pages tmpfs already holds: far
	// cheaper than a new file each time, which made the sweep twice as slow.
	void reset_work()
	{
		if (base_bytes.empty())
			base_bytes = file_snapshot::of(base).bytes;
		int out = open(work.c_str(), O_WRONLY | O_CREAT, 0600);
		REQUIRE(out >= 0);
		REQUIRE(pwrite(out, base_bytes.data(), base_bytes.size(), 0) == (ssize_t)base_bytes.size());
		close(out);
	}
	std::vector<unsigned char> base_bytes;
};

// The child: open work with the simulator and persist epoch 2; crashes after
// crash_after primitives (0: never; then reports the count through fd).
int crash_child(prepared &pr, uint64_t crash_after, uint64_t seed, nvm_sim_survival surv, int fd)
{
	return in_child([&] {
		nvm_sim_options so{};
		so.seed = seed;
		so.survival = surv;
		so.crash_after = crash_after;
		pool_open_options o = pr.opts(pr.work);
		o.create = false;
		o.nvm = pool_backend() == NVM_LOG ? NVM_LOG : NVM_SIM;
		o.sim = &so;
		pool *p = nullptr;
		if (pool_open(&p, &o) != 0)
			_exit(10);
		const image &img = pr.epochs[2].img;
		persist_epoch(p, img.data(), pr.dirty2.data(), pr.dirty2.size(), nullptr);
		uint64_t prims = pool_backend() == NVM_LOG ? nvm_log_primitives(p->nvm)
							    : nvm_sim_primitives(p->nvm);
		if (fd >= 0 && write(fd, &prims, sizeof(prims)) != (ssize_t)sizeof(prims))
			_exit(11);
		_exit(0);
	});
}

// How recover_and_check brings the image back: 0 recovery_restore_image (a copy),
// 1 the runtime's lazy restore (restore.h: pages restored on first touch by
// heap_init and the churn, the next epoch's pages collected by the uffd
// tracker), 2 the same with the background pass racing them.
int restore_path = 0;

// Recover work into a fresh range at kBase and check the heap thoroughly;
// returns the recovered VER_d.  Leaves the range mapped and the pool closed.
uint64_t recover_and_check(prepared &pr, std::mt19937_64 &rng)
{
	pool_open_options o = pr.opts(pr.work);
	o.create = false;
	pool *p = open_or_fail(o);
	meta_sums_bind(p); // adoption verifies the metadata pages as restored
	uint64_t ver = *p->ver_d;
	INFO("recovered VER_d " << ver);
	REQUIRE(pr.epochs.count(ver) == 1);
	const epoch_state &es = pr.epochs[ver];
	map_shadow();
	restore *r = nullptr;
	tracker *t = nullptr;
	if (restore_path == 0) {
		recovery_restore_image(p, shadow());
		// (test_crash shows the image is byte-exact; here it is a
		// precondition.)
		REQUIRE(memcmp(shadow(), es.img.data(), kHeapLen) == 0);
	} else {
		restore_options ro{};
		ro.policy = RESTORE_LAZY;
		ro.no_background = restore_path == 1;
		REQUIRE(restore_open(&r, &t, p, shadow(), kHeapLen, TRACKER_UFFD, &ro) == 0);
		REQUIRE(r != nullptr);
	}

	{
		int rc = heap_init(shadow(), kHeapLen, false);
		INFO(err_get());
		REQUIRE(rc == 0);
	}
	std::string bad = check_heap();
	INFO(bad);
	REQUIRE(bad.empty());
	REQUIRE(in_use() == es.in_use);
	for (const block &b : es.live) {
		REQUIRE(intact(b.p, b.size, b.seed));
		REQUIRE(heap_usable_size(b.p) >= b.size);
		if (!b.name.empty()) {
			size_t usable = 0;
			REQUIRE(heap_name_get(b.name.c_str(), &usable) == b.p);
			REQUIRE(usable >= b.size);
		}
	}
	// Names freed in the epoch are gone, those of the other epoch unknown.
	for (auto &e : pr.epochs)
		for (const block &b : e.second.live)
			if (!b.name.empty() &&
			    std::none_of(es.live.begin(), es.live.end(), [&](const block &x) { return x.name == b.name; }))
				REQUIRE(heap_name_get(b.name.c_str(), nullptr) == nullptr);

	// Keep allocating (and freeing): nothing new overlaps a survivor.
	std::vector<block> live = es.live;
	uint32_t seed = 1000000;
	churn(live, rng, 600, seed, 400);
	std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
	for (const block &b : live)
		ranges.push_back({ (uintptr_t)b.p, (uintptr_t)b.p + b.size });
	std::sort(ranges.begin(), ranges.end());
	for (size_t i = 0; i + 1 < ranges.size(); i++)
		REQUIRE(ranges[i].second <= ranges[i + 1].first);
	for (const block &b : live)
		REQUIRE(intact(b.p, b.size, b.seed));
	bad = check_heap();
	REQUIRE(bad.empty());

	// A further epoch over the recovered pool (its torn copies were
	// invalidated by recovery_restore_image), then recover that one as well.
	std::vector<uint64_t> d;
	if (restore_path == 0) {
		d = dirty_pages(es.img);
	} else {
		// What the tracker saw written since the restore: every page
		// whose content changed must be among them.
		d.resize(npages());
		d.resize(tracker_collect_dirty(t, d.data(), d.size()));
		for (uint64_t pg : dirty_pages(es.img))
			REQUIRE(std::binary_search(d.begin(), d.end(), pg));
	}
	if (!d.empty())
		persist_epoch(p, shadow(), d.data(), d.size(), nullptr);
	restore_close(r);
	tracker_close(t);
	image after(shadow(), shadow() + kHeapLen);
	uint64_t use_after = in_use();
	meta_sums_bind(nullptr);
	pool_close(p);
	unmap_shadow();
	p = open_or_fail(o);
	meta_sums_bind(p);
	map_shadow();
	recovery_restore_image(p, shadow());
	REQUIRE(memcmp(shadow(), after.data(), kHeapLen) == 0);
	{
		int rc = heap_init(shadow(), kHeapLen, false);
		INFO(err_get());
		REQUIRE(rc == 0);
	}
	meta_sums_bind(nullptr);
	pool_close(p);
	bad = check_heap();
	REQUIRE(bad.empty());
	REQUIRE(in_use() == use_after);

	// No leak: freeing every live block (and its name) empties the heap.
	for (const block &b : live) {
		REQUIRE(intact(b.p, b.size, b.seed));
		if (!b.name.empty())
			heap_name_remove_ptr(b.p);
		heap_free(b.p);
	}
	REQUIRE(in_use() == 0);
	// Nothing parked in a cache either: this thread's is handed back, and
	// those of the threads that "died" in the crash went back at adoption.
	heap_thread_exit();
	heap_validate_report rep;
	REQUIRE(heap_validate_full(&rep) == 0);
	REQUIRE(rep.names == 0);
	REQUIRE(rep.user_bytes == 0);
	REQUIRE(rep.cached_bytes == 0);
	unmap_shadow();
	return ver;
}

} // namespace

// Recovered by copying in heap-crash, by lazy restore (with and without the
// background pass) in heap-crash-uffd (uffd_half.h).
TEST_CASE("allocator metadata survives a crash in the middle of an epoch", "[heap][crash][trackers]")
{
	prepared pr;
	INFO("epoch 2 persists " << pr.dirty2.size() << " dirty pages");

	// Without a crash: the new epoch comes back.
	std::mt19937_64 rng(99);
	pr.reset_work();
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	int st = crash_child(pr, 0, 0, NVM_SIM_RANDOM, fds[1]);
	close(fds[1]);
	REQUIRE((WIFEXITED(st) && WEXITSTATUS(st) == 0));
	uint64_t prims = 0;
	REQUIRE(read(fds[0], &prims, sizeof(prims)) == (ssize_t)sizeof(prims));
	close(fds[0]);
	// The line simulator: a flush per changed line; the log: the epoch's
	// group in one write, a sync, and the head slot's write and sync.
	REQUIRE(prims > (pool_backend() == NVM_LOG ? 1 : 10));
	INFO("epoch 2 takes " << prims << " primitives");
	REQUIRE(recover_and_check(pr, rng) == 2);

	// The sweep: every 7th primitive, at an offset per survival mode so the
	// modes together cover different points; the last primitive (the VER_d
	// fence) and the one before it always.
	struct mode {
		uint64_t seed;
		nvm_sim_survival surv;
	};
	std::vector<mode> modes = { { 0, NVM_SIM_KEEP_OLD }, { 0, NVM_SIM_KEEP_NEW }, { 11, NVM_SIM_RANDOM },
				    { 12, NVM_SIM_RANDOM } };
	const uint64_t stride = pool_backend() == NVM_LOG ? 1 : 7;
	std::map<uint64_t, unsigned> seen; // VER_d -> count
	for (size_t m = 0; m < modes.size(); m++) {
		std::vector<uint64_t> ks;
		for (uint64_t k = 1 + m; k < prims; k += stride)
			ks.push_back(k);
		ks.push_back(prims - 1);
		ks.push_back(prims);
		for (uint64_t k : ks) {
			INFO("crash after primitive " << k << " of " << prims << ", mode " << m);
			pr.reset_work();
			st = crash_child(pr, k, modes[m].seed, modes[m].surv, -1);
			REQUIRE(WIFEXITED(st));
			REQUIRE(WEXITSTATUS(st) == NVM_SIM_CRASH_EXIT);
			restore_path = uffd_half() ? 1 + (int)(k % 2) : 0;
			INFO("restore path " << restore_path);
			seen[recover_and_check(pr, rng)]++;
		}
	}
	// Both outcomes occurred: crashes before the VER_d fence and at it.
	REQUIRE(seen[1] > 0);
	REQUIRE(seen[2] > 0);
}

namespace {

// After idiom_runs' epoch 2 crashed at some point: recover, adopt (run 3),
// and run the idiom once more: every name gives back its run-1 data,
// whichever epoch survived, and nothing is left once the names are freed.
uint64_t recover_idiom_and_check(prepared &pr)
{
	pool_open_options o = pr.opts(pr.work);
	o.create = false;
	pool *p = open_or_fail(o);
	meta_sums_bind(p);
	uint64_t ver = *p->ver_d;
	INFO("recovered VER_d " << ver);
	REQUIRE(pr.epochs.count(ver) == 1);
	map_shadow();
	recovery_restore_image(p, shadow());
	REQUIRE(memcmp(shadow(), pr.epochs[ver].img.data(), kHeapLen) == 0);
	{
		int rc = heap_init(shadow(), kHeapLen, false);
		INFO(err_get());
		REQUIRE(rc == 0);
	}
	meta_sums_bind(nullptr);
	pool_close(p);
	std::string bad = check_heap();
	INFO(bad);
	REQUIRE(bad.empty());
	REQUIRE(in_use() == pr.epochs[ver].in_use);
	for (int i = 0; i < prepared::kIdiomNames; i++) {
		std::string name = prepared::idiom_name(i);
		size_t n = prepared::idiom_size(i);
		INFO("name " << i);
		void *q = heap_name_alloc(name.c_str(), n);
		REQUIRE(q != nullptr);
		REQUIRE(heap_name_recover(name.c_str(), q, n, nullptr) == 0);
		REQUIRE(intact(q, n, prepared::idiom_seed(i)));
	}
	REQUIRE(heap_name_held() == 0);
	bad = check_heap();
	REQUIRE(bad.empty());
	for (int i = 0; i < prepared::kIdiomNames; i++)
		heap_free(heap_name_get(prepared::idiom_name(i).c_str(), nullptr));
	REQUIRE(in_use() == 0);
	heap_validate_report rep;
	REQUIRE(heap_validate_full(&rep) == 0);
	REQUIRE(rep.names == 0);
	REQUIRE(rep.held == 0);
	unmap_shadow();
	return ver;
}

} // namespace

// NVthreads' idiom (nvmalloc of an earlier run's name holds its object,
// nvrecover copies and frees it) is failure-atomic: a crash at any point of
// the epoch that made run 2's holds, copies and frees durable leaves every
// name's data recoverable by the next run.
TEST_CASE("NVthreads' idiom survives a crash in the middle of an epoch", "[heap][crash]")
{
	prepared pr(true);
	INFO("epoch 2 persists " << pr.dirty2.size() << " dirty pages");
	pr.reset_work();
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	int st = crash_child(pr, 0, 0, NVM_SIM_RANDOM, fds[1]);
	close(fds[1]);
	REQUIRE((WIFEXITED(st) && WEXITSTATUS(st) == 0));
	uint64_t prims = 0;
	REQUIRE(read(fds[0], &prims, sizeof(prims)) == (ssize_t)sizeof(prims));
	close(fds[0]);
	REQUIRE(recover_idiom_and_check(pr) == 2);

	std::map<uint64_t, unsigned> seen;
	const nvm_sim_survival modes[] = { NVM_SIM_KEEP_OLD, NVM_SIM_RANDOM };
	for (unsigned m = 0; m < 2; m++) {
		std::vector<uint64_t> ks;
		for (uint64_t k = 1 + 3 * m; k < prims; k += pool_backend() == NVM_LOG ? 1 : 9)
			ks.push_back(k);
		ks.push_back(prims - 1);
		ks.push_back(prims);
		for (uint64_t k : ks) {
			INFO("crash after primitive " << k << " of " << prims << ", mode " << m);
			pr.reset_work();
			st = crash_child(pr, k, 31 + m, modes[m], -1);
			REQUIRE(WIFEXITED(st));
			REQUIRE(WEXITSTATUS(st) == NVM_SIM_CRASH_EXIT);
			seen[recover_idiom_and_check(pr)]++;
		}
	}
	REQUIRE(seen[1] > 0);
	REQUIRE(seen[2] > 0);
}
