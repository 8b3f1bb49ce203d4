/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for pmthreads-recover: pools are made here through the pool API and
// the built tool runs as a subprocess (its path comes from the environment,
// PMTHREADS_RECOVER_TOOL, set by meson).  info, check, dump and list must
// leave the pool byte-identical; create and rm make and remove whole pools.
#include "pool_test_util.h"
#include <algorithm>

// pool_internal.h's C11 assertions, as C++ ones
#define _Static_assert static_assert
extern "C" {
#include "persist/pool_internal.h"
}
#undef _Static_assert
#include "subprocess.hpp"

#ifdef PMT_TOOL_HAVE_HEAP
extern "C" {
#include "heap/heap.h"
#include "runtime/meta_sums.h"
}
#endif

#include <cctype>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>
#include <map>
#include <sstream>

using namespace pooltest;

namespace {

using subprocess::run_result;

const char *tool_path()
{
	const char *t = getenv("PMTHREADS_RECOVER_TOOL");
	INFO("PMTHREADS_RECOVER_TOOL must name the built pmthreads-recover (meson test sets it)");
	REQUIRE(t != nullptr);
	REQUIRE(access(t, X_OK) == 0);
	return t;
}

// Run the tool with args (the environment minus PMTHREADS_* and LD_PRELOAD).
run_result run_tool(std::vector<std::string> args)
{
	args.insert(args.begin(), tool_path());
	return subprocess::run(args, {});
}

bool contains(const std::string &s, const std::string &what) { return s.find(what) != std::string::npos; }

// A strict JSON reader for the tool's output: checks the grammar and returns
// the top-level object's members with scalar values as their raw text
// (strings unescaped), nested values as "<object>" / "<array>".
struct json_reader {
	const std::string &s;
	size_t i = 0;
	explicit json_reader(const std::string &text) : s(text) {}

	void ws() { while (i < s.size() && isspace((unsigned char)s[i])) i++; }
	bool eat(char c)
	{
		ws();
		if (i < s.size() && s[i] == c) {
			i++;
			return true;
		}
		return false;
	}
	bool string(std::string &out)
	{
		if (!eat('"'))
			return false;
		while (i < s.size() && s[i] != '"') {
			unsigned char c = (unsigned char)s[i++];
			if (c < 0x20)
				return false;
			if (c != '\\') {
				out += (char)c;
				continue;
			}
			if (i >= s.size())
				return false;
			char e = s[i++];
			if (e == 'u') {
				if (i + 4 > s.size())
					return false;
				for (int k = 0; k < 4; k++)
					if (!isxdigit((unsigned char)s[i + k]))
						return false;
				out += "\\u" + s.substr(i, 4); // kept escaped: enough for the tests
				i += 4;
			} else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
				static const std::map<char, char> m = { { '"', '"' }, { '\\', '\\' },
					{ '/', '/' }, { 'b', '\b' }, { 'f', '\f' }, { 'n', '\n' },
					{ 'r', '\r' }, { 't', '\t' } };
				out += m.at(e);
			} else {
				return false;
			}
		}
		return i++ < s.size();
	}
	bool value(std::string &raw)
	{
		ws();
		if (i >= s.size())
			return false;
		if (s[i] == '"')
			return string(raw);
		if (s[i] == '{') {
			std::map<std::string, std::string> ignored;
			raw = "<object>";
			return object(ignored);
		}
		if (s[i] == '[') {
			raw = "<array>";
			i++;
			if (eat(']'))
				return true;
			do {
				std::string v;
				if (!value(v))
					return false;
			} while (eat(','));
			return eat(']');
		}
		size_t start = i;
		while (i < s.size() && (isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '.' || s[i] == '+'))
			i++;
		raw = s.substr(start, i - start);
		if (raw == "true" || raw == "false" || raw == "null")
			return true;
		char *end = nullptr;
		strtod(raw.c_str(), &end);
		return !raw.empty() && end == raw.c_str() + raw.size();
	}
	bool object(std::map<std::string, std::string> &members)
	{
		if (!eat('{'))
			return false;
		if (eat('}'))
			return true;
		do {
			std::string k, v;
			if (!string(k) || !eat(':') || !value(v))
				return false;
			members[k] = v;
		} while (eat(','));
		return eat('}');
	}
	// The whole text must be one object.
	bool document(std::map<std::string, std::string> &members)
	{
		if (!object(members))
			return false;
		ws();
		return i == s.size();
	}
};

std::map<std::string, std::string> parse_json(const std::string &text)
{
	std::map<std::string, std::string> m;
	json_reader r(text);
	INFO("JSON: " << text);
	REQUIRE(r.document(m));
	return m;
}

std::vector<unsigned char> file_bytes(const std::string &path)
{
	return file_snapshot::of(path).bytes;
}

