/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_locks -- the cost of pmthreads on lock-heavy code.
 *
 * Two workloads, each run as a child process of this program in four
 * configurations measured in the same run: native; LD_PRELOAD with
 * interception only (nvmalloc mode: locks counted, the gate and epochs
 * running, nothing persisted: the program never calls nvmalloc); and full
 * persistence (PMTHREADS_HEAP=malloc) with each tracker.  A round runs every
 * configuration once, back to back, starting one configuration further along
 * each round (so no configuration always runs first while the load on the
 * machine drifts); the time is the child's own, from its first
 * pthread_create to its last join (no exec, no runtime start-up, no final
 * persist).  Prints per configuration the median time and the median over
 * rounds of the paired ratio time / native time of the same round, with the
 * smallest and largest of those ratios.  The program itself is never linked
 * with pmthreads.
 *
 *   locks: threads increment counters in malloc'd memory under a few shared
 *          mutexes (short critical sections, high lock rate)
 *   hash:  a chained hash table with a mutex per bucket; threads insert,
 *          look up and delete malloc'd nodes
 *
 * usage: bench_locks --lib PATH/libpmthreads.so [--threads N] [--interval MS]
 *        [--runs N] [--pool-dir DIR]
 *   --runs N  paired rounds (default 5)
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_median.h"

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* ---- workloads (child side) ---- */

#define LOCKS 4
#define SLOTS 64
#define LOCK_OPS 2000000	/* per thread */

static pthread_mutex_t locks[LOCKS];
static long *slots[LOCKS];

static void *locks_worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (long i = 0; i < LOCK_OPS; i++) {
		unsigned l = (unsigned)rand_r(&seed) % LOCKS;
		pthread_mutex_lock(&locks[l]);
		slots[l][i % SLOTS]++;
		pthread_mutex_unlock(&locks[l]);
	}
	return NULL;
}

#define BUCKETS 4096
#define KEYS 65536
#define HASH_OPS 1000000	/* per thread */

struct node {
	struct node *next;
	unsigned key;
	char payload[48];
};

static struct {
	pthread_mutex_t lock;
	struct node *head;
} table[BUCKETS];

static void *hash_worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (long i = 0; i < HASH_OPS; i++) {
		unsigned key = (unsigned)rand_r(&seed) % KEYS, b = key % BUCKETS;
		int op = rand_r(&seed) % 4;	/* insert, delete, 2x lookup */
		pthread_mutex_lock(&table[b].lock);
		struct node **p = &table[b].head;
		while (*p != NULL && (*p)->key != key)
			p = &(*p)->next;
		if (op == 0 && *p == NULL) {
			struct node *n = malloc(sizeof(*n));
			n->key = key;
			memset(n->payload, (int)key, sizeof(n->payload));
			n->next = table[b].head;
			table[b].head = n;
		} else if (op == 1 && *p != NULL) {
			struct node *n = *p;
			*p = n->next;
			free(n);
		} else if (*p != NULL) {
			(*p)->payload[0]++;
		}
		pthread_mutex_unlock(&table[b].lock);
	}
	return NULL;
}

static int run_workload(const char *name, int threads)
{
	void *(*fn)(void *) = strcmp(name, "locks") == 0 ? locks_worker : hash_worker;
	for (int i = 0; i < LOCKS; i++) {
		pthread_mutex_init(&locks[i], NULL);
		slots[i] = calloc(SLOTS, sizeof(long));
	}
	for (int i = 0; i < BUCKETS; i++)
		pthread_mutex_init(&table[i].lock, NULL);
	pthread_t t[64];
	uint64_t t0 = now_ns();
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("%llu\n", (unsigned long long)(now_ns() - t0));
	return 0;
}

/* ---- driver (parent side) ---- */

struct conf {
	const char *name;
	const char *heap;	/* NULL: native */
	const char *tracker;
};

static const struct conf confs[] = {
	{ "native", NULL, NULL },
	{ "interception only", "nvmalloc", "auto" },
	{ "persistence, uffd", "malloc", "uffd" },
	{ "persistence, mprotect", "malloc", "mprotect" },
};

