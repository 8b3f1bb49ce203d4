/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * persist_structs -- pointer-linked structures in the persistent heap, end to
 * end (tests/test_persist_e2e.cpp drives it).
 *
 *   build N M [exit|kill] [--malloc]
 *       nvmalloc a root named "ps_root", a singly linked list of N nodes and
 *       a binary search tree of M nodes (each node its own allocation, of
 *       varied sizes, some a page run), one FASE per insertion.  Prints the
 *       root's and every node's address, then exits cleanly or makes
 *       everything durable (pmthreads_sync) and kills itself with SIGKILL.
 *   verify ADDRFILE clean|crashed [--malloc]
 *       finds the root again, walks both structures, checks their contents
 *       and that every address equals the one build printed (ADDRFILE holds
 *       build's output), then churns the allocator and checks that no new
 *       block overlaps a live node and the nodes stay intact.  Frees all it
 *       allocated, so the heap's usage is the same afterwards.
 *   readfile FILE [exit|kill]
 *       read()s FILE straight into an nvmalloc'd buffer, then, after an
 *       epoch, read()s it again over pages persisted once (re-protected
 *       under the mprotect tracker) and pages never written.
 *   readverify FILE
 *       the buffer found after the restart holds what readfile read.
 *   synckill ROUNDS
 *       ROUNDS times: under the lock, stamp the round number into every
 *       cache line of a 4 MiB nvmalloc'd buffer, then pmthreads_sync(), which
 *       must have advanced the durable epoch; then SIGKILL right after the
 *       last sync.  Run with an interval far longer than the test, so only
 *       the syncs persist anything: sync must return only once the epoch is
 *       durable, not merely staged (the persist of 1024 fully rewritten
 *       pages is still running when a premature return is followed by the
 *       kill).
 *   syncverify ROUNDS
 *       every line of the buffer found after the restart holds ROUNDS.
 *   segv
 *       a program with its own SIGSEGV handler: faults on pages it mprotected
 *       itself reach its handler (installed before and after the runtime
 *       starts), faults of the heap's write tracking never do, heap writes
 *       keep working.
 *
 * --malloc: the nodes come from malloc/free instead of nvmalloc/nvfree (for
 * PMTHREADS_HEAP=malloc); the root is always nvmalloc'd, for its name.
 * Built twice: linked with libpmthreads, and with -DPS_WEAK_API without the
 * link (persistent only under LD_PRELOAD, as an unmodified program would be).
 * Exit status: 0 all checks passed, 1 a check failed (the first failure is
 * printed to stderr), 2 usage or not running under pmthreads.
 */
#include <pmthreads.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef PS_WEAK_API
#pragma weak nvmalloc
#pragma weak nvfree
#pragma weak nvrecover
#pragma weak pmthreads_crashed
#pragma weak pmthreads_sync
#pragma weak pmthreads_durable_epoch
#pragma weak pmthreads_heap_offset
#pragma weak pmthreads_errormsg
#endif

#define PS_MAGIC 0x50535452554354ULL	/* "PSTRUCT" */

struct ps_list {
	struct ps_list *next;
	uint64_t index;
	size_t len;			/* bytes of data */
	unsigned char data[];
};

struct ps_tree {
	struct ps_tree *left, *right;
	uint64_t key;
	size_t len;
	unsigned char data[];
};

struct ps_root {
	uint64_t magic;
	uint64_t nlist, ntree;
	struct ps_list *head, *tail;
	struct ps_tree *tree;
};

/* The program's own lock: its critical sections are the FASEs. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int use_malloc;

#define FAIL(...)                                                                  \
	do {                                                                       \
		fprintf(stderr, "persist_structs: FAILED: " __VA_ARGS__);           \
		fputc('\n', stderr);                                               \
		exit(1);                                                           \
	} while (0)

static void *node_alloc(size_t size)
{
	void *p = use_malloc ? malloc(size) : nvmalloc(size, NULL);
	if (p == NULL)
		FAIL("allocating %zu bytes: %s", size, use_malloc ? strerror(errno) : pmthreads_errormsg());
	return p;
}

static void node_free(void *p)
{
	if (use_malloc)
		free(p);
	else
		nvfree(p);
}

/* Node sizes: mostly small and varied (several size classes), every 50th a
 * page run of its own, so both allocator paths hold live structure. */
static size_t list_len(uint64_t i) { return i % 50 == 7 ? 5000 + i : 8 + (i * 37) % 200; }
static size_t tree_len(uint64_t key) { return key % 61 == 3 ? 9000 + key % 4096 : 16 + key % 300; }

static unsigned char pattern(uint64_t id, size_t i) { return (unsigned char)(id * 131u + i * 7u + 1); }

static void fill(unsigned char *d, size_t len, uint64_t id)
{
	for (size_t i = 0; i < len; i++)
		d[i] = pattern(id, i);
}

static int intact(const unsigned char *d, size_t len, uint64_t id)
{
	for (size_t i = 0; i < len; i++)
		if (d[i] != pattern(id, i))
			return 0;
	return 1;
}

/* Distinct keys in a random-looking order (a multiplicative permutation of
 * 1..M modulo a prime), so the tree is of logarithmic depth. */
static uint64_t tree_key(uint64_t i) { return (i + 1) * 2654435761ULL % 1000003ULL; }

static struct ps_tree **tree_slot(struct ps_tree **t, uint64_t key)
{
	while (*t != NULL)
		t = key < (*t)->key ? &(*t)->left : &(*t)->right;
	return t;
}

static void check_api(void)
{
#ifdef PS_WEAK_API
	if (nvrecover == NULL) {
		fprintf(stderr, "persist_structs: not running under pmthreads (LD_PRELOAD)\n");
		exit(2);
	}
#endif
}

static int build(uint64_t n, uint64_t m, int kill_after)
{
	struct ps_root *root = nvmalloc(sizeof(*root), "ps_root");
	if (root == NULL)
		FAIL("nvmalloc(root): %s", pmthreads_errormsg());
	printf("root %p\n", (void *)root);
	for (uint64_t i = 0; i < n; i++) {
		size_t len = list_len(i);
		struct ps_list *e = node_alloc(sizeof(*e) + len);
		pthread_mutex_lock(&lock);
		e->next = NULL;
		e->index = i;
		e->len = len;
		fill(e->data, len, i);
		if (root->tail != NULL)
			root->tail->next = e;
		else
			root->head = e;
		root->tail = e;
		root->nlist++;
		pthread_mutex_unlock(&lock);
		printf("list %" PRIu64 " %p\n", i, (void *)e);
	}
	for (uint64_t i = 0; i < m; i++) {
		uint64_t key = tree_key(i);
		size_t len = tree_len(key);
		struct ps_tree *t = node_alloc(sizeof(*t) + len);
		pthread_mutex_lock(&lock);
		t->left = t->right = NULL;
		t->key = key;
		t->len = len;
		fill(t->data, len, key);
		*tree_slot(&root->tree, key) = t;
		root->ntree++;
		pthread_mutex_unlock(&lock);
		printf("tree %" PRIu64 " %p\n", key, (void *)t);
	}
	pthread_mutex_lock(&lock);
	root->magic = PS_MAGIC;
	pthread_mutex_unlock(&lock);
	printf("built %" PRIu64 " %" PRIu64 "\n", n, m);
	fflush(stdout);
	if (kill_after) {
		if (pmthreads_sync() != 0)
			FAIL("pmthreads_sync: %s", pmthreads_errormsg());
		raise(SIGKILL);
		FAIL("still alive after SIGKILL");
	}
	return 0;
}

/* What build printed. */
struct expected {
	void *root;
	void **list;		/* by index */
	uint64_t nlist;
	uint64_t *tkeys;	/* tree keys and addresses, in print order */
	void **taddr;
	uint64_t ntree;
};

static void read_expected(const char *path, struct expected *x)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		FAIL("%s: %s", path, strerror(errno));
	memset(x, 0, sizeof(*x));
	size_t cap = 0, tcap = 0;
	char line[256];
	int built = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		uint64_t a;
		void *p;
		if (sscanf(line, "root %p", &p) == 1) {
			x->root = p;
		} else if (sscanf(line, "list %" SCNu64 " %p", &a, &p) == 2) {
			if (a != x->nlist)
				FAIL("%s: list entries out of order", path);
			if (x->nlist == cap) {
				cap = cap ? 2 * cap : 256;
				x->list = realloc(x->list, cap * sizeof(*x->list));
			}
			x->list[x->nlist++] = p;
		} else if (sscanf(line, "tree %" SCNu64 " %p", &a, &p) == 2) {
			if (x->ntree == tcap) {
				tcap = tcap ? 2 * tcap : 256;
				x->tkeys = realloc(x->tkeys, tcap * sizeof(*x->tkeys));
				x->taddr = realloc(x->taddr, tcap * sizeof(*x->taddr));
			}
			x->tkeys[x->ntree] = a;
			x->taddr[x->ntree++] = p;
		} else if (strncmp(line, "built ", 6) == 0) {
			built = 1;
		}
	}
	fclose(f);
	if (!built || x->root == NULL)
		FAIL("%s: not the complete output of build", path);
}

