/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * no_userfaultfd -- run a command on which userfaultfd(2) fails, as on a
 * kernel built without it (ENOSYS, the default) or under a seccomp policy
 * that forbids it (--eperm).  A seccomp filter, inherited by every child and
 * across exec, so the whole test suite can run as on such a machine:
 *
 *   meson test -C build --wrapper "$PWD/build/tests/no_userfaultfd"
 *
 * shows the uffd halves of the split tests as SKIP and the runtime's auto
 * choice falling back to mprotect.  A test tool; not installed.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "no_userfaultfd: add this architecture's AUDIT_ARCH_ constant"
#endif

int main(int argc, char **argv)
{
	int err = ENOSYS, first = 1;
	if (argc > 1 && strcmp(argv[1], "--eperm") == 0) {
		err = EPERM;
		first = 2;
	}
	if (first >= argc) {
		fprintf(stderr, "usage: no_userfaultfd [--eperm] COMMAND [ARG...]\n");
		return 2;
	}
	struct sock_filter filter[] = {
		/* Another architecture's system call numbers mean other calls. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };
	/* Needed to install a filter without CAP_SYS_ADMIN. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		perror("no_userfaultfd: cannot install the seccomp filter");
		return 2;
	}
	execvp(argv[first], argv + first);
	fprintf(stderr, "no_userfaultfd: cannot run %s: %s\n", argv[first], strerror(errno));
	return 127;
}
