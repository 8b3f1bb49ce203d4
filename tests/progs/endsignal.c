/* SPDX-License-Identifier: BSD-3-Clause */
/* For the ending signals (pmthreads(7) "Ending"): a counter in the persistent
 * heap (nvrecover "endsignal"), counted up by a worker thread, one lock per
 * step, while the main thread waits in pthread_join -- where a signal sent to
 * the process is delivered.  Never linked with pmthreads: the API is weak and
 * used when the library is preloaded.
 *
 * Prints, first, "start COUNT crashed C" (C: pmthreads_crashed(), -1 without
 * the library), "dfl TERM INT HUP USR1" (1 for each signal whose disposition
 * sigaction reports as SIG_DFL), "child TERM-DFL STATUS" (a fork child's view
 * of SIGTERM and the signal it died of when it raised SIGTERM), then
 * "count N" after every 100th step.  The last N printed before a signal was
 * counted before it.
 *
 * argv[1] "handler": installs a SIGTERM handler first; the program then ends
 * by it with status 3 after printing "handled N".  "infase": the main thread
 * holds a lock of its own while it waits, so a signal it receives finds it
 * inside a FASE. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma weak nvrecover
#pragma weak nvmalloc
#pragma weak pmthreads_crashed
void *nvrecover(void *dest, size_t size, const char *name);
void *nvmalloc(size_t size, const char *name);
_Bool pmthreads_crashed(void);

struct state {
	long count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static struct state *st;
static atomic_bool handled;

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&handled, 1);
}

static int is_dfl(int sig)
{
	struct sigaction old;
	return sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
	       !(old.sa_flags & SA_SIGINFO);
}

static void *work(void *arg)
{
	(void)arg;
	for (long i = 1;; i++) {
		pthread_mutex_lock(&lock);
		long c = ++st->count;
		pthread_mutex_unlock(&lock);
		if (i % 100 == 0) {
			printf("count %ld\n", c);
			fflush(stdout);
		}
		if (atomic_load(&handled)) {
			printf("handled %ld\n", c);
			fflush(stdout);
			exit(3);
		}
		usleep(100);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "handler") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_term;
		sigaction(SIGTERM, &sa, NULL);
	}
	if (nvrecover != NULL) {
		st = nvrecover(NULL, sizeof(*st), "endsignal");
		if (st == NULL) {
			st = nvmalloc(sizeof(*st), "endsignal");
			if (st != NULL)
				memset(st, 0, sizeof(*st));	/* before any epoch */
		}
	} else {
		st = calloc(1, sizeof(*st));
	}
	if (st == NULL)
		return 1;
	printf("start %ld crashed %d\n", st->count,
	       pmthreads_crashed != NULL ? (int)pmthreads_crashed() : -1);
	printf("dfl %d %d %d %d\n", is_dfl(SIGTERM), is_dfl(SIGINT), is_dfl(SIGHUP), is_dfl(SIGUSR1));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int dfl = is_dfl(SIGTERM);
		/* Through the pipe the parent reads: the status says the rest. */
		raise(SIGTERM);
		_exit(dfl ? 100 : 101);
	}
	int ws = 0;
	waitpid(pid, &ws, 0);
	printf("child %d %d\n", WIFEXITED(ws) ? WEXITSTATUS(ws) : 0,
	       WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
	fflush(stdout);
	if (argc > 1 && strcmp(argv[1], "infase") == 0)
		pthread_mutex_lock(&held);
	pthread_t th;
	if (pthread_create(&th, NULL, work, NULL) != 0)
		return 1;
	pthread_join(th, NULL);
	return 0;
}
