/* SPDX-License-Identifier: BSD-3-Clause */
// End-to-end tests of the interposition layer: ordinary pthread programs
// (tests/progs/, built without any link to pmthreads) run natively and under
// LD_PRELOAD=libpmthreads.so -- interception only (nvmalloc mode, no pool)
// and with the persistent heap behind malloc under each tracker -- must print
// exactly the same, and the statistics must show epochs happening.
#include "pool_medium.hpp"
#include "subprocess.hpp"
#include "uffd_half.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {
using namespace subprocess;

// The epoch log (PMTHREADS_EPOCH_LOG) must agree line by line with the
// totals of the stats report written at the same exit.
void check_epoch_log(const std::string &log, const std::string &json)
{
	std::istringstream in(slurp(log));
	std::string line;
	REQUIRE(std::getline(in, line));
	CHECK(line == "t_ms,epoch,pause_us,pages,bytes_dirty,bytes_written,stage_us,persist_us,"
		      "period_us,pages_saved,conflicts,durable,output_demanded,output_released,"
		      "device_flushes,device_bytes");
	unsigned long long lines = 0, pages = 0, written = 0, last_epoch = 0, carried = 0;
	unsigned long long conflicts_total = 0, flushes_total = 0, dev_bytes_total = 0;
	double last_t = -1;
	while (std::getline(in, line)) {
		INFO("epoch log line: " << line);
		double t;
		unsigned long long epoch, pause, pg, dirty, wr, stage, persist, period, saved, conflicts;
		int durable, demanded;
		unsigned long long released, flushes, dev_bytes;
		REQUIRE(std::sscanf(line.c_str(),
				    "%lf,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%d,%d,%llu,%llu,%llu",
				    &t, &epoch, &pause, &pg, &dirty, &wr, &stage, &persist, &period,
				    &saved, &conflicts, &durable, &demanded, &released, &flushes,
				    &dev_bytes) == 16);
		flushes_total += flushes;
		dev_bytes_total += dev_bytes;
		// No output commit here: nothing demanded or released.
		CHECK(demanded == 0);
		CHECK(released == 0);
		CHECK(saved <= pg);
		CHECK(saved + conflicts <= pg);
		// Carried over exactly when pages read live were written.
		CHECK((durable == 0) == (conflicts > 0));
		carried += durable == 0;
		conflicts_total += conflicts;
		// The first epoch has no period; every later one began after the
		// previous one.
		if (lines > 0)
			CHECK(period > 0);
		CHECK(t >= last_t);
		CHECK(epoch >= last_epoch); // an empty epoch does not advance VER_d
		CHECK(dirty == pg * 4096);
		CHECK(wr <= dirty);
		CHECK(persist >= stage);
		last_t = t;
		last_epoch = epoch;
		lines++;
		pages += pg;
		written += wr;
	}
	CHECK(lines == (unsigned long long)json_number(json, "epochs"));
	CHECK(carried == (unsigned long long)json_number(json, "carried_epochs"));
	CHECK(conflicts_total == (unsigned long long)json_number(json, "conflict_pages"));
	CHECK(pages == (unsigned long long)json_number(json, "pages_persisted"));
	CHECK(written == (unsigned long long)json_number(json, "bytes_written"));
	// The lines count the device's work of the epochs; the report also has
	// the opening's and the exit's.
	CHECK(flushes_total <= (unsigned long long)json_number(json, "device_flushes"));
	CHECK(dev_bytes_total <= (unsigned long long)json_number(json, "device_bytes"));
}

// The report's keys: one JSON object, a field a line, a comma after each
// but the last.
std::vector<std::string> report_keys(const std::string &json)
{
	std::istringstream in(json);
	std::string line;
	std::vector<std::string> keys;
	REQUIRE(std::getline(in, line));
	CHECK(line == "{");
	bool closed = false, comma = true;
	while (std::getline(in, line)) {
		if (line == "}") {
			CHECK_FALSE(comma);
			closed = true;
			continue;
		}
		INFO("report line: " << line);
		CHECK_FALSE(closed);
		CHECK(comma);
		comma = !line.empty() && line.back() == ',';
		REQUIRE(line.rfind("  \"", 0) == 0);
		auto end = line.find("\": ", 3);
		REQUIRE(end != std::string::npos);
		keys.push_back(line.substr(3, end - 3));
	}
	CHECK(closed);
	return keys;
}

// Every key the report had before its fields came from the modules' lists
// (issue 25), in the order they stood then: tools and the soak read them by
// name, so none may go away.
const char *const keys_before_lists[] = {
	"heap_mode", "tracker", "persistence", "io_error", "interval_ms", "wall_s", "epochs",
	"epochs_persisted", "epochs_empty", "abandoned", "syncs", "pause_ns_p50", "pause_ns_p99",
	"pause_ns_max", "pause_ns_total", "abandoned_ns_total", "blocking_in_fase", "membarrier",
	"period_ns_p50", "period_ns_p99", "period_ns_max", "period_ns_mean", "late_epochs",
	"late_ns_total", "output_commit", "output_writes_held", "output_bytes_held",
	"output_bytes_released", "output_bytes_dropped", "output_epochs_demanded",
	"output_waits_full", "output_over_bound_in_fase", "output_release_errors",
	"output_hold_ns_p50", "output_hold_ns_p99", "output_hold_ns_max", "pages_persisted",
	"lines_written", "bytes_written", "bytes_compared", "fences", "persist_ns", "stage_ns",
	"pages_saved", "pages_unchanged", "paused_epochs", "carried_epochs", "conflict_pages", "pool_bytes_populated",
	"slot_bytes_resident", "slot_shrinks", "restore", "recovered_pages", "recovery_ns",
	"startup_ns", "restore_complete_ns", "restored_eager", "restored_on_fault",
	"restored_background", "restored_finish", "restore_zero_fills", "heap_reset_bytes",
	"tracker_faults", "tracker_collections", "tracker_pages", "tracker_overflows",
	"tracker_scan_errors", "tracker_rescans", "tracker_rescan_failures",
};
// Counters the report did not write before the lists.
const char *const keys_added_with_lists[] = {
	"copies_chosen", "restore_kernel_faults", "heap_bytes_in_use", "heap_bytes_mapped",
	"heap_capacity", "nvm_flushes", "nvm_lines_flushed", "nvm_fences", "nvm_errors",
	"nvm_fences_skipped", "checker_writes_checked", "checker_unlocked_writes",
	"checker_sites_reported", "checker_sites_dropped", "nvm",
};

