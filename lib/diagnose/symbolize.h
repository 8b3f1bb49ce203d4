/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * symbolize -- a code address as function, source file and line.
 *
 * Owns: turning the addresses the FASE checker recorded into something a
 * user can act on.  File and line come from the DWARF debug information
 * through libdw (elfutils), which is opened with dlopen only when a summary
 * is printed, so a program under the preload does not load it otherwise;
 * without libdw, or for an object without debug information, the function
 * comes from the dynamic symbol table (dladdr) and the line is unknown.
 * Allocates: never call it from a signal handler.
 */
#ifndef PMT_SYMBOLIZE_H
#define PMT_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

struct symbol {
	char function[128];	/* "??" when unknown */
	char file[256];		/* "" when unknown */
	int line;		/* 0 when unknown */
	const char *object;	/* the mapped object's path (static storage) */
};

/* Prepare: load libdw and report this process's mappings to it.  Returns
 * true when file:line lookups are possible. */
bool symbolize_open(void);
/* ip: an instruction address; return_address: it was read from a stack
 * frame (the call is the instruction before it). */
void symbolize(uintptr_t ip, bool return_address, struct symbol *out);
void symbolize_close(void);
/* In a fork child: libdw's view of the process, which the parent's epoch
 * thread may have been building when it was copied (the stall report), is
 * dropped unread; the next symbolize_open builds the child's own. */
void symbolize_atfork_child(void);

#endif
