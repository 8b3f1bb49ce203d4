/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * outcommit -- a counter in the persistent heap, incremented under a lock,
 * each new value written to standard output (a pipe) with write(2) once the
 * lock is released: the reply a server would send after an update.
 * tests/test_output.cpp kills it with SIGKILL and checks, after recovery,
 * that no value it ever read is above the recovered counter.
 *
 *   outcommit          count forever
 *   outcommit --print  print the recovered counter and exit
 *   outcommit N        count N more, then exit (a clean exit)
 *
 * With OUTCOMMIT_STDIO=1 in the environment each value goes out with printf
 * and fflush(stdout) instead (stdio's own write, which output commit holds
 * through a stdout stream of its own: lib/output/stdout.h), after checking
 * that fileno(stdout) is still 1.
 *
 * Never linked with pmthreads: it uses the API through weak references and
 * runs under LD_PRELOAD.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void *nvmalloc(size_t size, const char *name);
void *nvrecover(void *dest, size_t size, const char *name);
#pragma weak nvmalloc
#pragma weak nvrecover

#define COUNTER_MAGIC 0x6f7574636f6d6d69ULL

struct counter {
	uint64_t magic;
	uint64_t value;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv)
{
	if (nvrecover == NULL) {
		fprintf(stderr, "outcommit: not running under pmthreads\n");
		return 2;
	}
	struct counter *c = nvrecover(NULL, sizeof(*c), "counter");
	if (argc > 1 && strcmp(argv[1], "--print") == 0) {
		printf("recovered %llu\n",
		       c != NULL && c->magic == COUNTER_MAGIC ? (unsigned long long)c->value : 0ULL);
		return 0;
	}
	pthread_mutex_lock(&lock);
	if (c == NULL || c->magic != COUNTER_MAGIC) {
		c = nvmalloc(sizeof(*c), "counter");
		if (c == NULL) {
			fprintf(stderr, "outcommit: nvmalloc failed\n");
			return 1;
		}
		c->value = 0;
		c->magic = COUNTER_MAGIC;
	}
	pthread_mutex_unlock(&lock);
	unsigned long long more = argc > 1 ? strtoull(argv[1], NULL, 10) : 0;
	const char *stdio_env = getenv("OUTCOMMIT_STDIO");
	bool use_stdio = stdio_env != NULL && strcmp(stdio_env, "1") == 0;
	if (use_stdio && fileno(stdout) != 1) {
		fprintf(stderr, "outcommit: fileno(stdout) is %d, not 1\n", fileno(stdout));
		return 3;
	}
	for (unsigned long long i = 0; more == 0 || i < more; i++) {
		pthread_mutex_lock(&lock);
		uint64_t v = ++c->value;
		pthread_mutex_unlock(&lock);
		if (use_stdio) {
			if (printf("%llu\n", (unsigned long long)v) < 0 || fflush(stdout) != 0) {
				fprintf(stderr, "outcommit: printf: %s\n", strerror(errno));
				return 1;
			}
			struct timespec ts = { 0, 500000 };
			nanosleep(&ts, NULL);
			continue;
		}
		char line[32];
		int n = snprintf(line, sizeof(line), "%llu\n", (unsigned long long)v);
		ssize_t w = write(1, line, (size_t)n);
		if (w != n) {
			fprintf(stderr, "outcommit: write returned %zd of %d: %s\n", w, n, strerror(errno));
			return 1;
		}
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}
