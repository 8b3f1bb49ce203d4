/* SPDX-License-Identifier: BSD-3-Clause */
/* The fixtures of syscall_outputs_test (generated from
 * lib/runtime/syscall_outputs.tab): what a test: of the table may call to
 * make the call's inputs, and the driver.
 *
 * Each case gets its own page OUT of one heap block (nvmalloc'd when the
 * preload runs in its nvmalloc mode, malloc'd otherwise), every page written
 * once and then left for a few epochs, so that under the mprotect tracker
 * each is write-protected when the kernel writes into it.  In-values a call
 * needs (lengths, message headers, iovecs) go to another heap block, written
 * just before the call as a program would.  Prints one line per case: its
 * name and "ok", or its result and errno -- timing-independent, the same
 * natively and under the preload. */
#ifndef PMT_SYSCALL_OUTPUTS_FIXTURES_H
#define PMT_SYSCALL_OUTPUTS_FIXTURES_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/sendfile.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/times.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* glibc's, declared by libcap's header only. */
int capget(cap_user_header_t hdr, cap_user_data_t data);

/* The runtime's, when the preload defines it (nvmalloc mode). */
#pragma weak nvmalloc
void *nvmalloc(size_t size, const char *name);

#define PAGE 4096

static char *arg_area;	/* in-values, in the heap */
static size_t arg_used;

static void *arg_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (arg_used + n > 2 * PAGE) {
		fprintf(stderr, "syscall_outputs_test: argument area full\n");
		exit(2);
	}
	void *p = arg_area + arg_used;
	arg_used += n;
	memset(p, 0, n);
	return p;
}

static void fail(const char *what)
{
	perror(what);
	exit(2);
}

/* ---- inputs ---- */

static int fd_zero(void)
{
	return open("/dev/zero", O_RDONLY | O_CLOEXEC);
}

static int fd_null(void)
{
	return open("/dev/null", O_WRONLY | O_CLOEXEC);
}

/* A regular file of 64 bytes, unlinked. */
static int fd_zero_file(void)
{
	char path[] = "/tmp/pmt-sysout-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		fail("mkstemp");
	unlink(path);
	char buf[64];
	memset(buf, 'z', sizeof(buf));
	if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		fail("write");
	return fd;
}

static int fd_tmp(void)
{
	char path[] = "/tmp/pmt-sysout-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		fail("mkstemp");
	unlink(path);
	return fd;
}

static int dir_fd(void)
{
	return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static socklen_t *len_of(socklen_t n)
{
	socklen_t *p = arg_alloc(sizeof(*p));
	*p = n;
	return p;
}

static loff_t *off_zero(void)
{
	return arg_alloc(sizeof(loff_t));
}

static struct iovec *iov1(char *buf)
{
	struct iovec *v = arg_alloc(sizeof(*v));
	v->iov_base = buf;
	v->iov_len = 64;
	return v;
}

static const char self_data[64] = "the bytes process_vm_readv copies from this process";

static struct iovec *iov_self(void)
{
	struct iovec *v = arg_alloc(sizeof(*v));
	v->iov_base = (void *)self_data;
	v->iov_len = sizeof(self_data);
	return v;
}

static void fill_msg(struct msghdr *m, char *out)
{
	struct iovec *v = iov1(out);
	m->msg_iov = v;
	m->msg_iovlen = 1;
	m->msg_name = out + 2048;
	m->msg_namelen = 128;
	m->msg_control = out + 3072;
	m->msg_controllen = 512;
}

static struct msghdr *msg_in(char *out)
{
	struct msghdr *m = arg_alloc(sizeof(*m));
	fill_msg(m, out);
	return m;
}

static struct mmsghdr *mmsg_in(char *out)
{
	struct mmsghdr *m = arg_alloc(sizeof(*m));
	fill_msg(&m->msg_hdr, out);
	return m;
}

static struct mmsghdr *mmsg_out(void)
{
	struct mmsghdr *m = arg_alloc(sizeof(*m));
	struct iovec *v = arg_alloc(sizeof(*v));
	v->iov_base = (void *)self_data;
	v->iov_len = 8;
	m->msg_hdr.msg_iov = v;
	m->msg_hdr.msg_iovlen = 1;
	return m;
}

/* The receiving end of a datagram pair with one datagram (and credentials
 * as ancillary data) waiting. */
static int sock_ready(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0)
		fail("socketpair");
	int on = 1;
	setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
	if (send(sv[1], "datagram", 8, 0) != 8)
		fail("send");
	close(sv[1]);
	return sv[0];
}

static int sock_sender(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0)
		fail("socketpair");
	return sv[1];
}

static int sock_dgram(void)
{
	return socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

/* A loopback listener with one connection waiting to be accepted. */
static int listener_ready(void)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) != 0)
		fail("listener");
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) != 0)
		fail("connect");
	return l;
}

static int pipe_w(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		fail("pipe");
	return p[1];
}

static int pipe_r_filled(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		fail("pipe");
	if (write(p[1], self_data, sizeof(self_data)) != (ssize_t)sizeof(self_data))
		fail("write");
	return p[0];
}