// A pool of 16 pages whose pages 1, 3 and 7 were persisted (page 3 twice,
// so its two copies differ); page 0, where a heap would keep its header,
// was never written.  expected receives the consistent image.
void make_raw_pool(const std::string &path, std::vector<unsigned char> &expected,
		   const char *creator = "recovertest")
{
	const uint64_t n = 16;
	const size_t ps = page_size();
	pool *p = open_or_fail(options(path, n, creator));
	shadow_buf sh(n * ps);
	for (uint64_t pg : { 1, 3, 7 })
		memset(sh.mem + pg * ps, (int)(0x10 + pg), ps);
	uint64_t first[] = { 1, 3, 7 };
	persist_epoch(p, sh.mem, first, 3, nullptr);
	memset(sh.mem + 3 * ps + 100, 0xab, 300);
	uint64_t second[] = { 3 };
	persist_epoch(p, sh.mem, second, 1, nullptr);
	pool_set_clean(p, true);
	pool_close(p);
	expected = sh.bytes();
}

// Snapshot the pool, run the tool, and require the pool unchanged.
run_result run_on_pool(const std::string &pool_path, std::vector<std::string> args)
{
	file_snapshot before = file_snapshot::of(pool_path);
	run_result r = run_tool(std::move(args));
	file_snapshot after = file_snapshot::of(pool_path);
	INFO("stdout: " << r.out << "\nstderr: " << r.err);
	CHECK(after.same_as(before));
	return r;
}

// Durably mark copy c of page pg as written by an epoch that never
// completed (seq VER_d + 1), with data different from the consistent copy,
// and the pool as not cleanly closed: what a crash in the middle of an
// epoch leaves.
void tear_copy(const std::string &path, uint64_t pg, const char *creator = "recovertest")
{
	auto o = options(path, 16, creator);
	o.create = false;
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	int c = pool_valid_copy(p, pg) == 0 ? 1 : 0;
	memset(pool_copy(p, pg, c), 0xee, p->page_size);
	nvm_flush(p->nvm, pool_copy(p, pg, c), p->page_size);
	p->seq[pg][c] = *p->ver_d + 1;
	nvm_flush(p->nvm, &p->seq[pg][c], sizeof(uint64_t));
	nvm_fence(p->nvm);
	pool_close(p);
}

} // namespace

TEST_CASE("recover tool: usage errors exit 2, --help exits 0", "[recover-tool]")
{
	scratch_dir d;
	run_result r = run_tool({});
	CHECK(r.status == 2);
	CHECK(contains(r.err, "missing command"));

	r = run_tool({ "frobnicate", "x" });
	CHECK(r.status == 2);
	CHECK(contains(r.err, "unknown command 'frobnicate'"));
	CHECK(contains(r.err, "--help"));

	r = run_tool({ "--bogus" });
	CHECK(r.status == 2);
	CHECK(contains(r.err, "unknown option '--bogus'"));

	for (const char *cmd : { "info", "check", "dump", "upgrade" }) {
		INFO(cmd);
		r = run_tool({ cmd, "--nope", "x" });
		CHECK(r.status == 2);
		CHECK(contains(r.err, "unknown option '--nope'"));
		r = run_tool({ cmd, "-z", "x" });
		CHECK(r.status == 2);
		CHECK(contains(r.err, "unknown option '-z'"));
		r = run_tool({ cmd });
		CHECK(r.status == 2);
		CHECK(contains(r.err, "Usage: pmthreads-recover " + std::string(cmd)));
		r = run_tool({ cmd, "--help" });
		CHECK(r.status == 0);
		CHECK(contains(r.out, "Usage: pmthreads-recover " + std::string(cmd)));
		run_result h = run_tool({ "help", cmd });
		CHECK(h.status == 0);
		CHECK(h.out == r.out);
	}
	r = run_tool({ "info", "a", "b" });
	CHECK(r.status == 2);
	r = run_tool({ "dump", "a" });
	CHECK(r.status == 2);
	CHECK(contains(r.err, "expected POOL and OUT"));

	r = run_tool({ "--help" });
	CHECK(r.status == 0);
	for (const char *word :
	     { "info", "check", "dump", "list", "rm", "create", "upgrade", "--json", "never write" })
		CHECK(contains(r.out, word));
	r = run_tool({ "help", "nosuch" });
	CHECK(r.status == 2);
	r = run_tool({ "--version" });
	CHECK(r.status == 0);
	CHECK(contains(r.out, "pool format " + std::to_string(POOL_FORMAT_VERSION)));
}

