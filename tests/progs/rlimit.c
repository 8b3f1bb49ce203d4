/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * malloc honours RLIMIT_AS and RLIMIT_DATA: with a 64 MiB limit a program
 * allocating 1 MiB blocks until malloc fails gets ENOMEM somewhere below
 * 64 MiB -- not after filling a persistent heap of any size, and not long
 * before either: memory the runtime maps after the limit was set (the
 * in-place write-back's undo area, once as large as the log) would come out
 * of the program's share.  Argument: as or data, the limit to set.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define LIMIT (64UL << 20)
#define BLOCK (1UL << 20)

int main(int argc, char **argv)
{
	int resource = argc > 1 && strcmp(argv[1], "data") == 0 ? RLIMIT_DATA : RLIMIT_AS;
	struct rlimit rl = { LIMIT, LIMIT };
	if (setrlimit(resource, &rl) != 0)
		return 1;
	size_t n = 0;
	void **blocks = calloc(1024, sizeof(void *));
	if (blocks == NULL)
		return 2;
	errno = 0;
	while (n < 1024) {
		void *p = malloc(BLOCK);
		if (p == NULL)
			break;
		memset(p, 1, BLOCK);
		blocks[n++] = p;
	}
	int e = errno;
	printf("%s: malloc failed with %s after more than 40 MiB and before 64 MiB: %s\n",
	       argc > 1 ? argv[1] : "as", e == ENOMEM ? "ENOMEM" : "another error",
	       n > 40 && n < 64 ? "yes" : "no");
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	free(blocks);
	return 0;
}
