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
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* The signals we may own, by index: the mprotect tracker's SIGSEGV, the
 * pool mapping's SIGBUS (nvm.h). */
enum { OWN_SEGV, OWN_BUS, OWN_N };

static int own_index(int sig)
{
	return sig == SIGSEGV ? OWN_SEGV : sig == SIGBUS ? OWN_BUS : -1;
}

/* Who needs our handler of each signal we may own. */
static struct dispositions {
	/* Serialises install, uninstall and fault_signal_sigaction; taken
	 * with every signal blocked (lock_dispositions), so that a handler
	 * calling sigaction never waits for its own thread.  Nothing of the
	 * program's memory is touched while it is held: that may be a
	 * write-protected heap page, and SIGSEGV is blocked then. */
	prim_lock_t lock;
	int users[OWN_N];	/* our handler is installed while > 0: under lock */
	/* Of those users, the ones with a claim function, and the function:
	 * written under lock, read atomically by the handler. */
	atomic_int claim_users[OWN_N];
	_Atomic(fault_signal_claim_fn) claimer[OWN_N];
	/* preload/ routes the program's masks here (fault_signal_take_masks):
	 * set once under lock, read atomically. */
	atomic_bool masks_taken;
	/* The runtime's scope around a claim (fault_signal_set_inside):
	 * atomic. */
	_Atomic(fault_signal_inside_fn) inside;
	/* Ending signals (fault_signal.h): the runtime's end, set once (atomic;
	 * NULL: the kernel keeps the application's dispositions), and of each
	 * signal whether the kernel holds our handler for it (under lock; read
	 * by nothing else). */
	_Atomic(fault_signal_end_fn) end;
	bool ending_ours[NSIG];
} own = { .lock = PRIM_LOCK_INIT };
/* Taken around fork (by the forking thread, whose other signals fork's
 * wrapper blocks): the child's sigaction goes on through here. */
PRIM_LOCK_NAMED(own.lock, dispositions, "track/fault_signal: the signal dispositions",
		PRIM_FORK_DISPOSITIONS);

/* The application's action of a signal where the kernel holds one of ours
 * instead: SIGSEGV and SIGBUS while our handler is installed, any signal
 * whose handler goes through the trampoline.  A sequence count each,
 * because the handlers read it and cannot take a lock; the writers take
 * one lock (most under own.lock, a handler resetting SA_RESETHAND's action
 * without it), each with every signal blocked, so a handler never waits for
 * its own thread.  Taken around fork: no record is half written in the
 * child. */
struct recorded_action {
	struct sigaction sa;
	atomic_uint seq;
};
static struct recorded_action recorded[NSIG];
static prim_lock_t record_writer = PRIM_LOCK_INIT;
PRIM_LOCK_NAMED(record_writer, actions, "track/fault_signal: the program's recorded actions",
		PRIM_FORK_ACTIONS);

static void record_write(int sig, const struct sigaction *sa)
{
	struct recorded_action *r = &recorded[sig];
	prim_lock(&record_writer);
	unsigned s = atomic_load_explicit(&r->seq, memory_order_relaxed);
	atomic_store_explicit(&r->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(&r->sa, sa, sizeof(r->sa));
	atomic_store_explicit(&r->seq, s + 2, memory_order_release);
	prim_unlock(&record_writer);
}

static void record_read(int sig, struct sigaction *out)
{
	struct recorded_action *r = &recorded[sig];
	for (;;) {
		unsigned s = atomic_load_explicit(&r->seq, memory_order_acquire);
		if (s & 1) {
			prim_yield();
			continue;
		}
		memcpy(out, &r->sa, sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&r->seq, memory_order_relaxed) == s)
			return;
	}
}

/* libc's pthread_sigmask, under the interposed one (fault_signal_sigmask). */
static int (*real_sigmask)(int, const sigset_t *, sigset_t *) = pthread_sigmask;

static void lock_dispositions(sigset_t *saved)
{
	sigset_t all;
	sigfillset(&all);
	real_sigmask(SIG_SETMASK, &all, saved);
	prim_lock(&own.lock);
}

static void unlock_dispositions(const sigset_t *saved)
{
	prim_unlock(&own.lock);
	real_sigmask(SIG_SETMASK, saved, NULL);
}

