/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fork() while another thread holds each of the runtime's locks in turn
 * (tests/test_forkheld.cpp; issue 46).  Run under the tests' build of the
 * preload, libpmthreads_hooked, whose hooks (lib/prim/prim_locks_test.h)
 * are found with dlsym; never linked with pmthreads.
 *
 * For every lock the runtime names (prim.h: PRIM_LOCK_NAMED and
 * PRIM_LOCK_KIND records) that exists now, a holder thread takes it and
 * the main thread forks.  A lock of fork rank 0 stays held until fork has
 * returned in the parent: the child is a copy made while another thread
 * held it.  One of a rank is let go after 20 ms, while fork's prepare
 * handler waits for it (the parent checks that fork did wait).  The child
 * checks that every named lock is free in it, then does what a child does
 * with the runtime -- malloc and free (the persistent heap in malloc mode),
 * nvmalloc, sigaction, a descriptor opened, dup2'd and closed, a thread and
 * a mutex, stdio, pmthreads_sync (ENOTSUP: a child is never persisted), a
 * fork of its own -- and exits through exit(3), the runtime's exit handler
 * (final statistics, the FASE checker's summary) included.  The parent
 * waits for it at most 30 s, then kills it.
 *
 * Under PMTHREADS_CHECK, while the FASE checker's report lock is held, a
 * worker writes to the heap outside any lock at a call site never seen
 * before: its fault handler waits for that lock inside the tracker (a
 * handler in flight, which a tracker's detach waits for) when fork copies
 * the process.
 *
 * Output, once every lock was tried: one line per lock, "ok K I RANK WHAT"
 * or "FAILED K I RANK WHAT: why", then "kinds N" (kinds with a lock now)
 * and "forks M".  Exit status 0 when every child exited 0 in time; 1 when
 * one did not; 3 not under the hooked preload.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preload_api.h"

static size_t (*kinds_fn)(void);
static const char *(*what_fn)(size_t);
static int (*rank_fn)(size_t);
static bool (*take_fn)(size_t, size_t);
static void (*release_fn)(size_t, size_t);
static bool (*free_fn)(size_t *, size_t *);
static void *(*nvmalloc_fn)(size_t, const char *);
static int (*sync_fn)(void);

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) != 0)
		;
}

/* ---- the holder ---- */

static struct {
	size_t k, i;
	bool ranked;
	atomic_bool held, forked, released;
} hold;

static void *holder(void *unused)
{
	(void)unused;
	if (!take_fn(hold.k, hold.i)) {
		atomic_store(&hold.released, true);	/* no such lock */
		return NULL;
	}
	atomic_store(&hold.held, true);
	/* Rank 0: held until the parent's fork returned (a bound keeps a
	 * broken runtime from hanging the test here). */
	uint64_t until = now_ms() + (hold.ranked ? 20 : 10000);
	while (now_ms() < until && !atomic_load(&hold.forked))
		sleep_ms(1);
	atomic_store(&hold.released, true);
	release_fn(hold.k, hold.i);
	return NULL;
}

/* ---- a write outside any lock at a new call site (PMTHREADS_CHECK) ---- */

#define SITES 64
typedef void (*site_fn)(volatile char *);
#define SITE(n) static __attribute__((noinline)) void site_##n(volatile char *p) { p[n] = (char)n; }
#define SITES8(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) SITE(a##5) SITE(a##6) SITE(a##7)
SITES8(1) SITES8(2) SITES8(3) SITES8(4) SITES8(5) SITES8(6) SITES8(7) SITES8(8)
#define REF8(a) site_##a##0, site_##a##1, site_##a##2, site_##a##3, site_##a##4, site_##a##5, \
		site_##a##6, site_##a##7
static const site_fn sites[SITES] = { REF8(1), REF8(2), REF8(3), REF8(4),
				       REF8(5), REF8(6), REF8(7), REF8(8) };
