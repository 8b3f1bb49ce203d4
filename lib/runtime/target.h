/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * target -- which process owns the pool.
 *
 * Owns: the decision whether this process, or an image about to be exec'd,
 * is the program the pool belongs to.  `pmthreads run` names that program
 * in PMTHREADS_PROGRAM (a resolved path); wrappers it starts on the way
 * (time, timeout, taskset, env, a shell that execs) and children that are
 * something else are not the target and never touch a pool.  Without
 * PMTHREADS_PROGRAM (a plain LD_PRELOAD) every process is a target.
 * Compared by device and inode, so a symlink or another path to the same
 * executable is the same program.
 *
 * The wrappers are known by name (time, timeout, taskset, env, nice, nohup,
 * setsid, stdbuf, chrt, ionice, and `sh -c 'exec PROG ...'`) and their
 * options parsed as they parse them: `pmthreads run` finds its target past
 * them with target_command_word, and under a plain LD_PRELOAD (no
 * PMTHREADS_PROGRAM) a process whose command line is such a wrapper's is no
 * target either, so that `LD_PRELOAD=libpmthreads.so timeout 60 ./prog`
 * leaves the pool to prog.
 */
#ifndef PMT_TARGET_H
#define PMT_TARGET_H

#include <stdbool.h>
#include <stddef.h>

/* This process's executable is the target (computed once). */
bool target_is_self(void);

/* The executable at path (as execve would resolve it, relative to the
 * current directory) is the target. */
bool target_is_path(const char *path);

/* The word of argv (a command line of argc words) naming the program that
 * will own the pool: argv[0], or past the wrappers the program they run (in
 * buf, of len bytes, for a shell's `exec PROG`); NULL when a wrapper names
 * none. */
const char *target_command_word(char **argv, int argc, char *buf, size_t len);
/* argv is a wrapper's command line (target_command_word looks past argv[0]). */
bool target_argv_is_wrapper(char **argv, int argc);
/* No PMTHREADS_PROGRAM, and this process's command line is a wrapper's. */
bool target_is_wrapper(void);

#endif
