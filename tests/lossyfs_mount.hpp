/* SPDX-License-Identifier: BSD-3-Clause */
// Mounting tests/lossyfs.c for a test: a backing directory and a mount
// point under a scratch directory, the file system process in the
// foreground as our child.  Used by catch_main.cpp's "fuse" need (can this
// machine mount it at all?) and by test_lossyfs.cpp.
#ifndef PMT_LOSSYFS_MOUNT_HPP
#define PMT_LOSSYFS_MOUNT_HPP

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <string>
#include <vector>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace lossyfs {

// Mounted when the mount point's device differs from its parent's.
inline bool is_mounted(const std::string &mnt)
{
	struct stat a, b;
	return stat(mnt.c_str(), &a) == 0 && stat((mnt + "/..").c_str(), &b) == 0 &&
	       a.st_dev != b.st_dev;
}

struct mount_point {
	std::string exe, backing, mnt;
	pid_t pid = -1;
	std::string log;	// the file system's stderr

	// Start lossyfs with the options in extra (separated by spaces); false
	// when it did not come up within 5 s (see log).
	bool start(const std::string &extra = "")
	{
		log = backing + ".log";
		std::vector<std::string> words = { exe, backing, mnt };
		std::istringstream in(extra);
		for (std::string w; in >> w;)
			words.push_back(w);
		std::vector<char *> argv;
		for (auto &w : words)
			argv.push_back(const_cast<char *>(w.c_str()));
		argv.push_back(nullptr);
		pid = fork();
		if (pid < 0)
			return false;
		if (pid == 0) {
			FILE *f = freopen(log.c_str(), "a", stderr);
			(void)f;
			execv(exe.c_str(), argv.data());
			_exit(127);
		}
		// Polled every millisecond: the I/O-error sweeps mount hundreds
		// of times.
		for (int i = 0; i < 5000; i++) {
			if (is_mounted(mnt))
				return true;
			int st;
			if (waitpid(pid, &st, WNOHANG) == pid) {
				pid = -1;
				return false;
			}
			usleep(1000);
		}
		stop();
		return false;
	}

	// Unmount: the kernel's cached pages go to lossyfs, which then exits
	// and loses (or tears) every write never synced -- the power cut.
	void stop()
	{
		if (pid < 0)
			return;
		if (umount2(mnt.c_str(), 0) != 0)
			(void)!system(("fusermount3 -u '" + mnt + "' 2>/dev/null").c_str());
		for (int i = 0; i < 10000; i++) {
			int st;
			if (waitpid(pid, &st, WNOHANG) == pid) {
				pid = -1;
				return;
			}
			usleep(1000);
		}
		kill(pid, SIGKILL);
		waitpid(pid, nullptr, 0);
		umount2(mnt.c_str(), MNT_DETACH);
		pid = -1;
	}
	~mount_point() { stop(); }
};

// Directories backing/ and mnt/ under dir.
inline mount_point make(const std::string &exe, const std::string &dir)
{
	mount_point m;
	m.exe = exe;
	m.backing = dir + "/backing";
	m.mnt = dir + "/mnt";
	mkdir(m.backing.c_str(), 0700);
	mkdir(m.mnt.c_str(), 0700);
	return m;
}

} // namespace lossyfs

#endif