void check_report_keys(const std::string &json)
{
	std::vector<std::string> keys = report_keys(json);
	std::map<std::string, int> seen;
	for (const std::string &k : keys)
		seen[k]++;
	for (const auto &[k, n] : seen) {
		INFO("key " << k);
		CHECK(n == 1);
	}
	for (const char *k : keys_before_lists) {
		INFO("key " << k);
		CHECK(seen.count(k) == 1);
	}
	for (const char *k : keys_added_with_lists) {
		INFO("key " << k);
		CHECK(seen.count(k) == 1);
	}
}

// Run prog natively and in every mode; return the stats JSON of each mode
// (and, when errs is given, each mode's standard error).  A program that
// calls nvmalloc (uses_nvmalloc) persists in the nvmalloc mode too.
std::map<std::string, std::string> compare_with_native(const std::string &prog,
						       unsigned interval_ms = 10,
						       std::map<std::string, std::string> *errs = nullptr,
						       bool uses_nvmalloc = false)
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	std::string path = progs + "/" + prog;
	run_result native = run({ path }, {});
	REQUIRE(native.status == 0);
	REQUIRE_FALSE(native.out.empty());
	scratch_dir dir;
	std::map<std::string, std::string> stats;
	for (const preload_mode &m : preload_modes()) {
		INFO(prog << ": " << m.name);
		std::string json = dir.path + "/" + m.heap + "-" + m.tracker + ".json";
		std::string epoch_log = dir.path + "/" + m.heap + "-" + m.tracker + ".epochs.csv";
		run_result r = run({ path }, {
						     { "LD_PRELOAD", lib },
						     { "PMTHREADS_POOL", dir.path + "/" + m.heap + "-" + m.tracker + ".pool" },
						     { "PMTHREADS_POOL_SIZE", "64M" },
						     { "PMTHREADS_HEAP", m.heap },
						     { "PMTHREADS_TRACKER", m.tracker },
						     { "PMTHREADS_INTERVAL_MS", std::to_string(interval_ms) },
						     { "PMTHREADS_STATS", json },
						     { "PMTHREADS_EPOCH_LOG", epoch_log },
					     });
		INFO("stderr: " << r.err);
		CHECK(r.status == 0);
		CHECK(r.out == native.out);
		if (errs != nullptr)
			(*errs)[m.name] = r.err;
		std::string s = slurp(json);
		REQUIRE_FALSE(s.empty());
		check_report_keys(s);
		CHECK(json_text(s, "heap_mode") == std::string("\"") + m.heap + "\"");
		bool persisted = std::strcmp(m.heap, "malloc") == 0 || uses_nvmalloc;
		CHECK(json_text(s, "persistence") == (persisted ? "true" : "false"));
		if (persisted) {
			CHECK(json_number(s, "epochs") >= 1); // the final epoch at least
			CHECK(json_number(s, "pages_persisted") > 0);
			// Figures the runtime hands to the report: the closed
			// tracker's, the pool's write-back's, the heap's.
			if (std::strcmp(m.tracker, "auto") != 0)
				CHECK(json_text(s, "tracker") == std::string("\"") + m.tracker + "\"");
			CHECK(json_number(s, "tracker_collections") >= json_number(s, "epochs_persisted"));
			CHECK(json_number(s, "nvm_fences") >= json_number(s, "fences"));
			CHECK(json_number(s, "heap_capacity") > 0);
			// In the nvmalloc mode too: no quiescent point is made
			// before the first nvmalloc opened the pool.
			check_epoch_log(epoch_log, s);
		} else {
			// Nothing to persist: the runtime starts no epoch thread,
			// so no gate ever closes on the program's locks.
			CHECK(json_number(s, "gate_closings") == 0);
			CHECK(json_number(s, "epochs") == 0);
		}
		stats[m.name] = s;
	}
	return stats;
}
} // namespace

TEST_CASE("producer/consumer with condition variables", "[preload][trackers]")
{
	compare_with_native("prog_prodcons");
}

TEST_CASE("readers and writers with rwlocks", "[preload][trackers]")
{
	compare_with_native("prog_rwlock");
}

TEST_CASE("nested, hand-over-hand, try, timed and spin locks", "[preload][trackers]")
{
	compare_with_native("prog_locks");
}

TEST_CASE("short-lived and detached threads", "[preload][trackers]")
{
	compare_with_native("prog_shortthreads");
}

TEST_CASE("detached threads exit while the heap is write-protected", "[preload][trackers]")
{
	// A detached thread frees glibc's cached stacks (their DTVs) with all
	// its signals blocked; under the mprotect tracker a DTV in the
	// persistent heap made that free fault on a clean page, which killed
	// the process (SIGSEGV, every run of this program).
	compare_with_native("prog_detachedexit");
}

TEST_CASE("threads that block every signal write the heap; handler masks too", "[preload][trackers]")
{
	// xz and zstd create their threads with every signal blocked: under
	// the mprotect tracker a first write to a heap page with SIGSEGV
	// blocked ended the process (the kernel forces the default action).
	// SIGSEGV stays unblocked, and the program reads back the mask it set.
	compare_with_native("prog_sigmasks");
}

TEST_CASE("a thread parked in read() does not stop epochs", "[preload][trackers]")
{
	// 400 ms of work at a 10 ms interval: about 40 epochs are due.
	for (auto &kv : compare_with_native("prog_blockedread")) {
		INFO(kv.first << "\n" << kv.second);
		// Where there are epochs (a pool is open): had the parked reader
		// stalled the gate, every attempt would be abandoned; an
		// overloaded machine may deschedule a lock holder past the
		// bound now and then.
		if (json_text(kv.second, "persistence") != "true")
			continue;
		CHECK(json_number(kv.second, "epochs") >= 10);
		CHECK(json_number(kv.second, "abandoned") * 2 < json_number(kv.second, "epochs"));
	}
}

TEST_CASE("semaphore waits and joins under a lock do not deadlock and are counted", "[preload][trackers]")
{
	for (auto &kv : compare_with_native("prog_blockwait")) {
		INFO(kv.first << "\n" << kv.second);
		if (json_text(kv.second, "persistence") == "true")
			CHECK(json_number(kv.second, "blocking_in_fase") == 2);
	}
}

TEST_CASE("fork with and without exec", "[preload][trackers]")
{
	compare_with_native("prog_forkexec");
}

