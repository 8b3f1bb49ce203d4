/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * info -- what a pool is and what state it is in, as text or one JSON
 * object.
 */
#include "tool.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

static const char info_usage[] = "Usage: " TOOL_NAME " info [--json] POOL\n";
static const char info_help[] =
	"Usage: " TOOL_NAME " info [--json] POOL\n"
	"Describe a pool: format version, UUID, page size, capacity, recorded heap\n"
	"address, pages used (pages with a consistent persisted copy), VER_d (the\n"
	"last durable epoch), whether the last program shut down cleanly or crashed\n"
	"(and whether an epoch was interrupted, to be undone by the next open), the\n"
	"program that created it, and the heap's named objects.\n"
	"The pool is opened read-only; the heap image is examined in the tool's own\n"
	"memory.\n"
	"\n"
	"  --json      print the same facts as one JSON object\n"
	"  -h, --help  this text\n";

static void format_uuid(const uint8_t u[16], char out[37])
{
	uuid_t id;
	memcpy(id, u, sizeof(id));
	uuid_unparse_lower(id, out);
}

/* The state in one word for JSON and a sentence for people. */
static const char *state_word(const struct pool_summary *s)
{
	if (s->torn_copies > 0)
		return "crashed-mid-epoch";
	return s->clean ? "clean" : "crashed";
}

static const char *state_sentence(const struct pool_summary *s)
{
	if (s->torn_copies > 0)
		return "crashed mid-epoch: recovery pending (the next open discards the "
		       "interrupted epoch and restores the last durable one)";
	if (!s->clean)
		return "crashed (the last program did not shut down cleanly; the next open "
		       "restores the last durable epoch)";
	return "clean (the last program shut down cleanly)";
}

/* What info knows about the heap. */
struct heap_facts {
	enum heap_image_state state;
	char why[512];
	struct named_objects objs;
};

/* What the pool's header and tables say, printed (and flushed) before the
 * heap is looked at. */
static void print_text_pool(const struct pool *p, const struct pool_summary *s)
{
	char uuid[37], cap[32], fsize[32];
	format_uuid(p->uuid, uuid);
	uint64_t capacity = p->npages * p->page_size;
	tool_human_size(capacity, cap, sizeof(cap));
	tool_human_size(p->file_size, fsize, sizeof(fsize));
	double used_pct = p->npages ? 100.0 * (double)s->pages_written / (double)p->npages : 0.0;

	printf("pool:              %s\n", p->path);
	printf("format:            pmthreads pool, version %u\n", p->format_version);
	printf("uuid:              %s\n", uuid);
	printf("page size:         %zu\n", p->page_size);
	printf("capacity:          %" PRIu64 " bytes (%s, %" PRIu64 " pages)\n", capacity, cap,
	       p->npages);
	printf("shadow base:       0x%" PRIx64 "\n", p->shadow_base);
	printf("file size:         %" PRIu64 " bytes (%s)\n", p->file_size, fsize);
	printf("pages used:        %" PRIu64 " (%.2f %%)\n", s->pages_written, used_pct);
	printf("VER_d:             %" PRIu64 "\n", s->ver_d);
	if (s->log_size != 0) {
		char lsize[32], lbytes[32];
		tool_human_size(s->log_size, lsize, sizeof(lsize));
		tool_human_size(s->log_bytes, lbytes, sizeof(lbytes));
		printf("log:               %s ring; %" PRIu64 " records (%s) replayed from it, not "
		       "yet checkpointed into the pages\n", lsize, s->log_records, lbytes);
	}
	printf("state:             %s\n", state_sentence(s));
	if (s->torn_copies > 0)
		printf("torn copies:       %" PRIu64 "\n", s->torn_copies);
	if (s->invalid_copies > 0)
		printf("invalidated copies: %" PRIu64 "\n", s->invalid_copies);
	printf("creator:           %s\n", p->creator[0] != '\0' ? p->creator : "(not recorded)");
	if (s->holder_pid != 0)
		printf("last opened by:    pid %" PRIu64 "\n", s->holder_pid);
	fflush(stdout);
}

