/* SPDX-License-Identifier: BSD-3-Clause */
/* errno at the start of main is 0, as the C library leaves it: nothing the
 * runtime's start-up tried (and expected to fail) shows through. */
#include <errno.h>
#include <stdio.h>

int main(void)
{
	int e = errno;
	printf("errno at main: %d\n", e);
	return 0;
}
