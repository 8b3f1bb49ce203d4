// SPDX-License-Identifier: BSD-3-Clause
// Trust at the edges (issue 39): where the pool meets the world.
//   - errno: nvmalloc and nvrecover say why the pool could not be had;
//   - identity: a pool file deleted, renamed or replaced under a running
//     program stops its acknowledgements, loudly, and no second process runs
//     on a new file at the same path meanwhile;
//   - wrappers: under a plain LD_PRELOAD, timeout, nice, env and `sh -c 'exec
//     PROG'` leave the pool to the program they run, and a program started by
//     a launcher that took its pool is told so at the default verbosity;
//   - privilege ([root], run as the trust-root test): a set-user-ID program
//     never opens a pool its caller planted, keeps its own where the caller
//     cannot read it, and without a safe place runs unpersisted, saying so.
// tests/progs/trust.c is the program.
#include "pool_medium.hpp"
#include "subprocess.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <string>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace {
using namespace subprocess;

struct setup {
	std::string prog = env_or_fail("PMT_TRUST");
	std::string lib = env_or_fail("PMT_LIB");
	pool_medium::dir dir{ "trust" };
	std::string pool = dir.file("trust.pool");
	std::map<std::string, std::string> env(const std::string &pool_path) const
	{
		std::map<std::string, std::string> e = { { "PMTHREADS_POOL", pool_path },
							  { "PMTHREADS_INTERVAL_MS", "20" } };
		pool_medium::child_env(e);
		return e;
	}
	std::map<std::string, std::string> env() const { return env(pool); }
};

// Read c's stdout until a line starting with prefix has arrived (or 20 s
// pass); everything read so far is appended to *all.
bool read_until(const spawned &c, const std::string &prefix, std::string *all)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		size_t at = 0;
		while ((at = all->find(prefix, at)) != std::string::npos) {
			if ((at == 0 || (*all)[at - 1] == '\n') && all->find('\n', at) != std::string::npos)
				return true;
			at++;
		}
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			return false;
		struct pollfd p = { c.out_fd, POLLIN, 0 };
		if (poll(&p, 1, 1000) <= 0)
			continue;
		char buf[4096];
		ssize_t n = read(c.out_fd, buf, sizeof(buf));
		if (n <= 0)
			return false;
		all->append(buf, (size_t)n);
	}
}

run_result finish_reading(const spawned &c, std::string so_far)
{
	run_result r;
	r.out = so_far + read_fd(c.out_fd);
	close(c.out_fd);
	finish(c, r);
	return r;
}

// The words of the line of out that starts with prefix.
std::vector<std::string> line_words(const std::string &out, const std::string &prefix)
{
	std::istringstream in(out);
	std::string line;
	while (std::getline(in, line))
		if (line.rfind(prefix, 0) == 0) {
			std::istringstream w(line);
			std::vector<std::string> words;
			std::string word;
			while (w >> word)
				words.push_back(word);
			return words;
		}
	return {};
}

// What must not change of a planted file: its size, times and first bytes.
std::string fingerprint(const std::string &path)
{
	struct stat st;
	if (stat(path.c_str(), &st) != 0)
		return "missing";
	std::ostringstream s;
	s << st.st_size << ' ' << st.st_mtim.tv_sec << '.' << st.st_mtim.tv_nsec << ' '
	  << st.st_ctim.tv_sec << '.' << st.st_ctim.tv_nsec << ' ';
	std::ifstream f(path, std::ios::binary);
	std::vector<char> head(1 << 16);
	f.read(head.data(), (std::streamsize)head.size());
	s << std::string(head.data(), (size_t)f.gcount());
	return s.str();
}
} // namespace

// ---- errno (item 7) ----

