#!/usr/bin/env python3
"""Does scripts/install-deps name every Debian package this tree uses?

A machine that already has a package hides its absence from install-deps;
a fresh machine then fails at `make demo` (issue 23: librdmacm-dev).  This
check fails when a package that

  1. owns a header listed in the compiler's dependency files (*.o.d) of
     the build tree it runs from, or
  2. owns a program that the build, the demo or the tests run
     (tests/deps/programs.txt; each must also be found on PATH),

is neither named by install-deps (`install-deps --list`) nor pulled in by
one that is, nor part of every Debian system (the Essential packages and
apt, with what they depend on).  "Pulled in" follows Depends and
Pre-Depends through dpkg's own database of installed packages (never the
apt lists, which a fresh machine may not have): alternatives take the first
one present here, version constraints and :any qualifiers are dropped,
a virtual package is any installed package that Provides it.  It also
checks that every program the sources look up (rows.c's server/client,
`command -v X`, which("X"), need("X")) is in programs.txt, and that every
package tests/matrix/rows.c names (.pkg) is named or pulled in.

  check_deps.py --source DIR --build DIR [--install-deps FILE] [--with=OPT]
  check_deps.py --selftest --source DIR --build DIR [--with=OPT]

--selftest runs the check against copies of install-deps with
librdmacm-dev (a header's package) and then qperf (a program's) removed,
and fails unless each run fails naming the removed package.
Exit: 0 all named, 1 something missing, 2 cannot check, 77 not a Debian
system (no dpkg-query: ctest reports a skip).
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

INSTALLED = "iWt"  # dpkg status letters of a configured package


SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


class CannotCheck(Exception):
    pass


def sh(argv):
    return subprocess.run(argv, capture_output=True, text=True)


def named_packages(install_deps, options):
    """The packages `install-deps --list [options]` names."""
    r = sh(["bash", install_deps, "--list"] + options)
    if r.returncode != 0:
        raise CannotCheck(f"{install_deps} --list failed: {r.stderr.strip()}")
    if not r.stdout.split():
        raise CannotCheck(f"{install_deps} --list printed no packages")
    return set(r.stdout.split())


def dep_names(field):
    """The package names of a Depends field, one list per clause:
    "a (>= 1) | b:any, c" -> [["a", "b"], ["c"]]."""
    out = []
    for clause in field.split(","):
        alts = []
        for alt in clause.split("|"):
            name = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alt).strip()
            name = name.split(":")[0]
            if name:
                alts.append(name)
        if alts:
            out.append(alts)
    return out


class Dpkg:
    """The installed packages, what they depend on and what they provide,
    read once from dpkg's database."""

    def __init__(self):
        fmt = ("${db:Status-Abbrev}\t${Package}\t${Essential}\t${Provides}"
               "\t${Depends}, ${Pre-Depends}\n")
        r = sh(["dpkg-query", "-W", "-f=" + fmt])
        if r.returncode != 0 or not r.stdout:
            raise CannotCheck("dpkg-query -W failed: " + r.stderr.strip())
        self.deps = {}  # package -> [[alternatives], ...]
        self.providers = {}  # virtual name -> {installed packages}
        self.essential = set()
        for line in r.stdout.splitlines():
            f = line.split("\t")
            if len(f) < 5 or len(f[0]) < 2 or f[0][1] not in INSTALLED:
                continue
            pkg = f[1]
            self.deps.setdefault(pkg, []).extend(dep_names(f[4]))
            if f[2] == "yes":
                self.essential.add(pkg)
            for alts in dep_names(f[3]):
                for v in alts:
                    self.providers.setdefault(v, set()).add(pkg)

    def resolve(self, name):
        """The installed packages a dependency on NAME is satisfied by."""
        if name in self.deps:
            return {name}
        return self.providers.get(name, set())

    def closure(self, roots):
        """ROOTS and everything they pull in, transitively."""
        seen = set()
        todo = [p for r in roots for p in self.resolve(r)]
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            for alts in self.deps.get(p, []):
                for a in alts:  # the first alternative present here
                    got = self.resolve(a)
                    if got:
                        todo.extend(got)
                        break
        return seen

    def owners(self, paths):
        """{path: {packages}} for the paths dpkg knows; under merged /usr
        a file may be registered under /bin or /lib, so aliases are tried."""
        def query(ps):
            found = {}
            if not ps:
                return found
            r = sh(["dpkg-query", "-S"] + sorted(ps))
            for line in r.stdout.splitlines():
                m = re.match(r"^([^/]+): (/.*)$", line)
                if not m or line.startswith("diversion "):
                    continue
                pkgs = {p.strip().split(":")[0] for p in m.group(1).split(",")}
                found.setdefault(m.group(2), set()).update(pkgs)
            return found

        found = query(set(paths))
        out = {p: found[p] for p in paths if p in found}
        alias = {}
        for p in paths:
            if p in out:
                continue
            for a in aliases(p):
                alias.setdefault(a, set()).add(p)
        for a, pkgs in query(set(alias)).items():
            for p in alias.get(a, ()):
                out.setdefault(p, set()).update(pkgs)
        return out


