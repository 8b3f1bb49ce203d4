/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bank_common -- what the bank flavours (bank_pthread.c, bank_c11.c,
 * bank_omp.c, bank_cxx.cpp) share: the accounts in the persistent heap, the
 * command line, the invariant check and the progress lines, in the format of
 * examples/bank (tests/test_kill.cpp reads them).  Each flavour supplies its
 * locks and threads; a transfer moves money between two accounts and counts
 * it in the ledger inside one critical section, so money is conserved and
 * the ledger equals the accounts' incoming counts at every quiescent point.
 *
 * The programs are never linked with pmthreads: they use the API through weak
 * references and are persistent only under LD_PRELOAD (pmthreads run).
 *
 * usage: PROG [-t THREADS] [-s SECONDS] [-n ACCOUNTS] [--check] [--progress]
 *             [FLAVOUR OPTIONS]
 */
#ifndef PMT_TEST_BANK_COMMON_H
#define PMT_TEST_BANK_COMMON_H

#include <pmthreads.h>

#pragma weak nvmalloc
#pragma weak nvrecover
#pragma weak pmthreads_crashed
#pragma weak pmthreads_errormsg
#pragma weak pmthreads_durable_epoch

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BANK_INITIAL_BALANCE 1000
#define BANK_MAGIC 0x6c6662614d50ULL

struct bank_account {
	int64_t balance;
	uint64_t transfers_in;
};

struct bank_state {
	uint64_t magic;
	uint64_t naccounts;
	uint64_t transfers;	/* under the flavour's ledger lock */
	struct bank_account accounts[];
};

struct bank_options {
	int threads, seconds;
	uint64_t naccounts;
	int check_only, progress;
	const char *flavour_option;	/* the one extra argument a flavour takes */
};

static inline uint64_t bank_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One transfer's operands, drawn from the teller's seed. */
static inline int bank_draw(uint64_t *seed, uint64_t n, uint64_t *a, uint64_t *b, int64_t *amount)
{
	*a = bank_xorshift(seed) % n;
	*b = bank_xorshift(seed) % n;
	*amount = (int64_t)(bank_xorshift(seed) % 50);
	return *a != *b;
}

/* Work between the debit and the credit, inside the critical section, as a
 * real program has (here a checksum of the accounts touched): it widens the
 * window in which a quiescent point that ignored the lock would tear the
 * transfer, so that a lock the runtime does not see shows in a few kills. */
static inline void bank_between(const struct bank_account *x, const struct bank_account *y)
{
	volatile uint64_t sum = 0;
	for (int i = 0; i < 200; i++)
		sum += (uint64_t)x->balance * (uint64_t)i + (uint64_t)y->balance;
}

/* flavour: the extra option the flavour accepts (NULL: none). */
static inline int bank_parse(int argc, char **argv, const char *flavour, struct bank_options *o)
{
	o->threads = 2;
	o->seconds = 2;
	o->naccounts = 1000;
	o->check_only = o->progress = 0;
	o->flavour_option = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			o->threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
			o->seconds = atoi(argv[++i]);
		else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			o->naccounts = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--check") == 0)
			o->check_only = 1;
		else if (strcmp(argv[i], "--progress") == 0)
			o->progress = 1;
		else if (flavour != NULL && strcmp(argv[i], flavour) == 0)
			o->flavour_option = argv[i];
		else {
			fprintf(stderr, "usage: %s [-t THREADS] [-s SECONDS] [-n ACCOUNTS] [--check] "
				"[--progress]%s%s\n", argv[0], flavour ? " " : "", flavour ? flavour : "");
			return -1;
		}
	}
	if (o->threads < 1 || o->threads > 64 || o->naccounts < 2) {
		fprintf(stderr, "%s: -t takes 1..64 threads, -n at least 2 accounts\n", argv[0]);
		return -1;
	}
	if (nvrecover == NULL) {
		fprintf(stderr, "%s: not running under pmthreads (start it with `pmthreads run -- %s`)\n",
			argv[0], argv[0]);
		return -1;
	}
	return 0;
}

/* Money is conserved and the ledger counts exactly the transfers the
 * accounts saw.  Returns 0 when both hold. */
static inline int bank_verify(const struct bank_state *b)
{
	int64_t total = 0;
	uint64_t in = 0;
	for (uint64_t i = 0; i < b->naccounts; i++) {
		total += b->accounts[i].balance;
		in += b->accounts[i].transfers_in;
	}
	int64_t expected = (int64_t)b->naccounts * BANK_INITIAL_BALANCE;
	printf("bank: %" PRIu64 " accounts, %" PRIu64 " transfers, total %" PRId64
	       " (expected %" PRId64 "), transfers received %" PRIu64 "\n",
	       b->naccounts, b->transfers, total, expected, in);
	if (total != expected || in != b->transfers) {
		printf("bank: INCONSISTENT\n");
		return 1;
	}
	printf("bank: consistent\n");
	return 0;
}

/* The accounts found in the persistent heap (verified: *status 0 when they
 * hold), or NULL with *status 0 when there are none yet (1 under --check). */
static inline struct bank_state *bank_recover(const struct bank_options *o, int *status)
{
	struct bank_state *b = (struct bank_state *)nvrecover(NULL, sizeof(struct bank_state), "bank");
	*status = 0;
	if (b != NULL && b->magic == BANK_MAGIC) {
		printf("bank: found the accounts in the persistent heap (%s)\n",
		       pmthreads_crashed() ? "previous run crashed" : "previous run exited cleanly");
		*status = bank_verify(b);
		return b;
	}
	if (o->check_only) {
		printf("bank: no accounts in the persistent heap\n");
		*status = 1;
	}
	return NULL;
}

/* A new bank; call it inside one of the flavour's critical sections (the
 * creation is then all or nothing). */
static inline struct bank_state *bank_create_locked(uint64_t naccounts)
{
	struct bank_state *b = (struct bank_state *)nvmalloc(
		sizeof(struct bank_state) + naccounts * sizeof(struct bank_account), "bank");
	if (b == NULL) {
		fprintf(stderr, "bank: nvmalloc: %s\n", pmthreads_errormsg());
		exit(1);
	}
	b->naccounts = naccounts;
	for (uint64_t i = 0; i < naccounts; i++) {
		b->accounts[i].balance = BANK_INITIAL_BALANCE;
		b->accounts[i].transfers_in = 0;
	}
	b->transfers = 0;
	b->magic = BANK_MAGIC;
	return b;
}

static inline long long bank_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The main thread's part: every 10 ms, with --progress, print the committed
 * transfers (read with read_transfers, which takes the ledger lock), the
 * time after the read and the durable epoch read after the count, as
 * examples/bank does (test_kill's acknowledgement rule: the count is durable
 * once a later line's epoch is 2 higher); return after the run's seconds. */
static inline void bank_report(const struct bank_options *o, uint64_t (*read_transfers)(void))
{
	long long end = bank_now_ns() + (long long)o->seconds * 1000000000LL;
	while (bank_now_ns() < end) {
		struct timespec tick = { 0, 10000000 };
		nanosleep(&tick, NULL);
		if (o->progress) {
			uint64_t done = read_transfers();
			uint64_t durable = pmthreads_durable_epoch != NULL ? pmthreads_durable_epoch() : 0;
			printf("progress %lld %" PRIu64 " %" PRIu64 "\n", bank_now_ns(), done, durable);
			fflush(stdout);
		}
	}
}

#endif
