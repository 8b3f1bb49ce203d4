/* SPDX-License-Identifier: BSD-3-Clause */
/* fread into a malloc'd buffer from a pipe whose data comes late.  The
 * preload pre-faults the buffer, then glibc's own read(2) waits on the pipe
 * outside any critical section while epochs (10 ms in the test) make the
 * buffer's pages read-only again; when the data arrives the kernel's copy
 * fails with EFAULT, consuming nothing.  Under the mprotect tracker fread
 * and fread_unlocked then came back short with the stream's error flag set
 * (sort --parallel: "read failed: Bad address"); they must read everything.
 * Prints a result independent of timing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (48 * 1024)	/* fits in a pipe's buffer: one write, one copy */

static int pipe_fds[2];

static void pause_ms(long ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

static void *writer(void *unused)
{
	(void)unused;
	char *data = malloc(CHUNK);
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < CHUNK; i++)
			data[i] = (char)('a' + (i * 7 + (size_t)round) % 26);
		pause_ms(60);	/* several epochs while the reader waits */
		if (write(pipe_fds[1], data, CHUNK) != CHUNK)
			abort();
	}
	free(data);
	close(pipe_fds[1]);
	return NULL;
}

static void report(const char *how, const char *buf, size_t got, FILE *f)
{
	unsigned long sum = 0;
	for (size_t i = 0; i < got; i++)
		sum = sum * 31 + (unsigned char)buf[i];
	printf("%s: %zu of %d bytes, error %d, sum %lu\n", how, got, CHUNK, ferror(f) != 0, sum);
}

int main(void)
{
	if (pipe(pipe_fds) != 0)
		return 1;
	FILE *f = fdopen(pipe_fds[0], "r");
	/* Unbuffered: every fread goes straight into the caller's buffer. */
	setvbuf(f, NULL, _IONBF, 0);
	char *buf = malloc(CHUNK);
	memset(buf, 0, CHUNK);
	pthread_t t;
	pthread_create(&t, NULL, writer, NULL);
	size_t got = fread(buf, 1, CHUNK, f);
	report("fread", buf, got, f);
	memset(buf, 0, CHUNK);
	flockfile(f);
	got = fread_unlocked(buf, 1, CHUNK, f);
	funlockfile(f);
	report("fread_unlocked", buf, got, f);
	pthread_join(t, NULL);
	free(buf);
	fclose(f);
	return 0;
}
