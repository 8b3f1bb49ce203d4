/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trust -- a program linked with pmthreads for tests/test_trust.cpp: the pool
 * at the edges (issue 39: privilege, identity of the pool, errno).
 *
 *   open
 *       nvmalloc one named object; prints "ok", or "errno NAME" (the errno's
 *       symbolic name) when it returns NULL, and the same for nvrecover.
 *   count
 *       the counter "trust-counter": recovered (or made), incremented under a
 *       lock, made durable (pmthreads_sync); prints "counter N", or "errno
 *       NAME" when the pool cannot be had.
 *   at PATH count
 *       count, with the pool chosen by the program: pmthreads_set_pool(PATH).
 *   clone HOLD_MS
 *       count, then a raw clone (clone(2) on a stack of its own: no fork
 *       handler runs, so the child keeps every descriptor, the pool's name
 *       lock included) that sleeps HOLD_MS and ends; prints "cloned PID"
 *       and exits at once, leaving the child behind.
 *   lose rm|rename|replace|mvdir|mvup|chdir|chroot|none POOL HOLD_MS [idle|fork]
 *       as count, then prints "synced E" (the durable epoch), does to the
 *       pool file at POOL what the first word says (mvdir: its directory
 *       renamed DIR.moved; mvup: the directory above that, likewise; chdir:
 *       the program changes its directory to /; chroot: its root to the
 *       pool's directory), prints "tampered",
 *       keeps writing under a lock for 400 ms (with idle: writes nothing,
 *       sleeps 400 ms), calls pmthreads_sync, and
 *       prints "after SYNC DURABLE_BEFORE DURABLE_AFTER" (SYNC: ok or the
 *       errno's name); with fork, a fork child then prints "child SYNC
 *       DURABLE" of its own; then lives HOLD_MS more (a second process can
 *       try the path meanwhile) and exits.
 *   stallsync PATH
 *       as count, then prints "ready" and waits (no lock held) until PATH
 *       exists -- meanwhile the test stops the runtime's threads --, then
 *       calls pmthreads_sync and prints "sync SYNC" (ok or the errno's
 *       name), its message on standard error.
 * stdout is flushed after every line.  Exit status 0, 2 usage.
 */
#include <pmthreads.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const char *errno_name(int e)
{
	const char *n = strerrorname_np(e);
	return n != NULL ? n : "unknown";
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) != 0)
		;
}

static long *counter(void)
{
	long *c = nvrecover(NULL, sizeof(long), "trust-counter");
	if (c == NULL && errno == ENOENT)
		c = nvmalloc(sizeof(long), "trust-counter");
	return c;
}

static int do_open(void)
{
	void *p = nvmalloc(64, "trust-open");
	if (p == NULL)
		printf("errno %s\n", errno_name(errno));
	else
		printf("ok\n");
	void *q = nvrecover(NULL, 64, "trust-open");
	if (q == NULL)
		printf("recover errno %s\n", errno_name(errno));
	else
		printf("recover ok\n");
	fprintf(stderr, "trust: %s\n", pmthreads_errormsg());
	return 0;
}

static int bump(long **out)
{
	long *c = counter();
	if (c == NULL) {
		printf("errno %s\n", errno_name(errno));
		fprintf(stderr, "trust: %s\n", pmthreads_errormsg());
		return -1;
	}
	pthread_mutex_lock(&lock);
	(*c)++;
	pthread_mutex_unlock(&lock);
	if (pmthreads_sync() != 0) {
		printf("syncfail %s\n", errno_name(errno));
		return -1;
	}
	printf("counter %ld\n", *c);
	*out = c;
	return 0;
}

