/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_names -- the name table: names bound to heap objects (nvmalloc's
 * name argument, nvrecover's lookup), kept inside the heap.
 *
 * Each binding is a node (struct heap_name_node, a small block from the
 * heap itself) on two hash chains: one by name, for set/get, and one by
 * object, so that freeing an object drops its names in O(1) rather than by
 * scanning the table.  The two bucket arrays share one page run, doubled
 * when the table holds more nodes than buckets.  A single prim_lock covers
 * the table; frees of objects that were never named skip it (both counts
 * zero is checked first), which is the common case for nvfree.
 *
 * Recovery across runs.  NVthreads programs recover with
 *	p = nvmalloc(n, "x"); if (isCrashed()) nvrecover(p, n, "x");
 * so nvmalloc of a name that an earlier run bound must not lose that run's
 * object: the name is bound to the new object and the old one is *held*
 * (a held node on the old object's chain, linked with the bound node), and
 * nvrecover with a destination copies from the held object.  For the whole
 * run, nvrecover of a name reads what the name had when the run started.
 * A held object is freed
 *   - when nvrecover copies it into the name's own object: the data is
 *     there now (in the same failure-atomic section as the copy);
 *   - at a clean exit (heap_name_release_held): nothing is left to recover;
 *   - when the program frees the name's object, or the held object itself;
 *   - by a later run's nvmalloc of the name, when this run crashed with it
 *     still held.  That run keeps one of the two objects: the held one if
 *     this run, started after a crash, never copied it anywhere (it crashed
 *     before its recovery was done, so its new object holds nothing it
 *     meant to keep), else this run's object (it took the data out with
 *     nvrecover into memory of its own and went on from there, or it
 *     started after a clean exit, when an NVthreads program recovers
 *     nothing and goes on with its new object).
 * So a name holds at most one object, whatever the number of crashes.
 * Every operation is one failure-atomic section: a crash between nvmalloc
 * and nvrecover leaves the name bound and its old object held, and the
 * next run recovers from that.
 */
#include "heap/heap.h"

#include "heap/heap_layout.h"
#include "base/log.h"
#include "quiesce/quiesce.h"

#include <pmthreads.h>

#include <errno.h>
#include <string.h>

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

static struct heap_name_node *nn(uint64_t off) { return heap_at(off); }

static uint64_t nodes(const struct heap_hdr *h)
{
	return atomic_load_explicit(&h->name_count, memory_order_relaxed) +
	       atomic_load_explicit(&h->name_held, memory_order_relaxed);
}

void heap_names_format(void)
{
	struct heap_hdr *h = heap_rt.hdr;
	h->name_lock = (prim_lock_t)PRIM_LOCK_INIT;
	h->name_buckets = 0;
	h->name_nbuckets = 0;
	atomic_store_explicit(&h->name_count, 0, memory_order_relaxed);
	atomic_store_explicit(&h->name_held, 0, memory_order_relaxed);
}

static void link_obj(struct heap_hdr *h, uint64_t n)
{
	uint64_t *obk = obj_bucket(h, heap_obj_hash(nn(n)->obj));
	nn(n)->next_obj = *obk;
	*obk = n;
}

static void link_name(struct heap_hdr *h, uint64_t n)
{
	uint64_t *nbk = name_bucket(h, heap_name_hash(nn(n)->name));
	nn(n)->next_name = *nbk;
	*nbk = n;
}

/* (Re)build the bucket arrays with nb buckets per kind.  -1 when out of
 * pages (the old arrays stay in use).  Held nodes are found on the old
 * object chains (before the bound nodes' object links are rewritten), bound
 * ones on the name chains. */
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
		for (uint64_t n = old[old_nb + i]; n != 0;) {
			uint64_t next = nn(n)->next_obj;
			if (nn(n)->flags & HEAP_NAME_HELD)
				link_obj(h, n);
			n = next;
		}
	}
	for (uint64_t i = 0; i < old_nb; i++) {
		for (uint64_t n = old[i]; n != 0;) {
			uint64_t next = nn(n)->next_name;
			link_name(h, n);
			link_obj(h, n);
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

/* The first node (bound or held) whose object is obj, 0: none. */
static uint64_t find_obj_locked(struct heap_hdr *h, uint64_t obj)
{
	if (h->name_buckets == 0)
		return 0;
	uint64_t n = *obj_bucket(h, heap_obj_hash(obj));
	while (n != 0 && nn(n)->obj != obj)
		n = nn(n)->next_obj;
	return n;
}

/* obj is no longer named nor held by the node that had it: free it unless
 * another node still refers to it (one object may carry several names). */
static void free_if_unreferenced(struct heap_hdr *h, uint64_t obj)
{
	if (find_obj_locked(h, obj) == 0)
		heap_free_unnamed(heap_at(obj));
}

static uint64_t new_node(const char *name)
{
	struct heap_name_node *x = heap_alloc_meta(sizeof(*x));
	if (x == NULL)
		return 0;
	memset(x, 0, sizeof(*x));
	strcpy(x->name, name);
	return heap_off(x);
}

/* Free held node q and, unless something else refers to it, its object. */
static void drop_held(struct heap_hdr *h, uint64_t q)
{
	struct heap_name_node *y = nn(q);
	uint64_t obj = y->obj;
	unlink_obj(h, q);
	if (y->link != 0)
		nn(y->link)->link = 0;
	heap_free_meta(y);
	atomic_fetch_sub_explicit(&h->name_held, 1, memory_order_relaxed);
	free_if_unreferenced(h, obj);
}

/* Bound node n of an earlier run is being rebound by nvmalloc: keep the data
 * its run had for nvrecover (see the top of the file).  n is off its object
 * chain.  -1 when out of memory (nothing changed). */
static int hold_previous(struct heap_hdr *h, uint64_t n)
{
	struct heap_name_node *x = nn(n);
	if (x->link == 0) {
		uint64_t q = new_node(x->name);
		if (q == 0)
			return -1;
		struct heap_name_node *y = nn(q);
		y->obj = x->obj;
		y->size = x->size;
		y->flags = HEAP_NAME_HELD | (heap_rt.after_crash ? 0 : HEAP_NAME_TAKEN);
		y->link = n;
		link_obj(h, q);
		x->link = q;
		atomic_fetch_add_explicit(&h->name_held, 1, memory_order_relaxed);
		return 0;
	}
	struct heap_name_node *y = nn(x->link);
	if (y->flags & HEAP_NAME_TAKEN) {
		/* That run took the held data out and went on with its own
		 * object: that object is the data now. */
		uint64_t old = y->obj;
		unlink_obj(h, x->link);
		y->obj = x->obj;
		y->size = x->size;
		y->flags = HEAP_NAME_HELD | (heap_rt.after_crash ? 0 : HEAP_NAME_TAKEN);
		link_obj(h, x->link);
		free_if_unreferenced(h, old);
	} else {
		/* That run crashed before it recovered: the held object is
		 * still the data, its own object goes. */
		free_if_unreferenced(h, x->obj);
	}
	return 0;
}

static bool name_ok(const struct heap_hdr *h, const char *name)
{
	if (h == NULL || name == NULL || strnlen(name, PMTHREADS_NAME_MAX) >= PMTHREADS_NAME_MAX) {
		if (h == NULL || name == NULL)
			err_set("heap name table: %s", h == NULL ? "no heap" : "no name");
		else
			err_set("the name \"%.20s...\" is longer than %d bytes", name,
				PMTHREADS_NAME_MAX - 1);
		errno = EINVAL;
		return false;
	}
	return true;
}

/* Bind name to the object at p (size bytes as asked for).  previous: keep
 * what an earlier run bound to the name for nvrecover (hold_previous). */
static int bind_locked(struct heap_hdr *h, const char *name, void *p, size_t size, bool previous)
{
	if (h->name_buckets == 0 && rehash(h, NAME_BUCKETS_MIN) != 0)
		return -1;
	uint64_t n = find_locked(h, name);
	if (n != 0) {
		unlink_obj(h, n);
		if (previous && nn(n)->run != heap_rt.run && hold_previous(h, n) != 0) {
			link_obj(h, n);
			return -1;
		}
	} else {
		n = new_node(name);
		if (n == 0)
			return -1;
		link_name(h, n);
		atomic_fetch_add_explicit(&h->name_count, 1, memory_order_relaxed);
	}
	struct heap_name_node *x = nn(n);
	x->obj = heap_off(p);
	x->size = size;
	x->run = heap_rt.run;
	link_obj(h, n);
	/* A failed growth is harmless: chains just get longer. */
	if (nodes(h) > h->name_nbuckets)
		(void)rehash(h, h->name_nbuckets * 2);
	return 0;
}

int heap_name_set(const char *name, void *p)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (!name_ok(h, name))
		return -1;
	if (!heap_contains(p)) {
		err_set("heap_name_set(\"%s\"): the object is not in the persistent heap", name);
		errno = EINVAL;
		return -1;
	}
	fase_enter();
	prim_lock(&h->name_lock);
	int rc = bind_locked(h, name, p, heap_usable_internal(p), false);
	prim_unlock(&h->name_lock);
	fase_leave();
	if (rc != 0) {
		err_set("heap_name_set(\"%s\"): the persistent heap is full", name);
		errno = ENOMEM;
	}
	return rc;
}

void *heap_name_alloc(const char *name, size_t size)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (!name_ok(h, name))
		return NULL;
	/* Allocation and naming form one failure-atomic section: a crash never
	 * leaves a named object unallocated or an allocated one unreachable. */
	fase_enter();
	void *p = heap_calloc(1, size == 0 ? 1 : size);
	int rc = -1;
	if (p != NULL) {
		prim_lock(&h->name_lock);
		rc = bind_locked(h, name, p, size, true);
		prim_unlock(&h->name_lock);
		if (rc != 0)
			heap_free(p);
	}
	fase_leave();
	if (rc != 0) {
		err_set("nvmalloc(%zu, \"%s\"): the persistent heap is full; set "
			"PMTHREADS_POOL_SIZE larger for a new pool", size, name);
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

int heap_name_recover(const char *name, void *dest, size_t size, void **obj)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (obj != NULL)
		*obj = NULL;
	if (!name_ok(h, name))
		return -1;
	int rc = 0;
	uint64_t have = 0;
	bool held = false;
	fase_enter();
	prim_lock(&h->name_lock);
	uint64_t n = find_locked(h, name);
	if (n == 0) {
		rc = ENOENT;
	} else {
		struct heap_name_node *x = nn(n);
		uint64_t q = dest != NULL ? x->link : 0;
		struct heap_name_node *src = q != 0 ? nn(q) : x;
		held = q != 0;
		have = src->size;
		if (have < size) {
			rc = ERANGE;
		} else {
			if (dest != NULL)
				memmove(dest, heap_at(src->obj), size);
			if (q != 0) {
				/* Into the name's own object, whole: the data is
				 * there now, and the held copy goes with the same
				 * failure-atomic section. */
				if (dest == heap_at(x->obj) && size >= (have < x->size ? have : x->size))
					drop_held(h, q);
				else
					src->flags |= HEAP_NAME_TAKEN;
			}
			if (obj != NULL)
				*obj = heap_at(x->obj);
		}
	}
	prim_unlock(&h->name_lock);
	fase_leave();
	if (rc == ENOENT)
		err_set("nvrecover(\"%s\"): no object has that name", name);
	else if (rc == ERANGE)
		err_set("nvrecover(\"%s\", %zu bytes): the %s object is %llu bytes", name, size,
			held ? "recovered" : "named", (unsigned long long)have);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	return 0;
}

void *heap_name_get(const char *name, size_t *size)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (size != NULL)
		*size = 0;
	if (h == NULL || name == NULL)
		return NULL;
	void *p = NULL;
	fase_enter();
	prim_lock(&h->name_lock);
	uint64_t n = find_locked(h, name);
	if (n != 0) {
		p = heap_at(nn(n)->obj);
		if (size != NULL)
			*size = nn(n)->size;
	}
	prim_unlock(&h->name_lock);
	fase_leave();
	return p;
}

