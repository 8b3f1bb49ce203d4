/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shape of the Open POSIX Test Suite's sched_setparam/2-1 and 2-2: a
 * SCHED_FIFO process pinned to one CPU forks, and signals the child before
 * the child has ever run (an equal-priority child on the same CPU waits
 * until the parent blocks).  The child's SIGTERM handler then runs at its
 * first return to user space, inside fork, and calls stdio and malloc.  In a
 * multi-threaded process glibc's fork holds its malloc and stdio locks
 * across the system call and the child releases them only in its first
 * steps after it: a handler that runs before them waits for ever.
 * Prints "handler ran" when the child's handler reported through a pipe,
 * "child hung" when it did not within 20 s (then kills it), "no SCHED_FIFO"
 * (exit 77) when the process may not use it.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int report[2];

static void on_term(int sig)
{
	(void)sig;
	/* A fresh stream: its buffer comes from glibc's own allocator. */
	FILE *f = fdopen(report[1], "w");
	char *p = malloc(64);
	if (f == NULL || p == NULL)
		_exit(1);
	snprintf(p, 64, "handler ran");
	fprintf(f, "%s\n", p);
	free(p);
	fclose(f);
	_exit(0);
}

int main(void)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0) {
		perror("sched_setaffinity");
		return 2;
	}
	struct sched_param sp = { .sched_priority = sched_get_priority_min(SCHED_FIFO) + 1 };
	if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
		printf("no SCHED_FIFO: %s\n", strerror(errno));
		return 77;
	}
	if (signal(SIGTERM, on_term) == SIG_ERR || pipe(report) != 0) {
		perror("signal/pipe");
		return 2;
	}
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 2;
	}
	if (child == 0) {
		for (;;)
			pause();
	}
	/* The child has not run yet: this thread keeps the CPU until it
	 * blocks, in poll. */
	kill(child, SIGTERM);
	close(report[1]);
	struct pollfd pfd = { .fd = report[0], .events = POLLIN };
	char line[64] = "";
	int ready = poll(&pfd, 1, 20000);
	ssize_t n = ready > 0 ? read(report[0], line, sizeof(line) - 1) : 0;
	sp.sched_priority = 0;
	sched_setscheduler(0, SCHED_OTHER, &sp);
	if (n <= 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		printf("child hung\n");
		return 1;
	}
	line[n] = '\0';
	int status;
	waitpid(child, &status, 0);
	printf("%s", line);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
