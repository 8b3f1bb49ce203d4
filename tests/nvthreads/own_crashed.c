/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * own_crashed -- pmthreads.h claims none of NVthreads' short names: a
 * program with globals of its own called crashed, isCrashed and
 * nvcheckpoint (as Phoenix kmeans has `bool crashed`) builds with it, as C
 * and as C++ (own_crashed.cpp), and links with libpmthreads.
 */
#include <pmthreads.h>

#include <stdio.h>

bool crashed;
int isCrashed = 7;
const char *nvcheckpoint = "mine";

int main(void)
{
	crashed = pmthreads_crashed();
	printf("crashed=%d isCrashed=%d nvcheckpoint=%s\n", (int)crashed, isCrashed, nvcheckpoint);
	return 0;
}
