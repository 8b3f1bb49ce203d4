/*
 * bptree.c -- the concurrent B+tree of bptree.h.
 */
#include "bptree.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static inline bpt_node *node_at(pstore_ref r)
{
    return pstore_ptr(r);
}

/* The part of a node a transaction must snapshot: all but the lock, whose
 * state is volatile and must not be rolled back under its holder. */
static inline void snapshot_node(bpt_node *n)
{
    pstore_tx_add(&n->is_leaf, sizeof *n - offsetof(bpt_node, is_leaf));
}

static inline void snapshot_tree(bpt_tree *t)
{
    pstore_tx_add(&t->magic, sizeof *t - offsetof(bpt_tree, magic));
}

/* The first index i with keys[i] > key (inner nodes: the child to descend). */
static unsigned upper_bound(const bpt_node *n, uint64_t key)
{
    unsigned lo = 0, hi = n->nkeys;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (n->keys[mid] <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first index i with keys[i] >= key (leaves: where key is or would go). */
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
    n->is_leaf = is_leaf;
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
    t->root = pstore_ref_of(new_node(true));
    t->height = 1;
    t->magic = BPT_MAGIC;
    pstore_release_written(&op, &t->lock);
    pstore_op_end(&op);
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

    uint64_t separator;
    if (child->is_leaf) {
        /* Leaves keep every key; the separator is copied up. */
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
        /* Inner nodes: the middle key moves up. */
        unsigned keep = child->nkeys / 2;
        unsigned move = child->nkeys - keep - 1;
        separator = child->keys[keep];
        memcpy(sibling->keys, child->keys + keep + 1, move * sizeof(uint64_t));
        memcpy(sibling->u.child, child->u.child + keep + 1, (move + 1) * sizeof(pstore_ref));
        sibling->nkeys = move;
        child->nkeys = keep;
    }

    memmove(parent->keys + i + 1, parent->keys + i, (parent->nkeys - i) * sizeof(uint64_t));
    memmove(parent->u.child + i + 2, parent->u.child + i + 1,
            (parent->nkeys - i) * sizeof(pstore_ref));
    parent->keys[i] = separator;
    parent->u.child[i + 1] = pstore_ref_of(sibling);
    parent->nkeys++;
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
 * The common case of an insert, after Bayer and Schkolnick: descend with read
 * locks like a lookup and write-lock only the leaf.  Whether a node is a leaf
 * never changes after it is published, so it can be read before locking the
 * node.  Succeeds (returns true, result in *is_new) unless the leaf is full
 * and the key is not in it; then nothing was written and the caller takes the
 * pessimistic path, which splits on the way down.  With 31 keys per node that
 * is about one insert in sixteen, so writers almost never exclude each other
 * above the leaves.
 */
static bool put_optimistic(pstore_op *op, bpt_tree *t, uint64_t key, uint64_t value,
                           bool *is_new)
{
    pstore_rdlock(&t->lock);
    bpt_node *node = node_at(t->root);
    if (node->is_leaf)
        pstore_wrlock(&node->lock);
    else
        pstore_rdlock(&node->lock);
    pstore_unlock(&t->lock);
    while (!node->is_leaf) {
        bpt_node *child = node_at(node->u.child[upper_bound(node, key)]);
        if (child->is_leaf)
            pstore_wrlock(&child->lock);
        else
            pstore_rdlock(&child->lock);
        pstore_unlock(&node->lock);
        node = child;
    }
    if (node->nkeys == BPT_MAX_KEYS) {
        unsigned pos = lower_bound(node, key);
        if (!(pos < node->nkeys && node->keys[pos] == key)) {
            pstore_unlock(&node->lock);
            return false;
        }
    }
    *is_new = leaf_store(op, node, key, value);
    return true;
}

bool bpt_put(bpt_tree *t, uint64_t key, uint64_t value)
{
    pstore_op op;
    pstore_op_begin(&op);

    bool is_new;
    if (put_optimistic(&op, t, key, value, &is_new)) {
        pstore_op_end(&op);
        return is_new;
    }

    /* The leaf is full: lock coupling with write locks from the top,
     * splitting every full node on the way down. */
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
        bpt_node *sibling = split_child(new_root, 0, node);
        snapshot_tree(t);
        t->root = pstore_ref_of(new_root);
        t->height++;
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

    is_new = leaf_store(&op, node, key, value);
    pstore_op_end(&op);
    return is_new;
}

bool bpt_get(bpt_tree *t, uint64_t key, uint64_t *value)
{
    pstore_rdlock(&t->lock);
    bpt_node *node = node_at(t->root);
    pstore_rdlock(&node->lock);
    pstore_unlock(&t->lock);
    while (!node->is_leaf) {
        bpt_node *child = node_at(node->u.child[upper_bound(node, key)]);
        pstore_rdlock(&child->lock);
        pstore_unlock(&node->lock);
        node = child;
    }
    unsigned pos = lower_bound(node, key);
    bool hit = pos < node->nkeys && node->keys[pos] == key;
    if (hit)
        *value = node->u.value[pos];
    pstore_unlock(&node->lock);
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
    if (n->nkeys > BPT_MAX_KEYS || (!is_root && n->nkeys < BPT_MIN_KEYS))
        return fail(s, "node at depth %" PRIu64 " holds %u keys", depth, n->nkeys);
    for (unsigned i = 0; i < n->nkeys; i++) {
        if (i > 0 && n->keys[i - 1] >= n->keys[i])
            return fail(s, "keys out of order at depth %" PRIu64, depth);
        if ((has_lo && n->keys[i] < lo) || (has_hi && n->keys[i] >= hi))
            return fail(s, "key %" PRIu64 " outside its parent's bounds", n->keys[i]);
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
