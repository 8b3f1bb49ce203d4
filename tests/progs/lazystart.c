/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which threads the runtime adds, and when (tests/test_preload.cpp).  Prints
 * the number of tasks in /proc/self/task at each point: "tasks <where> N".
 *   idle   locks, malloc, a thread started and joined, a fork whose child
 *          counts its own tasks; the pmthreads API is never called (nor
 *          named: it is looked up with dlsym only in start).
 *   start  idle's steps, then: a thread takes a lock and keeps it while two
 *          other threads call the first nvmalloc at the same time (one epoch
 *          thread must come of it); the holder releases the lock, the value
 *          written to the object is made durable by pmthreads_sync, and
 *          the program kills itself (SIGKILL).
 *   check  nvrecover's view of that object: "recovered N".
 * Never linked with pmthreads.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preload_api.h"

#define VALUE 4242424242ULL

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both;
static int release_pipe[2];
static int taken_pipe[2];
static void *(*nvmalloc_fn)(size_t, const char *);
static void *(*nvrecover_fn)(void *, size_t, const char *);
static int (*sync_fn)(void);
static uint64_t *objects[2];

static int tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	if (d == NULL) {
		perror("opendir /proc/self/task");
		exit(2);
	}
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void say_tasks(const char *where)
{
	printf("tasks %s %d\n", where, tasks());
	fflush(stdout);
}

/* Each thread's kernel id, written by the thread (read after its join):
 * the worker, the holder, the two first callers. */
enum { TID_WORKER, TID_HOLDER, TID_CALLER };
static pid_t tids[TID_CALLER + 2];

static void note_tid(int slot) { tids[slot] = (pid_t)syscall(SYS_gettid); }

/* pthread_join returns when the thread's id is cleared, which the kernel
 * does before the task leaves /proc/self/task: wait (up to 10 s) until it
 * has, so that a count after a join does not see it under load. */
static void join_gone(pthread_t t, int slot)
{
	pthread_join(t, NULL);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tids[slot]);
	struct stat st;
	for (int i = 0; i < 10000 && stat(path, &st) == 0; i++)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
}

static void *worker(void *arg)
{
	(void)arg;
	note_tid(TID_WORKER);
	pthread_mutex_lock(&lock);
	char *p = malloc(100);
	memset(p, 1, 100);
	free(p);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void idle(void)
{
	say_tasks("main");
	pthread_mutex_lock(&lock);
	void *p = malloc(1000);
	pthread_mutex_unlock(&lock);
	free(p);
	say_tasks("locks");
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	join_gone(t, TID_WORKER);
	say_tasks("joined");
	pid_t child = fork();
	if (child == 0)
		_exit(tasks());
	int status;
	waitpid(child, &status, 0);
	printf("tasks child %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	fflush(stdout);
}

/* Takes held and keeps it until told, across the runtime's start. */
static void *holder(void *arg)
{
	(void)arg;
	note_tid(TID_HOLDER);
	pthread_mutex_lock(&held);
	char c = 't';
	if (write(taken_pipe[1], &c, 1) != 1 || read(release_pipe[0], &c, 1) != 1)
		exit(2);
	pthread_mutex_unlock(&held);
	return NULL;
}

static void *first_caller(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	note_tid(TID_CALLER + (int)i);
	pthread_barrier_wait(&both);
	objects[i] = nvmalloc_fn(sizeof(uint64_t), i == 0 ? "lazystart" : "lazystart-other");
	return NULL;
}

static void start(void)
{
	*(void **)&nvmalloc_fn = preload_api("nvmalloc");
	*(void **)&sync_fn = preload_api("pmthreads_sync");
	idle();
	if (pipe(release_pipe) != 0 || pipe(taken_pipe) != 0)
		exit(2);
	pthread_t h, callers[2];
	pthread_create(&h, NULL, holder, NULL);
	char c;
	if (read(taken_pipe[0], &c, 1) != 1)
		exit(2);
	say_tasks("holding");
	pthread_barrier_init(&both, NULL, 2);
	for (uintptr_t i = 0; i < 2; i++)
		pthread_create(&callers[i], NULL, first_caller, (void *)i);
	for (int i = 0; i < 2; i++)
		join_gone(callers[i], TID_CALLER + i);
	if (objects[0] == NULL || objects[1] == NULL) {
		printf("nvmalloc failed\n");
		exit(1);
	}
	/* main, the holder and the epoch thread */
	say_tasks("started");
	pthread_mutex_lock(&lock);
	*objects[0] = VALUE;
	pthread_mutex_unlock(&lock);
	if (write(release_pipe[1], "r", 1) != 1)
		exit(2);
	join_gone(h, TID_HOLDER);
	printf("sync %d\n", sync_fn());
	say_tasks("synced");
	/* Only what the sync made durable survives. */
	kill(getpid(), SIGKILL);
}

static void check(void)
{
	*(void **)&nvrecover_fn = preload_api("nvrecover");
	uint64_t v = 0;
	if (nvrecover_fn(&v, sizeof(v), "lazystart") == NULL) {
		printf("nothing recovered\n");
		exit(1);
	}
	printf("recovered %llu\n", (unsigned long long)v);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "idle";
	if (strcmp(mode, "idle") == 0)
		idle();
	else if (strcmp(mode, "start") == 0)
		start();
	else if (strcmp(mode, "check") == 0)
		check();
	else {
		fprintf(stderr, "usage: %s idle|start|check\n", argv[0]);
		return 2;
	}
	return 0;
}
