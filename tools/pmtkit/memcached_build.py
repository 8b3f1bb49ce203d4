# SPDX-License-Identifier: BSD-3-Clause
"""memcached_build.py -- memcached-demo/fetch-and-build.sh's decisions (its
header says what it builds): the command line, how to link libpmthreads,
where to build, the build dependencies and configure options, and the
deb-src entries its private apt state fetches the source with.

  python3 -m pmtkit.memcached_build setup ARG...
      prints shell assignments for the script to eval (PM_BUILD, PM_CFLAGS,
      PM_LIBS, PM_LIBFILE, OUT, FORCE, FETCH_ONLY, STOCK, CONFIGURE_OPTS);
      exit status 1 and a message for a bad command line or no
      libpmthreads, 4 for missing build dependencies
  python3 -m pmtkit.memcached_build deb-src ETC_APT DIR
      writes ETC_APT's deb entries (sources.list, sources.list.d/) as
      deb-src entries into DIR; exit status 1 when there are none
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

PROG = "fetch-and-build.sh"
SRC_DIR = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
USAGE = f"usage: {PROG} [-B PMTHREADS_BUILD_DIR] [-o OUT_DIR] [-f] [-F] [-S]"
TOOLS = ("apt-get", "dpkg-source", "patch", "make", "cc", "pkg-config")
INSTALL = "apt-get install build-essential dpkg-dev pkg-config libevent-dev libsasl2-dev libssl-dev"


class Failed(Exception):
    """A message for the user and the script's exit status."""

    def __init__(self, msg, status=1):
        super().__init__(msg)
        self.status = status


def parse(args):
    """getopts "B:o:fFSh": (options dict, help wanted)."""
    o = dict(B="", o="", f=False, F=False, S=False)
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        a = args[i]
        if a == "--":
            break
        j = 1
        while j < len(a):
            c = a[j]
            if c in "Bo":
                val = a[j + 1:] or (args[i + 1] if i + 1 < len(args) else None)
                if val is None:
                    raise Failed(f"error: {USAGE}")
                if not a[j + 1:]:
                    i += 1
                o[c] = val
                break
            if c == "h":
                return o, True
            if c not in "fFS":
                raise Failed(f"error: {USAGE}")
            o[c] = True
            j += 1
        i += 1
    return o, False


def pkg_config(*args):
    try:
        p = subprocess.run(["pkg-config", *args], capture_output=True, text=True)
    except OSError:
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def link(build, fetch_only_with_out, pkg=pkg_config):
    """(PM_BUILD, PM_CFLAGS, PM_LIBS, PM_LIBFILE): the build directory given,
    else an installed pmthreads (pkg-config), else <src>/build."""
    if fetch_only_with_out:
        return "", "", "", ""  # not needed to fetch

    def in_tree(d):
        lib = os.path.join(d, "preload")
        return (d, f"-I{SRC_DIR}/lib/include", f"-L{lib} -Wl,-rpath,{lib} -lpmthreads",
                os.path.join(lib, "libpmthreads.so"))
    if build:
        if not os.path.isdir(build):
            raise Failed(f"error: no such directory: {build}")
        d = os.path.realpath(build)
        if not os.path.isfile(os.path.join(d, "preload/libpmthreads.so")):
            raise Failed(f"error: {d}/preload/libpmthreads.so not found: build pmthreads first "
                         f"(meson compile -C {d})")
        return in_tree(d)
    if pkg("--exists", "pmthreads") is not None:
        libdir = pkg("--variable=libdir", "pmthreads")
        return (os.path.join(SRC_DIR, "build"), pkg("--cflags", "pmthreads"),
                f"{pkg('--libs', 'pmthreads')} -Wl,-rpath,{libdir}",
                os.path.join(libdir, "libpmthreads.so"))
    if os.path.isfile(os.path.join(SRC_DIR, "build/preload/libpmthreads.so")):
        return in_tree(os.path.join(SRC_DIR, "build"))
    raise Failed("error: libpmthreads not found: pass -B <pmthreads build dir>, or install "
                 "pmthreads (pkg-config pmthreads)")


