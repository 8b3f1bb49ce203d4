/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check -- verify every invariant of a pool: the pool module's checks
 * (header, checksums, version records, layout, file size, seq table against
 * VER_d), then what the tool can add from outside: every consistent page
 * copy can be read and matches its checksum, and the heap in the consistent
 * image is sound (the full walk of heap_validate, every problem listed).  Copies newer than VER_d are an
 * interrupted epoch that the next open undoes: a warning, not a problem.
 * The findings are collected, then printed as text or as one JSON object.
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
#include <sys/stat.h>

static const char check_usage[] = "Usage: " TOOL_NAME " check [--json] POOL\n";
static const char check_help[] =
	"Usage: " TOOL_NAME " check [--json] POOL\n"
	"Verify every invariant of a pool: header, checksums and layout, the version\n"
	"records, the file size against the capacity, the sequence number of every\n"
	"page copy against VER_d, that every page of the consistent image can be\n"
	"read and matches its checksum (the count verified is printed), and every\n"
	"structure of the heap in it.  Every problem found is listed.  Copies\n"
	"written by an interrupted epoch (sequence number above VER_d) are reported\n"
	"as a warning: the program's next start discards them (recovery pending).\n"
	"The pool is opened read-only and never modified.\n"
	"\n"
	"Exit status: 0 consistent (warnings allowed), 1 problems found or the pool\n"
	"cannot be opened, 2 usage.\n"
	"\n"
	"  --json      print the findings as one JSON object\n"
	"  -h, --help  this text\n";

/* Per-page findings can be numerous; list this many of each kind. */
#define LIST_MAX 10

enum finding_kind { PROBLEM, WARNING, NOTE };

struct finding {
	enum finding_kind kind;
	char *text;
};

struct findings {
	struct finding *v;
	size_t n, cap;
	unsigned problems;
	unsigned warnings;
};

static void add(struct findings *f, enum finding_kind kind, const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (kind == PROBLEM)
		f->problems++;
	else if (kind == WARNING)
		f->warnings++;
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 32;
		struct finding *v = realloc(f->v, cap * sizeof(*v));
		if (v == NULL)
			return;	/* counted, not listed */
		f->v = v;
		f->cap = cap;
	}
	char *t = strdup(msg);
	if (t != NULL)
		f->v[f->n++] = (struct finding){ kind, t };
}

static void problem(struct findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct findings *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(f, PROBLEM, fmt, ap);
	va_end(ap);
}

static void warning(struct findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warning(struct findings *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(f, WARNING, fmt, ap);
	va_end(ap);
}

static void note(struct findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct findings *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(f, NOTE, fmt, ap);
	va_end(ap);
}

static void report_heap_problem(const char *msg, void *arg)
{
	problem(arg, "heap: %s", msg);
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
	for (uint64_t i = 0; i < p->seq_pages; i++) {
		for (int c = 0; c < 2; c++) {
			uint64_t s = p->seq[i][c];
			if (s == POOL_SEQ_INVALID || s <= ver_d)
				continue;
			if (torn++ < LIST_MAX)
				note(f, "page %" PRIu64 " copy %d has seq %" PRIu64
				     " > VER_d %" PRIu64 " (interrupted epoch)", i, c, s, ver_d);
		}
	}
	if (torn > 0)
		warning(f, "crashed mid-epoch, recovery pending: %" PRIu64 " page cop%s written "
			   "after VER_d %" PRIu64 "; the next open of the pool discards them",
			torn, torn == 1 ? "y was" : "ies were", ver_d);
}

/* Read every page's consistent copy and verify it against its checksum: an
 * unreadable block of the file (an I/O error on the medium, a hole punched
 * in it) or a changed byte would otherwise only show at the next recovery,
 * which refuses the pool.  Reading such a page of the mapping raises SIGBUS;
 * it is caught here and reported as a problem. */
static sigjmp_buf read_fault;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(read_fault, 1);
}