def aliases(path):
    """Other names of PATH: its real path and its merged-/usr twins."""
    out = set()
    for p in {path, os.path.realpath(path)}:
        out.add(p)
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            if p.startswith(f"/usr/{top}/"):
                out.add(p[4:])
            elif p.startswith(f"/{top}/"):
                out.add("/usr" + p)
    out.discard(path)
    return out


def headers(build, skip):
    """The absolute paths outside SKIP in BUILD's *.o.d files."""
    files = glob.glob(os.path.join(build, "**", "*.o.d"), recursive=True)
    if not files:
        raise CannotCheck(f"no *.o.d files under {build}: build first")
    out = set()
    for f in files:
        with open(f, errors="replace") as fh:
            text = fh.read().replace("\\\n", " ")
        for tok in text.split():
            if tok.endswith(":") or not tok.startswith("/"):
                continue
            p = os.path.normpath(tok)
            if not any(p == s or p.startswith(s + "/") for s in skip):
                out.add(p)
    return out, len(files)


def read_programs(path):
    """[(name, when, comment)] of programs.txt."""
    out = []
    with open(path) as fh:
        for line in fh:
            body, _, comment = line.partition("#")
            words = body.split()
            if not words:
                continue
            when = words[1] if len(words) > 1 else ""
            if when not in ("", "--bench", "--fuzz", "optional"):
                raise CannotCheck(f"{path}: {line.strip()}: bad WHEN")
            out.append((words[0], when, comment.strip()))
    return out


def looked_up(source):
    """{program: where} the sources look up by name."""
    pats = [
        ("tests/matrix/rows.c", r'\.(?:server|client)\s*=\s*\{\s*"([^"@/]+)"'),
        ("tests/matrix/rows.c", r'"stdbuf",\s*"-oL",\s*"([^"]+)"'),
    ]
    for g in ("tests/netns/*.sh", "tests/abi/*.sh", "scripts/*",
              "tests/wire/*.py", "bench/run"):
        pats.append((g, r'command -v ([A-Za-z0-9_.+-]+)'))
        pats.append((g, r'(?:which|need)\("([^"/]+)"\)'))
    found = {}
    for g, pat in pats:
        for f in sorted(glob.glob(os.path.join(source, g))):
            if not os.path.isfile(f):
                continue
            with open(f, errors="replace") as fh:
                for m in re.finditer(pat, fh.read()):
                    found.setdefault(m.group(1), os.path.relpath(f, source))
    return found


def matrix_packages(source):
    f = os.path.join(source, "tests/matrix/rows.c")
    if not os.path.exists(f):
        return set()
    with open(f) as fh:
        # "softverbs": a row of our own programs (built, not installed)
        return set(re.findall(r'\.pkg\s*=\s*"([^"]+)"', fh.read())) - \
            {"softverbs"}


