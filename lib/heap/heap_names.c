/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_names -- the name table: names bound to heap objects (nvmalloc's
 * name argument, nvrecover's lookup), kept inside the heap.
 *
 * Each binding is a node (a small block from the heap itself) on two hash
 * chains: one by name, for set/get, and one by object, so that freeing an
 * object drops its names in O(1) rather than by scanning the table.  The
 * two bucket arrays share one page run, doubled when the table holds more
 * nodes than buckets.  A single prim_lock covers the table; frees of
 * objects that were never named skip it (name_count == 0 is checked
 * first), which is the common case for nvfree.
 */
#include "heap/heap.h"

#include "heap/heap_layout.h"
#include "base/log.h"
#include "quiesce/quiesce.h"

#include <pmthreads.h>

#include <errno.h>
#include <string.h>

struct name_node {
	char name[PMTHREADS_NAME_MAX];
	uint64_t obj;		/* offset of the named object */
	uint64_t next_name;	/* offset of the next node on the name chain */
	uint64_t next_obj;	/* ... on the object chain */
};

#define NAME_BUCKETS_MIN 256u	/* two arrays of 8-byte offsets: one page */

/* Bucket arrays: name chains first, then object chains. */
static uint64_t *name_bucket(const struct heap_hdr *h, uint64_t hash)
{
	uint64_t *b = heap_at(h->name_buckets << HEAP_PAGE_SHIFT);
	return &b[hash & (h->name_nbuckets - 1)];
}

static uint64_t *obj_bucket(const struct heap_hdr *h, uint64_t hash)
{
	uint64_t *b = heap_at(h->name_buckets << HEAP_PAGE_SHIFT);
	return &b[h->name_nbuckets + (hash & (h->name_nbuckets - 1))];
}

static struct name_node *nn(uint64_t off) { return heap_at(off); }

void heap_names_format(void)
{
	struct heap_hdr *h = heap_rt.hdr;
	h->name_lock = (prim_lock_t)PRIM_LOCK_INIT;
	h->name_buckets = 0;
	h->name_nbuckets = 0;
	atomic_store_explicit(&h->name_count, 0, memory_order_relaxed);
}

/* (Re)build the bucket arrays with nb buckets per kind.  -1 when out of
 * pages (the old arrays stay in use). */
static int rehash(struct heap_hdr *h, uint64_t nb)
{
	uint64_t *fresh = heap_alloc_meta(2 * nb * sizeof(uint64_t));
	if (fresh == NULL)
		return -1;
	memset(fresh, 0, 2 * nb * sizeof(uint64_t));
	uint64_t old_run = h->name_buckets, old_nb = h->name_nbuckets;
	uint64_t *old = old_run != 0 ? heap_at(old_run << HEAP_PAGE_SHIFT) : NULL;
	h->name_buckets = heap_off(fresh) >> HEAP_PAGE_SHIFT;
	h->name_nbuckets = nb;
	for (uint64_t i = 0; i < old_nb; i++) {
		uint64_t n = old[i];
		while (n != 0) {
			struct name_node *x = nn(n);
			uint64_t next = x->next_name;
			uint64_t *nbk = name_bucket(h, heap_name_hash(x->name));
			uint64_t *obk = obj_bucket(h, heap_obj_hash(x->obj));
			x->next_name = *nbk;
			*nbk = n;
			x->next_obj = *obk;
			*obk = n;
			n = next;
		}
	}
	if (old != NULL)
		heap_free_meta(old);
	return 0;
}

/* Unlink node n from its object chain. */
static void unlink_obj(struct heap_hdr *h, uint64_t n)
{
	uint64_t *link = obj_bucket(h, heap_obj_hash(nn(n)->obj));
	while (*link != n)
		link = &nn(*link)->next_obj;
	*link = nn(n)->next_obj;
}

static void unlink_name(struct heap_hdr *h, uint64_t n)
{
	uint64_t *link = name_bucket(h, heap_name_hash(nn(n)->name));
	while (*link != n)
		link = &nn(*link)->next_name;
	*link = nn(n)->next_name;
}

static uint64_t find_locked(struct heap_hdr *h, const char *name)
{
	if (h->name_buckets == 0)
		return 0;
	uint64_t n = *name_bucket(h, heap_name_hash(name));
	while (n != 0 && strcmp(nn(n)->name, name) != 0)
		n = nn(n)->next_name;
	return n;
}

int heap_name_set(const char *name, void *p)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL || name == NULL || !heap_contains(p) ||
	    strnlen(name, PMTHREADS_NAME_MAX) >= PMTHREADS_NAME_MAX) {
		err_set("heap_name_set: %s", h == NULL ? "no heap" : name == NULL ? "no name" :
			!heap_contains(p) ? "the object is not in the persistent heap" :
			"the name is longer than 63 bytes");
		errno = EINVAL;
		return -1;
	}
	int rc = 0;
	fase_enter();
	prim_lock(&h->name_lock);
	if (h->name_buckets == 0 && rehash(h, NAME_BUCKETS_MIN) != 0) {
		rc = -1;
		goto out;
	}
	uint64_t obj = heap_off(p);
	uint64_t n = find_locked(h, name);
	if (n != 0) {
		/* rebinding: only the object chain changes */
		unlink_obj(h, n);
	} else {
		struct name_node *x = heap_alloc_meta(sizeof(*x));
		if (x == NULL) {
			rc = -1;
			goto out;
		}
		n = heap_off(x);
		memset(x->name, 0, sizeof(x->name));
		strcpy(x->name, name);
		uint64_t *nbk = name_bucket(h, heap_name_hash(name));
		x->next_name = *nbk;
		*nbk = n;
		atomic_fetch_add_explicit(&h->name_count, 1, memory_order_relaxed);
	}
	nn(n)->obj = obj;
	uint64_t *obk = obj_bucket(h, heap_obj_hash(obj));
	nn(n)->next_obj = *obk;
	*obk = n;
	/* A failed growth is harmless: chains just get longer. */
	if (atomic_load_explicit(&h->name_count, memory_order_relaxed) > h->name_nbuckets)
		(void)rehash(h, h->name_nbuckets * 2);
