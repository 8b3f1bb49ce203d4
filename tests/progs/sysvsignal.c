/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Built with -std=c99, where signal() is glibc's __sysv_signal: the handler
 * is reset to SIG_DFL when the signal arrives and the signal is not blocked
 * while it runs.  Every entry point that installs a handler (signal,
 * __sysv_signal, sysv_signal, bsd_signal, sigset, sigignore, siginterrupt)
 * must be seen by the runtime, whose write tracker owns SIGSEGV: a handler
 * installed past it would take the tracker's faults on the heap, and
 * sigaction would report the wrong disposition.
 */
#define _XOPEN_SOURCE 700	/* not _DEFAULT_SOURCE: that would make signal() BSD's */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

extern __sighandler_t bsd_signal(int, __sighandler_t);
extern __sighandler_t sysv_signal(int, __sighandler_t);
extern int sigignore(int);

static sigjmp_buf back;
static volatile sig_atomic_t hits;

static void on_segv(int sig)
{
	(void)sig;
	hits++;
	siglongjmp(back, 1);
}

static void on_usr1(int sig) { (void)sig; hits++; }

static const char *name(void (*h)(int))
{
	return h == SIG_DFL ? "SIG_DFL" : h == SIG_IGN ? "SIG_IGN" : h == SIG_HOLD ? "SIG_HOLD"
		: h == on_segv ? "on_segv" : h == on_usr1 ? "on_usr1" : "other";
}

static const char *current(int sig)
{
	struct sigaction sa;
	sigaction(sig, NULL, &sa);
	return name(sa.sa_handler);
}

static long heap_work(void)
{
	/* Heap pages written again and again across epochs: under the mprotect
	 * tracker each first write in an epoch is the tracker's fault. */
	long sum = 0;
	for (int round = 0; round < 5; round++) {
		char *blocks[16];
		for (int i = 0; i < 16; i++) {
			blocks[i] = malloc(10000);
			memset(blocks[i], round + i, 10000);
		}
		for (int i = 0; i < 16; i++) {
			sum += blocks[i][9999];
			free(blocks[i]);
		}
		struct timespec ts = { 0, 15 * 1000000L };
		nanosleep(&ts, NULL);
	}
	return sum;
}

int main(void)
{
	int zero = open("/dev/zero", O_RDONLY);
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, zero, 0);
	if (ro == MAP_FAILED)
		return 1;
	printf("signal: previous %s\n", name(signal(SIGSEGV, on_segv)));
	printf("sigaction reports %s\n", current(SIGSEGV));
	printf("heap work %ld\n", heap_work());
	if (sigsetjmp(back, 1) == 0)
		ro[0] = 1;
	printf("fault handled %d time(s); now %s (System V: reset on delivery)\n", (int)hits,
	       current(SIGSEGV));

	printf("sysv_signal: previous %s\n", name(sysv_signal(SIGSEGV, on_segv)));
	printf("bsd_signal: previous %s\n", name(bsd_signal(SIGSEGV, on_segv)));
	printf("heap work %ld\n", heap_work());
	if (sigsetjmp(back, 1) == 0)
		ro[0] = 1;
	printf("fault handled %d time(s); now %s (BSD: kept)\n", (int)hits, current(SIGSEGV));
	printf("sigset: previous %s\n", name(sigset(SIGSEGV, SIG_DFL)));
	printf("sigaction reports %s\n", current(SIGSEGV));
	printf("sigset(SIG_HOLD): %s\n", name(sigset(SIGSEGV, SIG_HOLD)));
	printf("sigset again: %s\n", name(sigset(SIGSEGV, on_segv)));
	printf("heap work %ld\n", heap_work());
	int ignored = sigignore(SIGSEGV);
	printf("sigignore: %d, now %s\n", ignored, current(SIGSEGV));
	printf("heap work %ld\n", heap_work());
	printf("siginterrupt: %d\n", siginterrupt(SIGSEGV, 1));
	struct sigaction sa;
	sigaction(SIGSEGV, NULL, &sa);
	printf("SA_RESTART after siginterrupt: %d\n", (sa.sa_flags & SA_RESTART) != 0);
	signal(SIGSEGV, SIG_DFL);

	hits = 0;
	printf("sigset SIGUSR1: previous %s\n", name(sigset(SIGUSR1, on_usr1)));
	raise(SIGUSR1);
	printf("SIGUSR1 handled %d\n", (int)hits);
	printf("sigset(SIG_HOLD): %s\n", name(sigset(SIGUSR1, SIG_HOLD)));
	raise(SIGUSR1);
	printf("held: handled %d\n", (int)hits);
	printf("sigset(SIG_HOLD) again: %s\n", name(sigset(SIGUSR1, SIG_HOLD)));
	printf("sigset releases: previous %s\n", name(sigset(SIGUSR1, on_usr1)));
	printf("released: handled %d\n", (int)hits);
	printf("errors: %d %d\n", signal(0, on_usr1) == SIG_ERR, sigset(SIGRTMAX + 1, on_usr1) == SIG_ERR);
	return 0;
}