TEST_CASE("the old pthread_cond_wait version is interposed too", "[preload][trackers]")
{
	// A thread waits 300 ms in the GLIBC_2.2.5 wait while epochs are due
	// every 10 ms: had the wait not released the FASE, epochs would be
	// abandoned about every 30 ms (and few would happen).
	for (auto &kv : compare_with_native("prog_oldcond")) {
		INFO(kv.first << "\n" << kv.second);
		if (json_text(kv.second, "persistence") != "true")
			continue;	// no epochs without a pool
		CHECK(json_number(kv.second, "abandoned") < 4);
		CHECK(json_number(kv.second, "epochs") >= 8);
	}
}

TEST_CASE("libc's own reads into malloc'd memory (stdio, getpwuid, epoll, poll)", "[preload][trackers]")
{
	// Under the mprotect tracker these failed with EFAULT: glibc fills a
	// stream buffer it malloc'd with an internal read(2), and event loops
	// keep epoll/poll arrays in malloc'd memory.
	compare_with_native("prog_libcreads");
}

TEST_CASE("kernel writes into malloc'd memory: addresses, links, stat, getrandom, "
	  "opendir, getcwd(NULL)", "[preload][trackers]")
{
	// Under the mprotect tracker getcwd(NULL, 0) failed with EFAULT (glibc
	// mallocs the result and has the kernel fill it), and so would any of
	// these system calls given a clean heap page.
	compare_with_native("prog_kernelwrites");
}

TEST_CASE("fread into the heap from a pipe whose data comes after epochs", "[preload][trackers]")
{
	// The pre-fault of fread's buffer was undone by the epochs that ran
	// while glibc's read(2) waited: EFAULT, a short fread and the stream's
	// error flag under the mprotect tracker.
	compare_with_native("prog_freadwait");
}

TEST_CASE("every entry point of the system call table writes into a clean heap page as natively",
	  "[preload][trackers]")
{
	// prog_syscall_outputs is generated from lib/runtime/syscall_outputs.tab:
	// each call with a test: there, its output in a heap page the mprotect
	// tracker has write-protected again.  Under that tracker pipe,
	// socketpair, waitpid, uname, sysinfo, getrlimit, statfs,
	// sched_getaffinity, sigprocmask's old set, getdents64, ioctl and the
	// raw syscall(2) failed with EFAULT (136 of its 156 calls without the
	// pins).  Both heap modes under this half's tracker: the page
	// nvmalloc'd in the nvmalloc mode, malloc'd in the malloc mode.
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	std::string path = progs + "/prog_syscall_outputs";
	run_result native = run({ path }, {});
	INFO("native stderr: " << native.err);
	REQUIRE(native.status == 0);
	REQUIRE(native.out.find("syscall(pipe): ok") != std::string::npos);
	const char *tracker = uffd_half() ? "uffd" : "mprotect";
	for (const char *heap : { "nvmalloc", "malloc" }) {
		INFO(heap << " heap, " << tracker << " tracker");
		scratch_dir dir;
		std::string json = dir.path + "/stats.json";
		run_result r = run({ path }, {
						     { "LD_PRELOAD", lib },
						     { "PMTHREADS_POOL", dir.path + "/p.pool" },
						     { "PMTHREADS_POOL_SIZE", "64M" },
						     { "PMTHREADS_HEAP", heap },
						     { "PMTHREADS_TRACKER", tracker },
						     { "PMTHREADS_INTERVAL_MS", "10" },
						     { "PMTHREADS_STATS", json },
					     });
		INFO("stderr: " << r.err);
		CHECK(r.status == 0);
		CHECK(r.out == native.out);
		std::string s = slurp(json);
		REQUIRE_FALSE(s.empty());
		// The pages were persisted: a tracker ran over them.
		CHECK(json_text(s, "persistence") == "true");
		CHECK(json_text(s, "tracker") == std::string("\"") + tracker + "\"");
		CHECK(json_number(s, "epochs") >= 2);
	}
}

TEST_CASE("poll, ppoll, select and pselect on the heap that wait across epochs end as natively",
	  "[preload][trackers]")
{
	// Under the mprotect tracker the kernel's write-back of revents into
	// a page an epoch protected during the wait failed with EFAULT: a
	// timeout came back as an error five timeouts later, a signal's EINTR
	// was lost.
	compare_with_native("prog_pollwait");
}

TEST_CASE("a read of a regular file into a cold heap buffer is whole though an epoch protects it "
	  "meanwhile", "[preload][trackers]")
{
	// Under the mprotect tracker an epoch between the pre-fault and the
	// kernel's copy stopped the copy at a protected page: read() returned
	// a short count (seen in persist-e2e under load: 45,056 of 307,323
	// bytes).  Probabilistic: a few rounds in a thousand hit the window.
	compare_with_native("prog_readrace", 1);
}

TEST_CASE("the runtime's descriptors survive close_range, closefrom, close, dup2 and fd limits",
	  "[preload][trackers]")
{
	// varnishd calls close_range(3, ~0U) at start: the pool, the epoch log,
	// pagemap and the userfaultfd were closed and their numbers reused by
	// its pipes.  The program sees the numbers it sees natively, its own
	// file gets none of the runtime's output, every step is durable, the
	// epoch log agrees with the report (compare_with_native), the pool
	// stays locked, and nothing is said on standard error.
	std::map<std::string, std::string> errs;
	compare_with_native("prog_ownfds", 10, &errs, true);
	for (auto &kv : errs) {
		INFO(kv.first << "\n" << kv.second);
		CHECK(kv.second.find("pmthreads:") == std::string::npos);
		CHECK(kv.second.find("ownfds:") == std::string::npos);
	}
	// Killed after its last durable step, then recovered.
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	for (const preload_mode &m : preload_modes()) {
		INFO(m.name);
		scratch_dir dir;
		std::map<std::string, std::string> env = {
			{ "LD_PRELOAD", lib },
			{ "PMTHREADS_POOL", dir.path + "/p.pool" },
			{ "PMTHREADS_POOL_SIZE", "64M" },
			{ "PMTHREADS_HEAP", m.heap },
			{ "PMTHREADS_TRACKER", m.tracker },
			{ "PMTHREADS_INTERVAL_MS", "10" },
		};
		run_result crashed = run({ progs + "/prog_ownfds", "crash" }, env);
		INFO(crashed.describe());
		REQUIRE(crashed.killed());
		CHECK(crashed.out.find("steps: 9\n") != std::string::npos);
		run_result check = run({ progs + "/prog_ownfds", "check" }, env);
		INFO(check.describe());
		CHECK(check.status == 0);
		CHECK(check.out == "recovered 9 steps, crashed: yes\n");
	}
}

