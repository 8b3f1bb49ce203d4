/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_format -- the pool's header and version records.  See pool_internal.h. */
#include "persist/pool_internal.h"

#include <string.h>
#include <xxhash.h>

uint64_t pool_header_checksum(const struct pool_header *h)
{
	return XXH3_64bits(h, offsetof(struct pool_header, checksum));
}

uint64_t pool_record_checksum(const struct ver_record *r, int slot, const uint8_t uuid[16])
{
	uint64_t seed;
	memcpy(&seed, uuid, sizeof(seed));
	return XXH3_64bits_withSeed(r, offsetof(struct ver_record, check),
				    seed ^ (uint64_t)(slot + 1));
}

struct ver_record pool_make_record(uint64_t gen, uint64_t ver_d, uint64_t clean, int slot,
				     const uint8_t uuid[16])
{
	struct ver_record r = { gen, ver_d, clean, 0 };
	r.check = pool_record_checksum(&r, slot, uuid);
	return r;
}

bool pool_record_valid(const struct ver_record *r, int slot, const uint8_t uuid[16])
{
	return r->check == pool_record_checksum(r, slot, uuid) && r->ver_d != POOL_SEQ_INVALID &&
	       r->clean <= 1;
}

int pool_current_record(const struct ver_record r[2], const uint8_t uuid[16])
{
	bool ok0 = pool_record_valid(&r[0], 0, uuid), ok1 = pool_record_valid(&r[1], 1, uuid);
	if (ok0 && ok1) {
		int cur = r[1].gen > r[0].gen ? 1 : 0;
		const struct ver_record *n = &r[cur], *o = &r[1 - cur];
		if (n->gen != o->gen + 1 || n->ver_d < o->ver_d || n->ver_d - o->ver_d > 1)
			return -1;
		return cur;
	}
	return ok0 ? 0 : ok1 ? 1 : -1;
}

struct pool_layout pool_layout_for(uint64_t npages, uint64_t page_size)
{
	return pool_layout_of_version(POOL_FORMAT_VERSION, npages, page_size);
}

struct pool_layout pool_layout_of_version(uint32_t version, uint64_t npages, uint64_t page_size)
{
	struct pool_layout l = { 0 };
	l.version = version;
	l.seq_off = page_size;
	l.sum_off = l.seq_off + pool_round_up(npages * 2 * sizeof(uint64_t), page_size);
	l.data_off = l.sum_off + pool_round_up(npages * 2 * sizeof(uint64_t), page_size);
	l.file_size = l.data_off + npages * 2 * page_size;
	/* Format 7 keeps each copy in a plane of its own, so that the copies
	 * an epoch writes whole for a run of pages are one run of the file
	 * (persist.c's whole pages, written in large sequential requests);
	 * before it the two copies of a page were side by side, and such a
	 * run was every other page. */
	if (version >= 7) {
		l.page_step = page_size;
		l.copy_step = npages * page_size;
	} else {
		l.page_step = 2 * page_size;
		l.copy_step = page_size;
	}
	if (version == 2) {
		uint64_t sum_bytes = l.data_off - l.sum_off;
		l.data_off = l.sum_off;
		l.file_size -= sum_bytes;
	}
	return l;
}

struct pool_layout pool_layout_with_log(struct pool_layout l, uint64_t log_size)
{
	l.log_off = l.file_size;
	l.log_size = log_size;
	l.file_size += log_size;
	return l;
}

uint64_t pool_default_log_size(uint64_t capacity, size_t page_size)
{
	uint64_t s = pool_round_up(capacity / 4, page_size);
	if (s < NVM_LOG_MIN_SIZE)
		s = pool_round_up(NVM_LOG_MIN_SIZE, page_size);
	return s > POOL_LOG_DEFAULT_MAX ? POOL_LOG_DEFAULT_MAX : s;
}

struct nvm_log_region pool_log_region(const struct pool_layout *l, const uint8_t uuid[16])
{
	uint64_t seed;
	memcpy(&seed, uuid, sizeof(seed));
	return (struct nvm_log_region){ l->log_off, l->log_size, POOL_LOG_HEAD_OFF,
					seed ^ 0x6c6f67726e67ULL, l->version >= 7 };
}

bool pool_layout_of_header(const struct pool_header *h, struct pool_layout *out)
{
	*out = pool_layout_of_version(h->format_version, h->npages, h->page_size);
	if (h->format_version < 6)
		return true;
	if (h->file_size < out->file_size)
		return false;
	uint64_t log_size = h->file_size - out->file_size;
	*out = pool_layout_with_log(*out, log_size);
	return log_size >= NVM_LOG_MIN_SIZE && log_size % h->page_size == 0 &&
	       log_size <= POOL_LOG_MAX;
}

void pool_header_set_layout(struct pool_header *h, const struct pool_layout *l)
{
	h->seq_off = l->seq_off;
	h->data_off = l->data_off;
	h->file_size = l->file_size;
}

bool pool_header_has_layout(const struct pool_header *h, const struct pool_layout *l)
{
	return h->seq_off == l->seq_off && h->data_off == l->data_off &&
	       h->file_size == l->file_size;
}

void pool_header_image(unsigned char *buf, struct pool_header *h, uint64_t ver_d, uint64_t clean)
{
	memset(buf, 0, POOL_HEADER_READ);
	h->checksum = pool_header_checksum(h);
	memcpy(buf, h, sizeof(*h));
	for (int slot = 0; slot < 2; slot++) {
		struct ver_record r = pool_make_record((uint64_t)slot, ver_d, clean, slot, h->uuid);
		memcpy(buf + POOL_REC_OFF(slot), &r, sizeof(r));
	}
}

void pool_reseal(unsigned char *head, size_t len)
{
	_Static_assert(POOL_HEADER_READ == POOL_RESEAL_BYTES, "POOL_RESEAL_BYTES is stale");
	if (len < POOL_HEADER_READ)
		return;
	struct pool_header h;
	memcpy(&h, head, sizeof(h));
	h.checksum = pool_header_checksum(&h);
	memcpy(head, &h, sizeof(h));
	for (int slot = 0; slot < 2; slot++) {
		struct ver_record r;
		memcpy(&r, head + POOL_REC_OFF(slot), sizeof(r));
		r.check = pool_record_checksum(&r, slot, h.uuid);
		memcpy(head + POOL_REC_OFF(slot), &r, sizeof(r));
	}
}

