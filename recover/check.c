/*
 * check -- verify every invariant of a pool: the pool module's checks
 * (header, checksum, layout, file size, seq table against VER_d), then what
 * the tool can add from outside: every consistent page copy can be read, and
 * the heap in the consistent image is one a recovering program would accept
 * and its allocator structures are sound.  Copies newer than VER_d are an
 * interrupted epoch that the next open undoes: a warning, not a problem.
 */
#include "tool.h"

#include <getopt.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char check_usage[] = "Usage: " TOOL_NAME " check POOL\n";
static const char check_help[] =
	"Usage: " TOOL_NAME " check POOL\n"
	"Verify every invariant of a pool: header, checksum and layout, the file size\n"
	"against the capacity, the sequence number of every page copy against VER_d,\n"
	"and that the consistent image can be read.  Each problem is listed.  Copies\n"
	"written by an interrupted epoch (sequence number above VER_d) are reported\n"
	"as a warning: the program's next start discards them (recovery pending).\n"
	"The pool is opened read-only and never modified.\n"
	"\n"
	"Exit status: 0 consistent (warnings allowed), 1 problems found or the pool\n"
	"cannot be opened, 2 usage.\n"
	"\n"
	"  -h, --help  this text\n";

/* Per-page findings can be numerous; list this many of each kind. */
#define LIST_MAX 10

struct findings {
	unsigned problems;
	unsigned warnings;
};

static void problem(struct findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct findings *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("problem: ");
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	f->problems++;
}

static void warning(struct findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warning(struct findings *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("warning: ");
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	f->warnings++;
}

static void report_pool_problem(const char *msg, void *arg)
{
	problem(arg, "%s", msg);
}

/* The seq table is sound (pool_check said so); list the copies of an
 * interrupted epoch. */
static void note_torn(const struct pool *p, struct findings *f)
{
	uint64_t ver_d = *p->ver_d;
	uint64_t torn = 0;
	for (uint64_t i = 0; i < p->npages; i++) {
		for (int c = 0; c < 2; c++) {
			uint64_t s = p->seq[i][c];
			if (s == POOL_SEQ_INVALID || s <= ver_d)
				continue;
			if (torn++ < LIST_MAX)
				printf("note: page %" PRIu64 " copy %d has seq %" PRIu64
				       " > VER_d %" PRIu64 " (interrupted epoch)\n",
				       i, c, s, ver_d);
		}
	}
	if (torn > 0)
		warning(f, "crashed mid-epoch, recovery pending: %" PRIu64 " page cop%s written "
			   "after VER_d %" PRIu64 "; the next open of the pool discards them",
			torn, torn == 1 ? "y was" : "ies were", ver_d);
}

/* Read every page's consistent copy: an unreadable block of the file (an I/O
 * error on the medium, a hole punched in it) would otherwise only show at the
 * next recovery.  Reading such a page of the mapping raises SIGBUS; it is
 * caught here and reported as a problem. */
static sigjmp_buf read_fault;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(read_fault, 1);
}

static bool check_readable(const struct pool *p, struct findings *f)
{
	unsigned char *buf = malloc(p->page_size);
	if (buf == NULL) {
		problem(f, "out of memory reading the pages");
		return false;
	}
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	volatile uint64_t unreadable = 0;
	for (volatile uint64_t i = 0; i < p->npages; i++) {
		if (pool_valid_copy(p, i) < 0)
			continue;
		if (sigsetjmp(read_fault, 1) != 0) {
			if (unreadable++ < LIST_MAX)
				problem(f, "page %" PRIu64 ": its consistent copy cannot be read "
					   "(I/O error in the pool file)", (uint64_t)i);
			continue;
		}
		pool_read_page(p, i, buf);
	}
	sigaction(SIGBUS, &old, NULL);
	if (unreadable > LIST_MAX)
		problem(f, "... and %" PRIu64 " more unreadable pages", unreadable - LIST_MAX);
	free(buf);
	return unreadable == 0;
}

/* The heap a recovering program would adopt from the consistent image. */
static void check_heap(const struct pool *p, struct findings *f)
{
	struct image img;
	if (image_load(p, &img) != 0) {
		problem(f, "the heap image cannot be loaded (see the error above)");
		return;
	}
	char why[512], summary[256];
	switch (heap_image_adopt(&img, p, why, sizeof(why))) {
	case HEAP_IMAGE_NONE:
		printf("note: heap not checked: %s\n", why);
		break;
	case HEAP_IMAGE_INVALID:
		problem(f, "%s", why);
		break;
	case HEAP_IMAGE_ADOPTED:
		if (heap_image_check(summary, sizeof(summary), why, sizeof(why)) == 0)
			printf("heap: consistent: %s\n", summary);
		else
			problem(f, "the heap's structures are inconsistent: %s", why);
		break;
	}
	image_free(&img);
}

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(check_help, stdout);
			return TOOL_OK;
		}
		return tool_bad_option(check_usage, "check", argv);
	}
	if (argc - optind != 1)
		return tool_usage_error(check_usage, "check: expected one POOL, got %d operands",
					argc - optind);

	struct pool *p = tool_open_pool(argv[optind]);
	if (p == NULL) {
		printf("%s: cannot be opened (see the error above)\n", argv[optind]);
		return TOOL_PROBLEM;
	}
	struct findings f = { 0, 0 };
	printf("checking %s\n", p->path);
	/* The file may have shrunk since it was opened: reading the mapping
	 * past its end would fault, so the deeper checks need this one to pass. */
	if (pool_check(p, report_pool_problem, &f) == 0) {
		note_torn(p, &f);
		if (check_readable(p, &f))
			check_heap(p, &f);
	}
	if (f.problems == 0)
		printf("%s: consistent (VER_d %" PRIu64 ", %u warning%s)\n", p->path, *p->ver_d,
		       f.warnings, f.warnings == 1 ? "" : "s");
	else
		printf("%s: %u problem%s found\n", p->path, f.problems, f.problems == 1 ? "" : "s");
	pool_close(p);
	return f.problems == 0 ? TOOL_OK : TOOL_PROBLEM;
}
