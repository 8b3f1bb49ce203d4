// SPDX-License-Identifier: BSD-3-Clause
// headers.c built as C++.
#include "headers.c"
