/* SPDX-License-Identifier: BSD-3-Clause */
// bank, C++ flavour: a std::mutex per account taken together with
// std::scoped_lock, the ledger's std::mutex under a std::lock_guard, threads
// from std::thread.  See bank_common.h.
#include "bank_common.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace {
bank_state *bank;
std::vector<std::mutex> *locks;
std::mutex ledger;
std::atomic<bool> stop{ false };

void teller(uint64_t seed)
{
	seed = seed * 0x9e3779b97f4a7c15ULL + 1;
	uint64_t a, b;
	int64_t amount;
	while (!stop.load(std::memory_order_relaxed)) {
		if (!bank_draw(&seed, bank->naccounts, &a, &b, &amount))
			continue;
		std::scoped_lock both((*locks)[a], (*locks)[b]);
		bank->accounts[a].balance -= amount;
		bank_between(&bank->accounts[a], &bank->accounts[b]);
		bank->accounts[b].balance += amount;
		bank->accounts[b].transfers_in++;
		std::lock_guard<std::mutex> l(ledger);
		bank->transfers++;
	}
}

uint64_t read_transfers()
{
	std::lock_guard<std::mutex> l(ledger);
	return bank->transfers;
}
} // namespace

int main(int argc, char **argv)
{
	bank_options o;
	if (bank_parse(argc, argv, nullptr, &o) != 0)
		return 2;
	int status;
	bank = bank_recover(&o, &status);
	if (status != 0 || o.check_only)
		return status;
	if (bank == nullptr) {
		{
			std::lock_guard<std::mutex> l(ledger);
			bank = bank_create_locked(o.naccounts);
		}
		printf("bank: opened %" PRIu64 " new accounts\n", o.naccounts);
		fflush(stdout);
	}
	locks = new std::vector<std::mutex>(bank->naccounts);
	std::vector<std::thread> tellers;
	for (int i = 0; i < o.threads; i++)
		tellers.emplace_back(teller, bank->transfers + (uint64_t)i + 1);
	bank_report(&o, read_transfers);
	stop = true;
	for (auto &t : tellers)
		t.join();
	return bank_verify(bank);
}
