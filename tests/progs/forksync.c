/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmthreads_sync and pmthreads_durable_epoch where nothing is persisted any
 * more (tests/test_preload.cpp; issue 39 item 11).  Never linked with
 * pmthreads: the API is looked up with dlsym, so it runs under the preload.
 *   fork   the object "forksync" set to 1 under a lock and synced: "parent
 *          sync ok E" (E the durable epoch).  A fork child sets it to 2,
 *          calls pmthreads_sync: "child sync ok|ERRNO", "child msg TEXT"
 *          (pmthreads_errormsg), writes it for 300 ms more under a lock:
 *          "child durable D0 D1" (before and after); its own fork child
 *          syncs too: "grandchild sync ok|ERRNO".  The parent, after the
 *          child: 3, synced, "parent after ok|ERRNO E2".
 *   end    the object set to 10 and synced: "main sync ok E"; then, in an
 *          exit handler registered before the first nvmalloc, 11 under a
 *          lock and a sync: "end sync ok|ERRNO D1 D2" (the durable epoch
 *          then and 100 ms later), "end msg TEXT".
 *   check  nvrecover's view of the object: "recovered N".
 * Exit status 0; 2 usage; 3 not under the preload.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preload_api.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *(*nvmalloc_fn)(size_t, const char *);
static void *(*nvrecover_fn)(void *, size_t, const char *);
static int (*sync_fn)(void);
static uint64_t (*durable_fn)(void);
static const char *(*errormsg_fn)(void);
static uint64_t *object;

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) != 0)
		;
}

static void set(uint64_t v)
{
	pthread_mutex_lock(&lock);
	*object = v;
	pthread_mutex_unlock(&lock);
}

/* "ok", or the errno's symbolic name. */
static const char *sync_result(void)
{
	if (sync_fn() == 0)
		return "ok";
	if (errno == ENOTSUP)
		return "ENOTSUP";	/* strerrorname_np says EOPNOTSUPP, the same value */
	const char *n = strerrorname_np(errno);
	return n != NULL ? n : "unknown";
}

static void open_object(void)
{
	*(void **)&nvmalloc_fn = preload_api("nvmalloc");
	*(void **)&sync_fn = preload_api("pmthreads_sync");
	*(void **)&durable_fn = preload_api("pmthreads_durable_epoch");
	*(void **)&errormsg_fn = preload_api("pmthreads_errormsg");
	object = nvmalloc_fn(sizeof(*object), "forksync");
	if (object == NULL) {
		printf("nvmalloc failed: %s\n", strerror(errno));
		exit(1);
	}
}

static void child(void)
{
	uint64_t d0 = durable_fn();
	set(2);
	printf("child sync %s\n", sync_result());
	printf("child msg %s\n", errormsg_fn());
	for (int i = 0; i < 30; i++) {
		set(100 + (uint64_t)i);
		sleep_ms(10);
	}
	printf("child durable %llu %llu\n", (unsigned long long)d0,
	       (unsigned long long)durable_fn());
	fflush(stdout);
	pid_t g = fork();
	if (g == 0) {
		set(4);
		printf("grandchild sync %s\n", sync_result());
		fflush(stdout);
		_exit(0);
	}
	waitpid(g, NULL, 0);
	fflush(stdout);
	_exit(0);
}

static int do_fork(void)
{
	open_object();
	set(1);
	const char *r = sync_result();
	printf("parent sync %s %llu\n", r, (unsigned long long)durable_fn());
	fflush(stdout);
	pid_t c = fork();
	if (c < 0) {
		perror("fork");
		return 1;
	}
	if (c == 0)
		child();
	int status;
	waitpid(c, &status, 0);
	set(3);
	r = sync_result();
	printf("parent after %s %llu\n", r, (unsigned long long)durable_fn());
	return 0;
}

/* Registered before the first nvmalloc: with PMTHREADS_HEAP=nvmalloc the
 * runtime starts there, and so its end runs before this handler; with
 * PMTHREADS_HEAP=malloc it started before main, and its end runs after. */
static void at_end(void)
{
	set(11);
	const char *r = sync_result();
	uint64_t d1 = durable_fn();
	const char *msg = errormsg_fn();
	sleep_ms(100);
	printf("end sync %s %llu %llu\n", r, (unsigned long long)d1,
	       (unsigned long long)durable_fn());
	printf("end msg %s\n", msg);
	fflush(stdout);
}

static int do_end(void)
{
	atexit(at_end);
	open_object();
	set(10);
	const char *r = sync_result();
	printf("main sync %s %llu\n", r, (unsigned long long)durable_fn());
	return 0;
}

static int do_check(void)
{
	*(void **)&nvrecover_fn = preload_api("nvrecover");
	uint64_t *p = nvrecover_fn(NULL, sizeof(uint64_t), "forksync");
	if (p == NULL)
		printf("not recovered: %s\n", strerror(errno));
	else
		printf("recovered %llu\n", (unsigned long long)*p);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "fork") == 0)
		return do_fork();
	if (argc == 2 && strcmp(argv[1], "end") == 0)
		return do_end();
	if (argc == 2 && strcmp(argv[1], "check") == 0)
		return do_check();
	fprintf(stderr, "usage: forksync fork | end | check\n");
	return 2;
}
