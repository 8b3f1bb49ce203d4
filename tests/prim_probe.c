/* SPDX-License-Identifier: BSD-3-Clause */
/* prim_probe -- see prim_probe.h. */
#include "prim_probe.h"

#include "prim/prim.h"

#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static sigjmp_buf back;
static volatile sig_atomic_t seen;
static volatile sig_atomic_t seen_usr1;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	seen = (sig_atomic_t)prim_fault_access(si, uc);
	sigset_t m;
	prim_interrupted_sigmask(uc, &m);
	seen_usr1 = sigismember(&m, SIGUSR1) == 1;
	siglongjmp(back, 1);
}

static const char *name(int a)
{
	switch (a) {
	case PRIM_FAULT_READ: return "read";
	case PRIM_FAULT_WRITE: return "write";
	case PRIM_FAULT_EXEC: return "exec";
	default: return "unknown";
	}
}

const char *probe_fault(enum probe_access what, int *usr1_blocked)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	int prot = what == PROBE_READ ? PROT_NONE : what == PROBE_WRITE ? PROT_READ
									  : PROT_READ | PROT_WRITE;
	void *page = mmap(NULL, ps, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return "mmap failed";
	struct sigaction sa, saved;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &saved);
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, &old);

	const char *result = "none";
	seen_usr1 = 0;
	if (sigsetjmp(back, 1) == 0) {
		volatile unsigned char *p = page;
		if (what == PROBE_READ)
			(void)p[8];
		else if (what == PROBE_WRITE)
			p[8] = 1;
		else
			((void (*)(void))page)();
	} else {
		result = name(seen);
	}
	*usr1_blocked = seen_usr1;
	sigprocmask(SIG_SETMASK, &old, NULL);
	sigaction(SIGSEGV, &saved, NULL);
	munmap(page, ps);
	return result;
}

int probe_replace_file(const char *path, const char *text, char *tmp, size_t tmp_len,
		       const char **failed)
{
	static const char *const names[] = {
		[PRIM_REPLACE_NAME] = "name",
		[PRIM_REPLACE_CREATE] = "create",
		[PRIM_REPLACE_WRITE] = "write",
		[PRIM_REPLACE_RENAME] = "rename",
	};
	enum prim_replace_step step;
	int r = prim_replace_file(path, text, strlen(text), tmp, tmp_len, &step);
	*failed = r == 0 ? "" : names[step];
	return r;
}
