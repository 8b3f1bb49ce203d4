/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prim_uffd -- the userfaultfd and PAGEMAP_SCAN uapi that prim_uffd_open,
 * prim_uffd_ioctl and prim_pagemap_scan (prim.h) take: the kernel's
 * headers, and what Debian 12's predate (Linux 5.11 / 6.4 / 6.7) defined
 * here as the kernel does.
 */
#ifndef PMT_PRIM_UFFD_H
#define PMT_PRIM_UFFD_H

#include <linux/userfaultfd.h>
#include <stdint.h>
#include <sys/ioctl.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1ULL << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1ULL << 15)
#endif
#ifndef UFFDIO_COPY_MODE_WP
#define UFFDIO_COPY_MODE_WP ((uint64_t)1 << 1)
#endif

#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start;
	uint64_t end;
	uint64_t categories;
};

struct pm_scan_arg {
	uint64_t size;
	uint64_t flags;
	uint64_t start;
	uint64_t end;
	uint64_t walk_end;
	uint64_t vec;
	uint64_t vec_len;
	uint64_t max_pages;
	uint64_t category_inverted;
	uint64_t category_mask;
	uint64_t category_anyof_mask;
	uint64_t return_mask;
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING (1ULL << 0)
#define PM_SCAN_CHECK_WPASYNC (1ULL << 1)
#define PAGE_IS_WRITTEN (1ULL << 1)
#endif

#endif