void heap_name_after_crash(bool crashed)
{
	heap_rt.after_crash = crashed;
}

void heap_name_release_held(void)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL || atomic_load_explicit(&h->name_held, memory_order_relaxed) == 0)
		return;
	fase_enter();
	prim_lock(&h->name_lock);
	for (uint64_t i = 0; h->name_buckets != 0 && i < h->name_nbuckets; i++) {
		/* From the chain's head again after each drop: it unlinks. */
		for (;;) {
			const uint64_t *b = heap_at(h->name_buckets << HEAP_PAGE_SHIFT);
			uint64_t n = b[h->name_nbuckets + i];
			while (n != 0 && !(nn(n)->flags & HEAP_NAME_HELD))
				n = nn(n)->next_obj;
			if (n == 0)
				break;
			drop_held(h, n);
		}
	}
	prim_unlock(&h->name_lock);
	fase_leave();
}

uint64_t heap_name_held(void)
{
	const struct heap_hdr *h = heap_rt.hdr;
	return h == NULL ? 0 : atomic_load_explicit(&h->name_held, memory_order_relaxed);
}

void heap_name_remove_ptr(void *p)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL || !heap_contains(p) || nodes(h) == 0)
		return;
	uint64_t obj = heap_off(p);
	fase_enter();
	prim_lock(&h->name_lock);
	for (uint64_t n; (n = find_obj_locked(h, obj)) != 0;) {
		struct heap_name_node *x = nn(n);
		unlink_obj(h, n);
		if (x->flags & HEAP_NAME_HELD) {
			/* the program freed the held object itself */
			nn(x->link)->link = 0;
			atomic_fetch_sub_explicit(&h->name_held, 1, memory_order_relaxed);
		} else {
			unlink_name(h, n);
			if (x->link != 0)
				drop_held(h, x->link);
			atomic_fetch_sub_explicit(&h->name_count, 1, memory_order_relaxed);
		}
		heap_free_meta(x);
	}
	prim_unlock(&h->name_lock);
	fase_leave();
}

void heap_name_note_size(void *p, size_t size)
{
	struct heap_hdr *h = heap_rt.hdr;
	if (h == NULL || !heap_contains(p) || nodes(h) == 0)
		return;
	uint64_t obj = heap_off(p);
	fase_enter();
	prim_lock(&h->name_lock);
	if (h->name_buckets != 0)
		for (uint64_t n = *obj_bucket(h, heap_obj_hash(obj)); n != 0; n = nn(n)->next_obj)
			if (nn(n)->obj == obj)
				nn(n)->size = size;
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
		for (uint64_t n = b[i]; n != 0; n = nn(n)->next_name)
			fn(nn(n)->name, heap_at(nn(n)->obj), nn(n)->size, arg);
	}
	prim_unlock(&h->name_lock);
	fase_leave();
}
