/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/config: defaults, every option, and malformed values.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include "base/config.h"
#include "base/log.h"
}

namespace {
const char *const all_vars[] = {
	"PMTHREADS_POOL", "PMTHREADS_POOL_SIZE", "PMTHREADS_INTERVAL_MS", "PMTHREADS_HEAP",
	"PMTHREADS_TRACKER", "PMTHREADS_WRITEBACK", "PMTHREADS_NVM", "PMTHREADS_STATS", "PMTHREADS_EPOCH_LOG",
	"PMTHREADS_VERBOSE",
	"PMTHREADS_CHECK", "PMTHREADS_NVM_LATENCY_NS", "PMTHREADS_SHADOW_BASE",
	"PMTHREADS_STRICT", "PMTHREADS_PROGRAM", "PMTHREADS_FOLLOW_CHILDREN",
	"PMTHREADS_NOT_FASE", "PMTHREADS_SYNC_TIMEOUT_MS",
	"PMTHREADS_INTERVALMS",
};

struct clean_env {
	clean_env() { for (auto v : all_vars) unsetenv(v); }
	~clean_env() { for (auto v : all_vars) unsetenv(v); }
};
} // namespace

TEST_CASE("config defaults need no environment", "[config]")
{
	clean_env env;
	struct config c;
	REQUIRE(config_from_env(&c) == 0);
	CHECK(c.pool_size == CONFIG_DEFAULT_POOL_SIZE);
	CHECK(c.interval_ms == 100);
	CHECK(c.heap == HEAP_NVMALLOC);
	CHECK(c.tracker == TRACKER_AUTO);
	CHECK(c.pool_path_is_default);
	CHECK(std::string(c.pool_path).find(".pool") != std::string::npos);
	CHECK(c.pool_path[0] == '/');
	CHECK(c.stats_path[0] == '\0');
}

// Each default is written once, as a typed value in the option table: what
// --help shows for it is what config_defaults stores.  A value the table shows
// as a value of its kind, set from that text, changes no field.
TEST_CASE("config defaults are the table's, as --help shows them", "[config]")
{
	struct config defaults;
	config_defaults(&defaults);
	size_t n;
	const struct config_option *opts = config_options(&n);
	size_t checked = 0;
	for (size_t i = 0; i < n; i++) {
		const struct config_option *o = &opts[i];
		if (o->def_text != nullptr || o->kind == CONFIG_TOOL)
			continue;
		char buf[32];
		const char *text = config_default_text(o, buf, sizeof(buf));
		struct config set = defaults;
		INFO(o->env << " default " << text);
		REQUIRE(config_set(&set, o, text) == 0);
		set.pool_size_given = defaults.pool_size_given;
		set.verbose_given = defaults.verbose_given;
		CHECK(std::memcmp(&set, &defaults, sizeof(set)) == 0);
		checked++;
	}
	CHECK(checked >= 15);
	CHECK(defaults.sync_timeout_ms == CONFIG_DEFAULT_SYNC_TIMEOUT_MS);
	CHECK(defaults.shadow_base == 0x600000000000ULL);
	CHECK(defaults.interval_ms_asked == defaults.interval_ms);
}

TEST_CASE("config reads every option", "[config]")
{
	clean_env env;
	setenv("PMTHREADS_POOL", "/dev/shm/x.pool", 1);
	setenv("PMTHREADS_POOL_SIZE", "64M", 1);
	setenv("PMTHREADS_INTERVAL_MS", "10", 1);
	setenv("PMTHREADS_HEAP", "malloc", 1);
	setenv("PMTHREADS_TRACKER", "mprotect", 1);
	setenv("PMTHREADS_WRITEBACK", "paused", 1);
	setenv("PMTHREADS_STATS", "-", 1);
	setenv("PMTHREADS_EPOCH_LOG", "/tmp/epochs.csv", 1);
	setenv("PMTHREADS_VERBOSE", "1", 1);
	setenv("PMTHREADS_CHECK", "1", 1);
	setenv("PMTHREADS_NVM_LATENCY_NS", "100", 1);
	setenv("PMTHREADS_SHADOW_BASE", "0x500000000000", 1);
	struct config c;
	REQUIRE(config_from_env(&c) == 0);
	CHECK(std::string(c.pool_path) == "/dev/shm/x.pool");
	CHECK_FALSE(c.pool_path_is_default);
	CHECK(c.pool_size == 64ULL << 20);
	CHECK(c.writeback == WRITEBACK_PAUSED);
	CHECK(c.interval_ms == 10);
	CHECK(c.heap == HEAP_MALLOC);
	CHECK(c.tracker == TRACKER_MPROTECT);
	CHECK(std::string(c.stats_path) == "-");
	CHECK(std::string(c.epoch_log_path) == "/tmp/epochs.csv");
	CHECK(c.verbose == 1);
	CHECK(c.check);
	CHECK(c.nvm_latency_ns == 100);
	CHECK(c.shadow_base == 0x500000000000ULL);
}

