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
	struct pool_layout l;
	l.seq_off = page_size;
	l.sum_off = l.seq_off + pool_round_up(npages * 2 * sizeof(uint64_t), page_size);
	l.data_off = l.sum_off + pool_round_up(npages * 2 * sizeof(uint64_t), page_size);
	l.file_size = l.data_off + npages * 2 * page_size;
	return l;
}

struct pool_layout pool_layout_of_version(uint32_t version, uint64_t npages, uint64_t page_size)
{
	struct pool_layout l = pool_layout_for(npages, page_size);
	if (version == 2) {
		uint64_t sum_bytes = l.data_off - l.sum_off;
		l.data_off = l.sum_off;
		l.file_size -= sum_bytes;
	}
	return l;
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

