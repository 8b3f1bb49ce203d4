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
