/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A signal the program blocked and sends to itself at once stays pending:
 * no thread of the runtime may take it.  The runtime's threads start in the
 * library's constructor, just before main; one that is not yet running with
 * every signal blocked would take this SIGUSR1 (default action: the end of
 * the process).  Then every other thread must block it.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Whether thread tid blocks SIGUSR1, from its SigBlk line. */
static int blocks_usr1(const char *tid)
{
	char path[300], line[256];
	snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 1;	/* gone */
	int blocked = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "SigBlk:", 7) == 0)
			blocked = (strtoull(line + 7, NULL, 16) >> (SIGUSR1 - 1)) & 1;
	fclose(f);
	return blocked;
}

int main(void)
{
	sigset_t usr1, pending;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	kill(getpid(), SIGUSR1);
	struct timespec ts = { 0, 50 * 1000000L };
	nanosleep(&ts, NULL);
	sigpending(&pending);
	printf("SIGUSR1 pending: %s\n", sigismember(&pending, SIGUSR1) ? "yes" : "no");
	DIR *d = opendir("/proc/self/task");
	if (d == NULL)
		return 1;
	char self[32];
	snprintf(self, sizeof(self), "%ld", (long)syscall(SYS_gettid));
	int open_threads = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && strcmp(e->d_name, self) != 0 && !blocks_usr1(e->d_name))
			open_threads++;
	closedir(d);
	printf("other threads that would take it: %d\n", open_threads);
	return 0;
}
