/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exec_env -- the library's place in LD_PRELOAD, and what an exec does.
 *
 * Owns: who inherits the preload.  A process that is not the target (a
 * wrapper such as time, timeout, env, or a shell that execs; see target.h)
 * leaves LD_PRELOAD alone, so that the target it starts gets the library.
 * The target removes the library from its LD_PRELOAD at start (the user's
 * own entries stay), so the programs it starts with system(), popen() or
 * posix_spawn run without it -- unless PMTHREADS_FOLLOW_CHILDREN=1, which
 * keeps the entry and makes every descendant a target of its own.
 *
 * An exec by the target releases its pool first (a final epoch and the
 * clean flag: runtime_shutdown), so that the new image, if it is the target
 * again, opens the pool as after a clean exit; the new image gets the
 * library back in its LD_PRELOAD only if it is the target (or with
 * PMTHREADS_FOLLOW_CHILDREN=1).  preload/exec.c interposes execve, execv,
 * execvp, execvpe, execl, execlp and execle and hands each to exec_env_exec.
 *
 * Nothing here allocates from malloc: the new environment is built in an
 * anonymous mapping (in malloc mode malloc is the persistent heap).
 */
#ifndef PMT_EXEC_ENV_H
#define PMT_EXEC_ENV_H

#include "base/config.h"

#include <stdbool.h>

/* Find the LD_PRELOAD entry that loaded the library; in the target, take
 * it out of LD_PRELOAD so that children do not inherit it (unless
 * PMTHREADS_FOLLOW_CHILDREN=1).  Called once by start-up. */
void exec_env_init(const struct config *c, bool is_target);

/* The real execve or execvpe. */
typedef int (*exec_env_fn)(const char *file, char *const argv[], char *const envp[]);

/* Exec file through fn (search: resolve file through PATH as execvp does):
 * the pool released first when the exec can succeed and this process is
 * the target, the library put into or taken out of the new image's
 * LD_PRELOAD, SIGSEGV's emulated blocking handed to the new image's mask
 * (fault_signal.h).  Returns what fn returns, with its errno, when the exec
 * fails. */
int exec_env_exec(exec_env_fn fn, const char *file, bool search, char *const argv[],
		  char *const envp[]);

#endif