static void print_text_heap(const struct heap_facts *hf)
{
	if (hf->state != HEAP_IMAGE_ADOPTED) {
		printf("named objects:     unavailable: %s\n", hf->why);
		return;
	}
	const struct named_objects *o = &hf->objs;
	printf("named objects:     %zu\n", o->n);
	for (size_t i = 0; i < o->n; i++)
		printf("  %-32s 0x%" PRIx64 "  %" PRIu64 " bytes\n", o->v[i].name, o->v[i].address,
		       o->v[i].size);
}

static void print_json(const struct pool *p, const struct pool_summary *s,
		       const struct heap_facts *hf)
{
	char uuid[37];
	format_uuid(p->uuid, uuid);
	printf("{\"pool\":");
	json_string(stdout, p->path);
	printf(",\"format_version\":%u", p->format_version);
	printf(",\"uuid\":\"%s\"", uuid);
	printf(",\"page_size\":%zu", p->page_size);
	printf(",\"capacity\":%" PRIu64, p->npages * p->page_size);
	printf(",\"pages\":%" PRIu64, p->npages);
	printf(",\"shadow_base\":\"0x%" PRIx64 "\"", p->shadow_base);
	printf(",\"file_size\":%" PRIu64, p->file_size);
	printf(",\"pages_used\":%" PRIu64, s->pages_written);
	printf(",\"ver_d\":%" PRIu64, s->ver_d);
	printf(",\"log_size\":%" PRIu64 ",\"log_records\":%" PRIu64 ",\"log_bytes\":%" PRIu64,
	       s->log_size, s->log_records, s->log_bytes);
	printf(",\"clean\":%s", s->clean ? "true" : "false");
	printf(",\"state\":\"%s\"", state_word(s));
	printf(",\"torn_copies\":%" PRIu64, s->torn_copies);
	printf(",\"invalidated_copies\":%" PRIu64, s->invalid_copies);
	printf(",\"creator\":");
	json_string(stdout, p->creator);
	printf(",\"last_pid\":%" PRIu64, s->holder_pid);
	static const char *const heap_words[] = { "valid", "none", "invalid" };
	printf(",\"heap\":\"%s\"", heap_words[hf->state]);
	if (hf->state == HEAP_IMAGE_ADOPTED) {
		const struct named_objects *o = &hf->objs;
		printf(",\"named_objects\":[");
		for (size_t i = 0; i < o->n; i++) {
			printf("%s{\"name\":", i ? "," : "");
			json_string(stdout, o->v[i].name);
			printf(",\"address\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 "}",
			       o->v[i].address, o->v[i].size);
		}
		printf("]");
	} else {
		printf(",\"named_objects\":null,\"named_objects_unavailable\":");
		json_string(stdout, hf->why);
	}
	printf("}\n");
}

int cmd_info(int argc, char **argv)
{
	bool json;
	const char *path;
	int parsed = tool_parse_pool_command(argc, argv, "info", info_help, info_usage, &json,
					     &path);
	if (parsed >= 0)
		return parsed;

	struct pool *p = tool_open_pool(path);
	if (p == NULL)
		return TOOL_PROBLEM;
	struct pool_summary s;
	pool_summarize(p, &s);
	if (!json)
		print_text_pool(p, &s);
	struct image img;
	struct heap_facts hf;
	memset(&hf, 0, sizeof(hf));
	int rc = TOOL_PROBLEM;
	if (image_load(p, &img) != 0)
		goto out_pool;
	hf.state = heap_image_adopt(&img, p, hf.why, sizeof(hf.why));
	if (hf.state == HEAP_IMAGE_ADOPTED && heap_image_names(&img, p, &hf.objs) != 0)
		goto out_image;
	if (json)
		print_json(p, &s, &hf);
	else
		print_text_heap(&hf);
	rc = fflush(stdout) == 0 ? TOOL_OK : TOOL_PROBLEM;
	heap_image_names_free(&hf.objs);
out_image:
	image_free(&img);
out_pool:
	pool_close(p);
	return rc;
}
