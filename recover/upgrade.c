/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * upgrade -- a pool of an older format version (2 to POOL_FORMAT_VERSION - 1),
 * which the runtime refuses,
 * converted to the current format keeping the program's data: checked as
 * `check` checks, then replaced by a new file (pool_upgrade).  A pool that
 * fails a check, or that a process holds, is left as it is.
 */
#include "tool.h"

#include "base/log.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char upgrade_usage[] = "Usage: " TOOL_NAME " upgrade POOL\n";
static const char upgrade_help[] =
	"Usage: " TOOL_NAME " upgrade POOL\n"
	"Convert a pool of an older format version (2 to %d), which this pmthreads\n"
	"refuses to open, into a pool of the current format (%d) holding the same data:\n"
	"the image the program's next start would recover (its last durable epoch,\n"
	"VER_d, kept), each page with the checksum the current format records.\n"
	"The pool is first checked as `check` does; one with problems is not\n"
	"upgraded.  A pool in use by a running process is refused.\n"
	"\n"
	"The new pool is written beside the old one under a temporary name\n"
	"(.POOL.pmthreads-upgrading, in the same directory, which needs free space\n"
	"for the heap's used pages), synced, then renamed over POOL: a crash at any\n"
	"point leaves either the old pool (run upgrade again) or the new one.  A\n"
	"pool of the current format is left as it is (nothing to do, exit 0).\n"
	"\n"
	"Exit status: 0 upgraded or nothing to do, 1 the pool was not upgraded (the\n"
	"reason is printed), 2 usage.\n"
	"\n"
	"  -h, --help  this text\n";

/* Tests only: PMTHREADS_RECOVER_UPGRADE_KILL_AT=N ends the tool with SIGKILL
 * right after the N-th step of the upgrade (1: temporary file created ...
 * 7: directory synced), as a crash there would. */
struct steps {
	int done;
	int kill_at;
};

static void on_step(const char *what, void *arg)
{
	struct steps *s = arg;
	s->done++;
	if (s->done == s->kill_at) {
		fflush(stdout);
		fprintf(stderr, TOOL_NAME ": test hook: killed after step %d (%s)\n", s->done, what);
		raise(SIGKILL);
	}
}

int cmd_upgrade(int argc, char **argv)
{
	const char *path;
	/* The format versions from the one constant, POOL_FORMAT_VERSION. */
	char help[sizeof(upgrade_help) + 16];
	snprintf(help, sizeof(help), upgrade_help, POOL_FORMAT_VERSION - 1, POOL_FORMAT_VERSION);
	int rc = tool_parse_pool_command(argc, argv, "upgrade", help, upgrade_usage, NULL,
					 &path);
	if (rc >= 0)
		return rc;
	struct pool *p = tool_open_pool_legacy(path);
	if (p == NULL) {
		printf("%s: not upgraded (see the error above)\n", path);
		return TOOL_PROBLEM;
	}
	if (p->format_version == POOL_FORMAT_VERSION) {
		printf("%s: already format version %u, nothing to do\n", path, POOL_FORMAT_VERSION);
		pool_close(p);
		return TOOL_OK;
	}
	unsigned problems = tool_check_open_pool(p);
	if (problems != 0) {
		tool_error("pool %s fails its checks (%u problem%s, listed above), so it was not "
			   "upgraded and was left untouched: restore it from a backup, or save what "
			   "can be saved with '" TOOL_NAME " dump' using the pmthreads that made it",
			   path, problems, problems == 1 ? "" : "s");
		pool_close(p);
		return TOOL_PROBLEM;
	}
	struct steps steps = { 0, 0 };
	const char *kill_at = getenv("PMTHREADS_RECOVER_UPGRADE_KILL_AT");
	if (kill_at != NULL)
		steps.kill_at = atoi(kill_at);
	struct pool_upgrade_result r;
	err_clear();
	if (pool_upgrade(p, &r, on_step, &steps) != 0) {	/* closes p */
		tool_error("%s", err_get());
		printf("%s: not upgraded; the old pool is untouched\n", path);
		return TOOL_PROBLEM;
	}
	printf("%s: upgraded from format version %u to %u: %" PRIu64 " page%s copied, VER_d %"
	       PRIu64 " kept\n", path, r.from_version, POOL_FORMAT_VERSION, r.pages_copied,
	       r.pages_copied == 1 ? "" : "s", r.ver_d);
	return TOOL_OK;
}
