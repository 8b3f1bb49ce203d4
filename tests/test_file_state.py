#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Mutable state at file scope in lib/ stays gathered: each lib/**/*.c file
defines at most LIMIT mutable variables at file scope (static or not,
thread-local included; const objects, extern declarations, functions and
types are not state).  State that belongs together is one struct whose
fields say what guards them, so a reader finds it in one place and a fork
child resets it in one place.  A header (lib/**/*.h, the private ones that
split files share included: nvm_log_internal.h) defines none: each file
including it would get its own copy.  State a file shares with the other
files of its directory (a mutable variable defined without static) is
declared extern in a header of that directory, where its fields say what
guards them (quiesce/quiesce_internal.h, heap/heap_layout.h).  Every lock of
lib/ (a prim_lock_t, a variable or a field) is named by a record that says
what a fork child gets of it (lib/prim/prim.h: PRIM_LOCK_NAMED, or the each()
function of a PRIM_LOCK_KIND): a .c file's in that file, a header's in a .c
file of its directory.  Exit 1 naming every file over the limit and its
variables, every header defining one, every shared variable no header
declares and every lock no record names; with --list, print every file's
count."""
import os
import re
import sys

LIMIT = 10

COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                               re.S)
IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
# Words of a declaration that are no declarator's name.
KEYWORDS = {
    'static', 'extern', 'const', 'volatile', 'restrict', '_Atomic', '_Thread_local', '__thread',
    'thread_local', 'register', 'inline', 'unsigned', 'signed', 'int', 'char', 'short', 'long',
    'float', 'double', 'void', 'bool', '_Bool', 'struct', 'union', 'enum', '_Alignas',
    'alignas', '__restrict',
}


def strip_comments_and_preprocessor(text):
    """text without comments, string and character literals (kept as an
    empty "" so an initializer stays one), and preprocessor lines (with their
    continuations)."""
    text = COMMENT_OR_STRING.sub(lambda m: '' if m.group(0)[0] == '/' else '""', text)
    out = []
    continued = False
    for line in text.split('\n'):
        directive = continued or line.lstrip().startswith('#')
        continued = directive and line.rstrip().endswith('\\')
        out.append('' if directive else line)
    return '\n'.join(out)


def strip_attributes(text):
    """text without __attribute__((...)), __asm__(...) and _Alignas(...)."""
    out = []
    i = 0
    pattern = re.compile(r'\b(__attribute__|__asm__|asm|_Alignas|alignas)\b')
    while True:
        m = pattern.search(text, i)
        if m is None:
            out.append(text[i:])
            return ''.join(out)
        out.append(text[i:m.start()])
        k = text.find('(', m.end())
        depth = 0
        while k < len(text):
            depth += text[k] == '('
            depth -= text[k] == ')'
            if depth == 0:
                break
            k += 1
        i = k + 1


def top_level_declarations(code):
    """The declarations at file scope, each as its text with every brace
    block (a struct's members, an initializer) reduced to {}; function
    bodies dropped."""
    decls = []
    cur = []
    depth = 0
    body = False	# the open block at depth 1 is a function's body
    for ch in code:
        if depth == 0:
            if ch == '{':
                head = strip_attributes(''.join(cur)).rstrip()
                body = head.endswith(')')
                depth = 1
                if not body:
                    cur.append('{')
            elif ch == ';':
                decls.append(''.join(cur).strip())
                cur = []
            else:
                cur.append(ch)
            continue
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
            if depth == 0:
                if body:
                    cur = []	# a function definition ends here
                else:
                    cur.append('}')
    return decls


def split_top(text, sep):
    """text split at sep outside parentheses, brackets and braces."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def mutable_variables(decl):
    """The names a file-scope declaration defines as mutable objects."""
    decl = strip_attributes(decl)
    words = IDENT.findall(decl)
    while words and words[0] == '__extension__':
        words.pop(0)
    if not words or words[0] in ('typedef', 'extern', '_Static_assert', 'static_assert'):
        return []
    decl = re.sub(r'\b_Atomic\s*\(([^()]*)\)', r'_Atomic \1', decl)
    # A struct, union or enum body is a type, its tag no declarator's name;
    # an array's bound names no object either.
    decl = re.sub(r'\b(struct|union|enum)\s*([A-Za-z_][A-Za-z0-9_]*)?\s*(\{\})?', r'\1 ', decl)
    decl = re.sub(r'\[[^\]]*\]', '[]', decl)
    declarators = split_top(decl, ',')
    # What the first declarator's specifiers say holds for every declarator.
    first = split_top(declarators[0], '=')[0]
    name_at = [m for m in IDENT.finditer(first) if m.group(0) not in KEYWORDS]
    if not name_at:
        return []
    specifiers = first[:name_at[-1].start()]
    specifiers = specifiers[:specifiers.find('*')] if '*' in specifiers else specifiers
    const_type = re.search(r'\bconst\b', specifiers) is not None
    names = []
    for d in declarators:
        d = split_top(d, '=')[0]
        if d is not declarators[0]:
            d = d.strip()
        idents = [m for m in IDENT.finditer(d) if m.group(0) not in KEYWORDS]
        if not idents:
            continue
        # A '(' not opening '(*' opens a function's parameters: a prototype,
        # whatever pointers to functions its parameters are.
        paren = d.find('(')
        if paren >= 0 and not d[paren + 1:].lstrip().startswith('*'):
            continue
        # Inside (*name)(...), the name is the one after the '(*': an
        # object, a pointer to a function.
        pointer = re.search(r'\(\s*\*\s*(?:const\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\)', d)
        if pointer is not None:
            names.append((pointer.group(1), re.search(r'\*\s*const\b', d) is not None))
            continue
        # Any other '(' opens a function's parameters: a prototype.
        if '(' in d:
            continue
        name = idents[-1]
        before = d[:name.start()]
        if '*' in before:
            const = re.search(r'\bconst\s*$', before[before.rfind('*') + 1:]) is not None
        else:
            const = const_type
        names.append((name.group(0), const))
    return [n for n, const in names if not const]


# What the count must find in a few shapes of declaration: it fails (names
# the sample) when the parser above misses or miscounts one.
SAMPLES = [
    ('static int a, b = 1;\nint c;\n', ['a', 'b', 'c']),
    ('static const int k = 1;\nstatic const char *const names[] = { "x,y" };\n', []),
    ('static const char *p;\nstatic char *const q = 0;\n', ['p']),
    ('extern int e;\ntypedef int t;\nstruct s { int x; };\nenum { A, B };\n', []),
    ('static int f(int x);\nint g(void) { static int inner; return inner; }\n', []),
    ('static struct { int x; } st = { 1 };\nstatic void (*hook)(int);\n'
     'static __thread bool tl __attribute__((tls_model("initial-exec")));\n', ['st', 'hook', 'tl']),
    ('static _Atomic(int) at[N];\n#define X(a) static int no_##a; \\\n\tstatic int no_b;\n'
     '/* static int no_c; */\n', ['at']),
    ('static struct slab { int n; } *_Atomic slabs;\nstruct quiesce_rec rec = { .depth = 1 };\n',
     ['slabs', 'rec']),
    ('void set_helper(int (*start)(void *), void (*done)(void), bool busy);\n'
     'static int (*const fixed)(void) = 0;\nint (*cb)(int);\n', ['cb']),
]


# What the shared ones must be among them.
SHARED_SAMPLES = [
    ('static int a;\nint b, c = 1;\nstruct quiesce_epoch quiesce_epoch = { .lock = 0 };\n'
     'static struct { int x; } st;\n__thread struct t self __attribute__((tls_model("x")));\n',
     ['b', 'c', 'quiesce_epoch', 'self']),
]


def self_test():
    bad = []
    for text, want in SAMPLES:
        got = text_state(text)
        if got != want:
            bad.append(f'the count itself is wrong: {text!r} gives {got}, expected {want}')
    for text, want in SHARED_SAMPLES:
        got = text_state(text, shared_only=True)
        if got != want:
            bad.append(f'the shared count itself is wrong: {text!r} gives {got}, expected {want}')
    return bad


def file_state(path):
    with open(path, encoding='utf-8') as fh:
        return text_state(fh.read())


STATIC = re.compile(r'(__extension__\s+)*static\b')


def text_state(text, shared_only=False):
    """The mutable file-scope variables text defines; shared_only: only those
    defined without static (visible to the other files)."""
    code = strip_comments_and_preprocessor(text)
    names = []
    for decl in top_level_declarations(code):
        if shared_only and STATIC.match(strip_attributes(decl).lstrip()):
            continue
        names.extend(mutable_variables(decl))
    return names


def undeclared_shared(path):
    """The variables path defines without static that no header of its
    directory declares extern."""
    d = os.path.dirname(path)
    headers = ''.join(strip_comments_and_preprocessor(open(os.path.join(d, h), encoding='utf-8').read())
                      for h in sorted(os.listdir(d)) if h.endswith('.h'))
    with open(path, encoding='utf-8') as fh:
        shared = text_state(fh.read(), shared_only=True)
    return [n for n in shared if not re.search(r'\bextern\b[^;]*\b' + re.escape(n) + r'\b', headers)]


LOCK_DECL = re.compile(r'\bprim_lock_t\s+([A-Za-z_][A-Za-z0-9_]*)\s*[;=\[]')
NAMED = re.compile(r'\bPRIM_LOCK_NAMED\s*\(([^,]*),')
KIND = re.compile(r'\bPRIM_LOCK_KIND\s*\([^,]*,[^,]*,[^,]*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)')
# The lock an address-of expression ends in: &x.lock, &h->slots[0].lock.
ADDRESS_OF = re.compile(r'&\s*[A-Za-z_][A-Za-z0-9_]*(?:\s*(?:->|\.)\s*[A-Za-z_][A-Za-z0-9_]*'
                        r'|\s*\[[^\]]*\])*')


def lock_names_recorded(code):
    """The name each lock record of code (comments stripped) ends in, once per
    lock: PRIM_LOCK_NAMED's expression, and what a PRIM_LOCK_KIND's each()
    function returns the address of."""
    names = [IDENT.findall(m.group(1))[-1] for m in NAMED.finditer(code) if IDENT.findall(m.group(1))]
    for m in KIND.finditer(code):
        body = re.search(r'\b' + re.escape(m.group(1)) + r'\s*\(\s*size_t\s+\w+\s*\)\s*\{(.*?)\n\}',
                         code, re.S)
        if body is not None:
            names += [IDENT.findall(a.group(0))[-1] for a in ADDRESS_OF.finditer(body.group(1))]
    return names


def unnamed_locks(root):
    """Each prim_lock_t of lib/ that no record names (see the docstring)."""
    lib = os.path.join(root, 'lib')
    bad = []
    for d, _, fs in sorted(os.walk(lib)):
        if os.path.relpath(d, lib) == 'prim':
            continue	# prim_lock_t itself
        code = {f: COMMENT_OR_STRING.sub('', open(os.path.join(d, f), encoding='utf-8').read())
                for f in sorted(fs) if f.endswith(('.c', '.h'))}
        in_dir = [n for f in code if f.endswith('.c') for n in lock_names_recorded(code[f])]
        for f in sorted(code):
            declared = LOCK_DECL.findall(code[f])
            recorded = lock_names_recorded(code[f]) if f.endswith('.c') else list(in_dir)
            for n in declared:
                if n in recorded:
                    recorded.remove(n)
                    continue
                bad.append(f'{os.path.relpath(os.path.join(d, f), root)} declares the lock {n}, which '
                           'no record names: say what a fork child gets of it with PRIM_LOCK_NAMED '
                           'or PRIM_LOCK_KIND (lib/prim/prim.h) and add it to docs/design.md\'s table '
                           '("What the runtime promises at the edges")')
    return bad


LOCK_SAMPLES = [
    ('static prim_lock_t a = PRIM_LOCK_INIT;\nPRIM_LOCK_NAMED(a, x, "a", 0);\n'
     'static struct { prim_lock_t lock; int n; } s;\nstruct q { prim_lock_t lock; };\n'
     'static prim_lock_t *each(size_t i)\n{\n\treturn i == 0 ? &s.lock : NULL;\n}\n'
     'PRIM_LOCK_KIND(k, "s", 0, each);\n', ['lock']),
]


def main(argv):
    listing = '--list' in argv
    args = [a for a in argv if a != '--list']
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    lib = os.path.join(root, 'lib')
    bad = self_test()
    for text, want in LOCK_SAMPLES:
        got = list(LOCK_DECL.findall(text))
        for n in lock_names_recorded(text):
            if n in got:
                got.remove(n)
        if got != want:
            bad.append(f'the lock check itself is wrong: {text!r} leaves {got}, expected {want}')
    bad += unnamed_locks(root)
    files = 0
    for d, _, fs in sorted(os.walk(lib)):
        for f in sorted(fs):
            if not f.endswith(('.c', '.h')):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)
            names = file_state(path)
            files += 1
            if listing:
                print(f'{len(names):3d} {rel}: {", ".join(names)}')
            if f.endswith('.h'):
                if names:
                    bad.append(f'{rel} defines mutable variables at file scope: '
                               f'{", ".join(names)}; a header declares (extern) what one .c '
                               'file defines, or each file including it gets its own copy')
            elif len(names) > LIMIT:
                bad.append(f'{rel} defines {len(names)} mutable variables at file scope (at most '
                           f'{LIMIT}): {", ".join(names)}; gather the ones that belong together '
                           'into a struct whose fields say which lock or atomic guards them')
            for n in undeclared_shared(path):
                bad.append(f'{rel} defines {n} without static, and no header of its directory '
                           'declares it: make it static, or declare it extern in the directory\'s '
                           '(private) header with a note per field on what guards it')
    for b in bad:
        print(b)
    print(f'{files} files, {len(bad)} over {LIMIT} mutable file-scope variables (a .c), defining any '
          '(a header) or shared undeclared')
    return 1 if bad or files == 0 else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
