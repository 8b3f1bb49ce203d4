/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats_fields -- one list per module's counters, expanded into its struct,
 * its sum and its fields of the PMTHREADS_STATS report.
 *
 * Owns: the kinds of field a list may hold and what each means in a sum.  A
 * module writes its counters once, as an X-macro list:
 *
 *	#define TRACKER_STATS_FIELDS(X) \
 *		X(count, faults, "tracker_faults") \
 *		X(count, collections, "tracker_collections") \
 *		...
 *	struct tracker_stats { TRACKER_STATS_FIELDS(STATS_DECLARE) };
 *
 * and, where one set is added into another, a function whose parameters are
 * named dst and src and whose body is TRACKER_STATS_FIELDS(STATS_ADD).
 * runtime/stats.c writes the report from the same lists, so a counter added
 * to a list is declared, summed and reported by that one line.
 *
 * X(kind, field, key): field is the struct member; key is its name in the
 * report (NULL: the report writes it by hand, or not at all); kind is
 *   count  a uint64_t that only grows (calls, pages, bytes, ns in all):
 *          a sum adds it;
 *   value  a uint64_t figure of the moment (a percentile, a maximum, a size):
 *          a sum keeps the larger;
 *   flag   a bool: a sum keeps true.
 */
#ifndef PMT_STATS_FIELDS_H
#define PMT_STATS_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

#define STATS_TYPE_count uint64_t
#define STATS_TYPE_value uint64_t
#define STATS_TYPE_flag bool
#define STATS_DECLARE(kind, field, key) STATS_TYPE_##kind field;

#define STATS_ADD_count(field) dst->field += src->field;
#define STATS_ADD_value(field) \
	if (src->field > dst->field) \
		dst->field = src->field;
#define STATS_ADD_flag(field) dst->field = dst->field || src->field;
#define STATS_ADD(kind, field, key) STATS_ADD_##kind(field)

#endif
