/* SPDX-License-Identifier: BSD-3-Clause */
/* prim_probe -- real faults decoded by lib/prim/, and its file primitives,
 * for test_prim.cpp (prim.h is C only). */
#ifndef PMT_TESTS_PRIM_PROBE_H
#define PMT_TESTS_PRIM_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

enum probe_access { PROBE_READ, PROBE_WRITE, PROBE_EXEC };

/* Make an access of kind what that faults (a read of a PROT_NONE page, a
 * write to a PROT_READ page, a call into a page without PROT_EXEC) with
 * SIGUSR1 blocked, and return what prim_fault_access said in the SIGSEGV
 * handler: "read", "write", "exec", "unknown"; "none" when nothing faulted.
 * *usr1_blocked: whether prim_interrupted_sigmask had SIGUSR1. */
const char *probe_fault(enum probe_access what, int *usr1_blocked);

/* prim.h's file primitives, which C++ cannot take from prim.h itself (it
 * includes <stdatomic.h>); prim_probe.c includes both headers, so the C
 * compiler holds these to prim.h's declarations. */
int prim_pwrite_all(int fd, const void *buf, size_t len, off_t off);
ssize_t prim_pread_all(int fd, void *buf, size_t len, off_t off);
int prim_sync_dir(const char *dir);
int prim_next_data(int fd, off_t from, off_t end, off_t *start, off_t *stop);
ssize_t prim_read_file(const char *path, char *buf, size_t len);
ssize_t prim_readlink(const char *path, char *buf, size_t len);
bool prim_same_file(const char *a, const char *b);
struct rlimit;
int prim_get_rlimit(int resource, struct rlimit *rl);
struct stat;
int prim_lock_file(int fd, bool shared);
bool prim_file_read_locked(int fd);
bool prim_file_open_here(int except_fd, const struct stat *st);
pid_t prim_process_with_file(const struct stat *st);
bool prim_process_alive(pid_t pid);
int prim_rename_noreplace(const char *from, const char *to);
int prim_make_private(void *addr, size_t len, bool keep);
bool prim_fs_full(int fd);

/* prim_replace_file(path, text), the temporary name left in tmp: 0, or -1
 * with errno set and *failed the step named ("name", "create", "write",
 * "rename"). */
int probe_replace_file(const char *path, const char *text, char *tmp, size_t tmp_len,
		       const char **failed);

#ifdef __cplusplus
}
#endif

#endif
