/* SPDX-License-Identifier: BSD-3-Clause */
// Where the end-to-end tests put the pools of the programs they run, for the
// whole suite at once (tests/meson.build's test setups `disk` and `pmem`):
//
//   PMT_POOL_MEDIUM unset (the default, what users get): as disk, except that
//     a machine whose PMT_DISK_DIR is not on block storage (only tmpfs, say)
//     skips the test (exit 77, with the reason) instead of failing it;
//   PMT_POOL_MEDIUM=disk: an ordinary file in PMT_DISK_DIR (default
//     /var/tmp), which must be on block storage, and PMEM_IS_PMEM_FORCE
//     unset -- PMTHREADS_NVM=auto picks the log backend (lib/persist/nvm_log.c);
//   PMT_POOL_MEDIUM=pmem: emulated persistent memory, a directory on /dev/shm
//     (/tmp where there is none) with PMEM_IS_PMEM_FORCE=1 -- the runtime
//     picks the pmem backend (cache-line flushes).
//
// The tests that read the runtime's statistics check with expect_backend
// that the backend the medium should give is the one that ran.
#ifndef PMT_TESTS_POOL_MEDIUM_HPP
#define PMT_TESTS_POOL_MEDIUM_HPP

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <linux/magic.h>
#include <map>
#include <string>
#include <sys/statfs.h>
#include <unistd.h>
#include <vector>

namespace pool_medium {

// Whether PMT_POOL_MEDIUM was left to its default (disk).
inline bool defaulted()
{
	const char *m = getenv("PMT_POOL_MEDIUM");
	return m == nullptr || *m == '\0';
}

inline bool on_disk()
{
	const char *m = getenv("PMT_POOL_MEDIUM");
	if (defaulted() || strcmp(m, "disk") == 0)
		return true;
	if (strcmp(m, "pmem") == 0)
		return false;
	FAIL("PMT_POOL_MEDIUM=" << m << ": expected disk (the default: pools in PMT_DISK_DIR, "
				     "default /var/tmp) or pmem (pools on /dev/shm, emulated persistent memory)");
	return false;
}

inline const char *name() { return on_disk() ? "disk" : "pmem"; }

// The nvm backend the runtime must choose for a pool on this medium.
inline const char *backend() { return on_disk() ? "log" : "pmem"; }

// The directory pools on a disk go to (PMT_DISK_DIR, default /var/tmp), and
// why it cannot hold them: empty when it can.
inline std::string disk_dir()
{
	const char *d = getenv("PMT_DISK_DIR");
	return d != nullptr && *d != '\0' ? d : "/var/tmp";
}
inline std::string disk_unusable(const std::string &dir)
{
	struct statfs sf;
	if (statfs(dir.c_str(), &sf) != 0 || access(dir.c_str(), W_OK) != 0)
		return dir + " is not a writable directory (set PMT_DISK_DIR to one on a disk)";
	if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)
		return dir + " is in memory (tmpfs), not on a disk (set PMT_DISK_DIR to a "
			     "directory on one, or run the pmem setup: meson test --setup pmem)";
	return "";
}

// The directory the pools' scratch directories are made in.  With the
// medium left to its default, a machine without a disk directory skips the
// whole test here -- exit 77, meson's SKIP, with the reason -- rather than
// switching the backend silently; asked for by name, it fails.
inline std::string base_dir()
{
	if (!on_disk())
		return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	std::string dir = disk_dir();
	std::string why = disk_unusable(dir);
	if (why.empty())
		return dir;
	if (defaulted()) {
		fprintf(stderr, "SKIP: pools go on a file on a disk by default, and %s\n", why.c_str());
		fflush(nullptr);
		_exit(77);
	}
	FAIL("PMT_POOL_MEDIUM=disk: " << why);
	return dir;
}

// The environment of a program run on a pool of this medium: added to env
// for a child, and, for children that inherit the test's environment, to
// the test's own.  On disk PMEM_IS_PMEM_FORCE is removed from both: a
// forced "is pmem" would pick the pmem backend on an ordinary file.
inline void child_env(std::map<std::string, std::string> &env)
{
	if (on_disk()) {
		env.erase("PMEM_IS_PMEM_FORCE");
		unsetenv("PMEM_IS_PMEM_FORCE");
	} else {
		env["PMEM_IS_PMEM_FORCE"] = "1";
	}
}
inline void set_own_env()
{
	if (on_disk())
		unsetenv("PMEM_IS_PMEM_FORCE");
	else
		setenv("PMEM_IS_PMEM_FORCE", "1", 1);
}

// A fresh directory for pools on this medium, removed with its files.
struct dir {
	std::string path;
	explicit dir(const char *tag = "pool")
	{
		std::string tmpl = base_dir() + "/pmt-" + tag + "-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back('\0');
		REQUIRE(mkdtemp(buf.data()) != nullptr);
		path = buf.data();
	}
	~dir() { (void)!system(("rm -rf '" + path + "'").c_str()); }
	dir(const dir &) = delete;
	dir &operator=(const dir &) = delete;
	std::string file(const char *name) const { return path + "/" + name; }
};

// The statistics report (PMTHREADS_STATS) of a run that opened a pool on
// this medium names the backend the medium should give.
inline void expect_backend(const std::string &stats_json)
{
	std::string want = std::string("\"nvm\": \"") + backend() + "\"";
	INFO("PMT_POOL_MEDIUM " << name() << ", statistics:\n" << stats_json);
	CHECK(stats_json.find(want) != std::string::npos);
}

} // namespace pool_medium

#endif
