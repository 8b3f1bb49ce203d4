/* SPDX-License-Identifier: BSD-3-Clause */
// Helpers shared by the pool, persist and crash tests: scratch directories,
// pool creation with small capacities, and byte-exact file snapshots.
#ifndef PMT_TESTS_POOL_TEST_UTIL_H
#define PMT_TESTS_POOL_TEST_UTIL_H

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "pool_medium.hpp"

extern "C" {
#include "base/log.h"
#include "persist/persist.h"
#include "persist/pool.h"
#include "recovery/recovery.h"
#include "persist/nvm_sim.h"
}

namespace pooltest {

// A fresh directory, removed with its files at scope exit.  On the pool
// medium of the run (pool_medium.hpp): a file system on a disk by default,
// /dev/shm under the pmem setup.
struct scratch_dir {
	std::string path;
	scratch_dir() : scratch_dir(pool_medium::base_dir().c_str()) {}
	explicit scratch_dir(const char *base)
	{
		std::string tmpl = std::string(base) + "/pmt-pooltest-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back('\0');
		REQUIRE(mkdtemp(buf.data()) != nullptr);
		path = buf.data();
	}
	~scratch_dir()
	{
		std::string cmd = "rm -rf '" + path + "'";
		if (system(cmd.c_str()) != 0) {
			// Leftovers in a temp dir are harmless.
		}
	}
	std::string file(const char *name) const { return path + "/" + name; }
};

inline size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

// The tests' shadow address; PMTHREADS_SHADOW_BASE moves it, as it moves the
// runtime's: a ThreadSanitizer build needs one inside TSan's application
// memory (tests/meson.build, the tsan suite).
inline uint64_t test_shadow_base()
{
	const char *v = getenv("PMTHREADS_SHADOW_BASE");
	return v != nullptr && *v != '\0' ? strtoull(v, nullptr, 0) : 0x500000000000ULL;
}

// o.path points into path: it must outlive the options (hence no temporaries).
inline pool_open_options options(std::string &&path, uint64_t npages = 16,
				 const char *creator = "pooltest") = delete;
inline pool_open_options options(const std::string &path, uint64_t npages = 16,
				 const char *creator = "pooltest")
{
	pool_open_options o{};
	o.path = path.c_str();
	o.capacity = npages * page_size();
	o.shadow_base = test_shadow_base();
	o.creator = creator;
	o.create = true;
	o.read_only = false;
	o.nvm = NVM_MSYNC;
	return o;
}

inline pool *open_or_fail(const pool_open_options &o)
{
	pool *p = nullptr;
	int rc = pool_open(&p, &o);
	INFO("pool_open(" << o.path << "): " << err_get());
	REQUIRE(rc == 0);
	REQUIRE(p != nullptr);
	return p;
}

// Everything that "left untouched" promises: content, size, mode, mtime.
struct file_snapshot {
	std::vector<unsigned char> bytes;
	struct stat st {};
	bool exists = false;

	static file_snapshot of(const std::string &path)
	{
		file_snapshot s;
		if (lstat(path.c_str(), &s.st) != 0)
			return s;
		s.exists = true;
		if (!S_ISREG(s.st.st_mode))
			return s;
		int fd = open(path.c_str(), O_RDONLY);
		REQUIRE(fd >= 0);
		s.bytes.resize((size_t)s.st.st_size);
		size_t got = 0;
		while (got < s.bytes.size()) {
			ssize_t r = pread(fd, s.bytes.data() + got, s.bytes.size() - got, (off_t)got);
			REQUIRE(r > 0);
			got += (size_t)r;
		}
		close(fd);
		return s;
	}
	bool same_as(const file_snapshot &o) const
	{
		return exists == o.exists && bytes == o.bytes && st.st_size == o.st.st_size &&
		       st.st_mode == o.st.st_mode && st.st_mtim.tv_sec == o.st.st_mtim.tv_sec &&
		       st.st_mtim.tv_nsec == o.st.st_mtim.tv_nsec && st.st_ino == o.st.st_ino;
	}
};

inline void write_file(const std::string &path, const void *data, size_t len)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, data, len) == (ssize_t)len);
	close(fd);
}

inline void copy_file(const std::string &from, const std::string &to)
{
	file_snapshot s = file_snapshot::of(from);
	REQUIRE(s.exists);
	write_file(to, s.bytes.data(), s.bytes.size());
}

// Patch bytes of a file in place (to corrupt a pool on purpose).
inline void patch_file(const std::string &path, off_t off, const void *data, size_t len)
{
	int fd = open(path.c_str(), O_WRONLY);
	REQUIRE(fd >= 0);
	REQUIRE(pwrite(fd, data, len, off) == (ssize_t)len);
	close(fd);
}

// Flip the bits of mask in the byte at off: a change whatever the byte
// held (writing a fixed value misses the one case in 256 where it was
// there).
inline void flip_file_byte(const std::string &path, off_t off, unsigned char mask = 0xff)
{
	int fd = open(path.c_str(), O_RDWR);
	REQUIRE(fd >= 0);
	unsigned char b = 0;
	REQUIRE(pread(fd, &b, 1, off) == 1);
	b ^= mask;
	REQUIRE(pwrite(fd, &b, 1, off) == 1);
	close(fd);
}

// Page-aligned zeroed memory standing in for the shadow heap.
struct shadow_buf {
	unsigned char *mem;
	size_t len;
	explicit shadow_buf(size_t bytes) : len(bytes)
	{
		mem = static_cast<unsigned char *>(aligned_alloc(page_size(), bytes));
		REQUIRE(mem != nullptr);
		memset(mem, 0, bytes);
	}
	~shadow_buf() { free(mem); }
	shadow_buf(const shadow_buf &) = delete;
	shadow_buf &operator=(const shadow_buf &) = delete;
	std::vector<unsigned char> bytes() const { return std::vector<unsigned char>(mem, mem + len); }
};

// Run fn in a forked child; returns the child's wait status.  fn ends the
// child itself (_exit) or it exits with 0; an exception (a failed REQUIRE in
// the child) exits with 99 instead of running the rest of the suite twice.
template <typename F> int in_child(F fn)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		try {
			fn();
		} catch (...) {
			_exit(99);
		}
		_exit(0);
	}
	int status = 0;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	return status;
}

} // namespace pooltest

#endif
