/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * privilege -- where a privileged program keeps its pool.
 *
 * Owns: the pool of a program in secure-execution mode (AT_SECURE:
 * set-user-ID, set-group-ID, file capabilities), whose caller may be less
 * privileged than it.  Such a program ignores the environment (config.h), so
 * its pool is at the default path config.c gives it,
 * CONFIG_SECURE_POOL_DIR (/var/lib/pmthreads)/<effective uid>/<executable's name>.pool: never under
 * the caller's home or /tmp, and named after the executable's file, not
 * argv[0], which the caller chooses.  Before it is opened, every directory
 * from / down is checked as OpenSSH's StrictModes checks a user's files:
 * each one owned by root or the effective uid and writable by nobody else
 * (a sticky directory owned by root is allowed above those two, as /tmp
 * would be); the last one, the effective uid's own, mode 0700; a pool
 * already there a regular file of root's or the effective uid's that no
 * group or other may read.  Nobody but root and the effective uid can then
 * change what the path leads to, so the path-based open that follows
 * (O_NOFOLLOW, mode 0600) has no race to lose.  The two directories
 * /var/lib/pmthreads and /var/lib/pmthreads/<euid> are made when missing (only root can make the first).
 * A program whose effective uid is its caller's (set-group-ID only, or file
 * capabilities) has no safe place at all: whatever it creates the caller
 * owns, may read and may replace.  Without a safe place the program runs
 * without persistence and says so at the default verbosity.
 */
#ifndef PMT_PRIVILEGE_H
#define PMT_PRIVILEGE_H

#include <stdbool.h>

/* This process runs in secure-execution mode. */
bool privilege_secure(void);

/* For a process in secure-execution mode: check (and make, where missing)
 * the directories of pool_path as above.  0 when the pool may be opened at
 * pool_path; -1 with err_get() naming the place that is unsafe and the fix,
 * and err_cause() EACCES. */
int privilege_check_pool_path(const char *pool_path);

#endif
