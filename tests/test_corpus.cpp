/* SPDX-License-Identifier: BSD-3-Clause */
// The corpus: unmodified threaded programs from Debian packages (xz, zstd,
// pzstd, pigz, pbzip2, lbzip2, plzip, pixz, sort --parallel) and language
// runtimes running a script (python3 and perl with threads, the sqlite3
// shell; node and a JVM in meson tests of their own that skip where they are
// not installed), each run natively and under `pmthreads run` -- interception only (nvmalloc) and
// with the persistent heap behind malloc under each tracker, a fresh pool
// every run, epochs every 10 ms -- must write the same bytes and exit the
// same way.  Compressors are checked on a generated text (compressible, not
// trivially), decompressors on what the native compressor made of it, which
// must come back as the text itself; scripts print what they computed.
// Under pmthreads the runtime may print no error (runtime_complaints).
// tools/setup-deps installs the packages; a program that is missing fails
// its case with the package to install.  Servers: test_corpus_servers.cpp.
#include "corpus.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

using namespace subprocess;
using namespace corpus;

// The input: 16 MiB of lines drawn from a dictionary of made-up words, with
// numbers.  Big enough that the compressors split it into several blocks
// for their threads and run for many 10 ms intervals; fixed by the seed, so
// every run of the suite compresses the same bytes.
const size_t input_bytes = 16u << 20;
const unsigned interval_ms = 10;

struct xorshift {
	uint64_t s;
	uint64_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return s;
	}
	unsigned below(unsigned n) { return (unsigned)(next() % n); }
};

std::string make_text()
{
	xorshift r{ 0x9e3779b97f4a7c15ULL };
	std::vector<std::string> words(3000);
	for (auto &w : words) {
		unsigned len = 2 + r.below(9);
		for (unsigned i = 0; i < len; i++)
			w += (char)('a' + r.below(26));
	}
	std::string text;
	text.reserve(input_bytes + 256);
	while (text.size() < input_bytes) {
		unsigned n = 3 + r.below(12);
		for (unsigned i = 0; i < n; i++) {
			text += words[r.below((unsigned)words.size())];
			text += ' ';
		}
		text += std::to_string(r.below(100000));
		text += '\n';
	}
	return text;
}

void write_file(const std::string &path, const std::string &data)
{
	std::ofstream f(path, std::ios::binary);
	f.write(data.data(), (std::streamsize)data.size());
	REQUIRE(f.good());
}

// The scratch directory with the input and its native compressed forms,
// made once for the whole run.
struct corpus_files {
	scratch_dir dir;
	std::string text_path, text;
	corpus_files()
	{
		text = make_text();
		text_path = dir.path + "/input.txt";
		write_file(text_path, text);
	}
};

corpus_files &files()
{
	static std::unique_ptr<corpus_files> f;
	if (!f)
		f = std::make_unique<corpus_files>();
	return *f;
}

// /usr/bin/NAME, or a failure naming the package to install.
std::string program(const std::string &name, const std::string &package)
{
	for (const char *dir : { "/usr/bin/", "/bin/" }) {
		std::string p = dir + name;
		if (access(p.c_str(), X_OK) == 0)
			return p;
	}
	FAIL(name << " is not installed: install the Debian package " << package
		  << " (tools/setup-deps installs everything the tests need)");
	return "";
}

std::string how_it_ended(const run_result &r)
{
	return corpus::how_it_ended(r.wait_status);
}

// Where two outputs first differ, for the failure message (they may be
// megabytes of binary).
std::string difference(const std::string &want, const std::string &got)
{
	size_t i = 0, n = std::min(want.size(), got.size());
	while (i < n && want[i] == got[i])
		i++;
	std::ostringstream s;
	s << "expected " << want.size() << " bytes, got " << got.size();
	if (i < n)
		s << "; first difference at byte " << i;
	else if (want.size() != got.size())
		s << "; one is a prefix of the other";
	return s.str();
}

// Run argv natively, and under `pmthreads run` in each of this half's
// modes; every run must exit 0 and print `expected` (the native output when
// empty), and with the persistent heap have persisted epochs as `want`
// says.  Returns the native output.
// How a program's statistics must look under the persistent heap.
struct expect {
	long long min_epochs = 1;	// the final epoch at least
	// A program that ends with _exit(2) runs no exit handler: no final
	// epoch and no final report (the last periodic one, a second apart,
	// stays); the pool is left to be recovered, and min_epochs is checked
	// there (its durable epoch).
	bool ends_with__exit = false;
	// It holds a lock for its life or across its event loop: the runtime's
	// stall report is expected (corpus.hpp's runtime_complaints).
	bool holds_a_lock_for_life = false;
};