static void tamper(const char *how, const char *pool)
{
	char other[4096];
	snprintf(other, sizeof(other), "%s.other", pool);
	if (strcmp(how, "rm") == 0) {
		if (unlink(pool) != 0)
			perror("unlink");
	} else if (strcmp(how, "rename") == 0) {
		if (rename(pool, other) != 0)
			perror("rename");
	} else if (strcmp(how, "replace") == 0) {
		int fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || close(fd) != 0 || rename(other, pool) != 0)
			perror("replace");
	} else if (strcmp(how, "mvdir") == 0 || strcmp(how, "mvup") == 0) {
		/* The pool's directory, or the one above it, renamed NAME.moved. */
		char dir[4096], moved[4200];
		snprintf(dir, sizeof(dir), "%s", pool);
		for (int up = strcmp(how, "mvdir") == 0 ? 1 : 2; up > 0; up--) {
			char *slash = strrchr(dir, '/');
			if (slash != NULL)
				*slash = '\0';
		}
		snprintf(moved, sizeof(moved), "%s.moved", dir);
		if (rename(dir, moved) != 0)
			perror("rename directory");
	} else if (strcmp(how, "chdir") == 0) {
		if (chdir("/") != 0)
			perror("chdir");
	} else if (strcmp(how, "chroot") == 0) {
		/* Into the pool's directory (root in a user namespace): no
		 * path leads where it did, and there is no /proc. */
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s", pool);
		char *slash = strrchr(dir, '/');
		if (slash != NULL)
			*slash = '\0';
		if (chroot(dir) != 0 || chdir("/") != 0)
			perror("chroot");
	}
}

static int do_lose(const char *how, const char *pool, long hold_ms, bool idle, bool child)
{
	long *c;
	if (bump(&c) != 0)
		return 0;
	printf("synced %llu\n", (unsigned long long)pmthreads_durable_epoch());
	tamper(how, pool);
	printf("tampered\n");
	uint64_t before = pmthreads_durable_epoch();
	for (int i = 0; i < 40; i++) {
		if (!idle) {
			pthread_mutex_lock(&lock);
			(*c)++;
			pthread_mutex_unlock(&lock);
		}
		sleep_ms(10);
	}
	int r = pmthreads_sync();
	int e = errno;
	printf("after %s %llu %llu\n", r == 0 ? "ok" : errno_name(e), (unsigned long long)before,
	       (unsigned long long)pmthreads_durable_epoch());
	if (child) {
		pid_t pid = fork();
		if (pid == 0) {
			r = pmthreads_sync();
			e = errno;
			printf("child %s %llu\n", r == 0 ? "ok" : errno_name(e),
			       (unsigned long long)pmthreads_durable_epoch());
			fflush(stdout);
			_exit(0);
		}
		if (pid > 0)
			(void)waitpid(pid, NULL, 0);
	}
	sleep_ms(hold_ms);
	return 0;
}

static int do_stallsync(const char *path)
{
	long *c;
	if (bump(&c) != 0)
		return 0;
	printf("ready\n");
	while (access(path, F_OK) != 0)
		sleep_ms(10);
	int r = pmthreads_sync();
	int e = errno;
	printf("sync %s\n", r == 0 ? "ok" : errno_name(e));
	fprintf(stderr, "trust: %s\n", pmthreads_errormsg());
	return 0;
}

static int clone_child(void *arg)
{
	long ms = *(long *)arg;
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
	_exit(0);
}

static int do_clone(long hold_ms)
{
	long *c;
	if (bump(&c) != 0)
		return 0;
	static char stack[256 << 10] __attribute__((aligned(64)));
	static long arg;
	arg = hold_ms;
	int pid = clone(clone_child, stack + sizeof(stack), SIGCHLD, &arg);
	if (pid < 0) {
		perror("clone");
		return 1;
	}
	printf("cloned %d\n", pid);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && strcmp(argv[1], "open") == 0)
		return do_open();
	if (argc >= 2 && strcmp(argv[1], "count") == 0) {
		long *c;
		(void)bump(&c);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "at") == 0 && strcmp(argv[3], "count") == 0) {
		long *c;
		if (pmthreads_set_pool(argv[2], 0) != 0) {
			printf("set_pool errno %s\n", errno_name(errno));
			return 0;
		}
		(void)bump(&c);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "stallsync") == 0)
		return do_stallsync(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "clone") == 0)
		return do_clone(atol(argv[2]));
	if (argc >= 5 && strcmp(argv[1], "lose") == 0)
		return do_lose(argv[2], argv[3], atol(argv[4]),
			       argc >= 6 && strcmp(argv[5], "idle") == 0,
			       argc >= 6 && strcmp(argv[5], "fork") == 0);
	fprintf(stderr, "usage: trust open | count | at PATH count | clone HOLD_MS | stallsync PATH | "
			"lose rm|rename|replace|mvdir|mvup|chdir|chroot|none POOL HOLD_MS [idle|fork]\n");
	return 2;
}
