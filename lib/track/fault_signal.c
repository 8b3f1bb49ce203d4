/* SPDX-License-Identifier: BSD-3-Clause */
/* fault_signal -- the process's SIGSEGV and SIGBUS dispositions while the
 * runtime needs them.  See fault_signal.h.
 *
 * Our handler stays installed while any tracker needs it; what the
 * application sets meanwhile is only recorded, and a fault the claim
 * function does not take goes where the application's disposition says, as
 * the kernel would have sent it. */
#include "track/fault_signal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* glibc's other public name for sigaction(2): preload/ interposes
 * "sigaction" itself and forwards to fault_signal_sigaction, so the
 * runtime's own calls must not go through that symbol. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* The signals we may own, by index: the mprotect tracker's SIGSEGV, the
 * pool mapping's SIGBUS (nvm.h). */
enum { OWN_SEGV, OWN_BUS, OWN_N };

static int own_index(int sig)
{
	return sig == SIGSEGV ? OWN_SEGV : sig == SIGBUS ? OWN_BUS : -1;
}

/* Serialises install, uninstall and fault_signal_sigaction. */
static prim_lock_t disposition_lock = PRIM_LOCK_INIT;
static int users[OWN_N];	/* our handler is installed while > 0 */
static _Atomic(fault_signal_claim_fn) claimer[OWN_N];

/* The application's disposition of each signal while our handler is
 * installed.  A sequence lock, because the signal handler reads it and
 * cannot take a lock; writers block every signal, so a handler never waits
 * for its own thread. */
static struct sigaction app_action[OWN_N];
static atomic_uint app_action_seq[OWN_N];

static void app_action_write(int i, const struct sigaction *sa)
{
	unsigned s;
	do {
		s = atomic_load_explicit(&app_action_seq[i], memory_order_relaxed) & ~1u;
	} while (!atomic_compare_exchange_weak_explicit(&app_action_seq[i], &s, s + 1,
							memory_order_acquire,
							memory_order_relaxed));
	atomic_thread_fence(memory_order_release);
	memcpy(&app_action[i], sa, sizeof(app_action[i]));
	atomic_store_explicit(&app_action_seq[i], s + 2, memory_order_release);
}

static void app_action_read(int i, struct sigaction *out)
{
	for (;;) {
		unsigned s = atomic_load_explicit(&app_action_seq[i], memory_order_acquire);
		if (s & 1) {
			sched_yield();
			continue;
		}
		memcpy(out, &app_action[i], sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&app_action_seq[i], memory_order_relaxed) == s)
			return;
	}
}

