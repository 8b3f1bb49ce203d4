/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * idiom -- a program written the way NVthreads programs are, built unchanged
 * against pmthreads (nvrecovery.h, as C and as C++: idiom.cpp includes this
 * file).  Its state is an int, an array over several pages and an aggregate,
 * each from nvmalloc; after a crash each is recovered with NVthreads' idiom,
 * nvmalloc then nvrecover into the new object.
 *
 *   idiom N [exit]   recover (or start), check the state, run N critical
 *                    sections on two threads, nvcheckpoint(), print
 *                    "durable COUNT", then either exit cleanly ("exit") or
 *                    go on with more critical sections until killed.
 *
 * Prints "start crashed=C counter=X" first; exits 2 with a message when the
 * recovered state breaks an invariant (every critical section moves one unit
 * between two accounts, counts itself in the array and in the ledger).
 */
#include "nvrecovery.h"

#define HIST_LEN (3 * 4096 / sizeof(unsigned long) + 7)	/* over four pages */
#define ACCOUNTS 8
#define START_BALANCE 1000L

struct ledger {
	long balance[ACCOUNTS];
	unsigned long moves;
	char last[32];
};

static pthread_mutex_t gm = PTHREAD_MUTEX_INITIALIZER;
static int *counter;
static unsigned long *hist;
static struct ledger *lg;
static long per_thread;

static void one_section(int who)
{
	pthread_mutex_lock(&gm);
	int c = ++*counter;
	hist[c % HIST_LEN] += 1;
	lg->balance[c % ACCOUNTS] -= 1;
	lg->balance[(c + 3) % ACCOUNTS] += 1;
	lg->moves++;
	snprintf(lg->last, sizeof(lg->last), "t%d-%d", who, c);
	pthread_mutex_unlock(&gm);
}

static void *worker(void *arg)
{
	int who = (int)(long)arg;
	for (long i = 0; i < per_thread; i++)
		one_section(who);
	return NULL;
}

static void check(void)
{
	unsigned long sum = 0;
	long money = 0;
	for (size_t i = 0; i < HIST_LEN; i++)
		sum += hist[i];
	for (int i = 0; i < ACCOUNTS; i++)
		money += lg->balance[i];
	if (*counter < 0 || sum != (unsigned long)*counter || lg->moves != sum ||
	    money != ACCOUNTS * START_BALANCE) {
		fprintf(stderr, "idiom: torn state: counter %d, array sum %lu, ledger moves %lu, "
			"money %ld (expected %ld)\n", *counter, sum, lg->moves, money,
			ACCOUNTS * START_BALANCE);
		exit(2);
	}
	if (*counter > 0) {
		char want[32];
		snprintf(want, sizeof(want), "-%d", *counter);
		const char *dash = strrchr(lg->last, '-');
		if (dash == NULL || strcmp(dash, want) != 0) {
			fprintf(stderr, "idiom: the ledger's last mover \"%s\" is not section %d\n",
				lg->last, *counter);
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: idiom N [exit]\n");
		return 1;
	}
	long n = atol(argv[1]);
	bool clean_exit = argc > 2 && strcmp(argv[2], "exit") == 0;

	counter = (int *)nvmalloc(sizeof(int), (char *)"counter");
	hist = (unsigned long *)nvmalloc(HIST_LEN * sizeof(unsigned long), (char *)"hist");
	lg = (struct ledger *)nvmalloc(sizeof(struct ledger), (char *)"ledger");
	if (counter == NULL || hist == NULL || lg == NULL) {
		fprintf(stderr, "idiom: nvmalloc: %s\n", pmthreads_errormsg());
		return 1;
	}
	bool crashed_before = isCrashed();
	if (crashed_before) {
		if (nvrecover(counter, sizeof(int), (char *)"counter") != 0 ||
		    nvrecover(hist, HIST_LEN * sizeof(unsigned long), (char *)"hist") != 0 ||
		    nvrecover(lg, sizeof(struct ledger), (char *)"ledger") != 0) {
			fprintf(stderr, "idiom: nvrecover: %s\n", pmthreads_errormsg());
			return 2;
		}
	} else {
		*counter = 0;
		memset(hist, 0, HIST_LEN * sizeof(unsigned long));
		memset(lg, 0, sizeof(*lg));
		for (int i = 0; i < ACCOUNTS; i++)
			lg->balance[i] = START_BALANCE;
	}
	check();
	printf("start crashed=%d counter=%d\n", (int)crashed_before, *counter);
	fflush(stdout);

	per_thread = n / 2;
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	nvcheckpoint();
	pthread_mutex_lock(&gm);
	int durable = *counter;
	pthread_mutex_unlock(&gm);
	check();
	printf("durable %d\n", durable);
	fflush(stdout);
	if (clean_exit)
		return 0;
	for (;;) {
		one_section(9);
		usleep(100);
	}
}