/* A block the program holds, for the overlap checks. */
struct range {
	uintptr_t lo, hi;
};

static int by_lo(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void check_disjoint(struct range *r, size_t n, const char *when)
{
	qsort(r, n, sizeof(*r), by_lo);
	for (size_t i = 0; i + 1 < n; i++)
		if (r[i].hi > r[i + 1].lo)
			FAIL("%s: blocks [%#" PRIxPTR ", %#" PRIxPTR ") and [%#" PRIxPTR ", %#" PRIxPTR
			     ") overlap", when, r[i].lo, r[i].hi, r[i + 1].lo, r[i + 1].hi);
}

/* The size of an allocation, as the program asked for it; small blocks are
 * 16-byte aligned and blocks of a page or more page-aligned (pmthreads.h). */
static void check_alignment(const void *p, size_t size, const char *what)
{
	uintptr_t a = (uintptr_t)p;
	if (a % 16 != 0 || (!use_malloc && size >= 4096 && a % 4096 != 0))
		FAIL("%s at %p (%zu bytes) is misaligned", what, p, size);
}

static size_t tree_walk(struct ps_tree *t, struct ps_tree **out, size_t at, size_t max, int depth)
{
	if (t == NULL)
		return at;
	if (depth > 10000 || at >= max)
		FAIL("the tree has a cycle or more nodes than recorded");
	at = tree_walk(t->left, out, at, max, depth + 1);
	if (at >= max)
		FAIL("the tree has more nodes than recorded");
	out[at++] = t;
	return tree_walk(t->right, out, at, max, depth + 1);
}

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Walk both structures and check them against build's output; fills r with
 * the nodes' ranges and returns their number. */
static size_t check_structures(const struct expected *x, struct ps_root *root, struct range *r)
{
	size_t nr = 0;
	if (root->nlist != x->nlist || root->ntree != x->ntree)
		FAIL("root counts %" PRIu64 "/%" PRIu64 ", build made %" PRIu64 "/%" PRIu64,
		     root->nlist, root->ntree, x->nlist, x->ntree);
	r[nr++] = (struct range){ (uintptr_t)root, (uintptr_t)(root + 1) };
	uint64_t i = 0;
	struct ps_list *last = NULL;
	for (struct ps_list *e = root->head; e != NULL; e = e->next, i++) {
		if (i >= x->nlist)
			FAIL("the list is longer than %" PRIu64 " nodes", x->nlist);
		if ((void *)e != x->list[i])
			FAIL("list node %" PRIu64 " at %p, build put it at %p", i, (void *)e, x->list[i]);
		if (e->index != i || e->len != list_len(i) || !intact(e->data, e->len, i))
			FAIL("list node %" PRIu64 " at %p: contents damaged", i, (void *)e);
		check_alignment(e, sizeof(*e) + e->len, "a list node");
		r[nr++] = (struct range){ (uintptr_t)e, (uintptr_t)e->data + e->len };
		last = e;
	}
	if (i != x->nlist || last != root->tail)
		FAIL("the list has %" PRIu64 " nodes (expected %" PRIu64 ") or a wrong tail", i, x->nlist);

	struct ps_tree **nodes = calloc(x->ntree + 1, sizeof(*nodes));
	size_t nt = tree_walk(root->tree, nodes, 0, x->ntree, 0);
	if (nt != x->ntree)
		FAIL("the tree has %zu nodes, expected %" PRIu64, nt, x->ntree);
	for (size_t k = 0; k < nt; k++) {
		struct ps_tree *t = nodes[k];
		if (k > 0 && nodes[k - 1]->key >= t->key)
			FAIL("the tree is out of order at key %" PRIu64, t->key);
		if (t->len != tree_len(t->key) || !intact(t->data, t->len, t->key))
			FAIL("tree node %" PRIu64 " at %p: contents damaged", t->key, (void *)t);
		check_alignment(t, sizeof(*t) + t->len, "a tree node");
		r[nr++] = (struct range){ (uintptr_t)t, (uintptr_t)t->data + t->len };
	}
	/* Every address as printed: both sorted by key. */
	for (size_t k = 0; k < x->ntree; k++) {
		size_t lo = 0, hi = nt;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (nodes[mid]->key < x->tkeys[k])
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == nt || nodes[lo]->key != x->tkeys[k])
			FAIL("tree key %" PRIu64 " is missing", x->tkeys[k]);
		if ((void *)nodes[lo] != x->taddr[k])
			FAIL("tree node %" PRIu64 " at %p, build put it at %p", x->tkeys[k],
			     (void *)nodes[lo], x->taddr[k]);
	}
	free(nodes);
	check_disjoint(r, nr, "after recovery");
	return nr;
}

