// End-to-end tests of the interposition layer: ordinary pthread programs
// (tests/progs/, built without any link to pmthreads) run natively and under
// LD_PRELOAD=libpmthreads.so -- interception only (nvmalloc mode, no pool)
// and with the persistent heap behind malloc under each tracker -- must print
// exactly the same, and the statistics must show epochs happening.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace {
struct run_result {
	int status = -1;
	std::string out, err;
};

std::string env_or_fail(const char *name)
{
	const char *v = getenv(name);
	if (v == nullptr)
		FAIL("meson test sets " << name);
	return v;
}

std::string read_fd(int fd)
{
	std::string s;
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		s.append(buf, (size_t)n);
	return s;
}

// Run argv with the current environment minus PMTHREADS_* / LD_PRELOAD, plus
// extra.  stderr goes to a file so that neither pipe can fill up.
run_result run(const std::vector<std::string> &argv, const std::map<std::string, std::string> &extra)
{
	std::vector<std::string> env;
	for (char **e = environ; *e != nullptr; e++)
		if (strncmp(*e, "PMTHREADS_", 10) != 0 && strncmp(*e, "LD_PRELOAD=", 11) != 0)
			env.emplace_back(*e);
	for (auto &kv : extra)
		env.push_back(kv.first + "=" + kv.second);
	std::vector<char *> envp, args;
	for (auto &s : env)
		envp.push_back(const_cast<char *>(s.c_str()));
	envp.push_back(nullptr);
	for (auto &s : argv)
		args.push_back(const_cast<char *>(s.c_str()));
	args.push_back(nullptr);

	char errpath[] = "/tmp/pmt-preload-err-XXXXXX";
	int errfd = mkstemp(errpath);
	REQUIRE(errfd >= 0);
	unlink(errpath);
	int out[2];
	REQUIRE(pipe(out) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(errfd, 2);
		close(out[0]);
		close(out[1]);
		execve(args[0], args.data(), envp.data());
		_exit(127);
	}
	close(out[1]);
	run_result r;
	r.out = read_fd(out[0]);
	close(out[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	lseek(errfd, 0, SEEK_SET);
	r.err = read_fd(errfd);
	close(errfd);
	return r;
}

// The unsigned number after "key": in the stats JSON (-1 when absent).
long long json_number(const std::string &json, const std::string &key)
{
	auto at = json.find("\"" + key + "\": ");
	if (at == std::string::npos)
		return -1;
	return std::atoll(json.c_str() + at + key.size() + 4);
}

std::string json_text(const std::string &json, const std::string &key)
{
	auto at = json.find("\"" + key + "\": ");
	if (at == std::string::npos)
		return "";
	auto start = at + key.size() + 4;
	auto end = json.find_first_of(",\n", start);
	return json.substr(start, end - start);
}

std::string slurp(const std::string &path)
{
	std::ifstream f(path);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

struct mode {
	const char *name, *heap, *tracker;
};
const mode modes[] = {
	{ "interception only", "nvmalloc", "auto" },
	{ "malloc heap, uffd tracker", "malloc", "uffd" },
	{ "malloc heap, mprotect tracker", "malloc", "mprotect" },
};

struct scratch_dir {
	std::string path;
	scratch_dir()
	{
		char t[] = "/tmp/pmt-preload-XXXXXX";
		REQUIRE(mkdtemp(t) != nullptr);
		path = t;
	}
	~scratch_dir() { (void)!system(("rm -rf '" + path + "'").c_str()); }
};

// Run prog natively and in every mode; return the stats JSON of each mode.
std::map<std::string, std::string> compare_with_native(const std::string &prog,
						       unsigned interval_ms = 10)
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	std::string path = progs + "/" + prog;
	run_result native = run({ path }, {});
	REQUIRE(native.status == 0);
	REQUIRE_FALSE(native.out.empty());
	scratch_dir dir;
	std::map<std::string, std::string> stats;
	for (const mode &m : modes) {
		INFO(prog << ": " << m.name);
		std::string json = dir.path + "/" + m.heap + "-" + m.tracker + ".json";
		run_result r = run({ path }, {
						     { "LD_PRELOAD", lib },
						     { "PMTHREADS_POOL", dir.path + "/" + m.heap + "-" + m.tracker + ".pool" },
						     { "PMTHREADS_POOL_SIZE", "64M" },
						     { "PMTHREADS_HEAP", m.heap },
						     { "PMTHREADS_TRACKER", m.tracker },
						     { "PMTHREADS_INTERVAL_MS", std::to_string(interval_ms) },
						     { "PMTHREADS_STATS", json },
					     });
		INFO("stderr: " << r.err);
		CHECK(r.status == 0);
		CHECK(r.out == native.out);
		std::string s = slurp(json);
		REQUIRE_FALSE(s.empty());
		CHECK(json_text(s, "heap_mode") == std::string("\"") + m.heap + "\"");
		bool persisted = std::strcmp(m.heap, "malloc") == 0;
		CHECK(json_text(s, "persistence") == (persisted ? "true" : "false"));
		if (persisted) {
			CHECK(json_number(s, "epochs") >= 1); // the final epoch at least
			CHECK(json_number(s, "pages_persisted") > 0);
		}
		stats[m.name] = s;
	}
	return stats;
}
} // namespace

TEST_CASE("producer/consumer with condition variables", "[preload]")
{
	compare_with_native("prog_prodcons");
}

TEST_CASE("readers and writers with rwlocks", "[preload]")
{
	compare_with_native("prog_rwlock");
}

TEST_CASE("nested, hand-over-hand, try, timed and spin locks", "[preload]")
{
	compare_with_native("prog_locks");
}

TEST_CASE("short-lived and detached threads", "[preload]")
{
	compare_with_native("prog_shortthreads");
}

TEST_CASE("a thread parked in read() does not stop epochs", "[preload]")
{
	// 400 ms of work at a 10 ms interval: about 40 epochs are due.
	for (auto &kv : compare_with_native("prog_blockedread")) {
		INFO(kv.first << "\n" << kv.second);
		// Had the parked reader stalled the gate, every attempt would be
		// abandoned; an overloaded machine may deschedule a lock holder
		// past the bound now and then.
		CHECK(json_number(kv.second, "epochs") >= 10);
		CHECK(json_number(kv.second, "abandoned") * 2 < json_number(kv.second, "epochs"));
	}
}

TEST_CASE("semaphore waits and joins under a lock do not deadlock and are counted", "[preload]")
{
	for (auto &kv : compare_with_native("prog_blockwait")) {
		INFO(kv.first << "\n" << kv.second);
		if (json_text(kv.second, "persistence") == "true")
			CHECK(json_number(kv.second, "blocking_in_fase") == 2);
	}
}

TEST_CASE("fork with and without exec", "[preload]")
{
	compare_with_native("prog_forkexec");
}

TEST_CASE("the old pthread_cond_wait version is interposed too", "[preload]")
{
	// A thread waits 300 ms in the GLIBC_2.2.5 wait while epochs are due
	// every 10 ms: had the wait not released the FASE, epochs would be
	// abandoned about every 30 ms (and few would happen).
	for (auto &kv : compare_with_native("prog_oldcond")) {
		INFO(kv.first << "\n" << kv.second);
		CHECK(json_number(kv.second, "abandoned") < 4);
		CHECK(json_number(kv.second, "epochs") >= 8);
	}
}

TEST_CASE("libc's own reads into malloc'd memory (stdio, getpwuid, epoll, poll)", "[preload]")
{
	// Under the mprotect tracker these failed with EFAULT: glibc fills a
	// stream buffer it malloc'd with an internal read(2), and event loops
	// keep epoll/poll arrays in malloc'd memory.
	compare_with_native("prog_libcreads");
}

TEST_CASE("the pmthreads launcher preloads the library", "[preload]")
{
	std::string progs = env_or_fail("PMT_PROGS"), lib = env_or_fail("PMT_LIB");
	std::string launcher = env_or_fail("PMT_LAUNCHER");
	scratch_dir dir;
	std::string json = dir.path + "/stats.json";
	run_result native = run({ progs + "/prog_locks" }, {});
	run_result r = run({ "/bin/sh", launcher, "run", "--stats", json, "--interval", "5", "--",
			     progs + "/prog_locks" },
			   { { "PMTHREADS_LIBRARY", lib } });
	INFO(r.err);
	CHECK(r.status == 0);
	CHECK(r.out == native.out);
	std::string s = slurp(json);
	CHECK(json_number(s, "interval_ms") == 5);
	run_result usage = run({ "/bin/sh", launcher, "bogus" }, {});
	CHECK(usage.status == 2);
	CHECK(usage.err.find("usage") != std::string::npos);
}
