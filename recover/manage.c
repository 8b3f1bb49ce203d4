/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * manage -- the pools themselves: list the pools under the default
 * directory, remove one that is not in use, create one.
 *
 * The default directory is the one the runtime uses for its default pools
 * (lib/base/config.c: $XDG_DATA_HOME/pmthreads, ~/.local/share/pmthreads, or
 * /tmp/pmthreads-UID); list and create take it from config_defaults, so the
 * two never disagree.
 */
#include "tool.h"

#include "base/config.h"
#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- list ---------------------------------------------------------------- */

static const char list_usage[] = "Usage: " TOOL_NAME " list [--dir DIR]\n";
static const char list_help[] =
	"Usage: " TOOL_NAME " list [--dir DIR]\n"
	"List the pools (*.pool) in the default pool directory, or in DIR: the program\n"
	"that created each, its capacity, the disk space it takes (pools are sparse),\n"
	"and its state: in use (by which process), clean, or crashed, with the last\n"
	"durable epoch (VER_d).  Pools are opened read-only.\n"
	"\n"
	"  --dir DIR   list DIR instead of the default directory\n"
	"  -h, --help  this text\n";

static void default_dir(char *out, size_t len)
{
	struct config c;
	config_defaults(&c);
	snprintf(out, len, "%s", c.pool_path);
	char *slash = strrchr(out, '/');
	if (slash != NULL && slash != out)
		*slash = '\0';
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_one(const char *dir, const char *name)
{
	char path[PATH_MAX + 256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	struct stat st;
	char disk[32] = "?";
	if (lstat(path, &st) == 0)
		tool_human_size((uint64_t)st.st_blocks * 512, disk, sizeof(disk));
	struct pool_open_options o;
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.read_only = true;
	o.nvm = NVM_AUTO;
	struct pool *p = NULL;
	pid_t holder = 0;
	o.lock_holder = &holder;
	enum pool_error rc = pool_open(&p, &o);
	if (rc != POOL_OK) {
		if (rc == POOL_ERR_LOCKED && holder != 0)
			printf("%-40s %-20s %10s %10s  in use by pid %d\n", path, "?", "?", disk,
			       (int)holder);
		else
			printf("%-40s %-20s %10s %10s  not usable: %s\n", path, "?", "?", disk,
			       err_get());
		return;
	}
	char cap[32];
	tool_human_size(p->npages * p->page_size, cap, sizeof(cap));
	printf("%-40s %-20s %10s %10s  %s, epoch %" PRIu64 "\n", path,
	       p->creator[0] != '\0' ? p->creator : "(unknown)", cap, disk,
	       *p->clean == 1 ? "clean" : "crashed", *p->ver_d);
	pool_close(p);
}

int cmd_list(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char dir[PATH_MAX];
	default_dir(dir, sizeof(dir));
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': snprintf(dir, sizeof(dir), "%s", optarg); break;
		case 'h': fputs(list_help, stdout); return TOOL_OK;
		default: return tool_bad_option(list_usage, "list", argv);
		}
	}
	if (argc != optind)
		return tool_usage_error(list_usage, "list: unexpected operand '%s'", argv[optind]);
	DIR *d = opendir(dir);
	if (d == NULL) {
		if (errno == ENOENT) {
			printf("no pools: %s does not exist\n", dir);
			return TOOL_OK;
		}
		tool_error("cannot read %s: %s", dir, strerror(errno));
		return TOOL_PROBLEM;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 5, ".pool") != 0)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			char **v = realloc(names, cap * sizeof(*v));
			if (v == NULL)
				break;
			names = v;
		}
		if ((names[n] = strdup(e->d_name)) != NULL)
			n++;
	}
	closedir(d);
	if (n > 1) /* qsort(NULL, 0, ...) is undefined: an empty directory */
		qsort(names, n, sizeof(*names), by_name);
	printf("%-40s %-20s %10s %10s  %s\n", "POOL", "PROGRAM", "CAPACITY", "ON DISK", "STATE");
	for (size_t i = 0; i < n; i++) {
		list_one(dir, names[i]);
		free(names[i]);
	}
	free(names);
	if (n == 0)
		printf("no pools in %s\n", dir);
	return fflush(stdout) == 0 ? TOOL_OK : TOOL_PROBLEM;
}

/* ---- rm ------------------------------------------------------------------ */

static const char rm_usage[] = "Usage: " TOOL_NAME " rm POOL...\n";
static const char rm_help[] =
	"Usage: " TOOL_NAME " rm POOL...\n"
	"Remove pool files.  A pool in use by a running program is refused (the\n"
	"message names its pid), and so is anything that is not a pool, a symbolic\n"
	"link included.  Removing a pool discards its program's persistent data.\n"
	"\n"
	"  -h, --help  this text\n";

int cmd_rm(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(rm_help, stdout);
			return TOOL_OK;
		}
		return tool_bad_option(rm_usage, "rm", argv);
	}
	if (argc == optind)
		return tool_usage_error(rm_usage, "rm: expected at least one POOL");
	int rc = TOOL_OK;
	for (int i = optind; i < argc; i++) {
		if (pool_remove(argv[i]) != 0) {
			tool_error("%s", err_get());
			rc = TOOL_PROBLEM;
		}
	}
	return rc;
}

/* ---- create -------------------------------------------------------------- */

static const char create_usage[] =
	"Usage: " TOOL_NAME " create [--size SIZE] [--log-size SIZE] [--program PROGRAM] POOL\n";
