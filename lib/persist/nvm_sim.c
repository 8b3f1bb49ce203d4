/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvm sim backend -- the strict persistence simulator for crash tests.
 *
 * Besides the file mapping (what the CPU sees) it keeps a "media" image (what
 * survives power loss).  A flush snapshots the lines it covers; a fence copies
 * the snapshots taken since the previous fence into the media.  At a crash
 * every line that differs between mapping and media -- stored but never
 * flushed, flushed but not fenced, or stored again after its flush -- keeps
 * its new content or reverts to the media, each line independently, and the
 * result is written to the file.  So a missing flush or fence shows up as a
 * lost line in some crash, which kill -9 on a page-cache file never shows.
 * See nvm.h.  Its state is nvm_sim_internal.h's; what only tests ask of it
 * (a crash now, a fence failed, the media read) is nvm_sim_test.c's, in the
 * tests' build only.
 */
#include "persist/nvm_backend.h"
#include "persist/nvm_sim.h"
#include "persist/nvm_sim_internal.h"

#include "base/log.h"
#include "prim/prim.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const struct nvm_ops sim_ops;

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

struct sim_state *nvm_sim_of(const struct nvm *n)
{
	return n != NULL && n->ops == &sim_ops ? n->impl : NULL;
}

static void count_primitive(struct nvm *n)
{
	struct sim_state *s = n->impl;
	s->primitives++;
	if (s->opt.crash_after != 0 && s->primitives == s->opt.crash_after)
		nvm_sim_lose_power(n, s);
}

static void sim_flush(struct nvm *n, const void *addr, size_t len)
{
	struct sim_state *s = n->impl;
	size_t lines = nvm_lines(addr, len);
	/* The runtime's memory, not malloc's (nvm.c). */
	while (s->npending + lines > s->cap)
		if (!prim_array_grow((void **)&s->pending, &s->cap, s->npending,
				     sizeof(*s->pending), 1024))
			log_fatal("nvm sim: out of memory recording %zu flushed lines",
				  s->cap != 0 ? 2 * s->cap : 1024);
	uintptr_t line = nvm_line_down(addr);
	for (size_t i = 0; i < lines; i++, line += NVM_LINE) {
		if (line < (uintptr_t)n->base || line + NVM_LINE > (uintptr_t)n->base + n->len)
			log_fatal("nvm sim: flush of %p outside the mapping", (void *)line);
		struct sim_line *l = &s->pending[s->npending++];
		l->off = line - (uintptr_t)n->base;
		memcpy(l->data, (const void *)line, NVM_LINE);
	}
	count_primitive(n);
}

static void sim_fence(struct nvm *n)
{
	struct sim_state *s = n->impl;
#ifdef PMT_TEST_HOOKS
	/* nvm_sim_fail_fence (nvm_sim_test.h): this fence fails. */
	if (s->fail_at != 0 && --s->fail_at == 0) {
		/* Like a device that lost the write: none of the pending lines
		 * reaches the media. */
		int e = s->fail_err;
		s->npending = 0;
		nvm_latch_error(n, e);
		count_primitive(n);
		return;
	}
#endif
	for (size_t i = 0; i < s->npending; i++)
		memcpy(s->media + s->pending[i].off, s->pending[i].data, NVM_LINE);
	s->npending = 0;
	count_primitive(n);
}

static void sim_unmap(struct nvm *n)
{
	struct sim_state *s = n->impl;
	prim_unmap_device(s->media, n->len);
	if (s->pending != NULL)
		prim_unmap(s->pending, s->cap * sizeof(*s->pending));
	prim_unmap(s, sizeof(*s));
	n->impl = NULL;
}

static const struct nvm_ops sim_ops = {
	.name = "sim",
	.flush = sim_flush,
	.fence = sim_fence,
	.unmap = sim_unmap,
	.copy_flush = NULL,
};

bool nvm_sim_survives(enum nvm_sim_survival survival, uint64_t *rng)
{
	switch (survival) {
	case NVM_SIM_KEEP_OLD:
		return false;
	case NVM_SIM_KEEP_NEW:
		return true;
	case NVM_SIM_RANDOM:
	default:
		return splitmix64(rng) & 1;
	}
}

void nvm_sim_lose_power(struct nvm *n, struct sim_state *s)
{
	unsigned char *map = n->base;
	const size_t chunk = 4096;
	for (size_t off = 0; off < n->len; off += chunk) {
		size_t clen = n->len - off < chunk ? n->len - off : chunk;
		if (memcmp(map + off, s->media + off, clen) == 0)
			continue;
		for (size_t l = off; l < off + clen; l += NVM_LINE) {
			size_t ll = off + clen - l < NVM_LINE ? off + clen - l : NVM_LINE;
			if (memcmp(map + l, s->media + l, ll) != 0 && !nvm_sim_survives(s->opt.survival, &s->rng))
				memcpy(map + l, s->media + l, ll);
		}
	}
	if (s->opt.on_crash != NULL)
		s->opt.on_crash(s->opt.on_crash_arg);
	prim_exit_now(NVM_SIM_CRASH_EXIT);
}

/* The media starts as the file's current content.  Copy only the file's
 * data extents: a new pool is sparse and its holes read as zeros anyway. */
static void load_media(struct nvm *n, unsigned char *media)
{
	off_t pos = 0, end = (off_t)n->len, data;
	int r;
	while ((r = prim_next_data(n->fd, pos, end, &data, &pos)) == 1)
		memcpy(media + data, (unsigned char *)n->base + data, (size_t)(pos - data));
	if (r < 0)	/* no SEEK_DATA support: copy everything */
		memcpy(media + pos, (unsigned char *)n->base + pos, (size_t)(end - pos));
}

int nvm_sim_init(struct nvm *n, const struct nvm_sim_options *o)
{
	struct sim_state *s = prim_map_any(sizeof(*s));
	if (s == NULL) {
		err_set_errno(ENOMEM, "cannot set up the persistence simulator");
		return -1;
	}
	if (o != NULL)
		s->opt = *o;
	s->rng = s->opt.seed ^ 0x5eed5eed5eed5eedULL;
	s->media = prim_map_device(n->len);
	if (s->media == NULL) {
		err_set_errno(errno, "cannot allocate the simulator's media image (%zu bytes)", n->len);
		prim_unmap(s, sizeof(*s));
		return -1;
	}
	load_media(n, s->media);
	n->ops = &sim_ops;
	n->impl = s;
	return 0;
}
