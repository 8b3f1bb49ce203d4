/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_validate -- an existing pool's header, version records and seq table
 * checked before anything of it is used.  See pool_internal.h. */
#include "persist/pool.h"
#include "persist/pool_internal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <string.h>
#include <sys/stat.h>

/* The magic, and a format version this pmthreads reads (an older one only
 * for pool_upgrade, o->legacy). */
static int check_version(const unsigned char *buf, const struct pool_header *h, const char *path,
			 const struct pool_open_options *o)
{
	if (memcmp(h->magic, POOL_MAGIC, 8) != 0) {
		if (pool_unfinished_format(buf))
			err_set("%s is a pool whose creation was interrupted (it never held data); "
				"it was left untouched: the program's next start creates it again "
				"(or remove it)", path);
		else
			err_set("%s is not a pmthreads pool (no pool header); it was left "
				"untouched: %s", path, POOL_REFUSE_FIX);
		return -1;
	}
	if (h->format_version == 1) {
		err_set("%s is a pmthreads pool of format version 1, which this pmthreads (format "
			"version %u) does not read; it was left "
			"untouched: finish with the pmthreads that made it (its pmthreads-recover "
			"dump saves the heap image), then remove the file and let the program "
			"create a new pool", path, POOL_FORMAT_VERSION);
		return -1;
	}
	bool older = h->format_version >= 2 && h->format_version < POOL_FORMAT_RW_OLDEST;
	if (older && !o->legacy) {
		/* The same refusal for all: versions 3 and 4 have the same
		 * layout, but their checksums (of the metadata pages only, or
		 * another function of every page) would fail verification as if
		 * the pages were corrupt. */
		err_set("%s is a pmthreads pool of format version %u, which this pmthreads (format "
			"version %u: a checksum of every page copy, kept current from the lines "
			"each epoch rewrites and verified whenever a page is restored) does not "
			"read; it was left untouched: convert it, keeping its data, with "
			"'pmthreads-recover upgrade %s' (while no program uses it)",
			path, h->format_version, POOL_FORMAT_VERSION, path);
		return -1;
	}
	if (h->format_version > POOL_FORMAT_VERSION) {
		err_set("%s is a pmthreads pool of format version %u, but this pmthreads reads "
			"versions up to %u; it was left untouched: use a matching pmthreads, or %s",
			path, h->format_version, POOL_FORMAT_VERSION, POOL_REFUSE_FIX);
		return -1;
	}
	return 0;
}

/* The header's checksum, and its page size, layout and size against this
 * system and the file. */
static int check_layout(const struct pool_header *h, const struct stat *st, const char *path,
			size_t page_size)
{
	if (h->header_bytes != sizeof(*h) || pool_header_checksum(h) != h->checksum) {
		err_set("the header of pool %s fails its checksum (the file is corrupt); it was "
			"left untouched: %s", path, POOL_REFUSE_FIX);
		return -1;
	}
	if (h->page_size != page_size) {
		err_set("pool %s was made with page size %llu but this system's is %zu; it was "
			"left untouched: use it on a matching system, or %s", path,
			(unsigned long long)h->page_size, page_size, POOL_REFUSE_FIX);
		return -1;
	}
	struct pool_layout l;
	if (h->npages == 0 || h->npages > POOL_MAX_PAGES || !pool_layout_of_header(h, &l) ||
	    !pool_header_has_layout(h, &l)) {
		err_set("pool %s has an inconsistent layout in its header (corrupt); it was left "
			"untouched: %s", path, POOL_REFUSE_FIX);
		return -1;
	}
	if ((uint64_t)st->st_size < h->file_size) {
		err_set("pool %s is truncated: %llu bytes, its header says %llu; it was left "
			"untouched: restore it from a copy, or %s", path,
			(unsigned long long)st->st_size, (unsigned long long)h->file_size,
			POOL_REFUSE_FIX);
		return -1;
	}
	if ((uint64_t)st->st_size > h->file_size) {
		err_set("pool %s is %llu bytes, larger than its header says (%llu): it was changed "
			"by something else and left untouched: %s", path,
			(unsigned long long)st->st_size, (unsigned long long)h->file_size,
			POOL_REFUSE_FIX);
		return -1;
	}
	return 0;
}