static int verify(const char *addrfile, int expect_crashed)
{
	struct expected x;
	read_expected(addrfile, &x);
	struct ps_root *root = nvrecover(NULL, sizeof(*root), "ps_root");
	if (root == NULL)
		FAIL("nvrecover(\"ps_root\") found nothing: %s", pmthreads_errormsg());
	if ((void *)root != x.root)
		FAIL("the root came back at %p, build made it at %p", (void *)root, x.root);
	if (root->magic != PS_MAGIC)
		FAIL("the root's magic is %#" PRIx64, root->magic);
	if (pmthreads_heap_offset() != 0)
		FAIL("the heap moved by %td bytes", pmthreads_heap_offset());
	if ((int)pmthreads_crashed() != expect_crashed)
		FAIL("pmthreads_crashed() is %d, expected %d", (int)pmthreads_crashed(), expect_crashed);

	size_t maxr = 1 + x.nlist + x.ntree;
	struct range *nodes = malloc(maxr * sizeof(*nodes));
	size_t nn = check_structures(&x, root, nodes);

	/* Allocator churn over the recovered heap: random sizes (small ones and
	 * page runs), some named, random frees; at the end every block still
	 * held, with the nodes, must be disjoint, and the nodes intact. */
	enum { SLOTS = 400, ROUNDS = 4000 };
	struct churn {
		unsigned char *p;
		size_t size;
		uint64_t id;
		int named;
	} held[SLOTS];
	memset(held, 0, sizeof(held));
	char name[32];
	for (uint64_t round = 1; round <= ROUNDS; round++) {
		struct churn *c = &held[rnd() % SLOTS];
		if (c->p != NULL) {
			if (!intact(c->p, c->size, c->id))
				FAIL("a churn block at %p was overwritten", (void *)c->p);
			if (c->named) {
				snprintf(name, sizeof(name), "churn-%" PRIu64, c->id);
				if (nvrecover(NULL, c->size, name) != c->p)
					FAIL("nvrecover(%s) does not find its block", name);
				nvfree(c->p);
				if (nvrecover(NULL, 0, name) != NULL)
					FAIL("nvrecover(%s) finds a freed block", name);
			} else {
				node_free(c->p);
			}
			c->p = NULL;
		}
		uint64_t k = rnd() % 16;
		c->size = k < 10 ? 1 + rnd() % 512 : k < 14 ? 1 + rnd() % 4000 : 4096 + rnd() % 40000;
		c->id = round;
		c->named = rnd() % 8 == 0;
		if (c->named) {
			snprintf(name, sizeof(name), "churn-%" PRIu64, c->id);
			c->p = nvmalloc(c->size, name);
			if (c->p == NULL)
				FAIL("nvmalloc(%zu, %s): %s", c->size, name, pmthreads_errormsg());
		} else {
			c->p = node_alloc(c->size);
		}
		check_alignment(c->p, c->size, "a churn block");
		fill(c->p, c->size, c->id);
	}
	struct range *all = malloc((nn + SLOTS) * sizeof(*all));
	memcpy(all, nodes, nn * sizeof(*all));
	size_t na = nn;
	for (int s = 0; s < SLOTS; s++)
		if (held[s].p != NULL) {
			if (!intact(held[s].p, held[s].size, held[s].id))
				FAIL("a churn block at %p was overwritten", (void *)held[s].p);
			all[na++] = (struct range){ (uintptr_t)held[s].p, (uintptr_t)held[s].p + held[s].size };
		}
	check_disjoint(all, na, "after churn");
	check_structures(&x, root, nodes);
	for (int s = 0; s < SLOTS; s++)
		if (held[s].p != NULL) {
			if (held[s].named)
				nvfree(held[s].p);
			else
				node_free(held[s].p);
		}
	printf("verified %" PRIu64 " %" PRIu64 "\n", x.nlist, x.ntree);
	free(all);
	free(nodes);
	return 0;
}

