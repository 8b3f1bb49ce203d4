/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * outcommit_dup -- writes through two descriptors of one pipe, alternating,
 * must come out in the order of the calls under output commit.
 *
 *   outcommit_dup dup|dup2|dup3|fcntl
 *
 * The copy is made with the call named; then, holding a lock (so that one
 * epoch covers every write and nothing is released in between), 'a' goes
 * through the copy and 'b' through the original, 50 times each.  Prints
 * "ordered N" and exits 0 when the reader gets abab..., else "reordered"
 * and exits 1.  tests/test_output.cpp runs it under the preload.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: outcommit_dup dup|dup2|dup3|fcntl\n");
		return 2;
	}
	int p[2];
	if (pipe(p) != 0) {
		perror("outcommit_dup: pipe");
		return 2;
	}
	int copy = -1;
	if (strcmp(argv[1], "dup") == 0)
		copy = dup(p[1]);
	else if (strcmp(argv[1], "dup2") == 0)
		copy = dup2(p[1], 20);
	else if (strcmp(argv[1], "dup3") == 0)
		copy = dup3(p[1], 21, O_CLOEXEC);
	else if (strcmp(argv[1], "fcntl") == 0)
		copy = fcntl(p[1], F_DUPFD_CLOEXEC, 22);
	if (copy < 0) {
		fprintf(stderr, "outcommit_dup: cannot make a copy with \"%s\"\n", argv[1]);
		return 2;
	}
	pthread_mutex_lock(&lock);
	for (int i = 0; i < 50; i++)
		if (write(copy, "a", 1) != 1 || write(p[1], "b", 1) != 1) {
			perror("outcommit_dup: write");
			return 2;
		}
	pthread_mutex_unlock(&lock);
	close(copy);
	close(p[1]);
	char buf[256];
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(buf) && (n = read(p[0], buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	for (size_t i = 0; i < got; i++)
		if (buf[i] != (i % 2 == 0 ? 'a' : 'b')) {
			printf("reordered %zu: %.*s\n", got, (int)got, buf);
			return 1;
		}
	printf("ordered %zu\n", got);
	return got == 100 ? 0 : 1;
}