TEST_CASE("the pmthreads launcher preloads the library", "[preload]")
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	std::string launcher = env_or_fail("PMT_LAUNCHER");
	scratch_dir dir;
	std::string json = dir.path + "/stats.json";
	run_result native = run({ progs + "/prog_locks" }, {});
	run_result r = run({ launcher, "run", "--stats", json, "--interval", "5", "--",
			     progs + "/prog_locks" },
			   { { "PMTHREADS_LIBRARY", lib } });
	INFO(r.err);
	CHECK(r.status == 0);
	CHECK(r.out == native.out);
	std::string s = slurp(json);
	CHECK(json_number(s, "interval_ms") == 5);
	run_result usage = run({ launcher, "bogus" }, {});
	CHECK(usage.status == 2);
	CHECK(usage.err.find("pmthreads --help") != std::string::npos);
}

namespace {
// A FASE-depth probe (tests/progs/c11fase.c, ompfase.c) under the preload,
// with the runtime started (malloc heap) and this half's tracker.
void run_probe(const std::string &prog, const char *tracker,
	       std::map<std::string, std::string> extra_env = {})
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	scratch_dir dir;
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", lib },
		{ "PMTHREADS_POOL", dir.path + "/probe.pool" },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_TRACKER", tracker },
		{ "PMTHREADS_INTERVAL_MS", "10" },
	};
	env.insert(extra_env.begin(), extra_env.end());
	run_result r = run({ progs + "/" + prog }, env);
	INFO(prog << " (" << tracker << ")\n" << r.out << r.err);
	CHECK(r.status == 0);
	CHECK(r.out.find("FAILED") == std::string::npos);
	CHECK(r.out.find(": all passed") != std::string::npos);
	CHECK(r.err.find("resolves to") == std::string::npos);
}

const char *probe_tracker()
{
	return uffd_half() ? "uffd" : "mprotect";
}
} // namespace

TEST_CASE("C11 threads: FASE depth follows mtx_*, cnd_* and thrd_*", "[preload][trackers]")
{
	run_probe("prog_c11fase", probe_tracker());
}

TEST_CASE("OpenMP with libgomp: critical, atomic, locks, nest locks, ordered, team threads",
	  "[preload][trackers]")
{
	run_probe("prog_ompfase", probe_tracker());
}

TEST_CASE("a lock runtime found before the library is named at start; strict mode exits",
	  "[preload]")
{
	// libgomp preloaded ahead of us is what linking -lgomp before
	// -lpmthreads does: its GOMP_critical_start and omp_set_lock win.
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	scratch_dir dir;
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", "libgomp.so.1:" + lib },
		{ "PMTHREADS_POOL", dir.path + "/order.pool" },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
	};
	run_result native = run({ progs + "/prog_locks" }, {});
	run_result r = run({ progs + "/prog_locks" }, env);
	INFO(r.err);
	CHECK(r.status == 0);
	CHECK(r.out == native.out);
	CHECK(r.err.find("GOMP_critical_start resolves to") != std::string::npos);
	CHECK(r.err.find("libgomp.so.1 before") != std::string::npos);
	CHECK(r.err.find("OpenMP locks are not seen") != std::string::npos);
	CHECK(r.err.find("pthread_mutex_lock resolves") == std::string::npos);
	env["PMTHREADS_STRICT"] = "1";
	run_result strict = run({ progs + "/prog_locks" }, env);
	INFO(strict.err);
	CHECK(strict.status == 1);
	CHECK(strict.out.empty());
	CHECK(strict.err.find("PMTHREADS_STRICT=1: exiting") != std::string::npos);
}

// Its own meson test (preload-libomp), skipped where meson found no clang to
// build the probe with; both trackers (auto: uffd where supported).
TEST_CASE("OpenMP with LLVM's libomp: critical, locks, nest locks, ordered, team threads",
	  "[libomp]")
{
	run_probe("prog_ompfase_llvm", "mprotect");
	run_probe("prog_ompfase_llvm", "auto");
	// libomp picks how to reduce by team size; a team of two merges inside
	// __kmpc_critical.  The other two methods go through __kmpc_reduce.
	for (const char *method : { "critical", "tree" }) {
		INFO("KMP_FORCE_REDUCTION=" << method);
		run_probe("prog_ompfase_llvm", "auto", { { "KMP_FORCE_REDUCTION", method } });
	}
}

namespace {
// tests/progs/stallhold.c under the preload (malloc heap, so the runtime and
// its pool start with the program), at a 10 ms interval.
struct stall_run {
	run_result r;
	std::string json, epoch_log;
	std::string holder_tid;	// as the program printed it
};

stall_run run_stallhold(const char *mode, std::map<std::string, std::string> extra_env = {})
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	scratch_dir dir;
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", lib },
		{ "PMTHREADS_POOL", dir.path + "/stall.pool" },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_TRACKER", probe_tracker() },
		{ "PMTHREADS_INTERVAL_MS", "10" },
		{ "PMTHREADS_SYNC_TIMEOUT_MS", "500" },
		{ "PMTHREADS_STATS", dir.path + "/stall.json" },
		{ "PMTHREADS_EPOCH_LOG", dir.path + "/stall.csv" },
	};
	for (auto &kv : extra_env)
		env[kv.first] = kv.second;
	stall_run s;
	s.r = run({ progs + "/prog_stallhold", mode }, env);
	s.json = slurp(dir.path + "/stall.json");
	s.epoch_log = slurp(dir.path + "/stall.csv");
	auto at = s.r.out.find("holder tid ");
	if (at != std::string::npos)
		s.holder_tid = s.r.out.substr(at + 11, s.r.out.find('\n', at) - at - 11);
	return s;
}
} // namespace

