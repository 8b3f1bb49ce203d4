/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bptree.c -- the concurrent B+tree of bptree.h.
 */
#include "bptree.h"

#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static inline bpt_node *node_at(pstore_ref r)
{
    return pstore_ptr(r);
}

/*
 * Fields of inner nodes (nkeys, keys, children, is_leaf) and the tree's root
 * are read by the lock-free descent while a writer may change them, so both
 * sides access them as atomics: no data race in the C sense, nothing for
 * ThreadSanitizer to report.  Acquire loads and release stores (plain moves on
 * x86-64) give the seqlock its order without fences: a writer's odd version
 * is visible before any of its changes, and a reader's data loads all happen
 * before its validating version load.
 */
#define LD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

/* Wait until no writer is changing the object, return its version. */
static inline uint64_t read_begin(const uint64_t *version)
{
    unsigned spins = 0;
    uint64_t v;
    while ((v = __atomic_load_n(version, __ATOMIC_ACQUIRE)) & 1) {
        /* The writer may be descheduled: do not burn its processor. */
        if (++spins % 64 == 0)
            sched_yield();
    }
    return v;
}

/* True when nothing changed the object since read_begin returned v: what
 * was read in between is then a consistent snapshot. */
static inline bool read_valid(const uint64_t *version, uint64_t v)
{
    return __atomic_load_n(version, __ATOMIC_ACQUIRE) == v;
}

/* Under the object's write lock, around every change of an inner node or of
 * the root. */
static inline void write_begin(uint64_t *version)
{
    __atomic_store_n(version, *version + 1, __ATOMIC_RELEASE);
}

static inline void write_end(uint64_t *version)
{
    __atomic_store_n(version, *version + 1, __ATOMIC_RELEASE);
}

/* The part of a node a transaction must snapshot: all but the lock, whose
 * state is volatile and must not be rolled back under its holder. */
static inline void snapshot_node(bpt_node *n)
{
    pstore_tx_add(&n->version, sizeof *n - offsetof(bpt_node, version));
}

static inline void snapshot_tree(bpt_tree *t)
{
    pstore_tx_add(&t->magic, sizeof *t - offsetof(bpt_tree, magic));
}