TEST_CASE("nvmalloc and nvrecover give the cause when the pool cannot be had", "[trust][errno]")
{
	setup s;
	SECTION("ENOENT: the pool's directory does not exist")
	{
		run_result r = run({ s.prog, "open" }, s.env(s.dir.file("no/such/dir/p.pool")));
		INFO(r.describe());
		CHECK(r.out.find("errno ENOENT") != std::string::npos);
		CHECK(r.out.find("recover errno ENOENT") != std::string::npos);
	}
	SECTION("EINVAL: a malformed variable")
	{
		auto env = s.env();
		env["PMTHREADS_INTERVAL_MS"] = "soon";
		run_result r = run({ s.prog, "open" }, env);
		INFO(r.describe());
		CHECK(r.out.find("errno EINVAL") != std::string::npos);
		CHECK(r.err.find("PMTHREADS_INTERVAL_MS") != std::string::npos);
	}
	SECTION("EBADMSG: the file is no pool, and is left as it was")
	{
		{
			std::ofstream f(s.pool, std::ios::binary);
			f << std::string(8192, 'x');
		}
		std::string before = fingerprint(s.pool);
		run_result r = run({ s.prog, "open" }, s.env());
		INFO(r.describe());
		CHECK(r.out.find("errno EBADMSG") != std::string::npos);
		CHECK(fingerprint(s.pool) == before);
	}
	SECTION("EBUSY: another process holds the pool")
	{
		spawned holder = spawn({ s.prog, "lose", "none", s.pool, "3000" }, s.env());
		std::string so_far;
		REQUIRE(read_until(holder, "tampered", &so_far));
		run_result r = run({ s.prog, "open" }, s.env());
		INFO(r.describe());
		CHECK(r.out.find("errno EBUSY") != std::string::npos);
		kill(holder.pid, SIGKILL);
		finish_reading(holder, so_far);
	}
	SECTION("EPERM: not the program PMTHREADS_PROGRAM names, and told so")
	{
		auto env = s.env();
		env["PMTHREADS_PROGRAM"] = "/bin/true";
		run_result r = run({ s.prog, "open" }, env);
		INFO(r.describe());
		CHECK(r.out.find("errno EPERM") != std::string::npos);
		CHECK(r.err.find("warning:") != std::string::npos);
		CHECK(r.err.find("although it calls the pmthreads API") != std::string::npos);
	}
	SECTION("a pool that opens: no error")
	{
		run_result r = run({ s.prog, "open" }, s.env());
		INFO(r.describe());
		CHECK(r.out == "ok\nrecover ok\n");
	}
}

TEST_CASE("EROFS and ENOSPC: a read-only and a full file system under the pool", "[trust][mounts]")
{
	setup s;
	std::string mnt = s.dir.file("mnt");
	REQUIRE(mkdir(mnt.c_str(), 0755) == 0);
	// In a mount namespace of its own, so nothing outlives the test.
	std::string script = "mount -t tmpfs -o ro,size=1m none '" + mnt + "' && '" + s.prog +
			     "' open && mount -o remount,rw,size=64k '" + mnt + "' && '" + s.prog +
			     "' open";
	auto env = s.env(mnt + "/p.pool");
	env["PMTHREADS_POOL_SIZE"] = "64M";
	run_result r = run({ "/usr/bin/unshare", "-m", "/bin/sh", "-c", script }, env);
	INFO(r.describe());
	CHECK(r.out == "errno EROFS\nrecover errno EROFS\nerrno ENOSPC\nrecover errno ENOSPC\n");
}

// ---- the pool's identity (item 2) ----

TEST_CASE("a pool file deleted, renamed or replaced under a running program stops its "
	  "acknowledgements", "[trust][identity]")
{
	setup s;
	const char *how = nullptr;
	const char *said = nullptr;
	SECTION("rm") { how = "rm", said = "was deleted"; }
	SECTION("rename") { how = "rename", said = "was renamed"; }
	SECTION("replace") { how = "replace", said = "was replaced"; }
	run_result r = run({ s.prog, "lose", how, s.pool, "0" }, s.env());
	INFO(r.describe());
	REQUIRE(r.status == 0);
	auto after = line_words(r.out, "after ");
	REQUIRE(after.size() == 4);
	CHECK(after[1] == "ESTALE");
	// At most the epoch whose write-back was under way when the name went.
	CHECK(std::stoull(after[3]) <= std::stoull(after[2]) + 1);
	CHECK(r.err.find(std::string("the pool file ") + s.pool + " " + said) != std::string::npos);
	CHECK(r.err.find("WITHOUT persistence") != std::string::npos);
}

