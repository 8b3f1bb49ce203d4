/* SPDX-License-Identifier: BSD-3-Clause */
/* bank, OpenMP flavour: the tellers are the threads of one parallel region
 * (thread 0 reports).  By default a transfer is a named critical section
 * with the ledger's unnamed one nested inside; with --locks, an omp_lock_t
 * per account (taken in index order) and an omp_nest_lock_t for the ledger,
 * set twice.  See bank_common.h. */
#include "bank_common.h"

#include <omp.h>
#include <stdatomic.h>

static struct bank_state *bank;
static omp_lock_t *locks;
static omp_nest_lock_t ledger;
static int use_locks;
static atomic_bool stop;

static void transfer(uint64_t a, uint64_t b, int64_t amount)
{
	bank->accounts[a].balance -= amount;
	bank_between(&bank->accounts[a], &bank->accounts[b]);
	bank->accounts[b].balance += amount;
	bank->accounts[b].transfers_in++;
}

static void teller(uint64_t seed)
{
	seed = seed * 0x9e3779b97f4a7c15ULL + 1;
	uint64_t a, b;
	int64_t amount;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (!bank_draw(&seed, bank->naccounts, &a, &b, &amount))
			continue;
		if (use_locks) {
			omp_set_lock(&locks[a < b ? a : b]);
			omp_set_lock(&locks[a < b ? b : a]);
			transfer(a, b, amount);
			omp_set_nest_lock(&ledger);
			omp_set_nest_lock(&ledger);
			bank->transfers++;
			omp_unset_nest_lock(&ledger);
			omp_unset_nest_lock(&ledger);
			omp_unset_lock(&locks[a < b ? b : a]);
			omp_unset_lock(&locks[a < b ? a : b]);
		} else {
#pragma omp critical(accounts)
			{
				transfer(a, b, amount);
#pragma omp critical
				bank->transfers++;
			}
		}
	}
}

static uint64_t read_transfers(void)
{
	uint64_t n;
	if (use_locks) {
		omp_set_nest_lock(&ledger);
		n = bank->transfers;
		omp_unset_nest_lock(&ledger);
	} else {
#pragma omp critical
		n = bank->transfers;
	}
	return n;
}

int main(int argc, char **argv)
{
	struct bank_options o;
	if (bank_parse(argc, argv, "--locks", &o) != 0)
		return 2;
	use_locks = o.flavour_option != NULL;
	omp_init_nest_lock(&ledger);
	int status;
	bank = bank_recover(&o, &status);
	if (status != 0 || o.check_only)
		return status;
	if (bank == NULL) {
#pragma omp critical
		bank = bank_create_locked(o.naccounts);
		printf("bank: opened %" PRIu64 " new accounts\n", o.naccounts);
		fflush(stdout);
	}
	locks = calloc(bank->naccounts, sizeof(*locks));
	for (uint64_t i = 0; i < bank->naccounts; i++)
		omp_init_lock(&locks[i]);
	uint64_t base = bank->transfers;
#pragma omp parallel num_threads(o.threads + 1)
	{
		int me = omp_get_thread_num();
		if (me == 0) {
			bank_report(&o, read_transfers);
			atomic_store(&stop, 1);
		} else {
			teller(base + (uint64_t)me);
		}
	}
	return bank_verify(bank);
}
