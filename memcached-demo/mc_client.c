/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mc_client -- a small memcached text-protocol client for the pmthreads demo.
 *
 *   mc_client load   HOST PORT ROUND N VMIN VMAX ACKLOG
 *       set keys r<ROUND>-<i>, i = 0..N-1, one at a time, each to a value that
 *       is a function of (ROUND, i); after each STORED append "i ack_ns" to
 *       ACKLOG (CLOCK_REALTIME, flushed per line).  Stops quietly when the
 *       server goes away (that is the point of the crash test).
 *   mc_client verify HOST PORT ROUND N VMIN VMAX ACKLOG CUTOFF_NS
 *       get every key of the round: a key acknowledged before CUTOFF_NS must
 *       be there with its value; any key that is there must have its value.
 *       Prints counts, the ack time of the oldest acknowledged key that is
 *       missing (0: none) and of the newest acknowledgement; exit 0 when both
 *       hold, 1 otherwise.
 *   mc_client bench  HOST PORT CONNS SECONDS KEYS VSIZE SET_PERCENT [PROTO]
 *       closed-loop load: CONNS threads with one connection each, random keys
 *       of KEYS (prefilled first, pipelined), values of VSIZE bytes,
 *       SET_PERCENT % sets, the rest gets; every value a get returns is
 *       checked.  PROTO: memcache (the text protocol, default) or redis (RESP:
 *       SET and GET), so that memcached and Redis get the same load.  Latency
 *       is per request, from the send of its first byte to the last byte of
 *       its reply.  The measured window starts once every connection has
 *       prefilled its keys, at the earliest a grace period after the start:
 *       1 s + 20 us per key, or MC_GRACE_MS (environment) ms.  Prints one CSV
 *       line:
 *       ops,seconds,ops_per_sec,get_hits,get_misses,p50_us,p99_us,max_us
 *
 * Every socket has a 10 s timeout so that nothing waits forever.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define KEYMAX 64

struct conn {
	int fd;
	size_t lo, hi;
	char buf[1 << 16];
};

static void die(const char *msg)
{
	fprintf(stderr, "mc_client: %s\n", msg);
	exit(2);
}

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Returns 0, or -1 when the server cannot be reached. */
static int conn_open(struct conn *c, const char *host, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct timeval tv = { .tv_sec = 10 };
	int one = 1;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		die("HOST must be an IPv4 address");
	c->lo = c->hi = 0;
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (c->fd < 0)
		die("socket failed");
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(c->fd);
		return -1;
	}
	return 0;
}

