/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bank -- a threaded program whose invariant spans several objects changed in
 * one critical section: money moves between accounts under two locks, so
 * the total is constant at every quiescent point.  The accounts live in the
 * persistent heap; after a crash the program finds them again with
 * nvrecover(), checks the invariant and carries on.
 *
 * The same source builds two ways: `bank`, linked with libpmthreads, and
 * `bank-plain`, built without any link to it.  bank-plain refers to the API
 * weakly, so it runs natively (nothing persistent) and becomes persistent
 * when started under `pmthreads run` (LD_PRELOAD), which resolves the weak
 * references to the preloaded library.
 *
 * usage: bank [-t THREADS] [-s SECONDS] [-n ACCOUNTS] [--check] [--progress]
 *             [--tick-us US]
 *   --check     only recover and verify, then exit (status 0: consistent).
 *   --progress  every 10 ms (--tick-us: every US microseconds) print
 *               "progress <CLOCK_MONOTONIC ns> <transfers> <durable epoch>"
 *               (for crash tests: what was committed by when, and the
 *               durable epoch read just after the count, which tells when
 *               that count became durable: see pmthreads_durable_epoch).
 */
#include <pmthreads.h>

#ifdef BANK_WEAK_API
#pragma weak nvmalloc
#pragma weak nvrecover
#pragma weak pmthreads_crashed
#pragma weak pmthreads_errormsg
#pragma weak pmthreads_durable_epoch
#endif

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define INITIAL_BALANCE 1000

struct account {
	pthread_mutex_t lock;	/* a DRAM lock would do; in the heap it is
				 * simply reinitialised after recovery */
	int64_t balance;
	uint64_t transfers_in;
};

struct bank {
	uint64_t magic;
	uint64_t naccounts;
	uint64_t transfers;	/* committed transfers, under ledger_lock */
	struct account accounts[];
};

#define BANK_MAGIC 0x6b6e61624d50ULL

static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bank *bank;
static atomic_bool stop;

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *teller(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
	uint64_t n = bank->naccounts;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t a = xorshift(&seed) % n, b = xorshift(&seed) % n;
		if (a == b)
			continue;
		/* Lock in address order: no deadlock between tellers. */
		struct account *first = &bank->accounts[a < b ? a : b];
		struct account *second = &bank->accounts[a < b ? b : a];
		int64_t amount = (int64_t)(xorshift(&seed) % 50);
		pthread_mutex_lock(&first->lock);
		pthread_mutex_lock(&second->lock);
		bank->accounts[a].balance -= amount;
		bank->accounts[b].balance += amount;
		bank->accounts[b].transfers_in++;
		pthread_mutex_lock(&ledger_lock);
		bank->transfers++;
		pthread_mutex_unlock(&ledger_lock);
		pthread_mutex_unlock(&second->lock);
		pthread_mutex_unlock(&first->lock);
	}
	return NULL;
}

/* The invariants a crash must never break: money is conserved, and the
 * ledger counts exactly the transfers the accounts saw. */
static int verify(void)
{
	int64_t total = 0;
	uint64_t in = 0;
	for (uint64_t i = 0; i < bank->naccounts; i++) {
		total += bank->accounts[i].balance;
		in += bank->accounts[i].transfers_in;
	}
	int64_t expected = (int64_t)bank->naccounts * INITIAL_BALANCE;
	printf("bank: %" PRIu64 " accounts, %" PRIu64 " transfers, total %" PRId64
	       " (expected %" PRId64 "), transfers received %" PRIu64 "\n",
	       bank->naccounts, bank->transfers, total, expected, in);
	if (total != expected || in != bank->transfers) {
		printf("bank: INCONSISTENT\n");
		return 1;
	}
	printf("bank: consistent\n");
	return 0;
}

int main(int argc, char **argv)
{
	int threads = 2, seconds = 2;
	uint64_t naccounts = 1000;
	int check_only = 0, progress = 0;
	long tick_us = 10000;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
			seconds = atoi(argv[++i]);
		else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			naccounts = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--check") == 0)
			check_only = 1;
		else if (strcmp(argv[i], "--progress") == 0)
			progress = 1;
		else if (strcmp(argv[i], "--tick-us") == 0 && i + 1 < argc)
			tick_us = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [-t THREADS] [-s SECONDS] [-n ACCOUNTS] [--check] [--progress] [--tick-us US]\n",
				argv[0]);
			return 2;
		}
	}
	if (threads < 1 || threads > 256 || naccounts < 2 || tick_us < 100 || tick_us > 1000000) {
		fprintf(stderr, "bank: bad arguments: -t takes 1..256 threads, -n at least 2 "
			"accounts, --tick-us 100..1000000\n");
		return 2;
	}

#ifdef BANK_WEAK_API
	if (nvrecover == NULL) {
		fprintf(stderr, "bank: not running under pmthreads (start it with `pmthreads run "
			"-- %s`); nothing would be persistent\n", argv[0]);
		return 2;
	}
#endif
	bank = nvrecover(NULL, sizeof(struct bank), "bank");
	if (bank != NULL && bank->magic == BANK_MAGIC) {
		printf("bank: found the accounts in the persistent heap (%s)\n",
		       pmthreads_crashed() ? "previous run crashed" : "previous run exited cleanly");
		for (uint64_t i = 0; i < bank->naccounts; i++)
			pthread_mutex_init(&bank->accounts[i].lock, NULL);
		if (verify() != 0)
			return 1;
	} else if (check_only) {
		printf("bank: no accounts in the persistent heap\n");
		return 1;
	} else {
		size_t size = sizeof(struct bank) + naccounts * sizeof(struct account);
		struct bank *b = nvmalloc(size, "bank");
		if (b == NULL) {
			fprintf(stderr, "bank: nvmalloc: %s\n", pmthreads_errormsg());
			return 1;
		}
		pthread_mutex_lock(&ledger_lock);	/* one FASE: all or nothing */
		b->naccounts = naccounts;
		for (uint64_t i = 0; i < naccounts; i++) {
			pthread_mutex_init(&b->accounts[i].lock, NULL);
			b->accounts[i].balance = INITIAL_BALANCE;
		}
		b->magic = BANK_MAGIC;
		pthread_mutex_unlock(&ledger_lock);
		bank = b;
		printf("bank: opened %" PRIu64 " new accounts\n", naccounts);
		fflush(stdout);
	}
	if (check_only)
		return 0;

	pthread_t tid[256];
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, teller, (void *)(uintptr_t)(i + 1 + bank->transfers));
	struct timespec now, end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += seconds;
	do {
		struct timespec tick = { tick_us / 1000000, tick_us % 1000000 * 1000 };
		nanosleep(&tick, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (progress) {
			pthread_mutex_lock(&ledger_lock);
			uint64_t done = bank->transfers;
			pthread_mutex_unlock(&ledger_lock);
			uint64_t durable = pmthreads_durable_epoch();
			/* The time after the count: the count was reached by then. */
			struct timespec read_at;
			clock_gettime(CLOCK_MONOTONIC, &read_at);
			printf("progress %lld %" PRIu64 " %" PRIu64 "\n",
			       (long long)read_at.tv_sec * 1000000000LL + read_at.tv_nsec, done,
			       durable);
			fflush(stdout);
		}
	} while (now.tv_sec < end.tv_sec ||
		 (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
	atomic_store(&stop, 1);
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	return verify();
}
