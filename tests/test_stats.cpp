/* SPDX-License-Identifier: BSD-3-Clause */
// The counter lists (base/stats_fields.h) and the report written from them
// (runtime/stats.c): a sum follows each field's kind, and every field of
// every list that has a key reaches the JSON under that key with its value.
#include <catch2/catch.hpp>

#include "subprocess.hpp"

#include <cstdint>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

extern "C" {
#include "base/log.h"
#include "base/stats_fields.h"
#include "runtime/stats.h"
}

namespace {

#define SAMPLE_FIELDS(X) \
	X(count, calls, "sample_calls") \
	X(value, peak, "sample_peak") \
	X(flag, on, "sample_on")

struct sample {
	SAMPLE_FIELDS(STATS_DECLARE)
};

void sample_add(sample *dst, const sample *src)
{
	SAMPLE_FIELDS(STATS_ADD)
}

// Give every field of a list a value of its own, and remember what the
// report must say for each keyed one.
struct filler {
	uint64_t next = 1000;
	std::vector<std::pair<std::string, std::string>> expected;

	void count(uint64_t &f, const char *key) { number(f, key); }
	void value(uint64_t &f, const char *key) { number(f, key); }
	void flag(bool &f, const char *key)
	{
		f = next++ % 2 == 0;
		if (key != nullptr)
			expected.emplace_back(key, f ? "true" : "false");
	}
	void number(uint64_t &f, const char *key)
	{
		f = next++;
		if (key != nullptr)
			expected.emplace_back(key, std::to_string(f));
	}
};
#define FILL(kind, field, key) fl.kind(s.field, key);

} // namespace

TEST_CASE("a list's sum: counts add, values keep the larger, flags keep true", "[stats]")
{
	sample a{ 5, 7, false }, b{ 3, 9, true };
	sample_add(&a, &b);
	CHECK(a.calls == 8);
	CHECK(a.peak == 9);
	CHECK(a.on);
	sample c{ 1, 4, true }, d{ 1, 2, false };
	sample_add(&c, &d);
	CHECK(c.peak == 4);
	CHECK(c.on);
	static_assert(sizeof(a.calls) == 8 && sizeof(a.on) == sizeof(bool), "the kinds' types");
}

TEST_CASE("tracker_stats_add adds every field", "[stats]")
{
	filler fl;
	tracker_stats t{}, s{};
	TRACKER_STATS_FIELDS(FILL)
	t = s;
	tracker_stats_add(&t, &s);
#define TWICE(kind, field, key) CHECK(t.field == 2 * s.field);
	TRACKER_STATS_FIELDS(TWICE)
#undef TWICE
}

TEST_CASE("persist_stats_add adds every field", "[stats]")
{
	filler fl;
	persist_stats s{};
	PERSIST_STATS_FIELDS(FILL)
	persist_stats q = s;
	persist_stats_add(&q, &s);
#define TWICE(kind, field, key) CHECK(q.field == 2 * s.field);
	PERSIST_STATS_FIELDS(TWICE)
#undef TWICE
}

TEST_CASE("the report writes every keyed field of every list, once, with its value", "[stats]")
{
	static stats_report r{};
	filler fl;
	{
		auto &s = r.quiesce;
		QUIESCE_STATS_FIELDS(FILL)
	}
	{
		auto &s = r.output;
		OUTPUT_STATS_FIELDS(FILL)
	}
	{
		auto &s = r.heap;
		HEAP_STATS_FIELDS(FILL)
	}
	{
		auto &s = r.checker;
		FASE_CHECKER_STATS_FIELDS(FILL)
	}
	{
		auto &s = r.runtime.epoch;
		EPOCH_COUNTERS_FIELDS(FILL)
	}
	{
		auto &s = r.runtime.epoch.persist;
		PERSIST_STATS_FIELDS(FILL)
	}
	{
		auto &s = r.runtime.restore;
		RESTORE_STATS_FIELDS(FILL)
	}
	{
		auto &s = r.runtime.tracker_stats;
		TRACKER_STATS_FIELDS(FILL)
	}
	{
		auto &s = r.runtime.nvm;
		NVM_STATS_FIELDS(FILL)
	}
	r.heap_mode = "malloc";
	r.runtime.tracker = "uffd";
	r.runtime.restore.lazy = true;
	subprocess::scratch_dir dir;
	std::string path = dir.path + "/stats.json";
	INFO(err_get());
	REQUIRE(stats_write_json(&r, path.c_str()) == 0);
	std::string json = subprocess::slurp(path);
	INFO(json);
	CHECK(json.rfind("{\n", 0) == 0);
	CHECK(json.size() > 3);
	CHECK(json.compare(json.size() - 3, 3, "\n}\n") == 0);
	CHECK(json.find(",\n}") == std::string::npos);
	for (const auto &[key, text] : fl.expected) {
		INFO("key " << key);
		std::string at = "\n  \"" + key + "\": ";
		auto first = json.find(at);
		REQUIRE(first != std::string::npos);
		CHECK(json.find(at, first + 1) == std::string::npos);
		CHECK(subprocess::json_text(json, key) == text);
	}
	CHECK(subprocess::json_text(json, "tracker") == "\"uffd\"");
	CHECK(subprocess::json_text(json, "restore") == "\"lazy\"");
	CHECK(subprocess::json_text(json, "heap_mode") == "\"malloc\"");
}