def out_dir(out, pm_build, src_dir=SRC_DIR):
    """The absolute output directory: never inside the source checkout but
    under one of its build* directories."""
    out = os.path.realpath(out or os.path.join(pm_build, "memcached-demo"))
    rest = (out + "/")[len(src_dir) + 1:] if (out + "/").startswith(src_dir + "/") else None
    if rest is not None and not rest.startswith("build"):
        raise Failed(f"error: refusing to build inside the source checkout ({out}); "
                     "use a build directory")
    return out


def configure_options(which=shutil.which, pkg=pkg_config, note=None):
    """memcached's configure options (Debian's: SASL, TLS when libssl-dev is
    there; --disable-coverage: the debug build would write gcov files into
    the tree at every exit); Failed(status 4) naming what is missing."""
    missing = [t for t in TOOLS if not which(t)]
    missing += [f"{p}(-dev)" for p in ("libevent", "libsasl2") if pkg("--exists", p) is None]
    if missing:
        raise Failed(f"error: missing: {' '.join(missing)}\n  install: {INSTALL}", 4)
    opts = ["--enable-sasl", "--disable-coverage"]
    if pkg("--exists", "openssl") is not None:
        opts.append("--enable-tls")
    elif note:
        note("libssl-dev not installed: building without TLS")
    return opts


def deb_src(etc_apt, dest):
    """Writes etc_apt's deb entries as deb-src ones into dest (one file per
    source file, the same name); the number of files written."""
    n = 0
    for f in sorted(glob.glob(os.path.join(etc_apt, "sources.list.d/*.sources"))):
        text = _read(f)
        if re.search(r"^Types:.*\bdeb\b", text, re.M):
            _write(dest, f, re.sub(r"^Types:.*$", "Types: deb-src", text, flags=re.M))
            n += 1
    for f in [os.path.join(etc_apt, "sources.list")] + sorted(
            glob.glob(os.path.join(etc_apt, "sources.list.d/*.list"))):
        if not os.path.isfile(f):
            continue
        lines = [re.sub(r"^\s*deb\s", "deb-src ", ln) for ln in _read(f).splitlines()
                 if re.match(r"\s*deb\s", ln)]
        if lines:
            _write(dest, f, "".join(ln + "\n" for ln in lines))
            n += 1
    return n


def _read(path):
    with open(path, errors="replace") as f:
        return f.read()


def _write(dest, src, text):
    with open(os.path.join(dest, os.path.basename(src)), "w") as f:
        f.write(text)


def note(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)


def setup(args):
    o, help_wanted = parse(args)
    if help_wanted:
        return 'sed -n "3,33p" "$0"; exit 0'
    pm_build, cflags, libs, libfile = link(o["B"], o["F"] and bool(o["o"]))
    out = out_dir(o["o"], pm_build)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError:
        raise Failed(f"error: cannot create {out}")
    opts = configure_options(note=note)
    v = dict(PM_BUILD=pm_build, PM_CFLAGS=cflags, PM_LIBS=libs, PM_LIBFILE=libfile, OUT=out,
             FORCE=str(int(o["f"])), FETCH_ONLY=str(int(o["F"])), STOCK=str(int(o["S"])))
    return "\n".join([f"{k}={shlex.quote(x)}" for k, x in v.items()] +
                     ["CONFIGURE_OPTS=(" + " ".join(opts) + ")"])


def main(argv):
    try:
        if argv[:1] == ["setup"]:
            print(setup(argv[1:]))
        elif len(argv) == 3 and argv[0] == "deb-src":
            if not deb_src(argv[1], argv[2]):
                raise Failed(f"error: no deb entries in {argv[1]}/sources.list or "
                             f"{argv[1]}/sources.list.d/")
        else:
            sys.exit(__doc__.split("\n\n")[1])
    except Failed as e:
        note(str(e))
        sys.exit(e.status)


if __name__ == "__main__":
    main(sys.argv[1:])
