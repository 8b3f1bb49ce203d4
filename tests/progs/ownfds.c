/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that closes descriptors it never opened, as servers do at start
 * (varnishd: close_range(3, ~0U)): close_range, closefrom, close() of every
 * number below the limit, dup2/dup3 onto numbers it finds open in
 * /proc/self/fd, a lowered RLIMIT_NOFILE, and a /proc/self/fd walk that
 * closes all it sees.  After each step it writes a counter in the heap under
 * a lock and, under the preload, asks for a durable epoch (pmthreads_sync
 * returns 0, pmthreads_durable_epoch advances); a file of its own records
 * every step and must hold exactly its lines at the end (no runtime output
 * in it: an epoch log writing into a reused number would show there).
 * Natively and under the preload it prints the same lines: the runtime's
 * descriptors must be invisible to these calls, and the numbers the program
 * gets must be the ones it gets natively.
 *
 * Never linked with pmthreads: the API is reached through weak references.
 * usage: prog_ownfds [crash | check]   crash: SIGKILL itself after the last
 * durable step; check: print the recovered counter
 */
#include <pmthreads.h>

#pragma weak nvmalloc
#pragma weak nvrecover
#pragma weak pmthreads_sync
#pragma weak pmthreads_durable_epoch
#pragma weak pmthreads_crashed
#pragma weak pmthreads_errormsg

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAGIC 0x7364666e776fULL

struct state {
	uint64_t magic;
	uint64_t steps;
};

static struct state *st;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int failures;
static char witness_path[64];
static char expected[4096];
static size_t expected_len;

static void fail(const char *what)
{
	fprintf(stderr, "ownfds: FAIL: %s (errno %s)\n", what, strerrorname_np(errno));
	failures++;
}

/* One line appended to the program's own file, through a descriptor opened
 * now (it takes the lowest free number, maybe one the runtime had). */
static void witness(const char *line)
{
	int fd = open(witness_path, O_WRONLY | O_APPEND);
	if (fd < 0) {
		fail("open the witness file");
		return;
	}
	size_t n = strlen(line);
	if (write(fd, line, n) != (ssize_t)n)
		fail("write the witness file");
	memcpy(expected + expected_len, line, n);
	expected_len += n;
	if (close(fd) != 0)
		fail("close the witness file");
}

/* Heap work under the lock, then (under the preload) a durable epoch. */
static void step(const char *name)
{
	pthread_mutex_lock(&lock);
	st->steps++;
	pthread_mutex_unlock(&lock);
	if (pmthreads_sync != NULL) {
		uint64_t before = pmthreads_durable_epoch();
		if (pmthreads_sync() != 0)
			fail("pmthreads_sync");
		if (pmthreads_durable_epoch() <= before)
			fail("the durable epoch did not advance");
	}
	char line[128];
	snprintf(line, sizeof(line), "step %s\n", name);
	witness(line);
	printf("%s: ok\n", name);
}

/* The descriptors /proc/self/fd lists above 2 (the listing's own excepted). */
static int list_fds(int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL) {
		fail("opendir /proc/self/fd");
		return 0;
	}
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		int fd = atoi(e->d_name);
		if (fd > 2 && fd != dirfd(d) && n < max)
			out[n++] = fd;
	}
	closedir(d);
	return n;
}

/* A few descriptors of the program's own: a pipe and /dev/null. */
static void open_some(int fds[3])
{
	if (pipe(fds) != 0)
		fail("pipe");
	fds[2] = open("/dev/null", O_RDONLY);
	if (fds[2] < 0)
		fail("open /dev/null");
}

static void expect_closed(const int fds[3], const char *by)
{
	for (int i = 0; i < 3; i++)
		if (fcntl(fds[i], F_GETFD) != -1 || errno != EBADF) {
			char what[96];
			snprintf(what, sizeof(what), "descriptor %d still open after %s", fds[i], by);
			fail(what);
		}
}

/* What open() gives now: 16 descriptors from 3 up, one after another, when
 * nothing above 2 is open (a runtime descriptor left among the low numbers
 * shows as a gap). */
