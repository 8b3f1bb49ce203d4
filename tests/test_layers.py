#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The layering of lib/ (lib/README.md's table): each directory includes
headers only of the directories it may call (never one private to another
directory: *_backend.h, *_internal.h), and every function its headers
declare (not static) is named with one of the directory's prefixes, so that
a name says where it lives.  Inside a directory, a file that others call
does not call them back (ONE_WAY); a private header X_internal.h is
included only by the files of X (X*.c, X*.h: nvm_log_internal.h by
nvm_log*.c), one named for its directory by every file of it
(quiesce/quiesce_internal.h).  A test-hook header (lib/<dir>/*_test.h, whose functions only
the tests' build of the core has: lib/meson.build) is included only by
tests/ and its own *_test.c (TEST_ONLY).  preload/ only forwards: a file of it
includes, of lib/, only runtime/interpose.h and base/export.h
(PRELOAD_MAY_INCLUDE), besides its own headers and the system's.  Exit 1
naming every include or name that breaks it, and when a directory exists
that the tables do not know."""
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
# The prefixes a function declared in lib/<dir>/*.h may have: the module's
# name, or the name of the one thing a file of it owns.  A name matches a
# prefix when it is the prefix or starts with the prefix and '_'.
PREFIXES = {
    'prim': {'prim'},
    'base': {'config', 'log', 'err', 'pmt_assert', 'hist', 'own_fd'},
    'quiesce': {'quiesce', 'fase'},
    'track': {'tracker', 'shadow', 'fault_signal'},
    'persist': {'persist', 'pool', 'nvm'},
    'epoch': {'epoch'},
    'recovery': {'recovery', 'restore'},
    'heap': {'heap'},
    'diagnose': {'fase_checker', 'symbolize', 'stall'},
    'output': {'output'},
    'runtime': {'runtime', 'stats', 'target', 'kernel_stack', 'kernel_stacks', 'memory_limits',
                'meta_sums', 'aio_pin', 'aio_pins', 'memory_lock', 'memory_unlock', 'startup',
                'linkage', 'exec_env', 'prefault', 'syscall_outputs', 'privilege'},
}
# Within a directory: lib/<dir>/<file>.{c,h} includes none of these headers
# and calls no function with these prefixes.  The report (stats) is called
# by the runtime and gets the runtime's figures as a struct stats_runtime;
# calling runtime_* from it would make the two depend on each other.
ONE_WAY = {
    'runtime/stats': ({'runtime/runtime.h'}, {'runtime'}),
    # quiesce/, one concern a file (quiesce_internal.h): the epoch loop
    # makes attempts, an attempt reports to stall detection, and the end of
    # the process counts the runtime's threads -- never the other way.
    'quiesce/attempt': (set(), {'quiesce_start', 'quiesce_stop', 'quiesce_sync'}),
    'quiesce/stall_detect': (set(), {'quiesce_attempt', 'quiesce_start', 'quiesce_stop'}),
    'quiesce/internal_threads': (set(), {'quiesce_end', 'quiesce_no_app_thread',
                                         'quiesce_app_thread', 'quiesce_set_last_thread_fn'}),
}
# What a file of preload/ may include of lib/: the one interface the runtime
# offers its interposers and symbol visibility.  Anything else of lib/ is
# reached through runtime/interpose.h, so that policy stays in lib/ and the
# boundary is one header.
PRELOAD_MAY_INCLUDE = {'runtime/interpose.h', 'base/export.h'}
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
# A declaration or definition at file scope: a line that starts (no indent:
# members and bodies are indented) with neither a keyword that makes it no
# function of the module's interface nor a preprocessor line, then the name
# before the first '('.
FUNCTION = re.compile(r'^(?!static\b|typedef\b|#|_Static_assert\b)[A-Za-z_][^;{}()=]*?'
                      r'\b([A-Za-z_][A-Za-z0-9_]*)\s*\(', re.M)


def strip_attributes(text):
    """text without its __attribute__((...)) and the blanks after them."""
    out = []
    i = 0
    while True:
        j = text.find('__attribute__', i)
        if j < 0:
            out.append(text[i:])
            return ''.join(out)
        out.append(text[i:j])
        k = text.find('(', j)
        depth = 0
        while k < len(text):
            if text[k] == '(':
                depth += 1
            elif text[k] == ')':
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1
        while i < len(text) and text[i] in ' \t':
            i += 1


def declared_functions(text):
    return FUNCTION.findall(strip_attributes(COMMENT.sub('', text)))


def misnamed(d, f, text):
    bad = []
    for name in declared_functions(text):
        if not any(name == p or name.startswith(p + '_') for p in PREFIXES[d]):
            bad.append(f'lib/{d}/{f} declares {name}: a function of {d}/ is named '
                       f'{", ".join(p + "_*" for p in sorted(PREFIXES[d]))}; rename it, '
                       'or move it to the directory its name says')
    return bad


CALL = re.compile(r'\b([A-Za-z_][A-Za-z0-9_]*)\s*\(')


def calls_back(d, f, text):
    """What lib/<d>/<f> includes or calls against ONE_WAY."""
    rule = ONE_WAY.get(f'{d}/{os.path.splitext(f)[0]}')
    if rule is None:
        return []
    headers, prefixes = rule
    bad = [f'lib/{d}/{f} includes {dep}/{h}: it is called by that module and must not '
           'call it back; pass what it needs as an argument'
           for dep, h in INCLUDE.findall(text) if f'{dep}/{h}' in headers]
    code = COMMENT.sub('', text)
    for name in sorted(set(CALL.findall(code))):
        if any(name == p or name.startswith(p + '_') for p in prefixes):
            bad.append(f'lib/{d}/{f} calls {name}: it is called by that module and must not '
                       'call it back; pass what it needs as an argument')
    return bad


INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/([A-Za-z0-9_.]+)"', re.M)
# Headers private to their directory (persist/nvm_backend.h, track/tracker_backend.h...).
PRIVATE = re.compile(r'_(backend|internal)\.h$')
# Test hooks (persist/nvm_log_test.h): compiled only into the tests' core.
TEST_ONLY = re.compile(r'_test\.h$')
# Where code that ships (or is built with what ships) lives, besides lib/.
SHIPPED_DIRS = ('preload', 'recover', 'fuzz', 'bench', 'tools', 'examples')
# Any quoted include, with or without a directory (preload/'s own headers have none).
QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def check_preload(root):
    """What preload/*.c and *.h include of lib/ beyond PRELOAD_MAY_INCLUDE."""
    path = os.path.join(root, 'preload')
    # preload/'s own headers, and those meson generates for it from
    # lib/runtime/syscall_outputs.tab (preload/meson.build)
    own = {f for f in os.listdir(path) if f.endswith('.h')} | {'syscall_wrappers_real.h'}
    bad = []
    for f in sorted(os.listdir(path)):
        if not f.endswith(('.c', '.h')):
            continue
        with open(os.path.join(path, f), encoding='utf-8') as fh:
            text = COMMENT.sub('', fh.read())
        for header in QUOTED_INCLUDE.findall(text):
            if header in own or header in PRELOAD_MAY_INCLUDE:
                continue
            bad.append(f'preload/{f} includes "{header}": preload/ only forwards and includes '
                       'of lib/ only runtime/interpose.h and base/export.h; call what '
                       'interpose.h offers, or add an entry point there')
    return bad


def private_to_files(d, f, header):
    """lib/<d>/<f> includes lib/<d>/<header>, an X_internal.h, and is no file of X."""
    m = re.search(r'^(.*)_internal\.h$', header)
    # The directory's own (quiesce/quiesce_internal.h): every file of it.
    if m is None or f.startswith(m.group(1)) or m.group(1) == d:
        return []
    return [f'lib/{d}/{f} includes {d}/{header}, private to {d}/{m.group(1)}*: '
            f'use the module\'s public header, or move what it needs there']


def test_hook_includes(root):
    """Who includes a test-hook header (*_test.h) outside tests/: only its own
    lib/<dir>/*_test.c may."""
    bad = []
    for top in ('lib',) + SHIPPED_DIRS:
        for d, _, fs in sorted(os.walk(os.path.join(root, top))):
            for f in sorted(fs):
                if not f.endswith(('.c', '.h', '.cpp', '.cc')):
                    continue
                path = os.path.join(d, f)
                with open(path, encoding='utf-8', errors='replace') as fh:
                    text = COMMENT.sub('', fh.read())
                for header in QUOTED_INCLUDE.findall(text):
                    if not TEST_ONLY.search(header):
                        continue
                    if f.endswith('.c') and os.path.basename(header) == f[:-2] + '.h':
                        continue
                    bad.append(f'{os.path.relpath(path, root)} includes "{header}": its test '
                               'hooks exist only in the tests\' build of the core; call them '
                               'from tests/ only')
    return bad


def main(root):
    lib = os.path.join(root, 'lib')
    bad = []
    for d in sorted(os.listdir(lib)):
        path = os.path.join(lib, d)
        if not os.path.isdir(path) or d == 'include':
            continue
        if d not in MAY_CALL or d not in PREFIXES:
            bad.append(f'lib/{d}/: a directory tests/test_layers.py does not know; '
                       'add it to MAY_CALL, PREFIXES and lib/README.md')
            continue
        for f in sorted(os.listdir(path)):
            if not f.endswith(('.c', '.h')):
                continue
            with open(os.path.join(path, f), encoding='utf-8') as fh:
                text = fh.read()
            for dep, header in INCLUDE.findall(text):
                if dep != d and dep not in MAY_CALL[d]:
                    bad.append(f'lib/{d}/{f} includes {dep}/: {d}/ may call '
                               f'{", ".join(sorted(MAY_CALL[d])) or "nothing"}')
                elif dep != d and PRIVATE.search(header):
                    bad.append(f'lib/{d}/{f} includes {dep}/{header}, private to {dep}/: '
                               f'use {dep}/\'s public header')
                elif dep == d:
                    bad.extend(private_to_files(d, f, header))
            if f.endswith('.h'):
                bad.extend(misnamed(d, f, text))
            bad.extend(calls_back(d, f, text))
    bad.extend(check_preload(root))
    bad.extend(test_hook_includes(root))
    for b in bad:
        print(b)
    print(f'{len(bad)} layering or naming violation(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')))
