/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dump -- write a pool's consistent heap image to a file.
 *
 * The output is the heap as a recovering program would see it at the
 * recorded base address: byte k of OUT is byte k of the heap.  Pages never
 * persisted are zeros and are left as holes (the file is sparse).  OUT is
 * created exclusively unless --force; it may never be the pool itself, a
 * symbolic link (not even with --force) or anything but a regular file.
 * OUT "-" is standard output, written sequentially (zeros included).
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char dump_usage[] =
	"Usage: " TOOL_NAME " dump [--used-only] [--force] [--salvage] POOL OUT|-\n";
static const char dump_help[] =
	"Usage: " TOOL_NAME " dump [--used-only] [--force] [--salvage] POOL OUT|-\n"
	"Write the pool's consistent heap image (the last durable epoch, as the\n"
	"program would recover it) to OUT: capacity bytes, byte k of OUT being byte k\n"
	"of the heap, pages never persisted as zeros (holes in a sparse file).\n"
	"OUT - writes to standard output (all of it: add --used-only for a large,\n"
	"mostly unused pool).  Every page is checked against its checksum as it is\n"
	"written: a damaged page is written as found and named on standard error,\n"
	"and the exit status is 1 (the image is kept).\n"
	"The pool is opened read-only and never modified.\n"
	"\n"
	"  --used-only  stop after the last page that was ever persisted\n"
	"  --force      overwrite OUT when it exists (never the pool itself, never\n"
	"               through a symbolic link)\n"
	"  --salvage    also a pool whose seq table is damaged (which a program and\n"
	"               the other commands refuse): each page from the copy whose\n"
	"               checksum verifies, the later epoch's when both do; every page\n"
	"               so chosen is named on standard error\n"
	"  -h, --help   this text\n";

static bool all_zero(const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != 0)
			return false;
	return true;
}

static int write_all(int fd, const unsigned char *b, size_t n, off_t off)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, b, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* Open OUT for the image.  Refuses the pool file itself under any name: with
 * --force its truncation would destroy the pool. */