static const char *signal_name(int sig)
{
	return sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : "signal";
}

/* The application has no handler: end the process as the kernel would have.
 * Returning from our handler re-executes the faulting access, which then
 * takes the default action (and dumps core with the faulting context); a
 * signal sent by kill() is re-sent instead. */
static void die_by_default(int sig, const siginfo_t *si)
{
	/* Said only while the runtime needs the signal: otherwise the
	 * program's crash is its own, as natively. */
	if (atomic_load_explicit(&own.claim_users[own_index(sig)], memory_order_relaxed) > 0)
		log_msg(LOG_ERR,
			"%s at address %p, %s and with no handler in the program: terminating",
			signal_name(sig), si->si_addr,
			sig == SIGSEGV ? "outside the tracked persistent heap pages"
				       : "not a write-back to the pool");
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	prim_sys_sigaction(sig, &dfl, NULL);
	if (si->si_code <= 0)
		prim_sys_signal_thread(sig);
}

/* ---- SIGSEGV blocking, emulated (fault_signal.h) ---- */

/* SIGSEGV's state in this thread: thread-local, so neither lock nor atomic
 * (a handler running on the thread changes it only between the thread's own
 * steps, as an interrupted call would). */
static __thread struct segv_thread {
	bool app_blocks;	/* the application asked for SIGSEGV blocked */
	/* A SIGSEGV sent to this thread while it "blocked" it, with its
	 * siginfo; one at most, as the kernel keeps one of a standard
	 * signal. */
	bool held;
	siginfo_t held_info;
	unsigned held_count;	/* ever held, for fault_signal_call_held */
	/* Handlers of the program we are running on this thread, and
	 * SIGSEGV's state when the outermost of them was entered
	 * (fault_signal_before_jump). */
	unsigned handler_depth;
	bool outer_blocks;
} segv;

static void hold_segv(const siginfo_t *si)
{
	if (!segv.held) {
		segv.held_info = *si;
		segv.held = true;
	}
	segv.held_count++;
}

/* Send the held SIGSEGV again, now that the thread no longer blocks it: no
 * mask of the kernel blocks SIGSEGV, so it is delivered as this call
 * returns, with the siginfo it came with (a thread may queue any siginfo to
 * itself). */
static void deliver_held(void)
{
	if (!segv.held || segv.app_blocks)
		return;
	segv.held = false;
	siginfo_t info = segv.held_info;
	prim_sys_queue_signal_thread(SIGSEGV, &info);
}

/* Run the application's handler app of sig as the kernel would have, with
 * SIGSEGV emulated: the program's mask while it runs is the interrupted
 * one plus sa_mask plus sig (unless SA_NODEFER), SIGSEGV in it only in our
 * record; the interrupted mask it finds in its ucontext holds SIGSEGV as
 * the program had it, and what it leaves there is what returning restores.
 * set_mask: the kernel has not set that mask (our SIGSEGV/SIGBUS handler
 * runs with its own). */
static void run_app_handler(int sig, siginfo_t *si, void *ucv, const struct sigaction *app,
			    bool set_mask)
{
	bool was = segv.app_blocks;
	bool during = was || sigismember(&app->sa_mask, SIGSEGV) == 1 ||
		      (sig == SIGSEGV && !(app->sa_flags & SA_NODEFER));
	/* Without preload/ (the library linked into a test) nothing follows
	 * the program's masks or jumps: the kernel blocks what it asked. */
	bool emulate = atomic_load_explicit(&own.masks_taken, memory_order_relaxed);
	sigset_t interrupted;
	prim_interrupted_sigmask(ucv, &interrupted);
	if (set_mask) {
		sigset_t mask;
		sigorset(&mask, &interrupted, &app->sa_mask);
		if (!(app->sa_flags & SA_NODEFER))
			sigaddset(&mask, sig);
		if (emulate)
			sigdelset(&mask, SIGSEGV);
		/* libc's own: this is the kernel's delivery, not the
		 * application changing its mask. */
		real_sigmask(SIG_SETMASK, &mask, NULL);
	}
	if (!emulate) {
		if (app->sa_flags & SA_SIGINFO)
			app->sa_sigaction(sig, si, ucv);
		else
			app->sa_handler(sig);
		return;
	}
	if (was) {
		sigaddset(&interrupted, SIGSEGV);
		prim_set_interrupted_sigmask(ucv, &interrupted);
	}
	if (segv.handler_depth++ == 0)
		segv.outer_blocks = was;
	segv.app_blocks = during;
	if (app->sa_flags & SA_SIGINFO)
		app->sa_sigaction(sig, si, ucv);
	else
		app->sa_handler(sig);
	int app_errno = errno;	/* what the handler leaves, as natively */
	segv.handler_depth--;
	prim_interrupted_sigmask(ucv, &interrupted);
	segv.app_blocks = sigismember(&interrupted, SIGSEGV) == 1;
	sigdelset(&interrupted, SIGSEGV);
	prim_set_interrupted_sigmask(ucv, &interrupted);
	if (segv.held && !segv.app_blocks) {
		/* Natively the held one is delivered once the handler has
		 * returned, under the mask returning restores. */
		real_sigmask(SIG_SETMASK, &interrupted, NULL);
		deliver_held();
	}
	errno = app_errno;
}

