/* config -- environment options.  See config.h. */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char *program_invocation_short_name;

static const char *const heap_names[] = { "nvmalloc", "malloc" };
static const char *const tracker_names[] = { "auto", "uffd", "mprotect" };
static const char *const nvm_names[] = { "auto", "pmem", "msync", "sim" };

const char *config_heap_name(enum heap_mode m) { return heap_names[m]; }
const char *config_tracker_name(enum tracker_kind t) { return tracker_names[t]; }
static const char *const writeback_names[] = { "guarded", "paused" };
const char *config_writeback_name(enum writeback_kind w) { return writeback_names[w]; }
const char *config_nvm_name(enum nvm_kind n) { return nvm_names[n]; }
static const char *const restore_names[] = { "auto", "eager", "lazy" };
const char *config_restore_name(enum restore_policy r) { return restore_names[r]; }

/* The default pool is per program and per user, outside the current
 * directory, on ordinary storage so that it is really durable:
 * $XDG_DATA_HOME/pmthreads/<program>.pool, else
 * $HOME/.local/share/pmthreads/<program>.pool, else
 * /tmp/pmthreads-<uid>/<program>.pool. */
static void default_pool_path(char *out, size_t len)
{
	const char *prog = program_invocation_short_name;
	if (prog == NULL || prog[0] == '\0')
		prog = "program";
	const char *xdg = getenv("XDG_DATA_HOME");
	const char *home = getenv("HOME");
	int n;
	if (xdg != NULL && xdg[0] == '/')
		n = snprintf(out, len, "%s/pmthreads/%s.pool", xdg, prog);
	else if (home != NULL && home[0] == '/')
		n = snprintf(out, len, "%s/.local/share/pmthreads/%s.pool", home, prog);
	else
		n = snprintf(out, len, "/tmp/pmthreads-%u/%s.pool", (unsigned)getuid(), prog);
	if (n < 0 || (size_t)n >= len)
		snprintf(out, len, "/tmp/pmthreads-%u/pool", (unsigned)getuid());
}

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	default_pool_path(c->pool_path, sizeof(c->pool_path));
	c->pool_path_is_default = true;
	c->pool_size = CONFIG_DEFAULT_POOL_SIZE;
	c->interval_ms = CONFIG_DEFAULT_INTERVAL_MS;
	c->heap = HEAP_NVMALLOC;
	c->tracker = TRACKER_AUTO;
	c->nvm = NVM_AUTO;
	c->verbose = 0;
	c->check = false;
	c->nvm_latency_ns = 0;
	c->shadow_base = CONFIG_DEFAULT_SHADOW_BASE;
}

