/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_pool -- libFuzzer harness over everything that reads a pool file:
 * pool_open (read-only, inspect and read-write), pool_check, the torn-copy
 * invalidation and recovery, heap adoption (heap_init with its validation),
 * the metadata pages' checksums, the allocator on the adopted heap (with
 * and without the checksums), and pmthreads-recover's check, info, dump and
 * upgrade commands (upgrade last: it may replace the file by a new pool,
 * which it then opens; a format-2 or -3 input gets there through the
 * reseal bit below).
 *
 * Input: a pool file in "line" form, so that a 2 MiB sparse pool is a few
 * KiB of input and mutations land on its content, not on zeros:
 *   u32 file size in KiB (little-endian; clamped to 16 MiB); its top bit
 *       set: recompute the header's and version records' checksums after
 *       the records are applied (pool_reseal), so that mutations of the
 *       header are judged by their content, not just by their checksum
 *   then records of u32 line index (64-byte lines) + 64 bytes
 * fuzz/pool2seed.py turns a real pool into this form; fuzz/run.sh makes the
 * seed corpus from real programs' pools and runs the fuzzer.
 *
 * A corrupt structure the allocator meets while running (heap_corrupt) is a
 * refusal, not a bug: the harness's handler jumps back here instead of
 * stopping the process.  Anything else that stops the process (a sanitizer
 * report, a signal, a hang) is a finding.
 */
#include "heap/heap.h"
#include "persist/persist.h"
#include "recovery/recovery.h"
#include "persist/pool.h"
#include "prim/prim.h"
#include "runtime/meta_sums.h"
#include "base/log.h"

#include <fcntl.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cmd_info(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_upgrade(int argc, char **argv);

#define MAX_FILE (16u << 20)
#define LINE 64

static char dir[64], pool_path[96], out_path[96];
static sigjmp_buf corrupt_jump;

static void on_corrupt(const char *msg)
{
	(void)msg;
	siglongjmp(corrupt_jump, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "%s/pmt-fuzz-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (mkdtemp(dir) == NULL)
		abort();
	snprintf(pool_path, sizeof(pool_path), "%s/pool", dir);
	snprintf(out_path, sizeof(out_path), "%s/out", dir);
	/* The commands print their findings: not the fuzzer's business. */
	int null = open("/dev/null", O_WRONLY);
	if (null >= 0) {
		dup2(null, STDOUT_FILENO);
		close(null);
	}
	log_set_level(LOG_ERR);
	heap_set_corruption_handler(on_corrupt);
	return 0;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int write_pool(const uint8_t *data, size_t size)
{
	if (size < 4)
		return -1;
	bool reseal = (le32(data) & 0x80000000u) != 0;
	uint64_t bytes = (uint64_t)(le32(data) & 0x7fffffffu) * 1024;
	if (bytes > MAX_FILE)
		bytes = MAX_FILE;
	unlink(pool_path);
	int fd = open(pool_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes) != 0) {
		close(fd);
		return -1;
	}
	for (size_t i = 4; i + 4 + LINE <= size; i += 4 + LINE) {
		uint64_t off = (uint64_t)le32(data + i) * LINE;
		if (off + LINE <= bytes && pwrite(fd, data + i + 4, LINE, (off_t)off) != LINE)
			break;
	}
	unsigned char head[POOL_RESEAL_BYTES];
	if (reseal && pread(fd, head, sizeof(head), 0) == (ssize_t)sizeof(head)) {
		pool_reseal(head, sizeof(head));
		if (pwrite(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head))
			abort();
	}
	close(fd);
	return 0;
}

static void run_tool(int argc, char **argv)
{
	optind = 1;
	if (strcmp(argv[0], "check") == 0)
		cmd_check(argc, argv);
	else if (strcmp(argv[0], "info") == 0)
		cmd_info(argc, argv);
	else if (strcmp(argv[0], "upgrade") == 0)
		cmd_upgrade(argc, argv);
	else
		cmd_dump(argc, argv);
}

/* What a program does with the pool: open read-write, recover, adopt the
 * heap, allocate and free.  sums false: without the page checksums (neither
 * restore's verification of every page nor meta_sums'), so that a mutated
 * page still reaches the structural validation and the allocator behind
 * it, the second line of defence. */
static void run_program_path(bool sums)
{
	struct pool_open_options o;
	memset(&o, 0, sizeof(o));
	o.path = pool_path;
	o.capacity = 1u << 20;
	o.nvm = NVM_MSYNC;
	struct pool *p = NULL;
	if (pool_open(&p, &o) != 0)
		return;
	size_t len = (size_t)(p->npages * p->page_size);
	void *shadow = prim_map_any(len);
	if (shadow == NULL) {
		pool_close(p);
		return;
	}
	if (sums) {
		if (recovery_restore_image(p, shadow) == RECOVERY_REFUSED)
			goto out;	/* refused, as the runtime would */
	} else {
		persist_invalidate_torn(p);
		for (uint64_t i = 0; i < p->seq_pages; i++)
			recovery_read_page(p, i, (unsigned char *)shadow + i * p->page_size);
	}
	meta_sums_bind(sums ? p : NULL);
	if (heap_init(shadow, len, *p->ver_d == 0) == 0 && sigsetjmp(corrupt_jump, 0) == 0) {
		void *keep[64];
		unsigned n = 0;
		for (unsigned i = 0; i < 192; i++) {
			size_t sz = (size_t)16 << (i % 13);
			void *q = heap_malloc(sz);
			if (q != NULL && n < 64)
				keep[n++] = q;
			else if (q != NULL)
				heap_free(q);
			if (i % 3 == 0 && n > 0)
				heap_free(keep[--n]);
		}
		size_t usable;
		heap_name_get("accounts", &usable);
		/* NVthreads' idiom on the recovered names: nvmalloc holds the
		 * old object, nvrecover copies it into the new one and frees
		 * it; a name the input never had is held by nothing. */
		unsigned char back[64];
		for (unsigned i = 0; i < 2; i++) {
			const char *name = i == 0 ? "accounts" : "fuzz";
			void *fresh = heap_name_alloc(name, sizeof(back));
			heap_name_recover(name, back, sizeof(back), NULL);
			if (fresh != NULL)
				heap_name_recover(name, fresh, sizeof(back), NULL);
		}
		heap_name_release_held();
		while (n > 0)
			heap_free(keep[--n]);
		struct heap_validate_report r;
		heap_validate_full(&r);
	}
	meta_sums_bind(NULL);
out:
	prim_unmap(shadow, len);
	pool_close(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (write_pool(data, size) != 0)
		return 0;
	char *check[] = { "check", pool_path, NULL };
	char *check_json[] = { "check", "--json", pool_path, NULL };
	char *info[] = { "info", "--json", pool_path, NULL };
	char *dump[] = { "dump", "--force", "--used-only", pool_path, out_path, NULL };
	run_tool(2, check);
	run_tool(3, check_json);
	run_tool(3, info);
	run_tool(5, dump);
	run_program_path(true);
	run_program_path(false);
	char *upgrade[] = { "upgrade", pool_path, NULL };
	run_tool(2, upgrade);
	run_tool(2, check);	/* the upgraded pool, if it was */
	return 0;
}
