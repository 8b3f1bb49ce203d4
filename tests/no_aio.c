/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * no_aio -- run a command without Linux AIO: io_setup(2) fails with ENOSYS,
 * as on a kernel built without it (the default), or io_setup works and
 * io_submit(2) fails with EPERM, as under a seccomp policy that lets a
 * context be made but no write be queued (--submit).  A seccomp filter,
 * inherited by every child and across exec.  The log backend then writes
 * its whole pages synchronously (lib/persist/nvm_log_direct.c).  A test
 * tool; not installed.
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
#error "no_aio: add this architecture's AUDIT_ARCH_ constant"
#endif

int main(int argc, char **argv)
{
	unsigned nr = __NR_io_setup, err = ENOSYS;
	int first = 1;
	if (argc > 1 && strcmp(argv[1], "--submit") == 0) {
		nr = __NR_io_submit;
		err = EPERM;
		first = 2;
	}
	if (first >= argc) {
		fprintf(stderr, "usage: no_aio [--submit] COMMAND [ARG...]\n");
		return 2;
	}
	struct sock_filter filter[] = {
		/* Another architecture's system call numbers mean other calls. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };
	/* Needed to install a filter without CAP_SYS_ADMIN. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		perror("no_aio: cannot install the seccomp filter");
		return 2;
	}
	execvp(argv[first], argv + first);
	fprintf(stderr, "no_aio: cannot run %s: %s\n", argv[first], strerror(errno));
	return 127;
}
