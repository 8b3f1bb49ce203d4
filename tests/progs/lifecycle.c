// SPDX-License-Identifier: BSD-3-Clause
/*
 * lifecycle -- an ordinary pthread program (never linked with pmthreads) for
 * test_cli: what happens around the program rather than inside it.
 *
 *   lifecycle exec N     allocate 1 MiB under a lock, then exec itself with
 *                        N-1 (prints "done" at 0)
 *   lifecycle child      print the LD_PRELOAD a child started by system() sees
 *   lifecycle closeerr   allocate under a lock, close standard error, exit
 *   lifecycle spin S     hold 256 KiB; lock, allocate, write, unlock for S seconds
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
/* Where blocks are published, so that the compiler cannot drop a
 * malloc/memset/free sequence whose result is never read. */
static char *volatile sink;

static char *locked_alloc(size_t n)
{
	pthread_mutex_lock(&m);
	char *p = malloc(n);
	if (p != NULL)
		memset(p, 0x5a, n);
	sink = p;
	pthread_mutex_unlock(&m);
	return p;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "exec") == 0) {
		int n = atoi(argv[2]);
		if (locked_alloc(1 << 20) == NULL)
			return 3;
		if (n <= 0) {
			puts("done");
			return 0;
		}
		char next[16];
		snprintf(next, sizeof(next), "%d", n - 1);
		execl("/proc/self/exe", argv[0], "exec", next, (char *)NULL);
		perror("execl");
		return 4;
	}
	if (argc >= 2 && strcmp(argv[1], "child") == 0) {
		fflush(stdout);
		return system("printf 'child LD_PRELOAD=[%s]\\n' \"$LD_PRELOAD\"") == 0 ? 0 : 5;
	}
	if (argc >= 2 && strcmp(argv[1], "closeerr") == 0) {
		if (locked_alloc(100) == NULL)
			return 3;
		close(2);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "spin") == 0) {
		time_t end = time(NULL) + atoi(argv[2]);
		char *keep = locked_alloc(256 << 10);	/* in use all the run long */
		if (keep == NULL)
			return 3;
		while (time(NULL) < end) {
			char *p = locked_alloc(4096);
			pthread_mutex_lock(&m);
			free(p);
			pthread_mutex_unlock(&m);
		}
		return keep[0] == 0x5a ? 0 : 6;
	}
	fprintf(stderr, "usage: lifecycle exec N | child | closeerr | spin SECONDS\n");
	return 2;
}