std::string compare_with_native(const std::vector<std::string> &argv,
				const std::string &expected = std::string(), expect want = expect())
{
	scratch_dir dir;
	std::string cmd = command_line(argv);
	run_result native = run(argv, base_env(dir.path));
	{
		INFO(cmd << " natively: " << how_it_ended(native) << "\n--- stderr:\n" << native.err);
		REQUIRE(native.exited_ok());
		if (!expected.empty()) {
			INFO(difference(expected, native.out));
			bool same_as_expected = native.out == expected;
			REQUIRE(same_as_expected);
		}
	}
	pool_place pools;
	for (const preload_mode &m : preload_modes()) {
		std::string tag = std::string(m.heap) + "-" + m.tracker;
		std::string json = dir.path + "/" + tag + ".json";
		pmthreads_run pm = under_pmthreads(argv, base_env(dir.path), m, pools, json, interval_ms);
		run_result r = run(pm.argv, pm.env);
		std::string stats = slurp(json);
		INFO(cmd << "\nunder pmthreads, " << m.name << ": " << how_it_ended(r)
			 << "\n--- stderr:\n" << r.err << "--- statistics:\n"
			 << stats);
		CHECK(how_it_ended(r) == how_it_ended(native));
		CHECK(runtime_complaints(r.err, want.holds_a_lock_for_life) == "");
		{
			// A bool, so that a failure does not print megabytes.
			INFO("stdout: " << difference(native.out, r.out));
			bool same_stdout = r.out == native.out;
			CHECK(same_stdout);
		}
		if (std::string(m.heap) == "malloc" && r.exited_ok() && !want.ends_with__exit) {
			// The heap was really the pool's: epochs ran and persisted
			// the program's pages.
			CHECK(json_text(stats, "persistence") == "true");
			CHECK(json_text(stats, "tracker") == std::string("\"") + m.tracker + "\"");
			CHECK(json_number(stats, "epochs") >= want.min_epochs);
			CHECK(json_number(stats, "pages_persisted") > 0);
			pool_medium::expect_backend(stats);
		} else if (std::string(m.heap) == "malloc" && r.exited_ok()) {
			// No final report (a periodic one, if it ran a second):
			// the pool itself shows the epochs, left as after a crash.
			std::string pool = pools.dir + "/" + tag + ".pool";
			run_result info = run({ subprocess::env_or_fail("PMT_RECOVER_TOOL"), "info", pool,
						"--json" },
						base_env(dir.path));
			INFO("pmthreads-recover info " << pool << ": " << how_it_ended(info) << "\n"
						       << info.out << info.err);
			REQUIRE(info.exited_ok());
			// Mid-epoch too: an epoch writing pages whole (persist.h)
			// makes its copies' torn seq durable before their data.
			std::string state = json_text(info.out, "state");
			CHECK((state == "\"crashed\"" || state == "\"crashed-mid-epoch\""));
			CHECK(json_number(info.out, "ver_d") >= want.min_epochs);
			CHECK(json_number(info.out, "pages_used") > 0);
			if (!stats.empty()) {
				CHECK(json_text(stats, "persistence") == "true");
				CHECK(json_text(stats, "tracker") == std::string("\"") + m.tracker + "\"");
			}
		}
	}
	return native.out;
}

// Compress the input natively and under pmthreads (same bytes), then
// decompress the native result the same way: it must be the input again.
void round_trip(const std::vector<std::string> &compress, std::vector<std::string> decompress,
		const std::string &suffix, expect want = expect())
{
	corpus_files &f = files();
	SECTION("compress") {
		compare_with_native(compress, std::string(), want);
	}
	SECTION("decompress") {
		// The native compressor's output, kept once per format.
		std::string path = f.dir.path + "/input" + suffix;
		struct stat st;
		if (stat(path.c_str(), &st) != 0) {
			scratch_dir tmp;
			run_result c = run(compress, base_env(tmp.path));
			INFO(command_line(compress) << ": " << how_it_ended(c) << "\n" << c.err);
			REQUIRE(c.exited_ok());
			write_file(path, c.out);
		}
		decompress.push_back(path);
		want.min_epochs = 1;
		compare_with_native(decompress, f.text, want);
	}
}

} // namespace