TEST_CASE("config rejects malformed values with a message naming them", "[config]")
{
	struct bad { const char *var, *value; };
	const bad cases[] = {
		{"PMTHREADS_POOL_SIZE", "lots"}, {"PMTHREADS_POOL_SIZE", "12Q"},
		{"PMTHREADS_POOL_SIZE", "1K"}, {"PMTHREADS_POOL_SIZE", "99999999T"},
		{"PMTHREADS_INTERVAL_MS", "0"}, {"PMTHREADS_INTERVAL_MS", "-5"},
		{"PMTHREADS_INTERVAL_MS", "10ms"}, {"PMTHREADS_INTERVAL_MS", ""},
		{"PMTHREADS_HEAP", "tcmalloc"}, {"PMTHREADS_TRACKER", "UFFD"},
		{"PMTHREADS_WRITEBACK", "copy"},
		{"PMTHREADS_NVM", "sim"}, {"PMTHREADS_VERBOSE", "yes"},
		{"PMTHREADS_CHECK", "2"}, {"PMTHREADS_SHADOW_BASE", "0x600000000001"},
		{"PMTHREADS_POOL", ""},
	};
	for (const auto &b : cases) {
		clean_env env;
		setenv(b.var, b.value, 1);
		struct config c;
		INFO(b.var << "=" << b.value);
		REQUIRE(config_from_env(&c) == -1);
		std::string msg = err_get();
		CHECK(msg.find(b.var) != std::string::npos);
		CHECK(msg.find("expected") != std::string::npos);
	}
}

TEST_CASE("config: PMTHREADS_NOT_FASE is a list of symbol names; the sync timeout", "[config]")
{
	clean_env env;
	struct config c;
	REQUIRE(config_from_env(&c) == 0);
	CHECK(c.not_fase[0] == '\0');
	CHECK(c.sync_timeout_ms == 10000);
	setenv("PMTHREADS_NOT_FASE", "moduleInitModulesSystem,moduleAcquireGIL,_ZN2v86LockerC1EPNS_7IsolateE", 1);
	setenv("PMTHREADS_SYNC_TIMEOUT_MS", "250", 1);
	REQUIRE(config_from_env(&c) == 0);
	CHECK(std::string(c.not_fase) == "moduleInitModulesSystem,moduleAcquireGIL,_ZN2v86LockerC1EPNS_7IsolateE");
	CHECK(c.sync_timeout_ms == 250);
	for (const char *bad : { "a, b", ",a", "a,", "a,,b", "f()", "a;b" }) {
		INFO(bad);
		setenv("PMTHREADS_NOT_FASE", bad, 1);
		CHECK(config_from_env(&c) != 0);
		CHECK(std::string(err_get()).find("PMTHREADS_NOT_FASE=") != std::string::npos);
		CHECK(std::string(err_get()).find("function names separated by commas") != std::string::npos);
	}
	unsetenv("PMTHREADS_NOT_FASE");
	setenv("PMTHREADS_SYNC_TIMEOUT_MS", "0", 1);
	CHECK(config_from_env(&c) != 0);
}

