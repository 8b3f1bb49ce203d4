/* SPDX-License-Identifier: BSD-3-Clause */
/* What the FASE-depth probes (c11fase.c, ompfase.c) share: a check that
 * prints its outcome, and whether the calling thread is inside a FASE as
 * the runtime sees it (pmthreads_sync refuses with EDEADLK there). */
#ifndef PMT_FASE_PROBE_H
#define PMT_FASE_PROBE_H

#include <pmthreads.h>

/* Never linked with pmthreads: the symbol comes from the preloaded library. */
#pragma weak pmthreads_sync

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

static void expect(const char *what, int cond)
{
	printf("%s: %s\n", what, cond ? "ok" : "FAILED");
	fflush(stdout);
	if (!cond)
		failures++;
}

/* 1 inside a FASE, 0 outside (a quiescent point was reached). */
static int in_fase(void)
{
	errno = 0;
	int r = pmthreads_sync();
	if (r != 0 && errno != EDEADLK) {
		perror("pmthreads_sync");
		exit(1);
	}
	return r != 0;
}

#endif
