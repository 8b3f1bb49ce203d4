/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * assert -- PMT_ASSERT, the runtime's checks of its own invariants.
 *
 * Owns: the debug-build assertion.  Compiled in only when PMT_DEBUG is
 * defined (meson -Dbuildtype=debug adds it); in every other build the
 * condition is not evaluated (it is still type-checked).  On failure it
 * prints "pmthreads: assertion failed: FILE:LINE: FUNC: EXPR" through log's
 * write(2) path -- no malloc, no stdio, so fault handlers may assert -- and
 * aborts.  Bad input is never asserted: it gets err_set and an error return.
 */
#ifndef PMT_ASSERT_H
#define PMT_ASSERT_H

__attribute__((noreturn, cold)) void pmt_assert_fail(const char *expr, const char *file, int line,
						     const char *func);

#ifdef PMT_DEBUG
#define PMT_ASSERT(cond)                                                                   \
	(__builtin_expect(!!(cond), 1) ? (void)0                                            \
				       : pmt_assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define PMT_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
