/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * queue.h -- the bounded multi-producer multi-consumer queue between pipeline
 * stages (dedup, ferret): a ring of pointers under one mutex with two
 * condition variables, as in the PARSEC pipelines.  A queue knows how many
 * producers feed it; when the last one calls wl_queue_producer_done() and the
 * queue drains, consumers get NULL.
 */
#ifndef PARSEC_PORTS_QUEUE_H
#define PARSEC_PORTS_QUEUE_H

#include <pthread.h>
#include <stddef.h>

typedef struct wl_queue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    void **slots;
    size_t capacity;
    size_t head;      /* next slot to pop */
    size_t count;
    int producers;    /* producers that have not yet said they are done */
} wl_queue;

void wl_queue_init(wl_queue *q, size_t capacity, int producers);
void wl_queue_destroy(wl_queue *q);
/* Blocks while the queue is full.  item must not be NULL. */
void wl_queue_push(wl_queue *q, void *item);
/* Blocks while empty; NULL once empty and every producer is done. */
void *wl_queue_pop(wl_queue *q);
void wl_queue_producer_done(wl_queue *q);

#endif /* PARSEC_PORTS_QUEUE_H */