TEST_CASE("recover tool: info describes a clean pool, as text and JSON", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("raw.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);

	run_result r = run_on_pool(path, { "info", path });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	CHECK(contains(r.out, "pool:              " + path));
	CHECK(contains(r.out, "version " + std::to_string(POOL_FORMAT_VERSION)));
	CHECK(contains(r.out, "page size:         " + std::to_string(page_size())));
	CHECK(contains(r.out, "capacity:          " + std::to_string(16 * page_size()) + " bytes"));
	CHECK(contains(r.out, "shadow base:       0x500000000000"));
	CHECK(contains(r.out, "pages used:        3 "));
	CHECK(contains(r.out, "VER_d:             2\n"));
	CHECK(contains(r.out, "state:             clean"));
	CHECK(contains(r.out, "creator:           recovertest\n"));
	CHECK(contains(r.out, "named objects:     unavailable"));

	r = run_on_pool(path, { "info", "--json", path });
	REQUIRE(r.status == 0);
	auto m = parse_json(r.out);
	CHECK(m["pool"] == path);
	CHECK(m["format_version"] == std::to_string(POOL_FORMAT_VERSION));
	CHECK(m["uuid"].size() == 36);
	CHECK(m["page_size"] == std::to_string(page_size()));
	CHECK(m["capacity"] == std::to_string(16 * page_size()));
	CHECK(m["pages"] == "16");
	CHECK(m["shadow_base"] == "0x500000000000");
	CHECK(m["pages_used"] == "3");
	CHECK(m["ver_d"] == "2");
	CHECK(m["clean"] == "true");
	CHECK(m["state"] == "clean");
	CHECK(m["torn_copies"] == "0");
	CHECK(m["creator"] == "recovertest");
	CHECK(m["named_objects"] == "null");
	CHECK(m.count("named_objects_unavailable") == 1);

	// The UUID is the same in both forms.
	CHECK(contains(r.out, m["uuid"]));
	run_result t = run_tool({ "info", path });
	CHECK(contains(t.out, "uuid:              " + m["uuid"]));
}

TEST_CASE("recover tool: JSON escapes what it prints", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("odd \"name\".pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected, "prog \"quoted\"\tand\\ \x01 \xff");
	run_result r = run_on_pool(path, { "info", "--json", path });
	REQUIRE(r.status == 0);
	auto m = parse_json(r.out);
	CHECK(m["pool"] == path);
	CHECK(m["creator"] == "prog \"quoted\"\tand\\ \\u0001 \\ufffd");
}

TEST_CASE("recover tool: check passes a consistent pool", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("ok.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	run_result r = run_on_pool(path, { "check", path });
	INFO(r.out << r.err);
	CHECK(r.status == 0);
	CHECK(contains(r.out, "consistent (VER_d 2, 0 warnings)"));
	CHECK_FALSE(contains(r.out, "problem"));
}

TEST_CASE("recover tool: dump writes the consistent image", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("dump.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	const size_t ps = page_size();

	std::string out = d.file("image");
	run_result r = run_on_pool(path, { "dump", path, out });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	CHECK(file_bytes(out) == expected);
	struct stat st {};
	REQUIRE(stat(out.c_str(), &st) == 0);
	CHECK((st.st_mode & 0777) == 0600);

	// An existing OUT is refused, untouched, unless --force.
	file_snapshot kept = file_snapshot::of(out);
	r = run_on_pool(path, { "dump", "--used-only", path, out });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "already exists"));
	CHECK(contains(r.err, "--force"));
	CHECK(file_snapshot::of(out).same_as(kept));

	// --used-only stops after page 7, the last one persisted.
	r = run_on_pool(path, { "dump", "--used-only", "--force", path, out });
	REQUIRE(r.status == 0);
	std::vector<unsigned char> used(expected.begin(), expected.begin() + 8 * ps);
	CHECK(file_bytes(out) == used);

	// Never the pool itself, not even with --force, under any name.
	std::string link = d.file("alias.pool");
	REQUIRE(symlink(path.c_str(), link.c_str()) == 0);
	for (const std::string &target : { path, link }) {
		r = run_on_pool(path, { "dump", "--force", path, target });
		CHECK(r.status == 1);
		CHECK(contains(r.err, "is the pool itself"));
	}

	// An output that cannot be created: exit 1, named.
	r = run_on_pool(path, { "dump", path, d.file("no/such/dir/image") });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "cannot create"));
}

