/* SPDX-License-Identifier: BSD-3-Clause */
/* real -- resolving the interposed libc functions.  See real.h. */
#include "real.h"
#include "runtime/interpose.h"

#include <dlfcn.h>
#include <stdatomic.h>

struct real_fns real_fn;
int real_resolved;

/* Resolution may run on two threads at once before the constructor; both
 * would store the same values, but only one may publish: the runtime's
 * interposer lock serialises them. */
static void *next(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	if (p == NULL)
		runtime_fatal("cannot find the real %s in the C library", name);
	return p;
}

static void *next_version(const char *name, const char *version)
{
	void *p = dlvsym(RTLD_NEXT, name, version);
	if (p == NULL)
		runtime_fatal("cannot find the real %s@%s in the C library", name, version);
	return p;
}

void real_resolve(void)
{
	runtime_interposer_lock();
	if (__atomic_load_n(&real_resolved, __ATOMIC_ACQUIRE)) {
		runtime_interposer_unlock();
		return;
	}
#define REAL_FN(ret, field, symbol, params) *(void **)&real_fn.field = next(symbol);
	/* dlsym would return the default version; a versioned line names it,
	 * so that an old one is never taken for the current one. */
#define REAL_FN_VERSION(ret, field, symbol, version, params) \
	*(void **)&real_fn.field = next_version(symbol, version);
#define REAL_FN_NORETURN(field, symbol, params) *(void **)&real_fn.field = next(symbol);
#include "real_list.h"
#undef REAL_FN
#undef REAL_FN_VERSION
#undef REAL_FN_NORETURN
	/* From here on every mask of the program passes through
	 * fault_signal, which keeps SIGSEGV unblocked in the kernel's masks
	 * and emulates its blocking (fault_signal.h). */
	fault_signal_take_masks(real_fn.sigmask);
	__atomic_store_n(&real_resolved, 1, __ATOMIC_RELEASE);
	runtime_interposer_unlock();
}

/* The sonames of the OpenMP runtimes Debian ships (GCC's, LLVM's and LLVM's
 * Intel-compatible name), for a runtime dlopen'd with RTLD_LOCAL, which
 * RTLD_NEXT does not search. */
static const char *const openmp_runtimes[] = { "libgomp.so.1", "libomp.so.5", "libiomp5.so" };

void *real_openmp(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (p != NULL)
		return p;
	p = dlsym(RTLD_NEXT, name);
	for (size_t i = 0; p == NULL && i < sizeof(openmp_runtimes) / sizeof(openmp_runtimes[0]);
	     i++) {
		void *h = dlopen(openmp_runtimes[i], RTLD_LAZY | RTLD_NOLOAD);
		if (h != NULL) {
			p = dlsym(h, name);
			dlclose(h);
		}
	}
	if (p == NULL)
		runtime_fatal("%s was called, but no OpenMP runtime loaded in this process defines it",
			      name);
	__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	return p;
}