/* False when a page cannot be read (the heap is not checked then). */
static bool check_pages(const struct pool *p, struct findings *f, uint64_t *verified_out)
{
	*verified_out = 0;
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
	volatile uint64_t unreadable = 0, damaged = 0, verified = 0;
	struct progress pr;
	progress_start(&pr, "verifying pages", p->seq_pages);
	for (volatile uint64_t i = 0; i < p->seq_pages; i++) {
		/* In bounded memory: what was read is given back (stream.c). */
		if (i % TOOL_RELEASE_PAGES == 0 && i > 0) {
			tool_release_pages(p, i - TOOL_RELEASE_PAGES, i);
			progress_step(&pr, i);
		}
		if (pool_valid_copy(p, i) < 0)
			continue;
		if (sigsetjmp(read_fault, 1) != 0) {
			if (unreadable++ < LIST_MAX)
				problem(f, "page %" PRIu64 ": its consistent copy cannot be read "
					   "(I/O error in the pool file)", (uint64_t)i);
			continue;
		}
		recovery_read_page(p, i, buf);
		char what[768];
		if (pool_verify_page(p, i, buf, what, sizeof(what)) != 0) {
			if (damaged++ < LIST_MAX)
				problem(f, "page %" PRIu64 " (heap address %#" PRIx64 ") fails its "
					   "checksum: %s", (uint64_t)i,
					p->shadow_base + (uint64_t)i * p->page_size, what);
			continue;
		}
		verified++;
	}
	sigaction(SIGBUS, &old, NULL);
	tool_release_pages(p, p->seq_pages / TOOL_RELEASE_PAGES * TOOL_RELEASE_PAGES, p->seq_pages);
	progress_end(&pr);
	if (unreadable > LIST_MAX)
		problem(f, "... and %" PRIu64 " more unreadable pages", unreadable - LIST_MAX);
	if (damaged > LIST_MAX)
		problem(f, "... and %" PRIu64 " more pages that fail their checksums", damaged - LIST_MAX);
	if (damaged > 0)
		note(f, "%" PRIu64 " damaged page%s: a program's start refuses this pool (the older "
			   "copy of a page is an older epoch and is never used instead); restore the "
			   "pool from a backup, or remove it if its data is expendable ("
			   TOOL_NAME " dump saves the rest of the image first)",
			(uint64_t)damaged, damaged == 1 ? "" : "s");
	*verified_out = verified;
	free(buf);
	/* A damaged page can be read: the heap is checked anyway, so that a
	 * damaged metadata page is named by what it holds too. */
	return unreadable == 0;
}

/* The heap a recovering program would adopt, checked as it is in the
 * consistent image. */
static void check_heap(const struct pool *p, struct findings *f, char *summary, size_t len)
{
	snprintf(summary, len, "not checked");
	if (pool_valid_copy(p, 0) < 0) {
		snprintf(summary, len, "none: no heap has been persisted yet");
		note(f, "heap not checked: no heap has been persisted yet");
		return;
	}
	struct image img;
	if (image_load(p, &img) != 0) {
		problem(f, "the heap image cannot be loaded (see the error above)");
		return;
	}
	heap_image_check(&img, p, summary, len, report_heap_problem, f);
	image_free(&img);
}

static void print_text(const struct pool *p, const struct findings *f, const char *heap_summary,
		       int64_t verified)
{
	static const char *const words[] = { "problem", "warning", "note" };
	for (size_t i = 0; i < f->n; i++)
		printf("%s: %s\n", words[f->v[i].kind], f->v[i].text);
	if (verified >= 0)
		printf("pages: %" PRId64 " of the image verified against their checksums\n",
		       verified);
	if (f->problems == 0 && heap_summary[0] != '\0')
		printf("heap: consistent: %s\n", heap_summary);
	if (f->problems == 0) {
		printf("%s: consistent (VER_d %" PRIu64 ", %u warning%s)\n", p->path, *p->ver_d,
		       f->warnings, f->warnings == 1 ? "" : "s");
		/* After a crash or a failed write-back (the program said which
		 * epoch it reached): what a restart gives back. */
		printf("%s: last durable epoch %" PRIu64 "\n", p->path, *p->ver_d);
	}
	else
		printf("%s: %u problem%s found\n", p->path, f->problems, f->problems == 1 ? "" : "s");
}

static void print_list(const struct findings *f, enum finding_kind kind)
{
	printf("[");
	bool first = true;
	for (size_t i = 0; i < f->n; i++) {
		if (f->v[i].kind != kind)
			continue;
		printf(first ? "" : ",");
		json_string(stdout, f->v[i].text);
		first = false;
	}
	printf("]");
}

