// SPDX-License-Identifier: BSD-3-Clause
// The first minute of a user: `pmthreads run` on unmodified programs, with
// wrappers in front of them, children and exec behind them; strict mode;
// the statistics file after kill -9; --help and --version.
// tests/progs/lifecycle.c is never linked with pmthreads.
#include "subprocess.hpp"

#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern "C" {
#include "base/config.h"
}

namespace {
using namespace subprocess;

struct setup {
	std::string tool = env_or_fail("PMT_LAUNCHER");
	std::string lib = env_or_fail("PMT_LIB");
	std::string prog = env_or_fail("PMT_PROGS") + "/prog_lifecycle";
	std::string recover = env_or_fail("PMT_RECOVER_TOOL");
	scratch_dir dir;
	// Pools go to the default directory under the scratch dir.
	std::map<std::string, std::string> env() const
	{
		return { { "PMTHREADS_LIBRARY", lib }, { "XDG_DATA_HOME", dir.path } };
	}
	std::string pool_dir() const { return dir.path + "/pmthreads"; }
};

std::vector<std::string> files_in(const std::string &d)
{
	std::vector<std::string> names;
	if (DIR *dp = opendir(d.c_str())) {
		while (dirent *e = readdir(dp))
			if (e->d_name[0] != '.')
				names.push_back(e->d_name);
		closedir(dp);
	}
	return names;
}

long long bytes_in_use(const setup &s, const std::string &pool)
{
	run_result r = run({ s.recover, "check", pool }, {});
	INFO(r.describe());
	auto at = r.out.find(" bytes in use");
	REQUIRE(at != std::string::npos);
	auto start = r.out.rfind(' ', at - 1);
	return std::atoll(r.out.c_str() + start + 1);
}
} // namespace

TEST_CASE("pmthreads --help lists every option of the table; --version", "[cli]")
{
	setup s;
	run_result h = run({ s.tool, "--help" }, {});
	REQUIRE(h.status == 0);
	size_t n;
	const config_option *opts = config_options(&n);
	for (size_t i = 0; i < n; i++) {
		INFO(opts[i].env);
		CHECK(h.out.find(opts[i].env) != std::string::npos);
		if (opts[i].flag != nullptr)
			CHECK(h.out.find(opts[i].flag) != std::string::npos);
	}
	run_result v = run({ s.tool, "--version" }, {});
	CHECK(v.status == 0);
	CHECK(v.out.rfind("pmthreads ", 0) == 0);
}

TEST_CASE("pmthreads exits like env on a missing program and 2 on a bad option", "[cli]")
{
	setup s;
	run_result missing = run({ s.tool, "run", "--", "no-such-program-xyz" }, s.env());
	CHECK(missing.status == 127);
	CHECK(missing.err.find("'no-such-program-xyz': No such file or directory") !=
	      std::string::npos);
	run_result noexec = run({ s.tool, "run", "--", "/etc/passwd" }, s.env());
	CHECK(noexec.status == 126);
	run_result bad = run({ s.tool, "run", "--interval", "010x", "--", s.prog, "spin", "0" },
			     s.env());
	CHECK(bad.status == 2);
	CHECK(bad.err.find("PMTHREADS_INTERVAL_MS") != std::string::npos);
	auto env = s.env();
	env["PMTHREADS_INTERVALMS"] = "5";
	run_result typo = run({ s.tool, "run", "--", s.prog, "spin", "0" }, env);
	CHECK(typo.status == 2);
	CHECK(typo.err.find("did you mean PMTHREADS_INTERVAL_MS?") != std::string::npos);
	CHECK(files_in(s.pool_dir()).empty());
}

TEST_CASE("an unmodified program in nvmalloc mode is told that nothing persists", "[cli]")
{
	setup s;
	run_result r = run({ s.tool, "run", "--", s.prog, "spin", "0" }, s.env());
	CHECK(r.status == 0);
	CHECK(r.err.find("does not call the pmthreads API") != std::string::npos);
	CHECK(r.err.find("--heap malloc") != std::string::npos);
	// once, not per thread or per epoch
	CHECK(r.err.find("does not call") == r.err.rfind("does not call"));
	CHECK(files_in(s.pool_dir()).empty());
	// --strict: that is a failure to persist
	run_result strict = run({ s.tool, "run", "--strict", "--", s.prog, "spin", "0" }, s.env());
	CHECK(strict.status == 1);
}

