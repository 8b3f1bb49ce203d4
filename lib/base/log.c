/* SPDX-License-Identifier: BSD-3-Clause */
/* log -- messages and the per-thread last error.  See log.h. */
#include "base/log.h"

#include "base/assert.h"

#include "prim/prim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSG_MAX 1024

static enum log_level current_level = LOG_WARN;
static _Thread_local char last_error[MSG_MAX];
/* The errno that goes with it (err_cause): 0 when none was given. */
static _Thread_local int last_cause;

void log_set_level(enum log_level level) { current_level = level; }
enum log_level log_get_level(void) { return current_level; }

static const char *const level_names[] = { "error", "warning", "info", "debug" };

static void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char buf[MSG_MAX];
	int n = snprintf(buf, sizeof(buf), "pmthreads: %s: ", level_names[level]);
	if (n < 0)
		return;
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	buf[len++] = '\n';
	/* write(2) rather than stdio: callable from signal handlers and before
	 * the C library's streams are usable. */
	(void)prim_write_all(STDERR_FILENO, buf, len);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (level > current_level)
		return;
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
	errno = saved;
}

void err_set(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	errno = saved;
}

void err_set_errno(int errnum, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(last_error))
		snprintf(last_error + n, sizeof(last_error) - (size_t)n, ": %s",
			 strerror(errnum));
	last_cause = errnum;
	errno = saved;
}

const char *err_get(void) { return last_error; }
void err_clear(void)
{
	last_error[0] = '\0';
	last_cause = 0;
}
void err_set_cause(int errnum) { last_cause = errnum; }
int err_cause(void) { return last_cause; }

void log_vfatal(const char *fmt, va_list ap)
{
	log_vmsg(LOG_ERR, fmt, ap);
	abort();
}

void log_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vfatal(fmt, ap);
}

/* Async-signal-safe: the pieces go into a stack buffer by hand (no
 * snprintf), then out through one write(2). */
static size_t append(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s != '\0' && at < cap)
		buf[at++] = *s++;
	return at;
}

void pmt_assert_fail(const char *expr, const char *file, int line, const char *func)
{
	char buf[MSG_MAX], digits[12];
	size_t cap = sizeof(buf) - 1, at = 0;
	int nd = 0;
	unsigned v = line > 0 ? (unsigned)line : 0;
	do
		digits[nd++] = (char)('0' + v % 10);
	while ((v /= 10) != 0 && nd < (int)sizeof(digits));
	at = append(buf, at, cap, "pmthreads: assertion failed: ");
	at = append(buf, at, cap, file);
	at = append(buf, at, cap, ":");
	while (nd > 0 && at < cap)
		buf[at++] = digits[--nd];
	at = append(buf, at, cap, ": ");
	at = append(buf, at, cap, func);
	at = append(buf, at, cap, ": ");
	at = append(buf, at, cap, expr);
	buf[at++] = '\n';
	(void)prim_write_all(STDERR_FILENO, buf, at);
	abort();
}
