/* SPDX-License-Identifier: BSD-3-Clause */
/* mlockall locks what the program has mapped (issue 33; the Open POSIX Test
 * Suite's mlockall/3-6, 3-7 and 8-1).  The kernel's MCL_CURRENT faults every
 * mapping in and locks it: with the persistent heap's reserve and the pool
 * mapped (the tests run a 256 MiB pool) it pinned all of both.  Here, with
 * CAP_IPC_LOCK (no RLIMIT_MEMLOCK applies): mlockall(MCL_CURRENT) succeeds,
 * leaves errno alone, locks a shared mapping (msync MS_INVALIDATE fails with
 * EBUSY) and locks less than 64 MiB in all; with MCL_FUTURE a 64 MiB malloc
 * is locked too (the heap grows into its reserve, mapped long before); munlockall unlocks all.  Prints what it saw; the runtime
 * must not change a line.  Without CAP_IPC_LOCK it says "skip" (the limit,
 * which an unprivileged process cannot raise, then bounds it). */
#include <errno.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SOME (64ul << 20)
#define GROW (64ul << 20)

/* VmLck of /proc/self/status, in KiB. */
static long locked_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmLck: %ld", &v) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return v;
}

/* Whether the mapping holding addr is locked (smaps: "lo" in VmFlags). */
static int locked_at(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, lo = 0;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		unsigned long a, b;
		char c;
		if (sscanf(line, "%lx-%lx %c", &a, &b, &c) == 3 && strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)addr >= a && (uintptr_t)addr < b;
		else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			lo = strstr(line, " lo") != NULL;
			break;
		}
	}
	if (f != NULL)
		fclose(f);
	return lo;
}

static int has_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &h, d) != 0)
		return 0;
	return (d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

int main(void)
{
	if (!has_ipc_lock()) {
		printf("skip: no CAP_IPC_LOCK\n");
		return 0;
	}
	long page = sysconf(_SC_PAGESIZE);
	char *shared = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			    -1, 0);
	if (shared == MAP_FAILED)
		return 2;
	shared[0] = 1;

	errno = 0;
	int r = mlockall(MCL_CURRENT);
	int e = errno;
	printf("mlockall(MCL_CURRENT): %d, errno %s\n", r, e == 0 ? "untouched" : strerror(e));
	long cur = locked_kib();
	printf("locked: some %s, less than %lu MiB %s\n", cur > 0 ? "yes" : "no", SOME >> 20,
	       cur > 0 && (unsigned long)cur * 1024 < SOME ? "yes" : "no");
	errno = 0;
	r = msync(shared, (size_t)page, MS_SYNC | MS_INVALIDATE);
	printf("a shared mapping is locked (msync EBUSY): %s\n",
	       r == -1 && errno == EBUSY ? "yes" : "no");

	r = mlockall(MCL_CURRENT | MCL_FUTURE);
	char *grown = malloc(GROW);
	if (grown == NULL)
		return 2;
	memset(grown, 1, GROW);
	printf("mlockall(MCL_CURRENT | MCL_FUTURE): %d; a %lu MiB malloc is locked: %s\n", r,
	       GROW >> 20, locked_at(grown) && locked_at(grown + GROW - 1) ? "yes" : "no");

	r = munlockall();
	printf("munlockall: %d, locked after it %ld KiB\n", r, locked_kib());
	free(grown);
	return 0;
}
