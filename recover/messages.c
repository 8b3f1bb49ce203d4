/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * messages -- the error and usage printing every command shares.
 */
#include "tool.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>

void tool_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, TOOL_NAME ": error: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int tool_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, TOOL_NAME ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	fprintf(stderr, "%sTry '" TOOL_NAME " --help' for more information.\n", usage);
	return TOOL_USAGE;
}

int tool_bad_option(const char *usage, const char *cmd, char **argv)
{
	/* optopt is the character of an unknown short option and 0 for an
	 * unknown long one, whose text getopt has just stepped over. */
	if (optopt != 0)
		return tool_usage_error(usage, "%s: unknown option '-%c'", cmd, optopt);
	return tool_usage_error(usage, "%s: unknown option '%s'", cmd, argv[optind - 1]);
}

int tool_parse_pool_command(int argc, char **argv, const char *cmd, const char *help,
			    const char *usage, bool *json, const char **path)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	if (json != NULL)
		*json = false;
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			if (json == NULL)
				return tool_bad_option(usage, cmd, argv);
			*json = true;
			break;
		case 'h': fputs(help, stdout); return TOOL_OK;
		default: return tool_bad_option(usage, cmd, argv);
		}
	}
	if (argc - optind != 1)
		return tool_usage_error(usage, "%s: expected one POOL, got %d operands", cmd,
					argc - optind);
	*path = argv[optind];
	return -1;
}

void tool_human_size(uint64_t bytes, char *out, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024.0 && u < 4) {
		v /= 1024.0;
		u++;
	}
	snprintf(out, len, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}