/* The first index i with keys[i] > key (inner nodes: the child to descend). */
static unsigned upper_bound(const bpt_node *n, uint64_t key)
{
    unsigned lo = 0, hi = LD(n->nkeys);
    if (hi > BPT_MAX_KEYS) /* a torn optimistic read; validation fails later */
        hi = BPT_MAX_KEYS;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (LD(n->keys[mid]) <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first index i with keys[i] >= key (leaves, under their lock: where key
 * is or would go). */
static unsigned lower_bound(const bpt_node *n, uint64_t key)
{
    unsigned lo = 0, hi = n->nkeys;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (n->keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bpt_node *new_node(bool is_leaf)
{
    bpt_node *n = pstore_alloc(sizeof *n);
    ST(n->is_leaf, (uint32_t)is_leaf);
    return n;
}

bool bpt_is_initialised(const bpt_tree *t)
{
    return t->magic == BPT_MAGIC && t->root != 0;
}

void bpt_init(bpt_tree *t)
{
    pstore_op op;
    pstore_op_begin(&op);
    /* Holding the tree lock makes the initialisation one critical section,
     * hence failure-atomic under pmthreads. */
    pstore_wrlock(&t->lock);
    snapshot_tree(t);
    t->version = 0;
    ST(t->root, pstore_ref_of(new_node(true)));
    t->height = 1;
    t->magic = BPT_MAGIC;
    pstore_release_written(&op, &t->lock);
    pstore_op_end(&op);
}

/*
 * The lock-free descent: returns the leaf that holds key (or would), locked
 * for writing when write is true and for reading otherwise.  Each inner
 * node's version is checked after reading the child to visit (the pointer is
 * then known to be right) and, for the leaf, again once the leaf is locked:
 * a split of that leaf changes its parent under the leaf's lock, so a leaf
 * reached through an unchanged parent still covers key.  Any change on the
 * way starts the descent again.
 */
static bpt_node *lock_leaf(bpt_tree *t, uint64_t key, bool write)
{
    for (;;) {
        uint64_t *pv = &t->version; /* the version guarding `node` */
        uint64_t v = read_begin(pv);
        bpt_node *node = node_at(LD(t->root));
        for (;;) {
            if (LD(node->is_leaf)) {
                if (write)
                    pstore_wrlock(&node->lock);
                else
                    pstore_rdlock(&node->lock);
                if (read_valid(pv, v))
                    return node;
                pstore_unlock(&node->lock);
                break;
            }
            /* node is inner: read it as of one of its versions */
            uint64_t nv = read_begin(&node->version);
            if (!read_valid(pv, v))
                break;
            bpt_node *child = node_at(LD(node->u.child[upper_bound(node, key)]));
            if (!read_valid(&node->version, nv) || child == NULL)
                break;
            pv = &node->version;
            v = nv;
            node = child;
        }
    }
}

/* Writes key/value into the write-locked leaf, which has room for it. */
static bool leaf_store(pstore_op *op, bpt_node *leaf, uint64_t key, uint64_t value)
{
    unsigned pos = lower_bound(leaf, key);
    bool is_new = !(pos < leaf->nkeys && leaf->keys[pos] == key);
    if (!is_new) {
        pstore_tx_add(&leaf->u.value[pos], sizeof leaf->u.value[pos]);
        leaf->u.value[pos] = value;
    } else {
        snapshot_node(leaf);
        memmove(leaf->keys + pos + 1, leaf->keys + pos, (leaf->nkeys - pos) * sizeof(uint64_t));
        memmove(leaf->u.value + pos + 1, leaf->u.value + pos,
                (leaf->nkeys - pos) * sizeof(uint64_t));
        leaf->keys[pos] = key;
        leaf->u.value[pos] = value;
        leaf->nkeys++;
    }
    pstore_release_written(op, &leaf->lock);
    return is_new;
}

/*
 * Splits parent's full child number i (write-locked by the caller, as is the
 * parent, which is not full) into itself and a new right sibling, which is
 * returned write-locked.  Both halves keep at least BPT_MIN_KEYS keys.
 */
static bpt_node *split_child(bpt_node *parent, unsigned i, bpt_node *child)
{
    bpt_node *sibling = new_node(child->is_leaf);
    /* Nobody can reach the sibling before the parent points to it and we
     * release the parent, so this lock is never contended. */
    pstore_wrlock(&sibling->lock);
    snapshot_node(parent);
    snapshot_node(child);

    write_begin(&parent->version);
    uint64_t separator;
    if (child->is_leaf) {
        /* Leaves keep every key; the separator is copied up.  Only holders
         * of the leaf's lock read it: plain accesses. */
        unsigned keep = (BPT_MAX_KEYS + 1) / 2;
        unsigned move = child->nkeys - keep;
        memcpy(sibling->keys, child->keys + keep, move * sizeof(uint64_t));
        memcpy(sibling->u.value, child->u.value + keep, move * sizeof(uint64_t));
        sibling->nkeys = move;
        child->nkeys = keep;
        sibling->next = child->next;
        child->next = pstore_ref_of(sibling);
        separator = sibling->keys[0];
    } else {
        /* Inner nodes: the middle key moves up.  The sibling is not
         * published yet; the child is read by the lock-free descent. */
        write_begin(&child->version);
        unsigned keep = child->nkeys / 2;
        unsigned move = child->nkeys - keep - 1;
        separator = child->keys[keep];
        memcpy(sibling->keys, child->keys + keep + 1, move * sizeof(uint64_t));
        memcpy(sibling->u.child, child->u.child + keep + 1, (move + 1) * sizeof(pstore_ref));
        sibling->nkeys = move;
        ST(child->nkeys, keep);
        write_end(&child->version);
    }

    /* Shift the parent's keys and children right of i by one, from the
     * top down, element by element (the descent reads them concurrently). */
    for (unsigned k = parent->nkeys; k > i; k--) {
        ST(parent->keys[k], parent->keys[k - 1]);
        ST(parent->u.child[k + 1], parent->u.child[k]);
    }
    ST(parent->keys[i], separator);
    ST(parent->u.child[i + 1], pstore_ref_of(sibling));
    ST(parent->nkeys, parent->nkeys + 1);
    write_end(&parent->version);
    return sibling;
}

/*
 * After split_child: of the two halves, keep (locked) the one key belongs in
 * and release the other.  Both were written.
 */
static bpt_node *pick_half(pstore_op *op, bpt_node *parent, unsigned i, bpt_node *child,
                           bpt_node *sibling, uint64_t key)
{
    if (key >= parent->keys[i]) {
        pstore_release_written(op, &child->lock);
        return sibling;
    }
    pstore_release_written(op, &sibling->lock);
    return child;
}

bool bpt_put(bpt_tree *t, uint64_t key, uint64_t value)
{
    pstore_op op;
    pstore_op_begin(&op);

    /* The common case: the leaf has room (or holds the key already). */
    bpt_node *leaf = lock_leaf(t, key, true);
    if (leaf->nkeys < BPT_MAX_KEYS || (lower_bound(leaf, key) < leaf->nkeys &&
                                       leaf->keys[lower_bound(leaf, key)] == key)) {
        bool is_new = leaf_store(&op, leaf, key, value);
        pstore_op_end(&op);
        return is_new;
    }
    /* Nothing was written: start again from the top with lock coupling,
     * splitting every full node on the way down. */
    pstore_unlock(&leaf->lock);

    pstore_wrlock(&t->lock);
    bpt_node *node = node_at(t->root);
    pstore_wrlock(&node->lock);
    bool node_written = false;
    if (node->nkeys == BPT_MAX_KEYS) {
        /* A full root: grow the tree by one level above it.  The new root
         * is not locked: only holders of the tree lock can reach it, and
         * locking it now, below its own child, would invert the top-down
         * lock order.  Which half to descend into is decided before the tree
         * lock goes, since the new root may change as soon as it does. */
        bpt_node *new_root = new_node(false);
        new_root->u.child[0] = pstore_ref_of(node);
        /* The tree is the old root's parent for the lock-free descent: its
         * version must be odd for the whole split, as split_child keeps a
         * parent's.  Bumped only around the root store, a descent could
         * validate the tree between the split and the store and go down the
         * old root, which by then holds only the lower half of the keys. */
        snapshot_tree(t);
        write_begin(&t->version);
        bpt_node *sibling = split_child(new_root, 0, node);
        ST(t->root, pstore_ref_of(new_root));
        t->height++;
        write_end(&t->version);
        node = pick_half(&op, new_root, 0, node, sibling, key);
        pstore_release_written(&op, &t->lock);
        node_written = true;
    } else {
        pstore_unlock(&t->lock);
    }

    /* Invariant: node is write-locked and not full. */
    while (!node->is_leaf) {
        unsigned i = upper_bound(node, key);
        bpt_node *child = node_at(node->u.child[i]);
        pstore_wrlock(&child->lock);
        bool child_written = false;
        if (child->nkeys == BPT_MAX_KEYS) {
            bpt_node *sibling = split_child(node, i, child);
            child = pick_half(&op, node, i, child, sibling, key);
            node_written = true;
            child_written = true;
        }
        pstore_release(&op, &node->lock, node_written);
        node = child;
        node_written = child_written;
    }

    bool is_new = leaf_store(&op, node, key, value);
    pstore_op_end(&op);
    return is_new;
}

bool bpt_get(bpt_tree *t, uint64_t key, uint64_t *value)
{
    bpt_node *leaf = lock_leaf(t, key, false);
    unsigned pos = lower_bound(leaf, key);
    bool hit = pos < leaf->nkeys && leaf->keys[pos] == key;
    if (hit)
        *value = leaf->u.value[pos];
    pstore_unlock(&leaf->lock);
    return hit;
}

/* ---- single-threaded verification ---- */

typedef struct check_state {
    bpt_report *report;
    char *why;
    size_t why_size;
    const bpt_node *first_leaf;
    uint64_t guard; /* bounds the walk so that a cycle cannot hang the check */
} check_state;

static bool fail(check_state *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, s->why_size, fmt, ap);
    va_end(ap);
    return false;
}

/* Keys of n must lie in [lo, hi) (has_lo/has_hi: whether that bound exists). */
static bool check_node(check_state *s, const bpt_node *n, uint64_t depth, bool is_root,
                       bool has_lo, uint64_t lo, bool has_hi, uint64_t hi)
{
    if (n == NULL)
        return fail(s, "null child at depth %" PRIu64, depth);
    if (++s->guard > (1ull << 40))
        return fail(s, "walk does not end (cycle?)");
    s->report->nodes++;
    if (n->version & 1)
        return fail(s, "node at depth %" PRIu64 " has an odd version (a change left half done)",
                    depth);
    if (n->nkeys > BPT_MAX_KEYS || (!is_root && n->nkeys < BPT_MIN_KEYS))
        return fail(s, "node at depth %" PRIu64 " holds %u keys", depth, n->nkeys);
    for (unsigned i = 0; i < n->nkeys; i++) {
        if (i > 0 && n->keys[i - 1] >= n->keys[i])
            return fail(s, "keys out of order at depth %" PRIu64, depth);
        if ((has_lo && n->keys[i] < lo) || (has_hi && n->keys[i] >= hi))
            return fail(s, "key %" PRIu64 " outside its parent's bounds (depth %" PRIu64 ", leaf %u, index %u of %u, bounds %s%" PRIu64 "..%s%" PRIu64 ")", n->keys[i], depth, n->is_leaf, i, n->nkeys, has_lo ? "" : "-", lo, has_hi ? "" : "+", hi);
    }
    if (n->is_leaf) {
        if (depth != s->report->height)
            return fail(s, "leaf at depth %" PRIu64 ", tree height %" PRIu64, depth,
                        s->report->height);
        if (s->first_leaf == NULL)
            s->first_leaf = n;
        s->report->keys += n->nkeys;
        return true;
    }
    if (n->is_leaf == 0 && n->nkeys == 0)
        return fail(s, "inner node without keys at depth %" PRIu64, depth);
    for (unsigned i = 0; i <= n->nkeys; i++) {
        bool child_has_lo = i > 0 ? true : has_lo;
        uint64_t child_lo = i > 0 ? n->keys[i - 1] : lo;
        bool child_has_hi = i < n->nkeys ? true : has_hi;
        uint64_t child_hi = i < n->nkeys ? n->keys[i] : hi;
        if (!check_node(s, node_at(n->u.child[i]), depth + 1, false, child_has_lo, child_lo,
                        child_has_hi, child_hi))
            return false;
    }
    return true;
}

bool bpt_check(const bpt_tree *t, bpt_report *report, char *why, size_t why_size)
{
    memset(report, 0, sizeof *report);
    check_state s = {report, why, why_size, NULL, 0};
    if (!bpt_is_initialised(t))
        return fail(&s, "the tree was never initialised");
    report->height = t->height;
    if (!check_node(&s, node_at(t->root), 1, true, false, 0, false, 0))
        return false;

    /* The leaf chain must list exactly the same keys, ascending. */
    uint64_t chained = 0;
    bool have_prev = false;
    uint64_t prev = 0;
    for (const bpt_node *leaf = s.first_leaf; leaf != NULL; leaf = node_at(leaf->next)) {
        if (!leaf->is_leaf)
            return fail(&s, "the leaf chain reaches an inner node");
        for (unsigned i = 0; i < leaf->nkeys; i++) {
            if (have_prev && leaf->keys[i] <= prev)
                return fail(&s, "leaf chain out of order at key %" PRIu64, leaf->keys[i]);
            prev = leaf->keys[i];
            have_prev = true;
        }
        chained += leaf->nkeys;
        if (chained > report->keys)
            return fail(&s, "the leaf chain holds more keys than the tree");
    }
    if (chained != report->keys)
        return fail(&s, "the leaf chain holds %" PRIu64 " keys, the tree %" PRIu64, chained,
                    report->keys);
    return true;
}

void bpt_foreach(const bpt_tree *t, void (*fn)(uint64_t key, uint64_t value, void *ctx),
                 void *ctx)
{
    const bpt_node *n = node_at(t->root);
    while (!n->is_leaf)
        n = node_at(n->u.child[0]);
    for (; n != NULL; n = node_at(n->next))
        for (unsigned i = 0; i < n->nkeys; i++)
            fn(n->keys[i], n->u.value[i], ctx);
}
