/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm log's simulated device -- the crash tests' disk under the log backend.
 *
 * Owns: each write and sync of a log whose mapping was opened with a struct
 * nvm_sim_options (nvm_map_pool), counted as a primitive; what every write
 * not yet followed by a sync overwrote (the undo list); and the crash after
 * the crash_after-th primitive, at which each sector of those writes keeps
 * its new bytes or gets its old ones back (nvm_sim_survives), in the file
 * itself, before the process ends as a power loss would.  The real device
 * (the file's pwrite and fdatasync) is nvm_log.c's; the line-level
 * simulator of the other backends is nvm_sim.c.
 */
#include "persist/nvm_log_internal.h"

#include "base/log.h"
#include "persist/nvm_sim.h"
#include "prim/prim.h"

#include <errno.h>
#include <string.h>

#define SECTOR 512

/* Power lost: each sector of every unsynced write, newest first, keeps its
 * new bytes or gets back what it overwrote. */
static void dev_crash(struct log_dev *d)
{
	for (size_t i = d->nundo; i-- > 0;) {
		const struct undo *u = &d->undo[i];
		for (size_t s = 0; s < u->len; s += SECTOR) {
			size_t l = u->len - s < SECTOR ? u->len - s : SECTOR;
			if (!nvm_sim_survives(d->sim->survival, &d->rng))
				(void)pwrite_all(*d->fd, d->old_bytes + u->at + s, l, u->off + s);
		}
	}
	(void)prim_fdatasync(*d->fd);
	if (d->sim->on_crash != NULL)
		d->sim->on_crash(d->sim->on_crash_arg);
	prim_exit_now(NVM_SIM_CRASH_EXIT);
}

static void dev_primitive(struct log_dev *d)
{
	d->primitives++;
	if (d->sim->crash_after != 0 && d->primitives == d->sim->crash_after)
		dev_crash(d);
}

/* Keep what a simulated write overwrites, for the crash.  The runtime's
 * memory, not malloc's (nvm.c): tables grown by prim_array_grow. */
static int dev_remember(struct log_dev *d, uint64_t off, size_t len)
{
	if (d->nundo == d->undo_cap &&
	    !prim_array_grow((void **)&d->undo, &d->undo_cap, d->nundo, sizeof(*d->undo), 64))
		return ENOMEM;
	while (d->old_used + len > d->old_cap)
		if (!prim_array_grow((void **)&d->old_bytes, &d->old_cap, d->old_used, 1, 1u << 16))
			return ENOMEM;
	unsigned char *old = d->old_bytes + d->old_used;
	ssize_t got = prim_pread_all(*d->fd, old, len, (off_t)off);
	if (got < 0)
		got = 0;
	if ((size_t)got < len)
		memset(old + got, 0, len - (size_t)got);
	d->undo[d->nundo++] = (struct undo){ off, len, d->old_used };
	d->old_used += len;
	return 0;
}

static void dev_forget(struct log_dev *d)
{
	d->nundo = 0;
	d->old_used = 0;
}

int nvm_log_sim_init(struct log_dev *d, const struct nvm_sim_options *o)
{
	d->sim = prim_map_any(sizeof(*o));
	if (d->sim == NULL) {
		err_set_errno(ENOMEM, "cannot set up the simulated device");
		return -1;
	}
	*d->sim = *o;
	d->rng = o->seed ^ 0x10910910910ULL;
	return 0;
}

int nvm_log_sim_write(struct log_dev *d, const void *buf, size_t len, uint64_t off)
{
	int e = dev_remember(d, off, len);
	if (e != 0)
		return e;
	e = pwrite_all(*d->fd, buf, len, off);
	dev_primitive(d);
	return e;
}

int nvm_log_sim_sync(struct log_dev *d)
{
	int e = prim_fdatasync(*d->fd) != 0 ? errno : 0;
	dev_forget(d);
	dev_primitive(d);
	return e;
}

void nvm_log_sim_free(struct log_dev *d)
{
	dev_forget(d);
	if (d->undo != NULL)
		prim_unmap(d->undo, d->undo_cap * sizeof(*d->undo));
	if (d->old_bytes != NULL)
		prim_unmap(d->old_bytes, d->old_cap);
	prim_unmap(d->sim, sizeof(*d->sim));
	d->undo = NULL;
	d->undo_cap = 0;
	d->old_bytes = NULL;
	d->old_cap = 0;
	d->sim = NULL;
}