TEST_CASE("recover tool: an interrupted epoch is a warning, and ignored by dump", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("torn.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	tear_copy(path, 3);
	tear_copy(path, 9); // never persisted before: its image stays zeros

	run_result r = run_on_pool(path, { "info", path });
	REQUIRE(r.status == 0);
	CHECK(contains(r.out, "state:             crashed mid-epoch: recovery pending"));
	CHECK(contains(r.out, "torn copies:       2"));
	CHECK(contains(r.out, "pages used:        3 "));

	r = run_on_pool(path, { "info", "--json", path });
	REQUIRE(r.status == 0);
	auto m = parse_json(r.out);
	CHECK(m["state"] == "crashed-mid-epoch");
	CHECK(m["clean"] == "false");
	CHECK(m["torn_copies"] == "2");
	CHECK(m["ver_d"] == "2");

	r = run_on_pool(path, { "check", path });
	INFO(r.out << r.err);
	CHECK(r.status == 0);
	CHECK(contains(r.out, "warning: crashed mid-epoch, recovery pending: 2 page copies"));
	CHECK(contains(r.out, "page 3 copy"));
	CHECK(contains(r.out, "consistent (VER_d 2, 1 warning)"));

	std::string out = d.file("image");
	r = run_on_pool(path, { "dump", path, out });
	REQUIRE(r.status == 0);
	CHECK(file_bytes(out) == expected);
}

TEST_CASE("recover tool: epochs only the log holds are read by info, check and dump", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("log.pool");
	const uint64_t n = 16;
	const size_t ps = page_size();
	auto o = options(path, n, "recovertest");
	o.nvm = NVM_LOG;
	pool *p = open_or_fail(o);
	REQUIRE(std::string(p->nvm->ops->name) == "log");
	pool_set_clean(p, false);
	shadow_buf sh(n * ps);
	for (uint64_t pg : { 2, 5 })
		memset(sh.mem + pg * ps, (int)(0x20 + pg), ps);
	uint64_t pages[] = { 2, 5 };
	REQUIRE(persist_epoch(p, sh.mem, pages, 2, nullptr) == 0);
	memset(sh.mem + 5 * ps + 64, 0xcd, 200);
	REQUIRE(persist_epoch(p, sh.mem, pages + 1, 1, nullptr) == 0);
	// As a crash leaves it: nothing checkpointed, the file's page copies
	// never written -- the epochs are in the log only.
	pool_abandon(p);
	std::vector<unsigned char> file = file_bytes(path);
	pool_layout l = pool_layout_for(n, ps);
	CHECK(std::all_of(file.begin() + (long)l.data_off, file.begin() + (long)l.file_size,
			  [](unsigned char c) { return c == 0; }));

	run_result r = run_on_pool(path, { "info", path });
	REQUIRE(r.status == 0);
	CHECK(contains(r.out, "VER_d:             2"));
	CHECK(contains(r.out, "records"));
	CHECK(contains(r.out, "not yet checkpointed"));
	r = run_on_pool(path, { "info", "--json", path });
	REQUIRE(r.status == 0);
	auto m = parse_json(r.out);
	CHECK(m["ver_d"] == "2");
	CHECK(m["log_records"] != "0");
	r = run_on_pool(path, { "check", path });
	INFO(r.out << r.err);
	CHECK(r.status == 0);
	CHECK(contains(r.out, "consistent (VER_d 2"));
	std::string out = d.file("image");
	r = run_on_pool(path, { "dump", path, out });
	REQUIRE(r.status == 0);
	CHECK(file_bytes(out) == sh.bytes());
}

TEST_CASE("recover tool: a pool that was not shut down cleanly is reported crashed", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("crashed.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	auto o = options(path, 16, "recovertest");
	o.create = false;
	pool *p = open_or_fail(o);
	pool_set_clean(p, false);
	pool_close(p);

	run_result r = run_on_pool(path, { "info", "--json", path });
	REQUIRE(r.status == 0);
	auto m = parse_json(r.out);
	CHECK(m["state"] == "crashed");
	CHECK(m["clean"] == "false");
	CHECK(m["last_pid"] == std::to_string(getpid()));
	r = run_on_pool(path, { "check", path });
	CHECK(r.status == 0);
}

TEST_CASE("recover tool: check lists each broken invariant and exits 1", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("broken.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	uint64_t seq_off;
	{
		auto o = options(path, 16, "recovertest");
		o.create = false;
		o.read_only = true;
		pool *p = open_or_fail(o);
		seq_off = p->seq_off;
		pool_close(p);
	}
	// Page 1: both copies claim epoch 1.  Page 5: a copy from far beyond
	// the next epoch (VER_d is 2).
	uint64_t same[2] = { 1, 1 };
	patch_file(path, (off_t)(seq_off + 1 * 16), same, sizeof(same));
	uint64_t far = 40;
	patch_file(path, (off_t)(seq_off + 5 * 16), &far, sizeof(far));

	run_result r = run_on_pool(path, { "check", path });
	INFO(r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.out, "problem: page 1: both copies have seq 1"));
	CHECK(contains(r.out, "problem: page 5 copy 0: seq 40"));
	CHECK(contains(r.out, "problems found"));
}

TEST_CASE("recover tool: files that are not usable pools exit 1 with the reason", "[recover-tool]")
{
	scratch_dir d;
	std::string good = d.file("good.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(good, expected);
	file_snapshot g = file_snapshot::of(good);

	struct bad_file {
		std::string name, why;
		std::vector<unsigned char> bytes;
	};
	std::vector<bad_file> bad;
	std::string text = "just some text, not a pool\n";
	bad.push_back({ "text.pool", "not a pmthreads pool", { text.begin(), text.end() } });
	bad.push_back({ "empty.pool", "empty file", {} });
	auto corrupt = g.bytes;
	corrupt[40] ^= 0x01; // inside the UUID: the checksum no longer matches
	bad.push_back({ "corrupt.pool", "checksum", corrupt });
	auto truncated = g.bytes;
	truncated.resize(truncated.size() - page_size());
	bad.push_back({ "truncated.pool", "truncated", truncated });
	auto version = g.bytes;
	uint32_t v = POOL_FORMAT_VERSION + 1;
	memcpy(version.data() + 8, &v, sizeof(v));
	bad.push_back({ "version.pool", "format version", version });

	std::string out = d.file("image");
	for (auto &b : bad) {
		std::string path = d.file(b.name.c_str());
		write_file(path, b.bytes.data(), b.bytes.size());
		for (std::vector<std::string> args : { std::vector<std::string>{ "info", path },
						       std::vector<std::string>{ "info", "--json", path },
						       std::vector<std::string>{ "check", path },
						       std::vector<std::string>{ "dump", path, out } }) {
			INFO(b.name << " " << args[0]);
			run_result r = run_on_pool(path, args);
			CHECK(r.status == 1);
			CHECK(contains(r.err, "pmthreads-recover: error: "));
			CHECK(contains(r.err, b.why));
			CHECK(access(out.c_str(), F_OK) != 0);
		}
	}
	run_result r = run_tool({ "info", d.file("missing.pool") });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "does not exist"));
}

TEST_CASE("recover tool: a pool in use by a program is refused, naming its pid", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("busy.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	auto o = options(path, 16, "recovertest");
	o.create = false;
	pool *p = open_or_fail(o); // read-write: exclusive lock, as a running program
	for (const char *cmd : { "info", "check" }) {
		run_result r = run_on_pool(path, { cmd, path });
		INFO(r.err);
		CHECK(r.status == 1);
		CHECK(contains(r.err, "in use"));
		CHECK(contains(r.err, "process " + std::to_string(getpid())));
	}
	pool_close(p);
	CHECK(run_tool({ "info", path }).status == 0);
}

TEST_CASE("recover tool: special files are refused at once, never read", "[recover-tool]")
{
	scratch_dir d;
	std::string fifo = d.file("fifo.pool");
	REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
	for (const char *cmd : { "info", "check", "dump" }) {
		std::vector<std::string> args = { cmd, fifo };
		if (std::string(cmd) == "dump")
			args.push_back(d.file("out"));
		run_result r = run_tool(args); // would block forever on a FIFO opened for reading
		INFO(cmd << ": " << r.err);
		CHECK(r.status == 1);
		CHECK(contains(r.err, "is a FIFO, not a regular file"));
	}
	run_result r = run_tool({ "check", "/proc/self/mem" });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "kernel pseudo-file"));
	r = run_tool({ "info", "/dev/zero" });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "character device"));
}

