/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_replay -- what replaying a full log costs when a pool is opened.
 *
 * A file laid out like a pool (a header page with the log's head slots,
 * DATA_MIB of data pages written with bytes, so they are allocated blocks,
 * a ring of RING_MIB) gets epochs of LINES random 64-byte line stores each,
 * two orders and a fence an epoch as persist.c issues them, through the log
 * backend (lib/persist/nvm_log.h), until the records fill the ring to just
 * under half -- where a checkpoint would begin -- and is then abandoned
 * without a checkpoint, as a crash leaves it.  Then ROUNDS times: the pool
 * opened again (the log replayed onto a fresh private mapping) and dropped
 * without writing anything; printed are the median and range of the
 * replay's own time (log_replay_us) and of the whole nvm_map_pool.
 *
 * The ring is as the crashed run left it: its pages dropped from the page
 * cache after each sync (drop_synced), the data pages cached.  With
 * "cold", the whole file leaves the page cache before every open.
 *
 * Replay takes a helper thread (nvm_log_set_helper) unless "one" is given;
 * with "both", rounds alternate between the two, printed apart (paired).
 *
 * Usage: bench_replay DIR [ROUNDS [LINES [cold] [one|both]]]  (default 11, 5000)
 */
#include "base/log.h"
#include "persist/nvm.h"
#include "persist/nvm_log.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PS 4096u
#define DATA_MIB 64u
#define RING_MIB 64u
#define HEAD_OFF 1024u

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what)
{
	fprintf(stderr, "bench_replay: %s: %s\n", what, err_get());
	exit(1);
}

static int start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	return pthread_create(th, NULL, fn, arg);
}

