/* SPDX-License-Identifier: BSD-3-Clause */
/* barrier.c -- mutex + condition variable barrier (see barrier.h). */
#include "barrier.h"

void wl_barrier_init(wl_barrier *b, int parties)
{
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->all_arrived, NULL);
    b->parties = parties;
    b->waiting = 0;
    b->generation = 0;
}

void wl_barrier_destroy(wl_barrier *b)
{
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->all_arrived);
}

bool wl_barrier_wait(wl_barrier *b)
{
    pthread_mutex_lock(&b->lock);
    unsigned long my_generation = b->generation;
    bool last = ++b->waiting == b->parties;
    if (last) {
        b->waiting = 0;
        b->generation++;
        pthread_cond_broadcast(&b->all_arrived);
    } else {
        /* Loop on the generation, not on `waiting`: wakeups may be spurious. */
        while (my_generation == b->generation)
            pthread_cond_wait(&b->all_arrived, &b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return last;
}
