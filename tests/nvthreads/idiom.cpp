// SPDX-License-Identifier: BSD-3-Clause
// idiom.c built as C++, as NVthreads' own programs were.
#include "idiom.c"