/* app_action_write with every signal blocked (outside the handler). */
static void app_action_write_blocked(int i, const struct sigaction *sa)
{
	sigset_t all, saved;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	app_action_write(i, sa);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

static const char *signal_name(int sig)
{
	return sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : "signal";
}

/* The application has no handler: end the process as the kernel would have.
 * Returning from our handler re-executes the faulting access, which then
 * takes the default action (and dumps core with the faulting context); a
 * signal sent by kill() is re-sent instead, pending until we return. */
static void die_by_default(int sig, const siginfo_t *si)
{
	log_msg(LOG_ERR, "%s at address %p, %s and with no handler in the program: terminating",
		signal_name(sig), si->si_addr,
		sig == SIGSEGV ? "outside the tracked persistent heap pages"
			       : "not a write-back to the pool");
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	__sigaction(sig, &dfl, NULL);
	if (si->si_code <= 0)
		syscall(SYS_tgkill, getpid(), prim_gettid(), sig);
}

/* libc's pthread_sigmask, under the interposed one (fault_signal_sigmask). */
static int (*real_sigmask)(int, const sigset_t *, sigset_t *) = pthread_sigmask;

void fault_signal_use_sigmask(int (*real)(int, const sigset_t *, sigset_t *))
{
	real_sigmask = real;
}

/* Hand the signal to the application's disposition, as the kernel would
 * have: its mask (plus the signal unless SA_NODEFER) added to the
 * interrupted context's, SA_RESETHAND honoured. */
static void chain_to_application(int sig, siginfo_t *si, void *ucv)
{
	struct sigaction app;
	int i = own_index(sig);
	app_action_read(i, &app);
	bool with_info = (app.sa_flags & SA_SIGINFO) != 0;
	if (!with_info && (app.sa_handler == SIG_DFL || app.sa_handler == SIG_IGN)) {
		/* A fault cannot be ignored (the kernel forces the default
		 * action); a SIGSEGV sent by kill() can. */
		if (app.sa_handler == SIG_IGN && si->si_code <= 0)
			return;
		die_by_default(sig, si);
		return;
	}
	if (app.sa_flags & SA_RESETHAND) {
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		app_action_write(i, &dfl);	/* every signal is blocked here */
	}
	sigset_t mask;
	prim_interrupted_sigmask(ucv, &mask);
	sigorset(&mask, &mask, &app.sa_mask);
	if (!(app.sa_flags & SA_NODEFER))
		sigaddset(&mask, sig);
	/* libc's own: this is the kernel's delivery, not the application
	 * changing its mask (fault_signal_sigmask must not record it). */
	real_sigmask(SIG_SETMASK, &mask, NULL);
	if (with_info)
		app.sa_sigaction(sig, si, ucv);
	else
		app.sa_handler(sig);
	/* Returning restores the interrupted context's mask. */
}

/* Whether the application asked for SIGSEGV to be blocked in this thread
 * (fault_signal_sigmask keeps it unblocked all the same). */
static __thread bool app_blocks_segv;

static void on_fault(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	/* si_code > 0: raised by the kernel for this access, not sent. */
	fault_signal_claim_fn claim =
		atomic_load_explicit(&claimer[own_index(sig)], memory_order_acquire);
	if (si->si_code <= 0 || claim == NULL || !claim(si, ucv)) {
		/* The kernel's rule for a fault with the signal blocked (a
		 * SIGBUS with SIGBUS blocked never reaches us). */
		if (si->si_code > 0 && sig == SIGSEGV && app_blocks_segv)
			die_by_default(sig, si);
		else
			chain_to_application(sig, si, ucv);
	}
	errno = saved_errno;
}

bool fault_signal_app_blocked(void) { return app_blocks_segv; }
void fault_signal_set_app_blocked(bool blocked) { app_blocks_segv = blocked; }

void fault_signal_filter_mask(sigset_t *mask)
{
	sigdelset(mask, SIGSEGV);
}

int fault_signal_sigmask(int how, const sigset_t *set, sigset_t *old,
			 int (*real)(int, const sigset_t *, sigset_t *))
{
	bool was = app_blocks_segv, now = was;
	sigset_t filtered;
	if (set != NULL) {
		bool named = sigismember(set, SIGSEGV) == 1;
		if (how == SIG_SETMASK)
			now = named;
		else if (how == SIG_BLOCK && named)
			now = true;
		else if (how == SIG_UNBLOCK && named)
			now = false;
		filtered = *set;
		fault_signal_filter_mask(&filtered);
	}
	int r = real(how, set != NULL ? &filtered : NULL, old);
	if (r != 0)
		return r;
	app_blocks_segv = now;
	if (old != NULL && was)
		sigaddset(old, SIGSEGV);
	return 0;
}

static int install_handler(int sig)
{
	struct sigaction cur;
	if (__sigaction(sig, NULL, &cur) != 0)
		return -1;
	app_action_write_blocked(own_index(sig), &cur);
	struct sigaction ours;
	memset(&ours, 0, sizeof(ours));
	ours.sa_sigaction = on_fault;
	/* Everything blocked while we run: an application handler that
	 * writes the heap must not interrupt us, since a write fault with
	 * SIGSEGV blocked kills the process.  SA_ONSTACK keeps stack-overflow
	 * handlers on their alternate stack working. */
	sigfillset(&ours.sa_mask);
	ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	return __sigaction(sig, &ours, NULL);
}

static void uninstall_handler(int sig)
{
	struct sigaction app;
	app_action_read(own_index(sig), &app);
	__sigaction(sig, &app, NULL);
}

int fault_signal_install_for(int sig, fault_signal_claim_fn claim)
{
	int i = own_index(sig);
	if (i < 0 || claim == NULL) {
		errno = EINVAL;
		return -1;
	}
	int r = 0;
	prim_lock(&disposition_lock);
	fault_signal_claim_fn cur = atomic_load_explicit(&claimer[i], memory_order_relaxed);
	if (users[i] > 0 && cur != claim) {
		errno = EBUSY;
		r = -1;
	} else {
		/* Set before the handler is installed: it never sees NULL. */
		atomic_store_explicit(&claimer[i], claim, memory_order_release);
		if (users[i] == 0)
			r = install_handler(sig);
		if (r == 0)
			users[i]++;
	}
	prim_unlock(&disposition_lock);
	return r;
}

void fault_signal_uninstall_for(int sig)
{
	int i = own_index(sig);
	if (i < 0)
		return;
	prim_lock(&disposition_lock);
	if (users[i] > 0 && --users[i] == 0)
		uninstall_handler(sig);
	prim_unlock(&disposition_lock);
}

int fault_signal_install(fault_signal_claim_fn claim)
{
	return fault_signal_install_for(SIGSEGV, claim);
}

void fault_signal_uninstall(void) { fault_signal_uninstall_for(SIGSEGV); }

int fault_signal_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction new_action;	/* act and old may be the same object */
	if (act != NULL) {
		new_action = *act;
		/* A handler running with SIGSEGV blocked dies at its first
		 * write to a clean heap page (fault_signal_sigmask). */
		fault_signal_filter_mask(&new_action.sa_mask);
	}
	int i = own_index(sig);
	if (i < 0)
		return __sigaction(sig, act != NULL ? &new_action : NULL, old);
	int r = 0;
	prim_lock(&disposition_lock);
	if (users[i] > 0) {
		struct sigaction prev;
		app_action_read(i, &prev);
		if (act != NULL)
			app_action_write_blocked(i, &new_action);
		if (old != NULL)
			*old = prev;
	} else {
		r = __sigaction(sig, act != NULL ? &new_action : NULL, old);
	}
	prim_unlock(&disposition_lock);
	return r;
}
