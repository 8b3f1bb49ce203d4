/* SPDX-License-Identifier: BSD-3-Clause */
/* One thread writes every cache line of a MIB-MiB malloc'd region (the heap
 * is persistent under PMTHREADS_HEAP=malloc), each write in its own short
 * FASE, then calls pmthreads_sync with no lock held (issue 39, item 5).
 * With an emulated write latency (PMTHREADS_NVM_LATENCY_NS) the write-back
 * of the region takes far longer than a small PMTHREADS_SYNC_TIMEOUT_MS:
 * the sync must wait for it, since nothing stalls.  Never linked with
 * pmthreads; pmthreads_sync is looked up under the preload.
 *   slowsync MIB
 * Prints "sync ok MS" or "sync ERRNO-NAME MS" (how long the sync took). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	size_t len = mib << 20;
	volatile unsigned char *region = malloc(len);
	if (region == NULL) {
		fprintf(stderr, "slowsync: no memory for %zu MiB\n", mib);
		return 2;
	}
	for (size_t off = 0; off < len; off += 64) {
		pthread_mutex_lock(&lock);
		region[off] = (unsigned char)(off >> 6 | 1);
		pthread_mutex_unlock(&lock);
	}
	int (*sync)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "pmthreads_sync");
	if (sync == NULL) {
		printf("sync absent\n");
		return 0;
	}
	double t0 = now_ms();
	int r = sync();
	int e = errno;
	printf("sync %s %.0f\n", r == 0 ? "ok" : e == ETIMEDOUT ? "ETIMEDOUT" : strerror(e), now_ms() - t0);
	return 0;
}