TEST_CASE("a pool whose directory, or a directory above it, is renamed under a running "
	  "program stops its acknowledgements; moved back, it is recovered", "[trust][identity]")
{
	setup s;
	const char *how = nullptr;
	std::string pool, moved;
	SECTION("its directory") {
		how = "mvdir";
		pool = s.dir.file("app/trust.pool");
		moved = s.dir.file("app.moved");
		REQUIRE(mkdir(s.dir.file("app").c_str(), 0700) == 0);
	}
	SECTION("a directory above it") {
		how = "mvup";
		pool = s.dir.file("up/app/trust.pool");
		moved = s.dir.file("up.moved/app");
		REQUIRE(mkdir(s.dir.file("up").c_str(), 0700) == 0);
		REQUIRE(mkdir(s.dir.file("up/app").c_str(), 0700) == 0);
	}
	run_result r = run({ s.prog, "lose", how, pool, "0" }, s.env(pool));
	INFO(r.describe());
	REQUIRE(r.status == 0);
	auto after = line_words(r.out, "after ");
	REQUIRE(after.size() == 4);
	CHECK(after[1] == "ESTALE");
	// At most the epoch whose write-back was under way when the name went.
	CHECK(std::stoull(after[3]) <= std::stoull(after[2]) + 1);
	// Said once, with where the directory is now (the path the kernel
	// gives: the medium's directory may be reached through a symlink).
	auto said = "the pool file " + pool + " was moved with its directory ";
	auto at = r.err.find(said);
	REQUIRE(at != std::string::npos);
	CHECK(r.err.find(said, at + 1) == std::string::npos);
	CHECK(r.err.find(moved.substr(moved.rfind('/', moved.size() - 5))) != std::string::npos);
	CHECK(r.err.find("WITHOUT persistence") != std::string::npos);
	// What the message says to do: move it back.
	auto mv = r.err.find("move it back with `");
	REQUIRE(mv != std::string::npos);
	mv += strlen("move it back with `");
	std::string cmd = r.err.substr(mv, r.err.find('`', mv) - mv);
	INFO(cmd);
	REQUIRE(system(cmd.c_str()) == 0);
	run_result next = run({ s.prog, "count" }, s.env(pool));
	INFO(next.describe());
	// The first run's counter was 1 when it synced, before the move.
	CHECK(next.out == "counter 2\n");
}

TEST_CASE("a relative pool path and a later chdir leave the pool's identity alone",
	  "[trust][identity]")
{
	setup s;
	run_result r = run({ "/bin/sh", "-c", "cd '" + s.dir.path + "' && exec '" + s.prog +
					       "' lose chdir trust.pool 0" },
			   s.env("trust.pool"));
	INFO(r.describe());
	auto after = line_words(r.out, "after ");
	REQUIRE(after.size() == 4);
	CHECK(after[1] == "ok");
	CHECK(std::stoull(after[3]) > std::stoull(after[2]));
	CHECK(r.err.empty());
	struct stat st;
	CHECK(stat(s.pool.c_str(), &st) == 0);
}

TEST_CASE("a chroot after the open leaves the pool's identity alone (the check cannot tell, "
	  "and does not fire)", "[trust][identity][userns]")
{
	setup s;
	// Root in a user namespace of its own, to chroot into the pool's
	// directory: no path leads where it did, and there is no /proc.
	run_result r = run({ "/usr/bin/unshare", "-r", s.prog, "lose", "chroot", s.pool, "0" },
			   s.env());
	INFO(r.describe());
	auto after = line_words(r.out, "after ");
	REQUIRE(after.size() == 4);
	CHECK(after[1] == "ok");
	CHECK(std::stoull(after[3]) > std::stoull(after[2]));
	CHECK(r.err.empty());
}

// Nothing written after the rm: no version record is due, so only the check
// after every epoch (runtime.c's after_epoch) can tell a waiting sync that the
// pool is gone; without it sync returned 0 and the program learnt it at exit.
TEST_CASE("a program that writes nothing after its pool file is deleted learns it at its next "
	  "sync", "[trust][identity]")
{
	setup s;
	run_result r = run({ s.prog, "lose", "rm", s.pool, "0", "idle" }, s.env());
	INFO(r.describe());
	REQUIRE(r.status == 0);
	auto after = line_words(r.out, "after ");
	REQUIRE(after.size() == 4);
	CHECK(after[1] == "ESTALE");
	CHECK(after[3] == after[2]);
	CHECK(r.err.find("the pool file " + s.pool + " was deleted") != std::string::npos);
}

