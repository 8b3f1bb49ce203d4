/* SPDX-License-Identifier: BSD-3-Clause */
/* readrace -- read(2) and pread(2) of a regular file into a malloc'd buffer
 * that the program keeps writing, while epochs come every millisecond.
 * Under the mprotect tracker an epoch can write-protect a page of the
 * buffer again between the runtime's pre-fault and the kernel's copy; the
 * kernel then stops there and returns a short count, which a regular file
 * never gives natively before its end.  Every read must be whole. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEN (256u << 10)
#define BUFS 16
#define ROUNDS 800

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile int done;
static unsigned long spins;

static void *locker(void *arg)
{
	(void)arg;
	while (!done) {
		pthread_mutex_lock(&m);
		spins++;
		pthread_mutex_unlock(&m);
		usleep(100);
	}
	return NULL;
}

int main(void)
{
	char path[] = "/tmp/pmt-readrace-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	unlink(path);
	unsigned char *src = malloc(LEN);
	for (uint32_t i = 0; i < LEN; i++)
		src[i] = (unsigned char)(i * 2654435761u >> 24);
	if (write(fd, src, LEN) != (ssize_t)LEN)
		return 1;
	/* Buffers taken in turn: each is cold (write-protected again) by
	 * the time it is read into next. */
	unsigned char *bufs[BUFS];
	for (int b = 0; b < BUFS; b++)
		bufs[b] = calloc(1, LEN);
	pthread_t t;
	pthread_create(&t, NULL, locker, NULL);
	unsigned shorts = 0, wrong = 0;
	for (int r = 0; r < ROUNDS; r++) {
		unsigned char *buf = bufs[r % BUFS];
		ssize_t got = r % 2 ? pread(fd, buf, LEN, 0)
				    : (lseek(fd, 0, SEEK_SET), read(fd, buf, LEN));
		if (got != (ssize_t)LEN)
			shorts++;
		else if (memcmp(buf, src, LEN) != 0)
			wrong++;
		usleep(300);
	}
	done = 1;
	pthread_join(t, NULL);
	printf("rounds %d, short reads %u, wrong bytes %u\n", ROUNDS, shorts, wrong);
	return shorts || wrong;
}