TEST_CASE("recover tool: dump to standard output, never through a symlink or into a FIFO",
	  "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("ok.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	run_result r = run_on_pool(path, { "dump", path, "-" });
	CHECK(r.status == 0);
	CHECK(r.out.size() == expected.size());
	CHECK(std::vector<unsigned char>(r.out.begin(), r.out.end()) == expected);

	std::string target = d.file("precious");
	write_file(target, "keep", 4);
	std::string link = d.file("link");
	REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
	r = run_on_pool(path, { "dump", "--force", path, link });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "is a symbolic link"));
	CHECK(file_snapshot::of(target).bytes == std::vector<unsigned char>{ 'k', 'e', 'e', 'p' });

	std::string fifo = d.file("fifo");
	REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
	r = run_on_pool(path, { "dump", "--force", path, fifo });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "not a regular file"));
}

TEST_CASE("recover tool: create, list and rm", "[recover-tool]")
{
	scratch_dir d;
	std::string a = d.file("alpha.pool");
	run_result r = run_tool({ "create", "--size", "4M", a });
	INFO(r.err);
	REQUIRE(r.status == 0);
	r = run_tool({ "create", a });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "already exists"));
	std::string b = d.file("beta.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(b, expected);

	r = run_tool({ "list", "--dir", d.path });
	INFO(r.out << r.err);
	CHECK(r.status == 0);
	CHECK(contains(r.out, "alpha"));	// the program named after the file
	CHECK(contains(r.out, "4.0 MiB"));
	CHECK(contains(r.out, "recovertest"));
	CHECK(contains(r.out, "clean, epoch 2"));

	{
		auto o = options(b, 16, "recovertest");
		o.create = false;
		pool *p = open_or_fail(o); // in use, as by a running program
		r = run_tool({ "list", "--dir", d.path });
		CHECK(contains(r.out, "in use by pid " + std::to_string(getpid())));
		r = run_tool({ "rm", b });
		CHECK(r.status == 1);
		CHECK(contains(r.err, "in use"));
		CHECK(contains(r.err, "not removed"));
		CHECK(access(b.c_str(), F_OK) == 0);
		pool_close(p);
	}
	std::string other = d.file("notes.txt");
	write_file(other, "hello", 5);
	r = run_tool({ "rm", other });
	CHECK(r.status == 1);
	CHECK(contains(r.err, "not a pmthreads pool"));
	CHECK(access(other.c_str(), F_OK) == 0);

	r = run_tool({ "rm", a, b });
	INFO(r.err);
	CHECK(r.status == 0);
	CHECK(access(a.c_str(), F_OK) != 0);
	CHECK(access(b.c_str(), F_OK) != 0);
	r = run_tool({ "list", "--dir", d.path });
	CHECK(contains(r.out, "no pools in"));
}

