#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""What ships has no test hooks: no function a test-hook header of lib/
(lib/<dir>/*_test.h, compiled only into the tests' build of the core,
lib/meson.build's pmthreads_core_test) declares is defined in any of the
binaries given (libpmthreads.so, pmthreads-recover), neither exported nor
local.  Usage: test_shipped_hooks.py SOURCE_ROOT BINARY...  Exit 1 naming
each hook found, 77 (skip) without nm."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_layers import declared_functions  # noqa: E402


def hooks(root):
    names = {}
    lib = os.path.join(root, 'lib')
    for d, _, fs in sorted(os.walk(lib)):
        for f in sorted(fs):
            if f.endswith('_test.h'):
                path = os.path.join(d, f)
                with open(path, encoding='utf-8') as fh:
                    for name in declared_functions(fh.read()):
                        names[name] = os.path.relpath(path, root)
    return names


def defined(nm, binary, dynamic):
    args = [nm, '--defined-only'] + (['-D'] if dynamic else []) + [binary]
    out = subprocess.run(args, capture_output=True, text=True, check=False).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) >= 3}


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    nm = shutil.which('nm')
    if nm is None:
        print('SKIP: no nm (binutils) to read the binaries\' symbols')
        return 77
    root, binaries = argv[0], argv[1:]
    names = hooks(root)
    if not names:
        print('no lib/**/*_test.h declares a function: nothing to look for')
        return 1
    bad = []
    for b in binaries:
        symbols = defined(nm, b, False)
        if not symbols:
            print(f'{b}: stripped, only its dynamic symbols read')
        symbols |= defined(nm, b, True)
        for name in sorted(names):
            if name in symbols:
                bad.append(f'{b} defines {name} ({names[name]}): a test hook in what ships; '
                           'build its file only into pmthreads_core_test (lib/meson.build)')
    for line in bad:
        print(line)
    print(f'{len(names)} test hook(s) looked for in {len(binaries)} binaries: '
          f'{len(bad)} found')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
