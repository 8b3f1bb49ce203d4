/* SPDX-License-Identifier: BSD-3-Clause */
// Tests for lib/prim/'s CPU part (cpu_<arch>.c, chosen by -Dprim): what a
// real SIGSEGV was, decoded from its signal frame, and the interrupted
// context's signal mask; and its file primitives.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "prim_probe.h"

namespace {

// The CPU part this build uses (lib/meson.build's prim_cpu).
std::string cpu_part()
{
	const char *c = getenv("PMT_PRIM_CPU");
	REQUIRE(c != nullptr);
	return c;
}

// What prim_fault_access must say for an access of the kind named: the
// generic part cannot tell any of them apart.
std::string expected(const char *kind)
{
	return cpu_part() == "generic" ? "unknown" : kind;
}

} // namespace

TEST_CASE("prim: a fault's access kind from the signal frame", "[prim]")
{
	INFO("cpu part: cpu_" << cpu_part() << ".c");
	int usr1 = 0;
	CHECK(probe_fault(PROBE_READ, &usr1) == expected("read"));
	CHECK(usr1 == 1);
	CHECK(probe_fault(PROBE_WRITE, &usr1) == expected("write"));
	CHECK(usr1 == 1);
	// Jumping into data must not look like a write (the mprotect tracker
	// would unprotect the page and fault again forever).
	CHECK(probe_fault(PROBE_EXEC, &usr1) == expected("exec"));
	CHECK(usr1 == 1);
}

namespace {

// A scratch file on tmpfs when there is one (it has SEEK_DATA), removed at
// scope exit.
struct scratch_file {
	std::string path;
	int fd = -1;
	scratch_file()
	{
		const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		std::string tmpl = std::string(base) + "/pmt-prim-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back('\0');
		fd = mkstemp(buf.data());
		REQUIRE(fd >= 0);
		path = buf.data();
	}
	~scratch_file()
	{
		close(fd);
		unlink(path.c_str());
	}
};

} // namespace

TEST_CASE("prim: whole reads and writes at an offset", "[prim][file]")
{
	scratch_file f;
	const char text[] = "0123456789";
	REQUIRE(prim_pwrite_all(f.fd, text, 10, 100) == 0);
	// The file position is not moved: a pwrite, not a write.
	CHECK(lseek(f.fd, 0, SEEK_CUR) == 0);
	struct stat st;
	REQUIRE(fstat(f.fd, &st) == 0);
	CHECK(st.st_size == 110);

	char got[16] = {};
	CHECK(prim_pread_all(f.fd, got, 10, 100) == 10);
	CHECK(std::string(got, 10) == "0123456789");
	// Past the end: what there is, not an error.
	memset(got, 0, sizeof(got));
	CHECK(prim_pread_all(f.fd, got, sizeof(got), 104) == 6);
	CHECK(std::string(got, 6) == "456789");
	CHECK(prim_pread_all(f.fd, got, sizeof(got), 500) == 0);

	// A negative offset is refused, not taken for "at the file position".
	errno = 0;
	CHECK(prim_pwrite_all(f.fd, text, 10, -1) == -1);
	CHECK(errno == EINVAL);
	REQUIRE(fstat(f.fd, &st) == 0);
	CHECK(st.st_size == 110);

	// Errors come back as -1 with errno.
	int pipe_fds[2];
	REQUIRE(pipe(pipe_fds) == 0);
	errno = 0;
	CHECK(prim_pwrite_all(pipe_fds[1], text, 10, 0) == -1);
	CHECK(errno == ESPIPE);
	errno = 0;
	CHECK(prim_pread_all(pipe_fds[0], got, 1, 0) == -1);
	CHECK(errno == ESPIPE);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
}

TEST_CASE("prim: the data extents of a sparse file", "[prim][file]")
{
	scratch_file f;
	const off_t ps = (off_t)sysconf(_SC_PAGESIZE);
	std::vector<char> page((size_t)ps, 'x');
	// Data at pages 2 and 5..6 of a 10-page file; holes elsewhere.
	REQUIRE(ftruncate(f.fd, 10 * ps) == 0);
	REQUIRE(prim_pwrite_all(f.fd, page.data(), page.size(), 2 * ps) == 0);
	REQUIRE(prim_pwrite_all(f.fd, page.data(), page.size(), 5 * ps) == 0);
	REQUIRE(prim_pwrite_all(f.fd, page.data(), page.size(), 6 * ps) == 0);

	off_t start = -1, stop = -1;
	int r = prim_next_data(f.fd, 0, 10 * ps, &start, &stop);
	REQUIRE(r != 0);
	if (r < 0) {
		// Nothing to find extents with; what prim_next_data then says is
		// the pool's cautious answer (everything data), checked by its
		// callers' tests.
		WARN("the file system under " << f.path << " has no SEEK_DATA");
		return;
	}
	CHECK(start == 2 * ps);
	CHECK(stop == 3 * ps);
	CHECK(prim_next_data(f.fd, stop, 10 * ps, &start, &stop) == 1);
	CHECK(start == 5 * ps);
	CHECK(stop == 7 * ps);
	CHECK(prim_next_data(f.fd, stop, 10 * ps, &start, &stop) == 0);
	// An extent that runs past end is cut at end; one beyond it is none.
	CHECK(prim_next_data(f.fd, 4 * ps, 6 * ps, &start, &stop) == 1);
	CHECK(start == 5 * ps);
	CHECK(stop == 6 * ps);
	CHECK(prim_next_data(f.fd, 3 * ps, 5 * ps, &start, &stop) == 0);
	CHECK(prim_next_data(f.fd, 5 * ps, 5 * ps, &start, &stop) == 0);
	// Past the end of the file.
	CHECK(prim_next_data(f.fd, 20 * ps, 30 * ps, &start, &stop) == 0);
}