TEST_CASE("a lock held for the whole run: the stall is reported, sync times out, no gate churn",
	  "[preload][trackers][stall]")
{
	stall_run s = run_stallhold("life");
	INFO(s.r.describe() << "\n" << s.json << "\n" << s.epoch_log);
	REQUIRE(s.r.status == 0);
	REQUIRE_FALSE(s.holder_tid.empty());
	CHECK(s.r.out.find("sync ETIMEDOUT\n") != std::string::npos);
	CHECK(s.r.out.find("counter positive 1\n") != std::string::npos);
	// At the default verbosity, while it happens: who holds what, taken
	// where, and what to do.
	CHECK(s.r.err.find("durability has stood still for") != std::string::npos);
	CHECK(s.r.err.find("thread " + s.holder_tid + " (prog_stallhold) holds lock 0x") !=
	      std::string::npos);
	CHECK(s.r.err.find("taken in hold_big_lock") != std::string::npos);
	CHECK(s.r.err.find("PMTHREADS_NOT_FASE=hold_big_lock") != std::string::npos);
	// Two reports: the first when durability has stood still for 2 s
	// (the worker's FASEs go on for 3), one more when the sync timed out.
	size_t reports = 0;
	for (size_t at = 0; (at = s.r.err.find("durability has stood still", at)) != std::string::npos;
	     at++)
		reports++;
	CHECK(reports >= 2);
	// The statistics, written at exit with the lock still held.
	check_report_keys(s.json);
	CHECK(json_number(s.json, "stalls") >= 1);
	CHECK(json_text(s.json, "stalled") == "true");
	CHECK(json_number(s.json, "stall_ns") > 0);
	CHECK(json_number(s.json, "sync_timeouts") == 1);
	CHECK(std::to_string(json_number(s.json, "stall_thread")) == s.holder_tid);
	CHECK(json_text(s.json, "stall_site").rfind("\"hold_big_lock+0x", 0) == 0);
	CHECK(json_text(s.json, "stall_lock").rfind("\"0x", 0) == 0);
	// No gate churn: the one abandoned attempt (maybe one more, should the
	// first epoch have started before main took the lock) and then none
	// while the same holder blocks; the attempts due meanwhile were
	// deferred.
	CHECK(json_number(s.json, "gate_closings") <= json_number(s.json, "epochs") + 2);
	CHECK(json_number(s.json, "abandoned") <= 2);
	CHECK(json_number(s.json, "attempts_deferred") >= 10);
	// The epoch log says it too, in a line readers skip.
	CHECK(s.epoch_log.find("\n# t_ms=") != std::string::npos);
	CHECK(s.epoch_log.find(" stall stood_ms=") != std::string::npos);
	CHECK(s.epoch_log.find(" thread=" + s.holder_tid + " ") != std::string::npos);
	CHECK(s.epoch_log.find(" site=hold_big_lock+0x") != std::string::npos);
}

// Run the spawned c to its end, watching the file at path meanwhile (every
// 20 ms): on_version(its contents, seconds since t0) for each new version
// (a changed mtime).  The program's result.
static run_result watch_file(const spawned &c, const std::string &path,
		      std::chrono::steady_clock::time_point t0,
		      const std::function<void(const std::string &, double)> &on_version)
{
	struct stat st {};
	timespec seen{};
	int wst = 0;
	while (waitpid(c.pid, &wst, WNOHANG) != c.pid) {
		if (stat(path.c_str(), &st) == 0 &&
		    (st.st_mtim.tv_sec != seen.tv_sec || st.st_mtim.tv_nsec != seen.tv_nsec)) {
			seen = st.st_mtim;
			on_version(slurp(path), std::chrono::duration<double>(
							std::chrono::steady_clock::now() - t0).count());
		}
		usleep(20000);
	}
	run_result r;
	r.out = read_fd(c.out_fd);
	close(c.out_fd);
	lseek(c.err_fd, 0, SEEK_SET);
	r.err = read_fd(c.err_fd);
	close(c.err_fd);
	r.wait_status = wst;
	r.status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
	return r;
}

// Issue 39, item 10: the statistics file keeps its period while epochs
// stall.  The main thread holds a lock for its whole life, so no epoch ever
// completes; before, the file appeared only at the exit.  Watched from here
// while the program runs: it must appear within its period (plus slack) and
// be rewritten, saying the stall, before the program ends.
TEST_CASE("the statistics file keeps its period while durability stalls", "[preload][trackers][stall]")
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	scratch_dir dir;
	std::string json = dir.path + "/stall.json";
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", lib },
		{ "PMTHREADS_POOL", dir.path + "/stall.pool" },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_TRACKER", probe_tracker() },
		{ "PMTHREADS_INTERVAL_MS", "10" },
		{ "PMTHREADS_SYNC_TIMEOUT_MS", "500" },
		{ "PMTHREADS_STATS", json },
	};
	auto t0 = std::chrono::steady_clock::now();
	spawned c = spawn({ progs + "/prog_stallhold", "life" }, env);
	std::vector<double> writes;	// seconds since the start, of each new version
	std::string mid;
	run_result r = watch_file(c, json, t0, [&](const std::string &v, double at) {
		writes.push_back(at);
		mid = v;
	});
	INFO(r.describe());
	CHECK(r.status == 0);
	INFO(writes.size() << " versions while the program ran, the first at "
			   << (writes.empty() ? -1.0 : writes.front()) << " s\n" << mid);
	// The program runs about 3.5 s, its lock held from the start: the file
	// every second.
	REQUIRE(writes.size() >= 2);
	CHECK(writes.front() < 2.0);
	CHECK(json_text(mid, "stalled") == "true");
}

// Issue 39, leftover of item 10: the statistics file keeps its period
// through one long write-back, and shows it in progress.  16 MiB written
// line by line, then one sync; an emulated latency of 20 us a line makes the
// write-back of its 262144 lines last more than 5 s (the latency is a
// busy-wait on the clock: no shorter under load).  Before, the epoch thread
// wrote nothing while it was inside the write-back: no version of the file
// showed one under way.
TEST_CASE("the statistics file keeps its period through a write-back of seconds",
	  "[preload][trackers][stats]")
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	pool_medium::dir dir("slowstats");
	std::string json = dir.file("slow.json");
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", lib },
		{ "PMTHREADS_POOL", dir.file("slow.pool") },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_TRACKER", probe_tracker() },
		{ "PMTHREADS_INTERVAL_MS", "100000" },	// the sync's epoch writes it all
		{ "PMTHREADS_NVM_LATENCY_NS", "20000" },
		{ "PMTHREADS_STATS", json },
	};
	pool_medium::child_env(env);
	spawned c = spawn({ progs + "/prog_slowsync", "16" }, env);
	std::vector<std::string> during;	// the versions showing a write-back under way
	run_result r = watch_file(c, json, std::chrono::steady_clock::now(),
				  [&](const std::string &v, double) {
					  if (json_number(v, "writeback_pages") > 0)
						  during.push_back(v);
				  });
	std::string final_json = slurp(json);
	INFO(r.describe() << "\n" << during.size() << " versions during a write-back\n"
			  << (during.empty() ? final_json : during.back()));
	REQUIRE(r.status == 0);
	CHECK(r.out.rfind("sync ok ", 0) == 0);
	// More than 5 s of write-back, the file every second.
	REQUIRE(during.size() >= 3);
	for (const std::string &v : during) {
		long long done = json_number(v, "writeback_pages_done");
		CHECK(done >= 0);
		CHECK(done <= json_number(v, "writeback_pages"));
	}
	// Progress is shown: not every version says the same.
	CHECK(json_number(during.front(), "writeback_pages_done") !=
	      json_number(during.back(), "writeback_pages_done"));
	// Nothing under way at the end.
	CHECK(json_number(final_json, "writeback_pages") == 0);
	pool_medium::expect_backend(final_json);
}

