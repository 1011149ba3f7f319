#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The documentation's links resolve, and the README stays short.

Checks README.md, docs/*.md and bench/README.md under ROOT: every relative
Markdown link or image ([text](target), ![alt](target), [ref]: target)
outside code must name a file or directory that exists; a #fragment on a
Markdown target (or on the page itself) must be one of its headings'
anchors, as GitHub makes them.  README.md must not exceed MAX_README lines
(issue 23: about 150; the rest lives in docs/).

usage: links.py ROOT        check the tree
       links.py --selftest  the checker against trees made to fail
"""
import os
import re
import sys
import tempfile

MAX_README = 160

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line


def anchors(text):
    """The anchors GitHub gives the headings of a Markdown text."""
    seen = {}
    out = set()
    for _, line in prose_lines(text):
        m = HEADING.match(line)
        if not m:
            continue
        title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2))
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        k = seen.get(slug, 0)
        seen[slug] = k + 1
        out.add(slug if k == 0 else "%s-%d" % (slug, k))
    return out


def targets(text):
    for n, line in prose_lines(text):
        line = CODE_SPAN.sub("", line)
        for m in LINK.finditer(line):
            yield n, m.group(1)
        m = REF.match(line)
        if m:
            yield n, m.group(1)


def check_file(path, root):
    errors = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    rel = os.path.relpath(path, root)
    for n, t in targets(text):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t):  # http:, mailto:
            continue
        file_part, _, frag = t.partition("#")
        dest = (os.path.normpath(os.path.join(os.path.dirname(path),
                                              file_part))
                if file_part else path)
        if not os.path.exists(dest):
            errors.append("%s:%d: link to %s: no such file" % (rel, n, t))
            continue
        if frag and dest.endswith(".md") and os.path.isfile(dest):
            with open(dest, encoding="utf-8") as f:
                if frag not in anchors(f.read()):
                    errors.append("%s:%d: link to %s: no heading with "
                                  "anchor #%s in %s" %
                                  (rel, n, t, frag,
                                   os.path.relpath(dest, root)))
    return errors


def check_tree(root):
    files = [os.path.join(root, "README.md"),
             os.path.join(root, "bench", "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, f) for f in os.listdir(docs)
                        if f.endswith(".md"))
    errors = []
    for path in files:
        if os.path.exists(path):
            errors += check_file(path, root)
    readme = os.path.join(root, "README.md")
    if os.path.exists(readme):
        with open(readme, encoding="utf-8") as f:
            lines = len(f.read().splitlines())
        if lines > MAX_README:
            errors.append("README.md: %d lines, more than %d: move the "
                          "details into docs/" % (lines, MAX_README))
    return errors, len(files)


def selftest():
    """Each broken tree must fail and the good one pass."""
    good = {
        "README.md": "# T\n[a](docs/a.md#two-words) [b](bench/README.md)\n"
                     "![p](docs/a.md) [self](#t) [w](https://x.y/z)\n"
                     "`[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n"
                     "[ref]: docs/a.md\n",
        "docs/a.md": "# A\n## Two `words`\n[up](../README.md#t)\n",
        "bench/README.md": "# B\n",
    }
    cases = {
        "good": ({}, 0),
        "missing file": ({"docs/a.md": "# A\n## Two words\n[x](b.md)\n"}, 1),
        "missing image": ({"bench/README.md": "![p](results/x.png)\n"}, 1),
        "missing anchor": ({"docs/a.md":
                            "# A\n## Two words\n[up](../README.md#nope)\n"},
                           1),
        "missing ref": ({"bench/README.md": "[r]: ../nowhere.md\n"}, 1),
        "long README": ({"README.md": "# T\n" + "x\n" * MAX_README}, 1),
    }
    bad = 0
    for name, (change, want) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            for rel, text in dict(good, **change).items():
                os.makedirs(os.path.dirname(os.path.join(d, rel)),
                            exist_ok=True)
                with open(os.path.join(d, rel), "w") as f:
                    f.write(text)
            errors, _ = check_tree(d)
        ok = len(errors) == want
        print("%s: %s: %d error(s), want %d%s" %
              ("ok" if ok else "FAIL", name, len(errors), want,
               "".join("\n    " + e for e in errors)))
        bad += not ok
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    errors, n = check_tree(sys.argv[1])
    for e in errors:
        print(e)
    print("links: %d file(s), %d error(s)" % (n, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