TEST_CASE("recover tool: check --json", "[recover-tool]")
{
	scratch_dir d;
	std::string path = d.file("ok.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	run_result r = run_on_pool(path, { "check", "--json", path });
	INFO(r.out << r.err);
	CHECK(r.status == 0);
	auto m = parse_json(r.out);
	CHECK(m["consistent"] == "true");
	CHECK(m["ver_d"] == "2");
	CHECK(m["problem_count"] == "0");
	CHECK(m["problems"] == "<array>");
	tear_copy(path, 3);
	uint64_t bad = 99; // a seq far beyond VER_d + 1: corruption
	patch_file(path, (off_t)(page_size() + 16 * 5), &bad, sizeof(bad));
	r = run_on_pool(path, { "check", "--json", path });
	CHECK(r.status == 1);
	m = parse_json(r.out);
	CHECK(m["consistent"] == "false");
	CHECK(contains(r.out, "page 5 copy 0: seq 99"));
}

#ifdef PMT_TOOL_HAVE_HEAP
TEST_CASE("recover tool: info lists the heap's named objects and check verifies the heap",
	  "[recover-tool][heap]")
{
	scratch_dir d;
	std::string path = d.file("heap.pool");
	const uint64_t n = 1024; // 4 MiB: room for the heap's metadata
	const size_t ps = page_size();
	pool *p = open_or_fail(options(path, n, "heaptest"));
	shadow_buf sh(n * ps);
	REQUIRE(heap_init(sh.mem, sh.len, true) == 0);
	void *alpha = heap_malloc(100);
	void *beta = heap_malloc(3 * ps);
	REQUIRE(alpha != nullptr);
	REQUIRE(beta != nullptr);
	memset(alpha, 'a', 100);
	memset(beta, 'b', 3 * ps);
	REQUIRE(heap_name_set("alpha", alpha) == 0);
	REQUIRE(heap_name_set("beta \"two\"", beta) == 0);
	std::vector<uint64_t> dirty;
	for (uint64_t i = 0; i < n; i++)
		for (size_t k = 0; k < ps; k++)
			if (sh.mem[i * ps + k] != 0) {
				dirty.push_back(i);
				break;
			}
	meta_sums_bind(p); // as in the runtime (every page gets a checksum regardless)
	persist_epoch(p, sh.mem, dirty.data(), dirty.size(), nullptr);
	pool_set_clean(p, true);
	meta_sums_bind(nullptr);
	pool_close(p);
	auto addr = [&](void *q) {
		std::ostringstream s;
		s << "0x" << std::hex << 0x500000000000ULL + (uint64_t)((unsigned char *)q - sh.mem);
		return s.str();
	};

	run_result r = run_on_pool(path, { "info", path });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	CHECK(contains(r.out, "named objects:     2\n"));
	CHECK(contains(r.out, "alpha"));
	CHECK(contains(r.out, addr(alpha)));
	CHECK(contains(r.out, std::to_string(heap_usable_size(beta)) + " bytes"));

	r = run_on_pool(path, { "info", "--json", path });
	REQUIRE(r.status == 0);
	auto m = parse_json(r.out);
	CHECK(m["heap"] == "valid");
	CHECK(m["named_objects"] == "<array>");
	CHECK(contains(r.out, "{\"name\":\"alpha\",\"address\":\"" + addr(alpha) + "\",\"size\":" +
				      std::to_string(heap_usable_size(alpha)) + "}"));
	CHECK(contains(r.out, "\"name\":\"beta \\\"two\\\"\""));

	r = run_on_pool(path, { "check", path });
	CHECK(r.status == 0);
	CHECK(contains(r.out, "heap: consistent: 2 named objects"));

	std::string out = d.file("image");
	r = run_on_pool(path, { "dump", path, out });
	REQUIRE(r.status == 0);
	CHECK(file_bytes(out) == sh.bytes());
}

namespace {

// Run the tool with stdout and stderr to /dev/null; its exit status, and its
// peak resident set in KiB, measured by prog_maxrss (PMT_MAXRSS): forked
// from the test, the tool would report the test's own peak (Linux keeps it
// across exec), 170 MiB under AddressSanitizer.
int run_tool_rss(std::vector<std::string> args, long *maxrss_kib)
{
	args.insert(args.begin(), tool_path());
	args.insert(args.begin(), subprocess::env_or_fail("PMT_MAXRSS"));
	run_result r = subprocess::run(args, {});
	INFO(r.out << r.err);
	REQUIRE(!r.out.empty());
	*maxrss_kib = std::atol(r.out.c_str());
	return r.status;
}

// A heap of npages pages, blocks of block bytes filled up to fill bytes and
// named "first" and "last", persisted by one epoch (nvm: the backend that
// writes it); the heap's image is left in sh.
void make_heap_pool(const std::string &path, uint64_t npages, size_t block, size_t fill,
		    shadow_buf &sh, enum nvm_kind nvm, bool crash)
{
	const size_t ps = page_size();
	auto o = options(path, npages, "heaptest");
	o.nvm = nvm;
	pool *p = open_or_fail(o);
	if (crash)
		pool_set_clean(p, false);
	REQUIRE(heap_init(sh.mem, sh.len, true) == 0);
	void *first = nullptr, *last = nullptr;
	for (size_t done = 0; done < fill; done += block) {
		void *b = heap_malloc(block);
		REQUIRE(b != nullptr);
		memset(b, (int)(done / block) | 1, block);
		if (first == nullptr)
			first = b;
		last = b;
	}
	REQUIRE(heap_name_set("first", first) == 0);
	REQUIRE(heap_name_set("last", last) == 0);
	std::vector<uint64_t> dirty;
	for (uint64_t i = 0; i < npages; i++)
		if (std::any_of(sh.mem + i * ps, sh.mem + (i + 1) * ps, [](unsigned char c) { return c != 0; }))
			dirty.push_back(i);
	meta_sums_bind(p);
	REQUIRE(persist_epoch(p, sh.mem, dirty.data(), dirty.size(), nullptr) == 0);
	meta_sums_bind(nullptr);
	if (crash) {
		pool_abandon(p); // the epoch in the log only
	} else {
		pool_set_clean(p, true);
		pool_close(p);
	}
}

} // namespace

// The bytes of two files are the same (without holding either whole).
bool same_files(const std::string &a, const std::string &b)
{
	return system(("cmp -s '" + a + "' '" + b + "'").c_str()) == 0;
}

TEST_CASE("recover tool: info, check and dump read a large pool in bounded memory",
	  "[recover-tool][heap][stream]")
{
	scratch_dir d;
	std::string path = d.file("big.pool"), expected = d.file("expected");
	const uint64_t n = (256u << 20) / page_size();
	// Made in a child: a forked tool starts with the resident set of the
	// process that forked it, which must not hold the image.
	int st = in_child([&] {
		shadow_buf sh(n * page_size());
		make_heap_pool(path, n, 1u << 20, 192u << 20, sh, NVM_MSYNC, false);
		write_file(expected, sh.mem, sh.len);
	});
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	// The image is 192 MiB, the pool's copies of it as much: bounded means
	// well below (old tools held both: 400 MiB).
	const long limit_kib = 64 << 10;
	long rss = 0;
	st = run_tool_rss({ "check", path }, &rss);
	CHECK(st == 0);
	INFO("check's peak resident set: " << rss << " KiB");
	CHECK(rss < limit_kib);
	st = run_tool_rss({ "info", path }, &rss);
	CHECK(st == 0);
	INFO("info's peak resident set: " << rss << " KiB");
	CHECK(rss < limit_kib);
	std::string out = d.file("image");
	st = run_tool_rss({ "dump", path, out }, &rss);
	CHECK(st == 0);
	INFO("dump's peak resident set: " << rss << " KiB");
	CHECK(rss < limit_kib);
	run_result r = run_tool({ "info", path });
	CHECK(contains(r.out, "named objects:     2\n"));
	CHECK(same_files(out, expected));
}

TEST_CASE("recover tool: pages only the log holds are read again after the tool gave back its memory",
	  "[recover-tool][heap][stream]")
{
	scratch_dir d;
	std::string path = d.file("logheap.pool");
	const uint64_t n = 1024;
	shadow_buf sh(n * page_size());
	make_heap_pool(path, n, 3000, 64 * 3000, sh, NVM_LOG, true);
	// check reads every page, gives the pool's pages back, then reads the
	// heap's pages again from the image: the log's replay must still be
	// there (it exists in the tool's memory only).
	run_result r = run_on_pool(path, { "check", path });
	INFO(r.out << r.err);
	CHECK(r.status == 0);
	CHECK(contains(r.out, "heap: consistent: 2 named objects"));
	r = run_on_pool(path, { "info", path });
	CHECK(contains(r.out, "named objects:     2\n"));
	std::string out = d.file("image");
	r = run_on_pool(path, { "dump", path, out });
	REQUIRE(r.status == 0);
	CHECK(file_bytes(out).size() == sh.len);
	CHECK(memcmp(file_bytes(out).data(), sh.mem, sh.len) == 0);
}

TEST_CASE("recover tool: check reports an image whose heap a program would refuse",
	  "[recover-tool][heap]")
{
	scratch_dir d;
	std::string path = d.file("noheap.pool");
	const uint64_t n = 1024;
	pool *p = open_or_fail(options(path, n, "heaptest"));
	shadow_buf sh(n * page_size());
	memset(sh.mem, 0x5a, page_size()); // page 0 holds no heap header
	uint64_t pages[] = { 0 };
	persist_epoch(p, sh.mem, pages, 1, nullptr);
	pool_set_clean(p, true);
	pool_close(p);

	run_result r = run_on_pool(path, { "check", path });
	INFO(r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.out, "problem: heap: heap header (heap offset 0): no pmthreads heap there"));
	r = run_on_pool(path, { "info", "--json", path });
	CHECK(r.status == 0);
	CHECK(parse_json(r.out)["heap"] == "invalid");
}
#endif

