/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * workload.h -- the command line and output conventions shared by all 14
 * workloads, so a harness can drive every one of them the same way:
 *
 *   NAME [-t THREADS] [-s SCALE] [-q]
 *
 *   -t THREADS  worker threads (default 2)
 *   -s SCALE    input size: `small` (a tiny input for smoke tests), `default`
 *               (same as 1, a run of a few seconds on 2 cores), or a positive
 *               integer multiplier of the default input
 *   -q          quiet: print only the checksum line
 *
 * The last line of output is always `checksum=<16 hex digits>`.
 */
#ifndef PARSEC_PORTS_WORKLOAD_H
#define PARSEC_PORTS_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#define WL_MAX_THREADS 256

typedef struct wl_options {
    int threads;  /* >= 1 */
    int scale;    /* 0 = small, 1 = default, n = n times the default */
    bool quiet;
} wl_options;

/* Parses argv; prints usage and exits on a malformed command line. */
wl_options wl_parse_args(int argc, char **argv, const char *name);

/* Picks small_value for scale 0, else default_value * scale. */
long wl_scaled(const wl_options *opt, long small_value, long default_value);

/* Monotonic wall clock in seconds. */
double wl_now(void);

/* Informational line (suppressed by -q). */
void wl_info(const wl_options *opt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints the elapsed time (unless -q) and then the final checksum line. */
void wl_finish(const wl_options *opt, double seconds, uint64_t checksum);

/* pthread_create that exits the program with a message on failure. */
#include <pthread.h>
void wl_thread_create(pthread_t *tid, void *(*fn)(void *), void *arg);
void wl_thread_join(pthread_t tid);

/* The half-open slice [begin, end) of n items that worker `id` of `threads` owns. */
static inline void wl_slice(long n, int threads, int id, long *begin, long *end)
{
    *begin = n * id / threads;
    *end = n * (id + 1) / threads;
}

#endif /* PARSEC_PORTS_WORKLOAD_H */
