/* SPDX-License-Identifier: BSD-3-Clause */
/* epoch_log -- PMTHREADS_EPOCH_LOG, one CSV line per epoch.  See epoch_log.h. */
#include "epoch/epoch_log.h"

#include "base/log.h"
#include "base/own_fds.h"
#include "prim/prim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int log_fd = -1;
static epoch_log_output_fn output_columns;

void epoch_log_set_output(epoch_log_output_fn fn)
{
	output_columns = fn;
}

int epoch_log_open(const char *path)
{
	/* O_NOFOLLOW: a symlink planted at the path must not make us
	 * truncate the file it points to. */
	int fd = prim_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err_set_errno(errno, "PMTHREADS_EPOCH_LOG: cannot create \"%s\"%s; set it to a "
			      "writable file path or unset it", path,
			      errno == ELOOP ? " (it is a symbolic link)" : "");
		return -1;
	}
	if (prim_write_all(fd, EPOCH_LOG_HEADER, sizeof(EPOCH_LOG_HEADER) - 1) != 0) {
		err_set_errno(errno, "PMTHREADS_EPOCH_LOG: cannot write \"%s\"", path);
		prim_close(fd);
		return -1;
	}
	log_fd = fd;
	own_fd_keep(&log_fd, "epoch log");
	return 0;
}

void epoch_log_record(const struct epoch_record *r)
{
	if (log_fd < 0)
		return;
	bool demanded = false;
	uint64_t released = 0;
	if (output_columns != NULL)
		output_columns(&demanded, &released);
	char line[320];
	/* Milliseconds with microsecond resolution: what a plot over a run of
	 * seconds to hours wants on its x axis. */
	int n = snprintf(line, sizeof(line),
			 "%llu.%03llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%d,%d,%llu,%llu,%llu\n",
			 (unsigned long long)(r->t_ns / 1000000),
			 (unsigned long long)(r->t_ns / 1000 % 1000),
			 (unsigned long long)r->epoch, (unsigned long long)(r->pause_ns / 1000),
			 (unsigned long long)r->pages, (unsigned long long)r->bytes_dirty,
			 (unsigned long long)r->bytes_written,
			 (unsigned long long)(r->stage_ns / 1000),
			 (unsigned long long)(r->persist_ns / 1000),
			 (unsigned long long)(r->period_ns / 1000),
			 (unsigned long long)r->pages_saved, (unsigned long long)r->conflicts,
			 r->durable ? 1 : 0, demanded ? 1 : 0, (unsigned long long)released,
			 (unsigned long long)r->device_flushes, (unsigned long long)r->device_bytes);
	if (n <= 0 || (size_t)n >= sizeof(line))
		return;
	if (prim_write_all(log_fd, line, (size_t)n) != 0) {
		log_msg(LOG_WARN, "PMTHREADS_EPOCH_LOG: write failed (%s); the epoch log stops "
			"here", strerror(errno));
		epoch_log_close();
	}
}

void epoch_log_close(void)
{
	own_fd_close(&log_fd);
}

void epoch_log_note(const char *text)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "# %s\n", text);
	if (log_fd >= 0 && n > 0 && (size_t)n < sizeof(line))
		(void)prim_write_all(log_fd, line, (size_t)n);
}