// A fork child is never persisted (issue 39 item 11): its durable epoch is 0
// for good, also when the parent had latched a write-back error (here ESTALE)
// before the fork -- without runtime_durable_epoch's fork-child rule the child
// answered the parent's last durable epoch, inherited with the error.
TEST_CASE("a fork child of a program whose pool was lost has nothing durable", "[trust][identity]")
{
	setup s;
	run_result r = run({ s.prog, "lose", "rm", s.pool, "0", "fork" }, s.env());
	INFO(r.describe());
	REQUIRE(r.status == 0);
	auto after = line_words(r.out, "after ");
	REQUIRE(after.size() == 4);
	CHECK(after[1] == "ESTALE");
	REQUIRE(std::stoull(after[2]) > 0);
	auto child = line_words(r.out, "child ");
	REQUIRE(child.size() == 3);
	CHECK(child[1] == strerrorname_np(ENOTSUP));
	CHECK(child[2] == "0");
}

TEST_CASE("an untouched pool keeps acknowledging (the identity test's control)",
	  "[trust][identity]")
{
	setup s;
	run_result r = run({ s.prog, "lose", "none", s.pool, "0" }, s.env());
	INFO(r.describe());
	auto after = line_words(r.out, "after ");
	REQUIRE(after.size() == 4);
	CHECK(after[1] == "ok");
	CHECK(std::stoull(after[3]) > std::stoull(after[2]));
	CHECK(r.err.empty());
}

TEST_CASE("no second process runs at the path of a pool deleted under a live one; after it, a "
	  "copy made from the live one is recovered", "[trust][identity]")
{
	setup s;
	spawned first = spawn({ s.prog, "lose", "rm", s.pool, "1500" }, s.env());
	std::string so_far;
	REQUIRE(read_until(first, "after ", &so_far));
	run_result second = run({ s.prog, "count" }, s.env());
	{
		INFO(second.describe());
		CHECK(second.out.find("errno EBUSY") != std::string::npos);
		CHECK(second.err.find("in use by process " + std::to_string(first.pid)) !=
		      std::string::npos);
		struct stat st;
		CHECK(stat(s.pool.c_str(), &st) != 0);	// nothing made at the path
	}
	// What the message says to do: copy the file the first one holds back.
	std::string err_now;
	{
		lseek(first.err_fd, 0, SEEK_SET);
		err_now = read_fd(first.err_fd);
	}
	INFO(err_now);
	auto at = err_now.find("cp /proc/");
	REQUIRE(at != std::string::npos);
	std::string cmd = err_now.substr(at, err_now.find('`', at) - at);
	REQUIRE(system(cmd.c_str()) == 0);
	run_result r1 = finish_reading(first, so_far);
	INFO(r1.describe());
	run_result third = run({ s.prog, "count" }, s.env());
	INFO(third.describe());
	// The first run's counter was 1 when it synced, before the rm.
	CHECK(third.out == "counter 2\n");
}

// The pool's name lock, as pool_lock.c names it, bound by this process
// (which is no pmthreads program): a squatter of the pool's path.
struct name_squatter {
	int fd = -1;
	explicit name_squatter(const std::string &pool)
	{
		std::string dir = pool.substr(0, pool.rfind('/')), name = pool.substr(pool.rfind('/') + 1);
		struct stat d;
		REQUIRE(stat(dir.c_str(), &d) == 0);
		uint64_t h = 0xcbf29ce484222325ULL;	// FNV-1a of the file name
		for (unsigned char c : name)
			h = (h ^ c) * 0x100000001b3ULL;
		char key[100];
		snprintf(key, sizeof(key), "pmthreads-pool/%llx/%llx/%016llx",
			 (unsigned long long)d.st_dev, (unsigned long long)d.st_ino,
			 (unsigned long long)h);
		struct sockaddr_un a = {};
		a.sun_family = AF_UNIX;
		memcpy(a.sun_path + 1, key, strlen(key));
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		REQUIRE(fd >= 0);
		REQUIRE(bind(fd, (struct sockaddr *)&a,
			     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(key))) == 0);
		REQUIRE(listen(fd, 1) == 0);
	}
	~name_squatter() { close(fd); }
};