out:
	prim_unlock(&h->name_lock);
	fase_leave();
	if (rc != 0) {
		err_set("heap_name_set(\"%s\"): the persistent heap is full", name);
		errno = ENOMEM;
	}
	return rc;
}

void *heap_name_get(const char *name, size_t *usable)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (usable != NULL)
		*usable = 0;
	if (h == NULL || name == NULL)
		return NULL;
	void *p = NULL;
	fase_enter();
	prim_lock(&h->name_lock);
	uint64_t n = find_locked(h, name);
	if (n != 0) {
		p = heap_at(nn(n)->obj);
		if (usable != NULL)
			*usable = heap_usable_internal(p);
	}
	prim_unlock(&h->name_lock);
	fase_leave();
	return p;
}

void heap_name_remove_ptr(void *p)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL || !heap_contains(p) ||
	    atomic_load_explicit(&h->name_count, memory_order_relaxed) == 0)
		return;
	uint64_t obj = heap_off(p);
	fase_enter();
	prim_lock(&h->name_lock);
	if (h->name_buckets != 0) {
		uint64_t *link = obj_bucket(h, heap_obj_hash(obj));
		while (*link != 0) {
			uint64_t n = *link;
			if (nn(n)->obj != obj) {
				link = &nn(n)->next_obj;
				continue;
			}
			*link = nn(n)->next_obj;
			unlink_name(h, n);
			heap_free_meta(nn(n));
			atomic_fetch_sub_explicit(&h->name_count, 1, memory_order_relaxed);
		}
	}
	prim_unlock(&h->name_lock);
	fase_leave();
}

void heap_name_foreach(void (*fn)(const char *name, void *p, size_t size, void *arg), void *arg)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL || fn == NULL)
		return;
	fase_enter();
	prim_lock(&h->name_lock);
	for (uint64_t i = 0; h->name_buckets != 0 && i < h->name_nbuckets; i++) {
		uint64_t *b = heap_at(h->name_buckets << HEAP_PAGE_SHIFT);
		for (uint64_t n = b[i]; n != 0; n = nn(n)->next_name) {
			void *p = heap_at(nn(n)->obj);
			fn(nn(n)->name, p, heap_usable_internal(p), arg);
		}
	}
	prim_unlock(&h->name_lock);
	fase_leave();
}