/* The file's contents, read into ordinary memory. */
static unsigned char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		FAIL("%s: %s", path, strerror(errno));
	unsigned char *buf = malloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
		if (r <= 0)
			FAIL("%s: short read", path);
		got += (size_t)r;
	}
	close(fd);
	*len = got;
	return buf;
}

/* One read(2) of the whole file into dst (a regular file on tmpfs returns
 * it all at once; a short count would be a failure worth seeing). */
static void read_into(const char *path, unsigned char *dst, size_t len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		FAIL("%s: %s", path, strerror(errno));
	ssize_t r = read(fd, dst, len);
	if (r != (ssize_t)len)
		FAIL("read(%s) into the persistent buffer at %p returned %zd (%s), expected %zu",
		     path, (void *)dst, r, r < 0 ? strerror(errno) : "short", len);
	close(fd);
}

/* The buffer: 2*len + a page; first read at 0, second at half + 100 (an
 * unaligned start, across pages persisted once and pages never written). */
static size_t second_at(size_t len) { return len / 2 + 100; }

static int readfile(const char *path, int kill_after)
{
	size_t len;
	unsigned char *want = slurp(path, &len);
	unsigned char *buf = nvmalloc(2 * len + 4096, "ps_buf");
	if (buf == NULL)
		FAIL("nvmalloc(buffer): %s", pmthreads_errormsg());
	read_into(path, buf, len);
	if (memcmp(buf, want, len) != 0)
		FAIL("the first read() left other bytes in the buffer");
	if (pmthreads_sync() != 0)
		FAIL("pmthreads_sync: %s", pmthreads_errormsg());
	read_into(path, buf + second_at(len), len);
	if (memcmp(buf, want, second_at(len)) != 0 || memcmp(buf + second_at(len), want, len) != 0)
		FAIL("the second read() left other bytes in the buffer");
	printf("read %zu\n", len);
	fflush(stdout);
	if (kill_after) {
		if (pmthreads_sync() != 0)
			FAIL("pmthreads_sync: %s", pmthreads_errormsg());
		raise(SIGKILL);
		FAIL("still alive after SIGKILL");
	}
	return 0;
}