/* The kernel's handler of a signal whose handler's sa_mask holds SIGSEGV:
 * the kernel got that sa_mask without it. */
static void on_masked_signal(int sig, siginfo_t *si, void *ucv)
{
	struct sigaction app;
	record_read(sig, &app);
	if (app.sa_handler == SIG_DFL || app.sa_handler == SIG_IGN)
		return;	/* replaced in between: the kernel has the new one */
	run_app_handler(sig, si, ucv, &app, false);
}

static bool is_trampoline(const struct sigaction *k)
{
	return (k->sa_flags & SA_SIGINFO) && k->sa_sigaction == on_masked_signal;
}

/* Hand the signal to the application's disposition, as the kernel would
 * have, SA_RESETHAND honoured. */
static void chain_to_application(int sig, siginfo_t *si, void *ucv)
{
	struct sigaction app;
	record_read(sig, &app);
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
		/* A SIGSEGV sent now would find the record half written. */
		sigset_t all, during;
		sigfillset(&all);
		real_sigmask(SIG_SETMASK, &all, &during);
		record_write(sig, &dfl);
		real_sigmask(SIG_SETMASK, &during, NULL);
	}
	run_app_handler(sig, si, ucv, &app, true);
}

static void on_fault(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	if (sig == SIGSEGV && si->si_code <= 0 && segv.app_blocks) {
		/* Sent while the program blocks it: pending until it does
		 * not. */
		hold_segv(si);
		errno = saved_errno;
		return;
	}
	/* si_code > 0: raised by the kernel for this access, not sent. */
	fault_signal_claim_fn claim =
		atomic_load_explicit(&own.claimer[own_index(sig)], memory_order_acquire);
	fault_signal_inside_fn inside = atomic_load_explicit(&own.inside, memory_order_acquire);
	if (si->si_code <= 0 || claim == NULL ||
	    !(inside != NULL ? inside(claim, si, ucv) : claim(si, ucv))) {
		/* The kernel's rule for a fault with the signal blocked (a
		 * SIGBUS with SIGBUS blocked never reaches us). */
		if (si->si_code > 0 && sig == SIGSEGV && segv.app_blocks) {
			die_by_default(sig, si);
		} else {
			chain_to_application(sig, si, ucv);
			return;	/* errno as the program's handler left it */
		}
	}
	errno = saved_errno;
}

void fault_signal_set_inside(fault_signal_inside_fn inside)
{
	atomic_store_explicit(&own.inside, inside, memory_order_release);
}

bool fault_signal_app_blocked(void) { return segv.app_blocks; }
void fault_signal_set_app_blocked(bool blocked) { segv.app_blocks = blocked; }

int fault_signal_sigmask(int how, const sigset_t *set, sigset_t *old,
			 int (*real)(int, const sigset_t *, sigset_t *))
{
	bool was = segv.app_blocks, now = was;
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
		sigdelset(&filtered, SIGSEGV);
	}
	int r = real(how, set != NULL ? &filtered : NULL, old);
	if (r != 0)
		return r;
	segv.app_blocks = now;
	if (old != NULL && was)
		sigaddset(old, SIGSEGV);
	/* Natively a pending signal the call unblocks is delivered before it
	 * returns. */
	deliver_held();
	return 0;
}

