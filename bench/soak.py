#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""soak.py -- the long kill -9 soak (driven by bench/soak.sh; see its header).

The soak itself is the package tools/pmtkit/soak/ (one module per program);
`soak.py --self-test` runs its test cases (meson test soak-self-test).
"""
import sys
from pathlib import Path

# pmtkit sits in tools/; no __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from pmtkit.soak.main import main  # noqa: E402

if __name__ == "__main__":
    main(sys.argv[1:])