static struct nvm *open_pool(const char *path, size_t len, const struct nvm_log_region *r, int *fd)
{
	*fd = open(path, O_RDWR);
	if (*fd < 0)
		die("open");
	struct nvm *n = NULL;
	if (nvm_map_pool(&n, *fd, path, len, NVM_LOG, 0, NULL, r, false) != 0)
		die("nvm_map_pool");
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_replay DIR [ROUNDS [LINES [cold] [one|both]]]\n");
		return 2;
	}
	int rounds = argc > 2 ? atoi(argv[2]) : 11;
	size_t lines = argc > 3 ? (size_t)atol(argv[3]) : 5000;
	bool cold = false, one = false, both = false;
	for (int a = 4; a < argc; a++) {
		cold |= strcmp(argv[a], "cold") == 0;
		one |= strcmp(argv[a], "one") == 0;
		both |= strcmp(argv[a], "both") == 0;
	}
	if (rounds < 1 || rounds > 1000 || lines < 1) {
		fprintf(stderr, "bench_replay: ROUNDS 1-1000, LINES at least 1\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/bench-replay-%d.pool", argv[1], (int)getpid());
	const uint64_t data = (uint64_t)DATA_MIB << 20, ring = (uint64_t)RING_MIB << 20;
	const size_t len = PS + data + ring;
	struct nvm_log_region r = { PS + data, ring, HEAD_OFF, 0x5eedULL, true };

	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		perror("bench_replay: create");
		return 1;
	}
	static unsigned char chunk[1 << 20];
	memset(chunk, 0xa5, sizeof(chunk));
	for (uint64_t o = 0; o < PS + data; o += sizeof(chunk)) {
		size_t l = PS + data - o < sizeof(chunk) ? (size_t)(PS + data - o) : sizeof(chunk);
		if (pwrite(fd, chunk, l, (off_t)o) != (ssize_t)l) {
			perror("bench_replay: write");
			return 1;
		}
	}
	if (ftruncate(fd, (off_t)len) != 0 || nvm_log_format(fd, path, &r, true) != 0 ||
	    fsync(fd) != 0)
		die("format");
	close(fd);

	/* Fill the ring to just under half: the next epoch would start a
	 * checkpoint wave. */
	struct nvm *n = open_pool(path, len, &r, &fd);
	unsigned char *base = n->base;
	uint64_t rng = 0x9e3779b97f4a7c15ULL, epoch = 0, epoch_bytes = lines * 80 + 3 * 64;
	struct nvm_log_info info;
	for (;;) {
		nvm_log_get_info(n, &info);
		if (info.tail - info.head + 2 * epoch_bytes > ring / 2)
			break;
		epoch++;
		for (size_t i = 0; i < lines; i++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			unsigned char *line = base + PS + (rng % (data / 64)) * 64;
			memset(line, (int)(epoch & 0xff), 64);
			memcpy(line, &epoch, 8);
			nvm_flush(n, line, 64);
			if (i == lines / 3 || i == 2 * lines / 3)
				nvm_order(n);
		}
		nvm_fence(n);
		if (nvm_error(n) != 0)
			die("epoch");
	}
	uint64_t filled = info.tail - info.head;
	nvm_abandon(n);
	close(fd);

	/* [0]: with the helper, [1]: one thread. */
	uint64_t *replay_us[2], *open_us[2], *cpu_us[2], prefaulted = 0;
	int got[2] = { 0, 0 };
	for (int m = 0; m < 2; m++) {
		replay_us[m] = calloc((size_t)rounds, 8);
		open_us[m] = calloc((size_t)rounds, 8);
		cpu_us[m] = calloc((size_t)rounds, 8);
	}
	uint64_t records = 0, bytes = 0;
	for (int k = 0; k < rounds * (both ? 2 : 1); k++) {
		int m = both ? k % 2 : one;
		nvm_log_set_helper(m == 0 ? start_thread : NULL, pthread_join, NULL, false);
		if (cold) {
			fd = open(path, O_RDONLY);
			if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
				die("drop the page cache");
			close(fd);
		}
		struct rusage ru0, ru1;
		getrusage(RUSAGE_THREAD, &ru0);
		uint64_t t0 = now_ns();
		n = open_pool(path, len, &r, &fd);
		getrusage(RUSAGE_THREAD, &ru1);
		cpu_us[m][got[m]] = (uint64_t)((ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1000000L + ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
		open_us[m][got[m]] = (now_ns() - t0) / 1000;
		replay_us[m][got[m]++] = n->stats.log_replay_us;
		records = n->stats.log_replayed_records;
		bytes = n->stats.log_replayed_bytes;
		if (m == 0)
			prefaulted = n->stats.log_replay_prefaulted;
		nvm_abandon(n);
		close(fd);
	}
	unlink(path);
	printf("bench_replay: %s, %llu epochs of %zu lines, log %.1f MiB; replayed %llu records, "
	       "%.1f MiB; %d rounds%s\n", argv[1], (unsigned long long)epoch, lines,
	       (double)filled / (1 << 20), (unsigned long long)records, (double)bytes / (1 << 20),
	       rounds, cold ? ", page cache dropped before each" : "");
	for (int m = 0; m < 2; m++) {
		if (got[m] == 0)
			continue;
		qsort(replay_us[m], (size_t)got[m], 8, cmp_u64);
		qsort(open_us[m], (size_t)got[m], 8, cmp_u64);
		qsort(cpu_us[m], (size_t)got[m], 8, cmp_u64);
		printf("%-11s replay_ms p50=%.1f min=%.1f max=%.1f  open_ms p50=%.1f min=%.1f "
		       "max=%.1f", m == 0 ? "helper:" : "one thread:", replay_us[m][got[m] / 2] / 1e3,
		       replay_us[m][0] / 1e3, replay_us[m][got[m] - 1] / 1e3,
		       open_us[m][got[m] / 2] / 1e3, open_us[m][0] / 1e3, open_us[m][got[m] - 1] / 1e3);
		printf("  opener_cpu_ms p50=%.1f", cpu_us[m][got[m] / 2] / 1e3);
		if (m == 0)
			printf("  pages prefaulted %llu", (unsigned long long)prefaulted);
		printf("\n");
		free(replay_us[m]);
		free(open_us[m]);
	}
	return 0;
}
