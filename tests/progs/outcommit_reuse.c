/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * outcommit_reuse -- a socket output commit holds, ended in one way (argv[1]:
 * close, dup2, close_range, fdopen+fclose), and its number then given to a
 * regular file: a write to the file must reach it at once (not be held as
 * the socket's was).  Output commit keeps a seen-made descriptor's kind
 * (lib/output/output.h); every one of these ways must forget it.
 * Prints "passed <how>" and exits 0, or says what went wrong and exits 1.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *what)
{
	printf("failed: %s\n", what);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return fail("usage: outcommit_reuse close|dup2|close_range|fdopen FILE");
	const char *how = argv[1];
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return fail("socketpair");
	/* Twice: the second call is the one that uses the kept kind. */
	if (write(sv[0], "held", 4) != 4 || write(sv[0], "held", 4) != 4)
		return fail("write to the socket");
	int n = sv[0];
	int file = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (file < 0)
		return fail("open the file");
	if (strcmp(how, "dup2") == 0) {
		if (dup2(file, n) != n)
			return fail("dup2");
	} else {
		if (strcmp(how, "close") == 0) {
			close(n);
		} else if (strcmp(how, "close_range") == 0) {
			if (close_range((unsigned)n, (unsigned)n, 0) != 0)
				return fail("close_range");
		} else if (strcmp(how, "fdopen") == 0) {
			FILE *f = fdopen(n, "w");
			if (f == NULL)
				return fail("fdopen");
			fclose(f);	/* glibc closes n without close(2) */
		} else {
			return fail("unknown way");
		}
		/* The number again, by a call output commit does not see
		 * (glibc's own open): only the ending told it. */
		FILE *g = fopen(argv[2], "r+");
		if (g == NULL || fileno(g) != n)
			return fail("the file did not get the socket's number");
	}
	if (write(n, "x", 1) != 1)
		return fail("write to the file");
	char c = 0;
	if (pread(file, &c, 1, 0) != 1 || c != 'x')
		return fail("the file's write was held (the socket's kind was kept)");
	printf("passed %s\n", how);
	return 0;
}