/* verified: pages verified against their checksums, -1 when not checked. */
static void print_json(const char *path, const struct pool *p, const struct findings *f,
		       const char *heap_summary, int64_t verified)
{
	printf("{\"pool\":");
	json_string(stdout, path);
	printf(",\"opened\":%s", p != NULL ? "true" : "false");
	printf(",\"consistent\":%s", f->problems == 0 && p != NULL ? "true" : "false");
	if (p != NULL)
		printf(",\"ver_d\":%" PRIu64, *p->ver_d);
	if (verified >= 0)
		printf(",\"pages_verified\":%" PRId64, verified);
	printf(",\"problem_count\":%u,\"warning_count\":%u", f->problems, f->warnings);
	printf(",\"problems\":");
	print_list(f, PROBLEM);
	printf(",\"warnings\":");
	print_list(f, WARNING);
	printf(",\"notes\":");
	print_list(f, NOTE);
	printf(",\"heap\":");
	json_string(stdout, heap_summary);
	printf("}\n");
}

static void findings_free(struct findings *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->v[i].text);
	free(f->v);
}

/* Every check of an open pool into f; the pages verified against their
 * checksums, -1 when they could not be read. */
static int64_t run_checks(const struct pool *p, struct findings *f, char *heap_summary,
			  size_t summary_len)
{
	if (pool_check(p, report_pool_problem, f) > 0)
		note(f, "where the problems above are in the seq table only, the image can be "
			"salvaged: " TOOL_NAME " dump --salvage POOL OUT writes each page from the "
			"copy whose checksum verifies, naming every page so chosen");
	/* The deeper checks read the mapping: only while the file still has
	 * the size its header gives (a shrunk file would fault). */
	struct stat st;
	if (fstat(p->fd, &st) != 0 || (uint64_t)st.st_size != p->file_size)
		return -1;
	note_torn(p, f);
	uint64_t verified = 0;
	if (check_pages(p, f, &verified))
		check_heap(p, f, heap_summary, summary_len);
	return (int64_t)verified;
}

unsigned tool_check_open_pool(const struct pool *p)
{
	struct findings f;
	memset(&f, 0, sizeof(f));
	char heap_summary[256] = "";
	printf("checking %s (format version %u)\n", p->path, p->format_version);
	int64_t verified = run_checks(p, &f, heap_summary, sizeof(heap_summary));
	/* Formats 2 and 3 have fewer checksums: say what was verified
	 * (format 4 has one for every page, of another function). */
	if (p->format_version < 4 && verified >= 0) {
		printf("pages: the image read (%s)\n",
		       p->sum == NULL ? "format version 2 has no checksums"
				      : "format version 3 has checksums of the heap's metadata "
					"pages only: those were verified");
		verified = -1;
	}
	print_text(p, &f, heap_summary, verified);
	unsigned problems = f.problems;
	findings_free(&f);
	return problems;
}

/* pool_open's refusal, as a problem (check --json still prints an object). */
static char open_error[1024];

int cmd_check(int argc, char **argv)
{
	bool json;
	const char *path;
	int parsed = tool_parse_pool_command(argc, argv, "check", check_help, check_usage, &json,
					     &path);
	if (parsed >= 0)
		return parsed;
	struct findings f;
	memset(&f, 0, sizeof(f));
	char heap_summary[256] = "";
	struct pool *p = tool_open_pool_inspect(path);
	if (p == NULL) {
		snprintf(open_error, sizeof(open_error), "%s: cannot be opened (see the error above)",
			 path);
		problem(&f, "%s", open_error);
		if (json)
			print_json(path, NULL, &f, "not checked", -1);
		else
			printf("%s\n", open_error);
		findings_free(&f);
		return TOOL_PROBLEM;
	}
	if (!json)
		printf("checking %s\n", p->path);
	int64_t verified = run_checks(p, &f, heap_summary, sizeof(heap_summary));
	if (json)
		print_json(path, p, &f, heap_summary, verified);
	else
		print_text(p, &f, heap_summary, verified);
	int rc = f.problems == 0 ? TOOL_OK : TOOL_PROBLEM;
	findings_free(&f);
	pool_close(p);
	return rc;
}