// The two SIGSEGV reproducers of the write-back issue (issue 20), each
// compressing for many intervals (several epochs at least, even on a fast
// machine): liblzma's worker threads run with every signal blocked and copy
// into heap buffers while epochs write them back; zstd installs a SIGSEGV
// handler of its own (through __sysv_signal) that reports "Caught SIGSEGV".
TEST_CASE("xz -0 -T2 --block-size=2MiB", "[corpus][corpus-a][trackers]")
{
	std::string xz = program("xz", "xz-utils");
	round_trip({ xz, "-0", "-T2", "--block-size=2MiB", "-c", files().text_path },
		   { xz, "-d", "-T2", "-c" }, ".xz", expect{ 3, false });
}

TEST_CASE("zstd -T2", "[corpus][corpus-a][trackers]")
{
	std::string zstd = program("zstd", "zstd");
	// -9: about 0.6 s natively here; the default level (80 ms) ended
	// within two or three epochs of a pool on a disk, fewer on a faster
	// machine.
	round_trip({ zstd, "-q", "-9", "-T2", "-c", files().text_path },
		   { zstd, "-q", "-d", "-T2", "-c" }, ".zst", expect{ 3, false });
}

TEST_CASE("pzstd -p 2 (C++ std::thread)", "[corpus][corpus-a][trackers]")
{
	std::string pzstd = program("pzstd", "zstd");
	round_trip({ pzstd, "-q", "-p", "2", "-c", files().text_path },
		   { pzstd, "-q", "-d", "-p", "2", "-c" }, ".pzst");
}

TEST_CASE("pigz -p 2", "[corpus][corpus-a][trackers]")
{
	std::string pigz = program("pigz", "pigz");
	round_trip({ pigz, "-p", "2", "-c", files().text_path }, { pigz, "-d", "-p", "2", "-c" },
		   ".gz");
}

TEST_CASE("pbzip2 -p2", "[corpus][corpus-b][trackers]")
{
	std::string pbzip2 = program("pbzip2", "pbzip2");
	round_trip({ pbzip2, "-p2", "-c", files().text_path }, { pbzip2, "-d", "-p2", "-c" },
		   ".bz2");
}

TEST_CASE("lbzip2 -n 2", "[corpus][corpus-b][trackers]")
{
	std::string lbzip2 = program("lbzip2", "lbzip2");
	// lbzip2 ends with _exit(2).
	round_trip({ lbzip2, "-n", "2", "-c", files().text_path }, { lbzip2, "-d", "-n", "2", "-c" },
		   ".lbz2", expect{ 1, true });
}

TEST_CASE("plzip -n 2", "[corpus][corpus-b][trackers]")
{
	std::string plzip = program("plzip", "plzip");
	round_trip({ plzip, "-0", "-n", "2", "-c", files().text_path },
		   { plzip, "-d", "-n", "2", "-c" }, ".lz");
}

TEST_CASE("pixz -p 2", "[corpus][corpus-b][trackers]")
{
	std::string pixz = program("pixz", "pixz");
	// pixz given a file name alone compresses it in place: input and
	// output are named.
	round_trip({ pixz, "-0", "-t", "-p", "2", "-i", files().text_path, "-o", "/dev/stdout" },
		   { pixz, "-d", "-t", "-p", "2", "-o", "/dev/stdout", "-i" }, ".pxz");
}

TEST_CASE("sort --parallel=2, merging temporary files", "[corpus][corpus-c][trackers]")
{
	std::string sort = program("sort", "coreutils");
	// -S 4M: a 16 MiB input is sorted in runs written to TMPDIR and merged.
	compare_with_native({ sort, "--parallel=2", "-S", "4M", files().text_path });
	compare_with_native({ sort, "--parallel=2", "-S", "4M", "-n", "-k", "2", "-u",
			      files().text_path });
}