TEST_CASE("wrappers pass through: only the target gets a pool", "[cli]")
{
	setup s;
	std::string exec_line = "exec " + s.prog + " spin 0";
	std::vector<std::vector<std::string>> wrapped = {
		{ "timeout", "10", s.prog, "spin", "0" },
		{ "/usr/bin/time", "-p", s.prog, "spin", "0" },
		{ "env", "FOO=1", "nice", "-n", "1", s.prog, "spin", "0" },
		{ "taskset", "-c", "0", s.prog, "spin", "0" },
		{ "sh", "-c", exec_line },
	};
	for (const auto &w : wrapped) {
		if (w[0][0] == '/' && access(w[0].c_str(), X_OK) != 0)
			continue;	// GNU time is not installed everywhere
		std::vector<std::string> argv = { s.tool, "run", "--heap", "malloc", "--verbose",
						  "--" };
		argv.insert(argv.end(), w.begin(), w.end());
		run_result r = run(argv, s.env());
		INFO(w[0] << ": " << r.describe());
		CHECK(r.status == 0);
		std::vector<std::string> pools = files_in(s.pool_dir());
		REQUIRE(pools.size() == 1);
		CHECK(pools[0] == "prog_lifecycle.pool");
		// the target says where its pool is, once; the wrapper says nothing
		CHECK(r.err.find("prog_lifecycle.pool (default)") != std::string::npos);
		CHECK(r.err.find("prog_lifecycle.pool (default)") ==
		      r.err.rfind("prog_lifecycle.pool (default)"));
	}
}

TEST_CASE("children do not inherit the preload unless --follow-children", "[cli]")
{
	setup s;
	auto env = s.env();
	// The user's own preload entry stays.
	env["LD_PRELOAD"] = "libm.so.6";
	std::vector<std::string> argv = { s.tool, "run", "--heap", "malloc", "--", s.prog, "child" };
	// run() drops LD_PRELOAD from the inherited environment but passes extra.
	run_result r = run(argv, env);
	INFO(r.describe());
	CHECK(r.status == 0);
	CHECK(r.out.find("child LD_PRELOAD=[libm.so.6]") != std::string::npos);
	CHECK(files_in(s.pool_dir()).size() == 1);

	argv.insert(argv.begin() + 2, "--follow-children");
	run_result f = run(argv, env);
	INFO(f.describe());
	CHECK(f.status == 0);
	CHECK(f.out.find("libpmthreads") != std::string::npos);
	CHECK(f.out.find("libm.so.6") != std::string::npos);
}

TEST_CASE("exec hands the pool to the new image without leaking the old heap", "[cli]")
{
	setup s;
	// Four images, each allocating 1 MiB in malloc mode.  Before, each exec
	// left the previous image's heap allocated in the pool.
	run_result r = run({ s.tool, "run", "--heap", "malloc", "--", s.prog, "exec", "3" },
			   s.env());
	INFO(r.describe());
	REQUIRE(r.status == 0);
	CHECK(r.out == "done\n");
	std::string pool = s.pool_dir() + "/prog_lifecycle.pool";
	long long used = bytes_in_use(s, pool);
	CHECK(used >= (1 << 20));
	CHECK(used < (2 << 20));
	// And a second run does not grow it either.
	REQUIRE(run({ s.tool, "run", "--heap", "malloc", "--", s.prog, "exec", "1" }, s.env())
			.status == 0);
	CHECK(bytes_in_use(s, pool) < (2 << 20));
}

TEST_CASE("--strict exits non-zero on a pool error instead of running unpersisted", "[cli]")
{
	setup s;
	// The pool path is a directory: opening it fails.
	std::vector<std::string> argv = { s.tool, "run", "--heap", "malloc", "--pool", s.dir.path,
					  "--", s.prog, "spin", "0" };
	run_result lax = run(argv, s.env());
	CHECK(lax.status == 0);
	CHECK(lax.err.find("error") != std::string::npos);
	argv.insert(argv.begin() + 2, "--strict");
	run_result strict = run(argv, s.env());
	INFO(strict.describe());
	CHECK(strict.status == 1);
	CHECK(strict.err.find("PMTHREADS_STRICT=1") != std::string::npos);
	// A malformed variable under the preload alone (no launcher to check it).
	auto env = s.env();
	env["LD_PRELOAD"] = s.lib;
	env["PMTHREADS_POOL_SIZE"] = "010";	// fine: decimal 10 is too small, an error
	env["PMTHREADS_STRICT"] = "1";
	run_result bad = run({ s.prog, "spin", "0" }, env);
	CHECK(bad.status == 1);
	env.erase("PMTHREADS_STRICT");
	run_result lax_bad = run({ s.prog, "spin", "0" }, env);
	CHECK(lax_bad.status == 0);
	CHECK(lax_bad.err.find("running without persistence") != std::string::npos);
}

