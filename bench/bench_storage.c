/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_storage -- what the storage under a pool receives per changed line.
 *
 * The reproducer made a benchmark: one thread changes LINES random
 * 64-byte lines of a 64 MiB nvmalloc'd region inside one lock every STEP_US
 * microseconds, for SECONDS seconds, then waits for the last epoch.  It
 * prints one line of key=value figures:
 *   changed       lines changed (each one store into a distinct line draw)
 *   write_bytes   what this process sent to storage (/proc/self/io), i.e.
 *                 the page-cache pages it dirtied, and per changed line --
 *                 a whole large folio for any write into one, though the
 *                 file system writes only the blocks changed
 *   disk_bytes    what the block device under the pool wrote meanwhile
 *                 (/sys/dev/block/M:m/stat): the file system's journal and
 *                 every other process's writes too, so only on a quiet
 *                 machine; -1 where there is no such device (tmpfs)
 *   device_*      the runtime's own count (statistics): flushes per
 *                 published epoch, bytes the backend submitted
 *   period_p50/99 the spacing of published epochs (the epoch log)
 * Run it under different PMTHREADS_NVM and pool paths to compare
 * (bench/storage.sh pairs them in one run).  Usage:
 *   bench_storage LINES STEP_US SECONDS
 * with PMTHREADS_POOL, PMTHREADS_STATS and PMTHREADS_EPOCH_LOG set by the
 * caller.
 */
#include <pmthreads.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define REGION (64u << 20)

static long long io_write_bytes(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	if (f == NULL)
		return -1;
	char l[128];
	long long v = -1;
	while (fgets(l, sizeof(l), f) != NULL)
		if (strncmp(l, "write_bytes:", 12) == 0)
			v = atoll(l + 12);
	fclose(f);
	return v;
}

/* Sectors written by the device holding the pool (PMTHREADS_POOL), in
 * bytes; -1 when unknown. */
static long long disk_write_bytes(void)
{
	const char *pool = getenv("PMTHREADS_POOL");
	struct stat st;
	if (pool == NULL || stat(pool, &st) != 0 || major(st.st_dev) == 0)
		return -1;
	char path[96];
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/stat", major(st.st_dev),
		 minor(st.st_dev));
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	unsigned long long v[7];
	int got = fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
			 &v[4], &v[5], &v[6]);
	fclose(f);
	return got == 7 ? (long long)v[6] * 512 : -1;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s LINES STEP_US SECONDS\n", argv[0]);
		return 2;
	}
	long lines = atol(argv[1]), step_us = atol(argv[2]);
	double secs = atof(argv[3]);
	if (lines <= 0 || step_us < 0 || secs <= 0) {
		fprintf(stderr, "%s: LINES > 0, STEP_US >= 0, SECONDS > 0\n", argv[0]);
		return 2;
	}
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	unsigned char *r = nvmalloc(REGION, "bench_storage");
	if (r == NULL) {
		fprintf(stderr, "%s: nvmalloc: %s\n", argv[0], pmthreads_errormsg());
		return 1;
	}
	/* The region's allocation and zeroing are not what is measured. */
	if (pmthreads_sync() != 0) {
		fprintf(stderr, "%s: pmthreads_sync: %s\n", argv[0], pmthreads_errormsg());
		return 1;
	}
	long long w0 = io_write_bytes(), d0 = disk_write_bytes();
	unsigned long long changed = 0;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	double t0 = now_s();
	do {
		pthread_mutex_lock(&m);
		for (long i = 0; i < lines; i++) {
			uint64_t line = next(&seed) % (REGION / 64);
			r[line * 64 + (next(&seed) & 63)]++;
			changed++;
		}
		pthread_mutex_unlock(&m);
		if (step_us > 0)
			usleep((useconds_t)step_us);
	} while (now_s() - t0 < secs);
	if (pmthreads_sync() != 0) {
		fprintf(stderr, "%s: pmthreads_sync: %s\n", argv[0], pmthreads_errormsg());
		return 1;
	}
	long long w1 = io_write_bytes(), d1 = disk_write_bytes();
	printf("changed=%llu write_bytes=%lld write_bytes_per_line=%.0f disk_bytes=%lld "
	       "seconds=%.2f\n", changed, w1 - w0,
	       changed ? (double)(w1 - w0) / (double)changed : 0.0, d0 < 0 || d1 < 0 ? -1 : d1 - d0,
	       now_s() - t0);
	return 0;
}