// A JVM (issue 33): HotSpot's SIGSEGV handler (implicit null checks: each
// NullPointerException below, of a field or an array length, starts as a
// fault -- a call on null is checked explicitly) runs without SA_NODEFER,
// unblocks SIGSEGV and writes the C heap; under the mprotect tracker its
// first write to a write-protected page with SIGSEGV still blocked ended
// the process (5 runs of 5).  Launched from source, so that javac also runs
// in the JVM; -Xint keeps every null check a fault.  Its own meson tests
// (corpus-jvm, corpus-jvm-uffd) skip where there is no java.
TEST_CASE("java -Xint, 120,000 NullPointerExceptions from two threads", "[jvm]")
{
	std::string java = find_program("java");	// as catch_main.cpp's check found it
	REQUIRE_FALSE(java.empty());
	scratch_dir dir;
	std::string src = dir.path + "/Npe.java";
	write_file(src, "public class Npe {\n"
			"    int f;\n"
			"    static Npe none;\n"
			"    static int[] noArray;\n"
			"    static int throwMany(int n) {\n"
			"        int caught = 0;\n"
			"        for (int i = 0; i < n; i++) {\n"
			"            try { caught += none.f; } catch (NullPointerException e) { caught++; }\n"
			"            try { caught += noArray.length; } catch (NullPointerException e) { caught++; }\n"
			"            try { none.f = i; } catch (NullPointerException e) { caught++; }\n"
			"        }\n"
			"        return caught;\n"
			"    }\n"
			"    public static void main(String[] args) throws Exception {\n"
			"        int[] other = new int[1];\n"
			"        Thread t = new Thread(() -> other[0] = throwMany(20000));\n"
			"        t.start();\n"
			"        int mine = throwMany(20000);\n"
			"        t.join();\n"
			"        System.out.println(\"caught \" + mine + \" + \" + other[0]);\n"
			"    }\n"
			"}\n");
	expect want;
	want.holds_a_lock_for_life = true;	// HotSpot's VM thread's mutexes
	compare_with_native({ java, "-Xint", "-XX:-UsePerfData", src }, "caught 60000 + 60000\n",
			    want);
}

// Interpreters whose threads share one heap through their own locks
// (CPython's GIL, perl's ithreads with shared variables), and the sqlite3
// shell writing a database in WAL mode (its -shm file mmapped, fsyncs): each
// prints what it computed, which must be the same under pmthreads.  Each
// runs for several 10 ms intervals at least.
TEST_CASE("python3, four threads hashing and building dicts", "[corpus][corpus-c][trackers]")
{
	std::string python = program("python3", "python3");
	scratch_dir dir;
	std::string script = dir.path + "/threads.py";
	write_file(script, "import threading, queue, hashlib, json, sqlite3, zlib\n"
			   "done = queue.Queue()\n"
			   "results = {}\n"
			   "lock = threading.Lock()\n"
			   "def work(n):\n"
			   "    h = hashlib.sha256()\n"
			   "    d = {}\n"
			   "    for i in range(40000):\n"
			   "        d['k%d' % i] = [i, str(i * n) * 3]\n"
			   "        h.update(('%d:%d' % (n, i)).encode())\n"
			   "    with lock:\n"
			   "        results[n] = (h.hexdigest(), len(json.dumps(d)))\n"
			   "    done.put(n)\n"
			   "ts = [threading.Thread(target=work, args=(n,)) for n in range(4)]\n"
			   "for t in ts: t.start()\n"
			   "for t in ts: t.join()\n"
			   "print(sorted(done.get() for _ in range(4)))\n"
			   "for n in sorted(results): print(n, *results[n])\n"
			   "db = sqlite3.connect(':memory:')\n"
			   "db.execute('create table t(k integer primary key, v text)')\n"
			   "db.executemany('insert into t values(?, ?)',\n"
			   "               ((i, 'v%d' % (i * 7)) for i in range(20000)))\n"
			   "print(db.execute('select count(*), sum(k), max(v) from t').fetchone())\n"
			   "print(len(zlib.compress(b'abc' * 100000)))\n");
	// -I: no user site directory or PYTHON* variables of the caller's.
	compare_with_native({ python, "-I", script });
}

TEST_CASE("perl, four ithreads with shared variables", "[corpus][corpus-c][trackers]")
{
	std::string perl = program("perl", "perl");
	scratch_dir dir;
	std::string script = dir.path + "/threads.pl";
	write_file(script, "use strict; use warnings; use threads; use threads::shared;\n"
			   "use Digest::MD5 qw(md5_hex);\n"
			   "my %shared :shared; my $total :shared = 0;\n"
			   "my @t = map { my $n = $_; threads->create(sub {\n"
			   "  my %h; my $s = '';\n"
			   "  for my $i (1 .. 30000) { $h{\"k$i\"} = $i * $n; $s .= chr(65 + ($i * $n) % 26); }\n"
			   "  { lock($total); $total += scalar(keys %h);\n"
			   "    $shared{$n} = md5_hex($s) . ' ' . length($s); }\n"
			   "  return $n * 10; }) } 1 .. 4;\n"
			   "my @r = map { $_->join } @t;\n"
			   "print \"joined @r total $total\\n\";\n"
			   "print \"$_ $shared{$_}\\n\" for sort keys %shared;\n"
			   "my @sorted = sort { $a <=> $b } map { ($_ * 7919) % 100003 } 1 .. 100000;\n"
			   "print \"sorted $sorted[0] $sorted[-1] \", scalar(@sorted), \"\\n\";\n");
	compare_with_native({ perl, script });
}