static int pty_fd(void)
{
	int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		fail("posix_openpt");
	return fd;
}

static int epoll_fd(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), ev = eventfd(1, EFD_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN };
	if (ep < 0 || ev < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0)
		fail("epoll");
	return ep;
}

static int timer_fd(void)
{
	return timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
}

static timer_t posix_timer(void)
{
	static timer_t t;
	static int made;
	if (!made) {
		struct sigevent ev = { .sigev_notify = SIGEV_NONE };
		if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0)
			fail("timer_create");
		made = 1;
	}
	return t;
}

static const struct timespec *ts_zero(void)
{
	return arg_alloc(sizeof(struct timespec));
}

static const struct itimerval *itimer_zero(void)
{
	return arg_alloc(sizeof(struct itimerval));
}

static const struct itimerspec *itspec_zero(void)
{
	return arg_alloc(sizeof(struct itimerspec));
}

static struct pollfd *pollfd_in(void)
{
	struct pollfd *p = arg_alloc(sizeof(*p));
	p->fd = pipe_r_filled();
	p->events = POLLIN;
	return p;
}

static cap_user_header_t cap_header(void)
{
	cap_user_header_t h = arg_alloc(sizeof(*h));
	h->version = _LINUX_CAPABILITY_VERSION_3;
	return h;
}

/* SIGUSR2 blocked and pending: a sigtimedwait for it returns at once. */
static const sigset_t *sigset_usr2(void)
{
	sigset_t *s = arg_alloc(sizeof(*s));
	sigemptyset(s);
	sigaddset(s, SIGUSR2);
	sigprocmask(SIG_BLOCK, s, NULL);
	raise(SIGUSR2);
	return s;
}

/* A child that has exited (a zombie until waited for). */
static pid_t child_exited(void)
{
	pid_t pid = fork();
	if (pid < 0)
		fail("fork");
	if (pid == 0)
		_exit(3);
	siginfo_t si;
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) != 0)
		fail("waitid");
	return pid;
}

static int msgq;

static int msgq_ready(void)
{
	if (msgq <= 0) {
		msgq = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
		if (msgq < 0)
			return -1;
	}
	struct {
		long type;
		char text[8];
	} m = { 1, "message" };
	msgsnd(msgq, &m, sizeof(m.text), IPC_NOWAIT);
	return msgq;
}

static char mq_name[64];

static mqd_t mq_ready(void)
{
	if (mq_name[0] == '\0')
		snprintf(mq_name, sizeof(mq_name), "/pmt-sysout-%d", (int)getpid());
	struct mq_attr a = { .mq_maxmsg = 4, .mq_msgsize = 64 };
	mqd_t q = mq_open(mq_name, O_RDWR | O_CREAT | O_CLOEXEC, 0600, &a);
	if (q != (mqd_t)-1)
		mq_send(q, "message", 8, 1);
	return q;
}

static void *page_base(void)
{
	return arg_area;
}

/* ---- after a call ---- */

static void close_pair(const char *out)
{
	const int *fds = (const int *)out;
	close(fds[0]);
	close(fds[1]);
}

static void close_ret(long r)
{
	if (r >= 0)
		close((int)r);
}

static void aio_ctx_done(const char *out)
{
	unsigned long ctx = *(const unsigned long *)out;
	if (ctx != 0)
		syscall(SYS_io_destroy, ctx);
}

/* ---- the driver ---- */

static void report(const char *name, long r)
{
	if (r >= 0)
		printf("%s: ok\n", name);
	else
		printf("%s: %ld, errno %d\n", name, r, errno);
	fflush(stdout);
}

static void pause_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) != 0)
		;
}

static int run_all(int cases, void (*run_case)(int, char *))
{
	/* Two pages a case: the mprotect tracker opens the pages after one
	 * written in order, and no case's page may follow another's. */
	size_t bytes = ((size_t)cases * 2 + 1) * PAGE;
	const char *heap = getenv("PMTHREADS_HEAP");
	int nv = nvmalloc != NULL && (heap == NULL || strcmp(heap, "malloc") != 0);
	char *block = nv ? nvmalloc(bytes, "syscall_outputs") : malloc(bytes);
	char *args = nv ? nvmalloc(3 * PAGE, "syscall_outputs_args") : malloc(3 * PAGE);
	if (block == NULL || args == NULL)
		fail("allocating the pages");
	char *pages = (char *)(((uintptr_t)block + PAGE - 1) & ~(uintptr_t)(PAGE - 1));
	arg_area = (char *)(((uintptr_t)args + PAGE - 1) & ~(uintptr_t)(PAGE - 1));
	memset(pages, 0, (size_t)cases * 2 * PAGE);
	/* Epochs every 10 ms in the test: each page clean, so protected
	 * under the mprotect tracker. */
	pause_ms(60);
	for (int i = 0; i < cases; i++) {
		arg_used = 0;
		run_case(i, pages + (size_t)i * 2 * PAGE);
	}
	if (msgq > 0)
		msgctl(msgq, IPC_RMID, NULL);
	if (mq_name[0] != '\0')
		mq_unlink(mq_name);
	return 0;
}

#endif