TEST_CASE("a process of the pool's user that binds its name lock without holding the pool is "
	  "passed over; one that has its directory or a deleted pool of its name open is not",
	  "[trust][identity][squatter]")
{
	setup s;
	name_squatter squat(s.pool);
	std::string me = std::to_string(getpid());
	SECTION("holding nothing of the pool: passed over, with a warning") {
		run_result r = run({ s.prog, "count" }, s.env());
		INFO(r.describe());
		CHECK(r.out == "counter 1\n");
		CHECK(r.err.find("is held by process " + me + " (") != std::string::npos);
		CHECK(r.err.find("passed over") != std::string::npos);
		// The pool's own lock still guards it: and it is found again.
		run_result again = run({ s.prog, "count" }, s.env());
		INFO(again.describe());
		CHECK(again.out == "counter 2\n");
	}
	SECTION("its directory open: refused, naming it") {
		int dfd = open(s.dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
		REQUIRE(dfd >= 0);
		run_result r = run({ s.prog, "count" }, s.env());
		close(dfd);
		INFO(r.describe());
		CHECK(r.out.find("errno EBUSY") != std::string::npos);
		CHECK(r.err.find("in use by process " + me + " (") != std::string::npos);
		CHECK(r.err.find("its descriptor " + std::to_string(dfd) + ": ") != std::string::npos);
		struct stat st;
		CHECK(stat(s.pool.c_str(), &st) != 0);	// nothing made at the path
	}
	SECTION("a deleted file of the pool's name open: refused") {
		int ffd = open(s.pool.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		REQUIRE(ffd >= 0);
		REQUIRE(unlink(s.pool.c_str()) == 0);
		run_result r = run({ s.prog, "count" }, s.env());
		close(ffd);
		INFO(r.describe());
		CHECK(r.out.find("errno EBUSY") != std::string::npos);
		CHECK(r.err.find("in use by process " + me + " (") != std::string::npos);
		CHECK(r.err.find("trust.pool (deleted)") != std::string::npos);
	}
}

// Whether process pid runs (not ended, not a zombie: a zombie has closed
// its descriptors).
bool running(pid_t pid)
{
	std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
	std::string line;
	if (!std::getline(f, line))
		return false;
	auto paren = line.rfind(')');
	return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

TEST_CASE("a raw-clone child left holding the pool's name is named when it refuses an opener",
	  "[trust][identity][squatter]")
{
	setup s;
	// Read up to its line only: the child holds the pipe too.
	spawned first = spawn({ s.prog, "clone", "3000" }, s.env());
	std::string so_far;
	REQUIRE(read_until(first, "cloned ", &so_far));
	INFO(so_far);
	auto cloned = line_words(so_far, "cloned ");
	REQUIRE(cloned.size() == 2);
	pid_t child = (pid_t)std::stol(cloned[1]);
	int st = 0;
	REQUIRE(waitpid(first.pid, &st, 0) == first.pid);	// the one that took the name
	CHECK(WIFEXITED(st));
	REQUIRE(running(child));
	// The process that took the name has ended; its child holds it, with
	// the pool's directory and file.
	run_result second = run({ s.prog, "count" }, s.env());
	{
		INFO(second.describe());
		CHECK(second.out == "errno EBUSY\n");
		CHECK(second.err.find("in use by process " + cloned[1] + " (prog_trust)") !=
		      std::string::npos);
		CHECK(second.err.find("its descriptor ") != std::string::npos);
	}
	for (int i = 0; i < 200 && running(child); i++)
		usleep(50000);
	REQUIRE(!running(child));
	close(first.out_fd);
	close(first.err_fd);
	run_result third = run({ s.prog, "count" }, s.env());
	INFO(third.describe());
	CHECK(third.out == "counter 2\n");
}

// ---- a sync's timeout names its cause (item 5) ----

// pmthreads_sync's timeout measures a stall, and its message names the cause
// it finds: a FASE the gate waits for, or none.  Here none: every thread but
// the program's main one (the epoch thread and the runtime's other threads)
// is stopped by ptrace while main, holding no lock, syncs with a 200 ms
// bound.  The epoch interval is long, so the epoch thread is stopped idle,
// not inside an epoch (a write-back under way is waited for).  Without the
// stall detector's answer the message blamed a lock nobody held.
TEST_CASE("a sync that times out while no thread holds a lock blames no lock", "[trust][ptrace]")
{
	setup s;
	auto env = s.env();
	env["PMTHREADS_INTERVAL_MS"] = "100000";
	env["PMTHREADS_SYNC_TIMEOUT_MS"] = "200";
	std::string go = s.dir.file("go");
	spawned c = spawn({ s.prog, "stallsync", go }, env);
	std::string so_far;
	REQUIRE(read_until(c, "ready", &so_far));
	std::vector<pid_t> stopped;
	std::string tasks = "/proc/" + std::to_string(c.pid) + "/task";
	DIR *d = opendir(tasks.c_str());
	REQUIRE(d != nullptr);
	while (struct dirent *e = readdir(d)) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || tid == c.pid)
			continue;
		// A runtime thread that ends meanwhile (the restorer's
		// background pass) is gone, not running: passed over.
		if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
			if (errno == ESRCH)
				continue;
			FAIL("cannot seize thread " << tid << ": " << strerror(errno));
		}
		stopped.push_back(tid);
		int st = 0;
		if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0 && errno == ESRCH)
			continue;
		if (waitpid(tid, &st, __WALL) != tid)
			FAIL("cannot stop thread " << tid << ": " << strerror(errno));
	}
	closedir(d);
	REQUIRE(!stopped.empty());	// the epoch thread at least
	{
		std::ofstream f(go);
	}
	bool synced = read_until(c, "sync ", &so_far);
	for (pid_t tid : stopped)
		ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
	run_result r = finish_reading(c, so_far);
	INFO(r.describe());
	REQUIRE(synced);
	auto sync = line_words(r.out, "sync ");
	REQUIRE(sync.size() == 2);
	CHECK(sync[1] == "ETIMEDOUT");
	CHECK(r.err.find("no thread was seen holding a lock") != std::string::npos);
	CHECK(r.err.find("holds a lock") == std::string::npos);
}