TEST_CASE("recover tool: create takes its sizes from the options and the environment",
	  "[recover-tool][create]")
{
	scratch_dir d;
	std::string a = d.file("env.pool");
	run_result r = subprocess::run({ tool_path(), "create", a },
				       { { "PMTHREADS_POOL_SIZE", "6M" }, { "PMTHREADS_LOG_SIZE", "512K" } });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	auto m = parse_json(run_tool({ "info", "--json", a }).out);
	CHECK(m["capacity"] == std::to_string(6 << 20));
	CHECK(m["log_size"] == std::to_string(512 << 10));

	std::string b = d.file("opts.pool");
	r = subprocess::run({ tool_path(), "create", "--size", "5M", "--log-size", "1M", b },
			    { { "PMTHREADS_POOL_SIZE", "6M" }, { "PMTHREADS_LOG_SIZE", "512K" } });
	REQUIRE(r.status == 0);
	m = parse_json(run_tool({ "info", "--json", b }).out);
	CHECK(m["capacity"] == std::to_string(5 << 20));
	CHECK(m["log_size"] == std::to_string(1 << 20));

	std::string c = d.file("bad.pool");
	r = subprocess::run({ tool_path(), "create", c }, { { "PMTHREADS_POOL_SIZE", "lots" } });
	CHECK(r.status == 2);
	CHECK(contains(r.err, "PMTHREADS_POOL_SIZE"));
	r = run_tool({ "create", "--log-size", "1K", c });
	CHECK(r.status == 2);
	CHECK(contains(r.err, "--log-size"));
	CHECK(access(c.c_str(), F_OK) != 0);
}

