/* SPDX-License-Identifier: BSD-3-Clause */
/* POSIX asynchronous I/O into malloc'd memory (issue 33; the Open POSIX Test
 * Suite's aio_suspend/1-1, 4-1, 9-1 and lio_listio/15-1).  glibc runs each
 * request on a helper thread of its own that blocks every signal: it reads
 * the file into the buffer (a system call, which fails with EFAULT on a
 * write-protected page) and stores the result in the control block (a write
 * that, faulting with SIGSEGV blocked, ends the process).  Here both are
 * heap pages the program wrote, then left alone for a few epochs (at the
 * tests' 10 ms interval) -- under the mprotect tracker write-protected again
 * -- in rounds of aio_read + aio_suspend, aio_read polled
 * with aio_error, lio_listio(LIO_WAIT) and lio_listio(LIO_NOWAIT) + aio_suspend.
 * Prints what each round read; the runtime must not change a line. */
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (64u << 10)	/* 16 pages a buffer */
#define NREQ 4
#define ROUNDS 8

static int fd;

static unsigned long sum(const unsigned char *b, size_t n)
{
	unsigned long s = 0;
	for (size_t i = 0; i < n; i++)
		s = s * 31 + b[i];
	return s;
}

/* A control block and a buffer, both malloc'd and written; settle() then
 * lets epochs collect them before glibc's helper and the kernel write them. */
static struct aiocb *fresh_request(int i)
{
	struct aiocb *cb = malloc(sizeof(*cb) + 4096);	/* its own page or two */
	unsigned char *buf = malloc(CHUNK);
	if (cb == NULL || buf == NULL)
		exit(2);
	memset(cb, 0, sizeof(*cb) + 4096);
	memset(buf, 0xee, CHUNK);
	struct aiocb init = { .aio_fildes = fd, .aio_buf = buf, .aio_nbytes = CHUNK,
			      .aio_offset = (off_t)i * CHUNK, .aio_lio_opcode = LIO_READ,
			      .aio_sigevent.sigev_notify = SIGEV_NONE };
	memcpy(cb, &init, sizeof(init));
	return cb;
}

static void report(const char *how, int round, struct aiocb **cbs, int n)
{
	unsigned long s = 0;
	int ok = 0;
	for (int i = 0; i < n; i++) {
		int e = aio_error(cbs[i]);
		ssize_t r = aio_return(cbs[i]);
		if (e == 0 && r == CHUNK)
			ok++;
		else
			printf("%s round %d request %d: error %s, returned %zd\n", how, round, i,
			       strerror(e), r);
		s += sum((const unsigned char *)cbs[i]->aio_buf, CHUNK);
		free((void *)cbs[i]->aio_buf);
		free(cbs[i]);
	}
	if (round == 0 || ok != n)
		printf("%s: %d of %d read, sum %lu\n", how, ok, n, s);
}

static void settle(void)
{
	usleep(50 * 1000);
}

static void wait_all(struct aiocb **cbs, int n)
{
	for (int i = 0; i < n; i++)
		while (aio_error(cbs[i]) == EINPROGRESS) {
			const struct aiocb *one[1] = { cbs[i] };
			if (aio_suspend(one, 1, NULL) != 0 && errno != EINTR) {
				perror("aio_suspend");
				exit(3);
			}
		}
}

int main(void)
{
	char path[] = "/tmp/pmt-aio-XXXXXX";
	fd = mkstemp(path);
	if (fd < 0)
		return 2;
	unlink(path);
	static unsigned char data[NREQ * CHUNK];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + i / 4096);
	if (write(fd, data, sizeof(data)) != (ssize_t)sizeof(data))
		return 2;
	printf("file sum %lu\n", sum(data, CHUNK));
	struct aiocb *cbs[NREQ];
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < NREQ; i++)
			cbs[i] = fresh_request(i);
		settle();
		for (int i = 0; i < NREQ; i++) {
			if (aio_read(cbs[i]) != 0) {
				perror("aio_read");
				return 3;
			}
		}
		wait_all(cbs, NREQ);
		report("aio_read + aio_suspend", round, cbs, NREQ);

		cbs[0] = fresh_request(round % NREQ);
		settle();
		if (aio_read(cbs[0]) != 0)
			return 3;
		while (aio_error(cbs[0]) == EINPROGRESS)
			usleep(100);
		report("aio_read polled", round, cbs, 1);

		for (int i = 0; i < NREQ; i++)
			cbs[i] = fresh_request(i);
		settle();
		if (lio_listio(LIO_WAIT, cbs, NREQ, NULL) != 0) {
			perror("lio_listio(LIO_WAIT)");
			return 3;
		}
		report("lio_listio(LIO_WAIT)", round, cbs, NREQ);

		for (int i = 0; i < NREQ; i++)
			cbs[i] = fresh_request(i);
		settle();
		if (lio_listio(LIO_NOWAIT, cbs, NREQ, NULL) != 0) {
			perror("lio_listio(LIO_NOWAIT)");
			return 3;
		}
		wait_all(cbs, NREQ);
		report("lio_listio(LIO_NOWAIT)", round, cbs, NREQ);
	}
	printf("done\n");
	return 0;
}
