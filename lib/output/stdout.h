/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stdout -- the program's stdio output to standard output held like its
 * write(2)s, when standard output is a pipe or a socket.
 *
 * Owns: the stdio stream that replaces stdout at start-up.
 *
 * glibc's stdio writes its buffers with an internal write no interposed
 * symbol sees, so printf to a pipe would leave at once, ahead of
 * durability.  With output commit on and descriptor 1 a pipe or socket,
 * stdout is made a stream of the runtime's (fopencookie) whose writes go
 * through output_hold on descriptor 1: held, ordered with the program's own
 * write(1, ...) calls, released as they are.  The stream keeps what a
 * program sees of stdout: fileno(stdout) is 1, buffering is the same (full,
 * BUFSIZ; setvbuf works), fclose closes descriptor 1 (through close(2), so
 * what is held goes first), and a write failing at release is reported on a
 * later call as for write(2).
 *
 * Not held: stderr (diagnostics must survive a crash), any other FILE (an
 * fdopen'd socket, a popen'd pipe), a FILE * to the original stdout a
 * program kept before start-up -- C++ iostreams set up before the runtime's
 * constructor are one -- and everything after freopen(..., stdout), which
 * makes stdout an ordinary stream again.
 */
#ifndef PMT_OUTPUT_STDOUT_H
#define PMT_OUTPUT_STDOUT_H

#include <stdbool.h>

/* At start-up, output commit on: replace stdout when descriptor 1 is a pipe
 * or a socket.  Returns whether it did. */
bool output_stdout_hold(void);

#endif
