/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * headers -- builds only when nvrecovery.h gives NVthreads' exact prototypes
 * and the headers NVthreads programs rely on, and works in one file with
 * pmthreads.h, included before it or (NVT_PMTHREADS_FIRST) after it; as C
 * and as C++ (headers.cpp).  Running it calls each function once.
 */
#ifdef NVT_PMTHREADS_FIRST
#include <pmthreads.h>
#include "nvrecovery.h"
#else
#include "nvrecovery.h"
#include <pmthreads.h>
#endif

#ifdef __cplusplus
#include <type_traits>
#define SAME_TYPE(f, T) static_assert(std::is_same<decltype(&f), T>::value, #f " has NVthreads' type")
#else
#define SAME_TYPE(f, T) _Static_assert(_Generic(&f, T: 1, default: 0), #f " has NVthreads' type")
#endif
SAME_TYPE(isCrashed, bool (*)(void));
SAME_TYPE(nvmalloc, void *(*)(size_t, char *));
SAME_TYPE(nvrecover, unsigned long (*)(void *, size_t, char *));
SAME_TYPE(nvcheckpoint, void (*)(void));

/* What NVthreads' header brought in, used without including it here. */
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

int main(void)
{
	char name[] = "headers";
	pthread_mutex_lock(&m);
	bool was = isCrashed();
	pthread_mutex_unlock(&m);
	long *p = (long *)nvmalloc(sizeof(long), name);
	if (p == NULL || strlen(name) != 7)
		return 1;
	*p = 5;
	nvcheckpoint();
	long back = 0;
	unsigned long r = nvrecover(&back, sizeof(back), name);
	/* pmthreads.h's own functions stay available beside NVthreads' */
	if (pmthreads_sync() != 0 || pmthreads_durable_epoch() == 0)
		return 1;
	printf("crashed=%d recover=%lu value=%ld\n", (int)was, r, back);
	return r == 0 && back == 5 ? 0 : 1;
}
