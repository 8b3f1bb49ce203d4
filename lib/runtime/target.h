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
 */
#ifndef PMT_TARGET_H
#define PMT_TARGET_H

#include <stdbool.h>

/* This process's executable is the target (computed once). */
bool target_is_self(void);

/* The executable at path (as execve would resolve it, relative to the
 * current directory) is the target. */
bool target_is_path(const char *path);

#endif