TEST_CASE("the statistics file holds the last figures after kill -9", "[cli]")
{
	setup s;
	std::string json = s.dir.path + "/stats.json";
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		setenv("PMTHREADS_LIBRARY", s.lib.c_str(), 1);
		setenv("XDG_DATA_HOME", s.dir.path.c_str(), 1);
		execl(s.tool.c_str(), s.tool.c_str(), "run", "--heap", "malloc", "--interval", "20",
		      "--stats", json.c_str(), "--", s.prog.c_str(), "spin", "120", (char *)nullptr);
		_exit(127);
	}
	// Two periodic writes at least (one per second).
	long long epochs = -1;
	for (int i = 0; i < 600 && epochs < 20; i++) {	// up to 60 s on a loaded machine
		usleep(100000);
		epochs = json_number(slurp(json), "epochs");
	}
	usleep(1100000);
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	std::string text = slurp(json);
	INFO(text);
	CHECK(text.rfind("{", 0) == 0);
	CHECK(text.find("}\n") != std::string::npos);
	CHECK(json_number(text, "epochs") >= 20);
	CHECK(json_number(text, "interval_ms") == 20);
	struct stat st_json;
	REQUIRE(stat(json.c_str(), &st_json) == 0);
	CHECK((st_json.st_mode & 0777) == 0600);
	// Only the report itself is left in the directory (no temporary file).
	for (const auto &f : files_in(s.dir.path))
		CHECK(f.find(".tmp") == std::string::npos);
}

TEST_CASE("check mode's interval is the one the statistics report", "[cli]")
{
	setup s;
	std::string json = s.dir.path + "/stats.json";
	run_result r = run({ s.tool, "run", "--heap", "malloc", "--check", "--stats", json, "--",
			     s.prog, "spin", "0" }, s.env());
	INFO(r.describe());
	CHECK(r.status == 0);
	CHECK(json_number(slurp(json), "interval_ms") == CONFIG_CHECK_INTERVAL_MS);
}

TEST_CASE("statistics and epoch log are not written through a symlink", "[cli]")
{
	setup s;
	std::string victim = s.dir.path + "/victim";
	{
		FILE *f = fopen(victim.c_str(), "w");
		REQUIRE(f != nullptr);
		fputs("keep me\n", f);
		fclose(f);
	}
	std::string link = s.dir.path + "/log.csv";
	REQUIRE(symlink(victim.c_str(), link.c_str()) == 0);
	run_result r = run({ s.tool, "run", "--heap", "malloc", "--epoch-log", link, "--", s.prog,
			     "spin", "0" }, s.env());
	CHECK(r.err.find("symbolic link") != std::string::npos);
	CHECK(slurp(victim) == "keep me\n");
	// The statistics replace the link itself, never the file behind it.
	run_result st = run({ s.tool, "run", "--heap", "malloc", "--stats", link, "--", s.prog,
			      "spin", "0" }, s.env());
	CHECK(st.status == 0);
	CHECK(slurp(victim) == "keep me\n");
	struct stat lst;
	REQUIRE(lstat(link.c_str(), &lst) == 0);
	CHECK(S_ISREG(lst.st_mode));
}

TEST_CASE("--check=fail: file:line in the summary, and exit status 1", "[cli]")
{
	setup s;
	std::string unlocked = env_or_fail("PMT_PROGS") + "/prog_unlocked";
	for (const char *mode : { "--check", "--check=fail" }) {
		run_result r = run({ s.tool, "run", "--heap", "malloc", mode, "--", unlocked },
				   s.env());
		INFO(mode << ": " << r.describe());
		bool fail = std::string(mode) == "--check=fail";
		CHECK(r.status == (fail ? 1 : 0));
		CHECK(r.out.find("sum ") == 0);	// stdout flushed before the exit
		CHECK(r.err.find("site 1: ") != std::string::npos);
		// tests/progs are built with -g: the summary names the line
		CHECK(r.err.find("in store_without_lock at ") != std::string::npos);
		CHECK(r.err.find("unlocked.c:") != std::string::npos);
	}
	// No violation: --check=fail leaves the status alone.
	run_result clean = run({ s.tool, "run", "--heap", "malloc", "--check=fail", "--", s.prog,
				 "spin", "0" }, s.env());
	CHECK(clean.status == 0);
}

