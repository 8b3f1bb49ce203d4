/* SPDX-License-Identifier: BSD-3-Clause */
/* target -- which process owns the pool.  See target.h. */
#include "runtime/target.h"

#include "base/config.h"
#include "prim/prim.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int self_state;	/* 0 unknown, 1 target, 2 not */

struct wrapper {
	const char *name;
	const char *short_with_arg;	/* letters of options taking an argument */
	const char *const *long_with_arg;	/* "--output" etc. (without =) */
	int positionals;		/* operands before the command */
	bool assignments;		/* env: NAME=VALUE operands */
};

static const char *const time_long[] = { "--format", "--output", NULL };
static const char *const timeout_long[] = { "--signal", "--kill-after", NULL };
static const char *const env_long[] = { "--unset", "--chdir", NULL };
static const char *const nice_long[] = { "--adjustment", NULL };
static const char *const stdbuf_long[] = { "--input", "--output", "--error", NULL };
static const char *const ionice_long[] = { "--class", "--classdata", NULL };
static const char *const none[] = { NULL };

static const struct wrapper wrappers[] = {
	{ "time", "fo", time_long, 0, false },
	{ "timeout", "sk", timeout_long, 1, false },
	{ "taskset", "", none, 1, false },
	{ "env", "uC", env_long, 0, true },
	{ "nice", "n", nice_long, 0, false },
	{ "nohup", "", none, 0, false },
	{ "setsid", "", none, 0, false },
	{ "stdbuf", "ioe", stdbuf_long, 0, false },
	{ "chrt", "", none, 1, false },
	{ "ionice", "cn", ionice_long, 0, false },
};

static const struct wrapper *wrapper_named(const char *word)
{
	const char *base = strrchr(word, '/');
	base = base != NULL ? base + 1 : word;
	for (size_t i = 0; i < sizeof(wrappers) / sizeof(wrappers[0]); i++)
		if (strcmp(wrappers[i].name, base) == 0)
			return &wrappers[i];
	return NULL;
}

static bool long_takes_arg(const struct wrapper *w, const char *arg)
{
	if (strchr(arg, '=') != NULL)
		return false;
	for (const char *const *l = w->long_with_arg; *l != NULL; l++)
		if (strcmp(*l, arg) == 0)
			return true;
	return false;
}

static bool is_shell(const char *word)
{
	const char *base = strrchr(word, '/');
	base = base != NULL ? base + 1 : word;
	return strcmp(base, "sh") == 0 || strcmp(base, "bash") == 0 || strcmp(base, "dash") == 0;
}

/* `sh -c 'exec PROG ARGS'`: PROG, copied into out; false for anything
 * else (a shell that runs more than one program is itself the target). */
static bool shell_exec_target(char **argv, int argc, char *out, size_t len)
{
	if (argc < 3 || strcmp(argv[1], "-c") != 0)
		return false;
	const char *s = argv[2];
	while (*s == ' ' || *s == '\t')
		s++;
	if (strncmp(s, "exec", 4) != 0 || (s[4] != ' ' && s[4] != '\t'))
		return false;
	s += 4;
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strcspn(s, " \t\n;&|<>()$`\"'\\");
	if (n == 0 || n >= len || (s[n] != '\0' && s[n] != ' ' && s[n] != '\t'))
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return true;
}

const char *target_command_word(char **argv, int argc, char *buf, size_t len)
{
	int i = 0;
	for (int depth = 0; depth < 16 && i < argc; depth++) {
		const struct wrapper *w = wrapper_named(argv[i]);
		if (w == NULL) {
			if (is_shell(argv[i]) && shell_exec_target(argv + i, argc - i, buf, len))
				return buf;
			return argv[i];
		}
		i++;
		while (i < argc && argv[i][0] == '-' && argv[i][1] != '\0') {
			const char *a = argv[i++];
			if (strcmp(a, "--") == 0)
				break;
			if (a[1] == '-') {
				if (long_takes_arg(w, a))
					i++;
			} else if (a[2] == '\0' && strchr(w->short_with_arg, a[1]) != NULL) {
				i++;
			}
		}
		if (w->assignments)
			while (i < argc && strchr(argv[i], '=') != NULL)
				i++;
		i += w->positionals;
	}
	return i < argc ? argv[i] : NULL;
}

bool target_argv_is_wrapper(char **argv, int argc)
{
	if (argc < 1)
		return false;
	char buf[PATH_MAX];
	const char *word = target_command_word(argv, argc, buf, sizeof(buf));
	return word != argv[0];
}

/* This process's own command line, from /proc/self/cmdline (no malloc: the
 * library may be starting inside the malloc wrapper). */
static bool self_is_wrapper(void)
{
	static char line[8192];	/* once, under self_state's computation */
	char *argv[64];
	ssize_t n = prim_read_file("/proc/self/cmdline", line, sizeof(line));
	if (n <= 0)
		return false;
	int argc = 0;
	for (ssize_t i = 0; i < n && argc < 64; argc++) {
		argv[argc] = line + i;
		i += (ssize_t)strlen(line + i) + 1;
	}
	return target_argv_is_wrapper(argv, argc);
}

bool target_is_path(const char *path)
{
	const struct config *c = config_get();
	if (c->program[0] == '\0')
		return true;
	return prim_same_file(path, c->program);
}

bool target_is_wrapper(void)
{
	return config_get()->program[0] == '\0' && self_is_wrapper();
}

bool target_is_self(void)
{
	int s = __atomic_load_n(&self_state, __ATOMIC_ACQUIRE);
	if (s == 0) {
		/* Under a plain LD_PRELOAD a wrapper (timeout, nice, env, a
		 * shell that execs) would be its own target and take the pool
		 * of the program it runs: recognised as pmthreads run skips it. */
		s = target_is_path("/proc/self/exe") && !target_is_wrapper() ? 1 : 2;
		__atomic_store_n(&self_state, s, __ATOMIC_RELEASE);
	}
	return s == 1;
}