// ---- wrappers under a plain LD_PRELOAD (item 9) ----

TEST_CASE("under a plain LD_PRELOAD, timeout, nice, env and sh -c 'exec' leave the pool to the "
	  "program", "[trust][wrapper]")
{
	setup s;
	auto env = s.env();
	env["LD_PRELOAD"] = s.lib;
	env["PMTHREADS_HEAP"] = "malloc";
	std::vector<std::vector<std::string>> commands = {
		{ "/usr/bin/timeout", "60", s.prog, "count" },
		{ "/usr/bin/nice", "-n", "1", s.prog, "count" },
		{ "/usr/bin/env", "A=1", s.prog, "count" },
		{ "/bin/sh", "-c", "exec " + s.prog + " count" },
	};
	int n = 0;
	for (auto &cmd : commands) {
		run_result r = run(cmd, env);
		INFO(cmd[0] << "\n" << r.describe());
		CHECK(r.status == 0);
		CHECK(r.out == "counter " + std::to_string(++n) + "\n");
		CHECK(r.err.empty());
	}
}

TEST_CASE("a program whose launcher took its pool is told at the default verbosity",
	  "[trust][wrapper]")
{
	setup s;
	auto env = s.env();
	env["LD_PRELOAD"] = s.lib;
	env["PMTHREADS_HEAP"] = "malloc";
	// A shell that does more than exec is the target itself.
	run_result r = run({ "/bin/sh", "-c", s.prog + " count; true" }, env);
	INFO(r.describe());
	CHECK(r.out.find("errno EBUSY") != std::string::npos);
	CHECK(r.err.find("warning:") != std::string::npos);
	CHECK(r.err.find("WITHOUT persistence") != std::string::npos);
	CHECK(r.err.find("pmthreads run") != std::string::npos);
}

// ---- privilege (item 1): the trust-root test, as root ----

