/* SPDX-License-Identifier: BSD-3-Clause */
/* Creates pthread keys until the system refuses: PTHREAD_KEYS_MAX (1024 in
 * glibc) are the program's, none taken by a preloaded library before main. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	pthread_key_t k;
	int n = 0, r;
	while ((r = pthread_key_create(&k, NULL)) == 0)
		n++;
	printf("%d keys, then %s\n", n, r == EAGAIN ? "EAGAIN" : strerror(r));
	return 0;
}
