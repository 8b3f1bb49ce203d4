/*
 * runtime -- start-up, shutdown and the public API of libpmthreads.
 *
 * Owns: the order in which the modules are brought up (config, pool, shadow,
 * recovery, tracker, heap, epoch thread) and down (final epoch, clean flag),
 * the epoch procedure handed to quiesce, and the functions of pmthreads.h.
 */
#ifndef PMT_RUNTIME_H
#define PMT_RUNTIME_H

#include "config.h"

#include <stdbool.h>
#include <stdint.h>

/* Initialise once (idempotent, thread-safe).  Returns 0, or -1 when the
 * runtime could not start (the reason is in err_get() and was printed). */
int runtime_init(void);
/* 0: not started, 1: starting, 2: running, 3: failed, 4: shut down. */
int runtime_state(void);
const struct config *runtime_config(void);

/* Clean shutdown: final epoch, clean flag, pool closed.  Idempotent. */
void runtime_shutdown(void);

/* One epoch: collect dirty pages and persist them (called by quiesce at a
 * quiescent point). */
void runtime_epoch(void *arg);

#endif
