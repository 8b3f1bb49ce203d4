/* SPDX-License-Identifier: BSD-3-Clause */
/* maxrss COMMAND [ARGS...]: runs COMMAND with standard output and error to
 * /dev/null, prints its peak resident set in KiB on standard output, and
 * exits with its status (128 + the signal when killed).
 *
 * Why a program of its own: Linux carries a process's peak resident set
 * across exec, so a command forked straight from a large test process
 * reports the test's size (under AddressSanitizer, 170 MiB).  Forked from
 * this small image, the command's peak is its own. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: maxrss COMMAND [ARGS...]\n");
		return 2;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("maxrss: fork");
		return 2;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execv(argv[1], argv + 1);
		_exit(127);
	}
	int st = 0;
	struct rusage ru = { 0 };
	if (wait4(pid, &st, 0, &ru) != pid) {
		perror("maxrss: wait4");
		return 2;
	}
	printf("%ld\n", ru.ru_maxrss);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