static unsigned next_site;
static atomic_bool writing, written;
static volatile char *unlocked_page;

static void *unlocked_writer(void *unused)
{
	(void)unused;
	atomic_store(&writing, true);
	sites[next_site % SITES](unlocked_page);
	atomic_store(&written, true);
	return NULL;
}

/* ---- the child ---- */

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static bool nvmalloc_mode;

static void *child_thread(void *arg)
{
	pthread_mutex_lock(&mutex);
	char *p = malloc(100);
	if (p != NULL)
		memset(p, 1, 100);
	free(p);
	pthread_mutex_unlock(&mutex);
	return arg;
}

static void on_usr1(int sig) { (void)sig; }

static void child(void)
{
	size_t k, i;
	if (!free_fn(&k, &i)) {
		printf("child: %s (%zu, lock %zu) is held\n", what_fn(k), k, i);
		fflush(stdout);
		_exit(4);
	}
	void *blocks[64];
	for (int round = 0; round < 4; round++) {
		for (int b = 0; b < 64; b++) {
			blocks[b] = malloc((size_t)(16 << (b % 14)));
			if (blocks[b] != NULL)
				memset(blocks[b], b, 16);
		}
		for (int b = 0; b < 64; b++)
			free(blocks[b]);
	}
	if (nvmalloc_mode) {
		char name[32];
		snprintf(name, sizeof(name), "child-%d", (int)getpid());
		char *o = nvmalloc_fn(256, name);
		if (o == NULL) {
			printf("child: nvmalloc failed: %s\n", strerror(errno));
			_exit(5);
		}
		o[0] = 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		_exit(6);
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || dup2(fd, fd + 1) < 0 || close(fd + 1) != 0 || close(fd) != 0)
		_exit(7);
	pthread_t t;
	if (pthread_create(&t, NULL, child_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
		_exit(8);
	if (sync_fn() == 0 || errno != ENOTSUP)
		_exit(9);
	pid_t g = fork();
	if (g == 0) {
		free(malloc(64));
		exit(0);
	}
	int st = 0;
	if (g < 0 || waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		_exit(10);
	printf("child %d done\n", (int)getpid());
	exit(0);
}

/* ---- one fork with lock i of kind k held ---- */

#define LINE 320
static char (*lines)[LINE];
static size_t n_lines, cap_lines;
static int failures;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	if (n_lines == cap_lines) {
		cap_lines = cap_lines ? 2 * cap_lines : 256;
		lines = realloc(lines, cap_lines * sizeof(*lines));
		if (lines == NULL)
			abort();
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(lines[n_lines++], LINE, fmt, ap);
	va_end(ap);
}

/* false when kind k has no lock i now. */
static bool fork_with_held(size_t k, size_t i, bool check_mode)
{
	int rank = rank_fn(k);
	const char *what = what_fn(k);
	hold.k = k;
	hold.i = i;
	hold.ranked = rank > 0;
	atomic_store(&hold.held, false);
	atomic_store(&hold.forked, false);
	atomic_store(&hold.released, false);
	pthread_t h;
	if (pthread_create(&h, NULL, holder, NULL) != 0) {
		say("FAILED %zu %zu %d %s: pthread_create: %s", k, i, rank, what, strerror(errno));
		failures++;
		return true;
	}
	while (!atomic_load(&hold.held) && !atomic_load(&hold.released))
		sleep_ms(1);
	if (!atomic_load(&hold.held)) {
		pthread_join(h, NULL);
		return false;	/* no such lock */
	}
	/* The FASE checker's report lock: a handler waiting for it. */
	pthread_t w;
	bool writer = false;
	if (check_mode && strstr(what, "fase_checker") != NULL) {
		atomic_store(&writing, false);
		atomic_store(&written, false);
		/* Pages of the heap never written: the first store faults. */
		char name[32];
		snprintf(name, sizeof(name), "unlocked-%u", next_site);
		unlocked_page = nvmalloc_fn(1 << 16, name);
		writer = unlocked_page != NULL &&
			 pthread_create(&w, NULL, unlocked_writer, NULL) == 0;
		while (writer && !atomic_load(&writing))
			sleep_ms(1);
		sleep_ms(50);
	}
	bool writer_waited = writer && !atomic_load(&written);
	pid_t pid = fork();
	bool released_before = atomic_load(&hold.released);
	atomic_store(&hold.forked, true);
	if (pid == 0)
		child();
	pthread_join(h, NULL);
	if (writer) {
		pthread_join(w, NULL);
		next_site++;
	}
	if (pid < 0) {
		say("FAILED %zu %zu %d %s: fork: %s", k, i, rank, what, strerror(errno));
		failures++;
		return true;
	}
	char why[160] = "";
	int st = 0;
	uint64_t deadline = now_ms() + 30000;
	pid_t r;
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
		sleep_ms(2);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		snprintf(why, sizeof(why), "the child hung (killed after 30 s)");
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(why, sizeof(why), "the child ended with %s %d",
			 WIFEXITED(st) ? "status" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	} else if (rank > 0 && !released_before) {
		snprintf(why, sizeof(why), "fork did not wait for the lock (rank %d)", rank);
	} else if (rank == 0 && released_before) {
		snprintf(why, sizeof(why), "the lock was let go before fork returned");
	} else if (writer && !writer_waited) {
		snprintf(why, sizeof(why), "the unlocked write did not wait in its handler");
	}
	if (writer_waited)
		say("handler waiting at fork: %zu %zu", k, i);
	if (why[0] != '\0') {
		say("FAILED %zu %zu %d %s: %s", k, i, rank, what, why);
		failures++;
	} else {
		say("ok %zu %zu %d %s", k, i, rank, what);
	}
	return true;
}

int main(void)
{
	*(void **)&kinds_fn = preload_api("prim_test_lock_kinds");
	*(void **)&what_fn = preload_api("prim_test_lock_what");
	*(void **)&rank_fn = preload_api("prim_test_lock_rank");
	*(void **)&take_fn = preload_api("prim_test_lock_take");
	*(void **)&release_fn = preload_api("prim_test_lock_release");
	*(void **)&free_fn = preload_api("prim_test_locks_free");
	*(void **)&nvmalloc_fn = preload_api("nvmalloc");
	*(void **)&sync_fn = preload_api("pmthreads_sync");
	const char *heap = getenv("PMTHREADS_HEAP");
	nvmalloc_mode = heap == NULL || strcmp(heap, "malloc") != 0;
	const char *check = getenv("PMTHREADS_CHECK");
	bool check_mode = check != NULL && strcmp(check, "0") != 0 && check[0] != '\0';
	/* The pool open (nvmalloc mode: the runtime starts here), something
	 * held by output commit (a pipe on stdout), an epoch durable. */
	char *o = nvmalloc_fn(4096, "forkheld");
	if (o == NULL) {
		printf("nvmalloc failed: %s\n", strerror(errno));
		return 1;
	}
	pthread_mutex_lock(&mutex);
	memset(o, 7, 4096);
	pthread_mutex_unlock(&mutex);
	printf("started\n");
	fflush(stdout);
	if (sync_fn() != 0) {
		printf("pmthreads_sync failed: %s\n", strerror(errno));
		return 1;
	}
	size_t n = kinds_fn(), seen = 0, forks = 0;
	for (size_t k = 0; k < n; k++) {
		size_t i = 0;
		while (fork_with_held(k, i, check_mode))
			i++;
		seen += i > 0;
		forks += i;
	}
	for (size_t l = 0; l < n_lines; l++)
		printf("%s\n", lines[l]);
	printf("kinds %zu of %zu\nforks %zu\n", seen, n, forks);
	return failures == 0 ? 0 : 1;
}
