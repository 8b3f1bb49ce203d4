/* SPDX-License-Identifier: BSD-3-Clause */
/* linkage -- where this library stands among the loaded objects.  See linkage.h. */
#include "runtime/linkage.h"

#include "base/log.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

/* ---- does the program use the API? ---- */

static const char *const api_names[] = { "nvmalloc", "nvrecover", "nvfree", "pmthreads_sync",
					 "pmthreads_durable_epoch",
					 /* nvrecovery.h's names for NVthreads programs */
					 "pmthreads_nvthreads_malloc",
					 "pmthreads_nvthreads_recover" };

/* Whether the string table of s bytes holds one of api_names whole. */
static bool table_names_api(const char *s, size_t strsz)
{
	for (size_t k = 0; k < sizeof(api_names) / sizeof(api_names[0]); k++) {
		size_t n = strlen(api_names[k]);
		for (const char *p = s; p + n < s + strsz;) {
			const char *hit = memmem(p, (size_t)(s + strsz - p), api_names[k], n + 1);
			if (hit == NULL)
				break;
			if (hit == s || hit[-1] == '\0')
				return true;
			p = hit + 1;
		}
	}
	return false;
}

/* Whether the dynamic string table of one loaded object (not this
 * library, whose base is arg) names a function of the API. */
static int names_api(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	const void *own_base = arg;
	if ((const void *)info->dlpi_addr == own_base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		const ElfW(Dyn) *d = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
		uintptr_t strtab = 0;
		size_t strsz = 0;
		for (; d->d_tag != DT_NULL; d++) {
			if (d->d_tag == DT_STRTAB)
				strtab = d->d_un.d_ptr;
			else if (d->d_tag == DT_STRSZ)
				strsz = d->d_un.d_val;
		}
		if (strtab == 0 || strsz == 0)
			return 0;
		/* The loader relocates d_ptr in most objects, not in all
		 * (the vDSO). */
		if (strtab < info->dlpi_addr)
			strtab += info->dlpi_addr;
		return table_names_api((const char *)strtab, strsz);
	}
	return 0;
}

bool linkage_program_uses_api(void)
{
	Dl_info own;
	if (dladdr((void *)linkage_program_uses_api, &own) == 0)
		return true;	/* cannot tell: say nothing */
	return dl_iterate_phdr(names_api, own.dli_fbase) != 0;
}

/* ---- do the program's lock calls reach the wrappers? ---- */

/* One entry point per family, and what it stands for. */
static const struct {
	const char *name, *what;
} lock_entries[] = {
	{ "pthread_mutex_lock", "pthread locks" },
	{ "mtx_lock", "C11 <threads.h> locks" },
	{ "GOMP_critical_start", "OpenMP critical sections" },
	{ "omp_set_lock", "OpenMP locks" },
	{ "__kmpc_critical", "OpenMP critical sections" },
};

/* The objects whose definitions are the real lock code. */
static const char *const lock_runtimes[] = { "libc.so", "libpthread.so", "libgomp.so",
					     "libomp.so", "libiomp5.so" };

static bool is_lock_runtime(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base != NULL ? base + 1 : path;
	for (size_t i = 0; i < sizeof(lock_runtimes) / sizeof(lock_runtimes[0]); i++)
		if (strncmp(base, lock_runtimes[i], strlen(lock_runtimes[i])) == 0)
			return true;
	return false;
}

bool linkage_locks_reach_us(void)
{
	Dl_info own;
	if (dladdr((void *)linkage_locks_reach_us, &own) == 0)
		return true;	/* cannot tell: say nothing */
	bool all = true;
	for (size_t i = 0; i < sizeof(lock_entries) / sizeof(lock_entries[0]); i++) {
		void *p = dlsym(RTLD_DEFAULT, lock_entries[i].name);
		Dl_info where;
		if (p == NULL || dladdr(p, &where) == 0 || where.dli_fbase == own.dli_fbase ||
		    where.dli_fname == NULL || !is_lock_runtime(where.dli_fname))
			continue;
		log_msg(LOG_WARN, "%s resolves to %s before %s, so the program's %s are not seen "
			"and are not failure-atomic; link with -lpmthreads before that library, "
			"or start the program with `pmthreads run` (LD_PRELOAD puts this library "
			"first)",
			lock_entries[i].name, where.dli_fname, own.dli_fname, lock_entries[i].what);
		all = false;
	}
	return all;
}