void fault_signal_pending(sigset_t *set)
{
	if (segv.held)
		sigaddset(set, SIGSEGV);
}

bool fault_signal_take_pending(const sigset_t *set, siginfo_t *info)
{
	if (!segv.held || sigismember(set, SIGSEGV) != 1)
		return false;
	segv.held = false;
	if (info != NULL)
		*info = segv.held_info;
	return true;
}

bool fault_signal_call_begin(struct fault_signal_call *c, const sigset_t *mask)
{
	c->blocked_before = segv.app_blocks;
	c->held_before = segv.held_count;
	if (mask == NULL) {
		c->mask = NULL;
		return true;
	}
	c->filtered = *mask;
	sigdelset(&c->filtered, SIGSEGV);
	c->mask = &c->filtered;
	segv.app_blocks = sigismember(mask, SIGSEGV) == 1;
	if (segv.held && !segv.app_blocks) {
		sigset_t saved;
		real_sigmask(SIG_SETMASK, &c->filtered, &saved);
		deliver_held();
		real_sigmask(SIG_SETMASK, &saved, NULL);
		segv.app_blocks = c->blocked_before;
		return false;
	}
	return true;
}

bool fault_signal_call_held(struct fault_signal_call *c)
{
	if (segv.held_count == c->held_before)
		return false;
	c->held_before = segv.held_count;
	return true;
}

void fault_signal_call_end(struct fault_signal_call *c)
{
	segv.app_blocks = c->blocked_before;
	deliver_held();
}

void fault_signal_before_jump(const sigset_t *saved_mask)
{
	if (segv.handler_depth == 0)
		return;
	segv.handler_depth = 0;
	if (saved_mask != NULL)
		segv.app_blocks = segv.outer_blocks;
	deliver_held();
}

void fault_signal_before_exec(void)
{
	if (!segv.app_blocks)
		return;
	sigset_t segv;
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	real_sigmask(SIG_BLOCK, &segv, NULL);
}

void fault_signal_after_exec(void)
{
	if (!segv.app_blocks)
		return;
	sigset_t segv;
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	real_sigmask(SIG_UNBLOCK, &segv, NULL);
}

/* ---- dispositions ---- */

/* Whether the kernel must get act through the trampoline. */
static bool needs_trampoline(int sig, const struct sigaction *act)
{
	return atomic_load_explicit(&own.masks_taken, memory_order_relaxed) && sig != SIGSEGV &&
	       act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
	       sigismember(&act->sa_mask, SIGSEGV) == 1;
}

/* The application's action of sig, as the kernel holds it or through the
 * trampoline.  Lock held. */
static int kernel_get_app(int sig, struct sigaction *out)
{
	struct sigaction k;
	if (prim_sys_sigaction(sig, NULL, &k) != 0)
		return -1;
	if (is_trampoline(&k))
		record_read(sig, &k);
	*out = k;
	return 0;
}

/* Give the kernel the application's act of sig (NULL: none), through the
 * trampoline where its sa_mask holds SIGSEGV; old gets the application's
 * previous one.  Lock held. */
static int kernel_set_app(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction prev_record, k_old;
	record_read(sig, &prev_record);
	int r;
	if (act != NULL && needs_trampoline(sig, act)) {
		record_write(sig, act);
		struct sigaction k = *act;
		k.sa_sigaction = on_masked_signal;
		k.sa_flags |= SA_SIGINFO;
		sigdelset(&k.sa_mask, SIGSEGV);
		r = prim_sys_sigaction(sig, &k, &k_old);
	} else {
		r = prim_sys_sigaction(sig, act, &k_old);
	}
	if (r == 0 && old != NULL)
		*old = is_trampoline(&k_old) ? prev_record : k_old;
	return r;
}

static int install_handler(int sig)
{
	struct sigaction cur;
	if (kernel_get_app(sig, &cur) != 0)
		return -1;
	record_write(sig, &cur);
	struct sigaction ours;
	memset(&ours, 0, sizeof(ours));
	ours.sa_sigaction = on_fault;
	/* Every other signal blocked while we run: an application handler
	 * must not interrupt us.  SIGSEGV never (SA_NODEFER): the tracker's
	 * faults in the program's own handlers, which we call from here, are
	 * served.  SA_ONSTACK keeps stack-overflow handlers on their
	 * alternate stack working. */
	sigfillset(&ours.sa_mask);
	sigdelset(&ours.sa_mask, SIGSEGV);
	ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
	return prim_sys_sigaction(sig, &ours, NULL);
}

