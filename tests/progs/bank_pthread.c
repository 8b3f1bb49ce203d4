/* SPDX-License-Identifier: BSD-3-Clause */
/* bank, pthread flavour: a mutex per account (taken in index order) and a
 * ledger mutex nested inside; threads from pthread_create.  See
 * bank_common.h. */
#include "bank_common.h"

#include <pthread.h>
#include <stdatomic.h>

static struct bank_state *bank;
static pthread_mutex_t *locks;
static pthread_mutex_t ledger = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool stop;

static void *teller(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1, a, b;
	int64_t amount;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (!bank_draw(&seed, bank->naccounts, &a, &b, &amount))
			continue;
		pthread_mutex_lock(&locks[a < b ? a : b]);
		pthread_mutex_lock(&locks[a < b ? b : a]);
		bank->accounts[a].balance -= amount;
		bank_between(&bank->accounts[a], &bank->accounts[b]);
		bank->accounts[b].balance += amount;
		bank->accounts[b].transfers_in++;
		pthread_mutex_lock(&ledger);
		bank->transfers++;
		pthread_mutex_unlock(&ledger);
		pthread_mutex_unlock(&locks[a < b ? b : a]);
		pthread_mutex_unlock(&locks[a < b ? a : b]);
	}
	return NULL;
}

static uint64_t read_transfers(void)
{
	pthread_mutex_lock(&ledger);
	uint64_t n = bank->transfers;
	pthread_mutex_unlock(&ledger);
	return n;
}

int main(int argc, char **argv)
{
	struct bank_options o;
	if (bank_parse(argc, argv, NULL, &o) != 0)
		return 2;
	int status;
	bank = bank_recover(&o, &status);
	if (status != 0 || o.check_only)
		return status;
	if (bank == NULL) {
		pthread_mutex_lock(&ledger);
		bank = bank_create_locked(o.naccounts);
		pthread_mutex_unlock(&ledger);
		printf("bank: opened %" PRIu64 " new accounts\n", o.naccounts);
		fflush(stdout);
	}
	locks = calloc(bank->naccounts, sizeof(*locks));
	for (uint64_t i = 0; i < bank->naccounts; i++)
		pthread_mutex_init(&locks[i], NULL);
	pthread_t tid[64];
	for (int i = 0; i < o.threads; i++)
		pthread_create(&tid[i], NULL, teller, (void *)(uintptr_t)(i + 1 + bank->transfers));
	bank_report(&o, read_transfers);
	atomic_store(&stop, 1);
	for (int i = 0; i < o.threads; i++)
		pthread_join(tid[i], NULL);
	return bank_verify(bank);
}
