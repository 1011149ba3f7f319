#!/usr/bin/env python3
"""man/check_options.py: a man page's OPTIONS against the program's --help.

    check_options.py [--exact] PROGRAM PAGE

Runs `PROGRAM --help` and renders PAGE with groff (one long line per
paragraph, so nothing is hyphenated or wrapped).  The options of --help
are the option words (-x, --name) on its lines that begin with a dash;
the page's are the words of the tags of its OPTIONS section.  Every
option of --help must be in the page; with --exact the page must list
no other, and where --help gives "(default X" for an option the page's
paragraph for it must say "default X" too.  Exit 0 when they agree, 1
with each difference named.
"""
import re
import subprocess
import sys

OPT = re.compile(r"(?<![A-Za-z0-9_.<-])(--?[A-Za-z][A-Za-z0-9_-]*)")
DEFAULT = re.compile(r"\(default:?\s+([^\s,)]+)")


def help_options(program):
    out = subprocess.run([program, "--help"], capture_output=True,
                         text=True, timeout=30)
    text = out.stdout + out.stderr
    opts, defaults, last = [], {}, None
    for line in text.splitlines():
        if re.match(r"\s+-", line):
            # the tag: the option words before the first run of spaces
            tag = re.match(r"\s+(\S.*?)(\s{2,}|$)", line).group(1)
            words = OPT.findall(tag)
            opts += words
            last = words[-1] if words else None
        m = DEFAULT.search(line)
        if m and last:
            defaults.setdefault(last, m.group(1))
        if re.match(r"\s*usage:\s*\S", line, re.I):
            opts += OPT.findall(line)  # "usage: prog [--json] [-w|--watch N]"
    return opts, defaults


def page_options(page):
    out = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", "-rLL=400n",
                          page], capture_output=True, text=True,
                         timeout=30, check=True)
    lines = out.stdout.splitlines()
    try:
        start = lines.index("OPTIONS")
    except ValueError:
        return [], {}
    opts, paras, cur = [], {}, None
    for line in lines[start + 1:]:
        if line and not line[0].isspace():
            break  # the next section
        m = re.match(r" {7}(-\S.*)$", line)
        if m:
            words = OPT.findall(m.group(1))
            opts += words
            cur = words
            for w in words:
                paras[w] = ""
        elif cur and line.strip():
            for w in cur:
                paras[w] += " " + line.strip()
    return opts, paras


def main(argv):
    exact = "--exact" in argv
    args = [a for a in argv[1:] if a != "--exact"]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    program, page = args
    hopts, hdefaults = help_options(program)
    popts, paras = page_options(page)
    bad = []
    for o in sorted(set(hopts) - set(popts)):
        bad.append(f"{o}: in `{program} --help`, not in {page}'s OPTIONS")
    if exact:
        for o in sorted(set(popts) - set(hopts)):
            bad.append(f"{o}: in {page}'s OPTIONS, not in --help")
        for o, d in sorted(hdefaults.items()):
            if o in paras and not re.search(r"default:?\s+" + re.escape(d),
                                            paras[o]):
                bad.append(f"{o}: --help says default {d}; {page} says "
                           f"'{paras[o].strip()}'")
    for b in bad:
        print(f"FAIL {b}")
    print(f"{page}: {len(set(popts))} options in the page, "
          f"{len(set(hopts))} in --help, {len(hdefaults)} defaults "
          f"compared: {'differ' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
