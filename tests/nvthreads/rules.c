/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rules -- nvrecover's size rule and the name length, through the library,
 * in NVthreads' terms (nvrecovery.h) and pmthreads.h's, across a kill.
 *
 *   rules make    a 100-byte object "obj", one named with 127 bytes, an
 *                 nvcheckpoint(), then SIGKILL itself
 *   rules check   after it: the NVthreads idiom with the rules checked on
 *                 the object the crashed run left
 *
 * Prints "ok" and exits 0, or says what broke and exits 2.
 */
#include "nvrecovery.h"

#include <errno.h>
#include <signal.h>

#define FAIL(...) do { fprintf(stderr, "rules: " __VA_ARGS__); fprintf(stderr, "\n"); exit(2); } while (0)

static char long_name[128], too_long[129];

static void make(void)
{
	if (isCrashed())
		FAIL("isCrashed() on a new pool");
	unsigned char *p = (unsigned char *)nvmalloc(100, (char *)"obj");
	char *q = (char *)nvmalloc(16, long_name);
	if (p == NULL || q == NULL)
		FAIL("nvmalloc: %s", pmthreads_errormsg());
	for (int i = 0; i < 100; i++)
		p[i] = (unsigned char)(i + 1);
	strcpy(q, "long-named");
	errno = 0;
	if (nvmalloc(16, too_long) != NULL || errno != EINVAL)
		FAIL("nvmalloc of a 128-byte name: not refused with EINVAL");
	if (strstr(pmthreads_errormsg(), "longer than 127 bytes") == NULL)
		FAIL("nvmalloc of a 128-byte name says \"%s\"", pmthreads_errormsg());
	nvcheckpoint();
	raise(SIGKILL);
}

static void check(void)
{
	if (!isCrashed())
		FAIL("isCrashed() false after a SIGKILL");
	unsigned char *p = (unsigned char *)nvmalloc(100, (char *)"obj");
	if (p == NULL)
		FAIL("nvmalloc: %s", pmthreads_errormsg());
	unsigned char buf[128];
	memset(buf, 0xee, sizeof(buf));
	/* the object is 100 bytes as asked for, whatever its block's size */
	for (size_t n = 101; n <= 128; n++)
		if (nvrecover(buf, n, (char *)"obj") != (unsigned long)-1)
			FAIL("nvrecover of %zu bytes from a 100-byte object succeeded", n);
	if (buf[0] != 0xee)
		FAIL("a refused nvrecover copied");
	if (nvrecover(buf, 60, (char *)"obj") != 0 || buf[59] != 60 || buf[60] != 0xee)
		FAIL("nvrecover of 60 bytes did not copy exactly 60");
	if (nvrecover(NULL, 100, (char *)"nothing") != (unsigned long)-1)
		FAIL("nvrecover of a name nobody had succeeded");
	/* the idiom: into the new object, all of it */
	if (nvrecover(p, 100, (char *)"obj") != 0)
		FAIL("nvrecover: %s", pmthreads_errormsg());
	for (int i = 0; i < 100; i++)
		if (p[i] != (unsigned char)(i + 1))
			FAIL("byte %d of the recovered object is %u", i, p[i]);
	char got[16];
	if (nvrecover(got, 16, long_name) != 0 || strcmp(got, "long-named") != 0)
		FAIL("the 127-byte name did not come back: %s", pmthreads_errormsg());
	if (nvrecover(got, 1, too_long) != (unsigned long)-1)
		FAIL("nvrecover of a 128-byte name succeeded");
	/* pmthreads.h's nvrecover, same rule: the object nvmalloc made now */
#undef nvrecover
	if (nvrecover(NULL, 101, "obj") != NULL)
		FAIL("pmthreads' nvrecover of 101 bytes from a 100-byte object succeeded");
	if (nvrecover(NULL, 100, "obj") != p)
		FAIL("pmthreads' nvrecover does not find the object");
	nvcheckpoint();
}

int main(int argc, char **argv)
{
	memset(long_name, 'n', 127);
	memset(too_long, 't', 128);
	if (argc == 2 && strcmp(argv[1], "make") == 0)
		make();
	else if (argc == 2 && strcmp(argv[1], "check") == 0)
		check();
	else
		FAIL("usage: rules make|check");
	printf("ok\n");
	return 0;
}
