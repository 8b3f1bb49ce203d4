/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * open -- opening a pool for inspection: read-only, never created, never
 * initialised, with the pool module's explanation when it is refused.
 */
#include "tool.h"

#include "base/log.h"
#include "persist/nvm_log.h"

#include <pthread.h>
#include <string.h>

/* The log's replay helper (nvm_log_set_helper): a plain thread here. */
static int start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	return pthread_create(th, NULL, fn, arg);
}

static struct pool *open_pool(const char *path, bool inspect, bool legacy)
{
	struct pool_open_options o;
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.inspect = inspect;
	o.legacy = legacy;
	o.read_only = true;	/* O_RDONLY, shared lock, PROT_READ: the tool cannot write */
	o.create = false;
	o.creator = NULL;	/* any program's pool */
	o.nvm = NVM_AUTO;
	struct pool *p = NULL;
	nvm_log_set_helper(start_thread, pthread_join, NULL, false);
	err_clear();
	if (pool_open(&p, &o) != 0) {
		const char *why = err_get();
		tool_error("%s", why[0] != '\0' ? why : "cannot open the pool (no reason given)");
		return NULL;
	}
	return p;
}

struct pool *tool_open_pool(const char *path) { return open_pool(path, false, false); }
struct pool *tool_open_pool_inspect(const char *path) { return open_pool(path, true, false); }
struct pool *tool_open_pool_legacy(const char *path) { return open_pool(path, true, true); }