static void uninstall_handler(int sig)
{
	struct sigaction app;
	record_read(sig, &app);
	kernel_set_app(sig, &app, NULL);
}

int fault_signal_install_for(int sig, fault_signal_claim_fn claim)
{
	int i = own_index(sig);
	if (i < 0 || claim == NULL) {
		errno = EINVAL;
		return -1;
	}
	int r = 0;
	sigset_t saved;
	lock_dispositions(&saved);
	fault_signal_claim_fn cur = atomic_load_explicit(&own.claimer[i], memory_order_relaxed);
	if (own.claim_users[i] > 0 && cur != claim) {
		errno = EBUSY;
		r = -1;
	} else {
		/* Set before the handler is installed: it never sees NULL. */
		atomic_store_explicit(&own.claimer[i], claim, memory_order_release);
		if (own.users[i] == 0)
			r = install_handler(sig);
		if (r == 0) {
			own.users[i]++;
			own.claim_users[i]++;
		}
	}
	int e = errno;
	unlock_dispositions(&saved);
	errno = e;
	return r;
}

void fault_signal_uninstall_for(int sig)
{
	int i = own_index(sig);
	if (i < 0)
		return;
	sigset_t saved;
	lock_dispositions(&saved);
	if (own.claim_users[i] > 0) {
		own.claim_users[i]--;
		if (--own.users[i] == 0)
			uninstall_handler(sig);
	}
	unlock_dispositions(&saved);
}

int fault_signal_install(fault_signal_claim_fn claim)
{
	return fault_signal_install_for(SIGSEGV, claim);
}

void fault_signal_uninstall(void) { fault_signal_uninstall_for(SIGSEGV); }

void fault_signal_take_masks(int (*real)(int, const sigset_t *, sigset_t *))
{
	real_sigmask = real;
	sigset_t saved;
	lock_dispositions(&saved);
	if (!atomic_load_explicit(&own.masks_taken, memory_order_relaxed)) {
		if (own.users[OWN_SEGV] == 0 && install_handler(SIGSEGV) != 0)
			log_msg(LOG_ERR, "cannot install the SIGSEGV handler that keeps SIGSEGV "
				"unblocked: %s", strerror(errno));
		else
			own.users[OWN_SEGV]++;
		atomic_store_explicit(&own.masks_taken, true, memory_order_relaxed);
		/* saved is this thread's mask before the call. */
		if (sigismember(&saved, SIGSEGV) == 1) {
			segv.app_blocks = true;
			sigdelset(&saved, SIGSEGV);
		}
	}
	unlock_dispositions(&saved);
}

/* ---- ending signals (fault_signal.h) ---- */

static const int ending_signals[] = {
	SIGHUP, SIGINT, SIGTERM, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGIO, SIGPROF, SIGVTALRM,
#ifdef SIGPWR
	SIGPWR,
#endif
#ifdef SIGSTKFLT
	SIGSTKFLT,
#endif
};

/* Whether sig is one of ending_signals. */
static bool is_ending(int sig)
{
	for (size_t i = 0; i < sizeof(ending_signals) / sizeof(ending_signals[0]); i++)
		if (ending_signals[i] == sig)
			return true;
	return false;
}

/* The end of the process by sig, as its default action: the kernel's
 * disposition SIG_DFL, sig sent to this thread and unblocked (our handler
 * runs with it blocked), so that it is delivered before the call returns. */
static _Noreturn void end_by_default(int sig)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	prim_sys_sigaction(sig, &dfl, NULL);
	prim_sys_signal_thread(sig);
	sigset_t one;
	sigemptyset(&one);
	sigaddset(&one, sig);
	real_sigmask(SIG_UNBLOCK, &one, NULL);
	/* Not reached: the signal's default action has ended the process. */
	prim_exit_now(128 + sig);
}

