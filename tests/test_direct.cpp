/* SPDX-License-Identifier: BSD-3-Clause */
// Whole pages (docs/design.md, "Whole pages: one copy, straight to the file")
// where the machine takes less than they use: the log backend writes them
// asynchronously (Linux AIO) through a descriptor opened for direct I/O
// (lib/persist/nvm_log_direct.c).  A kernel without AIO, a seccomp policy
// that refuses io_submit (tests/no_aio.c), a file system that opens for
// direct I/O but refuses such writes (lossyfs --refuse-direct-writes): the
// pages go synchronously, through the page cache where they must, and the
// acknowledged counter survives a power cut.
#include "lossyfs_mount.hpp"
#include "pool_medium.hpp"
#include "subprocess.hpp"

#include <fstream>
#include <sstream>

namespace {

struct run_figures {
	subprocess::run_result verify;
	std::string stats;
	std::string counter;
};

double json_number(const std::string &json, const std::string &key)
{
	size_t at = json.find("\"" + key + "\":");
	REQUIRE(at != std::string::npos);
	return strtod(json.c_str() + at + key.size() + 3, nullptr);
}

// ackcount: a 1 MiB buffer, every line stamped each round, one sync a round:
// an epoch of 256 whole pages a round, written whole from the first.  Then
// the counter found again by a new process.
run_figures count_rounds(const std::vector<std::string> &wrapper, const std::string &pool,
			 const std::string &stats, const std::string &extra_env_key = "",
			 const std::string &extra_env_val = "")
{
	std::map<std::string, std::string> env = { { "PMTHREADS_POOL", pool },
						   { "PMTHREADS_POOL_SIZE", "16M" },
						   { "PMTHREADS_NVM", "log" },
						   { "PMTHREADS_STATS", stats } };
	if (!extra_env_key.empty())
		env[extra_env_key] = extra_env_val;
	std::vector<std::string> argv = wrapper;
	argv.push_back(subprocess::env_or_fail("PMT_ACKCOUNT"));
	std::vector<std::string> run = argv;
	run.insert(run.end(), { "run", "12", "1" });
	auto r = subprocess::run(run, env);
	INFO(r.describe());
	REQUIRE(r.exited_ok());
	REQUIRE(r.out.find("acked 12 ") != std::string::npos);
	run_figures f;
	f.stats = subprocess::slurp(stats);
	std::vector<std::string> verify = argv;
	verify.push_back("verify");
	env.erase("PMTHREADS_STATS");
	f.verify = subprocess::run(verify, env);
	return f;
}

} // namespace

TEST_CASE("whole pages are written without Linux AIO, and without its io_submit", "[direct]")
{
	// Whole pages are the log backend's: a pool on a disk (or exit 77,
	// skipped, where the machine has no disk directory).
	pool_medium::set_own_env();
	REQUIRE(pool_medium::on_disk());
	pool_medium::dir d("direct");
	const std::string no_aio = subprocess::env_or_fail("PMT_NO_AIO");
	for (const std::vector<std::string> &w : { std::vector<std::string>{},
						   std::vector<std::string>{ no_aio },
						   std::vector<std::string>{ no_aio, "--submit" } }) {
		std::string tag = w.empty() ? "aio" : w.size() == 1 ? "no-aio" : "no-submit";
		INFO(tag);
		run_figures f = count_rounds(w, d.file((tag + ".pool").c_str()),
					     d.file((tag + ".json").c_str()));
		INFO("statistics:\n" << f.stats << "\nverify: " << f.verify.describe());
		CHECK(f.verify.exited_ok());
		CHECK(f.verify.out.find("counter 12") != std::string::npos);
		// Written whole, not line by line: at least a round's 256 pages.
		CHECK(json_number(f.stats, "pages_whole") >= 256);
		CHECK(json_number(f.stats, "device_direct_bytes") >= 256 * 4096.0);
		CHECK(json_number(f.stats, "io_error") == 0);
	}
}

TEST_CASE("whole pages on a file system that opens for direct I/O but refuses its writes survive a "
	  "power cut", "[direct][lossyfs]")
{
	subprocess::scratch_dir dir;
	lossyfs::mount_point m = lossyfs::make(subprocess::env_or_fail("PMT_LOSSYFS"), dir.path);
	INFO(subprocess::slurp(m.log));
	REQUIRE(m.start("--refuse-direct-writes"));
	const std::string pool = m.mnt + "/direct.pool";
	run_figures f = count_rounds({}, pool, dir.path + "/stats.json");
	INFO("statistics:\n" << f.stats << "\nverify: " << f.verify.describe());
	CHECK(f.verify.out.find("counter 12") != std::string::npos);
	CHECK(json_number(f.stats, "pages_whole") >= 256);
	CHECK(json_number(f.stats, "io_error") == 0);
	// The file system refused them: lossyfs counted its refusals.
	std::ifstream ctl(m.mnt + "/.lossyfs-ctl");
	std::stringstream counters;
	counters << ctl.rdbuf();
	INFO(counters.str());
	CHECK(counters.str().find("refused-direct 0") == std::string::npos);
	// The power cut: every acknowledged round kept.
	m.stop();
	REQUIRE(m.start("--refuse-direct-writes"));
	auto again = subprocess::run({ subprocess::env_or_fail("PMT_ACKCOUNT"), "verify" },
				     { { "PMTHREADS_POOL", pool }, { "PMTHREADS_POOL_SIZE", "16M" },
				       { "PMTHREADS_NVM", "log" } });
	INFO(again.describe());
	CHECK(again.exited_ok());
	CHECK(again.out.find("counter 12") != std::string::npos);
	m.stop();
}
