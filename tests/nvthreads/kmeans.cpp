// SPDX-License-Identifier: BSD-3-Clause
// kmeans.c built as C++, as NVthreads' own programs were.
#include "kmeans.c"
