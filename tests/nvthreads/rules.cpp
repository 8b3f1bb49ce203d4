// SPDX-License-Identifier: BSD-3-Clause
// rules.c built as C++.
#include "rules.c"
