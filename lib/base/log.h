/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log -- the one error-message and diagnostic facility of the runtime.
 *
 * Owns: the per-thread "last error" string returned by pmthreads_errormsg(),
 * and the formatting of every message the runtime prints (prefix "pmthreads: ",
 * stderr, async-signal-safe write).  Nothing else in lib/ prints.
 */
#ifndef PMT_LOG_H
#define PMT_LOG_H

#include <stdarg.h>

enum log_level { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Messages above this level are dropped; set from PMTHREADS_VERBOSE. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Print one line "pmthreads: <level>: <message>" to stderr.  Safe in signal
 * handlers (formats into a stack buffer and uses write(2)). */
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Record the calling thread's last error (what pmthreads_errormsg() returns).
 * Does not print. */
void err_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* As err_set, appending ": strerror(errnum)". */
void err_set_errno(int errnum, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *err_get(void);
/* Clears the message and its cause. */
void err_clear(void);
/* The errno that best names the last error's cause, for a caller that
 * returns one (nvmalloc's errno): err_set_errno's errnum, or what
 * err_set_cause gave; 0 when none was given since err_clear.  err_set leaves
 * it alone, so that a message wrapping err_get() keeps its cause. */
int err_cause(void);
void err_set_cause(int errnum);

/* Print the message and abort(): for broken internal invariants only. */
__attribute__((noreturn)) void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with the arguments as a va_list (for a caller's own variadic
 * entry point). */
__attribute__((noreturn)) void log_vfatal(const char *fmt, va_list ap)
	__attribute__((format(printf, 1, 0)));

#endif
