/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tool -- what the files of pmthreads-recover share.
 *
 * The tool never changes a pool's contents: info, check, dump and list open
 * it read-only (O_RDONLY, PROT_READ mapping, shared lock), so a pool held by
 * a running program is refused with the pool module's message naming its
 * pid, and a pool being inspected cannot be opened read-write by a program
 * meanwhile.  Only whole pools are written: create makes a new one (never
 * over an existing file), rm removes one that no process holds, and upgrade
 * replaces a pool of an older format by a new file (pool_upgrade).
 *
 * Exit status: 0 success (check: consistent), 1 a problem with the pool or
 * the output (each one printed), 2 a usage error.
 */
#ifndef PMT_RECOVER_TOOL_H
#define PMT_RECOVER_TOOL_H

#include "pmthreads.h"
#include "persist/persist.h"
#include "persist/pool.h"
#include "recovery/recovery.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TOOL_NAME "pmthreads-recover"

enum tool_exit { TOOL_OK = 0, TOOL_PROBLEM = 1, TOOL_USAGE = 2 };

/* The commands (info.c, check.c, dump.c): argv[0] is the command name. */
int cmd_info(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_list(int argc, char **argv);	/* manage.c */
int cmd_rm(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_upgrade(int argc, char **argv);	/* upgrade.c */

/* "pmthreads-recover: error: ..." on stderr (main.c). */
void tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An unknown option or wrong operand count: print the message and the
 * command's usage line to stderr; returns TOOL_USAGE. */
int tool_usage_error(const char *usage, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* getopt_long returned '?' or ':' for argv: report the offending option
 * as a usage error of command cmd; returns TOOL_USAGE. */
int tool_bad_option(const char *usage, const char *cmd, char **argv);

/* The options of `check` and `info` (--json, --help) and their one POOL
 * operand: returns -1 with *json and *path set when the command should run,
 * else the exit status (TOOL_OK after --help, TOOL_USAGE).  json NULL: a
 * command without --json (upgrade). */
int tool_parse_pool_command(int argc, char **argv, const char *cmd, const char *help,
			    const char *usage, bool *json, const char **path);

/* bytes as "12 B", "3.5 MiB" ... for the tool's tables (messages.c). */
void tool_human_size(uint64_t bytes, char *out, size_t len);

/* Open path read-only for inspection (open.c).  On failure prints the pool
 * module's message and returns NULL. */
struct pool *tool_open_pool(const char *path);
/* The same for check: a pool whose version records or seq table fail
 * validation is opened anyway (pool_open's inspect mode), so that check can
 * list every problem. */
struct pool *tool_open_pool_inspect(const char *path);
/* The same for upgrade: a pool of format version 2, 3 or 4 opens too, with an
 * exclusive lock (pool_open's legacy mode), and in inspect mode, so that
 * tool_check_open_pool lists every problem as check does. */
struct pool *tool_open_pool_legacy(const char *path);

/* Every check `check` makes on an open pool, printed as check prints them
 * (check.c).  Returns the number of problems. */
unsigned tool_check_open_pool(const struct pool *p);

/* The consistent heap image in the tool's own memory (image.c), filled on
 * demand: a block of pages is copied from the pool when first touched, and
 * the blocks only read are given back, oldest first, once more than
 * IMAGE_CLEAN_MAX bytes of them are held (copied again should they be read
 * again); blocks written (by heap adoption) stay.  So examining a heap costs
 * memory in proportion to the parts examined, not to the pool. */
#define IMAGE_BLOCK_PAGES 16
#define IMAGE_CLEAN_MAX (32u << 20)
struct image {
	unsigned char *base;	/* where the image lives */
	size_t len;		/* capacity bytes */
	uint64_t pages_restored;	/* page copies read from the pool so far */
	/* The fill's state (image.c): */
	const struct pool *pool;
	size_t block_bytes;
	unsigned char *state;	/* per block: absent, read-only copy, written */
	size_t nblocks;
	uint32_t *ring;		/* read-only blocks in the order filled */
	size_t ring_cap, ring_head, ring_n;
};
/* Reserve the image at the recorded shadow base (anywhere else when that
 * range is taken), every page reading as the consistent copy of its page
 * in p (pages never persisted: zeros).  Reads the pool only.  0, or -1
 * after printing why.  One image at a time; p must stay open until
 * image_free. */
int image_load(const struct pool *p, struct image *img);
void image_free(struct image *img);

/* Drop the tool's mapping of [addr, addr+len) of the pool where it still
 * maps the file's pages, keeping the pages that are the process's own (a
 * log replay's) (stream.c).  Nothing changes for the reader but the
 * resident memory. */
void tool_release(const void *addr, size_t len);
/* The same for both copies of pages [first, end). */
void tool_release_pages(const struct pool *p, uint64_t first, uint64_t end);
/* Pages read between two releases of the whole-pool scans. */
#define TOOL_RELEASE_PAGES 4096

/* A progress line on standard error while a command reads a whole pool,
 * only when standard error is a terminal (stream.c). */
struct progress {
	bool on, shown;
	const char *what;
	uint64_t total, last_ns;
};
void progress_start(struct progress *pr, const char *what, uint64_t total);
void progress_step(struct progress *pr, uint64_t done);
void progress_end(struct progress *pr);	/* the line cleared */

/* Index of the last page with a consistent copy, or -1 when none has one. */
int64_t image_last_used_page(const struct pool *p);

/* The heap found in an image (heap_image.c). */
struct named_object {
	char name[PMTHREADS_NAME_MAX];
	uint64_t address;	/* as the program sees it (at the recorded base) */
	uint64_t size;		/* as nvmalloc was asked for it */
};
struct named_objects {
	struct named_object *v;	/* sorted by name */
	size_t n;
};
enum heap_image_state {
	HEAP_IMAGE_ADOPTED = 0,	/* the image holds a valid heap, now adopted */
	HEAP_IMAGE_NONE = 1,	/* nothing to adopt (why says what) */
	HEAP_IMAGE_INVALID = 2,	/* the image's heap is refused (why says why) */
};
/* Adopt the heap in the image as a recovering program would (heap_init with
 * fresh == false), in the tool's memory only.  why: a sentence for the
 * NONE and INVALID cases. */
enum heap_image_state heap_image_adopt(struct image *img, const struct pool *p, char *why,
				       size_t why_len);
/* After ADOPTED: the named objects.  0, or -1 after printing an error. */
int heap_image_names(const struct image *img, const struct pool *p, struct named_objects *out);
void heap_image_names_free(struct named_objects *o);
/* Walk every allocator structure of the heap in the image as it is (not
 * adopted), and verify its metadata pages against p's checksums.  Returns
 * the number of problems, each passed to report; 0 with summary describing
 * the heap; with no heap module, 0 and summary says so. */
unsigned heap_image_check(struct image *img, const struct pool *p, char *summary,
			  size_t summary_len, void (*report)(const char *msg, void *arg), void *arg);

/* Write s as a JSON string literal (quotes and escapes included) (json.c). */
void json_string(FILE *f, const char *s);

#endif
