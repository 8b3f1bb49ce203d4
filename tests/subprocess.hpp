/* SPDX-License-Identifier: BSD-3-Clause */
// Running a test program as a subprocess, with a controlled environment, and
// reading what it printed: shared by the tests that start programs under
// LD_PRELOAD and the tool (test_preload, test_checker, test_persist_e2e,
// test_recover_tool).
#ifndef PMT_TESTS_SUBPROCESS_HPP
#define PMT_TESTS_SUBPROCESS_HPP

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace subprocess {

struct run_result {
	int status = -1;	// exit status, or 128 + signal
	int wait_status = 0;	// as waitpid reported it
	std::string out, err;
	bool exited_ok() const { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }
	bool killed() const { return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL; }
	// For failure messages: how it ended, stderr, the start of stdout.
	std::string describe() const
	{
		std::ostringstream s;
		if (WIFEXITED(wait_status))
			s << "exit " << WEXITSTATUS(wait_status);
		else if (WIFSIGNALED(wait_status))
			s << "signal " << WTERMSIG(wait_status);
		s << "\n--- stderr:\n" << err << "--- stdout (first 2000 bytes):\n" << out.substr(0, 2000);
		return s.str();
	}
};

// A variable that meson test sets for the test (a path to a built file).
inline std::string env_or_fail(const char *name)
{
	const char *v = getenv(name);
	if (v == nullptr)
		FAIL("meson test sets " << name);
	return v;
}

inline std::string read_fd(int fd)
{
	std::string s;
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		s.append(buf, (size_t)n);
	return s;
}

// A child started by spawn: its pid, the read end of its stdout and the file
// its stderr goes to (a file, so that neither can fill up and block it).
struct spawned {
	pid_t pid;
	int out_fd;
	int err_fd;
};

// The strings of v as the NULL-terminated array exec takes (pointing into v).
inline std::vector<char *> c_strings(const std::vector<std::string> &v)
{
	std::vector<char *> p;
	for (auto &s : v)
		p.push_back(const_cast<char *>(s.c_str()));
	p.push_back(nullptr);
	return p;
}

// Start argv with env as its environment.
inline spawned spawn_env(const std::vector<std::string> &argv, const std::vector<std::string> &env)
{
	std::vector<char *> envp = c_strings(env), args = c_strings(argv);

	char errpath[] = "/tmp/pmt-test-err-XXXXXX";
	int errfd = mkstemp(errpath);
	REQUIRE(errfd >= 0);
	unlink(errpath);
	int out[2];
	REQUIRE(pipe(out) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(errfd, 2);
		close(out[0]);
		close(out[1]);
		// The suite's launcher may have ignored these (nohup: SIGHUP; a
		// shell's background job: SIGINT, SIGQUIT), and exec keeps an
		// ignored disposition: a child starts with the defaults, as under
		// CI, whoever started the suite (test_ending's SIGHUP case hung
		// under nohup).
		for (int sig : { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE }) {
			struct sigaction cur;
			if (sigaction(sig, nullptr, &cur) == 0 && cur.sa_handler == SIG_IGN)
				signal(sig, SIG_DFL);
		}
		execve(args[0], args.data(), envp.data());
		_exit(127);
	}
	close(out[1]);
	return { pid, out[0], errfd };
}

// Start argv with the current environment minus PMTHREADS_* / LD_PRELOAD,
// plus extra.
inline spawned spawn(const std::vector<std::string> &argv,
		     const std::map<std::string, std::string> &extra)
{
	std::vector<std::string> env;
	for (char **e = environ; *e != nullptr; e++)
		if (strncmp(*e, "PMTHREADS_", 10) != 0 && strncmp(*e, "LD_PRELOAD=", 11) != 0)
			env.emplace_back(*e);
	for (auto &kv : extra)
		env.push_back(kv.first + "=" + kv.second);
	return spawn_env(argv, env);
}

// Start argv with the current environment as it is (a test that set
// PMTHREADS_* for its children), extra added over it.
inline spawned spawn_inheriting(const std::vector<std::string> &argv,
				const std::map<std::string, std::string> &extra)
{
	std::vector<std::string> env;
	for (char **e = environ; *e != nullptr; e++) {
		const char *eq = strchr(*e, '=');
		if (eq == nullptr || extra.count(std::string(*e, (size_t)(eq - *e))) == 0)
			env.emplace_back(*e);
	}
	for (auto &kv : extra)
		env.push_back(kv.first + "=" + kv.second);
	return spawn_env(argv, env);
}

// Wait for a spawned child (its stdout already read and closed by the
// caller) and collect its status and stderr into r.
inline void finish(const spawned &c, run_result &r)
{
	int st = 0;
	REQUIRE(waitpid(c.pid, &st, 0) == c.pid);
	r.wait_status = st;
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	lseek(c.err_fd, 0, SEEK_SET);
	r.err = read_fd(c.err_fd);
	close(c.err_fd);
}

// Run argv (see spawn) to its end.
inline run_result run(const std::vector<std::string> &argv,
		      const std::map<std::string, std::string> &extra)
{
	spawned c = spawn(argv, extra);
	run_result r;
	r.out = read_fd(c.out_fd);
	close(c.out_fd);
	finish(c, r);
	return r;
}

inline std::string slurp(const std::string &path)
{
	std::ifstream f(path);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

// Where the value of "key" starts in a JSON text, pretty ("key": v, the
// statistics report) or compact ("key":v, the tools' --json); npos when
// absent.
inline size_t json_value_at(const std::string &json, const std::string &key)
{
	auto at = json.find("\"" + key + "\":");
	if (at == std::string::npos)
		return std::string::npos;
	at += key.size() + 3;
	while (at < json.size() && json[at] == ' ')
		at++;
	return at;
}

// The unsigned number after "key": in the stats JSON (-1 when absent).
inline long long json_number(const std::string &json, const std::string &key)
{
	auto at = json_value_at(json, key);
	if (at == std::string::npos)
		return -1;
	return std::atoll(json.c_str() + at);
}

// The raw value text after "key": (up to the comma, closing brace or line
// end).
inline std::string json_text(const std::string &json, const std::string &key)
{
	auto start = json_value_at(json, key);
	if (start == std::string::npos)
		return "";
	auto end = json.find_first_of(",}\n", start);
	return json.substr(start, end - start);
}

// A temporary directory, removed with everything in it.
struct scratch_dir {
	std::string path;
	scratch_dir()
	{
		char t[] = "/tmp/pmt-test-XXXXXX";
		REQUIRE(mkdtemp(t) != nullptr);
		path = t;
	}
	~scratch_dir() { (void)!system(("rm -rf '" + path + "'").c_str()); }
};

} // namespace subprocess

#endif
