/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * barrier.h -- a reusable thread barrier built from a mutex and a condition
 * variable, as PARSEC's own barrier is when pthread barriers are not used.
 * Being lock-based it is also a sequence of ordinary critical sections for
 * pmthreads, which must not be mistaken for one long FASE.
 */
#ifndef PARSEC_PORTS_BARRIER_H
#define PARSEC_PORTS_BARRIER_H

#include <pthread.h>
#include <stdbool.h>

typedef struct wl_barrier {
    pthread_mutex_t lock;
    pthread_cond_t all_arrived;
    int parties;
    int waiting;
    unsigned long generation; /* distinguishes successive uses of the barrier */
} wl_barrier;

void wl_barrier_init(wl_barrier *b, int parties);
void wl_barrier_destroy(wl_barrier *b);
/* Returns true in exactly one of the threads of each round (the last to arrive). */
bool wl_barrier_wait(wl_barrier *b);

#endif /* PARSEC_PORTS_BARRIER_H */
