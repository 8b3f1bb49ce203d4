/* SPDX-License-Identifier: BSD-3-Clause */
/* bank, C11 flavour: <threads.h> only -- an mtx_t per account (taken in
 * index order), a ledger mtx_t nested inside, threads from thrd_create.  See
 * bank_common.h. */
#include "bank_common.h"

#include <stdatomic.h>
#include <threads.h>

static struct bank_state *bank;
static mtx_t *locks;
static mtx_t ledger;
static atomic_bool stop;

static int teller(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1, a, b;
	int64_t amount;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (!bank_draw(&seed, bank->naccounts, &a, &b, &amount))
			continue;
		mtx_lock(&locks[a < b ? a : b]);
		mtx_lock(&locks[a < b ? b : a]);
		bank->accounts[a].balance -= amount;
		bank_between(&bank->accounts[a], &bank->accounts[b]);
		bank->accounts[b].balance += amount;
		bank->accounts[b].transfers_in++;
		mtx_lock(&ledger);
		bank->transfers++;
		mtx_unlock(&ledger);
		mtx_unlock(&locks[a < b ? b : a]);
		mtx_unlock(&locks[a < b ? a : b]);
	}
	return 0;
}

static uint64_t read_transfers(void)
{
	mtx_lock(&ledger);
	uint64_t n = bank->transfers;
	mtx_unlock(&ledger);
	return n;
}

int main(int argc, char **argv)
{
	struct bank_options o;
	if (bank_parse(argc, argv, NULL, &o) != 0)
		return 2;
	if (mtx_init(&ledger, mtx_plain) != thrd_success)
		return 1;
	int status;
	bank = bank_recover(&o, &status);
	if (status != 0 || o.check_only)
		return status;
	if (bank == NULL) {
		mtx_lock(&ledger);
		bank = bank_create_locked(o.naccounts);
		mtx_unlock(&ledger);
		printf("bank: opened %" PRIu64 " new accounts\n", o.naccounts);
		fflush(stdout);
	}
	locks = calloc(bank->naccounts, sizeof(*locks));
	for (uint64_t i = 0; i < bank->naccounts; i++)
		if (mtx_init(&locks[i], mtx_plain) != thrd_success)
			return 1;
	thrd_t tid[64];
	for (int i = 0; i < o.threads; i++)
		if (thrd_create(&tid[i], teller, (void *)(uintptr_t)(i + 1 + bank->transfers)) !=
		    thrd_success)
			return 1;
	bank_report(&o, read_transfers);
	atomic_store(&stop, 1);
	for (int i = 0; i < o.threads; i++)
		thrd_join(tid[i], NULL);
	return bank_verify(bank);
}