// The statistics' period is its own, not the epochs': with a 10 s interval
// the epoch thread's waits are bounded by the tick's period (epoch_loop.c's
// loop_wait), so the file is rewritten every second before any epoch is due.
// Without that bound the same run (lock held for life, about 3.5 s) wrote it
// only at the exit.
TEST_CASE("the statistics file keeps its period under a long epoch interval",
	  "[preload][trackers][stall]")
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	scratch_dir dir;
	std::string json = dir.path + "/long.json";
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", lib },
		{ "PMTHREADS_POOL", dir.path + "/long.pool" },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_TRACKER", probe_tracker() },
		{ "PMTHREADS_INTERVAL_MS", "10000" },
		{ "PMTHREADS_SYNC_TIMEOUT_MS", "500" },
		{ "PMTHREADS_STATS", json },
	};
	auto t0 = std::chrono::steady_clock::now();
	spawned c = spawn({ progs + "/prog_stallhold", "life" }, env);
	std::vector<double> writes;	// seconds since the start, of each new version
	run_result r = watch_file(c, json, t0,
				  [&](const std::string &, double at) { writes.push_back(at); });
	INFO(r.describe() << "\n" << writes.size() << " versions while the program ran, the first at "
			  << (writes.empty() ? -1.0 : writes.front()) << " s");
	CHECK(r.status == 0);
	REQUIRE(writes.size() >= 2);
	CHECK(writes.front() < 2.0);
}

// Issue 39, item 5: pmthreads_sync's timeout measures a stall, not a slow
// write-back.  One thread writes every line of a 16 MiB region, each write
// its own FASE, then syncs with no lock held and a 50 ms timeout; the
// emulated write latency (2 us a line) makes the write-back of the region
// take about half a second or more, on either medium.  Before, the sync
// failed with ETIMEDOUT and blamed a lock nobody held.
TEST_CASE("pmthreads_sync waits for a slow write-back: it is no stall", "[preload][trackers][stall]")
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	pool_medium::dir dir("slowsync");
	std::map<std::string, std::string> env = {
		{ "LD_PRELOAD", lib },
		{ "PMTHREADS_POOL", dir.file("slow.pool") },
		{ "PMTHREADS_POOL_SIZE", "64M" },
		{ "PMTHREADS_HEAP", "malloc" },
		{ "PMTHREADS_TRACKER", probe_tracker() },
		{ "PMTHREADS_INTERVAL_MS", "100000" },	// the sync's epoch writes it all
		{ "PMTHREADS_SYNC_TIMEOUT_MS", "50" },
		{ "PMTHREADS_NVM_LATENCY_NS", "2000" },
		{ "PMTHREADS_STATS", dir.file("slow.json") },
	};
	pool_medium::child_env(env);
	run_result r = run({ progs + "/prog_slowsync", "16" }, env);
	std::string json = slurp(dir.file("slow.json"));
	INFO(r.describe() << "\n" << json);
	REQUIRE(r.status == 0);
	CHECK(r.out.rfind("sync ok ", 0) == 0);
	// It did wait for a write-back longer than the timeout.
	CHECK(strtod(r.out.c_str() + 8, nullptr) > 50.0);
	CHECK(r.err.find("holds a lock") == std::string::npos);
	CHECK(json_number(json, "sync_timeouts") == 0);
	pool_medium::expect_backend(json);
}

TEST_CASE("a stall that ends is said to end; sync succeeds once the lock is released",
	  "[preload][trackers][stall]")
{
	stall_run s = run_stallhold("release");
	INFO(s.r.describe() << "\n" << s.json << "\n" << s.epoch_log);
	REQUIRE(s.r.status == 0);
	CHECK(s.r.out.find("sync ETIMEDOUT\nsync ok\n") != std::string::npos);
	// The timed-out sync brings the report forward.
	CHECK(s.r.err.find("taken in hold_big_lock") != std::string::npos);
	CHECK(s.r.err.find("durability resumes: a quiescent point was reached after") !=
	      std::string::npos);
	CHECK(s.epoch_log.find(" stall cleared stood_ms=") != std::string::npos);
	CHECK(json_text(s.json, "stalled") == "false");
	CHECK(json_number(s.json, "stalls") == 1);
	CHECK(json_number(s.json, "stall_ns_max") > 0);
	CHECK(json_number(s.json, "sync_timeouts") == 1);
	CHECK(json_text(s.json, "stall_site") == "\"\"");
}

TEST_CASE("PMTHREADS_NOT_FASE naming the function that takes the lock: epochs are durable again",
	  "[preload][trackers][stall]")
{
	stall_run s = run_stallhold("life", { { "PMTHREADS_NOT_FASE", "some_other_fn,hold_big_lock" } });
	INFO(s.r.describe() << "\n" << s.json);
	REQUIRE(s.r.status == 0);
	CHECK(s.r.out.find("sync ok\n") != std::string::npos);
	CHECK(s.r.err.find("stood still") == std::string::npos);
	CHECK(json_number(s.json, "not_fase_sites") == 1);
	CHECK(json_number(s.json, "stalls") == 0);
	CHECK(json_number(s.json, "sync_timeouts") == 0);
	CHECK(json_number(s.json, "epochs_persisted") >= 10);
	CHECK(json_number(s.json, "abandoned") * 2 < json_number(s.json, "epochs"));
	// A name that is not the function's changes nothing.
	stall_run other = run_stallhold("release", { { "PMTHREADS_NOT_FASE", "hold_big" } });
	INFO(other.r.describe());
	CHECK(other.r.out.find("sync ETIMEDOUT\nsync ok\n") != std::string::npos);
	CHECK(json_number(other.json, "not_fase_sites") == 0);
	// A malformed list is an error naming the variable.
	stall_run bad = run_stallhold("exit", { { "PMTHREADS_NOT_FASE", "a, b" } });
	CHECK(bad.r.err.find("PMTHREADS_NOT_FASE=\"a, b\" is not valid") != std::string::npos);
}

