/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * open -- opening a pool for inspection: read-only, never created, never
 * initialised, with the pool module's explanation when it is refused.
 */
#include "tool.h"

#include "base/log.h"

#include <string.h>

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