TEST_CASE("prim: syncing a directory", "[prim][file]")
{
	CHECK(prim_sync_dir(".") == 0);
	errno = 0;
	CHECK(prim_sync_dir("/nonexistent-pmthreads-dir") == -1);
	CHECK(errno == ENOENT);
	scratch_file f;
	errno = 0;
	CHECK(prim_sync_dir(f.path.c_str()) == -1);
	CHECK(errno == ENOTDIR);
}

TEST_CASE("prim: small files, links and limits for the runtime", "[prim][file]")
{
	scratch_file f;
	REQUIRE(prim_pwrite_all(f.fd, "12 34\n", 6, 0) == 0);
	char buf[8];
	memset(buf, 'x', sizeof(buf));
	CHECK(prim_read_file(f.path.c_str(), buf, sizeof(buf)) == 6);
	CHECK(std::string(buf) == "12 34\n");
	// At most len - 1 bytes, always terminated.
	CHECK(prim_read_file(f.path.c_str(), buf, 4) == 3);
	CHECK(std::string(buf) == "12 ");
	errno = 0;
	CHECK(prim_read_file("/nonexistent/pmt-prim", buf, sizeof(buf)) == -1);
	CHECK(errno == ENOENT);

	std::string link = f.path + ".link";
	REQUIRE(symlink(f.path.c_str(), link.c_str()) == 0);
	char target[4096];
	CHECK(prim_readlink(link.c_str(), target, sizeof(target)) == (ssize_t)f.path.size());
	CHECK(std::string(target) == f.path);
	CHECK(prim_readlink(link.c_str(), target, 5) == 4);
	CHECK(std::string(target) == f.path.substr(0, 4));
	CHECK(prim_same_file(link.c_str(), f.path.c_str()));
	scratch_file other;
	CHECK_FALSE(prim_same_file(other.path.c_str(), f.path.c_str()));
	CHECK_FALSE(prim_same_file("/nonexistent/pmt-prim", f.path.c_str()));
	unlink(link.c_str());

	struct rlimit mine, kernel;
	REQUIRE(getrlimit(RLIMIT_NOFILE, &mine) == 0);
	REQUIRE(prim_get_rlimit(RLIMIT_NOFILE, &kernel) == 0);
	CHECK(kernel.rlim_cur == mine.rlim_cur);
	CHECK(kernel.rlim_max == mine.rlim_max);
}

TEST_CASE("prim: a file's lock and who else has it open", "[prim][file]")
{
	scratch_file f;
	struct stat st;
	REQUIRE(fstat(f.fd, &st) == 0);
	// Only f.fd has it open here, and no other process at all.
	CHECK_FALSE(prim_file_open_here(f.fd, &st));
	CHECK(prim_process_with_file(&st) == 0);
	CHECK_FALSE(prim_file_read_locked(f.fd));

	// A lock belongs to the open file description: a second open of the
	// same file conflicts with it, and the kind of lock is told.
	int other = open(f.path.c_str(), O_RDWR | O_CLOEXEC);
	REQUIRE(other >= 0);
	CHECK(prim_file_open_here(f.fd, &st));
	REQUIRE(prim_lock_file(f.fd, true) == 0);
	CHECK(prim_lock_file(other, true) == 0);
	errno = 0;
	CHECK(prim_lock_file(other, false) == -1);
	CHECK((errno == EAGAIN || errno == EACCES));
	CHECK(prim_file_read_locked(other));
	close(other);	// drops its shared lock
	REQUIRE(prim_lock_file(f.fd, false) == 0);
	other = open(f.path.c_str(), O_RDWR | O_CLOEXEC);
	REQUIRE(other >= 0);
	CHECK(prim_lock_file(other, true) == -1);
	CHECK_FALSE(prim_file_read_locked(other));	// exclusive, not shared
	close(other);

	// Another process with the file open is found by its pid.
	int ready[2], release[2];
	REQUIRE(pipe(ready) == 0);
	REQUIRE(pipe(release) == 0);
	pid_t child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		int fd = open(f.path.c_str(), O_RDONLY);
		char c;
		if (write(ready[1], "r", 1) == 1)
			(void)read(release[0], &c, 1);	// until the parent is done looking
		_exit(fd >= 0 ? 0 : 1);
	}
	char c;
	REQUIRE(read(ready[0], &c, 1) == 1);
	CHECK(prim_process_alive(child));
	CHECK(prim_process_with_file(&st) == child);
	REQUIRE(write(release[1], "x", 1) == 1);
	int status = 0;
	REQUIRE(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status));
	CHECK(WEXITSTATUS(status) == 0);
	CHECK_FALSE(prim_process_alive(child));
	CHECK_FALSE(prim_process_alive(0));
	for (int fd : { ready[0], ready[1], release[0], release[1] })
		close(fd);
}