static void on_ending(int sig, siginfo_t *si, void *ucv)
{
	struct sigaction app;
	record_read(sig, &app);
	if (app.sa_handler != SIG_DFL) {
		/* Replaced in between (the kernel has the new action now):
		 * what the kernel would have done with it. */
		int saved_errno = errno;
		if (app.sa_handler != SIG_IGN)
			chain_to_application(sig, si, ucv);
		else
			errno = saved_errno;
		return;
	}
	fault_signal_end_fn end = atomic_load_explicit(&own.end, memory_order_acquire);
	if (end != NULL)
		end(sig);
	end_by_default(sig);
}

/* Our handler for an ending signal: every signal blocked while it runs but
 * the faults (the tracker's), no SA_RESTART needed (it never returns to the
 * interrupted code unless the application replaced SIG_DFL meanwhile; then
 * as that action's flags say, which the kernel has by then).  Lock held. */
static int install_ending(int sig)
{
	struct sigaction ours;
	memset(&ours, 0, sizeof(ours));
	ours.sa_sigaction = on_ending;
	sigfillset(&ours.sa_mask);
	sigdelset(&ours.sa_mask, SIGSEGV);
	sigdelset(&ours.sa_mask, SIGBUS);
	ours.sa_flags = SA_SIGINFO | SA_RESTART;
	return prim_sys_sigaction(sig, &ours, NULL);
}

static bool is_default(const struct sigaction *a)
{
	return a->sa_handler == SIG_DFL;
}

void fault_signal_set_ending(fault_signal_end_fn end)
{
	sigset_t saved;
	lock_dispositions(&saved);
	atomic_store_explicit(&own.end, end, memory_order_release);
	for (size_t i = 0; i < sizeof(ending_signals) / sizeof(ending_signals[0]); i++) {
		int sig = ending_signals[i];
		struct sigaction cur;
		if (own.ending_ours[sig] || kernel_get_app(sig, &cur) != 0 || !is_default(&cur))
			continue;	/* a handler, or ignored (by a shell, say): kept */
		record_write(sig, &cur);
		if (install_ending(sig) == 0)
			own.ending_ours[sig] = true;
	}
	unlock_dispositions(&saved);
}

/* fault_signal_sigaction of an ending signal once the runtime owns them:
 * ours in the kernel while the application's action is SIG_DFL, else the
 * application's.  Lock held. */
static int ending_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (own.ending_ours[sig]) {
		record_read(sig, old);
		if (act == NULL || is_default(act)) {
			if (act != NULL)
				record_write(sig, act);
			return 0;
		}
		int r = kernel_set_app(sig, act, NULL);
		if (r == 0) {
			own.ending_ours[sig] = false;
			record_write(sig, act);
		}
		return r;
	}
	if (act == NULL || !is_default(act))
		return kernel_set_app(sig, act, old);
	if (kernel_get_app(sig, old) != 0)
		return -1;
	record_write(sig, act);
	int r = install_ending(sig);
	if (r == 0)
		own.ending_ours[sig] = true;
	return r;
}

int fault_signal_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig <= 0 || sig >= NSIG)
		return prim_sys_sigaction(sig, act, old);	/* its EINVAL */
	/* Copied before and after the lock: either may be on a
	 * write-protected heap page, and SIGSEGV is blocked under it. */
	struct sigaction new_action, prev;
	if (act != NULL)
		new_action = *act;
	int i = own_index(sig);
	int r = 0, e = 0;
	sigset_t saved;
	lock_dispositions(&saved);
	if (i >= 0 && own.users[i] > 0) {
		record_read(sig, &prev);
		if (act != NULL)
			record_write(sig, &new_action);
	} else if (atomic_load_explicit(&own.end, memory_order_relaxed) != NULL &&
		   is_ending(sig)) {
		r = ending_sigaction(sig, act != NULL ? &new_action : NULL, &prev);
	} else if (atomic_load_explicit(&own.masks_taken, memory_order_relaxed)) {
		r = kernel_set_app(sig, act != NULL ? &new_action : NULL, &prev);
	} else {
		r = prim_sys_sigaction(sig, act != NULL ? &new_action : NULL, &prev);
	}
	e = errno;
	unlock_dispositions(&saved);
	if (r != 0) {
		errno = e;
		return r;
	}
	if (old != NULL)
		*old = prev;
	return 0;
}
