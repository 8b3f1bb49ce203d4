/* SPDX-License-Identifier: BSD-3-Clause */
/* The pmthreads API looked up at run time, for test programs that link no
 * pmthreads library and find it only when it is preloaded: a program run
 * without the preload says so and exits 3. */
#ifndef PMT_TEST_PRELOAD_API_H
#define PMT_TEST_PRELOAD_API_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static inline void *preload_api(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	if (f == NULL) {
		printf("no %s: not under the preload\n", name);
		exit(3);
	}
	return f;
}

#endif
