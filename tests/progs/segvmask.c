/* SPDX-License-Identifier: BSD-3-Clause */
/* SIGSEGV blocked as the program asks, while the heap's first writes are
 * still served (issue 33).  Signal handlers write heap pages that were never
 * written (under the mprotect tracker: write-protected, so each first write
 * is a fault the tracker must take): a SIGSEGV handler without SA_NODEFER,
 * with and without unblocking SIGSEGV in it, leaving by return and by
 * siglongjmp; a SIGTERM handler whose sa_mask holds SIGSEGV raises SIGSEGV,
 * which stays pending until it returns (the Open POSIX Test Suite's
 * sigaction/8-13); a SIGSEGV blocked with sigprocmask and raised stays
 * pending, is reported by sigprocmask, sigpending, sigsuspend's wake-up,
 * sigwait, and survives exec.  Prints what it saw; the runtime must not
 * change a line of it.  With the argument "exec-child": report whether
 * SIGSEGV arrived blocked, and write the heap. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define FRESH (256u << 10)	/* 64 pages */

static long page;
static unsigned char *guard;	/* PROT_NONE until a handler opens it */
static unsigned char *fresh;	/* the buffer the next handler writes */

static void write_fresh(void)
{
	for (size_t i = 0; i < FRESH; i += (size_t)page)
		fresh[i] = (unsigned char)(i / (size_t)page + 1);
}

static unsigned long fresh_sum(const unsigned char *b)
{
	unsigned long s = 0;
	for (size_t i = 0; i < FRESH; i += (size_t)page)
		s += b[i];
	return s;
}

static unsigned char *new_fresh(void)
{
	unsigned char *b = malloc(FRESH);
	if (b == NULL)
		exit(4);
	return b;
}

static int blocked_now(int sig)
{
	sigset_t cur;
	sigprocmask(SIG_SETMASK, NULL, &cur);
	return sigismember(&cur, sig);
}

static int pending_now(int sig)
{
	sigset_t p;
	sigpending(&p);
	return sigismember(&p, sig);
}

static const char *yn(int b)
{
	return b ? "yes" : "no";
}

/* ---- a SIGSEGV handler without SA_NODEFER ---- */

enum segv_mode { SEGV_RETURN, SEGV_UNBLOCK, SEGV_JUMP };
static volatile enum segv_mode segv_mode;
static volatile int segv_calls, segv_blocked_in, segv_blocked_after_unblock, segv_code_fault;
static volatile int segv_uc_blocked = -1;
static sigjmp_buf segv_jump;

static void on_segv_fault(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	segv_calls++;
	segv_code_fault = si->si_code > 0;
	segv_blocked_in = blocked_now(SIGSEGV);
	segv_uc_blocked = sigismember(&((ucontext_t *)ucv)->uc_sigmask, SIGSEGV);
	if (segv_mode == SEGV_UNBLOCK) {
		sigset_t segv;
		sigemptyset(&segv);
		sigaddset(&segv, SIGSEGV);
		pthread_sigmask(SIG_UNBLOCK, &segv, NULL);
		segv_blocked_after_unblock = blocked_now(SIGSEGV);
	}
	write_fresh();	/* first writes to fresh heap pages */
	if (segv_mode == SEGV_JUMP)
		siglongjmp(segv_jump, 1);
	mprotect(guard, (size_t)page, PROT_READ | PROT_WRITE);
}

static void fault_handler_cases(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv_fault;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	static const char *const names[] = { "returns", "unblocks SIGSEGV", "siglongjmps out" };
	for (int mode = SEGV_RETURN; mode <= SEGV_JUMP; mode++) {
		/* The jump case twice: the second fault must reach the
		 * handler as the first did. */
		for (volatile int round = 0; round < (mode == SEGV_JUMP ? 2 : 1); round++) {
			segv_mode = (enum segv_mode)mode;
			segv_calls = 0;
			segv_blocked_after_unblock = -1;
			fresh = new_fresh();
			mprotect(guard, (size_t)page, PROT_NONE);
			if (sigsetjmp(segv_jump, 1) == 0)
				*(volatile unsigned char *)guard = 1;
			printf("fault, handler %s: calls %d, a fault %s, SIGSEGV blocked in it %s "
			       "(ucontext: %s)",
			       names[mode], segv_calls, yn(segv_code_fault), yn(segv_blocked_in),
			       yn(segv_uc_blocked));
			if (mode == SEGV_UNBLOCK)
				printf(", after unblocking %s", yn(segv_blocked_after_unblock));
			printf("; heap written %lu; SIGSEGV blocked after %s\n", fresh_sum(fresh),
			       yn(blocked_now(SIGSEGV)));
			free(fresh);
		}
	}
}

/* ---- sigaction/8-13: SIGSEGV in a SIGTERM handler's sa_mask ---- */

static volatile int plain_segv_calls, term_saw_segv, term_pending_segv, term_blocked_segv;
static volatile int plain_segv_code;
static volatile int plain_segv_pid_ok;