static int readverify(const char *path)
{
	size_t len;
	unsigned char *want = slurp(path, &len);
	unsigned char *buf = nvrecover(NULL, 2 * len + 4096, "ps_buf");
	if (buf == NULL)
		FAIL("nvrecover(\"ps_buf\") found nothing");
	if (memcmp(buf, want, second_at(len)) != 0 || memcmp(buf + second_at(len), want, len) != 0)
		FAIL("the recovered buffer differs from the file");
	for (size_t i = second_at(len) + len; i < 2 * len + 4096; i++)
		if (buf[i] != 0)
			FAIL("the recovered buffer has a stray byte at %zu", i);
	printf("readverified %zu\n", len);
	return 0;
}

/* The application's SIGSEGV handlers: each records the fault and makes the
 * page it owns writable; a fault anywhere else is a failure. */
static unsigned char *own_pages;	/* 4 pages, PROT_NONE at first */
static size_t pagesz;
static volatile sig_atomic_t handler_a_runs, handler_b_runs;
static void *volatile last_fault;

static void own_fault(siginfo_t *si, volatile sig_atomic_t *count)
{
	unsigned char *a = si->si_addr;
	if (a < own_pages || a >= own_pages + 4 * pagesz) {
		static const char msg[] = "persist_structs: FAILED: SIGSEGV outside the own pages\n";
		if (write(2, msg, sizeof(msg) - 1) < 0) {
			/* nothing more to do */
		}
		_exit(1);
	}
	last_fault = a;
	(*count)++;
	mprotect((void *)((uintptr_t)a & ~(uintptr_t)(pagesz - 1)), pagesz, PROT_READ | PROT_WRITE);
}

