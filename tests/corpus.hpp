/* SPDX-License-Identifier: BSD-3-Clause */
// What the corpus suites share (tests/test_corpus.cpp: programs that run to
// their end; tests/test_corpus_servers.cpp: servers driven by a client):
// finding a program, the environment of a run under `pmthreads run` in one
// of this half's modes (uffd_half.h), how a run ended, and what the runtime
// printed that it should not have.
#ifndef PMT_TESTS_CORPUS_HPP
#define PMT_TESTS_CORPUS_HPP

#include "find_program.hpp"
#include "pool_medium.hpp"
#include "subprocess.hpp"
#include "uffd_half.h"

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace corpus {

inline std::string how_it_ended(int wait_status)
{
	std::ostringstream s;
	if (WIFEXITED(wait_status))
		s << "exit " << WEXITSTATUS(wait_status);
	else if (WIFSIGNALED(wait_status))
		s << "killed by signal " << WTERMSIG(wait_status) << " ("
		  << strsignal(WTERMSIG(wait_status)) << ")";
	return s.str();
}

inline std::string command_line(const std::vector<std::string> &argv)
{
	std::string s;
	for (auto &a : argv)
		s += (s.empty() ? "" : " ") + a;
	return s;
}

inline std::map<std::string, std::string> base_env(const std::string &tmp)
{
	// Messages and sort order independent of the caller's locale;
	// temporary files in the scratch directory.
	return { { "LC_ALL", "C" }, { "TMPDIR", tmp } };
}

// PMT_CORPUS_ENV="NAME=VALUE ...": more variables for the runs under
// pmthreads, to try another configuration by hand (subprocess::run passes
// no PMTHREADS_* variable of the test's own environment through).
inline std::map<std::string, std::string> extra_env()
{
	std::map<std::string, std::string> env;
	const char *e = getenv("PMT_CORPUS_ENV");
	std::istringstream words(e != nullptr ? e : "");
	std::string w;
	while (words >> w) {
		auto eq = w.find('=');
		if (eq == std::string::npos || eq == 0)
			FAIL("PMT_CORPUS_ENV: '" << w << "' is not NAME=VALUE");
		env[w.substr(0, eq)] = w.substr(eq + 1);
	}
	return env;
}

// Where a case's pools go: the run's medium (pool_medium.hpp).  By default
// in memory (/dev/shm, emulated pmem: an epoch every interval; an msync
// write-back to a disk-backed /tmp on a loaded machine can take longer than
// the whole run); with PMT_POOL_MEDIUM=disk a file on a disk, the log backend.
struct pool_place {
	pool_medium::dir mem{ "corpus" };
	std::string dir = mem.path;
};

// `pmthreads run -- argv` in mode m: its command line and environment, a
// fresh pool per mode, the statistics report at `stats`.
struct pmthreads_run {
	std::vector<std::string> argv;
	std::map<std::string, std::string> env;
};

inline pmthreads_run under_pmthreads(const std::vector<std::string> &argv,
				     std::map<std::string, std::string> env, const preload_mode &m,
				     const pool_place &pools, const std::string &stats,
				     unsigned interval_ms)
{
	std::string tag = std::string(m.heap) + "-" + m.tracker;
	pmthreads_run r;
	r.argv = { subprocess::env_or_fail("PMT_LAUNCHER"), "run", "--" };
	r.argv.insert(r.argv.end(), argv.begin(), argv.end());
	env.insert({ { "PMTHREADS_LIBRARY", subprocess::env_or_fail("PMT_LIB") },
		     { "PMTHREADS_POOL", pools.dir + "/" + tag + ".pool" },
		     { "PMTHREADS_POOL_SIZE", "256M" },
		     { "PMTHREADS_HEAP", m.heap },
		     { "PMTHREADS_TRACKER", m.tracker },
		     { "PMTHREADS_INTERVAL_MS", std::to_string(interval_ms) },
		     { "PMTHREADS_STATS", stats } });
	pool_medium::child_env(env);
	for (auto &kv : extra_env())
		env[kv.first] = kv.second;
	r.env = env;
	return r;
}

// The lines of the runtime's messages in `err` that say something went
// wrong: every error and failed assertion, and each warning but the note
// that a program not using the API persists nothing in the nvmalloc mode.
// Where the program holds a lock for its life or across its event loop
// (node's V8 Locker, HotSpot's VM thread, redis' GIL), `stall_expected`: the
// runtime's stall report is then what it must say, however long the machine
// takes -- the report as a whole (its header, "durability has stood still"
// or "durability resumes", and the indented lines under it) and the exit's
// "no quiescent point could be reached".  Elsewhere a stall report is a
// complaint like any other.  Empty when there is none.
inline std::string runtime_complaints(const std::string &err, bool stall_expected)
{
	static const char *const stall_headers[] = { "warning: durability has stood still",
						     "warning: durability resumes",
						     "warning: no quiescent point could be reached at exit" };
	std::istringstream lines(err);
	std::string out;
	bool in_stall_report = false;
	for (std::string line; std::getline(lines, line);) {
		auto at = line.find("pmthreads: ");
		if (at == std::string::npos)
			continue;
		std::string rest = line.substr(at + 11);
		if (rest.rfind("info: ", 0) == 0 || rest.rfind("debug: ", 0) == 0)
			continue;
		bool header = false;
		for (const char *h : stall_headers)
			header = header || rest.rfind(h, 0) == 0;
		if (header)
			in_stall_report = true;
		else if (rest.rfind("warning:   ", 0) != 0)
			in_stall_report = false;
		bool benign = (in_stall_report && stall_expected) ||
			      (rest.rfind("warning: ", 0) == 0 &&
			       rest.find("does not call the pmthreads API") != std::string::npos);
		if (!benign)
			out += line + "\n";
	}
	return out;
}

} // namespace corpus

#endif