TEST_CASE("sqlite3 shell, a WAL database of 50,000 rows", "[corpus][corpus-c][trackers]")
{
	std::string sqlite3 = program("sqlite3", "sqlite3");
	scratch_dir dir;
	std::string sql = dir.path + "/load.sql", db = dir.path + "/test.db";
	// The same database for every run: each starts by dropping the table.
	write_file(sql, "pragma journal_mode = wal;\n"
			"drop table if exists t;\n"
			"create table t(k integer primary key, v text);\n"
			"with recursive c(i) as (select 1 union all select i + 1 from c where i < 50000)\n"
			"  insert into t select i, printf('v%08d', i * 7 % 50021) from c;\n"
			"create index tv on t(v);\n"
			"select count(*), sum(k), min(v), max(v) from t;\n"
			"select k, v from t where v between 'v00001000' and 'v00001100' order by v limit 5;\n"
			"update t set v = v || 'x' where k % 3 = 0;\n"
			"select count(*) from t where v like '%x';\n"
			"pragma integrity_check;\n");
	compare_with_native({ sqlite3, "-batch", db, ".read " + sql });
}

// node (issue 33): V8 on libuv, two worker_threads, zlib on libuv's thread
// pool, and an HTTP server and client in the one process on a loopback
// port the kernel chooses.  Its main thread holds V8's Locker while it waits
// in epoll_pwait, so epochs come only between (issue 33 item 4).  Its own
// meson tests (corpus-node, corpus-node-uffd) skip where there is no node.
TEST_CASE("node, worker_threads, zlib and an HTTP round trip", "[node]")
{
	std::string node = find_program("node");	// as catch_main.cpp's check found it
	REQUIRE_FALSE(node.empty());
	scratch_dir dir;
	std::string script = dir.path + "/threads.js";
	write_file(script,
		   "const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');\n"
		   "const http = require('http'), crypto = require('crypto'), zlib = require('zlib');\n"
		   "if (!isMainThread) {\n"
		   "  const h = crypto.createHash('sha256');\n"
		   "  for (let i = 0; i < 20000; i++) h.update('block ' + workerData + ' ' + i);\n"
		   "  parentPort.postMessage(h.digest('hex'));\n"
		   "  return;\n"
		   "}\n"
		   "async function main() {\n"
		   "  const digests = await Promise.all([1, 2].map(n => new Promise((ok, fail) => {\n"
		   "    const w = new Worker(__filename, { workerData: n });\n"
		   "    w.on('message', ok); w.on('error', fail);\n"
		   "  })));\n"
		   "  console.log('workers', digests.join(' '));\n"
		   "  const big = Buffer.from('x'.repeat(1 << 20) + JSON.stringify({ a: [1, 2, 3] }));\n"
		   "  const z = await new Promise((ok, fail) => zlib.gzip(big, (e, b) => e ? fail(e) : ok(b)));\n"
		   "  console.log('gzip round trip', zlib.gunzipSync(z).equals(big));\n"
		   "  const server = http.createServer((req, res) => res.end('hello ' + req.url));\n"
		   "  await new Promise(ok => server.listen(0, '127.0.0.1', ok));\n"
		   "  const port = server.address().port, replies = [];\n"
		   "  for (let i = 0; i < 50; i++)\n"
		   "    replies.push(await new Promise((ok, fail) =>\n"
		   "      http.get({ host: '127.0.0.1', port, path: '/r' + i }, r => {\n"
		   "        let b = ''; r.on('data', d => b += d); r.on('end', () => ok(r.statusCode + ' ' + b));\n"
		   "      }).on('error', fail)));\n"
		   "  server.close();\n"
		   "  console.log(replies.join(', '));\n"
		   "  const m = new Map();\n"
		   "  for (let i = 0; i < 200000; i++) m.set('k' + i, i * 2);\n"
		   "  let s = 0; for (const v of m.values()) s += v;\n"
		   "  console.log('map sum', s);\n"
		   "}\n"
		   "main().catch(e => { console.error(e); process.exit(1); });\n");
	expect want;
	want.holds_a_lock_for_life = true;	// V8's Locker, on the main thread
	std::string out = compare_with_native({ node, script }, std::string(), want);
	CHECK(out.find("gzip round trip true\n200 hello /r0, ") != std::string::npos);
}
