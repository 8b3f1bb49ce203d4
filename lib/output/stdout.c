/* SPDX-License-Identifier: BSD-3-Clause */
/* stdout -- stdio's standard output held by output commit.  See stdout.h. */
#include "output/stdout.h"

#include "base/log.h"
#include "output/output.h"
#include "prim/prim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A buffer outside the persistent heap (stdio's own would be malloc'd). */
static char out_buf[BUFSIZ];

static ssize_t stream_write(void *cookie, const char *buf, size_t n)
{
	int fd = (int)(intptr_t)cookie;
	struct iovec v = { (void *)buf, n };
	ssize_t r;
	if (!output_hold(fd, &v, 1, 0, NULL, 0, &r))
		r = prim_sys_write(fd, buf, n);	/* output commit off (a fork's child, exit) */
	/* fopencookie: 0, not -1, on error (errno says which). */
	return r < 0 ? 0 : r;
}

static int stream_close(void *cookie)
{
	return prim_close((int)(intptr_t)cookie);	/* the interposed close: held bytes first */
}

bool output_stdout_hold(void)
{
	struct stat st;
	if (prim_fstat(1, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return false;
	cookie_io_functions_t io = { .read = NULL, .write = stream_write, .seek = NULL,
				     .close = stream_close };
	FILE *f = fopencookie((void *)(intptr_t)1, "w", io);
	if (f == NULL) {
		log_msg(LOG_WARN, "output commit: cannot make a held stdout stream (%s); printf "
			"and the rest of stdio's output to descriptor 1 is not held", strerror(errno));
		return false;
	}
	setvbuf(f, out_buf, _IOFBF, sizeof(out_buf));
	/* fileno(stdout) must stay 1 (isatty, write(fileno(stdout), ...)):
	 * glibc reads it from the stream and a cookie stream has none. */
	f->_fileno = 1;
	fflush(stdout);	/* what constructors before ours printed */
	stdout = f;
	return true;
}
