/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmthreads-recover -- command dispatch, the tool's --help and --version.
 */
#include "tool.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifndef PMT_VERSION
#define PMT_VERSION "unknown"
#endif

/* A format: the format versions come from POOL_FORMAT_VERSION (print_help). */
static const char tool_help[] =
	"Usage: " TOOL_NAME " COMMAND [OPTIONS] POOL ...\n"
	"Inspect a pmthreads pool file without modifying it; list, create and remove\n"
	"pools.\n"
	"\n"
	"Commands:\n"
	"  info POOL [--json]          format, capacity, pages used, VER_d, clean or\n"
	"                              crashed, creator, named objects\n"
	"  check POOL [--json]         verify every invariant; exit 0 when consistent,\n"
	"                              1 listing every problem\n"
	"  dump POOL OUT [--used-only] [--force] [--salvage]\n"
	"                              write the consistent heap image to OUT (- for\n"
	"                              standard output)\n"
	"  list [--dir DIR]            the pools in the default directory: program,\n"
	"                              capacity, disk space, in use / clean / crashed\n"
	"  rm POOL...                  remove pools (never one in use)\n"
	"  create POOL [--size SIZE] [--log-size SIZE] [--program PROGRAM]\n"
	"                              create an empty pool\n"
	"  upgrade POOL                convert a pool of an older format version (2 to\n"
	"                              %d) to the current one (%d), keeping its data\n"
	"  help [COMMAND]              this text, or a command's\n"
	"\n"
	"Options:\n"
	"  -h, --help                  this text (after a command: that command's)\n"
	"  -V, --version               print the version\n"
	"\n"
	"info, check, dump and list open pools read-only and never write them\n"
	"(upgrade writes a new file, then renames it over the old pool).  A\n"
	"pool held by a running program cannot be inspected until that program exits.\n"
	"Exit status: 0 success, 1 a problem with the pool or the output, 2 usage.\n";

static void print_help(void)
{
	printf(tool_help, POOL_FORMAT_VERSION - 1, POOL_FORMAT_VERSION);
}

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
	{ "info", cmd_info },
	{ "check", cmd_check },
	{ "dump", cmd_dump },
	{ "list", cmd_list },
	{ "rm", cmd_rm },
	{ "create", cmd_create },
	{ "upgrade", cmd_upgrade },
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static const char short_usage[] =
	"Usage: " TOOL_NAME " info|check|dump|list|rm|create|upgrade|help ...\n";

int main(int argc, char **argv)
{
	if (argc < 2)
		return tool_usage_error(short_usage, "missing command");
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
		print_help();
		return TOOL_OK;
	}
	if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
		printf(TOOL_NAME " %s (pool format %d)\n", PMT_VERSION, POOL_FORMAT_VERSION);
		return TOOL_OK;
	}
	if (strcmp(cmd, "help") == 0) {
		if (argc == 2) {
			print_help();
			return TOOL_OK;
		}
		const struct command *c = find_command(argv[2]);
		if (c == NULL || argc > 3)
			return tool_usage_error(short_usage, "help: unknown command '%s'", argv[2]);
		/* Each command prints its own help for --help. */
		char *help_argv[] = { argv[2], (char *)"--help", NULL };
		return c->run(2, help_argv);
	}
	const struct command *c = find_command(cmd);
	if (c == NULL) {
		if (cmd[0] == '-')
			return tool_usage_error(short_usage, "unknown option '%s'", cmd);
		return tool_usage_error(short_usage, "unknown command '%s'", cmd);
	}
	return c->run(argc - 1, argv + 1);
}