/* The current version record, into rec; in inspect mode there may be none. */
int pool_read_records(const unsigned char *buf, const struct pool_header *h, const char *path,
		      const struct pool_open_options *o, bool replayed, struct pool_records *rec)
{
	memcpy(&rec->r[0], buf + POOL_REC_OFF(0), sizeof(rec->r[0]));
	memcpy(&rec->r[1], buf + POOL_REC_OFF(1), sizeof(rec->r[1]));
	rec->cur = pool_current_record(rec->r, h->uuid);
	if (rec->cur < 0 && !o->inspect) {
		err_set("pool %s has no valid version record (VER_d)%s: the records at offsets %d "
			"and %d fail their checksums or contradict each other (the file is "
			"corrupt); it was left untouched: %s", path,
			replayed ? " once its log is replayed" : "", POOL_REC_OFF(0),
			POOL_REC_OFF(1), POOL_REFUSE_FIX);
		return -1;
	}
	return 0;
}

/* The creator's name, whole, and the one o expects. */
static int check_creator(const struct pool_header *h, const char *path,
			 const struct pool_open_options *o)
{
	if (h->creator[POOL_CREATOR_MAX - 1] != '\0') {
		err_set("pool %s has a corrupt creator name; it was left untouched: %s", path,
			POOL_REFUSE_FIX);
		return -1;
	}
	if (o->creator != NULL && strncmp(h->creator, o->creator, POOL_CREATOR_MAX - 1) != 0) {
		err_set("pool %s was created by the program '%s', not by '%s'; it was left "
			"untouched: give this program its own pool with another PMTHREADS_POOL "
			"path, or delete the file if the data of '%s' is no longer needed",
			path, h->creator, o->creator, h->creator);
		return -1;
	}
	return 0;
}

int pool_validate_header(const unsigned char *buf, const struct stat *st, const char *path,
			 const struct pool_open_options *o, size_t page_size,
			 struct pool_header *h, struct pool_records *rec)
{
	memcpy(h, buf, sizeof(*h));
	if (check_version(buf, h, path, o) != 0 || check_layout(h, st, path, page_size) != 0 ||
	    pool_read_records(buf, h, path, o, false, rec) != 0 || check_creator(h, path, o) != 0)
		return -1;
	return 0;
}

uint64_t pool_seq_extent(int fd, const struct pool_header *h, uint64_t sum_off)
{
	off_t end = (off_t)sum_off, last = (off_t)h->seq_off, start;
	int r;
	while ((r = prim_next_data(fd, last, end, &start, &last)) == 1)
		;
	if (r < 0)
		return h->npages;
	uint64_t bytes = (uint64_t)(last - (off_t)h->seq_off);
	uint64_t pages = (bytes + 2 * sizeof(uint64_t) - 1) / (2 * sizeof(uint64_t));
	return pages < h->npages ? pages : h->npages;
}

uint64_t pool_validate_seq(const struct pool *p)
{
	const uint64_t v = p->ver_d_now;
	uint64_t bad = 0;
	for (uint64_t i = 0; i < p->seq_pages; i++) {
		uint64_t s0 = p->seq[i][0], s1 = p->seq[i][1];
		bool inv0 = s0 == POOL_SEQ_INVALID, inv1 = s1 == POOL_SEQ_INVALID;
		bool far0 = !inv0 && s0 > v + 1, far1 = !inv1 && s1 > v + 1;
		bool out0 = inv0 || s0 > v, out1 = inv1 || s1 > v;
		if (!far0 && !far1 && !(out0 && out1) && (s0 != s1 || s0 == 0))
			continue;
		if (bad++ != 0)
			continue;
		int c = far0 || (!far1 && inv0) ? 0 : 1;
		if (far0 || far1)
			err_set("pool %s: seq entry of page %llu copy %d (offset %llu) is %llu, beyond "
				"the next epoch %llu (VER_d %llu): the seq table is corrupt",
				p->path, (unsigned long long)i, c,
				(unsigned long long)pool_seq_offset(p, i, c),
				(unsigned long long)p->seq[i][c], (unsigned long long)(v + 1),
				(unsigned long long)v);
		else if (out0 && out1)
			err_set("pool %s: neither copy of page %llu is valid (seq entries at offset "
				"%llu: %llu and %llu, VER_d %llu): the seq table is corrupt",
				p->path, (unsigned long long)i,
				(unsigned long long)pool_seq_offset(p, i, 0), (unsigned long long)s0,
				(unsigned long long)s1, (unsigned long long)v);
		else
			err_set("pool %s: both copies of page %llu have seq %llu (offset %llu): the "
				"seq table is corrupt", p->path, (unsigned long long)i,
				(unsigned long long)s0, (unsigned long long)pool_seq_offset(p, i, 0));
	}
	return bad;
}
