/* SPDX-License-Identifier: BSD-3-Clause */
/* queue.c -- bounded pipeline queue (see queue.h). */
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>

void wl_queue_init(wl_queue *q, size_t capacity, int producers)
{
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->slots = calloc(capacity, sizeof *q->slots);
    if (q->slots == NULL) {
        fprintf(stderr, "out of memory (queue)\n");
        exit(1);
    }
    q->capacity = capacity;
    q->head = 0;
    q->count = 0;
    q->producers = producers;
}

void wl_queue_destroy(wl_queue *q)
{
    free(q->slots);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
}

void wl_queue_push(wl_queue *q, void *item)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == q->capacity)
        pthread_cond_wait(&q->not_full, &q->lock);
    q->slots[(q->head + q->count) % q->capacity] = item;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

void *wl_queue_pop(wl_queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == 0 && q->producers > 0)
        pthread_cond_wait(&q->not_empty, &q->lock);
    void *item = NULL;
    if (q->count > 0) {
        item = q->slots[q->head];
        q->head = (q->head + 1) % q->capacity;
        q->count--;
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->lock);
    return item;
}

void wl_queue_producer_done(wl_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->producers--;
    /* Consumers blocked on an empty queue must see that no more items come. */
    if (q->producers == 0)
        pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}