TEST_CASE("recover tool: create --program records the name the runtime checks",
	  "[recover-tool][create]")
{
	scratch_dir d;
	// The runtime records its executable's file name with links resolved
	// (/proc/self/exe): a link to the tool is the tool.
	std::string link = d.file("alias");
	REQUIRE(symlink(tool_path(), link.c_str()) == 0);
	std::string a = d.file("a.pool");
	run_result r = run_tool({ "create", "--size", "4M", "--program", link, a });
	INFO(r.out << r.err);
	REQUIRE(r.status == 0);
	CHECK(parse_json(run_tool({ "info", "--json", a }).out)["creator"] == "pmthreads-recover");
	auto o = options(a, 1024, "pmthreads-recover");
	o.create = false;
	pool *p = open_or_fail(o); // what the runtime's start would check
	pool_close(p);

	// A command name is looked up in PATH.
	std::string b = d.file("b.pool");
	std::string dir = std::string(tool_path()).substr(0, std::string(tool_path()).rfind('/'));
	r = subprocess::run({ tool_path(), "create", "--size", "4M", "--program", "pmthreads-recover", b },
			    { { "PATH", dir } });
	REQUIRE(r.status == 0);
	CHECK(parse_json(run_tool({ "info", "--json", b }).out)["creator"] == "pmthreads-recover");

	// A path that names no program: its file name, with a warning.
	std::string c = d.file("c.pool");
	r = run_tool({ "create", "--size", "4M", "--program", "/no/such/dir/prog", c });
	REQUIRE(r.status == 0);
	CHECK(contains(r.err, "not found"));
	CHECK(parse_json(run_tool({ "info", "--json", c }).out)["creator"] == "prog");
}

TEST_CASE("pool creation refuses a log larger than the free disk space, writing nothing",
	  "[recover-tool][create]")
{
	const char *dir = getenv("PMT_DISK_DIR") != nullptr ? getenv("PMT_DISK_DIR") : "/var/tmp";
	scratch_dir d(dir);
	struct statfs fs;
	REQUIRE(statfs(d.path.c_str(), &fs) == 0);
	if (fs.f_type == TMPFS_MAGIC) {
		WARN("SKIP: " << dir << " is tmpfs, where the log ring is a hole and costs no space");
		return;
	}
	uint64_t avail = (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize;
	std::string path = d.file("huge-log.pool");
	auto o = options(path, 1024, "pooltest");
	o.nvm = NVM_AUTO;
	o.log_size = avail + (1ULL << 30);
	pool *p = nullptr;
	int rc = pool_open(&p, &o);
	INFO(err_get());
	REQUIRE(rc != 0);
	CHECK(contains(err_get(), "MiB free"));
	CHECK(contains(err_get(), "PMTHREADS_LOG_SIZE"));
	CHECK(access(path.c_str(), F_OK) != 0);
	REQUIRE(statfs(d.path.c_str(), &fs) == 0);
	// Nothing was written (other writers on the machine aside: a margin).
	CHECK((uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize + (256ULL << 20) >= avail);
}

TEST_CASE("recover tool: dump names damaged pages, and --salvage reads past a damaged seq table",
	  "[recover-tool][salvage]")
{
	scratch_dir d;
	std::string path = d.file("raw.pool");
	std::vector<unsigned char> expected;
	make_raw_pool(path, expected);
	const size_t ps = page_size();
	pool_layout l = pool_layout_for(16, ps);

	// A byte of page 1's only copy (copy 0) changed: dump writes it as
	// found, names it, and exits 1.
	unsigned char x = 0x77;
	patch_file(path, (off_t)(pool_layout_copy_off(&l, 1, 0) + 10), &x, 1);
	std::string out = d.file("image");
	run_result r = run_on_pool(path, { "dump", path, out });
	INFO(r.out << r.err);
	CHECK(r.status == 1);
	CHECK(contains(r.err, "page 1 (heap address 0x500000001000): copy 0 fails its checksum; "
			      "written as found (damaged)"));
	CHECK(contains(r.err, "1 damaged page written as found"));
	std::vector<unsigned char> got = file_bytes(out);
	REQUIRE(got.size() == expected.size());
	CHECK(got[ps + 10] == 0x77);
	x = 0x11; // put back
	patch_file(path, (off_t)(pool_layout_copy_off(&l, 1, 0) + 10), &x, 1);

	// Page 7's seq entry destroyed: every command refuses the pool, check
	// points at --salvage, which writes the image whole.
	uint64_t bad = 99;
	patch_file(path, (off_t)(l.seq_off + 2 * 7 * sizeof(uint64_t)), &bad, sizeof(bad));
	r = run_on_pool(path, { "dump", "--force", path, out });
	CHECK(r.status == 1);
	r = run_on_pool(path, { "check", path });
	CHECK(r.status == 1);
	CHECK(contains(r.out, "dump --salvage"));
	r = run_on_pool(path, { "dump", "--salvage", "--force", path, out });
	CHECK(r.status == 0);
	CHECK(contains(r.err, "page 7 (heap address 0x500000007000): seq entries 99 and 0"));
	CHECK(contains(r.err, "1 page salvaged"));
	CHECK(file_bytes(out) == expected);
}
