/* SPDX-License-Identifier: BSD-3-Clause */
/* Kernel writes into malloc'd memory that the program does not make itself:
 * a stdio stream's buffer (glibc allocates it and fills it with an internal
 * read(2)), the user database (getpwuid reads /etc/passwd through stdio) and
 * the event arrays of epoll_wait and poll.  Under the mprotect tracker each
 * used to fail with EFAULT once an epoch had made the heap read-only
 * (memcached: "can't find the user root", "epoll_wait: Bad address").  The
 * sleeps let epochs (10 ms in the test) re-protect everything in between.
 * Prints a result independent of timing. */
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(long ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

int main(void)
{
	char path[] = "/tmp/pmt-libcreads-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	FILE *f = fdopen(fd, "w+");
	for (int i = 0; i < 2000; i++)
		fprintf(f, "line %d\n", i);
	fflush(f);
	pause_ms(30);
	rewind(f);
	unsigned long sum = 0, lines = 0;
	int c;
	while ((c = getc(f)) != EOF) {
		sum = sum * 31 + (unsigned)c;
		lines += c == '\n';
		if (lines == 1000 && c == '\n')
			pause_ms(30); /* the rest comes from a refill after an epoch */
	}
	printf("stdio: %lu lines, error %d, sum %lx\n", lines, ferror(f), sum);
	fclose(f);
	unlink(path);

	pause_ms(30);
	struct passwd *pw = getpwuid(0);
	printf("uid 0: %s\n", pw != NULL ? pw->pw_name : "(not found)");

	int p[2];
	if (pipe(p) != 0)
		return 1;
	int ep = epoll_create1(0);
	struct epoll_event add = { .events = EPOLLIN, .data.fd = p[0] };
	epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &add);
	struct epoll_event *ev = calloc(16, sizeof(*ev));
	struct pollfd *pf = calloc(4, sizeof(*pf));
	ev[0].data.fd = -1;
	pf[0].fd = p[0];
	pf[0].events = POLLIN;
	(void)!write(p[1], "x", 1);
	pause_ms(30);
	int n = epoll_wait(ep, ev, 16, 1000);
	printf("epoll_wait: %d, fd ok %d\n", n, n == 1 && ev[0].data.fd == p[0]);
	pause_ms(30);
	n = poll(pf, 1, 1000);
	printf("poll: %d, revents %d\n", n, pf[0].revents);
	free(ev);
	free(pf);
	return 0;
}
