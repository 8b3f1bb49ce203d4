/* SPDX-License-Identifier: BSD-3-Clause */
/* config -- the option table and its one parse.  See config.h. */
#include "base/config.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

extern char *program_invocation_short_name;
extern char **environ;

static const char *const heap_names[] = { "nvmalloc", "malloc" };
static const char *const tracker_names[] = { "auto", "uffd", "mprotect" };
/* "sim" is for tests, which select it through the pool API. */
static const char *const nvm_names[] = { "auto", "pmem", "msync", "log", "sim" };
static const char *const writeback_names[] = { "live", "paused" };
static const char *const check_names[] = { "0", "1", "fail" };
static const char *const output_names[] = { "off", "commit" };

const char *config_heap_name(enum heap_mode m) { return heap_names[m]; }
const char *config_tracker_name(enum tracker_kind t) { return tracker_names[t]; }
const char *config_writeback_name(enum writeback_kind w) { return writeback_names[w]; }
const char *config_nvm_name(enum nvm_kind n) { return nvm_names[n]; }
static const char *const restore_names[] = { "auto", "eager", "lazy" };

/* A size in the largest unit that divides it: 256K, 1M, 64T. */
static const char *size_text(unsigned long long v, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;
	while (u < 3 && v != 0 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", v);
	else
		snprintf(buf, len, "%llu%c", v, units[u]);
	return buf;
}

#define FIELD(f) offsetof(struct config, f)
#define NO_FIELD ((size_t)-1)

static const struct config_option options[] = {
	{ .env = "PMTHREADS_POOL",
	  .flag = "--pool",
	  .metavar = "PATH",
	  .help = "the pool file",
	  .kind = CONFIG_PATH,
	  .def_text = "~/.local/share/pmthreads/PROGRAM.pool",
	  .offset = FIELD(pool_path) },
	{ .env = "PMTHREADS_POOL_SIZE",
	  .flag = "--pool-size",
	  .metavar = "SIZE",
	  .help = "heap capacity of a new pool (K/M/G/T suffixes)",
	  .kind = CONFIG_SIZE,
	  .min = CONFIG_MIN_POOL_SIZE, .max = CONFIG_MAX_POOL_SIZE,
	  .def = CONFIG_DEFAULT_POOL_SIZE,
	  .offset = FIELD(pool_size) },
	{ .env = "PMTHREADS_LOG_SIZE",
	  .flag = "--log-size",
	  .metavar = "SIZE",
	  .help = "the redo log of a new pool, for the log backend, 256K to 64G (auto: a quarter "
		  "of the heap, 256K to 64M)",
	  .kind = CONFIG_SIZE,
	  .min = 256ULL << 10, .max = 64ULL << 30,
	  .def_text = "auto",
	  .offset = FIELD(log_size) },
	{ .env = "PMTHREADS_INTERVAL_MS",
	  .flag = "--interval",
	  .metavar = "MS",
	  .help = "the epoch interval in milliseconds",
	  .kind = CONFIG_UINT,
	  .min = 1, .max = 3600000,
	  .def = 100,
	  .offset = FIELD(interval_ms) },
	{ .env = "PMTHREADS_HEAP",
	  .flag = "--heap",
	  .metavar = "MODE",
	  .help = "nvmalloc: only nvmalloc'd objects persist; malloc: the whole malloc family",
	  .kind = CONFIG_CHOICE,
	  .choices = heap_names, .n_choices = 2,
	  .def = HEAP_NVMALLOC,
	  .offset = FIELD(heap) },
	{ .env = "PMTHREADS_TRACKER",
	  .flag = "--tracker",
	  .metavar = "KIND",
	  .help = "write tracking: auto, uffd (userfaultfd write-protect), mprotect",
	  .kind = CONFIG_CHOICE,
	  .choices = tracker_names, .n_choices = 3,
	  .def = TRACKER_AUTO,
	  .offset = FIELD(tracker) },
	{ .env = "PMTHREADS_WRITEBACK",
	  .flag = "--writeback",
	  .metavar = "WHEN",
	  .help = "live: write back after the pause, hot pages copied in it; paused: copy all in it",
	  .kind = CONFIG_CHOICE,
	  .choices = writeback_names, .n_choices = 2,
	  .def = WRITEBACK_LIVE,
	  .offset = FIELD(writeback) },
	{ .env = "PMTHREADS_RESTORE",
	  .flag = "--restore",
	  .metavar = "HOW",
	  .help = "after a crash: lazy (pages on first touch), eager (copy all first), auto",
	  .kind = CONFIG_CHOICE,
	  .choices = restore_names, .n_choices = 3,
	  .def = RESTORE_AUTO,
	  .offset = FIELD(restore) },
	{ .env = "PMTHREADS_NVM",
	  .flag = "--nvm",
	  .metavar = "KIND",
	  .help = "auto (pmem on persistent memory, else log), pmem (cache-line flushes), log (a redo "
		  "log in the pool: one device flush per epoch) or msync (every fence an msync)",
	  .kind = CONFIG_CHOICE,
	  .choices = nvm_names, .n_choices = 4,
	  .def = NVM_AUTO,
	  .offset = FIELD(nvm) },
	{ .env = "PMTHREADS_NVM_LATENCY_NS",
	  .flag = "--nvm-latency",
	  .metavar = "NS",
	  .help = "emulated extra write latency per flushed 64-byte line",
	  .kind = CONFIG_UINT,
	  .min = 0, .max = 1000000,
	  .offset = FIELD(nvm_latency_ns) },
	{ .env = "PMTHREADS_STATS",
	  .flag = "--stats",
	  .metavar = "FILE",
	  .help = "JSON statistics, rewritten every second and at exit (-: stderr at exit)",
	  .kind = CONFIG_PATH,
	  .def_text = "off",
	  .offset = FIELD(stats_path) },
	{ .env = "PMTHREADS_EPOCH_LOG",
	  .flag = "--epoch-log",
	  .metavar = "FILE",
	  .help = "one CSV line per epoch",
	  .kind = CONFIG_PATH,
	  .def_text = "off",
	  .offset = FIELD(epoch_log_path) },
	{ .env = "PMTHREADS_CHECK",
	  .flag = "--check",
	  .metavar = "fail",
	  .optional_arg = true,
	  .flag_value = "1",
	  .help = "1: report writes to the heap outside any lock; fail: and exit 1 if any",
	  .kind = CONFIG_CHOICE,
	  .choices = check_names, .n_choices = 3,
	  .def = CHECK_OFF,
	  .offset = FIELD(check) },
	{ .env = "PMTHREADS_STRICT",
	  .flag = "--strict",
	  .flag_value = "1",
	  .help = "1: a configuration or pool error, or a failed write-back, exits instead of running "
		  "unpersisted",
	  .kind = CONFIG_BOOL,
	  .min = 0, .max = 1,
	  .offset = FIELD(strict) },
	{ .env = "PMTHREADS_FOLLOW_CHILDREN",
	  .flag = "--follow-children",
	  .flag_value = "1",
	  .help = "1: programs the target starts are persisted too (each its own pool)",
	  .kind = CONFIG_BOOL,
	  .min = 0, .max = 1,
	  .offset = FIELD(follow_children) },
	{ .env = "PMTHREADS_OUTPUT",
	  .flag = "--output-commit",
	  .flag_value = "commit",
	  .help = "commit: output to sockets and pipes is held until the heap state is durable",
	  .kind = CONFIG_CHOICE,
	  .choices = output_names, .n_choices = 2,
	  .def = OUTPUT_OFF,
	  .offset = FIELD(output) },
	{ .env = "PMTHREADS_NOT_FASE",
	  .flag = "--not-fase",
	  .metavar = "FUNCS",
	  .help = "locks taken by these functions (comma-separated) are no critical sections: they "
		  "never hold epochs up (see pmthreads(7) for the risk)",
	  .kind = CONFIG_NAMES,
	  .def_text = "none",
	  .offset = FIELD(not_fase) },
	{ .env = "PMTHREADS_SYNC_TIMEOUT_MS",
	  .flag = "--sync-timeout",
	  .metavar = "MS",
	  .help = "pmthreads_sync fails with ETIMEDOUT when no quiescent point was possible this long",
	  .kind = CONFIG_UINT,
	  .min = 1, .max = 86400000,
	  .def = CONFIG_DEFAULT_SYNC_TIMEOUT_MS,
	  .offset = FIELD(sync_timeout_ms) },
	{ .env = "PMTHREADS_VERBOSE",
	  .flag = "--verbose",
	  .flag_value = "1",
	  .help = "0: errors only; 1: print the configuration and pool at start; 2: debug",
	  .kind = CONFIG_UINT,
	  .min = 0, .max = 2,
	  .offset = FIELD(verbose) },
	{ .env = "PMTHREADS_SHADOW_BASE",
	  .flag = "--shadow-base",
	  .metavar = "ADDR",
	  .help = "heap address for new pools (2 MiB aligned)",
	  .kind = CONFIG_ADDR,
	  .min = 1ULL << 32, .max = 0x7e0000000000ULL,
	  .def = 0x600000000000ULL,
	  .offset = FIELD(shadow_base) },
	{ .env = "PMTHREADS_PROGRAM",
	  .flag = "--program",
	  .metavar = "PATH",
	  .help = "the one executable that owns the pool (set by pmthreads run)",
	  .kind = CONFIG_PATH,
	  .def_text = "COMMAND's program",
	  .offset = FIELD(program) },
	{ .env = "PMTHREADS_LIBRARY",
	  .metavar = "PATH",
	  .help = "the library pmthreads run preloads",
	  .kind = CONFIG_TOOL,
	  .def_text = "the installed one",
	  .offset = NO_FIELD },
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

const struct config_option *config_options(size_t *count)
{
	*count = N_OPTIONS;
	return options;
}

const struct config_option *config_option_by_env(const char *env)
{
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (strcmp(options[i].env, env) == 0)
			return &options[i];
	return NULL;
}

const char *config_default_text(const struct config_option *o, char *buf, size_t len)
{
	if (o->def_text != NULL)
		return o->def_text;
	switch (o->kind) {
	case CONFIG_SIZE:
		return size_text(o->def, buf, len);
	case CONFIG_ADDR:
		snprintf(buf, len, "%#llx", o->def);
		return buf;
	case CONFIG_CHOICE:
		return o->choices[o->def];
	default:
		snprintf(buf, len, "%llu", o->def);
		return buf;
	}
}

/* v (already checked against o) into o's field of c; the kinds held as
 * text are left alone. */
static void store_number(struct config *c, const struct config_option *o, unsigned long long v)
{
	void *field = (char *)c + o->offset;
	switch (o->kind) {
	case CONFIG_SIZE:
	case CONFIG_ADDR:
		*(uint64_t *)field = v;
		break;
	case CONFIG_UINT:
		*(unsigned *)field = (unsigned)v;
		break;
	case CONFIG_BOOL:
		*(bool *)field = v != 0;
		break;
	case CONFIG_CHOICE:
		/* Every choice field is an enum. */
		*(int *)field = (int)v;
		break;
	default:
		break;
	}
}

/* A set-user-ID (or capability-raising) program must not honour the
 * environment of the user who started it. */
static const char *env_get(const char *name)
{
	return secure_getenv(name);
}

/* A program in secure-execution mode (set-user-ID, set-group-ID, file
 * capabilities): its caller may be less privileged, and chooses argv[0], the
 * environment and everything under its own home and /tmp.  So the pool is
 * CONFIG_SECURE_POOL_DIR/<effective uid>/<the executable's file name>.pool,
 * whose directories runtime/privilege.c checks before use. */
static void secure_pool_path(struct config *c)
{
	char exe[PATH_MAX];
	const char *base = "program";
	ssize_t n = prim_readlink("/proc/self/exe", exe, sizeof(exe));
	if (n > 0) {
		const char *slash = strrchr(exe, '/');
		base = slash != NULL ? slash + 1 : exe;
	}
	int w = snprintf(c->pool_path, sizeof(c->pool_path), "%s/%u/%s.pool",
			 CONFIG_SECURE_POOL_DIR, (unsigned)prim_geteuid(), base);
	if (w < 0 || (size_t)w >= sizeof(c->pool_path))
		snprintf(c->pool_path, sizeof(c->pool_path), "%s/%u/program.pool",
			 CONFIG_SECURE_POOL_DIR, (unsigned)prim_geteuid());
	c->pool_dir_is_tmp = false;
	c->pool_dir_is_secure = true;
}

/* The default pool is per program and per user, outside the current
 * directory, on ordinary storage so that it is really durable:
 * $XDG_DATA_HOME/pmthreads/<program>.pool, else
 * $HOME/.local/share/pmthreads/<program>.pool, else
 * /tmp/pmthreads-<uid>/<program>.pool (used only when that directory is the
 * user's own with mode 0700; runtime.c checks). */
static void default_pool_path(struct config *c)
{
	char *out = c->pool_path;
	size_t len = sizeof(c->pool_path);
	const char *prog = program_invocation_short_name;
	if (prog == NULL || prog[0] == '\0')
		prog = "program";
	c->pool_dir_is_secure = false;
	if (getauxval(AT_SECURE) != 0) {
		secure_pool_path(c);
		return;
	}
	const char *xdg = env_get("XDG_DATA_HOME");
	const char *home = env_get("HOME");
	int n;
	c->pool_dir_is_tmp = false;
	if (xdg != NULL && xdg[0] == '/') {
		n = snprintf(out, len, "%s/pmthreads/%s.pool", xdg, prog);
	} else if (home != NULL && home[0] == '/') {
		n = snprintf(out, len, "%s/.local/share/pmthreads/%s.pool", home, prog);
	} else {
		n = snprintf(out, len, "/tmp/pmthreads-%u/%s.pool", (unsigned)prim_getuid(), prog);
		c->pool_dir_is_tmp = true;
	}
	if (n < 0 || (size_t)n >= len) {
		snprintf(out, len, "/tmp/pmthreads-%u/pool", (unsigned)prim_getuid());
		c->pool_dir_is_tmp = true;
	}
}

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	default_pool_path(c);
	c->pool_path_is_default = true;
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (options[i].offset != NO_FIELD)
			store_number(c, &options[i], options[i].def);
	c->interval_ms_asked = c->interval_ms;
	c->tracker_asked = c->tracker;
}

/* A decimal number: digits only, no sign, no base prefix (strtoull's base 0
 * would read "010" as 8). */
static int parse_decimal(const char *s, const char **end, unsigned long long *out)
{
	if (*s < '0' || *s > '9')
		return -1;
	unsigned long long v = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (~0ULL - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*end = s;
	*out = v;
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	if (s == NULL)
		return -1;
	const char *end;
	unsigned long long v;
	if (parse_decimal(s, &end, &v) != 0)
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

static int parse_uint(const char *s, unsigned long long *out)
{
	const char *end;
	return parse_decimal(s, &end, out) == 0 && *end == '\0' ? 0 : -1;
}

/* An address: decimal, or hexadecimal with an explicit 0x. */
static int parse_addr(const char *s, unsigned long long *out)
{
	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return parse_uint(s, out);
	s += 2;
	if (*s == '\0')
		return -1;
	unsigned long long v = 0;
	for (; *s != '\0'; s++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (*s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			return -1;
		if (v >> 60)
			return -1;
		v = v << 4 | d;
	}
	*out = v;
	return 0;
}

static void accepted_choices(const struct config_option *o, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < o->n_choices; i++) {
		int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", o->choices[i]);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

int config_set(struct config *c, const struct config_option *o, const char *v)
{
	void *field = o->offset == NO_FIELD ? NULL : (char *)c + o->offset;
	unsigned long long u;
	uint64_t sz;
	char accepted[128];

	switch (o->kind) {
	case CONFIG_TOOL:
		return 0;
	case CONFIG_PATH: {
		size_t n = strlen(v);
		bool may_be_empty = field != c->pool_path;
		if ((n == 0 && !may_be_empty) || n >= PATH_MAX) {
			err_set("%s=\"%s\" is not valid: expected a non-empty path shorter than %d "
				"bytes", o->env, v, PATH_MAX);
			return -1;
		}
		memcpy(field, v, n + 1);
		if (field == c->pool_path) {
			c->pool_path_is_default = false;
			c->pool_dir_is_tmp = false;
			c->pool_dir_is_secure = false;
		}
		return 0;
	}
	case CONFIG_NAMES: {
		/* Symbol names: what a C, C++ (mangled) or versioned symbol
		 * may hold, separated by single commas. */
		size_t n = strlen(v);
		bool ok = n < PATH_MAX;
		for (size_t i = 0; ok && i < n; i++) {
			char ch = v[i];
			bool name_char = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
					 (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
					 ch == '$' || ch == '@';
			ok = name_char || (ch == ',' && i > 0 && i + 1 < n && v[i + 1] != ',');
		}
		if (!ok) {
			err_set("%s=\"%s\" is not valid: expected function names separated by commas "
				"(no spaces), e.g. moduleAcquireGIL,moduleTryAcquireGIL", o->env, v);
			return -1;
		}
		memcpy(field, v, n + 1);
		return 0;
	}
	case CONFIG_SIZE:
		if (config_parse_size(v, &sz) != 0 || sz < o->min || sz > o->max) {
			char lo[32], hi[32];
			err_set("%s=\"%s\" is not valid: expected a decimal size from %s to %s, "
				"e.g. 256M or 4G", o->env, v, size_text(o->min, lo, sizeof(lo)),
				size_text(o->max, hi, sizeof(hi)));
			return -1;
		}
		store_number(c, o, sz);
		if (field == &c->pool_size)
			c->pool_size_given = true;
		return 0;
	case CONFIG_UINT:
		if (parse_uint(v, &u) != 0 || u < o->min || u > o->max) {
			err_set("%s=\"%s\" is not valid: expected a decimal whole number from %llu "
				"to %llu", o->env, v, o->min, o->max);
			return -1;
		}
		store_number(c, o, u);
		if (field == &c->verbose)
			c->verbose_given = true;
		return 0;
	case CONFIG_ADDR:
		if (parse_addr(v, &u) != 0 || u < o->min || u > o->max || (u & 0x1fffff) != 0) {
			err_set("%s=\"%s\" is not valid: expected a 2 MiB-aligned address from "
				"%#llx to %#llx such as 0x600000000000", o->env, v, o->min, o->max);
			return -1;
		}
		store_number(c, o, u);
		return 0;
	case CONFIG_BOOL:
		if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
			err_set("%s=\"%s\" is not valid: expected 0 or 1", o->env, v);
			return -1;
		}
		store_number(c, o, v[0] == '1');
		return 0;
	case CONFIG_CHOICE:
		for (unsigned i = 0; i < o->n_choices; i++) {
			if (strcmp(v, o->choices[i]) == 0) {
				store_number(c, o, i);
				return 0;
			}
		}
		accepted_choices(o, accepted, sizeof(accepted));
		err_set("%s=\"%s\" is not valid: expected one of %s", o->env, v, accepted);
		return -1;
	}
	return -1;
}

/* Edit distance of two short names, for "did you mean". */
static unsigned distance(const char *a, size_t la, const char *b)
{
	enum { MAX = 48 };
	size_t lb = strlen(b);
	if (la >= MAX || lb >= MAX)
		return MAX;
	unsigned row[MAX + 1];
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned up = row[j];
			unsigned best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* Every PMTHREADS_* variable must be one of the table's: a misspelt
 * PMTHREADS_INTERVALMS must not silently leave the default in force. */
static int check_unknown_variables(void)
{
	if (environ == NULL)
		return 0;
	for (char **e = environ; *e != NULL; e++) {
		if (strncmp(*e, "PMTHREADS_", 10) != 0)
			continue;
		const char *eq = strchr(*e, '=');
		size_t len = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
		const struct config_option *best = NULL;
		unsigned best_d = ~0u;
		bool known = false;
		for (size_t i = 0; i < N_OPTIONS && !known; i++) {
			if (strlen(options[i].env) == len && strncmp(options[i].env, *e, len) == 0)
				known = true;
			unsigned d = distance(*e, len, options[i].env);
			if (d < best_d) {
				best_d = d;
				best = &options[i];
			}
		}
		if (known)
			continue;
		if (best != NULL && best_d <= 3)
			err_set("%.*s is not a pmthreads variable (did you mean %s?); unset it or "
				"correct its name (pmthreads --help lists them all)", (int)len, *e,
				best->env);
		else
			err_set("%.*s is not a pmthreads variable; unset it (pmthreads --help lists "
				"them all)", (int)len, *e);
		return -1;
	}
	return 0;
}

/* PMTHREADS_CHECK (fase_checker.h): the checker sees writes only through the
 * mprotect tracker's fault path, and only first writes per epoch fault, so
 * check mode uses that tracker and a short interval.  Done here, once, so
 * that everything reading the configuration (the runtime, the statistics)
 * sees the values in force. */
static void apply_check_mode(struct config *c)
{
	c->interval_ms_asked = c->interval_ms;
	c->tracker_asked = c->tracker;
	if (c->check == CHECK_OFF)
		return;
	c->tracker = TRACKER_MPROTECT;
	if (c->interval_ms > CONFIG_CHECK_INTERVAL_MS)
		c->interval_ms = CONFIG_CHECK_INTERVAL_MS;
}

int config_from_env(struct config *c)
{
	config_defaults(c);
	if (getauxval(AT_SECURE) != 0)
		return 0;	/* set-user-ID: the environment is not ours to honour */
	if (check_unknown_variables() != 0)
		return -1;
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const char *v = env_get(options[i].env);
		if (v == NULL)
			continue;
		if (options[i].kind == CONFIG_PATH && v[0] == '\0' &&
		    options[i].offset != FIELD(pool_path))
			continue;	/* PMTHREADS_STATS= : off */
		if (config_set(c, &options[i], v) != 0)
			return -1;
	}
	apply_check_mode(c);
	return 0;
}

static prim_lock_t once_lock = PRIM_LOCK_INIT;
/* Held while the environment is read, once, in the library's constructor;
 * a child that found it held reads it again. */
PRIM_LOCK_NAMED(once_lock, config_once, "base/config: the configuration's one reading",
		PRIM_FORK_RESET);
static bool parsed;
static struct config the_config;
static char parse_error[1024];

int config_log_level(const struct config *c)
{
	if (c->verbose >= 2)
		return LOG_DEBUG;
	if (c->verbose == 1)
		return LOG_INFO;
	return c->verbose_given ? LOG_ERR : LOG_WARN;
}

const struct config *config_get(void)
{
	if (__atomic_load_n(&parsed, __ATOMIC_ACQUIRE))
		return &the_config;
	prim_lock(&once_lock);
	if (!parsed) {
		if (config_from_env(&the_config) != 0) {
			snprintf(parse_error, sizeof(parse_error), "%s", err_get());
			config_defaults(&the_config);
			apply_check_mode(&the_config);
			/* PMTHREADS_STRICT is honoured even when another variable
			 * is malformed: the caller must be able to fail closed. */
			const char *s = env_get("PMTHREADS_STRICT");
			the_config.strict = s != NULL && strcmp(s, "1") == 0;
		}
		__atomic_store_n(&parsed, true, __ATOMIC_RELEASE);
	}
	prim_unlock(&once_lock);
	return &the_config;
}

const char *config_error(void)
{
	config_get();
	return parse_error[0] != '\0' ? parse_error : NULL;
}

int config_set_pool(const char *path, uint64_t size)
{
	config_get();
	struct config c;
	prim_lock(&once_lock);
	c = the_config;
	int r = 0;
	if (path != NULL)
		r = config_set(&c, config_option_by_env("PMTHREADS_POOL"), path);
	if (r == 0 && size != 0) {
		char text[32];
		snprintf(text, sizeof(text), "%llu", (unsigned long long)size);
		r = config_set(&c, config_option_by_env("PMTHREADS_POOL_SIZE"), text);
	}
	if (r == 0)
		the_config = c;
	prim_unlock(&once_lock);
	return r;
}