TEST_CASE("exit does not wait on a lock the exiting thread holds", "[preload][trackers][stall]")
{
	// A long interval: no attempt is due before the exit, so whatever closed
	// the gate was the final epoch's attempt, which would have waited the
	// bound (half the interval: 5 s) for a lock that is never released.
	stall_run s = run_stallhold("exit", { { "PMTHREADS_INTERVAL_MS", "10000" },
					      { "PMTHREADS_VERBOSE", "1" } });
	INFO(s.r.describe() << "\n" << s.json);
	REQUIRE(s.r.status == 0);
	CHECK(json_number(s.json, "gate_closings") == 0);
	CHECK(json_number(s.json, "abandoned") == 0);
	CHECK(s.r.err.find("no final epoch: the exiting thread holds a lock at exit") !=
	      std::string::npos);
}

// Issue 46 item 3: an exit whose final epoch finds no quiescent point says
// who kept it from one as the live stall report does -- the thread, the lock,
// the function that took it, what the thread does -- and the fix; before, it
// said only "a thread held a lock" (redis-server --io-threads 2: its
// io-thread mutexes, taken in initThreadedIO, went unnamed).  The lock held
// by the exiting thread itself, and by another one, asleep.
TEST_CASE("an exit without a quiescent point names the lock, the thread, the site and the fix",
	  "[preload][trackers][stall]")
{
	for (const char *mode : { "exit", "other" }) {
		stall_run s = run_stallhold(mode);
		INFO(mode << "\n" << s.r.describe());
		REQUIRE(s.r.status == 0);
		REQUIRE_FALSE(s.holder_tid.empty());
		const std::string &e = s.r.err;
		size_t at = e.find("no quiescent point could be reached at exit");
		REQUIRE(at != std::string::npos);
		CHECK(e.find("the next run recovers epoch ", at) != std::string::npos);
		CHECK(e.find("thread " + s.holder_tid + " (prog_stallhold) holds lock 0x", at) !=
		      std::string::npos);
		CHECK(e.find("(big in ", at) != std::string::npos);
		CHECK(e.find("taken in hold_big_lock", at) != std::string::npos);
		CHECK(e.find(std::strcmp(mode, "exit") == 0 ? "it is the thread that is exiting"
							    : "it is blocked in pause", at) !=
		      std::string::npos);
		CHECK(e.find("what to do: if that lock is no critical section", at) != std::string::npos);
		CHECK(e.find("PMTHREADS_NOT_FASE=hold_big_lock (pmthreads run --not-fase hold_big_lock", at) !=
		      std::string::npos);
	}
}

TEST_CASE("a lock taken by a tail call is named by the function called", "[preload][trackers][stall]")
{
	stall_run s = run_stallhold("tail");
	INFO(s.r.describe());
	REQUIRE(s.r.status == 0);
	CHECK(s.r.out.find("sync ETIMEDOUT\nsync ok\n") != std::string::npos);
	CHECK(s.r.err.find("taken in main") != std::string::npos);
	CHECK(s.r.err.find("by its call to take_big_tail") != std::string::npos);
	CHECK(s.r.err.find("PMTHREADS_NOT_FASE=take_big_tail") != std::string::npos);
	stall_run named = run_stallhold("tail", { { "PMTHREADS_NOT_FASE", "take_big_tail" } });
	INFO(named.r.describe());
	CHECK(named.r.out.find("sync ok\nsync ok\n") != std::string::npos);
	CHECK(json_number(named.json, "not_fase_sites") == 1);
	CHECK(json_number(named.json, "stalls") == 0);
}

namespace {
// tests/progs/lazystart.c under the preload: its "tasks WHERE N" lines.
std::map<std::string, int> task_counts(const std::string &out)
{
	std::map<std::string, int> counts;
	std::istringstream in(out);
	std::string word, where;
	int n;
	while (in >> word)
		if (word == "tasks" && in >> where >> n)
			counts[where] = n;
	return counts;
}
} // namespace

TEST_CASE("no thread of the runtime until a pool is open; the first nvmalloc starts the epoch thread",
	  "[preload][trackers]")
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	const std::string prog = progs + "/prog_lazystart";
	run_result native = run({ prog, "idle" }, {});
	INFO("native: " << native.describe());
	REQUIRE(native.status == 0);
	std::map<std::string, int> alone = task_counts(native.out);
	REQUIRE(alone.size() == 4);
	for (auto &kv : alone)
		CHECK(kv.second == 1);
	scratch_dir dir;
	auto env = [&](const char *heap) {
		return std::map<std::string, std::string>{
			{ "LD_PRELOAD", lib },
			{ "PMTHREADS_POOL", dir.path + "/" + heap + ".pool" },
			{ "PMTHREADS_POOL_SIZE", "64M" },
			{ "PMTHREADS_HEAP", heap },
			{ "PMTHREADS_TRACKER", probe_tracker() },
			{ "PMTHREADS_INTERVAL_MS", "10" },
			{ "PMTHREADS_STATS", dir.path + "/" + heap + ".json" },
		};
	};
	SECTION("nvmalloc mode, the API never called: the program's threads only")
	{
		run_result r = run({ prog, "idle" }, env("nvmalloc"));
		INFO(r.describe());
		REQUIRE(r.status == 0);
		CHECK(task_counts(r.out) == alone);
		std::string json = slurp(dir.path + "/nvmalloc.json");
		CHECK(json_number(json, "gate_closings") == 0);
		// Without the thread, the lock path skips its fence as it does
		// with it, where the kernel has membarrier(2).
		run_result with_thread = run({ prog, "idle" }, env("malloc"));
		REQUIRE(with_thread.status == 0);
		CHECK(json_text(json, "membarrier") ==
		      json_text(slurp(dir.path + "/malloc.json"), "membarrier"));
	}
	SECTION("malloc mode: the pool is open from the start, and so the epoch thread runs")
	{
		run_result r = run({ prog, "idle" }, env("malloc"));
		INFO(r.describe());
		REQUIRE(r.status == 0);
		std::map<std::string, int> counts = task_counts(r.out);
		CHECK(counts["main"] == 2);
		CHECK(counts["joined"] == 2);
		CHECK(counts["child"] == 1);	// a fork child has no epoch thread
		CHECK(json_number(slurp(dir.path + "/malloc.json"), "epochs") >= 1);
	}
	SECTION("nvmalloc mode: two first nvmallocs at once while another thread holds a lock")
	{
		run_result r = run({ prog, "start" }, env("nvmalloc"));
		INFO(r.describe());
		REQUIRE(r.killed());
		std::map<std::string, int> counts = task_counts(r.out);
		CHECK(counts["main"] == 1);
		CHECK(counts["joined"] == 1);
		CHECK(counts["child"] == 1);
		CHECK(counts["holding"] == 2);
		// main, the holder and one epoch thread (the two callers ended)
		CHECK(counts["started"] == 3);
		CHECK(counts["synced"] == 2);
		// The epoch that began while the holder held its lock waited for
		// its release.
		CHECK(r.out.find("sync 0\n") != std::string::npos);
		run_result c = run({ prog, "check" }, env("nvmalloc"));
		INFO(c.describe());
		CHECK(c.status == 0);
		CHECK(c.out == "recovered 4242424242\n");
	}
}

