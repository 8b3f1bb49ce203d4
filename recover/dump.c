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

static const char dump_usage[] = "Usage: " TOOL_NAME " dump [--used-only] [--force] POOL OUT|-\n";
static const char dump_help[] =
	"Usage: " TOOL_NAME " dump [--used-only] [--force] POOL OUT|-\n"
	"Write the pool's consistent heap image (the last durable epoch, as the\n"
	"program would recover it) to OUT: capacity bytes, byte k of OUT being byte k\n"
	"of the heap, pages never persisted as zeros (holes in a sparse file).\n"
	"OUT - writes to standard output (all of it: add --used-only for a large,\n"
	"mostly unused pool).\n"
	"The pool is opened read-only and never modified.\n"
	"\n"
	"  --used-only  stop after the last page that was ever persisted\n"
	"  --force      overwrite OUT when it exists (never the pool itself, never\n"
	"               through a symbolic link)\n"
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

/* To standard output: every byte in order, the zeros included. */
static int write_stream(const struct pool *p, uint64_t npages)
{
	unsigned char *buf = malloc(p->page_size);
	if (buf == NULL) {
		tool_error("out of memory");
		return -1;
	}
	int rc = 0;
	for (uint64_t i = 0; i < npages && rc == 0; i++) {
		recovery_read_page(p, i, buf);
		if (fwrite(buf, 1, p->page_size, stdout) != p->page_size) {
			tool_error("writing standard output: %s", strerror(errno));
			rc = -1;
		}
	}
	free(buf);
	if (rc == 0 && fflush(stdout) != 0) {
		tool_error("writing standard output: %s", strerror(errno));
		rc = -1;
	}
	return rc;
}

static int write_image(const struct pool *p, int fd, const char *out, uint64_t npages)
{
	unsigned char *buf = malloc(p->page_size);
	if (buf == NULL) {
		tool_error("out of memory");
		return -1;
	}
	int rc = 0;
	for (uint64_t i = 0; i < npages && i < p->seq_pages && rc == 0; i++) {
		if (pool_valid_copy(p, i) < 0)
			continue;
		recovery_read_page(p, i, buf);
		if (all_zero(buf, p->page_size))
			continue;
		if (write_all(fd, buf, p->page_size, (off_t)(i * p->page_size)) != 0) {
			tool_error("writing %s: %s", out, strerror(errno));
			rc = -1;
		}
	}
	free(buf);
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
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool used_only = false, force = false;
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'u': used_only = true; break;
		case 'f': force = true; break;
		case 'h': fputs(dump_help, stdout); return TOOL_OK;
		default: return tool_bad_option(dump_usage, "dump", argv);
		}
	}
	if (argc - optind != 2)
		return tool_usage_error(dump_usage, "dump: expected POOL and OUT, got %d operands",
					argc - optind);
	const char *pool_path = argv[optind], *out = argv[optind + 1];

	struct pool *p = tool_open_pool(pool_path);
	if (p == NULL)
		return TOOL_PROBLEM;
	uint64_t npages = p->npages;
	if (used_only)
		npages = (uint64_t)(image_last_used_page(p) + 1);
	int rc = TOOL_PROBLEM;
	if (strcmp(out, "-") == 0) {
		rc = write_stream(p, npages) == 0 ? TOOL_OK : TOOL_PROBLEM;
		pool_close(p);
		return rc;
	}
	int fd = open_output(p, out, force);
	if (fd >= 0) {
		if (write_image(p, fd, out, npages) == 0) {
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
		fprintf(stderr, "%s: wrote %" PRIu64 " bytes (%" PRIu64 " pages) of the image of VER_d %"
				PRIu64 "\n", out, npages * p->page_size, npages, *p->ver_d);
	pool_close(p);
	return rc;
}
