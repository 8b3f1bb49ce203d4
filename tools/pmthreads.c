// SPDX-License-Identifier: BSD-3-Clause
/*
 * pmthreads -- run an unmodified pthread program under libpmthreads.
 *
 *   pmthreads run [OPTIONS] [--] COMMAND [ARGS...]
 *
 * Every option is a row of lib/base/config.c's table: --help is printed from it
 * and each value is checked with the library's own parser before anything
 * runs, so a bad option or a misspelt PMTHREADS_* variable stops here with
 * exit status 2.  The command's program (after the wrappers time, timeout,
 * taskset, env, nice, nohup, setsid, stdbuf, chrt, ionice and `sh -c 'exec
 * PROG ...'`, which are skipped) becomes PMTHREADS_PROGRAM, the only process
 * that owns the pool; --program names it explicitly.  A command that cannot
 * be found exits 127, one that cannot be run 126, as env(1) does.
 */
#include "base/config.h"
#include "base/log.h"
#include "runtime/target.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PMT_VERSION
#define PMT_VERSION "unknown"
#endif
#ifndef PMT_LIBRARY
#define PMT_LIBRARY "libpmthreads.so.0"
#endif

enum { EXIT_USAGE = 2, EXIT_CANNOT_RUN = 126, EXIT_NOT_FOUND = 127 };

static void print_help(FILE *f)
{
	fprintf(f, "usage: pmthreads run [OPTIONS] [--] COMMAND [ARGS...]\n"
		   "       pmthreads --help | --version\n\n"
		   "Runs COMMAND with libpmthreads preloaded: its lock-based critical sections\n"
		   "become failure-atomic and its persistent heap survives a crash (pmthreads(7)).\n"
		   "Each option sets the environment variable shown; the variables may also be set\n"
		   "directly.\n\nOptions:\n");
	size_t n;
	const struct config_option *opts = config_options(&n);
	for (size_t i = 0; i < n; i++) {
		const struct config_option *o = &opts[i];
		char left[64];
		if (o->flag == NULL)
			snprintf(left, sizeof(left), "(environment only)");
		else if (o->metavar == NULL)
			snprintf(left, sizeof(left), "%s", o->flag);
		else if (o->optional_arg)
			snprintf(left, sizeof(left), "%s[=%s]", o->flag, o->metavar);
		else
			snprintf(left, sizeof(left), "%s %s", o->flag, o->metavar);
		char def[32];
		fprintf(f, "  %-24s %s\n  %-24s   %s, default %s\n", left, o->help, "", o->env,
			config_default_text(o, def, sizeof(def)));
	}
	fprintf(f, "  %-24s %s\n", "-h, --help", "this text");
	fprintf(f, "  %-24s %s\n", "-V, --version", "the version");
	fprintf(f, "\nExit status: COMMAND's; 2 for a bad option or variable, 126 when COMMAND\n"
		   "cannot be run, 127 when it is not found.  See pmthreads(1).\n");
}

static void usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "pmthreads: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'pmthreads --help'.\n");
	exit(EXIT_USAGE);
}

static const struct config_option *find_flag(const char *arg, const char **value)
{
	size_t n;
	const struct config_option *opts = config_options(&n);
	const char *eq = strchr(arg, '=');
	size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
	*value = eq != NULL ? eq + 1 : NULL;
	for (size_t i = 0; i < n; i++)
		if (opts[i].flag != NULL && strlen(opts[i].flag) == len &&
		    strncmp(opts[i].flag, arg, len) == 0)
			return &opts[i];
	return NULL;
}

/* ---- the target: the command's program, past the wrappers (target.h) ---- */

/* What execvp would run for word: into out; false when there is none. */
static bool resolve(const char *word, char *out, size_t len, int *err)
{
	*err = ENOENT;
	if (strchr(word, '/') != NULL) {
		if (access(word, F_OK) != 0) {
			*err = errno;
			return false;
		}
		if (realpath(word, out) == NULL) {
			*err = errno;
			return false;
		}
		(void)len;
		return true;
	}
	const char *path = getenv("PATH");
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	char cand[PATH_MAX];
	bool exists = false;
	for (const char *p = path;;) {
		const char *colon = strchrnul(p, ':');
		int dlen = (int)(colon - p);
		int n = snprintf(cand, sizeof(cand), "%.*s%s%s", dlen, p, dlen ? "/" : "", word);
		if (n > 0 && (size_t)n < sizeof(cand) && access(cand, F_OK) == 0) {
			exists = true;
			if (access(cand, X_OK) == 0 && realpath(cand, out) != NULL)
				return true;
		}
		if (*colon == '\0')
			break;
		p = colon + 1;
	}
	*err = exists ? EACCES : ENOENT;
	return false;
}

