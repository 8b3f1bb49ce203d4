/* SPDX-License-Identifier: BSD-3-Clause */
/* Calls the old GLIBC_2.2.5 versions of pthread_cond_wait/timedwait, as a
 * binary built against glibc 2.2 does.  A waiter sleeps in the old wait for
 * WAIT_MS while holding nothing else; under pmthreads the wait must count as
 * a release of its mutex (no epoch may be abandoned because of it).  Prints
 * what it saw. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#define WAIT_MS 300

__asm__(".symver old_cond_wait, pthread_cond_wait@GLIBC_2.2.5");
__asm__(".symver old_cond_timedwait, pthread_cond_timedwait@GLIBC_2.2.5");
__asm__(".symver old_cond_signal, pthread_cond_signal@GLIBC_2.2.5");
__asm__(".symver old_cond_init, pthread_cond_init@GLIBC_2.2.5");
int old_cond_wait(pthread_cond_t *, pthread_mutex_t *);
int old_cond_timedwait(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
int old_cond_signal(pthread_cond_t *);
int old_cond_init(pthread_cond_t *, const pthread_condattr_t *);

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int ready;

static void *signaller(void *arg)
{
	struct timespec t = { 0, WAIT_MS * 1000000L };
	nanosleep(&t, NULL);
	pthread_mutex_lock(&m);
	ready = 1;
	old_cond_signal(&cv);
	pthread_mutex_unlock(&m);
	return arg;
}

int main(void)
{
	old_cond_init(&cv, NULL);
	pthread_t s;
	pthread_create(&s, NULL, signaller, NULL);
	pthread_mutex_lock(&m);
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 50000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	int r = old_cond_timedwait(&cv, &m, &t);
	printf("old timedwait: %s\n", r == ETIMEDOUT ? "timed out" : r == 0 ? "woken" : "error");
	while (!ready)
		old_cond_wait(&cv, &m);
	pthread_mutex_unlock(&m);
	pthread_join(s, NULL);
	printf("old wait: woken\n");
	return 0;
}
