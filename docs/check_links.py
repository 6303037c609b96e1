#!/usr/bin/env python3
"""Relative links of the user docs: every [text](target) and ![alt](target) in README.md,
docs/*.md and bench/results/*.md must name a file or folder of the repository, and a #anchor
must name a heading of the target page (GitHub's anchors: lower case, punctuation dropped,
spaces to hyphens, -1, -2 ... for repeats). Links inside code are not links. Web links are not
fetched.

  docs/check_links.py [ROOT]        exit 1 naming each broken link (file:line: target: why)

Python standard library only."""
import glob
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def strip_code(line, in_fence):
    """The line without inline code; fenced blocks toggle in_fence."""
    if line.lstrip().startswith("```"):
        return "", not in_fence
    if in_fence:
        return "", in_fence
    return re.sub(r"`[^`]*`", "", line), in_fence


def slug(text):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


ANCHORS = {}


def anchors(path):
    if path not in ANCHORS:
        seen = {}
        out = set()
        in_fence = False
        for line in open(path, encoding="utf-8"):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            m = None if in_fence else HEADING.match(line)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else f"{s}-{n}")
        ANCHORS[path] = out
    return ANCHORS[path]


def check(path, root):
    bad = []
    in_fence = False
    for no, raw in enumerate(open(path, encoding="utf-8"), 1):
        line, in_fence = strip_code(raw, in_fence)
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = f"{os.path.relpath(path, root)}:{no}: {target}"
            if not os.path.exists(dest):
                bad.append(f"{where}: no such file")
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                bad.append(f"{where}: no heading with anchor #{frag} in {os.path.relpath(dest, root)}")
    return bad


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))) \
        + sorted(glob.glob(os.path.join(root, "bench", "results", "*.md")))
    bad = []
    links = 0
    for p in pages:
        bad += check(p, root)
        links += sum(len(LINK.findall(strip_code(l, False)[0])) for l in open(p, encoding="utf-8"))
    for b in bad:
        print(b, file=sys.stderr)
    print(f"check_links: {len(pages)} pages, {len(bad)} broken link(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