static bool is_script(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return false;
	char magic[2] = { 0, 0 };
	size_t n = fread(magic, 1, 2, f);
	fclose(f);
	return n == 2 && magic[0] == '#' && magic[1] == '!';
}

static int run(int argc, char **argv)
{
	const char *program = NULL;
	int i = 0;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			print_help(stdout);
			exit(0);
		}
		if (strcmp(a, "--program") == 0 || strncmp(a, "--program=", 10) == 0) {
			if (a[9] == '=')
				program = a + 10;
			else if (i + 1 < argc)
				program = argv[++i];
			else
				usage_error("option '%s' needs an argument", a);
			continue;
		}
		const char *value;
		const struct config_option *o = find_flag(a, &value);
		if (o == NULL)
			usage_error("unknown option '%s'", a);
		if (value == NULL) {
			if (o->metavar == NULL || o->optional_arg)
				value = o->flag_value;
			else if (i + 1 < argc)
				value = argv[++i];
			else
				usage_error("option '%s' needs an argument", a);
		} else if (o->metavar == NULL) {
			usage_error("option '%s' takes no argument", o->flag);
		}
		struct config scratch;
		config_defaults(&scratch);
		if (config_set(&scratch, o, value) != 0) {
			fprintf(stderr, "pmthreads: %s: %s\n", o->flag, err_get());
			exit(EXIT_USAGE);
		}
		setenv(o->env, value, 1);
	}
	if (i >= argc)
		usage_error("%s", "no command given");
	char **cmd = argv + i;
	int ncmd = argc - i;

	/* The whole environment as the library will read it. */
	struct config all;
	if (config_from_env(&all) != 0) {
		fprintf(stderr, "pmthreads: %s\n", err_get());
		exit(EXIT_USAGE);
	}

	char word_buf[PATH_MAX], resolved[PATH_MAX];
	int err;
	if (!resolve(cmd[0], resolved, sizeof(resolved), &err)) {
		fprintf(stderr, "pmthreads: '%s': %s\n", cmd[0], strerror(err));
		exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
	}
	const char *word = program != NULL ? program : target_command_word(cmd, ncmd, word_buf,
									    sizeof(word_buf));
	if (word == NULL)
		usage_error("%s", "the wrapper command names no program to run");
	char target[PATH_MAX];
	if (!resolve(word, target, sizeof(target), &err)) {
		fprintf(stderr, "pmthreads: '%s': %s\n", word, strerror(err));
		exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
	}
	if (program == NULL && is_script(target)) {
		fprintf(stderr, "pmthreads: %s is a script: its interpreter, not the script, would "
			"own the pool; name the program that should with --program PATH\n", target);
		exit(EXIT_USAGE);
	}
	setenv("PMTHREADS_PROGRAM", target, 1);

	const char *library = getenv("PMTHREADS_LIBRARY");
	char in_build_tree[PATH_MAX];
	if (library == NULL || library[0] == '\0') {
		library = PMT_LIBRARY;
		/* Not installed yet: the library built beside this tool
		 * (build/tools/pmthreads -> build/preload/). */
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (access(library, R_OK) != 0 && n > 0) {
			self[n] = '\0';
			char *slash = strrchr(self, '/');
			if (slash != NULL) {
				*slash = '\0';
				int m = snprintf(in_build_tree, sizeof(in_build_tree),
						 "%.*s/../preload/libpmthreads.so", PATH_MAX - 64,
						 self);
				if (m > 0 && (size_t)m < sizeof(in_build_tree) &&
				    access(in_build_tree, R_OK) == 0)
					library = in_build_tree;
			}
		}
	}
	if (access(library, R_OK) != 0) {
		fprintf(stderr, "pmthreads: the library %s cannot be read (%s); set "
			"PMTHREADS_LIBRARY to libpmthreads.so\n", library, strerror(errno));
		exit(1);
	}
	const char *old = getenv("LD_PRELOAD");
	char preload[2 * PATH_MAX];
	snprintf(preload, sizeof(preload), "%s%s%s", library, old != NULL && old[0] ? " " : "",
		 old != NULL ? old : "");
	setenv("LD_PRELOAD", preload, 1);

	execvp(cmd[0], cmd);
	err = errno;
	fprintf(stderr, "pmthreads: '%s': %s\n", cmd[0], strerror(err));
	return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage_error("%s", "a command is needed: pmthreads run [OPTIONS] [--] COMMAND");
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		print_help(stdout);
		return 0;
	}
	if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
		printf("pmthreads %s\n", PMT_VERSION);
		return 0;
	}
	if (strcmp(cmd, "run") == 0)
		return run(argc - 2, argv + 2);
	usage_error("unknown command '%s' (the command is: pmthreads run)", cmd);
	return EXIT_USAGE;
}
