/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ackcount -- a counter whose acknowledged values must survive power loss
 * (tests/test_lossyfs.cpp drives it on the lossyfs FUSE file system).
 *
 *   run ROUNDS SYNC_EVERY [CTL FAIL_AT [ERRNO [LINGER_MS]]]
 *       ROUNDS times, under a lock: the counter becomes the round number
 *       (counted on from the round a restart recovered),
 *       stamped into one word of every cache line of a 1 MiB buffer.  After
 *       every SYNC_EVERY-th round, pmthreads_sync(): when it returns 0,
 *       prints "acked ROUND DURABLE" (that round is durable, the program was
 *       told so); when it fails, "syncfail ERRNO ROUND DURABLE".  From the
 *       first failure on, every later sync must fail with the same errno and
 *       the durable epoch must not move (else exit 1).  With CTL and FAIL_AT:
 *       before the sync of round FAIL_AT, writes "fail-fsync" to CTL (the
 *       lossyfs control file, or a FIFO whose reader answers by writing it
 *       back), so that sync's msync fails (with ERRNO, default EIO).  With LINGER_MS: then goes on with rounds, unsynced,
 *       a millisecond apart, for that long, checks that every line holds
 *       the last one and prints "ran ROUND" (the program keeps working
 *       after a failed write-back).
 *   verify
 *       finds the buffer after a restart; every line must hold the same
 *       round (no torn FASE); prints "counter ROUND".
 * Exit status: 0 checks passed, 1 a check failed (the reason on stderr),
 * 2 usage.  stdout is flushed after every line: a kill loses none.
 */
#include <pmthreads.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF_LEN (1u << 20)
#define LINE 64u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define FAIL(...)                                                 \
	do {                                                      \
		fprintf(stderr, "ackcount: FAILED: " __VA_ARGS__); \
		fprintf(stderr, "\n");                            \
		return 1;                                         \
	} while (0)

static int command(const char *ctl, const char *what)
{
	int fd = open(ctl, O_WRONLY);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, what, strlen(what));
	close(fd);
	if (w != (ssize_t)strlen(what))
		return -1;
	/* Read CTL back to its end: lossyfs has acted already (its counters),
	 * a FIFO's reader answers when it has (it opens the FIFO to write and
	 * closes it). */
	fd = open(ctl, O_RDONLY);
	if (fd < 0)
		return -1;
	char buf[256];
	while (read(fd, buf, sizeof(buf)) > 0) {
	}
	close(fd);
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static int linger(uint64_t *buf, uint64_t r, uint64_t ms)
{
	const struct timespec tick = { 0, 1000000 };
	for (uint64_t end = now_ms() + ms; now_ms() < end; nanosleep(&tick, NULL)) {
		r++;
		pthread_mutex_lock(&lock);
		for (size_t off = 0; off < BUF_LEN; off += LINE)
			buf[off / sizeof(uint64_t)] = r;
		pthread_mutex_unlock(&lock);
	}
	for (size_t off = 0; off < BUF_LEN; off += LINE)
		if (buf[off / sizeof(uint64_t)] != r)
			FAIL("line at offset %zu holds round %" PRIu64 " after round %" PRIu64, off,
			     buf[off / sizeof(uint64_t)], r);
	printf("ran %" PRIu64 "\n", r);
	return 0;
}

static int run(uint64_t rounds, uint64_t every, const char *ctl, uint64_t fail_at, int fail_errno,
	       uint64_t linger_ms)
{
	char fail_cmd[32];
	snprintf(fail_cmd, sizeof(fail_cmd), "fail-fsync %d", fail_errno);
	/* After a restart: on from the recovered round. */
	uint64_t *buf = nvrecover(NULL, BUF_LEN, "ackcount");
	if (buf == NULL)
		buf = nvmalloc(BUF_LEN, "ackcount");
	if (buf == NULL)
		FAIL("nvmalloc: %s", pmthreads_errormsg());
	const uint64_t start = buf[0];
	int first_err = 0;
	uint64_t stuck = 0;
	for (uint64_t r = start + 1; r <= start + rounds; r++) {
		pthread_mutex_lock(&lock);
		for (size_t off = 0; off < BUF_LEN; off += LINE)
			buf[off / sizeof(uint64_t)] = r;
		pthread_mutex_unlock(&lock);
		if (r % every != 0)
			continue;
		if (ctl != NULL && r == fail_at && command(ctl, fail_cmd) != 0)
			FAIL("cannot write to %s: %s", ctl, strerror(errno));
		int rc = pmthreads_sync();
		int e = errno;
		uint64_t d = pmthreads_durable_epoch();
		if (rc == 0) {
			if (first_err != 0)
				FAIL("round %" PRIu64 ": pmthreads_sync succeeded after it had failed "
				     "with %s", r, strerror(first_err));
			printf("acked %" PRIu64 " %" PRIu64 "\n", r, d);
		} else {
			if (first_err == 0) {
				first_err = e;
				stuck = d;
			} else if (e != first_err) {
				FAIL("round %" PRIu64 ": pmthreads_sync failed with %s, the first "
				     "failure was %s", r, strerror(e), strerror(first_err));
			}
			if (d != stuck)
				FAIL("round %" PRIu64 ": the durable epoch moved from %" PRIu64
				     " to %" PRIu64 " after a failed write-back", r, stuck, d);
			printf("syncfail %d %" PRIu64 " %" PRIu64 "\n", e, r, d);
		}
		fflush(stdout);
	}
	return linger_ms != 0 ? linger(buf, start + rounds, linger_ms) : 0;
}

static int verify(void)
{
	const uint64_t *buf = nvrecover(NULL, BUF_LEN, "ackcount");
	if (buf == NULL)
		FAIL("nvrecover(\"ackcount\") found nothing");
	uint64_t r = buf[0];
	for (size_t off = 0; off < BUF_LEN; off += LINE)
		if (buf[off / sizeof(uint64_t)] != r)
			FAIL("line at offset %zu holds round %" PRIu64 ", line 0 round %" PRIu64
			     " (a torn FASE)", off, buf[off / sizeof(uint64_t)], r);
	printf("counter %" PRIu64 "\n", r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "run") == 0) {
		uint64_t every = strtoull(argv[3], NULL, 0);
		if (every == 0)
			every = 1;
		return run(strtoull(argv[2], NULL, 0), every, argc >= 6 ? argv[4] : NULL,
			   argc >= 6 ? strtoull(argv[5], NULL, 0) : 0,
			   argc >= 7 ? atoi(argv[6]) : EIO,
			   argc >= 8 ? strtoull(argv[7], NULL, 0) : 0);
	}
	if (argc == 2 && strcmp(argv[1], "verify") == 0)
		return verify();
	fprintf(stderr, "usage: ackcount run ROUNDS SYNC_EVERY [CTL FAIL_AT [ERRNO [LINGER_MS]]] | verify\n");
	return 2;
}