def check(source, build, install_deps, with_opts=(), out=print):
    """Prints what is missing; returns the number of problems."""
    db = Dpkg()
    base = db.closure(db.essential | {"apt"})
    named = named_packages(install_deps, list(with_opts))
    not_installed = sorted(p for p in named if p not in db.deps)
    if not_installed:
        raise CannotCheck("install-deps names packages that are not "
                          f"installed: {' '.join(not_installed)} "
                          "(run make deps, then this check)")
    pulled = db.closure(named) | base
    extra = {o: db.closure(named_packages(install_deps, [o])) | base
             for o in ("--bench", "--fuzz")}
    bad = 0

    def missing(pkg, why, have=pulled, opt=""):
        nonlocal bad
        if pkg in have:
            return
        out(f"install-deps{' ' + opt if opt else ''} does not name {pkg} "
            f"(nor a package that pulls it in): {why}")
        bad += 1

    # 1. the headers the build included
    skip = {os.path.realpath(source), os.path.realpath(build),
            os.path.abspath(source), os.path.abspath(build)}
    hdrs, nfiles = headers(build, skip)
    own = db.owners(hdrs)
    by_pkg = {}  # package -> its headers, when no owner is pulled in
    pkgs = set()
    for h in sorted(hdrs):
        if h not in own:
            out(f"{h}: the build included it, but no Debian package owns it")
            bad += 1
            continue
        pkgs |= own[h]
        if not own[h] & pulled:  # one of several owners is enough
            by_pkg.setdefault(sorted(own[h])[0], []).append(h)
    for p, hs in sorted(by_pkg.items()):
        more = f" and {len(hs) - 1} more" if len(hs) > 1 else ""
        missing(p, f"it owns {hs[0]}{more}, included by the build")

    # 2. the programs
    plist = os.path.join(source, "tests/deps/programs.txt")
    progs = read_programs(plist)
    listed = {n for n, _, _ in progs}
    for name, where in sorted(looked_up(source).items()):
        if name not in listed:
            out(f"{where} runs {name}, which tests/deps/programs.txt "
                "does not list")
            bad += 1
    paths = {}  # name -> [its path on PATH, its path in Debian's dirs]
    for name, when, why in progs:
        ps = [shutil.which(name), shutil.which(name, path=SYSTEM_PATH)]
        ps = [p for i, p in enumerate(ps) if p and p not in ps[:i]]
        if ps:
            paths[name] = ps
        elif when == "":
            out(f"{name} ({why}) is not on PATH: install-deps "
                "should install its package")
            bad += 1
    own = db.owners({p for ps in paths.values() for p in ps})
    # a program on PATH that no package owns (/usr/local, pyenv) is
    # judged by Debian's own copy, which a fresh machine would run
    paths = {n: next((p for p in ps if p in own), ps[0])
             for n, ps in paths.items()}
    by_pkg = {}  # (package, option) -> [programs], when not pulled in
    for name, when, why in progs:
        if when == "optional" or name not in paths:
            continue
        p = paths[name]
        if p not in own:
            out(f"{name} is {p}, which no Debian package owns ({why})")
            bad += 1
            continue
        have = extra[when] if when else pulled
        if not own[p] & have:
            by_pkg.setdefault((sorted(own[p])[0], when), []).append(
                f"{p} ({why})" if why else p)
    for (pkg, when), ps in sorted(by_pkg.items()):
        more = f" and {len(ps) - 1} more" if len(ps) > 1 else ""
        have = extra[when] if when else pulled
        missing(pkg, f"it owns {ps[0]}{more} of tests/deps/programs.txt",
                have, when)

    # 3. the packages the program matrix says its rows need
    for pkg in sorted(matrix_packages(source)):
        if not db.resolve(pkg) & pulled and (pkg, "") not in by_pkg:
            missing(pkg, "tests/matrix/rows.c runs a program from it")

    if bad == 0:
        out(f"check_deps: install-deps names or pulls in the "
            f"{len(pkgs)} packages of the {len(hdrs)} system headers in "
            f"{nfiles} dependency files and the packages of "
            f"{len(paths)} programs")
    return bad


def selftest(source, build, with_opts=()):
    """The check fails, naming the package, when install-deps drops it."""
    orig = os.path.join(source, "scripts/install-deps")
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        for drop in ("librdmacm-dev", "qperf"):
            copy = os.path.join(tmp, "install-deps")
            with open(orig) as fh:
                text = fh.read()
            with open(copy, "w") as fh:
                fh.write(re.sub(r"(?<![\w.+-])" + re.escape(drop) +
                                r"(?![\w.+-])", "", text))
            if drop in named_packages(copy, []):
                print(f"selftest: could not remove {drop} from a copy")
                fails += 1
                continue
            lines = []
            n = check(source, build, copy, with_opts, lines.append)
            named = [l for l in lines if f"does not name {drop} " in l]
            ok = n > 0 and named
            print(f"selftest: install-deps without {drop}: "
                  f"{'fails as it must' if ok else 'PASSES (wrong)'}")
            for l in named or lines:
                print("  " + l)
            fails += not ok
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--install-deps")
    ap.add_argument("--with", action="append", default=[], dest="opts",
                    choices=["--bench", "--fuzz"],
                    help="judge against install-deps OPT's list (a clang "
                    "build's headers are --fuzz's)")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if not shutil.which("dpkg-query"):
        print("check_deps: SKIP: no dpkg-query; install-deps is for Debian")
        return 77
    try:
        if a.selftest:
            return 1 if selftest(a.source, a.build, a.opts) else 0
        deps = a.install_deps or os.path.join(a.source, "scripts/install-deps")
        return 1 if check(a.source, a.build, deps, a.opts) else 0
    except CannotCheck as e:
        print(f"check_deps: cannot check: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
