/* SPDX-License-Identifier: BSD-3-Clause */
// The manual pages against the code: every option that a command's --help
// lists is in its page (pmthreads(1), pmthreads-recover(1)), the pool format
// versions the pages name are the tools' (both come from POOL_FORMAT_VERSION,
// the pages through man/meson.build), and every function <pmthreads.h>
// declares has its page, installed.
#include "subprocess.hpp"

extern "C" {
#include "persist/pool.h"
}

#include <regex>
#include <set>

namespace {

std::string env_or_fail(const char *name)
{
	const char *v = getenv(name);
	INFO(name << " must be set (meson test sets it)");
	REQUIRE(v != nullptr);
	return v;
}

std::string read_or_fail(const std::string &path)
{
	INFO(path);
	REQUIRE(access(path.c_str(), R_OK) == 0);
	return subprocess::slurp(path);
}

// The options a help text names: --word[-word...].
std::set<std::string> options_in(const std::string &help)
{
	std::set<std::string> out;
	static const std::regex opt("--[a-z][a-z-]*[a-z]");
	for (auto it = std::sregex_iterator(help.begin(), help.end(), opt); it != std::sregex_iterator(); ++it)
		out.insert(it->str());
	return out;
}

// As roff writes it: every hyphen escaped.
std::string roff(const std::string &s)
{
	std::string r;
	for (char c : s)
		r += c == '-' ? std::string("\\-") : std::string(1, c);
	return r;
}

std::string help_of(std::vector<std::string> argv)
{
	subprocess::run_result r = subprocess::run(argv, {});
	INFO(argv[0] << " " << argv[1] << ": " << r.describe());
	REQUIRE(r.status == 0);
	return r.out;
}

} // namespace

TEST_CASE("every option of pmthreads --help is in pmthreads(1)", "[man]")
{
	std::string page = read_or_fail(env_or_fail("PMT_SOURCE_ROOT") + "/man/pmthreads.1");
	std::set<std::string> opts = options_in(help_of({ env_or_fail("PMT_LAUNCHER"), "--help" }));
	CHECK(opts.size() > 20);
	for (const std::string &o : opts) {
		INFO(o << " is in pmthreads --help but not in man/pmthreads.1");
		CHECK(page.find(roff(o)) != std::string::npos);
	}
}

TEST_CASE("every option of pmthreads-recover's --help is in pmthreads-recover(1)", "[man]")
{
	std::string tool = env_or_fail("PMT_RECOVER_TOOL");
	std::string page = read_or_fail(env_or_fail("PMT_MAN_BUILD") + "/pmthreads-recover.1");
	std::set<std::string> opts = options_in(help_of({ tool, "--help" }));
	for (const char *cmd : { "info", "check", "dump", "list", "rm", "create", "upgrade" }) {
		std::set<std::string> more = options_in(help_of({ tool, cmd, "--help" }));
		opts.insert(more.begin(), more.end());
	}
	for (const char *must : { "--dir", "--size", "--log-size", "--program", "--salvage", "--json" })
		CHECK(opts.count(must) == 1);
	for (const std::string &o : opts) {
		INFO(o << " is in a pmthreads-recover --help but not in man/pmthreads-recover.1.in");
		CHECK(page.find(roff(o)) != std::string::npos);
	}
}

TEST_CASE("the pool format versions in the pages and the tool's help are POOL_FORMAT_VERSION's",
	  "[man]")
{
	std::string build = env_or_fail("PMT_MAN_BUILD");
	std::string tool = env_or_fail("PMT_RECOVER_TOOL");
	std::string now = std::to_string(POOL_FORMAT_VERSION);
	std::string older = "2 to " + std::to_string(POOL_FORMAT_VERSION - 1);
	for (const char *page : { "pmthreads-recover.1", "pmthreads.7" }) {
		std::string text = read_or_fail(build + "/" + page);
		INFO(page);
		CHECK(text.find('@') == std::string::npos); // every substitution made
		CHECK(text.find("format version " + older) != std::string::npos);
	}
	std::string recover_page = read_or_fail(build + "/pmthreads-recover.1");
	CHECK(recover_page.find("current format\n(" + now + ":") != std::string::npos);
	CHECK(help_of({ tool, "--version" }).find("pool format " + now) != std::string::npos);
	std::string help = help_of({ tool, "--help" });
	CHECK(help.find("(2 to\n                              " + std::to_string(POOL_FORMAT_VERSION - 1) +
			") to the current one (" + now + ")") != std::string::npos);
	CHECK(help_of({ tool, "upgrade", "--help" }).find("(" + older + ")") != std::string::npos);
}

TEST_CASE("every function of <pmthreads.h> has its manual page, installed", "[man]")
{
	std::string src = env_or_fail("PMT_SOURCE_ROOT");
	std::string header = read_or_fail(src + "/lib/include/pmthreads.h");
	std::string install = read_or_fail(src + "/man/meson.build");
	// A declaration at the start of a line: TYPE [*]NAME(...
	static const std::regex decl("\n[a-z][a-z_0-9 ]*[ *]([a-z_0-9]+)\\(");
	std::set<std::string> functions;
	for (auto it = std::sregex_iterator(header.begin(), header.end(), decl); it != std::sregex_iterator(); ++it)
		functions.insert((*it)[1].str());
	CHECK(functions.size() >= 9);
	for (const std::string &f : functions) {
		INFO(f);
		std::string page = read_or_fail(src + "/man/" + f + ".3");
		CHECK(page.find(".SH NAME\n" + f) != std::string::npos);
		CHECK(install.find("'" + f + ".3'") != std::string::npos);
	}
	// NVthreads' names (<nvrecovery.h>): links to the page they stand for,
	// which names them.
	for (auto [nvt, target] : { std::pair<std::string, std::string>{ "isCrashed", "pmthreads_crashed" },
				    { "nvcheckpoint", "pmthreads_sync" } }) {
		INFO(nvt);
		CHECK(install.find("'" + nvt + ".3' : '" + target + ".3'") != std::string::npos);
		CHECK(read_or_fail(src + "/man/" + target + ".3").find(", " + nvt + " \\-") != std::string::npos);
	}
}