namespace {
const uid_t caller = 64000;	// no other test runs as these
const uid_t other_user = 64002;

// argv run as the unprivileged caller, with env -u HOME -u XDG_DATA_HOME.
std::vector<std::string> as_caller(const std::vector<std::string> &argv)
{
	std::vector<std::string> a = { "/usr/bin/setpriv", "--reuid=" + std::to_string(caller),
				       "--regid=" + std::to_string(caller), "--clear-groups",
				       "/usr/bin/env", "-u", "HOME", "-u", "XDG_DATA_HOME" };
	a.insert(a.end(), argv.begin(), argv.end());
	return a;
}

struct privileged {
	setup s;
	scratch_dir bin;	// in /tmp: /dev/shm may be mounted nosuid
	std::string name = "ptrust-" + std::to_string(getpid());
	std::string plain = bin.path + "/plain/" + name;	// the caller's own copy
	std::string suid = bin.path + "/suid/" + name;	// the privileged one
	std::string planted = "/tmp/pmthreads-" + std::to_string(caller) + "/" + name + ".pool";
	privileged()
	{
		REQUIRE(chmod(s.dir.path.c_str(), 0755) == 0);
		REQUIRE(chmod(bin.path.c_str(), 0755) == 0);
		for (const char *d : { "/plain", "/suid" })
			REQUIRE(mkdir((bin.path + d).c_str(), 0755) == 0);
		REQUIRE(system(("cp '" + s.prog + "' '" + plain + "' && cp '" + s.prog + "' '" + suid +
				"'").c_str()) == 0);
		(void)!system(("rm -rf /tmp/pmthreads-" + std::to_string(caller)).c_str());
	}
	~privileged()
	{
		(void)!system(("rm -rf /tmp/pmthreads-" + std::to_string(caller)).c_str());
		unlink(secure_pool(0).c_str());
		(void)!system(("rm -rf /var/lib/pmthreads/" + std::to_string(other_user)).c_str());
	}
	std::string secure_pool(uid_t euid) const
	{
		return "/var/lib/pmthreads/" + std::to_string(euid) + "/" + name + ".pool";
	}
	// The environment the caller chooses: all of it is ignored under
	// secure execution, but not by its own unprivileged copy.
	std::map<std::string, std::string> env() const
	{
		std::map<std::string, std::string> e = { { "PMTHREADS_INTERVAL_MS", "20" } };
		pool_medium::child_env(e);
		return e;
	}
};
} // namespace

TEST_CASE("a set-user-ID program never opens a pool its caller planted, and keeps its own "
	  "where the caller cannot read it", "[trust][root]")
{
	privileged p;
	REQUIRE(chown(p.suid.c_str(), 0, 0) == 0);
	REQUIRE(chmod(p.suid.c_str(), 04755) == 0);
	// The caller's own copy, under the same name, makes the pool the old
	// library took: /tmp/pmthreads-<real uid>/<name>.pool, counter 3.
	for (int i = 1; i <= 3; i++) {
		run_result r = run(as_caller({ p.plain, "count" }), p.env());
		INFO(r.describe());
		REQUIRE(r.out == "counter " + std::to_string(i) + "\n");
	}
	std::string before = fingerprint(p.planted);
	REQUIRE(before != "missing");
	// The privileged program starts from its own pool, twice.
	for (int i = 1; i <= 2; i++) {
		run_result r = run(as_caller({ p.suid, "count" }), p.env());
		INFO(r.describe());
		CHECK(r.out == "counter " + std::to_string(i) + "\n");
		CHECK(r.err.empty());
	}
	CHECK(fingerprint(p.planted) == before);
	struct stat st;
	REQUIRE(stat(p.secure_pool(0).c_str(), &st) == 0);
	CHECK(st.st_uid == 0);
	CHECK((st.st_mode & 0777) == 0600);
	// The caller cannot read it.
	run_result cat = run(as_caller({ "/bin/cat", p.secure_pool(0) }), {});
	INFO(cat.describe());
	CHECK(cat.status != 0);
	CHECK(cat.out.empty());
}

TEST_CASE("a set-group-ID program has no safe place: it runs without persistence and says so",
	  "[trust][root]")
{
	privileged p;
	REQUIRE(chown(p.suid.c_str(), 0, 64001) == 0);
	REQUIRE(chmod(p.suid.c_str(), 02755) == 0);
	run_result r = run(as_caller({ p.suid, "count" }), p.env());
	INFO(r.describe());
	CHECK(r.out == "errno EACCES\n");
	CHECK(r.err.find("error:") != std::string::npos);
	CHECK(r.err.find("WITHOUT persistence") != std::string::npos);
	CHECK(r.err.find("its effective user is its caller's") != std::string::npos);
}

