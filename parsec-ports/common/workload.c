/* SPDX-License-Identifier: BSD-3-Clause */
/* workload.c -- command line, timing and output conventions (see workload.h). */
#include "workload.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(const char *name)
{
    fprintf(stderr,
            "usage: %s [-t THREADS] [-s small|default|N] [-q]\n"
            "  -t THREADS  worker threads (1..%d, default 2)\n"
            "  -s SCALE    input size: small, default (=1), or a multiplier N\n"
            "  -q          print only the checksum line\n",
            name, WL_MAX_THREADS);
    exit(2);
}

static long parse_positive(const char *s, const char *name)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1)
        usage(name);
    return v;
}

wl_options wl_parse_args(int argc, char **argv, const char *name)
{
    wl_options opt = {.threads = 2, .scale = 1, .quiet = false};
    int c;
    while ((c = getopt(argc, argv, "t:s:qh")) != -1) {
        switch (c) {
        case 't': {
            long t = parse_positive(optarg, name);
            if (t > WL_MAX_THREADS)
                usage(name);
            opt.threads = (int)t;
            break;
        }
        case 's':
            if (strcmp(optarg, "small") == 0)
                opt.scale = 0;
            else if (strcmp(optarg, "default") == 0)
                opt.scale = 1;
            else {
                long s = parse_positive(optarg, name);
                if (s > 1000)
                    usage(name);
                opt.scale = (int)s;
            }
            break;
        case 'q':
            opt.quiet = true;
            break;
        default:
            usage(name);
        }
    }
    if (optind != argc)
        usage(name);
    return opt;
}

long wl_scaled(const wl_options *opt, long small_value, long default_value)
{
    return opt->scale == 0 ? small_value : default_value * opt->scale;
}

double wl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void wl_info(const wl_options *opt, const char *fmt, ...)
{
    if (opt->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

void wl_finish(const wl_options *opt, double seconds, uint64_t checksum)
{
    wl_info(opt, "threads=%d scale=%d time=%.3fs", opt->threads, opt->scale, seconds);
    printf("checksum=%016llx\n", (unsigned long long)checksum);
    fflush(stdout);
}

void wl_thread_create(pthread_t *tid, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(tid, NULL, fn, arg);
    if (rc != 0) {
        fprintf(stderr, "pthread_create: %s\n", strerror(rc));
        exit(1);
    }
}

void wl_thread_join(pthread_t tid)
{
    int rc = pthread_join(tid, NULL);
    if (rc != 0) {
        fprintf(stderr, "pthread_join: %s\n", strerror(rc));
        exit(1);
    }
}