static const char *numbering(void)
{
	int fds[16];
	bool contiguous = true;
	for (int i = 0; i < 16; i++) {
		fds[i] = open("/dev/null", O_RDONLY);
		contiguous = contiguous && fds[i] == 3 + i;
	}
	for (int i = 0; i < 16; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return contiguous ? "3 to 18 in order" : "not 3 to 18 in order";
}

static void check_pool_lock(void)
{
	const char *pool = getenv("PMTHREADS_POOL");
	if (pmthreads_sync == NULL || pool == NULL)
		return;
	int fd = open(pool, O_RDONLY);
	if (fd < 0) {
		fail("open the pool file");
		return;
	}
	struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET };
	if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
		fail("F_OFD_GETLK on the pool");
	else if (fl.l_type != F_WRLCK)
		fail("the pool is no longer locked by the runtime");
	close(fd);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(mode, "check") == 0) {
		st = nvrecover != NULL ? nvrecover(NULL, sizeof(*st), "ownfds") : NULL;
		if (st == NULL || st->magic != MAGIC) {
			printf("nothing recovered\n");
			return 1;
		}
		printf("recovered %llu steps, crashed: %s\n", (unsigned long long)st->steps,
		       pmthreads_crashed() ? "yes" : "no");
		return 0;
	}
	st = nvmalloc != NULL ? nvmalloc(sizeof(*st), "ownfds") : calloc(1, sizeof(*st));
	if (st == NULL) {
		fprintf(stderr, "ownfds: no heap: %s\n",
			pmthreads_errormsg != NULL ? pmthreads_errormsg() : "calloc");
		return 2;
	}
	pthread_mutex_lock(&lock);
	st->magic = MAGIC;
	pthread_mutex_unlock(&lock);
	const char *tmp = getenv("TMPDIR");
	snprintf(witness_path, sizeof(witness_path), "%s/ownfds.XXXXXX", tmp != NULL ? tmp : "/tmp");
	int w = mkstemp(witness_path);
	if (w < 0) {
		perror("mkstemp");
		return 2;
	}
	close(w);
	step("start");

	int fds[3];
	open_some(fds);
	if (close_range(3, ~0U, 0) != 0)
		fail("close_range(3, ~0U, 0)");
	expect_closed(fds, "close_range");
	printf("after close_range open() gives %s\n", numbering());
	step("close_range");

	open_some(fds);
	closefrom(3);
	expect_closed(fds, "closefrom");
	printf("after closefrom open() gives %s\n", numbering());
	step("closefrom");

	open_some(fds);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		fail("getrlimit");
	/* Every number below the limit (the runtime's are below 4096), at
	 * least 3..1023. */
	long top = rl.rlim_cur < 1024 ? 1024 : rl.rlim_cur > 65536 ? 65536 : (long)rl.rlim_cur;
	int closed = 0;
	for (long fd = 3; fd < top; fd++)
		closed += close((int)fd) == 0;
	printf("close() of every number from 3 closed %d\n", closed);
	expect_closed(fds, "close() of every number");
	printf("after it open() gives %s\n", numbering());
	step("close");

	/* Whatever /proc/self/fd lists now is not the program's: natively
	 * nothing.  dup2 and dup3 onto each, written through, then closed. */
	int listed[64];
	int n = list_fds(listed, 64);
	int wfd = open(witness_path, O_WRONLY | O_APPEND);
	int devnull = open("/dev/null", O_RDONLY);
	int dup_ok = 0;
	for (int i = 0; i < n; i++) {
		char line[64];
		snprintf(line, sizeof(line), "through a dup2 onto %d\n", listed[i]);
		if (dup2(wfd, listed[i]) != listed[i]) {
			fail("dup2 onto a listed descriptor");
			continue;
		}
		size_t len = strlen(line);
		if (write(listed[i], line, len) != (ssize_t)len)
			fail("write through the dup2");
		memcpy(expected + expected_len, line, len);
		expected_len += len;
		if (dup3(devnull, listed[i], O_CLOEXEC) != listed[i])
			fail("dup3 onto a listed descriptor");
		else if (close(listed[i]) != 0)
			fail("close the dup3");
		else
			dup_ok++;
	}
	printf("dup2/dup3 onto every listed descriptor: %s\n", dup_ok == n ? "ok" : "failed");
	close(wfd);
	close(devnull);
	step("dup2");

	/* A walk that closes everything it sees. */
	open_some(fds);
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL) {
		fail("opendir /proc/self/fd");
	} else {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			int fd = atoi(e->d_name);
			if (e->d_name[0] != '.' && fd > 2 && fd != dirfd(d))
				close(fd);
		}
		closedir(d);
	}
	expect_closed(fds, "the /proc/self/fd walk");
	printf("after the /proc/self/fd walk open() gives %s\n", numbering());
	step("walk");

	/* A limit below the runtime's numbers: new descriptors still work. */
	struct rlimit low = { 64, rl.rlim_max };
	if (setrlimit(RLIMIT_NOFILE, &low) != 0)
		fail("setrlimit(RLIMIT_NOFILE, 64)");
	int opened[5];
	for (int i = 0; i < 5; i++)
		opened[i] = open("/dev/null", O_RDONLY);
	printf("with RLIMIT_NOFILE 64 new descriptors are %d..%d\n", opened[0], opened[4]);
	errno = 0;
	int r = dup2(opened[0], 100);
	printf("dup2 onto 100 above the limit: %d %s\n", r, r < 0 ? strerrorname_np(errno) : "");
	step("rlimit");
	for (int i = 0; i < 5; i++)
		close(opened[i]);
	close_range(3, ~0U, 0);
	step("rlimit then close_range");
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		fail("setrlimit back");
	step("limit restored");

	check_pool_lock();
	FILE *f = fopen(witness_path, "r");
	char got[sizeof(expected) + 1];
	size_t len = f != NULL ? fread(got, 1, sizeof(got), f) : 0;
	if (f != NULL)
		fclose(f);
	bool intact = len == expected_len && memcmp(got, expected, len) == 0;
	printf("the program's own file holds exactly its lines: %s\n", intact ? "yes" : "no");
	if (!intact)
		fprintf(stderr, "ownfds: witness file:\n%.*s\n", (int)len, got);
	unlink(witness_path);
	printf("steps: %llu\n", (unsigned long long)st->steps);
	if (strcmp(mode, "crash") == 0) {
		fflush(stdout);
		raise(SIGKILL);
	}
	return failures == 0 ? 0 : 1;
}