int config_parse_size(const char *s, uint64_t *out)
{
	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -1;
	}
	if (*end == 'i' && shift != 0)
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0')
		return -1;
	if (shift != 0 && v > (~0ULL >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_uint(const char *name, const char *s, unsigned long long min,
		      unsigned long long max, unsigned long long *out)
{
	errno = 0;
	char *end;
	unsigned long long v = 0;
	bool ok = s[0] >= '0' && s[0] <= '9';
	if (ok) {
		v = strtoull(s, &end, 0);
		ok = errno == 0 && *end == '\0' && v >= min && v <= max;
	}
	if (!ok) {
		err_set("%s=\"%s\" is not valid: expected a whole number from %llu to %llu",
			name, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_choice(const char *name, const char *s, const char *const *names,
			size_t n, const char *accepted, int *out)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = (int)i;
			return 0;
		}
	}
	err_set("%s=\"%s\" is not valid: expected one of %s", name, s, accepted);
	return -1;
}

static int copy_path(const char *name, const char *s, char *dst, size_t len)
{
	size_t n = strlen(s);
	if (n == 0 || n >= len) {
		err_set("%s=\"%s\" is not valid: expected a non-empty path shorter than %zu bytes",
			name, s, len);
		return -1;
	}
	memcpy(dst, s, n + 1);
	return 0;
}

int config_from_env(struct config *c)
{
	config_defaults(c);
	const char *v;
	unsigned long long u;
	int choice;

	if ((v = getenv("PMTHREADS_POOL")) != NULL) {
		if (copy_path("PMTHREADS_POOL", v, c->pool_path, sizeof(c->pool_path)) != 0)
			return -1;
		c->pool_path_is_default = false;
	}
	if ((v = getenv("PMTHREADS_POOL_SIZE")) != NULL) {
		uint64_t sz;
		if (config_parse_size(v, &sz) != 0 || sz < CONFIG_MIN_POOL_SIZE ||
		    sz > CONFIG_MAX_POOL_SIZE) {
			err_set("PMTHREADS_POOL_SIZE=\"%s\" is not valid: expected a size from 1M to 1T, "
				"e.g. 256M or 4G", v);
			return -1;
		}
		c->pool_size = sz;
	}
	if ((v = getenv("PMTHREADS_INTERVAL_MS")) != NULL) {
		if (parse_uint("PMTHREADS_INTERVAL_MS", v, 1, 3600000, &u) != 0)
			return -1;
		c->interval_ms = (unsigned)u;
	}
	if ((v = getenv("PMTHREADS_HEAP")) != NULL) {
		if (parse_choice("PMTHREADS_HEAP", v, heap_names, 2, "nvmalloc, malloc", &choice) != 0)
			return -1;
		c->heap = (enum heap_mode)choice;
	}
	if ((v = getenv("PMTHREADS_TRACKER")) != NULL) {
		if (parse_choice("PMTHREADS_TRACKER", v, tracker_names, 3, "auto, uffd, mprotect",
				 &choice) != 0)
			return -1;
		c->tracker = (enum tracker_kind)choice;
	}
	if ((v = getenv("PMTHREADS_WRITEBACK")) != NULL) {
		if (parse_choice("PMTHREADS_WRITEBACK", v, writeback_names, 2, "guarded, paused",
				 &choice) != 0)
			return -1;
		c->writeback = (enum writeback_kind)choice;
	}
	if ((v = getenv("PMTHREADS_RESTORE")) != NULL) {
		if (parse_choice("PMTHREADS_RESTORE", v, restore_names, 3, "auto, eager, lazy",
				 &choice) != 0)
			return -1;
		c->restore = (enum restore_policy)choice;
	}
	if ((v = getenv("PMTHREADS_NVM")) != NULL) {
		/* "sim" is for tests, which select it through the API. */
		if (parse_choice("PMTHREADS_NVM", v, nvm_names, 3, "auto, pmem, msync", &choice) != 0)
			return -1;
		c->nvm = (enum nvm_kind)choice;
	}
	if ((v = getenv("PMTHREADS_STATS")) != NULL && v[0] != '\0') {
		if (copy_path("PMTHREADS_STATS", v, c->stats_path, sizeof(c->stats_path)) != 0)
			return -1;
	}
	if ((v = getenv("PMTHREADS_EPOCH_LOG")) != NULL && v[0] != '\0') {
		if (copy_path("PMTHREADS_EPOCH_LOG", v, c->epoch_log_path,
			      sizeof(c->epoch_log_path)) != 0)
			return -1;
	}
	if ((v = getenv("PMTHREADS_VERBOSE")) != NULL) {
		if (parse_uint("PMTHREADS_VERBOSE", v, 0, 2, &u) != 0)
			return -1;
		c->verbose = (int)u;
	}
	if ((v = getenv("PMTHREADS_CHECK")) != NULL) {
		if (parse_uint("PMTHREADS_CHECK", v, 0, 1, &u) != 0)
			return -1;
		c->check = u != 0;
	}
	if ((v = getenv("PMTHREADS_NVM_LATENCY_NS")) != NULL) {
		if (parse_uint("PMTHREADS_NVM_LATENCY_NS", v, 0, 1000000, &u) != 0)
			return -1;
		c->nvm_latency_ns = (unsigned)u;
	}
	if ((v = getenv("PMTHREADS_SHADOW_BASE")) != NULL) {
		if (parse_uint("PMTHREADS_SHADOW_BASE", v, 1ULL << 32, 0x7e0000000000ULL, &u) != 0)
			return -1;
		if (u & 0x1fffff) {
			err_set("PMTHREADS_SHADOW_BASE=\"%s\" is not valid: expected a 2 MiB-aligned "
				"address such as 0x600000000000", v);
			return -1;
		}
		c->shadow_base = u;
	}
	return 0;
}
