/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stall -- telling the user that durability stands still, and why.
 *
 * Owns: the text of the stall report (quiesce.h's struct quiesce_stall made
 * into which thread holds which lock, where it took it, what it is blocked
 * in, how long, and what to do), and PMTHREADS_NOT_FASE's matching of a call
 * site against the functions it names.
 *
 * The report symbolizes (symbolize.h: file:line where debug information
 * exists) and reads /proc: it runs only when a report is due, on the epoch
 * thread.  The matcher runs once per call site on the lock path of the
 * thread that first reaches it: dladdr only, so a function is matched when
 * it is in the dynamic symbol table (exported, or linked with -rdynamic).
 */
#ifndef PMT_STALL_H
#define PMT_STALL_H

#include "quiesce/quiesce.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The quiesce_site_fn of PMTHREADS_NOT_FASE: whether the function
 * containing return address site is one of the names the configuration
 * lists. */
bool stall_not_fase_site(const void *site);

/* The report, as lines (each ends with '\n') into buf; cleared: the line
 * that says it is over.  Never fails: what cannot be found out is said so. */
void stall_format(const struct quiesce_stall *s, bool cleared, char *buf, size_t len);

/* The final epoch at exit found no quiescent point: the same report of who
 * holds what, where it was taken and what to do, for the FASEs the exit
 * found (quiesce_stall_at_exit); epoch: the last durable one, which the
 * next run recovers. */
void stall_format_exit(const struct quiesce_stall *s, unsigned long long epoch, char *buf,
		       size_t len);

/* One line for the epoch log and the statistics: "stood_ms=2000 thread=123
 * lock=0x... site=fn+0x1c" (no newline); the same with "cleared" when
 * cleared. */
void stall_summary(const struct quiesce_stall *s, bool cleared, char *buf, size_t len);

/* A code address as "function+0xoff" from the dynamic symbol table, or
 * "object+0xoff" (cheap, no allocation: the statistics use it at exit). */
void stall_site_name(uintptr_t site, char *buf, size_t len);

#endif
