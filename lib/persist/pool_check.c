/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_check -- every problem of an open pool, for pmthreads-recover check.
 * See pool.h. */
#include "persist/pool_internal.h"

#include "prim/prim.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define CHECK_DETAILS 64

struct problem_list {
	void (*report)(const char *msg, void *arg);
	void *arg;
	unsigned problems;
};

__attribute__((format(printf, 2, 3))) static void problem(struct problem_list *c, const char *fmt, ...)
{
	c->problems++;
	if (c->report == NULL || c->problems > CHECK_DETAILS)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->report(msg, c->arg);
}

/* The header as it is now against what was found at open. */
static void check_header(const struct pool *p, struct problem_list *c, const struct pool_header *h)
{
	if (memcmp(h->magic, POOL_MAGIC, 8) != 0)
		problem(c, "header: magic is gone");
	/* p->format_version: POOL_FORMAT_VERSION, or an older one opened for
	 * pool_upgrade, which checks it first. */
	if (h->format_version != p->format_version)
		problem(c, "header: format version %u, expected %u", h->format_version,
			p->format_version);
	if (pool_header_checksum(h) != h->checksum)
		problem(c, "header: checksum mismatch (the immutable part changed after open)");
	struct pool_layout l;
	if (h->npages != p->npages || h->page_size != p->page_size || !pool_layout_of_header(h, &l) ||
	    l.file_size != p->file_size)
		problem(c, "header: layout differs from the one found at open");
	struct stat st;
	if (prim_fstat(p->fd, &st) == 0 && (uint64_t)st.st_size != p->file_size)
		problem(c, "file: %llu bytes, the header says %llu", (unsigned long long)st.st_size,
			(unsigned long long)p->file_size);
}

/* The two version records: one current one.  One record that fails its
 * checksum beside a current one is normal after a crash while it was
 * written. */
static void check_records(const struct pool *p, struct problem_list *c, const uint8_t *uuid)
{
	struct ver_record rec[2];
	memcpy(rec, (const unsigned char *)p->nvm->base + POOL_REC_OFF(0), sizeof(rec[0]));
	memcpy(rec + 1, (const unsigned char *)p->nvm->base + POOL_REC_OFF(1), sizeof(rec[1]));
	if (pool_current_record(rec, uuid) < 0)
		problem(c, "version records (offsets %d and %d): %s; VER_d is unknown, taken "
			"as %llu below", POOL_REC_OFF(0), POOL_REC_OFF(1),
			pool_record_valid(&rec[0], 0, uuid) || pool_record_valid(&rec[1], 1, uuid)
				? "they contradict each other" : "both fail their checksums",
			(unsigned long long)*p->ver_d);
}

/* Page i's two seqs against VER_d v; returns how many copies are torn. */
static uint64_t check_page(const struct pool *p, struct problem_list *c, uint64_t i, uint64_t v)
{
	uint64_t s[2] = { p->seq[i][0], p->seq[i][1] };
	bool is_torn[2], invalid[2];
	uint64_t torn = 0;
	for (int k = 0; k < 2; k++) {
		invalid[k] = s[k] == POOL_SEQ_INVALID;
		is_torn[k] = !invalid[k] && s[k] > v;
		if (is_torn[k] && s[k] != v + 1)
			problem(c, "page %llu copy %d: seq %llu (offset %llu) is beyond the next "
				"epoch %llu", (unsigned long long)i, k, (unsigned long long)s[k],
				(unsigned long long)pool_seq_offset(p, i, k),
				(unsigned long long)(v + 1));
		torn += is_torn[k];
	}
	/* Each epoch writes one copy of a page, and the next working copy is
	 * always an invalid or torn one: so at most one copy of a page is ever
	 * not valid, and two valid copies never share a seq. */
	if ((invalid[0] || is_torn[0]) && (invalid[1] || is_torn[1]))
		problem(c, "page %llu: neither copy is valid (seq %llu and %llu, VER_d %llu)",
			(unsigned long long)i, (unsigned long long)s[0], (unsigned long long)s[1],
			(unsigned long long)v);
	else if (s[0] == s[1] && s[0] != 0)
		problem(c, "page %llu: both copies have seq %llu", (unsigned long long)i,
			(unsigned long long)s[0]);
	return torn;
}

unsigned pool_check(const struct pool *p, void (*report)(const char *msg, void *arg), void *arg)
{
	struct problem_list c = { report, arg, 0 };
	struct pool_header h;
	memcpy(&h, p->nvm->base, sizeof(h));
	check_header(p, &c, &h);
	check_records(p, &c, h.uuid);
	uint64_t v = *p->ver_d, clean = *p->clean;
	uint64_t torn = 0;
	for (uint64_t i = 0; i < p->seq_pages; i++)
		torn += check_page(p, &c, i, v);
	if (torn != 0 && clean == 1)
		problem(&c, "the pool is marked cleanly closed but %llu copies are from an "
			"interrupted epoch", (unsigned long long)torn);
	if (c.problems > CHECK_DETAILS && report != NULL) {
		char msg[128];
		snprintf(msg, sizeof(msg), "... and %u more problems", c.problems - CHECK_DETAILS);
		report(msg, arg);
	}
	return c.problems;
}

void pool_summarize(const struct pool *p, struct pool_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->ver_d = *p->ver_d;
	s->clean = *p->clean == 1;
	s->holder_pid = *p->holder_pid;
	struct nvm_log_info li;
	if (nvm_log_get_info(p->nvm, &li) == 0) {
		s->log_size = li.size;
		s->log_records = li.records_replayed;
		s->log_bytes = li.bytes_replayed;
	}
	for (uint64_t i = 0; i < p->seq_pages; i++) {
		for (int k = 0; k < 2; k++) {
			uint64_t q = p->seq[i][k];
			if (q == POOL_SEQ_INVALID)
				s->invalid_copies++;
			else if (q > s->ver_d)
				s->torn_copies++;
		}
		if (pool_valid_copy(p, i) >= 0)
			s->pages_written++;
	}
}
