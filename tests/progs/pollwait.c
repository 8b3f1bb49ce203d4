/* SPDX-License-Identifier: BSD-3-Clause */
/* poll, ppoll, select and pselect on arrays and sets in malloc'd memory that
 * wait across epochs (10 ms
 * in the test), outside any critical section.  The kernel writes every
 * revents back when the call returns -- after a timeout and a signal too --
 * and under the mprotect tracker an epoch had made the array read-only
 * again meanwhile: the call failed with EFAULT after consuming its timeout
 * or its signal, and the preload's retry waited again (a 300 ms timeout
 * came back as EFAULT after 1.5 s, a SIGALRM's EINTR was lost; varnishd's
 * manager missed its SIGTERM).  Each wait must end as natively.  Prints a
 * result independent of timing. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/select.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2];

static void on_alarm(int sig) { (void)sig; }

static void *late_writer(void *unused)
{
	(void)unused;
	struct timespec t = { 0, 300 * 1000000L };
	nanosleep(&t, NULL);
	if (write(pipe_fds[1], "x", 1) != 1)
		abort();
	return NULL;
}

static void report(const char *what, int r, const struct pollfd *fds)
{
	printf("%s: %d %s revents %#x %#x\n", what, r, r < 0 ? strerror(errno) : "-",
	       (unsigned)fds[0].revents, (unsigned)fds[1].revents);
}

int main(void)
{
	if (pipe(pipe_fds) != 0)
		return 2;
	struct pollfd *fds = malloc(2 * sizeof(*fds));
	fds[0] = (struct pollfd){ .fd = pipe_fds[0], .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = pipe_fds[1], .events = 0 };

	int r = poll(fds, 2, 300);
	report("poll, timeout", r, fds);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval once = { .it_value = { 0, 300000 } };
	setitimer(ITIMER_REAL, &once, NULL);
	r = poll(fds, 2, 3000);
	report("poll, SIGALRM", r, fds);

	pthread_t w;
	pthread_create(&w, NULL, late_writer, NULL);
	struct timespec limit = { 10, 0 };
	r = ppoll(fds, 2, &limit, NULL);
	report("ppoll, data", r, fds);
	pthread_join(w, NULL);
	char byte;
	if (read(pipe_fds[0], &byte, 1) != 1)
		return 3;

	/* select and pselect: the sets and select's time left in the heap. */
	fd_set *rd = malloc(sizeof(*rd));
	struct timeval *tv = malloc(sizeof(*tv));
	FD_ZERO(rd);
	FD_SET(pipe_fds[0], rd);
	*tv = (struct timeval){ 0, 300000 };
	r = select(pipe_fds[0] + 1, rd, NULL, NULL, tv);
	printf("select, timeout: %d %s set %d left %ld.%06ld\n", r, r < 0 ? strerror(errno) : "-",
	       FD_ISSET(pipe_fds[0], rd) ? 1 : 0, (long)tv->tv_sec, (long)tv->tv_usec);

	FD_SET(pipe_fds[0], rd);
	*tv = (struct timeval){ 3, 0 };
	setitimer(ITIMER_REAL, &once, NULL);
	r = select(pipe_fds[0] + 1, rd, NULL, NULL, tv);
	printf("select, SIGALRM: %d %s\n", r, r < 0 ? strerror(errno) : "-");

	FD_SET(pipe_fds[0], rd);
	pthread_create(&w, NULL, late_writer, NULL);
	r = pselect(pipe_fds[0] + 1, rd, NULL, NULL, &limit, NULL);
	printf("pselect, data: %d %s set %d\n", r, r < 0 ? strerror(errno) : "-",
	       FD_ISSET(pipe_fds[0], rd) ? 1 : 0);
	pthread_join(w, NULL);
	free(rd);
	free(tv);
	free(fds);
	return 0;
}