TEST_CASE("a set-user-ID program's pool directory must be its effective user's own, mode 0700",
	  "[trust][root]")
{
	privileged p;
	REQUIRE(chown(p.suid.c_str(), other_user, 0) == 0);
	REQUIRE(chmod(p.suid.c_str(), 04755) == 0);
	// The first directory must exist, root's (the root test's run made it).
	REQUIRE(system("install -d -m 0711 -o root /var/lib/pmthreads") == 0);
	std::string own = "/var/lib/pmthreads/" + std::to_string(other_user);
	(void)!system(("rm -rf " + own).c_str());
	// Missing, and that user cannot make it: said, with the fix.
	run_result missing = run(as_caller({ p.suid, "count" }), p.env());
	{
		INFO(missing.describe());
		CHECK(missing.out == "errno EACCES\n");
		CHECK(missing.err.find("install -d -m 0700") != std::string::npos);
	}
	// Open to others: refused, nothing made in it.
	REQUIRE(mkdir(own.c_str(), 0777) == 0);
	REQUIRE(chmod(own.c_str(), 0777) == 0);
	REQUIRE(chown(own.c_str(), other_user, 0) == 0);
	run_result open = run(as_caller({ p.suid, "count" }), p.env());
	{
		INFO(open.describe());
		CHECK(open.out == "errno EACCES\n");
		CHECK(open.err.find("is not the effective user's own with mode 0700") !=
		      std::string::npos);
		struct stat st;
		CHECK(stat(p.secure_pool(other_user).c_str(), &st) != 0);
	}
	// The user's own, 0700: used.
	REQUIRE(chmod(own.c_str(), 0700) == 0);
	run_result good = run(as_caller({ p.suid, "count" }), p.env());
	INFO(good.describe());
	CHECK(good.out == "counter 1\n");
}

TEST_CASE("a set-user-ID program's own choice of pool is held to the same rules",
	  "[trust][root]")
{
	privileged p;
	REQUIRE(chown(p.suid.c_str(), 0, 0) == 0);
	REQUIRE(chmod(p.suid.c_str(), 04755) == 0);
	// A directory the caller owns, under a root-owned one: the caller could
	// swap the pool.
	std::string mine = p.bin.path + "/callers";
	REQUIRE(mkdir(mine.c_str(), 0700) == 0);
	REQUIRE(chown(mine.c_str(), caller, caller) == 0);
	run_result r = run(as_caller({ p.suid, "at", mine + "/x.pool", "count" }), p.env());
	{
		INFO(r.describe());
		CHECK(r.out == "errno EACCES\n");
		CHECK(r.err.find("the directory " + mine + " belongs to another user") !=
		      std::string::npos);
	}
	// Straight in a sticky, world-writable directory: the caller could have
	// made the file first.
	REQUIRE(chown(mine.c_str(), 0, 0) == 0);
	REQUIRE(chmod(mine.c_str(), 01777) == 0);
	run_result sticky = run(as_caller({ p.suid, "at", mine + "/x.pool", "count" }), p.env());
	{
		INFO(sticky.describe());
		CHECK(sticky.out == "errno EACCES\n");
		CHECK(sticky.err.find("others may write in the directory " + mine) !=
		      std::string::npos);
	}
	// Below it, in a directory of root's: nothing the caller can change.
	std::string safe = mine + "/safe";
	REQUIRE(mkdir(safe.c_str(), 0700) == 0);
	run_result good = run(as_caller({ p.suid, "at", safe + "/x.pool", "count" }), p.env());
	{
		INFO(good.describe());
		CHECK(good.out == "counter 1\n");
	}
	// A pool there that others may read: refused, not opened.
	REQUIRE(chmod((safe + "/x.pool").c_str(), 0644) == 0);
	run_result readable = run(as_caller({ p.suid, "at", safe + "/x.pool", "count" }), p.env());
	INFO(readable.describe());
	CHECK(readable.out == "errno EACCES\n");
	CHECK(readable.err.find("open to its group or others") != std::string::npos);
}

TEST_CASE("EACCES: an unprivileged program's pool in a directory it may not write",
	  "[trust][root]")
{
	privileged p;
	run_result r = run(as_caller({ p.plain, "open" }),
			   { { "PMTHREADS_POOL", p.s.dir.path + "/p.pool" } });
	INFO(r.describe());
	CHECK(r.out.find("errno EACCES") != std::string::npos);
}
