/* SPDX-License-Identifier: BSD-3-Clause */
// The corpus' servers (issue 33): unmodified Debian servers started natively
// and under `pmthreads run` in each of this half's modes (uffd_half.h), on a
// free loopback port, driven by the same scripted client; every reply must
// be the native run's, the server must stop on SIGTERM as natively, log
// every line the native run logged (numbers aside) and the runtime may print
// no error (corpus.hpp's runtime_complaints).  In the
// malloc heap mode the statistics must show the heap was the pool's.  Not
// checked: durability -- redis' main thread holds its GIL for its whole life
// and varnish's worker is a fork child, so their epochs are not what these
// cases are about.  Every step is bounded: a server that does not listen,
// answer or stop within its bound fails the case and is killed with its
// process group.  Each program has meson tests of its own that skip where it
// is not installed (catch_main.cpp's PMT_TEST_NEEDS):
//   meson test -C build corpus-redis corpus-redis-uffd corpus-varnish corpus-varnish-uffd
//                       corpus-unbound corpus-unbound-uffd
#include "corpus.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <functional>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>

namespace {

using namespace subprocess;
using namespace corpus;
using clock_type = std::chrono::steady_clock;

// Bounds on a loaded 2-core machine, far above what a working run takes
// (under a second to listen, to answer and to stop): reached only when a
// server hangs.
const std::chrono::seconds listen_bound{ 60 }, answer_bound{ 60 }, stop_bound{ 30 };
const unsigned interval_ms = 10;

void write_file(const std::string &path, const std::string &data, mode_t mode = 0644)
{
	std::ofstream f(path, std::ios::binary);
	f.write(data.data(), (std::streamsize)data.size());
	REQUIRE(f.good());
	f.close();
	REQUIRE(chmod(path.c_str(), mode) == 0);
}

// A loopback port nothing listens on now: the kernel's choice for a socket
// bound to port 0.  The server binds it a moment later; one that finds it
// taken meanwhile is started again on another (serve()).
int free_port()
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(fd >= 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE(bind(fd, (sockaddr *)&a, sizeof(a)) == 0);
	socklen_t len = sizeof(a);
	REQUIRE(getsockname(fd, (sockaddr *)&a, &len) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

// A server in a process group of its own (so that its children can be
// killed with it), stdout and stderr into one log file, stdin /dev/null.
struct server_process {
	pid_t pid = -1;
	std::string log_path;
	int wait_status = 0;
	bool exited = false;

	server_process(const std::vector<std::string> &argv, const std::map<std::string, std::string> &extra,
		       const std::string &log)
		: log_path(log)
	{
		std::vector<std::string> env;
		for (char **e = environ; *e != nullptr; e++)
			if (strncmp(*e, "PMTHREADS_", 10) != 0 && strncmp(*e, "LD_PRELOAD=", 11) != 0)
				env.emplace_back(*e);
		for (auto &kv : extra)
			env.push_back(kv.first + "=" + kv.second);
		std::vector<char *> envp = subprocess::c_strings(env),
				    args = subprocess::c_strings(argv);
		int logfd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		REQUIRE(logfd >= 0);
		pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			setpgid(0, 0);
			int nul = open("/dev/null", O_RDONLY);
			dup2(nul, 0);
			dup2(logfd, 1);
			dup2(logfd, 2);
			execve(args[0], args.data(), envp.data());
			_exit(127);
		}
		setpgid(pid, pid);	// as the child does: no race with kill(-pid)
		close(logfd);
	}
	~server_process()
	{
		if (pid > 0) {
			kill(-pid, SIGKILL);
			if (!exited)
				waitpid(pid, nullptr, 0);
		}
	}
	bool has_exited()
	{
		if (!exited && waitpid(pid, &wait_status, WNOHANG) == pid)
			exited = true;
		return exited;
	}
	// SIGTERM, then its end within the bound (false if not: it is killed).
	bool stop()
	{
		if (!has_exited())
			kill(pid, SIGTERM);
		auto deadline = clock_type::now() + stop_bound;
		while (!has_exited() && clock_type::now() < deadline)
			std::this_thread::sleep_for(std::chrono::milliseconds(20));
		return exited;
	}
	std::string log() const { return slurp(log_path); }
};

// A connection to 127.0.0.1:port as soon as the server listens, or -1 when
// it exited first or did not listen within the bound.
int connect_when_listening(int port, server_process &s)
{
	auto deadline = clock_type::now() + listen_bound;
	while (clock_type::now() < deadline && !s.has_exited()) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		REQUIRE(fd >= 0);
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons((uint16_t)port);
		if (connect(fd, (sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		close(fd);
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
	}
	return -1;
}

// Whether a connection's replies are all there.
using complete_fn = std::function<bool(const std::string &replies)>;

// Send each connection its request and read its replies, all connections at
// once (as concurrent clients), until each is complete or the server closes
// it; false when the bound passed first or give_up() said so.
bool converse(const std::vector<int> &fds, const std::vector<std::string> &requests,
	      std::vector<std::string> &replies, const complete_fn &complete,
	      const std::function<bool()> &give_up)
{
	size_t n = fds.size();
	std::vector<size_t> sent(n, 0);
	std::vector<bool> done(n, false);
	replies.assign(n, std::string());
	for (int fd : fds)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	auto deadline = clock_type::now() + answer_bound;
	while (std::count(done.begin(), done.end(), false) > 0) {
		auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
		if (left.count() <= 0 || give_up())
			return false;
		std::vector<pollfd> p;
		std::vector<size_t> which;
		for (size_t i = 0; i < n; i++) {
			if (done[i])
				continue;
			short ev = POLLIN;
			if (sent[i] < requests[i].size())
				ev |= POLLOUT;
			p.push_back({ fds[i], ev, 0 });
			which.push_back(i);
		}
		if (poll(p.data(), p.size(), (int)std::min<long long>(left.count(), 1000)) < 0) {
			REQUIRE(errno == EINTR);
			continue;
		}
		for (size_t k = 0; k < p.size(); k++) {
			size_t i = which[k];
			if ((p[k].revents & POLLOUT) != 0) {
				ssize_t w = send(fds[i], requests[i].data() + sent[i], requests[i].size() - sent[i],
						 MSG_NOSIGNAL);
				if (w > 0)
					sent[i] += (size_t)w;
			}
			if ((p[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
				char buf[65536];
				ssize_t r = recv(fds[i], buf, sizeof(buf), 0);
				if (r > 0)
					replies[i].append(buf, (size_t)r);
				else if (r == 0 || (errno != EAGAIN && errno != EINTR))
					done[i] = true;	// closed by the server
			}
			if (complete(replies[i]))
				done[i] = true;
		}
	}
	return true;
}

// One run of a server: started on a free port, each session's requests
// sent on its own connections (the sessions one after another), stopped.
struct session {
	std::vector<std::string> requests;	// one per connection
	complete_fn complete;
};

struct server_run {
	std::vector<std::vector<std::string>> replies;	// per session, per connection
	int wait_status = 0;
	std::string log;
};

// argv_for(port) is the server's command line.  A server that exits because
// its port was taken meanwhile (whoever took it may have been the one that
// answered) is started again on another, at most 5 times; any other failure
// to listen, answer or stop, or an exit before SIGTERM, fails the case with
// the server's log.
server_run serve(const std::function<std::vector<std::string>(int port)> &argv_for,
		 const std::map<std::string, std::string> &env, const std::vector<session> &sessions,
		 const std::string &log_path, const std::string &what)
{
	server_run out;
	for (int attempt = 0;; attempt++) {
		int port = free_port();
		server_process s(argv_for(port), env, log_path);
		// Whether it exited because the port was taken meanwhile.
		auto port_taken = [&]() {
			return s.has_exited() && s.log().find("in use") != std::string::npos && attempt < 5;
		};
		std::vector<int> first;
		first.push_back(connect_when_listening(port, s));
		if (first[0] < 0) {
			std::string log = s.log();
			if (port_taken())
				continue;
			INFO(what << ": did not listen on 127.0.0.1:" << port << " within "
				  << listen_bound.count() << " s ("
				  << (s.exited ? how_it_ended(s.wait_status) : "still running") << ")\n--- log:\n"
				  << log);
			FAIL("the server did not start");
		}
		for (size_t k = 0; k < sessions.size(); k++) {
			const session &ses = sessions[k];
			std::vector<int> fds = k == 0 ? first : std::vector<int>();
			while (fds.size() < ses.requests.size()) {
				int fd = connect_when_listening(port, s);
				INFO(what << ": connection refused\n--- log:\n" << s.log());
				REQUIRE(fd >= 0);
				fds.push_back(fd);
			}
			std::vector<std::string> replies;
			bool answered = converse(fds, ses.requests, replies, ses.complete, port_taken);
			for (int fd : fds)
				close(fd);
			if (!answered && port_taken())
				break;
			if (!answered) {
				std::string got;
				for (auto &r : replies)
					got += "[" + std::to_string(r.size()) + " bytes] ..." +
					       r.substr(r.size() > 300 ? r.size() - 300 : 0) + "\n";
				INFO(what << ": session " << k << " not answered within " << answer_bound.count()
					  << " s; the replies end with:\n"
					  << got << "--- log:\n"
					  << s.log());
				FAIL("the server did not answer");
			}
			out.replies.push_back(replies);
		}
		// A server that took the port first answered instead of this one.
		if (port_taken()) {
			out.replies.clear();
			continue;
		}
		{
			INFO(what << ": " << how_it_ended(s.wait_status) << " before SIGTERM\n--- log:\n" << s.log());
			REQUIRE_FALSE(s.has_exited());
		}
		bool stopped = s.stop();
		out.log = s.log();
		INFO(what << ": did not end within " << stop_bound.count() << " s of SIGTERM\n--- log:\n"
			  << out.log);
		REQUIRE(stopped);
		out.wait_status = s.wait_status;
		return out;
	}
}

// Where two replies first differ, with what is around it.
std::string first_difference(const std::string &want, const std::string &got)
{
	size_t i = 0, n = std::min(want.size(), got.size());
	while (i < n && want[i] == got[i])
		i++;
	size_t from = i > 80 ? i - 80 : 0;
	std::ostringstream s;
	s << "expected " << want.size() << " bytes, got " << got.size() << "; from byte " << from
	  << "\n  expected: " << want.substr(from, 200) << "\n  got:      " << got.substr(from, 200);
	return s.str();
}

// A log's lines with every number as '#' (process ids, times, ports).
std::set<std::string> log_shapes(const std::string &log)
{
	std::set<std::string> shapes;
	std::istringstream lines(log);
	for (std::string line; std::getline(lines, line);) {
		std::string shape;
		for (size_t i = 0; i < line.size(); i++) {
			bool digit = line[i] >= '0' && line[i] <= '9';
			if (!digit)
				shape += line[i];
			else if (shape.empty() || shape.back() != '#')
				shape += '#';
		}
		if (!shape.empty())
			shapes.insert(shape);
	}
	return shapes;
}

// What the native run logged that the run under pmthreads did not, each line
// with its numbers left out: a server that took another way (varnishd's
// manager lost its SIGTERM to a poll that failed with EFAULT, stopped its
// child because its event loop failed, and still exited 0).
std::string missing_log_lines(const std::string &native, const std::string &got)
{
	std::set<std::string> have = log_shapes(got);
	std::string missing;
	for (const std::string &line : log_shapes(native))
		if (have.count(line) == 0)
			missing += line + "\n";
	return missing;
}

// The heap mode's mark in the statistics: with the malloc heap, the heap
// was the pool's (persistence on, the mode's tracker when `tracker`).
void check_heap_was_the_pools(const preload_mode &m, const std::string &stats, bool tracker)
{
	if (std::string(m.heap) != "malloc")
		return;
	INFO("--- statistics:\n" << stats);
	CHECK(json_text(stats, "heap_mode") == "\"malloc\"");
	CHECK(json_text(stats, "persistence") == "true");
	pool_medium::expect_backend(stats);
	if (tracker)
		CHECK(json_text(stats, "tracker") == std::string("\"") + m.tracker + "\"");
}

// Run the server natively, then under pmthreads in each mode of this half:
// the same replies (after `normalize`), the same end, no runtime error.
// `expected_native` checks the native replies themselves, so that a client
// that got nothing useful cannot pass by comparison alone.
void compare_server(const std::string &name,
		    const std::function<std::vector<std::string>(int port, const std::string &dir)> &argv_for,
		    const std::vector<session> &sessions,
		    const std::function<std::string(const std::string &)> &normalize,
		    const std::function<void(const server_run &)> &expected_native, bool stats_tracker)
{
	scratch_dir dir;
	// The server may drop privileges (varnishd runs its worker as vcache):
	// its directories must be open to it.
	REQUIRE(chmod(dir.path.c_str(), 0755) == 0);
	auto run_in = [&](const std::string &sub, const std::map<std::string, std::string> &env,
			  const std::vector<std::string> &prefix, const std::string &what) {
		std::string d = dir.path + "/" + sub;
		REQUIRE(mkdir(d.c_str(), 0777) == 0);
		REQUIRE(chmod(d.c_str(), 0777) == 0);
		return serve(
			[&](int port) {
				std::vector<std::string> argv = prefix, a = argv_for(port, d);
				argv.insert(argv.end(), a.begin(), a.end());
				return argv;
			},
			env, sessions, dir.path + "/" + sub + ".log", what);
	};
	server_run native = run_in("native", base_env(dir.path), {}, name + " natively");
	{
		INFO(name << " natively: " << how_it_ended(native.wait_status) << "\n--- log:\n" << native.log);
		expected_native(native);
	}
	pool_place pools;
	for (const preload_mode &m : preload_modes()) {
		std::string tag = std::string(m.heap) + "-" + m.tracker;
		std::string stats = dir.path + "/" + tag + "/stats.json";
		pmthreads_run pm = under_pmthreads({}, base_env(dir.path), m, pools, stats, interval_ms);
		std::string what = name + " under pmthreads, " + m.name;
		server_run r = run_in(tag, pm.env, pm.argv, what);
		INFO(what << ": " << how_it_ended(r.wait_status) << "\n--- log:\n" << r.log);
		CHECK(how_it_ended(r.wait_status) == how_it_ended(native.wait_status));
		// Stall reports are expected of a server: redis holds its GIL for
		// life, and no server here is checked for durability.
		CHECK(runtime_complaints(r.log, true) == "");
		CHECK(missing_log_lines(native.log, r.log) == "");
		// strerror(EFAULT): a system call the native run made failed
		// (unbound went on without libevent's pipe and signal
		// socketpair when the mprotect tracker made them fail).
		CHECK(r.log.find("Bad address") == std::string::npos);
		for (size_t k = 0; k < sessions.size(); k++)
			for (size_t c = 0; c < sessions[k].requests.size(); c++) {
				std::string want = normalize(native.replies[k][c]), got = normalize(r.replies[k][c]);
				INFO("session " << k << ", connection " << c << ": " << first_difference(want, got));
				bool same_replies = got == want;
				CHECK(same_replies);
			}
		check_heap_was_the_pools(m, slurp(stats), stats_tracker);
	}
}

// ---- redis ----

std::string resp(const std::vector<std::string> &args)
{
	std::string s = "*" + std::to_string(args.size()) + "\r\n";
	for (auto &a : args)
		s += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
	return s;
}

std::string resp_bulk(const std::string &s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

// A session's connection ends with PING <marker>: its replies are complete
// when they end with the marker's bulk string.
std::string end_marker(size_t c) { return "end-of-script-" + std::to_string(c); }

// What one client does with keys of its own (prefix c:), so that replies do
// not depend on how the clients interleave: strings of many sizes, counters,
// a list, a small hash, an intset, a sorted set, a sparse 500 KB string, Lua.
std::string redis_client_script(size_t c)
{
	std::string p = std::to_string(c) + ":", s;
	s += resp({ "PING" });
	s += resp({ "SET", p + "str", "hello" });
	s += resp({ "APPEND", p + "str", " world" });
	s += resp({ "GET", p + "str" });
	for (int i = 0; i < 2000; i++)
		s += resp({ "SET", p + "key:" + std::to_string(i),
			    std::string((size_t)(i * 37 % 300 + 1), (char)('a' + (i + (int)c) % 26)) });
	for (int i = 0; i < 2000; i += 97)
		s += resp({ "GET", p + "key:" + std::to_string(i) });
	s += resp({ "MGET", p + "key:1", p + "key:2", p + "key:3", p + "none" });
	for (int i = 0; i < 500; i++)
		s += resp({ "INCR", p + "counter" });
	std::vector<std::string> push = { "RPUSH", p + "list" };
	for (int i = 0; i < 300; i++)
		push.push_back("item" + std::to_string(i));
	s += resp(push);
	s += resp({ "LRANGE", p + "list", "0", "9" });
	s += resp({ "LRANGE", p + "list", "-5", "-1" });
	s += resp({ "LPOP", p + "list", "3" });
	s += resp({ "LLEN", p + "list" });
	s += resp({ "HSET", p + "h", "f1", "v1", "f2", "v2", "f3", "v3" });
	s += resp({ "HINCRBY", p + "h", "n", "5" });
	s += resp({ "HGETALL", p + "h" });
	s += resp({ "SADD", p + "s", "5", "3", "9", "1", "7", "3" });
	s += resp({ "SMEMBERS", p + "s" });
	s += resp({ "ZADD", p + "z", "3", "c", "1", "a", "2", "b", "1.5", "x" });
	s += resp({ "ZRANGE", p + "z", "0", "-1", "WITHSCORES" });
	s += resp({ "SETRANGE", p + "big", "500000", "x" });
	s += resp({ "STRLEN", p + "big" });
	s += resp({ "GETRANGE", p + "big", "499998", "-1" });
	s += resp({ "EVAL", "local s = 0 for i = 1, tonumber(ARGV[1]) do s = s + i end return s", "0",
		    "100000" });
	s += resp({ "EVAL", "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])", "1",
		    p + "lua", "from lua" });
	s += resp({ "DEL", p + "key:0", p + "key:1" });
	s += resp({ "EXISTS", p + "key:0", p + "key:1", p + "key:2" });
	s += resp({ "PING", end_marker(c) });
	return s;
}

bool ends_with(const std::string &s, const std::string &tail)
{
	return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

} // namespace

// redis-server 7 (linked against jemalloc: the malloc family must come from
// one allocator, issue 33 item 1) with 2 I/O threads reading and writing;
// four clients at once (four is where redis turns threaded I/O on), then
// one that counts the keys, saves and reloads the whole data set (DEBUG
// RELOAD) and reads some back.
TEST_CASE("redis-server --io-threads 2, four scripted clients", "[redis]")
{
	std::string redis = find_program("redis-server");	// as catch_main.cpp's check found it
	REQUIRE_FALSE(redis.empty());
	const size_t clients = 4;
	session concurrent, reload;
	for (size_t c = 0; c < clients; c++)
		concurrent.requests.push_back(redis_client_script(c));
	concurrent.complete = [](const std::string &r) {
		for (size_t c = 0; c < clients; c++)
			if (ends_with(r, resp_bulk(end_marker(c))))
				return true;
		return false;
	};
	reload.requests.push_back(resp({ "DBSIZE" }) + resp({ "DEBUG", "RELOAD" }) + resp({ "DBSIZE" }) +
				  resp({ "GET", "1:str" }) + resp({ "SMEMBERS", "2:s" }) +
				  resp({ "LRANGE", "3:list", "0", "2" }) + resp({ "GET", "0:lua" }) +
				  resp({ "PING", end_marker(clients) }));
	reload.complete = [](const std::string &r) { return ends_with(r, resp_bulk(end_marker(clients))); };
	compare_server(
		"redis-server",
		[&](int port, const std::string &dir) {
			return std::vector<std::string>{ redis, "--port", std::to_string(port), "--bind", "127.0.0.1",
							 "--dir", dir, "--save", "", "--appendonly", "no",
							 "--io-threads", "2", "--io-threads-do-reads", "yes",
							 "--enable-debug-command", "local", "--logfile", "" };
		},
		{ concurrent, reload }, [](const std::string &r) { return r; },
		[&](const server_run &native) {
			// What the scripts must get, checked on the native run.
			for (size_t c = 0; c < clients; c++) {
				const std::string &r = native.replies[0][c];
				INFO("client " << c << ": ..." << r.substr(r.size() > 400 ? r.size() - 400 : 0));
				CHECK(r.rfind("+PONG\r\n+OK\r\n:11\r\n$11\r\nhello world\r\n+OK\r\n", 0) == 0);
				CHECK(r.find(":500\r\n") != std::string::npos);
				CHECK(r.find(":5000050000\r\n$8\r\nfrom lua\r\n:2\r\n:1\r\n" +
					     resp_bulk(end_marker(c))) != std::string::npos);
			}
			const std::string &r = native.replies[1][0];
			INFO("after reload: " << r);
			// 4 clients x (str, 1998 keys, counter, list, h, s, z, big, lua: 2006)
			CHECK(r.rfind(":8024\r\n+OK\r\n:8024\r\n$11\r\nhello world\r\n*5\r\n$1\r\n1\r\n", 0) == 0);
			CHECK(how_it_ended(native.wait_status) == "exit 0");
		},
		true);
}

namespace {

// A response without the headers that differ between any two runs (the
// date; X-Varnish, the transaction ids, which depend on how the worker
// threads took their blocks of ids).
std::string without_varying_headers(const std::string &r)
{
	std::string out;
	size_t at = 0;
	while (at < r.size()) {
		size_t eol = r.find("\r\n", at);
		size_t next = eol == std::string::npos ? r.size() : eol + 2;
		if (r.compare(at, 6, "Date: ") != 0 && r.compare(at, 11, "X-Varnish: ") != 0)
			out.append(r, at, next - at);
		at = next;
	}
	return out;
}

size_t count(const std::string &s, const std::string &what)
{
	size_t n = 0;
	for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
		n++;
	return n;
}

// varnishd's pipelined requests: `per_connection` GETs, the last one asking
// the server to close the connection.
std::string http_requests(size_t c, int per_connection)
{
	std::string s;
	for (int i = 0; i < per_connection; i++) {
		std::string url = i % 10 == 9 ? "/missing/" + std::to_string(i)
					       : "/n/" + std::to_string(i * 7 + (int)c);
		s += "GET " + url + " HTTP/1.1\r\nHost: corpus.test\r\n";
		if (i == per_connection - 1)
			s += "Connection: close\r\n";
		s += "\r\n";
	}
	return s;
}

} // namespace

// varnishd 7.1 (the manager, a VCL compiled with cc and loaded, the worker
// child it forks and which drops privileges, jemalloc; it calls close_range
// at start, issue 33 item 3): a VCL that answers every request itself
// (synth, no backend) with a body computed from the URL through vmod std
// and a regular expression; two connections of 100 pipelined requests each.
TEST_CASE("varnishd, synthetic answers to 200 pipelined requests", "[varnish]")
{
	std::string varnishd = find_program("varnishd");	// as catch_main.cpp's check found it
	REQUIRE_FALSE(varnishd.empty());
	scratch_dir conf;
	REQUIRE(chmod(conf.path.c_str(), 0755) == 0);
	std::string vcl = conf.path + "/synth.vcl";
	write_file(vcl, "vcl 4.1;\n"
			"import std;\n"
			"backend default none;\n"
			"sub vcl_recv {\n"
			"  if (req.url ~ \"^/missing/\") { return (synth(404, \"Not here\")); }\n"
			"  return (synth(200, \"OK\"));\n"
			"}\n"
			"sub vcl_synth {\n"
			"  set resp.http.Content-Type = \"text/plain\";\n"
			"  set resp.http.X-Upper = std.toupper(req.url);\n"
			"  set resp.body = \"hello \" + req.url + \" \" +\n"
			"    (std.integer(regsub(req.url, \"^/[a-z]+/\", \"\"), 0) * 3) + \".\";\n"
			"  return (deliver);\n"
			"}\n");
	const int per_connection = 100;
	session pipelined;
	for (size_t c = 0; c < 2; c++)
		pipelined.requests.push_back(http_requests(c, per_connection));
	pipelined.complete = [](const std::string &) { return false; };	// until the server closes
	compare_server(
		"varnishd",
		[&](int port, const std::string &dir) {
			return std::vector<std::string>{ varnishd, "-F", "-a", "127.0.0.1:" + std::to_string(port),
							 "-T", "none", "-f", vcl, "-n", dir + "/varnish",
							 "-s", "malloc,32m" };
		},
		{ pipelined }, without_varying_headers,
		[&](const server_run &native) {
			for (size_t c = 0; c < 2; c++) {
				const std::string &r = native.replies[0][c];
				INFO("connection " << c << ": " << r.substr(0, 600));
				CHECK(count(r, "HTTP/1.1 200 OK\r\n") == 90);
				CHECK(count(r, "HTTP/1.1 404 Not here\r\n") == 10);
				CHECK(r.find("X-Upper: /N/" + std::to_string(7 + c) + "\r\n") != std::string::npos);
				CHECK(r.find("\r\n\r\nhello /n/" + std::to_string(7 + c) + " " +
					     std::to_string((7 + c) * 3) + ".") != std::string::npos);
			}
		},
		false);
}

namespace {

// ---- unbound ----

// A DNS query for name (type qtype, class IN, recursion desired) with id, as
// sent over TCP: its length first (RFC 1035 4.2.2).
std::string dns_query(uint16_t id, const std::string &name, uint16_t qtype)
{
	std::string m;
	auto u16 = [&](uint16_t v) {
		m += (char)(v >> 8);
		m += (char)(v & 0xff);
	};
	u16(id);
	u16(0x0100);	// a standard query, RD
	u16(1);		// one question
	u16(0);
	u16(0);
	u16(0);
	size_t at = 0;
	while (at < name.size()) {
		size_t dot = name.find('.', at);
		if (dot == std::string::npos)
			dot = name.size();
		m += (char)(dot - at);
		m += name.substr(at, dot - at);
		at = dot + 1;
	}
	m += '\0';
	u16(qtype);
	u16(1);	// IN
	std::string framed;
	framed += (char)(m.size() >> 8);
	framed += (char)(m.size() & 0xff);
	return framed + m;
}

// The length-framed messages of a TCP stream (a trailing partial one left
// out).
std::vector<std::string> dns_messages(const std::string &stream)
{
	std::vector<std::string> out;
	size_t at = 0;
	while (at + 2 <= stream.size()) {
		size_t len = ((size_t)(unsigned char)stream[at] << 8) | (unsigned char)stream[at + 1];
		if (at + 2 + len > stream.size())
			break;
		out.push_back(stream.substr(at + 2, len));
		at += 2 + len;
	}
	return out;
}

uint16_t dns_id(const std::string &m)
{
	return m.size() < 2 ? 0 : (uint16_t)(((unsigned char)m[0] << 8) | (unsigned char)m[1]);
}

uint16_t dns_rcode(const std::string &m)
{
	return m.size() < 4 ? 0xffff : (uint16_t)((unsigned char)m[3] & 0x0f);
}

uint16_t dns_answers(const std::string &m)
{
	return m.size() < 8 ? 0 : (uint16_t)(((unsigned char)m[6] << 8) | (unsigned char)m[7]);
}

// A connection's replies in query order: unbound may answer a TCP
// connection's pipelined queries out of order (each message carries its id).
std::string dns_in_id_order(const std::string &stream)
{
	std::vector<std::string> ms = dns_messages(stream);
	std::stable_sort(ms.begin(), ms.end(),
			 [](const std::string &a, const std::string &b) { return dns_id(a) < dns_id(b); });
	std::string out;
	for (const std::string &m : ms)
		out += std::to_string(m.size()) + ":" + m;
	return out;
}

const int dns_hosts = 60, dns_queries = 100;
const uint16_t qtype_a = 1, qtype_mx = 15, qtype_txt = 16, qtype_aaaa = 28;

// One connection's queries: A records of the zone's hosts, a name the zone
// lacks (NXDOMAIN), a type a host lacks (no data), TXT and MX.
std::string dns_client_queries(size_t c)
{
	std::string s;
	for (int i = 0; i < dns_queries; i++) {
		uint16_t id = (uint16_t)(c * 1000 + (size_t)i);
		switch (i % 10) {
		case 7:
			s += dns_query(id, "nx" + std::to_string(i) + ".corpus.test", qtype_a);
			break;
		case 8:
			s += dns_query(id, "h" + std::to_string(i % dns_hosts) + ".corpus.test", qtype_aaaa);
			break;
		case 9:
			s += dns_query(id, i % 20 == 9 ? "corpus.test" : "mail.corpus.test",
				       i % 20 == 9 ? qtype_txt : qtype_mx);
			break;
		default:
			s += dns_query(id, "h" + std::to_string((i * 7 + (int)c) % dns_hosts) + ".corpus.test",
				       qtype_a);
		}
	}
	return s;
}

} // namespace

// unbound 1.17 with 2 threads (libevent's internal pipe and signal
// socketpair, made by pipe(2) and socketpair(2) into its heap: under the
// mprotect tracker they failed with EFAULT and unbound refused every query,
// issue 40), answering a static local zone on loopback only: no recursion,
// no network beyond 127.0.0.1.  Two connections of 100 pipelined queries
// over TCP, each answer checked natively (answers, NXDOMAIN, no data).
TEST_CASE("unbound, 2 threads, 200 pipelined queries of a local zone over TCP", "[unbound]")
{
	std::string unbound = find_program("unbound");	// as catch_main.cpp's check found it
	REQUIRE_FALSE(unbound.empty());
	scratch_dir conf;
	REQUIRE(chmod(conf.path.c_str(), 0755) == 0);
	std::string zone;
	for (int i = 0; i < dns_hosts; i++)
		zone += "  local-data: \"h" + std::to_string(i) + ".corpus.test. 3600 IN A 192.0.2." +
			std::to_string(i + 1) + "\"\n";
	zone += "  local-data: \"corpus.test. 3600 IN TXT \\\"pmthreads corpus\\\"\"\n"
		"  local-data: \"mail.corpus.test. 3600 IN MX 10 h1.corpus.test.\"\n";
	const int conns = 2;
	session pipelined;
	for (size_t c = 0; c < conns; c++)
		pipelined.requests.push_back(dns_client_queries(c));
	pipelined.complete = [](const std::string &r) { return (int)dns_messages(r).size() >= dns_queries; };
	compare_server(
		"unbound",
		[&](int port, const std::string &dir) {
			std::string cfg = dir + "/unbound.conf";
			write_file(cfg, "server:\n"
					"  interface: 127.0.0.1\n"
					"  port: " + std::to_string(port) + "\n"
					"  do-ip6: no\n"
					"  num-threads: 2\n"
					"  username: \"\"\n"
					"  chroot: \"\"\n"
					"  directory: \"" + dir + "\"\n"
					"  pidfile: \"\"\n"
					"  use-syslog: no\n"
					"  logfile: \"\"\n"
					"  verbosity: 1\n"
					"  module-config: \"iterator\"\n"
					"  local-zone: \"corpus.test.\" static\n" +
					zone +
					"remote-control:\n"
					"  control-enable: no\n");
			return std::vector<std::string>{ unbound, "-d", "-p", "-c", cfg };
		},
		{ pipelined }, dns_in_id_order,
		[&](const server_run &native) {
			for (size_t c = 0; c < conns; c++) {
				std::vector<std::string> ms = dns_messages(native.replies[0][c]);
				INFO("connection " << c);
				REQUIRE(ms.size() == (size_t)dns_queries);
				int answered = 0, nx = 0, nodata = 0;
				for (const std::string &m : ms) {
					if (dns_rcode(m) == 3)
						nx++;
					else if (dns_rcode(m) == 0 && dns_answers(m) > 0)
						answered++;
					else if (dns_rcode(m) == 0)
						nodata++;
				}
				CHECK(answered == 80);
				CHECK(nx == 10);
				CHECK(nodata == 10);
			}
			CHECK(how_it_ended(native.wait_status) == "exit 0");
		},
		true);
}