// The meson test prim-noreplace runs it, skipped where the scratch files'
// file system has no RENAME_NOREPLACE (PMT_TEST_NEEDS=rename-noreplace).
TEST_CASE("prim: a rename that replaces nothing", "[prim][file][noreplace]")
{
	scratch_file a, b;
	errno = 0;
	int r = prim_rename_noreplace(a.path.c_str(), b.path.c_str());
	CHECK(r == -1);
	CHECK(errno == EEXIST);
	std::string to = b.path + ".moved";
	REQUIRE(prim_rename_noreplace(a.path.c_str(), to.c_str()) == 0);
	struct stat st;
	CHECK(stat(to.c_str(), &st) == 0);
	CHECK(rename(to.c_str(), a.path.c_str()) == 0);
}

namespace {

std::string file_text(const std::string &path)
{
	char buf[256] = {};
	int fd = open(path.c_str(), O_RDONLY);
	if (fd < 0)
		return "(missing)";
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return std::string(buf, n > 0 ? (size_t)n : 0);
}

} // namespace

TEST_CASE("prim: a file replaced at once", "[prim][file]")
{
	scratch_file f;
	char tmp[4096];
	const char *failed = nullptr;
	std::string stale = f.path + "." + std::to_string(getpid()) + ".tmp";

	// A temporary file left by a process of our pid killed mid-write goes.
	int s = open(stale.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
	REQUIRE(s >= 0);
	REQUIRE(write(s, "half", 4) == 4);
	close(s);
	REQUIRE(probe_replace_file(f.path.c_str(), "report one", tmp, sizeof(tmp), &failed) == 0);
	CHECK(std::string(tmp) == stale);
	CHECK(file_text(f.path) == "report one");
	CHECK(access(stale.c_str(), F_OK) != 0);
	struct stat st;
	REQUIRE(stat(f.path.c_str(), &st) == 0);
	CHECK((st.st_mode & 07777) == 0600);

	// A symbolic link at the temporary name is not followed (nor removed).
	std::string target = f.path + ".target";
	REQUIRE(symlink(target.c_str(), stale.c_str()) == 0);
	errno = 0;
	CHECK(probe_replace_file(f.path.c_str(), "two", tmp, sizeof(tmp), &failed) == -1);
	CHECK(std::string(failed) == "create");
	CHECK(errno == EEXIST);
	CHECK(access(target.c_str(), F_OK) != 0);
	CHECK(file_text(f.path) == "report one");
	unlink(stale.c_str());

	// The rename fails (a directory is in the way): the temporary goes.
	std::string dir = f.path + ".dir";
	REQUIRE(mkdir(dir.c_str(), 0700) == 0);
	std::string inner = dir + "/x";
	REQUIRE(mkdir(inner.c_str(), 0700) == 0);
	errno = 0;
	CHECK(probe_replace_file(dir.c_str(), "three", tmp, sizeof(tmp), &failed) == -1);
	CHECK(std::string(failed) == "rename");
	CHECK(errno != 0);
	CHECK(access(tmp, F_OK) != 0);
	rmdir(inner.c_str());
	rmdir(dir.c_str());

	// No room for the temporary name: nothing is made.
	char small[8];
	errno = 0;
	CHECK(probe_replace_file(f.path.c_str(), "four", small, sizeof(small), &failed) == -1);
	CHECK(std::string(failed) == "name");
	CHECK(errno == ENAMETOOLONG);
	CHECK(file_text(f.path) == "report one");
}

TEST_CASE("prim: a file's pages made private in place", "[prim][file]")
{
	scratch_file f;
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	REQUIRE(ftruncate(f.fd, (off_t)(2 * ps)) == 0);
	auto *m = static_cast<char *>(mmap(nullptr, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0));
	REQUIRE(m != MAP_FAILED);
	memset(m, 'a', 2 * ps);

	// Kept: the page reads as before, and a store no longer reaches the file.
	REQUIRE(prim_make_private(m, ps, true) == 0);
	CHECK(m[0] == 'a');
	CHECK(m[ps - 1] == 'a');
	m[0] = 'b';
	char c = 0;
	REQUIRE(pread(f.fd, &c, 1, 0) == 1);
	CHECK(c == 'a');
	// Not kept: zeros.  The page after stays the file's.
	REQUIRE(prim_make_private(m + ps, ps, false) == 0);
	CHECK(m[ps] == 0);
	REQUIRE(pread(f.fd, &c, 1, (off_t)ps) == 1);
	CHECK(c == 'a');
	CHECK_FALSE(prim_fs_full(-1));
	munmap(m, 2 * ps);
}