static void handler_a(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	own_fault(si, &handler_a_runs);
}

static void handler_b(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	own_fault(si, &handler_b_runs);
}

static void install(void (*fn)(int, siginfo_t *, void *))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = fn;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) != 0)
		FAIL("sigaction: %s", strerror(errno));
	struct sigaction now;
	if (sigaction(SIGSEGV, NULL, &now) != 0 || now.sa_sigaction != fn)
		FAIL("sigaction(SIGSEGV) does not report the handler just installed");
}

/* Write many heap pages (each a first write under the mprotect tracker),
 * several times across epochs, and check them. */
static void heap_writes(uint64_t *h, size_t words, uint64_t salt)
{
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < words; i += 64)
			h[i] = i * salt + (uint64_t)round;
		if (pmthreads_sync() != 0)
			FAIL("pmthreads_sync: %s", pmthreads_errormsg());
		for (size_t i = 0; i < words; i += 64)
			if (h[i] != i * salt + (uint64_t)round)
				FAIL("heap word %zu lost its value", i);
	}
}

static int segv(void)
{
	pagesz = (size_t)sysconf(_SC_PAGESIZE);
	own_pages = mmap(NULL, 4 * pagesz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (own_pages == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	/* A handler installed before the program's first pmthreads call (the
	 * runtime may start only then, and must take it over). */
	install(handler_a);
	const size_t words = 64 * 1024;	/* 128 pages */
	uint64_t *h = nvmalloc(words * sizeof(uint64_t), "ps_segv");
	if (h == NULL)
		FAIL("nvmalloc: %s", pmthreads_errormsg());
	heap_writes(h, words, 3);
	if (handler_a_runs != 0)
		FAIL("the application's handler saw %d heap faults", (int)handler_a_runs);

	own_pages[0] = 1;	/* a write fault */
	if (handler_a_runs != 1 || last_fault != own_pages || own_pages[0] != 1)
		FAIL("the write fault on the own page did not reach the handler (runs %d)",
		     (int)handler_a_runs);
	volatile unsigned char *rd = own_pages + pagesz + 5;
	unsigned char v = *rd;	/* a read fault */
	if (handler_a_runs != 2 || last_fault != (void *)rd || v != 0)
		FAIL("the read fault on the own page did not reach the handler (runs %d)",
		     (int)handler_a_runs);

	heap_writes(h, words, 5);
	/* A handler installed while the runtime runs replaces the first. */
	install(handler_b);
	own_pages[2 * pagesz + 17] = 2;
	if (handler_b_runs != 1 || handler_a_runs != 2 || own_pages[2 * pagesz + 17] != 2)
		FAIL("the fault after the second sigaction went to the wrong handler (a %d, b %d)",
		     (int)handler_a_runs, (int)handler_b_runs);
	heap_writes(h, words, 7);
	/* Heap writes made inside a FASE too. */
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < words; i += 512)
		h[i] = ~i;
	pthread_mutex_unlock(&lock);
	own_pages[3 * pagesz] = 3;
	if (handler_b_runs != 2 || handler_a_runs != 2)
		FAIL("heap faults reached the application's handler (a %d, b %d)",
		     (int)handler_a_runs, (int)handler_b_runs);
	printf("segv handled %d %d\n", (int)handler_a_runs, (int)handler_b_runs);
	return 0;
}

#define SYNC_BUF_LEN (4u << 20)
#define SYNC_LINE 64u

static int synckill(uint64_t rounds)
{
	uint64_t *buf = nvmalloc(SYNC_BUF_LEN, "ps_sync");
	if (buf == NULL)
		FAIL("nvmalloc(sync buffer): %s", pmthreads_errormsg());
	for (uint64_t r = 1; r <= rounds; r++) {
		pthread_mutex_lock(&lock);
		for (size_t off = 0; off < SYNC_BUF_LEN; off += SYNC_LINE)
			buf[off / sizeof(uint64_t)] = r;
		pthread_mutex_unlock(&lock);
		uint64_t before = pmthreads_durable_epoch();
		if (pmthreads_sync() != 0)
			FAIL("pmthreads_sync: %s", pmthreads_errormsg());
		if (pmthreads_durable_epoch() <= before)
			FAIL("round %" PRIu64 ": pmthreads_sync returned with the durable epoch still "
			     "%" PRIu64, r, pmthreads_durable_epoch());
	}
	raise(SIGKILL);
	FAIL("still alive after SIGKILL");
}

static int syncverify(uint64_t rounds)
{
	const uint64_t *buf = nvrecover(NULL, SYNC_BUF_LEN, "ps_sync");
	if (buf == NULL)
		FAIL("nvrecover(\"ps_sync\") found nothing");
	if (!pmthreads_crashed())
		FAIL("pmthreads_crashed() is false after SIGKILL");
	for (size_t off = 0; off < SYNC_BUF_LEN; off += SYNC_LINE)
		if (buf[off / sizeof(uint64_t)] != rounds)
			FAIL("line at offset %zu holds round %" PRIu64 ", not %" PRIu64
			     " (the last pmthreads_sync returned before it was durable)",
			     off, buf[off / sizeof(uint64_t)], rounds);
	printf("synced %" PRIu64 "\n", rounds);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: persist_structs build N M [exit|kill] [--malloc]\n"
			"       persist_structs verify ADDRFILE clean|crashed [--malloc]\n"
			"       persist_structs readfile FILE [exit|kill]\n"
			"       persist_structs readverify FILE\n"
			"       persist_structs synckill ROUNDS\n"
			"       persist_structs syncverify ROUNDS\n"
			"       persist_structs segv\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[argc - 1], "--malloc") == 0) {
		use_malloc = 1;
		argc--;
	}
	if (argc < 2)
		usage();
	check_api();
	const char *mode = argv[1];
	if (strcmp(mode, "build") == 0 && (argc == 4 || argc == 5)) {
		int kill_after = argc == 5 && strcmp(argv[4], "kill") == 0;
		if (argc == 5 && !kill_after && strcmp(argv[4], "exit") != 0)
			usage();
		return build(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), kill_after);
	}
	if (strcmp(mode, "verify") == 0 && argc == 4) {
		if (strcmp(argv[3], "clean") != 0 && strcmp(argv[3], "crashed") != 0)
			usage();
		return verify(argv[2], strcmp(argv[3], "crashed") == 0);
	}
	if (strcmp(mode, "readfile") == 0 && (argc == 3 || argc == 4))
		return readfile(argv[2], argc == 4 && strcmp(argv[3], "kill") == 0);
	if (strcmp(mode, "readverify") == 0 && argc == 3)
		return readverify(argv[2]);
	if (strcmp(mode, "synckill") == 0 && argc == 3)
		return synckill(strtoull(argv[2], NULL, 10));
	if (strcmp(mode, "syncverify") == 0 && argc == 3)
		return syncverify(strtoull(argv[2], NULL, 10));
	if (strcmp(mode, "segv") == 0 && argc == 2)
		return segv();
	usage();
}