static int open_output(const struct pool *p, const char *out, bool force)
{
	struct stat ps, os;
	if (fstat(p->fd, &ps) == 0 && stat(out, &os) == 0 && ps.st_dev == os.st_dev &&
	    ps.st_ino == os.st_ino) {
		tool_error("%s is the pool itself: choose another output file", out);
		return -1;
	}
	/* O_NOFOLLOW: --force must not truncate whatever a link points to;
	 * O_NONBLOCK: a FIFO must not block the open (it is refused below). */
	int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (force ? 0 : O_EXCL);
	int fd = open(out, flags, 0600);
	if (fd < 0) {
		if (errno == EEXIST)
			tool_error("%s already exists: remove it, choose another name, or pass "
				   "--force to overwrite it", out);
		else if (errno == ENXIO)
			tool_error("%s is a FIFO or device, not a regular file; dump writes only "
				   "regular files (or - for standard output)", out);
		else if (errno == ELOOP)
			tool_error("%s is a symbolic link; dump does not write through links, not "
				   "even with --force: give the real path", out);
		else
			tool_error("cannot create %s: %s", out, strerror(errno));
		return -1;
	}
	if (fstat(fd, &os) != 0 || !S_ISREG(os.st_mode)) {
		tool_error("%s is not a regular file; dump writes only regular files (or - for "
			   "standard output)", out);
		close(fd);
		return -1;
	}
	if (os.st_dev == ps.st_dev && os.st_ino == ps.st_ino) {
		tool_error("%s is the pool itself: choose another output file", out);
		close(fd);
		return -1;
	}
	if (force && ftruncate(fd, 0) != 0) {
		tool_error("cannot truncate %s: %s", out, strerror(errno));
		close(fd);
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

/* What dump found while writing: pages written as found though they fail
 * their checksum, pages taken from the other copy (--salvage). */
struct dump_report {
	uint64_t damaged, salvaged;
};

#define LIST_MAX 10

static bool copy_verifies(const struct pool *p, uint64_t i, int c)
{
	uint64_t want = p->sum[i][c];
	return want != 0 && pool_page_sum(p, i, pool_copy(p, i, c)) == want;
}

/* A seq entry no crash leaves: beyond VER_d + 1 and not the invalid mark. */
static bool seq_sane(const struct pool *p, uint64_t s)
{
	return s == POOL_SEQ_INVALID || s <= *p->ver_d + 1;
}

/* The copy of page i to write, or -1 for zeros.  Normally the consistent
 * copy (pool_valid_copy), as recovery restores it.  With salvage, for a
 * pool whose seq table is damaged: the consistent copy when its checksum
 * verifies and its page's seq entries are sound; otherwise the copy whose
 * checksum verifies, the one of the later epoch when both do and their
 * entries tell (else copy 0, said so); when neither verifies, what
 * pool_valid_copy gives, written as found. */
static int choose_copy(const struct pool *p, uint64_t i, bool salvage, struct dump_report *r)
{
	int c = pool_valid_copy(p, i);
	if (!salvage || i >= p->seq_pages || p->sum == NULL)
		return c;
	uint64_t s0 = p->seq[i][0], s1 = p->seq[i][1];
	bool sane = seq_sane(p, s0) && seq_sane(p, s1) && (s0 != s1 || s0 == 0) &&
		    !(s0 == POOL_SEQ_INVALID && s1 == POOL_SEQ_INVALID);
	if (sane && (c < 0 || copy_verifies(p, i, c)))
		return c;
	bool ok0 = copy_verifies(p, i, 0), ok1 = copy_verifies(p, i, 1);
	int pick;
	const char *how;
	if (ok0 && ok1) {
		bool usable0 = s0 <= *p->ver_d, usable1 = s1 <= *p->ver_d;
		if (usable0 && usable1)
			pick = s1 > s0 ? 1 : 0;
		else if (usable0 || usable1)
			pick = usable0 ? 0 : 1;
		else
			pick = memcmp(pool_copy(p, i, 0), pool_copy(p, i, 1), p->page_size) == 0 ? 0 : -2;
		how = pick == -2 ? "both copies verify and their seq entries do not say which is newer: "
				   "wrote copy 0"
				 : "both copies verify: wrote the later one";
		if (pick == -2)
			pick = 0;
	} else if (ok0 || ok1) {
		pick = ok0 ? 0 : 1;
		how = "wrote the copy whose checksum verifies";
	} else {
		return c;	/* damaged: counted by the caller */
	}
	if (pick == c && sane)
		return c;
	if (r->salvaged++ < LIST_MAX)
		fprintf(stderr, TOOL_NAME ": page %" PRIu64 " (heap address %#" PRIx64 "): seq "
				"entries %" PRIu64 " and %" PRIu64 " (VER_d %" PRIu64 "); %s (copy %d)\n",
			i, p->shadow_base + i * p->page_size, s0, s1, *p->ver_d, how, pick);
	return pick;
}

/* Page i as dump writes it into buf; its checksum checked, a damaged page
 * named on standard error and counted. */
static void read_dump_page(const struct pool *p, uint64_t i, bool salvage, unsigned char *buf,
			   struct dump_report *r)
{
	int c = i < p->npages ? choose_copy(p, i, salvage, r) : -1;
	if (c < 0) {
		memset(buf, 0, p->page_size);
		return;
	}
	memcpy(buf, pool_copy(p, i, c), p->page_size);
	if (p->sum == NULL || copy_verifies(p, i, c))
		return;
	if (r->damaged++ < LIST_MAX)
		fprintf(stderr, TOOL_NAME ": page %" PRIu64 " (heap address %#" PRIx64 "): copy %d "
				"fails its checksum; written as found (damaged)\n",
			i, p->shadow_base + i * p->page_size, c);
}

/* Every page of the image in order to emit(page, bytes), reading the pool
 * in bounded memory with a progress line.  0, or -1 when emit failed. */
static int each_page(const struct pool *p, uint64_t npages, bool salvage, struct dump_report *r,
		     int (*emit)(uint64_t page, const unsigned char *bytes, bool zero, void *arg),
		     void *arg)
{
	unsigned char *buf = malloc(p->page_size);
	if (buf == NULL) {
		tool_error("out of memory");
		return -1;
	}
	struct progress pr;
	progress_start(&pr, "writing the image", npages);
	int rc = 0;
	for (uint64_t i = 0; i < npages && rc == 0; i++) {
		if (i % TOOL_RELEASE_PAGES == 0 && i > 0) {
			tool_release_pages(p, i - TOOL_RELEASE_PAGES, i);
			progress_step(&pr, i);
		}
		read_dump_page(p, i, salvage, buf, r);
		rc = emit(i, buf, all_zero(buf, p->page_size), arg);
	}
	tool_release_pages(p, npages / TOOL_RELEASE_PAGES * TOOL_RELEASE_PAGES, npages);
	progress_end(&pr);
	free(buf);
	if (r->damaged > LIST_MAX)
		fprintf(stderr, TOOL_NAME ": ... and %" PRIu64 " more damaged pages\n",
			r->damaged - LIST_MAX);
	if (r->salvaged > LIST_MAX)
		fprintf(stderr, TOOL_NAME ": ... and %" PRIu64 " more pages salvaged\n",
			r->salvaged - LIST_MAX);
	return rc;
}

static int emit_stdout(uint64_t page, const unsigned char *bytes, bool zero, void *arg)
{
	(void)page;
	(void)zero;
	size_t len = *(const size_t *)arg;
	if (fwrite(bytes, 1, len, stdout) != len) {
		tool_error("writing standard output: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* To standard output: every byte in order, the zeros included. */
static int write_stream(const struct pool *p, uint64_t npages, bool salvage, struct dump_report *r)
{
	size_t len = p->page_size;
	int rc = each_page(p, npages, salvage, r, emit_stdout, &len);
	if (rc == 0 && fflush(stdout) != 0) {
		tool_error("writing standard output: %s", strerror(errno));
		rc = -1;
	}
	return rc;
}

struct file_out {
	int fd;
	const char *name;
	size_t page_size;
};

static int emit_file(uint64_t page, const unsigned char *bytes, bool zero, void *arg)
{
	struct file_out *o = arg;
	if (zero)
		return 0;	/* a hole */
	if (write_all(o->fd, bytes, o->page_size, (off_t)(page * o->page_size)) != 0) {
		tool_error("writing %s: %s", o->name, strerror(errno));
		return -1;
	}
	return 0;
}

static int write_image(const struct pool *p, int fd, const char *out, uint64_t npages,
		       bool salvage, struct dump_report *r)
{
	struct file_out o = { fd, out, p->page_size };
	uint64_t used = npages < p->seq_pages ? npages : p->seq_pages;
	int rc = each_page(p, used, salvage, r, emit_file, &o);
	/* The length covers trailing zero pages that were never written. */
	if (rc == 0 && ftruncate(fd, (off_t)(npages * p->page_size)) != 0) {
		tool_error("setting the size of %s: %s", out, strerror(errno));
		rc = -1;
	}
	if (rc == 0 && fsync(fd) != 0) {
		tool_error("writing %s: %s", out, strerror(errno));
		rc = -1;
	}
	return rc;
}

int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "used-only", no_argument, NULL, 'u' },
		{ "force", no_argument, NULL, 'f' },
		{ "salvage", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool used_only = false, force = false, salvage = false;
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'u': used_only = true; break;
		case 'f': force = true; break;
		case 's': salvage = true; break;
		case 'h': fputs(dump_help, stdout); return TOOL_OK;
		default: return tool_bad_option(dump_usage, "dump", argv);
		}
	}
	if (argc - optind != 2)
		return tool_usage_error(dump_usage, "dump: expected POOL and OUT, got %d operands",
					argc - optind);
	const char *pool_path = argv[optind], *out = argv[optind + 1];

	/* --salvage opens a pool whose seq table fails validation too. */
	struct pool *p = salvage ? tool_open_pool_inspect(pool_path) : tool_open_pool(pool_path);
	if (p == NULL)
		return TOOL_PROBLEM;
	uint64_t npages = p->npages;
	if (used_only)
		npages = (uint64_t)(image_last_used_page(p) + 1);
	struct dump_report rep = { 0, 0 };
	int rc = TOOL_PROBLEM;
	if (strcmp(out, "-") == 0) {
		rc = write_stream(p, npages, salvage, &rep) == 0 ? TOOL_OK : TOOL_PROBLEM;
	} else {
		int fd = open_output(p, out, force);
		if (fd >= 0) {
			if (write_image(p, fd, out, npages, salvage, &rep) == 0) {
				rc = TOOL_OK;
			} else if (!force) {
				/* Created by this command: leave no partial image behind. */
				unlink(out);
			}
			if (close(fd) != 0 && rc == TOOL_OK) {
				tool_error("writing %s: %s", out, strerror(errno));
				rc = TOOL_PROBLEM;
			}
		}
		if (rc == TOOL_OK)
			fprintf(stderr, "%s: wrote %" PRIu64 " bytes (%" PRIu64 " pages) of the image "
					"of VER_d %" PRIu64 "\n", out, npages * p->page_size, npages,
				*p->ver_d);
	}
	if (rc == TOOL_OK && rep.salvaged > 0)
		fprintf(stderr, "%s: %" PRIu64 " page%s salvaged from the copy whose checksum "
				"verifies (the seq table is damaged)\n", out, rep.salvaged,
			rep.salvaged == 1 ? "" : "s");
	if (rc == TOOL_OK && rep.damaged > 0) {
		/* The image is written, and kept: it is the best there is; the
		 * status says it is not all sound. */
		fprintf(stderr, "%s: %" PRIu64 " damaged page%s written as found (listed above)%s\n",
			out, rep.damaged, rep.damaged == 1 ? "" : "s",
			salvage ? "" : "; --salvage takes the other copy where its checksum verifies");
		rc = TOOL_PROBLEM;
	}
	pool_close(p);
	return rc;
}