static const char create_help[] =
	"Usage: " TOOL_NAME " create [--size SIZE] [--log-size SIZE] [--program PROGRAM] POOL\n"
	"Create an empty pool (sparse: it takes disk space only as its heap grows).\n"
	"An existing file is never touched.\n"
	"\n"
	"  --size SIZE        heap capacity (suffixes K, M, G, T; default:\n"
	"                     PMTHREADS_POOL_SIZE, else the runtime's default)\n"
	"  --log-size SIZE    the redo log ring, written in full on a disk (default:\n"
	"                     PMTHREADS_LOG_SIZE, else by capacity); refused when\n"
	"                     the file system has not that much free\n"
	"  --program PROGRAM  the program that will use it: a path or a command name\n"
	"                     (looked up in PATH), recorded as the runtime names it,\n"
	"                     the file name of the executable with symbolic links\n"
	"                     resolved; default: POOL's file name without .pool\n"
	"  -h, --help         this text\n";

/* The name the runtime records and compares for the program at arg: the
 * file name of its executable with every symbolic link resolved
 * (/proc/self/exe), so "/usr/bin/python3" is "python3.11".  arg without a
 * slash is looked up in PATH as a shell would; a program not found is
 * recorded by its file name as given, with a warning. */
static void program_identity(const char *arg, char *out, size_t len)
{
	char found[PATH_MAX] = "";
	if (strchr(arg, '/') != NULL) {
		snprintf(found, sizeof(found), "%s", arg);
	} else {
		const char *path = getenv("PATH");
		while (path != NULL && *path != '\0' && found[0] == '\0') {
			const char *colon = strchr(path, ':');
			size_t n = colon != NULL ? (size_t)(colon - path) : strlen(path);
			char cand[PATH_MAX];
			snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, n > 0 ? path : ".", arg);
			if (access(cand, X_OK) == 0)
				snprintf(found, sizeof(found), "%s", cand);
			path = colon != NULL ? colon + 1 : NULL;
		}
	}
	char real[PATH_MAX];
	const char *name = arg;
	if (found[0] != '\0' && realpath(found, real) != NULL)
		name = real;
	else
		fprintf(stderr, TOOL_NAME ": warning: program %s not found; recording the name "
				"'%s' as given (a program whose executable has another file name "
				"is refused this pool)\n", arg,
			strrchr(arg, '/') != NULL ? strrchr(arg, '/') + 1 : arg);
	const char *base = strrchr(name, '/');
	base = base != NULL ? base + 1 : name;
	size_t n = strlen(base) < len ? strlen(base) : len - 1;	/* as the runtime cuts it */
	memcpy(out, base, n);
	out[n] = '\0';
}

int cmd_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "log-size", required_argument, NULL, 'l' },
		{ "program", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* The sizes as the runtime would take them: PMTHREADS_POOL_SIZE and
	 * PMTHREADS_LOG_SIZE (and PMTHREADS_SHADOW_BASE), with the same limits
	 * for the options. */
	struct config cfg;
	err_clear();
	if (config_from_env(&cfg) != 0) {
		tool_error("%s", err_get());
		return TOOL_USAGE;
	}
	const char *program = NULL;
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
		case 'l': {
			const char *env = c == 's' ? "PMTHREADS_POOL_SIZE" : "PMTHREADS_LOG_SIZE";
			err_clear();
			if (config_set(&cfg, config_option_by_env(env), optarg) != 0)
				return tool_usage_error(create_usage, "create: --%s: %s",
							c == 's' ? "size" : "log-size", err_get());
			break;
		}
		case 'p': program = optarg; break;
		case 'h': fputs(create_help, stdout); return TOOL_OK;
		default: return tool_bad_option(create_usage, "create", argv);
		}
	}
	if (argc - optind != 1)
		return tool_usage_error(create_usage, "create: expected one POOL, got %d operands",
					argc - optind);
	const char *path = argv[optind];
	char name[POOL_CREATOR_MAX];
	if (program == NULL) {
		const char *base = strrchr(path, '/');
		base = base != NULL ? base + 1 : path;
		snprintf(name, sizeof(name), "%s", base);
		size_t len = strlen(name);
		if (len > 5 && strcmp(name + len - 5, ".pool") == 0)
			name[len - 5] = '\0';
	} else {
		program_identity(program, name, sizeof(name));
	}
	struct stat st;
	if (lstat(path, &st) == 0) {
		tool_error("%s already exists; it was left untouched", path);
		return TOOL_PROBLEM;
	}
	struct pool_open_options o;
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.capacity = cfg.pool_size;
	o.log_size = cfg.log_size;
	o.shadow_base = cfg.shadow_base;
	o.creator = name;
	o.create = true;
	o.nvm = NVM_AUTO;
	struct pool *p = NULL;
	err_clear();
	if (pool_open(&p, &o) != 0) {
		tool_error("%s", err_get());
		return TOOL_PROBLEM;
	}
	if (!p->created) {
		tool_error("%s appeared meanwhile; it was left untouched", path);
		pool_close(p);
		return TOOL_PROBLEM;
	}
	char cap[32], lsize[32] = "";
	tool_human_size(p->npages * p->page_size, cap, sizeof(cap));
	if (p->log_size != 0) {
		char h[24];
		tool_human_size(p->log_size, h, sizeof(h));
		snprintf(lsize, sizeof(lsize), ", log %s", h);
	}
	fprintf(stderr, "%s: created, capacity %s%s, for the program '%s'\n", path, cap, lsize,
		name);
	pool_close(p);
	return TOOL_OK;
}
