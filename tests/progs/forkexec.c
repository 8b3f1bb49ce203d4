/* SPDX-License-Identifier: BSD-3-Clause */
/* fork with and without exec from a multi-threaded program.  The child
 * without exec uses locks, malloc and threads; the exec'd child is this
 * program again with an argument.  Prints what each process did. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *bump(void *arg)
{
	for (int i = 0; i < 10000; i++) {
		pthread_mutex_lock(&m);
		counter++;
		pthread_mutex_unlock(&m);
	}
	return arg;
}

static long run_threads(int n)
{
	pthread_t t[4];
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, bump, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return counter;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		printf("exec'd child counted %ld\n", run_threads(2));
		return 0;
	}
	pthread_t bg;
	pthread_create(&bg, NULL, bump, NULL); /* running while we fork */
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		/* the background thread may have held it at the fork */
		pthread_mutex_init(&m, NULL);
		char *s = malloc(32);
		strcpy(s, "forked child");
		long c = run_threads(2);
		printf("%s counted at least %d: %s\n", s, 20000, c >= 20000 ? "yes" : "no");
		free(s);
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
	fflush(stdout);
	pid_t q = fork();
	if (q == 0) {
		execl("/proc/self/exe", argv[0], "child", (char *)NULL);
		_exit(127);
	}
	waitpid(q, &st, 0);
	pthread_join(bg, NULL);
	printf("parent counted %ld, exec'd child status %d\n", run_threads(3),
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}
