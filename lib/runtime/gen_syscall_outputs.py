#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""gen_syscall_outputs -- C from lib/runtime/syscall_outputs.tab.

Run by meson at build time:
  gen_syscall_outputs.py TABLE UNISTD_H KIND OUTPUT [OUTPUT2]
KIND is one of
  lib      syscall_outputs.c: syscall_outputs() and syscall_outputs_ioctl()
  preload  syscall_wrappers.c and syscall_wrappers_real.h: a wrapper for
           each `fn ... | gen` line and for syscall(2), and their lines of
           preload/real_list.h
  test     syscall_outputs_test.c: one call per `test:` of the table, into a
           clean heap page (tests/progs/syscall_outputs_fixtures.h)
Every KIND first checks the table against the kernel's numbers in UNISTD_H
(asm/unistd_64.h): a system call there without a line here, a number that
differs, or a name twice fails the build, naming it.
"""
import re
import sys


def die(msg):
    sys.stderr.write('gen_syscall_outputs: %s\n' % msg)
    sys.exit(1)


def split_top(s, sep):
    """s split at sep outside parentheses and brackets."""
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([':
            depth += 1
        elif ch in ')]':
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ''
        else:
            cur += ch
    out.append(cur)
    return [x.strip() for x in out]


class Sys:
    def __init__(self, nr, name, outputs, note, tests, line):
        self.nr, self.name, self.outputs, self.note = nr, name, outputs, note
        self.tests, self.line = tests, line


class Fn:
    def __init__(self, proto, call, how, tests, line):
        self.proto, self.call, self.how = proto, call, how
        self.tests, self.line = tests, line
        m = re.match(r'^(.*?)\b(\w+)\((.*)\)$', proto)
        if not m:
            die('line %d: cannot read the prototype %r' % (line, proto))
        self.ret, self.name, params = m.group(1).strip(), m.group(2), m.group(3)
        fixed, _, var = params.partition('...')
        self.fixed = [p for p in split_top(fixed, ',') if p]
        self.var = [p for p in split_top(var, ',') if p]
        self.variadic = '...' in params
        cm = re.match(r'^(\w+)\((.*)\)$', call)
        self.sys = cm.group(1) if cm else None
        self.args = split_top(cm.group(2), ',') if cm and cm.group(2).strip() else []


def param_name(p):
    m = re.search(r'(\w+)\s*(\[\s*\d*\s*\])?$', p)
    return m.group(1)


def param_type(p):
    return p[:p.rfind(param_name(p))].strip()


def read_table(path):
    syscalls, fns, ioctls = [], [], []
    with open(path) as f:
        for ln, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith('#'):
                continue
            fields = [x.strip() for x in re.split(r'\s+\|(?=\s|$)', line)]
            kind = fields[0]
            tests = []	# (call, after) of each `test:`, its `after:` following it
            rest = []
            for x in fields[1:]:
                if x.startswith('test:'):
                    tests.append([x[5:].strip(), None])
                elif x.startswith('after:'):
                    if not tests:
                        die('line %d: after: without a test: before it' % ln)
                    tests[-1][1] = x[6:].strip()
                else:
                    rest.append(x)
            if kind == 'sys':
                if len(rest) < 3:
                    die('line %d: a system call line has NR | name | outputs | note' % ln)
                nr, name, outputs = int(rest[0]), rest[1], rest[2]
                note = rest[3] if len(rest) > 3 else ''
                if outputs == '-' and not note:
                    die('line %d: %s has no output and no reason' % (ln, name))
                syscalls.append(Sys(nr, name, outputs, note, tests, ln))
            elif kind == 'fn':
                if len(rest) < 3:
                    die('line %d: an entry point line has prototype | call | how' % ln)
                fns.append(Fn(rest[0], rest[1], rest[2], tests, ln))
            elif kind == 'ioctl':
                ioctls.append((rest[0], rest[1]))
            else:
                die('line %d: unknown kind %r' % (ln, kind))
    return syscalls, fns, ioctls


def check_against_kernel(syscalls, unistd):
    by_name = {}
    for s in syscalls:
        if s.name in by_name:
            die('line %d: %s twice' % (s.line, s.name))
        by_name[s.name] = s
    nrs = {}
    for s in syscalls:
        if s.nr in nrs:
            die('line %d: number %d twice' % (s.line, s.nr))
        nrs[s.nr] = s
    kernel = {}
    with open(unistd) as f:
        for line in f:
            m = re.match(r'#define __NR_(\w+)\s+(\d+)', line)
            if m:
                kernel[m.group(1)] = int(m.group(2))
    if not kernel:
        die('%s lists no system call' % unistd)
    for name, nr in sorted(kernel.items(), key=lambda x: x[1]):
        if name not in by_name:
            die('%s (number %d, %s) has no line in the table: add it with its outputs or '
                'the reason it has none' % (name, nr, unistd))
        if by_name[name].nr != nr:
            die('line %d: %s is number %d in %s, not %d' % (by_name[name].line, name, nr, unistd,
                                                            by_name[name].nr))


def rule_c(rule, line):
    """C statements calling fn for one output rule."""
    m = re.match(r'^(iov|msg|mmsg|ioctl)\((.*)\)$', rule)
    if m:
        args = split_top(m.group(2), ',')
        return 'out_%s(fn, ctx, %s);' % (m.group(1), ', '.join('(%s)' % a for a in args))
    if not rule.endswith(']'):
        die('line %d: cannot read the rule %r' % (line, rule))
    depth = 0
    for i in range(len(rule) - 1, -1, -1):
        if rule[i] == ']':
            depth += 1
        elif rule[i] == '[':
            depth -= 1
            if depth == 0:
                ptr, size = rule[:i], rule[i + 1:-1]
                return 'fn(ctx, (void *)(uintptr_t)(%s), (size_t)(%s));' % (ptr, size)
    die('line %d: unbalanced brackets in %r' % (line, rule))


LIB_HEAD = r'''/* Generated by lib/runtime/gen_syscall_outputs.py from
 * lib/runtime/syscall_outputs.tab: edit the table, not this file. */
#include "runtime/syscall_outputs.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <linux/keyctl.h>
#include <mqueue.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <linux/serial.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/utsname.h>
#include <linux/fs.h>
#include <termio.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* The table's helpers: the unsigned at p (0 for NULL), the bytes of a
 * descriptor set of n descriptors, the pages of n bytes (x86-64's 4 KiB). */
#define LEN32(p) ((p) != 0 ? (unsigned long)*(const unsigned *)(uintptr_t)(p) : 0UL)
#define FDSET(n) (((unsigned long)(n) + 63) / 64 * 8)
#define PAGES(n) (((unsigned long)(n) + 4095) / 4096)
/* The first iovec's buffer and length at p (ptrace's GETREGSET). */
#define iov_base0(p) ((p) != 0 ? (uintptr_t)((const struct iovec *)(uintptr_t)(p))->iov_base : 0)
#define iov_len0(p) ((p) != 0 ? ((const struct iovec *)(uintptr_t)(p))->iov_len : 0)

/* The kernel takes at most this many iovecs (UIO_MAXIOV) and messages; a
 * call asking more fails with EINVAL before writing anything. */
enum { OUT_MAXIOV = 1024 };

static void out_iov(syscall_outputs_fn fn, void *ctx, unsigned long p, unsigned long n)
{
	const struct iovec *iov = (const struct iovec *)(uintptr_t)p;
	if (iov == NULL || n > OUT_MAXIOV)
		return;
	for (unsigned long i = 0; i < n; i++)
		fn(ctx, iov[i].iov_base, iov[i].iov_len);
}

/* The header (msg_namelen, msg_controllen and msg_flags are written back),
 * its data, name and ancillary data. */
static void out_msg(syscall_outputs_fn fn, void *ctx, unsigned long p)
{
	struct msghdr *m = (struct msghdr *)(uintptr_t)p;
	if (m == NULL)
		return;
	fn(ctx, m, sizeof(*m));
	out_iov(fn, ctx, (uintptr_t)m->msg_iov, m->msg_iovlen);
	fn(ctx, m->msg_name, m->msg_namelen);
	fn(ctx, m->msg_control, m->msg_controllen);
}

static void out_mmsg(syscall_outputs_fn fn, void *ctx, unsigned long p, unsigned long n)
{
	struct mmsghdr *v = (struct mmsghdr *)(uintptr_t)p;
	if (v == NULL)
		return;
	if (n > OUT_MAXIOV)
		n = OUT_MAXIOV;	/* the kernel clamps vlen so */
	for (unsigned long i = 0; i < n; i++) {
		fn(ctx, &v[i].msg_len, sizeof(v[i].msg_len));
		out_msg(fn, ctx, (uintptr_t)&v[i].msg_hdr);
	}
}

static void out_ioctl(syscall_outputs_fn fn, void *ctx, unsigned long req, unsigned long p)
{
	fn(ctx, (void *)(uintptr_t)p, syscall_outputs_ioctl(req));
}
'''


def gen_lib(syscalls, ioctls, out):
    o = [LIB_HEAD]
    o.append('size_t syscall_outputs_ioctl(unsigned long req)\n{')
    o.append('\tif ((_IOC_DIR(req) & _IOC_READ) != 0 && _IOC_TYPE(req) != 0)')
    o.append('\t\treturn _IOC_SIZE(req);')
    o.append('\tswitch (req) {')
    for req, size in ioctls:
        o.append('#ifdef %s' % req)
        o.append('\tcase %s:\n\t\treturn %s;' % (req, size))
        o.append('#endif')
    o.append('\tdefault:\n\t\treturn 0;\n\t}\n}\n')
    o.append('bool syscall_outputs(long nr, const unsigned long a[6], syscall_outputs_fn fn, '
             'void *ctx)\n{')
    o.append('\tconst unsigned long a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], '
             'a5 = a[5];')
    o.append('\t(void)a0, (void)a1, (void)a2, (void)a3, (void)a4, (void)a5;')
    o.append('\tswitch (nr) {')
    for s in syscalls:
        if s.outputs == '-':
            continue
        # By name: on another architecture the numbers differ, and some
        # calls (open, pipe, ...) do not exist.
        o.append('#ifdef SYS_%s' % s.name)
        o.append('\tcase SYS_%s:' % s.name)
        for rule in split_top(s.outputs, ';'):
            o.append('\t\t' + rule_c(rule, s.line))
        o.append('\t\treturn true;')
        o.append('#endif')
    o.append('\tdefault:\n\t\treturn false;\n\t}\n}')
    with open(out, 'w') as f:
        f.write('\n'.join(o) + '\n')


PRELOAD_HEAD = r'''/* Generated by lib/runtime/gen_syscall_outputs.py from
 * lib/runtime/syscall_outputs.tab: edit the table, not this file.
 * Each wrapper forwards to the real function with the outputs of the system
 * call it makes pinned for the call (lib/runtime/prefault.h). */
#undef _FILE_OFFSET_BITS

#include "base/export.h"
#include "real.h"
#include "runtime/interpose.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <mqueue.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/ipc.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/quota.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/times.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
'''


def gen_preload(syscalls, fns, out_c, out_h):
    nr_of = {s.name: s.nr for s in syscalls}
    o = [PRELOAD_HEAD]
    real = ['/* Generated by lib/runtime/gen_syscall_outputs.py: the real functions of the '
            'generated wrappers (included by real_list.h). */']
    for f in fns:
        if f.how != 'gen':
            continue
        if f.name == 'syscall':
            continue
        if f.sys not in nr_of:
            die('line %d: %s is described as %s, which is not a system call of the table' %
                (f.line, f.name, f.sys))
        types = [param_type(p) for p in f.fixed]
        if f.variadic:
            types.append('...')
        real.append('REAL_FN(%s, %s, "%s", (%s))' % (f.ret, f.name, f.name,
                                                     ', '.join(types) or 'void'))
        params = ', '.join(f.fixed + (['...'] if f.variadic else []))
        # An entry point described as a system call this architecture
        # lacks (x86-64's stat, lstat, readlink... on aarch64, whose libc
        # calls the *at forms) has no rule there: it is not wrapped.
        o.append('#ifdef SYS_%s' % f.sys)
        o.append('PMT_EXPORT %s %s(%s)\n{' % (f.ret, f.name, params))
        names = [param_name(p) for p in f.fixed]
        if f.variadic:
            o.append('\tva_list ap;\n\tva_start(ap, %s);' % names[-1])
            for p in f.var:
                o.append('\t%s %s = va_arg(ap, %s);' % (param_type(p), param_name(p),
                                                      param_type(p)))
            o.append('\tva_end(ap);')
            names += [param_name(p) for p in f.var]
        o.append('\t%s ret_;' % f.ret)
        args = ', '.join('(unsigned long)(%s)' % a for a in f.args)
        o.append('\tPREFAULT_SYSCALL(ret_, SYS_%s, REAL(%s)(%s), %s);' % (f.sys, f.name,
                                                                ', '.join(names), args or '0'))
        o.append('\treturn ret_;\n}')
        o.append('#endif\n')
    # syscall(2): the rule by number; the call itself by prim_syscall6,
    # which no wrapper sees.
    o.append('''#ifdef PMT_WRAP_SYSCALL
/* syscall(2) reads six arguments whatever the number, as glibc's does. */
PMT_EXPORT long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	long r;
	PREFAULT_SYSCALL(r, nr, runtime_syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]),
			 (unsigned long)a[0], (unsigned long)a[1], (unsigned long)a[2],
			 (unsigned long)a[3], (unsigned long)a[4], (unsigned long)a[5]);
	return r;
}
#endif''')
    with open(out_c, 'w') as f:
        f.write('\n'.join(o) + '\n')
    with open(out_h, 'w') as f:
        f.write('\n'.join(real) + '\n')


TEST_HEAD = r'''/* Generated by lib/runtime/gen_syscall_outputs.py from
 * lib/runtime/syscall_outputs.tab: every `test:` of the table, its output
 * in a heap page written once and then left clean for a few epochs (so the
 * mprotect tracker has write-protected it again).  Prints one line a call,
 * its result and errno, the same natively and under the preload. */
#include "syscall_outputs_fixtures.h"

'''


def gen_test(syscalls, fns, out):
    o = [TEST_HEAD]
    cases = []
    for s in syscalls:
        for k, (call, after) in enumerate(s.tests):
            cases.append(('syscall(%s)%s' % (s.name, ' #%d' % (k + 1) if k else ''),
                          'syscall(SYS_%s, %s)' % (s.name, call), after, s.name))
    for f in fns:
        for k, (call, after) in enumerate(f.tests):
            cases.append(('%s%s' % (f.name, ' #%d' % (k + 1) if k else ''), call, after, None))
    o.append('enum { CASES = %d };\n' % len(cases))
    o.append('static void run_case(int i, char *OUT)\n{\n\tlong r = 0;\n\terrno = 0;'
             '\n\tswitch (i) {')
    for i, (name, call, after, sysname) in enumerate(cases):
        if sysname:
            o.append('#ifdef SYS_%s' % sysname)
        o.append('\tcase %d:\n\t\tr = (long)(%s);\n\t\treport("%s", r);' % (i, call, name))
        if after:
            o.append('\t\t%s;' % after)
        o.append('\t\tbreak;')
        if sysname:
            o.append('#endif')
    o.append('\t}\n\t(void)r;\n}\n')
    o.append('int main(void)\n{\n\treturn run_all(CASES, run_case);\n}')
    with open(out, 'w') as f:
        f.write('\n'.join(o) + '\n')


def main():
    if len(sys.argv) < 5:
        die('usage: gen_syscall_outputs.py TABLE UNISTD_H lib|preload|test OUTPUT [OUTPUT2]')
    table, unistd, kind = sys.argv[1:4]
    syscalls, fns, ioctls = read_table(table)
    if unistd != '-':	# '-': not x86-64, whose table this is
        check_against_kernel(syscalls, unistd)
    if kind == 'lib':
        gen_lib(syscalls, ioctls, sys.argv[4])
    elif kind == 'preload':
        gen_preload(syscalls, fns, sys.argv[4], sys.argv[5])
    elif kind == 'test':
        gen_test(syscalls, fns, sys.argv[4])
    else:
        die('unknown kind %r' % kind)


if __name__ == '__main__':
    main()