static int send_all(struct conn *c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int fill(struct conn *c)
{
	if (c->lo > 0) {
		memmove(c->buf, c->buf + c->lo, c->hi - c->lo);
		c->hi -= c->lo;
		c->lo = 0;
	}
	if (c->hi == sizeof(c->buf))
		return -1;
	for (;;) {
		ssize_t r = recv(c->fd, c->buf + c->hi, sizeof(c->buf) - c->hi, 0);
		if (r > 0) {
			c->hi += (size_t)r;
			return 0;
		}
		if (r < 0 && errno == EINTR)
			continue;
		return -1;
	}
}

/* A line without its "\r\n", NUL-terminated, valid until the next read. */
static char *read_line(struct conn *c)
{
	for (;;) {
		char *s = c->buf + c->lo;
		char *e = memmem(s, c->hi - c->lo, "\r\n", 2);
		if (e != NULL) {
			*e = '\0';
			c->lo = (size_t)(e + 2 - c->buf);
			return s;
		}
		if (fill(c) != 0)
			return NULL;
	}
}

/* n bytes into dst (dst may be NULL to skip them). */
static int read_n(struct conn *c, char *dst, size_t n)
{
	while (n > 0) {
		if (c->lo == c->hi && fill(c) != 0)
			return -1;
		size_t k = c->hi - c->lo < n ? c->hi - c->lo : n;
		if (dst != NULL) {
			memcpy(dst, c->buf + c->lo, k);
			dst += k;
		}
		c->lo += k;
		n -= k;
	}
	return 0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* The value of key i of a round: its length and bytes are a function of both. */
static size_t value_of(unsigned round, unsigned long i, size_t vmin, size_t vmax, char *out)
{
	uint64_t h = mix(((uint64_t)round << 40) ^ i ^ 0x9e3779b97f4a7c15ULL);
	size_t len = vmin + (size_t)(h % (vmax - vmin + 1));
	static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	for (size_t j = 0; j < len; j++) {
		if (j % 8 == 0)
			h = mix(h + j);
		out[j] = digits[(h >> (8 * (j % 8))) % 36];
	}
	return len;
}

enum proto { PROTO_MEMCACHE, PROTO_REDIS };

/* A set request in one buffer, so that it leaves in one segment (TCP_NODELAY
 * would otherwise send the header, value and "\r\n" as three).  dst holds
 * KEYMAX + 64 + len bytes. */
static size_t req_set(enum proto p, char *dst, const char *key, const char *val, size_t len)
{
	int n;
	if (p == PROTO_REDIS)
		n = sprintf(dst, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(key), key, len);
	else
		n = sprintf(dst, "set %s 0 0 %zu\r\n", key, len);
	memcpy(dst + n, val, len);
	memcpy(dst + n + len, "\r\n", 2);
	return (size_t)n + len + 2;
}

/* The reply to a set: 1 stored, 0 refused, -1 connection lost. */
static int reply_set(enum proto p, struct conn *c)
{
	char *l = read_line(c);
	if (l == NULL)
		return -1;
	return strcmp(l, p == PROTO_REDIS ? "+OK" : "STORED") == 0 ? 1 : 0;
}

static size_t req_get(enum proto p, char *dst, const char *key)
{
	if (p == PROTO_REDIS)
		return (size_t)sprintf(dst, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
	return (size_t)sprintf(dst, "get %s\r\n", key);
}

/* The reply to a get of one key, whose value (if any) must be want[0..wlen):
 * 1 hit, 0 miss, -1 connection lost or a wrong reply.  got holds wlen + 2. */
static int reply_get(enum proto p, struct conn *c, const char *want, size_t wlen, char *got)
{
	char *l = read_line(c);
	size_t len;
	if (l == NULL)
		return -1;
	if (p == PROTO_REDIS) {
		if (strcmp(l, "$-1") == 0)
			return 0;
		if (sscanf(l, "$%zu", &len) != 1)
			return -1;
	} else {
		if (strcmp(l, "END") == 0)
			return 0;
		if (sscanf(l, "VALUE %*s %*u %zu", &len) != 1)
			return -1;
	}
	if (len != wlen || read_n(c, got, len + 2) || memcmp(got, want, len) != 0 ||
	    memcmp(got + len, "\r\n", 2) != 0)
		return -1;
	if (p == PROTO_MEMCACHE && ((l = read_line(c)) == NULL || strcmp(l, "END") != 0))
		return -1;
	return 1;
}

static int set_key(struct conn *c, const char *key, const char *val, size_t len)
{
	char *req = malloc(KEYMAX + 64 + len);
	int r = -1;
	if (req == NULL)
		die("out of memory");
	if (send_all(c, req, req_set(PROTO_MEMCACHE, req, key, val, len)) == 0)
		r = reply_set(PROTO_MEMCACHE, c);
	free(req);
	return r;
}

static unsigned long parse_ul(const char *s, const char *what)
{
	char *e;
	errno = 0;
	unsigned long v = strtoul(s, &e, 10);
	if (errno || *e || e == s) {
		fprintf(stderr, "mc_client: bad %s: %s\n", what, s);
		exit(2);
	}
	return v;
}

/* ---- load ---- */
static int cmd_load(char **a)
{
	const char *host = a[0];
	int port = (int)parse_ul(a[1], "PORT");
	unsigned round = (unsigned)parse_ul(a[2], "ROUND");
	unsigned long n = parse_ul(a[3], "N");
	size_t vmin = parse_ul(a[4], "VMIN"), vmax = parse_ul(a[5], "VMAX");
	FILE *log = fopen(a[6], "a");
	struct conn *c = malloc(sizeof(*c));
	char *val = malloc(vmax + 1), key[KEYMAX];
	unsigned long i, acked = 0;

	if (log == NULL || c == NULL || val == NULL || vmin < 1 || vmax < vmin)
		die("load: cannot open ACKLOG or bad sizes");
	if (conn_open(c, host, port) != 0)
		die("load: cannot connect");
	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "r%u-%lu", round, i);
		size_t len = value_of(round, i, vmin, vmax, val);
		int r = set_key(c, key, val, len);
		if (r < 0)
			break; /* the server went away */
		if (r == 1) {
			fprintf(log, "%lu %" PRIu64 "\n", i, now_ns(CLOCK_REALTIME));
			fflush(log);
			acked++;
		}
	}
	fprintf(stderr, "mc_client load: round %u: %lu of %lu sets acknowledged%s\n", round, acked,
		n, i < n ? " (server went away)" : "");
	fclose(log);
	close(c->fd);
	free(c);
	free(val);
	return 0;
}

/* ---- verify ---- */
static int cmd_verify(char **a)
{
	const char *host = a[0];
	int port = (int)parse_ul(a[1], "PORT");
	unsigned round = (unsigned)parse_ul(a[2], "ROUND");
	unsigned long n = parse_ul(a[3], "N");
	size_t vmin = parse_ul(a[4], "VMIN"), vmax = parse_ul(a[5], "VMAX");
	FILE *log = fopen(a[6], "r");
	uint64_t cutoff = strtoull(a[7], NULL, 10);
	uint64_t *ack = calloc(n, sizeof(*ack));
	char *want = malloc(vmax + 1), *got = malloc(vmax + 3);
	struct conn *c = malloc(sizeof(*c));
	unsigned long required = 0, missing = 0, wrong = 0, present = 0, unacked_present = 0;
	unsigned long acked_total = 0, recent_missing = 0;
	uint64_t oldest_lost = 0, last_ack = 0;
	unsigned long i, idx;
	uint64_t t;

	if (log == NULL || ack == NULL || want == NULL || got == NULL || c == NULL)
		die("verify: cannot read ACKLOG");
	while (fscanf(log, "%lu %" SCNu64, &idx, &t) == 2)
		if (idx < n) {
			ack[idx] = t;
			acked_total++;
		}
	fclose(log);
	if (conn_open(c, host, port) != 0)
		die("verify: cannot connect");

	char *seen = calloc(n, 1);
	for (i = 0; i < n; i += 64) {
		char req[64 * (KEYMAX + 1) + 16];
		size_t off = 0;
		unsigned long j, end = i + 64 < n ? i + 64 : n;
		off += (size_t)sprintf(req + off, "get");
		for (j = i; j < end; j++)
			off += (size_t)sprintf(req + off, " r%u-%lu", round, j);
		off += (size_t)sprintf(req + off, "\r\n");
		if (send_all(c, req, off) != 0)
			die("verify: send failed");
		for (;;) {
			char *l = read_line(c), k[KEYMAX + 1];
			unsigned flags, r;
			unsigned long id;
			size_t len;
			if (l == NULL)
				die("verify: connection lost");
			if (strcmp(l, "END") == 0)
				break;
			if (sscanf(l, "VALUE %64s %u %zu", k, &flags, &len) != 3 ||
			    sscanf(k, "r%u-%lu", &r, &id) != 2 || r != round || id >= n || len > vmax) {
				fprintf(stderr, "verify: unexpected reply: %s\n", l);
				die("verify: protocol error");
			}
			if (read_n(c, got, len + 2) != 0)
				die("verify: connection lost");
			seen[id] = 1;
			present++;
			if (!ack[id])
				unacked_present++;
			size_t wl = value_of(round, id, vmin, vmax, want);
			if (wl != len || memcmp(want, got, len) != 0) {
				if (wrong < 10)
					fprintf(stderr, "WRONG value for %s (%zu bytes, want %zu)\n", k, len, wl);
				wrong++;
			}
		}
	}
	for (i = 0; i < n; i++) {
		if (!ack[i])
			continue;
		if (ack[i] < cutoff) {
			required++;
			if (!seen[i]) {
				if (missing < 10)
					fprintf(stderr, "MISSING r%u-%lu (acked %.3f s before the kill)\n", round, i,
						(double)(cutoff - ack[i]) / 1e9);
				missing++;
			}
		} else if (!seen[i]) {
			recent_missing++;
		}
		if (!seen[i] && (oldest_lost == 0 || ack[i] < oldest_lost))
			oldest_lost = ack[i];
		if (ack[i] > last_ack)
			last_ack = ack[i];
	}
	printf("round=%u acked=%lu required=%lu present=%lu missing_required=%lu wrong=%lu "
	       "present_unacked=%lu lost_within_window=%lu oldest_lost_ack_ns=%" PRIu64
	       " last_ack_ns=%" PRIu64 "\n",
	       round, acked_total, required, present, missing, wrong, unacked_present, recent_missing,
	       oldest_lost, last_ack);
	close(c->fd);
	free(c);
	free(seen);
	free(ack);
	free(want);
	free(got);
	return (missing == 0 && wrong == 0) ? 0 : 1;
}

/* ---- bench ---- */
/* Latency histogram: 1 us buckets up to 100 ms (what memcached's replies
 * take), then 1 ms buckets up to 10 s (replies that wait for an fsync or an
 * msync on a busy disk); slower ones count as 10 s. */
#define HIST_FINE 100000
#define HIST_BUCKETS (HIST_FINE + 9900)

static size_t hist_bucket(uint64_t us)
{
	if (us < HIST_FINE)
		return (size_t)us;
	us = HIST_FINE + (us - HIST_FINE) / 1000;
	return us < HIST_BUCKETS ? (size_t)us : HIST_BUCKETS - 1;
}

/* The upper bound of bucket k, in us. */
static uint64_t hist_upper(size_t k)
{
	return k < HIST_FINE ? k + 1 : HIST_FINE + (k - HIST_FINE + 1) * 1000;
}
#define PREFILL_BATCH 64

struct bench {
	const char *host;
	int port, conns;
	unsigned long keys;
	size_t vsize;
	unsigned set_pct;
	enum proto proto;
	uint64_t planned_start, nsecs;
	pthread_barrier_t ready;
	uint64_t start, deadline; /* set by one worker between the two waits on ready */
};

struct worker {
	pthread_t tid;
	struct bench *b;
	int id;
	unsigned long first, last; /* prefill range [first, last) */
	unsigned long ops, hits, misses;
	uint32_t *hist;
	int failed, late;
};

/* Sets keys [first, last) in pipelined batches: fast even when every write
 * is synced (Redis with appendfsync always syncs once per batch). */
static int prefill(struct worker *w, struct conn *c, const char *val)
{
	struct bench *b = w->b;
	size_t per = KEYMAX + 64 + b->vsize;
	size_t batch = (256u << 10) / per;
	batch = batch < 1 ? 1 : batch > PREFILL_BATCH ? PREFILL_BATCH : batch;
	char *buf = malloc(batch * per), key[KEYMAX];
	int rc = 0;

	if (buf == NULL)
		return -1;
	for (unsigned long k = w->first; k < w->last && rc == 0; k += batch) {
		unsigned long end = k + batch < w->last ? k + batch : w->last;
		size_t off = 0;
		for (unsigned long j = k; j < end; j++) {
			snprintf(key, sizeof(key), "bench-%lu", j);
			off += req_set(b->proto, buf + off, key, val, b->vsize);
		}
		if (send_all(c, buf, off) != 0)
			rc = -1;
		for (unsigned long j = k; j < end && rc == 0; j++)
			if (reply_set(b->proto, c) != 1)
				rc = -1;
	}
	free(buf);
	return rc;
}

/* The measured window starts at the same instant for every worker: the
 * planned start, or when the last one finished its prefill if that is later. */
static void wait_start(struct worker *w)
{
	struct bench *b = w->b;
	if (pthread_barrier_wait(&b->ready) == PTHREAD_BARRIER_SERIAL_THREAD) {
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		b->start = now > b->planned_start ? now : b->planned_start;
		b->deadline = b->start + b->nsecs;
	}
	pthread_barrier_wait(&b->ready);
	if (b->start > b->planned_start)
		w->late = 1;
	while (now_ns(CLOCK_MONOTONIC) < b->start)
		usleep(200);
}

static void *bench_worker(void *arg)
{
	struct worker *w = arg;
	struct bench *b = w->b;
	struct conn *c = malloc(sizeof(*c));
	char *val = malloc(b->vsize), *got = malloc(b->vsize + 2), key[KEYMAX];
	char *req = malloc(KEYMAX + 64 + b->vsize);
	uint64_t rng = mix((uint64_t)w->id + 1);

	if (c == NULL || val == NULL || got == NULL || req == NULL ||
	    conn_open(c, b->host, b->port) != 0) {
		w->failed = 1;
		wait_start(w);
		free(c);
		free(val);
		free(got);
		free(req);
		return NULL;
	}
	/* every value the bench stores is vsize bytes of 'v' */
	memset(val, 'v', b->vsize);
	if (prefill(w, c, val) != 0)
		w->failed = 1;
	wait_start(w);
	while (!w->failed && now_ns(CLOCK_MONOTONIC) < b->deadline) {
		rng = mix(rng);
		snprintf(key, sizeof(key), "bench-%lu", (unsigned long)(rng % b->keys));
		int is_set = (rng >> 32) % 100 < b->set_pct, r;
		size_t n = is_set ? req_set(b->proto, req, key, val, b->vsize) : req_get(b->proto, req, key);
		uint64_t t0 = now_ns(CLOCK_MONOTONIC);
		if (send_all(c, req, n) != 0) {
			w->failed = 1;
			break;
		}
		if (is_set) {
			r = reply_set(b->proto, c);
			if (r != 1) {
				fprintf(stderr, "mc_client bench: set %s %s\n", key,
					r < 0 ? "lost its connection" : "was refused");
				w->failed = 1;
				break;
			}
		} else {
			r = reply_get(b->proto, c, val, b->vsize, got);
			if (r < 0) {
				fprintf(stderr, "mc_client bench: lost connection or wrong reply to get %s\n", key);
				w->failed = 1;
				break;
			}
			if (r == 1)
				w->hits++;
			else
				w->misses++;
		}
		uint64_t us = (now_ns(CLOCK_MONOTONIC) - t0) / 1000;
		w->hist[hist_bucket(us)]++;
		w->ops++;
	}
	close(c->fd);
	free(c);
	free(val);
	free(got);
	free(req);
	return NULL;
}

static int cmd_bench(char **a, const char *proto)
{
	struct bench b = {
		.host = a[0],
		.port = (int)parse_ul(a[1], "PORT"),
		.conns = (int)parse_ul(a[2], "CONNS"),
		.nsecs = (uint64_t)parse_ul(a[3], "SECONDS") * 1000000000ull,
		.keys = parse_ul(a[4], "KEYS"),
		.vsize = parse_ul(a[5], "VSIZE"),
		.set_pct = (unsigned)parse_ul(a[6], "SET_PERCENT"),
	};
	double secs = (double)b.nsecs / 1e9;
	unsigned long ops = 0, hits = 0, misses = 0;
	int failed = 0, late = 0;

	if (proto == NULL || strcmp(proto, "memcache") == 0)
		b.proto = PROTO_MEMCACHE;
	else if (strcmp(proto, "redis") == 0)
		b.proto = PROTO_REDIS;
	else
		die("bench: PROTO must be memcache or redis");
	if (b.conns < 1 || b.keys < 1 || b.vsize < 1 || b.set_pct > 100 || b.nsecs == 0)
		die("bench: bad arguments (CONNS, SECONDS, KEYS, VSIZE >= 1, SET_PERCENT <= 100)");
	struct worker *w = calloc((size_t)b.conns, sizeof(*w));
	uint64_t *hist = calloc(HIST_BUCKETS, sizeof(*hist));
	if (w == NULL || hist == NULL || pthread_barrier_init(&b.ready, NULL, (unsigned)b.conns) != 0)
		die("bench: out of memory");
	/* The grace period keeps the window's start predictable (bench.sh's
	 * report places epochs in it by this time) when the prefill is quick. */
	const char *grace = getenv("MC_GRACE_MS");
	b.planned_start = now_ns(CLOCK_MONOTONIC) +
			  (grace != NULL ? parse_ul(grace, "MC_GRACE_MS") * 1000000ull
					 : 1000000000ull + b.keys * 20000ull);
	for (int i = 0; i < b.conns; i++) {
		w[i] = (struct worker){ .b = &b, .id = i, .first = b.keys * (unsigned long)i / (unsigned long)b.conns,
					.last = b.keys * (unsigned long)(i + 1) / (unsigned long)b.conns,
					.hist = calloc(HIST_BUCKETS, sizeof(uint32_t)) };
		if (w[i].hist == NULL || pthread_create(&w[i].tid, NULL, bench_worker, &w[i]) != 0)
			die("bench: cannot start threads");
	}
	for (int i = 0; i < b.conns; i++) {
		pthread_join(w[i].tid, NULL);
		ops += w[i].ops;
		hits += w[i].hits;
		misses += w[i].misses;
		failed |= w[i].failed;
		late |= w[i].late;
		for (size_t k = 0; k < HIST_BUCKETS; k++)
			hist[k] += w[i].hist[k];
		free(w[i].hist);
	}
	free(w);
	pthread_barrier_destroy(&b.ready);
	/* max: the upper bound of the slowest reply's bucket */
	uint64_t acc = 0, p50 = 0, p99 = 0, max = 0;
	for (size_t k = 0; k < HIST_BUCKETS; k++) {
		if (hist[k])
			max = hist_upper(k);
		acc += hist[k];
		if (!p50 && acc * 2 >= ops && ops)
			p50 = hist_upper(k);
		if (!p99 && acc * 100 >= ops * 99 && ops)
			p99 = hist_upper(k);
	}
	printf("%lu,%.3f,%.1f,%lu,%lu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", ops, secs, ops / secs,
	       hits, misses, p50, p99, max);
	if (failed)
		fprintf(stderr, "mc_client bench: some connections failed\n");
	if (late && grace == NULL)
		fprintf(stderr, "mc_client bench: the prefill overran the grace period by %.3f s "
			"(the measured window started that much later)\n",
			(double)(b.start - b.planned_start) / 1e9);
	free(hist);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 9 && strcmp(argv[1], "load") == 0)
		return cmd_load(argv + 2);
	if (argc == 10 && strcmp(argv[1], "verify") == 0)
		return cmd_verify(argv + 2);
	if ((argc == 9 || argc == 10) && strcmp(argv[1], "bench") == 0)
		return cmd_bench(argv + 2, argc == 10 ? argv[9] : NULL);
	fprintf(stderr,
		"usage: mc_client load   HOST PORT ROUND N VMIN VMAX ACKLOG\n"
		"       mc_client verify HOST PORT ROUND N VMIN VMAX ACKLOG CUTOFF_NS\n"
		"       mc_client bench  HOST PORT CONNS SECONDS KEYS VSIZE SET_PERCENT [memcache|redis]\n");
	return 2;
}