TEST_CASE("a pool size that differs from the existing pool's is reported", "[cli]")
{
	setup s;
	std::vector<std::string> argv = { s.tool, "run", "--heap", "malloc", "--pool-size", "64M",
					  "--", s.prog, "spin", "0" };
	run_result first = run(argv, s.env());
	REQUIRE(first.status == 0);
	CHECK(first.err.find("is ignored") == std::string::npos);
	argv[5] = "128M";
	run_result second = run(argv, s.env());
	INFO(second.describe());
	CHECK(second.status == 0);
	CHECK(second.err.find("PMTHREADS_POOL_SIZE=128 MiB is ignored") != std::string::npos);
	CHECK(second.err.find("holds 64 MiB") != std::string::npos);
}

TEST_CASE("malloc mode after a crash: told that an unnamed heap cannot come back", "[cli]")
{
	setup s;
	std::string json = s.dir.path + "/stats.json";
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		setenv("PMTHREADS_LIBRARY", s.lib.c_str(), 1);
		setenv("XDG_DATA_HOME", s.dir.path.c_str(), 1);
		execl(s.tool.c_str(), s.tool.c_str(), "run", "--heap", "malloc", "--interval", "10",
		      "--stats", json.c_str(), "--", s.prog.c_str(), "spin", "120", (char *)nullptr);
		_exit(127);
	}
	std::string pool = s.pool_dir() + "/prog_lifecycle.pool";
	// Until epochs have made the 256 KiB it holds durable (the pool cannot
	// be read while the program holds it; the statistics can).
	for (int i = 0; i < 600 && json_number(slurp(json), "epochs_persisted") < 3; i++)
		usleep(100000);	// up to 60 s on a loaded machine
	std::string before = slurp(json);
	kill(pid, SIGKILL);
	INFO("statistics before the kill:\n" << before);
	REQUIRE(json_number(before, "epochs_persisted") >= 3);
	int st;
	waitpid(pid, &st, 0);
	run_result r = run({ s.tool, "run", "--heap", "malloc", "--stats", json, "--", s.prog, "spin",
			     "0" }, s.env());
	INFO(r.describe());
	CHECK(r.status == 0);
	CHECK(r.err.find("previous run of this program crashed") != std::string::npos);
	CHECK(json_number(slurp(json), "heap_reset_bytes") >= (256 << 10));
	CHECK(r.err.find("nvrecover") != std::string::npos);
	// this run's 256 KiB, not the crashed run's too
	CHECK(bytes_in_use(s, pool) < (400 << 10));
}

TEST_CASE("--stats -: the report reaches stderr even when the program closed it", "[cli]")
{
	setup s;
	run_result r = run({ s.tool, "run", "--heap", "malloc", "--stats", "-", "--", s.prog,
			     "closeerr" }, s.env());
	INFO(r.describe());
	CHECK(r.status == 0);
	// The report is there: its keys, whatever the counts.
	CHECK(r.err.find("\"epochs\": ") != std::string::npos);
	CHECK(r.err.find("\"heap_mode\": \"malloc\"") != std::string::npos);
}

// Needs root and setpriv to run the program as another user (nobody), whose
// fallback directory no other test touches: the cli-root test, which meson
// skips otherwise (PMT_TEST_NEEDS=root).
TEST_CASE("the /tmp fallback pool directory is used only if it is ours with mode 0700",
	  "[cli][root]")
{
	setup s;
	REQUIRE(chmod(s.dir.path.c_str(), 0755) == 0);
	std::string dir = "/tmp/pmthreads-65534";
	(void)!system(("rm -rf " + dir).c_str());
	REQUIRE(mkdir(dir.c_str(), 0777) == 0);	// made by root: not nobody's
	REQUIRE(chmod(dir.c_str(), 0777) == 0);
	std::vector<std::string> argv = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
					  "--clear-groups", "/usr/bin/env", "-u", "HOME", "-u",
					  "XDG_DATA_HOME", s.tool, "run", "--heap", "malloc",
					  "--strict", "--", s.prog, "spin", "0" };
	std::map<std::string, std::string> env = { { "PMTHREADS_LIBRARY", s.lib } };
	run_result bad = run(argv, env);
	INFO(bad.describe());
	CHECK(bad.status == 1);
	CHECK(bad.err.find("is not a directory of yours with mode 0700") != std::string::npos);
	// nobody's own directory, 0700: accepted
	REQUIRE(rmdir(dir.c_str()) == 0);
	run_result good = run(argv, env);
	INFO(good.describe());
	CHECK(good.status == 0);
	struct stat st;
	REQUIRE(stat(dir.c_str(), &st) == 0);
	CHECK(st.st_uid == 65534);
	CHECK((st.st_mode & 0777) == 0700);
	(void)!system(("rm -rf " + dir).c_str());
}
