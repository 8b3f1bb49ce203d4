/* SPDX-License-Identifier: BSD-3-Clause */
// kill -9 at random times on a real threaded program (examples/bank: money
// moved between accounts under two locks, a ledger under a third) with both
// trackers.  After every restart the invariants must hold, and the transfers
// lost must be at most about one interval: everything the program had
// committed two intervals before the kill must be there.
#include <catch2/catch.hpp>

#include <algorithm>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

const unsigned interval_ms = 100;	/* the default */

struct progress_point {
	long long ns;
	unsigned long long transfers;
};

long long now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

std::string bank_path()
{
	const char *p = getenv("PMT_BANK");
	REQUIRE(p != nullptr);
	return p;
}

void set_env(const std::string &pool, const char *tracker, const char *restore)
{
	setenv("PMTHREADS_RESTORE", restore, 1);
	setenv("PMTHREADS_POOL", pool.c_str(), 1);
	setenv("PMTHREADS_POOL_SIZE", "64M", 1);
	setenv("PMTHREADS_INTERVAL_MS", std::to_string(interval_ms).c_str(), 1);
	setenv("PMTHREADS_TRACKER", tracker, 1);
	setenv("PMEM_IS_PMEM_FORCE", "1", 1);
}

// Run bank with --progress, kill -9 it after kill_after_ms, and return the
// progress it reported plus the instant of the kill.
std::vector<progress_point> run_and_kill(unsigned kill_after_ms, long long *killed_at)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		std::string bank = bank_path();
		execl(bank.c_str(), bank.c_str(), "-t", "2", "-s", "60", "--progress", (char *)nullptr);
		_exit(127);
	}
	close(fds[1]);
	FILE *out = fdopen(fds[0], "r");
	REQUIRE(out != nullptr);
	long long deadline = now_ns() + (long long)kill_after_ms * 1000000LL;
	std::vector<progress_point> points;
	char line[256];
	// The program prints every 10 ms, so reading paces the loop.
	while (now_ns() < deadline && fgets(line, sizeof(line), out) != nullptr) {
		progress_point p;
		if (sscanf(line, "progress %lld %llu", &p.ns, &p.transfers) == 2)
			points.push_back(p);
	}
	*killed_at = now_ns();
	kill(pid, SIGKILL);
	fclose(out);
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status));
	return points;
}

// Recover with --check: returns the recovered transfer count, -1 if the
// program reported an inconsistency.  Its statistics go to stats_path.
long long recover_and_check(std::string *output, const std::string &stats_path)
{
	std::string cmd = "PMTHREADS_STATS=" + stats_path + " " + bank_path() + " --check 2>&1";
	FILE *p = popen(cmd.c_str(), "r");
	REQUIRE(p != nullptr);
	char line[512];
	long long transfers = -1;
	bool consistent = false;
	while (fgets(line, sizeof(line), p) != nullptr) {
		*output += line;
		unsigned long long n, t, e, in, accounts;
		if (sscanf(line, "bank: %llu accounts, %llu transfers, total %llu (expected %llu), "
				 "transfers received %llu", &accounts, &n, &t, &e, &in) == 5)
			transfers = (long long)n;
		if (strcmp(line, "bank: consistent\n") == 0)
			consistent = true;
	}
	int status = pclose(p);
	if (!consistent || status != 0)
		return -1;
	return transfers;
}

// PMT_KILL_ROUNDS=N turns the test into the long benchmark (bench/kill_loop.sh).
int rounds_from_env(int dflt)
{
	const char *v = getenv("PMT_KILL_ROUNDS");
	return v != nullptr && atoi(v) > 0 ? atoi(v) : dflt;
}

std::string file_text(const std::string &path)
{
	std::string s;
	if (FILE *f = fopen(path.c_str(), "r")) {
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			s.append(buf, n);
		fclose(f);
	}
	return s;
}

// restore: PMTHREADS_RESTORE for every run; the recovering run must report
// that path (lazy needs the uffd tracker; with mprotect it is eager).
void kill_loop(const char *tracker, const char *restore, int rounds)
{
	rounds = rounds_from_env(rounds);
	std::vector<double> lost_ms;
	char dir[] = "/dev/shm/pmt-kill-XXXXXX";
	REQUIRE(mkdtemp(dir) != nullptr);
	std::string pool = std::string(dir) + "/bank.pool";
	set_env(pool, tracker, restore);
	std::string stats = std::string(dir) + "/stats.json";
	std::string expect_path = std::string("\"restore\": \"") +
				  (strcmp(tracker, "mprotect") == 0 ? "eager" : restore) + "\"";
	std::mt19937 rng(std::random_device{}());
	long long previous = 0;
	for (int round = 0; round < rounds; round++) {
		unsigned after = 400 + rng() % 800;
		long long killed_at;
		std::vector<progress_point> points = run_and_kill(after, &killed_at);
		std::string output;
		long long recovered = recover_and_check(&output, stats);
		INFO("tracker " << tracker << ", restore " << restore << ", round " << round
				<< ", killed after " << after << " ms\n" << output);
		REQUIRE(recovered >= 0);	// invariants hold
		CHECK(file_text(stats).find(expect_path) != std::string::npos);
		// What was committed more than about one interval before the
		// kill must be there: one interval until the next quiescent
		// point, one for the epoch in flight, plus 100 ms of slack for
		// an attempt abandoned because a lock holder was descheduled on
		// a loaded machine (seen: 197 ms lost at a 50 ms interval with
		// both cores saturated).
		long long horizon = killed_at - (2LL * interval_ms + 100) * 1000000LL;
		unsigned long long must_have = (unsigned long long)previous;
		for (const auto &p : points)
			if (p.ns <= horizon)
				must_have = p.transfers;
		CHECK((unsigned long long)recovered >= must_have);
		// How much work the crash lost, in time: from the first report
		// of a transfer count beyond what was recovered to the kill.
		for (const auto &p : points)
			if (p.transfers > (unsigned long long)recovered) {
				lost_ms.push_back((double)(killed_at - p.ns) / 1e6);
				break;
			}
		CHECK(recovered >= previous);
		previous = recovered;
	}
	unlink(pool.c_str());
	unlink(stats.c_str());
	rmdir(dir);
	std::sort(lost_ms.begin(), lost_ms.end());
	if (!lost_ms.empty())
		printf("kill loop, %s tracker, %s restore, interval %u ms: %d kills, work lost per "
		       "crash p50 %.0f ms, p90 %.0f ms, max %.0f ms\n", tracker, restore, interval_ms, rounds,
		       lost_ms[lost_ms.size() / 2], lost_ms[lost_ms.size() * 9 / 10], lost_ms.back());
}

} // namespace

// Every restart recovers lazily (the killed runs too: they run, and are
// killed, while their background restore may still be going).  The [uffd]
// cases run as the kill-uffd test, which meson skips without the uffd tracker.
TEST_CASE("bank survives kill -9 at random times with the uffd tracker", "[kill][uffd]")
{
	kill_loop("uffd", "lazy", 4);
}

TEST_CASE("bank survives kill -9 at random times with the uffd tracker, copying recovery",
	  "[kill][uffd]")
{
	kill_loop("uffd", "eager", 2);
}

TEST_CASE("bank survives kill -9 at random times with the mprotect tracker", "[kill]")
{
	kill_loop("mprotect", "auto", 4);
}
