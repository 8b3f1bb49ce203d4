#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The layering of lib/ (lib/README.md's table): each directory includes
headers only of the directories it may call.  Exit 1 naming every include
that breaks it, and when a directory exists that the table does not know."""
import os
import re
import sys

MAY_CALL = {
    'prim': set(),
    'base': {'prim'},
    'quiesce': {'base', 'prim'},
    'track': {'base', 'prim'},
    'persist': {'base', 'prim'},
    'epoch': {'quiesce', 'track', 'persist', 'base', 'prim'},
    'recovery': {'persist', 'track', 'quiesce', 'base', 'prim'},
    'heap': {'quiesce', 'base', 'prim'},
    'diagnose': {'quiesce', 'base', 'prim'},
    'output': {'quiesce', 'base', 'prim'},
    'runtime': {'prim', 'base', 'quiesce', 'track', 'epoch', 'persist', 'recovery', 'heap',
                'diagnose', 'output'},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/[A-Za-z0-9_.]+"', re.M)


def main(root):
    lib = os.path.join(root, 'lib')
    bad = []
    for d in sorted(os.listdir(lib)):
        path = os.path.join(lib, d)
        if not os.path.isdir(path) or d == 'include':
            continue
        if d not in MAY_CALL:
            bad.append(f'lib/{d}/: a directory tests/test_layers.py does not know; '
                       'add it to MAY_CALL and to lib/README.md')
            continue
        for f in sorted(os.listdir(path)):
            if not f.endswith(('.c', '.h')):
                continue
            with open(os.path.join(path, f), encoding='utf-8') as fh:
                text = fh.read()
            for dep in INCLUDE.findall(text):
                if dep != d and dep not in MAY_CALL[d]:
                    bad.append(f'lib/{d}/{f} includes {dep}/: {d}/ may call '
                               f'{", ".join(sorted(MAY_CALL[d])) or "nothing"}')
    for b in bad:
        print(b)
    print(f'{len(bad)} layering violation(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')))