static void on_plain_segv(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	(void)ucv;
	plain_segv_calls++;
	plain_segv_code = si->si_code;
	plain_segv_pid_ok = si->si_pid == getpid();
}

static void on_term(int sig)
{
	(void)sig;
	write_fresh();
	raise(SIGSEGV);
	term_saw_segv = plain_segv_calls;
	term_pending_segv = pending_now(SIGSEGV);
	term_blocked_segv = blocked_now(SIGSEGV);
	write_fresh();
}

static void sa_mask_case(void)
{
	struct sigaction sa, back;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_plain_segv;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGSEGV);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGTERM, NULL, &back);
	printf("SIGTERM's sa_mask read back holds SIGSEGV: %s, handler its own: %s\n",
	       yn(sigismember(&back.sa_mask, SIGSEGV)), yn(back.sa_handler == on_term));
	plain_segv_calls = 0;
	fresh = new_fresh();
	raise(SIGTERM);
	printf("in the SIGTERM handler: SIGSEGV blocked %s, pending %s, caught %d; "
	       "after it: caught %d (raised: %s, by this process: %s); heap written %lu\n",
	       yn(term_blocked_segv), yn(term_pending_segv), term_saw_segv, plain_segv_calls,
	       yn(plain_segv_code == SI_TKILL), yn(plain_segv_pid_ok), fresh_sum(fresh));
	free(fresh);
	signal(SIGTERM, SIG_DFL);
}

/* ---- sigprocmask, sigpending, sigsuspend, sigwait ---- */

static void sigprocmask_cases(void)
{
	sigset_t segv, old;
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	sigprocmask(SIG_BLOCK, &segv, &old);
	printf("old mask holds SIGSEGV: %s\n", yn(sigismember(&old, SIGSEGV)));
	sigprocmask(SIG_BLOCK, NULL, &old);
	printf("blocked: the mask read back holds SIGSEGV: %s\n", yn(sigismember(&old, SIGSEGV)));

	plain_segv_calls = 0;
	raise(SIGSEGV);
	fresh = new_fresh();
	write_fresh();	/* faults of the tracker while the program blocks SIGSEGV */
	printf("raised while blocked: caught %d, pending %s; heap written %lu\n", plain_segv_calls,
	       yn(pending_now(SIGSEGV)), fresh_sum(fresh));
	free(fresh);
	sigprocmask(SIG_UNBLOCK, &segv, &old);
	printf("unblocked: caught %d before sigprocmask returned, pending %s, old mask holds "
	       "SIGSEGV %s\n",
	       plain_segv_calls, yn(pending_now(SIGSEGV)), yn(sigismember(&old, SIGSEGV)));

	/* Held twice: one delivery, as the kernel keeps one. */
	sigprocmask(SIG_BLOCK, &segv, NULL);
	raise(SIGSEGV);
	raise(SIGSEGV);
	plain_segv_calls = 0;
	sigset_t none;
	sigemptyset(&none);
	errno = 0;
	int r = sigsuspend(&none);
	int e = errno;
	printf("sigsuspend with SIGSEGV held: returns %d (%s), caught %d, blocked after %s, "
	       "pending %s\n",
	       r, e == EINTR ? "EINTR" : "?", plain_segv_calls, yn(blocked_now(SIGSEGV)),
	       yn(pending_now(SIGSEGV)));

	raise(SIGSEGV);
	int sig = 0;
	r = sigwait(&segv, &sig);
	printf("sigwait: %d, signal %s, caught %d, pending %s\n", r,
	       sig == SIGSEGV ? "SIGSEGV" : "?", plain_segv_calls, yn(pending_now(SIGSEGV)));
	raise(SIGSEGV);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	struct timespec zero = { 0, 0 };
	r = sigtimedwait(&segv, &si, &zero);
	printf("sigtimedwait: %s, raised %s, by this process %s\n",
	       r == SIGSEGV ? "SIGSEGV" : "?", yn(si.si_code == SI_TKILL),
	       yn(si.si_pid == getpid()));
	sigprocmask(SIG_UNBLOCK, &segv, NULL);
	printf("unblocked again: caught %d\n", plain_segv_calls);
}

static void exec_case(const char *self)
{
	sigset_t segv;
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	sigprocmask(SIG_BLOCK, &segv, NULL);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execl(self, self, "exec-child", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	sigprocmask(SIG_UNBLOCK, &segv, NULL);
	printf("exec child: %s\n", WIFEXITED(st) ? "exited" : "killed");
}

static int exec_child(void)
{
	printf("exec child: SIGSEGV arrived blocked: %s\n", yn(blocked_now(SIGSEGV)));
	fresh = new_fresh();
	write_fresh();
	printf("exec child: heap written %lu\n", fresh_sum(fresh));
	return 0;
}

int main(int argc, char **argv)
{
	page = sysconf(_SC_PAGESIZE);
	if (argc > 1 && strcmp(argv[1], "exec-child") == 0)
		return exec_child();
	guard = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (guard == MAP_FAILED)
		return 3;
	fault_handler_cases();
	sa_mask_case();
	sigprocmask_cases();
	exec_case(argv[0]);
	return 0;
}