namespace {

// A program's report lines "WHO WHAT REST...", by "WHO WHAT": REST (the last
// line of a key wins).
std::map<std::string, std::string> said_by(const std::string &out)
{
	std::map<std::string, std::string> said;
	std::istringstream in(out);
	for (std::string line; std::getline(in, line);) {
		std::istringstream w(line);
		std::string who, what, rest;
		w >> who >> what;
		std::getline(w >> std::ws, rest);
		said[who + " " + what] = rest;
	}
	return said;
}

} // namespace

// Where nothing is persisted any more, pmthreads_sync says so (issue 39
// item 11): a fork child's heap is a private copy, never written to the pool
// (ENOTSUP, in its own children too), and after the runtime's end at exit a
// write is not persisted either (ESHUTDOWN: an exit handler registered
// before the runtime started, which runs after its end).  pmthreads_durable_epoch is 0
// in a fork child and, after the end, the final epoch; neither rises.
// Before, sync returned 0 in both, and the durable epoch fell to 0 at exit.
TEST_CASE("pmthreads_sync fails in a fork child and after the runtime's end; the durable epoch "
	  "never rises there", "[preload][trackers]")
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	const std::string prog = progs + "/prog_forksync";
	pool_medium::dir dir("forksync");
	for (const char *heap : { "nvmalloc", "malloc" }) {
		INFO("PMTHREADS_HEAP=" << heap);
		std::map<std::string, std::string> env = {
			{ "LD_PRELOAD", lib },
			{ "PMTHREADS_POOL", dir.file((std::string(heap) + ".pool").c_str()) },
			{ "PMTHREADS_POOL_SIZE", "64M" },
			{ "PMTHREADS_HEAP", heap },
			{ "PMTHREADS_TRACKER", probe_tracker() },
			{ "PMTHREADS_INTERVAL_MS", "10" },
		};
		pool_medium::child_env(env);
		run_result r = run({ prog, "fork" }, env);
		INFO(r.describe());
		REQUIRE(r.status == 0);
		auto said = said_by(r.out);
		std::string parent_ok, child_sync, grandchild_sync, after_ok;
		unsigned long long e = 0, d0 = 1, d1 = 1, e2 = 0;
		std::istringstream(said["parent sync"]) >> parent_ok >> e;
		std::istringstream(said["child sync"]) >> child_sync;
		std::istringstream(said["child durable"]) >> d0 >> d1;
		std::istringstream(said["grandchild sync"]) >> grandchild_sync;
		std::istringstream(said["parent after"]) >> after_ok >> e2;
		CHECK(parent_ok == "ok");
		CHECK(e > 0);
		CHECK(child_sync == "ENOTSUP");
		CHECK(r.out.find("child msg pmthreads_sync: this process is a fork child of a "
				 "persistent program: only the parent is persisted") != std::string::npos);
		CHECK(d0 == 0);
		CHECK(d1 == 0);
		CHECK(grandchild_sync == "ENOTSUP");
		// The parent goes on persisting.
		CHECK(after_ok == "ok");
		CHECK(e2 > e);
		run_result c = run({ prog, "check" }, env);
		INFO(c.describe());
		CHECK(c.out == "recovered 3\n");

		r = run({ prog, "end" }, env);
		INFO(r.describe());
		REQUIRE(r.status == 0);
		unsigned long long main_e = 0, end_d1 = 0, end_d2 = 0;
		std::string main_ok, end_sync;
		said = said_by(r.out);
		std::istringstream(said["main sync"]) >> main_ok >> main_e;
		std::istringstream(said["end sync"]) >> end_sync >> end_d1 >> end_d2;
		CHECK(main_ok == "ok");
		CHECK(main_e > 0);
		c = run({ prog, "check" }, env);
		INFO(c.describe());
		if (std::strcmp(heap, "nvmalloc") == 0) {
			// The handler was registered before the runtime started
			// (the first nvmalloc), so it runs after its end.
			CHECK(end_sync == "ESHUTDOWN");
			// The final epoch: at least the one main's sync made
			// durable, and it stays.
			CHECK(end_d1 >= main_e);
			CHECK(end_d2 == end_d1);
			CHECK(r.out.find("end msg pmthreads_sync: the pmthreads runtime has shut "
					 "down") != std::string::npos);
			// What the handler wrote after the end is not in the pool.
			CHECK(c.out == "recovered 10\n");
		} else {
			// The runtime started before main: the handler runs
			// before its end, and what it syncs is durable.
			CHECK(end_sync == "ok");
			CHECK(end_d1 > main_e);
			CHECK(c.out == "recovered 11\n");
		}
	}
}

TEST_CASE("a SCHED_FIFO child signalled before it first ran: its handler's malloc and stdio work",
	  "[preload][trackers][sched-fifo]")
{
	// The meson tests preload-sched-fifo(-uffd) run this case, skipped where
	// the process may not use SCHED_FIFO (PMT_TEST_NEEDS=sched-fifo).
	// Open POSIX sched_setparam/2-1 and 2-2: with a thread of the runtime
	// in the process, glibc's fork held its malloc and stdio locks and the
	// handler, run inside the child's fork, waited for them for ever.
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	const std::string prog = progs + "/prog_forksignal";
	run_result native = run({ prog }, {});
	INFO("native: " << native.describe());
	REQUIRE(native.status == 0);
	REQUIRE(native.out == "handler ran\n");
	scratch_dir dir;
	for (const preload_mode &m : preload_modes()) {
		INFO(m.name);
		run_result r = run({ prog }, { { "LD_PRELOAD", lib },
					       { "PMTHREADS_POOL", dir.path + "/" + m.heap + ".pool" },
					       { "PMTHREADS_POOL_SIZE", "64M" },
					       { "PMTHREADS_HEAP", m.heap },
					       { "PMTHREADS_TRACKER", m.tracker } });
		INFO(r.describe());
		CHECK(r.status == 0);
		CHECK(r.out == native.out);
	}
}
