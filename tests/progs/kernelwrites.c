/* SPDX-License-Identifier: BSD-3-Clause */
/* System calls that write into malloc'd memory handed to them (socket
 * addresses, links, random bytes, file status) and libc functions that
 * allocate a buffer and fill it with a system call of their own (opendir's
 * directory stream, getcwd(NULL, 0)).  Under the mprotect tracker a clean
 * heap page is read-only and such a kernel write fails with EFAULT unless
 * the runtime pre-faults it.  Each buffer is written once, then an epoch
 * (10 ms in the test) is let pass to protect it again before the call.
 * Prints a result independent of timing. */
/* stat and stat64 are separate symbols to interpose; with 64-bit file
 * offsets (meson's default) the header would make both names stat64. */
#undef _FILE_OFFSET_BITS

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(long ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

/* A fresh block, touched once so that the next epoch protects it again. */
static void *fresh(size_t n)
{
	void *p = malloc(n);
	if (p == NULL)
		exit(1);
	memset(p, 0x5a, n);
	return p;
}

static int fail(const char *what)
{
	perror(what);
	return 1;
}

int main(void)
{
	char dir[] = "/tmp/pmt-kernelwrites-XXXXXX";
	if (mkdtemp(dir) == NULL)
		return fail("mkdtemp");
	char path[256], link[256];
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof(path), "%s/file-%02d", dir, i);
		int fd = open(path, O_CREAT | O_WRONLY, 0600);
		if (fd < 0 || write(fd, path, (size_t)i) != i)
			return fail("create");
		close(fd);
	}
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(path, sizeof(path), "%s/file-07", dir);
	if (symlink(path, link) != 0)
		return fail("symlink");

	struct stat *st = fresh(sizeof(*st));
	/* What a program built with 64-bit file offsets calls. */
	struct stat64 *st64 = fresh(sizeof(*st64));
	char *target = fresh(256);
	unsigned char *rnd = fresh(4096);
	struct sockaddr_in *addr = fresh(sizeof(*addr));
	socklen_t *len = fresh(sizeof(*len));
	int *sockopt = fresh(sizeof(int));
	pause_ms(40);

	for (int round = 0; round < 3; round++) {
		/* opendir + readdir: glibc fills its stream with getdents64. */
		DIR *d = opendir(dir);
		if (d == NULL)
			return fail("opendir");
		int entries = 0;
		struct dirent *e;
		while ((e = readdir(d)) != NULL)
			entries++;
		closedir(d);

		char *cwd = getcwd(NULL, 0);
		if (cwd == NULL)
			return fail("getcwd");
		free(cwd);

		snprintf(path, sizeof(path), "%s/file-%02d", dir, 10 + round);
		if (stat(path, st) != 0)
			return fail("stat");
		long size = (long)st->st_size;
		pause_ms(15);
		if (stat64(path, st64) != 0 || (long)st64->st_size != size)
			return fail("stat64");
		pause_ms(15);
		int sfd = open(path, O_RDONLY);
		if (sfd < 0 || fstat64(sfd, st64) != 0 || (long)st64->st_size != size)
			return fail("fstat64");
		close(sfd);
		pause_ms(15);
		if (lstat(link, st) != 0 || !S_ISLNK(st->st_mode))
			return fail("lstat");
		pause_ms(15);
		ssize_t n = readlink(link, target, 255);
		if (n < 0)
			return fail("readlink");
		target[n] = '\0';

		pause_ms(15);
		if (getrandom(rnd, 4096, 0) != 4096)
			return fail("getrandom");

		int lfd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in any = { .sin_family = AF_INET,
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&any, sizeof(any)) != 0 ||
		    listen(lfd, 1) != 0)
			return fail("listen");
		pause_ms(15);
		*len = sizeof(*addr);
		if (getsockname(lfd, (struct sockaddr *)addr, len) != 0)
			return fail("getsockname");
		int cfd = socket(AF_INET, SOCK_STREAM, 0);
		if (cfd < 0 || connect(cfd, (struct sockaddr *)addr, sizeof(*addr)) != 0)
			return fail("connect");
		pause_ms(15);
		*len = sizeof(*addr);
		int afd = accept(lfd, (struct sockaddr *)addr, len);
		if (afd < 0)
			return fail("accept");
		pause_ms(15);
		socklen_t *olen = len;
		*olen = sizeof(int);
		if (getsockopt(afd, SOL_SOCKET, SO_TYPE, sockopt, olen) != 0)
			return fail("getsockopt");
		printf("round %d: %d entries, size %ld, link -> %s, peer family %d, type %d\n", round,
		       entries, size, strrchr(target, '/') + 1, addr->sin_family, *sockopt);
		close(afd);
		close(cfd);
		close(lfd);
		pause_ms(15);
	}

	unlink(link);
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof(path), "%s/file-%02d", dir, i);
		unlink(path);
	}
	rmdir(dir);
	free(st);
	free(target);
	free(rnd);
	free(addr);
	free(len);
	free(sockopt);
	return 0;
}
