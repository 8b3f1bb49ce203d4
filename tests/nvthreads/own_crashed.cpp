// SPDX-License-Identifier: BSD-3-Clause
// own_crashed.c built as C++.
#include "own_crashed.c"