/* Run the workload once in a child; returns its time in ns, 0 on failure. */
static uint64_t run_child(const char *self, const char *workload, int threads, const struct conf *c,
			  const char *lib, const char *interval, const char *pool_dir)
{
	int fds[2];
	if (pipe(fds) != 0)
		return 0;
	char pool[4096], nthreads[16];
	snprintf(pool, sizeof(pool), "%s/bench_locks-%d.pool", pool_dir, (int)getpid());
	snprintf(nthreads, sizeof(nthreads), "%d", threads);
	unlink(pool);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		if (c->heap != NULL) {
			setenv("LD_PRELOAD", lib, 1);
			setenv("PMTHREADS_HEAP", c->heap, 1);
			setenv("PMTHREADS_TRACKER", c->tracker, 1);
			setenv("PMTHREADS_INTERVAL_MS", interval, 1);
			setenv("PMTHREADS_POOL", pool, 1);
			setenv("PMTHREADS_POOL_SIZE", "256M", 1);
			setenv("PMEM_IS_PMEM_FORCE", "1", 1);
		}
		execl(self, self, "--child", workload, nthreads, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char buf[64] = "";
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	int st;
	waitpid(pid, &st, 0);
	unlink(pool);
	if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 0;
	return strtoull(buf, NULL, 10);
}

#define NCONFS (sizeof(confs) / sizeof(confs[0]))
#define MAX_RUNS 101

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--child") == 0)
		return run_workload(argv[2], atoi(argv[3]));
	const char *lib = NULL, *interval = "100", *pool_dir = "/dev/shm";
	int threads = 2, runs = 5;
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--lib") == 0)
			lib = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--interval") == 0)
			interval = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0)
			runs = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--pool-dir") == 0)
			pool_dir = argv[++i];
		else {
			fprintf(stderr, "usage: %s --lib PATH/libpmthreads.so [--threads N] "
				"[--interval MS] [--runs N] [--pool-dir DIR]\n", argv[0]);
			return 2;
		}
	}
	if (lib == NULL || threads < 1 || threads > 64 || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "%s: --lib is required; 1..64 threads; 1..%d runs\n", argv[0],
			MAX_RUNS);
		return 2;
	}
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	printf("bench_locks: %d threads, interval %s ms, %d paired rounds (configurations "
	       "interleaved, order rotating); median time, median of the per-round ratios to "
	       "native [min-max]\n", threads, interval, runs);
	const char *workloads[] = { "locks", "hash" };
	int status = 0;
	for (int w = 0; w < 2; w++) {
		static uint64_t t[NCONFS][MAX_RUNS];
		for (int r = 0; r < runs; r++)
			for (size_t k = 0; k < NCONFS; k++) {
				size_t c = (k + (size_t)r) % NCONFS;
				t[c][r] = run_child(self, workloads[w], threads, &confs[c], lib, interval,
						    pool_dir);
			}
		for (size_t c = 0; c < NCONFS; c++) {
			double times[MAX_RUNS], ratios[MAX_RUNS];
			int nt = 0, nr = 0;
			for (int r = 0; r < runs; r++) {
				if (t[c][r] == 0)
					continue;
				times[nt++] = (double)t[c][r];
				if (t[0][r] != 0)
					ratios[nr++] = (double)t[c][r] / (double)t[0][r];
			}
			if (nt < runs) {
				printf("  %-6s %-22s %d of %d runs failed\n", workloads[w], confs[c].name,
				       runs - nt, runs);
				status = 1;
			}
			if (nt == 0)
				continue;
			double med = median(times, nt) / 1e6;
			if (c == 0 || nr == 0) {
				printf("  %-6s %-22s %8.1f ms\n", workloads[w], confs[c].name, med);
			} else {
				double rmed = median(ratios, nr);
				printf("  %-6s %-22s %8.1f ms  %5.2fx [%.2f-%.2f] %d pairs\n", workloads[w],
				       confs[c].name, med, rmed, ratios[0], ratios[nr - 1], nr);
			}
			fflush(stdout);
		}
	}
	return status;
}