TEST_CASE("config_parse_size accepts suffixes", "[config]")
{
	uint64_t v;
	REQUIRE(config_parse_size("4096", &v) == 0); CHECK(v == 4096);
	REQUIRE(config_parse_size("2k", &v) == 0); CHECK(v == 2048);
	REQUIRE(config_parse_size("3MiB", &v) == 0); CHECK(v == 3ULL << 20);
	REQUIRE(config_parse_size("1G", &v) == 0); CHECK(v == 1ULL << 30);
	CHECK(config_parse_size("", &v) == -1);
	CHECK(config_parse_size("G", &v) == -1);
	CHECK(config_parse_size("1GG", &v) == -1);
}

TEST_CASE("config numbers are decimal: 010 is ten, not eight", "[config]")
{
	clean_env env;
	setenv("PMTHREADS_INTERVAL_MS", "010", 1);
	setenv("PMTHREADS_NVM_LATENCY_NS", "0x10", 1);
	struct config c;
	REQUIRE(config_from_env(&c) == -1);	// hex is not a number here
	CHECK(std::string(err_get()).find("PMTHREADS_NVM_LATENCY_NS") != std::string::npos);
	unsetenv("PMTHREADS_NVM_LATENCY_NS");
	REQUIRE(config_from_env(&c) == 0);
	CHECK(c.interval_ms == 10);
	setenv("PMTHREADS_POOL_SIZE", "010M", 1);
	REQUIRE(config_from_env(&c) == 0);
	CHECK(c.pool_size == 10ULL << 20);
	CHECK(c.pool_size_given);
	// an address may be hex, and only with 0x
	setenv("PMTHREADS_SHADOW_BASE", "0x500000000000", 1);
	REQUIRE(config_from_env(&c) == 0);
	CHECK(c.shadow_base == 0x500000000000ULL);
}

TEST_CASE("config refuses an unknown PMTHREADS_* variable and suggests the name", "[config]")
{
	clean_env env;
	setenv("PMTHREADS_INTERVALMS", "5", 1);
	struct config c;
	REQUIRE(config_from_env(&c) == -1);
	std::string msg = err_get();
	CHECK(msg.find("PMTHREADS_INTERVALMS is not a pmthreads variable") != std::string::npos);
	CHECK(msg.find("did you mean PMTHREADS_INTERVAL_MS?") != std::string::npos);
}

TEST_CASE("config: check mode's tracker and interval are applied in the one struct", "[config]")
{
	clean_env env;
	setenv("PMTHREADS_CHECK", "fail", 1);
	setenv("PMTHREADS_TRACKER", "uffd", 1);
	struct config c;
	REQUIRE(config_from_env(&c) == 0);
	CHECK(c.check == CHECK_FAIL);
	CHECK(c.tracker == TRACKER_MPROTECT);
	CHECK(c.tracker_asked == TRACKER_UFFD);
	CHECK(c.interval_ms == CONFIG_CHECK_INTERVAL_MS);
	CHECK(c.interval_ms_asked == 100);
}

TEST_CASE("config table: every entry is documented in pmthreads(7), which the README points to", "[config]")
{
	const char *src = getenv("PMT_SOURCE_ROOT");
	REQUIRE(src != nullptr);
	std::string man, readme;
	for (auto [path, out] : { std::pair<std::string, std::string *>{ std::string(src) + "/man/pmthreads.7.in", &man },
				  { std::string(src) + "/README.md", &readme } }) {
		FILE *f = fopen(path.c_str(), "r");
		INFO(path);
		REQUIRE(f != nullptr);
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			out->append(buf, n);
		fclose(f);
	}
	// The environment is documented in one place, the manual page; the
	// README sends its reader there.
	CHECK(readme.find("pmthreads(7)") != std::string::npos);
	size_t n;
	const config_option *opts = config_options(&n);
	for (size_t i = 0; i < n; i++) {
		INFO(opts[i].env);
		// groff escapes the underscore-free names unchanged
		CHECK(man.find(opts[i].env) != std::string::npos);
		if (opts[i].flag != nullptr) {
			std::string flag;	// roff: every hyphen escaped
			for (const char *c = opts[i].flag; *c != '\0'; c++)
				flag += *c == '-' ? std::string("\\-") : std::string(1, *c);
			CHECK(man.find(flag) != std::string::npos);
		}
	}
}
