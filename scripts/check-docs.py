#!/usr/bin/python3
"""Checks that the documentation can be navigated: every link resolves and every page is indexed.

Usage: /usr/bin/python3 scripts/check-docs.py [--root DIR]   check the tree at DIR (default: this repository)
       /usr/bin/python3 scripts/check-docs.py --self-test     run the checks on small broken trees

What is checked (Python 3 standard library only, no build needed):
  1. Links. In README.md and docs/**/*.md, every Markdown link or image (`[text](target)`,
     `![alt](target)`, `[id]: target`) outside code whose target is relative must name an existing
     file or folder, relative to the page. `#anchor` parts are checked too, against the headings of
     the target page (GitHub's heading ids) or an explicit `<a name=...>`/`id=...`; anchors into
     anything but a Markdown page are not checked. http(s), mailto and other schemes are skipped.
  2. Mentions. A path of the form `docs/<name>.md` written anywhere in the tree's text files (pages,
     code comments, scripts, tests; fuzz corpora and other files without a known extension are not
     read, nor is this script) must exist, relative to the repository root.
  3. The index. Every docs/**/*.md must be reachable from docs/README.md by following links between
     pages (README.md at the root counts as a page).
  4. Reports. Every page under docs/reports/ states, in its first lines after the title, the date it
     was measured (YYYY-MM-DD) and the commit.
Exit 0 when all hold, 1 otherwise, with one line per problem ("file:line: ..." or "file: ...").
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import unicodedata

INDEX = "docs/README.md"
REPORTS = "docs/reports/"
# Files whose text is read for `docs/....md` mentions.
TEXT_SUFFIXES = (".md", ".cc", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake", ".txt", ".in", ".proto", ".yaml",
                 ".yml", ".toml", ".cfg", ".ini")
TEXT_NAMES = ("Dockerfile", "CMakeLists.txt", "run")
SKIP_DIRS = {".git", "build", "runs", "node_modules", "__pycache__", ".cache"}

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+(?:\([^\s)]*\)[^\s)]*)*)(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
MENTION = re.compile(r"(?<![\w./-])docs/\w[\w./-]*?\.md(?![\w])")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"|\sid=\"([^\"]+)\"")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
COMMIT = re.compile(r"\bcommits?\b[^.\n]*?\b[0-9a-f]{7,40}\b|\b[0-9a-f]{7,40}\b[^.\n]*?\bcommit\b")


def pages(root):
    """README.md and docs/**/*.md, as paths relative to root with '/' separators."""
    found = ["README.md"] if os.path.isfile(os.path.join(root, "README.md")) else []
    for folder, dirs, files in os.walk(os.path.join(root, "docs")):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".md"):
                found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return found


def lines_outside_code(text):
    """(line number, line with inline code blanked) for lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)


def links(text):
    """(line number, target) for every Markdown link, image and reference definition outside code."""
    for number, line in lines_outside_code(text):
        for m in LINK.finditer(line):
            yield number, m.group(1).strip("<>")
        m = REF_DEF.match(line)
        if m:
            yield number, m.group(1).strip("<>")


def slug(heading):
    """GitHub's id for a heading: the rendered text, lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*\*|__|\*)", "", text)
    out = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LNM" or cat == "Pc":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def anchors(path):
    """Every anchor a Markdown page defines: heading ids (with GitHub's -1, -2 for repeats) and HTML ids."""
    seen = {}
    result = set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            result.add(base if n == 0 else f"{base}-{n}")
        for a in HTML_ANCHOR.finditer(line):
            result.add(a.group(1) or a.group(2))
    return result


def check_links(root, page, text, problems, edges):
    folder = os.path.dirname(page)
    for number, target in links(text):
        if not target or SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        if path.startswith("/"):
            problems.append(f"{page}:{number}: link '{target}' is absolute; write it relative to the page")
            continue
        resolved = os.path.normpath(os.path.join(folder, path)).replace(os.sep, "/") if path else page
        full = os.path.join(root, resolved)
        if resolved.startswith("../") or not os.path.exists(full):
            problems.append(f"{page}:{number}: broken link '{target}': {resolved} does not exist")
            continue
        if resolved.endswith(".md"):
            edges.setdefault(page, set()).add(resolved)
            if anchor and anchor not in anchors(full):
                problems.append(f"{page}:{number}: broken link '{target}': {resolved} has no heading '#{anchor}'")


def text_files(root):
    """The tree's text files (tracked files when root is a git work tree), relative to root."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True).stdout
        names = [n for n in out.decode("utf-8", "replace").split("\0") if n]
        if names:
            return [n for n in names if os.path.isfile(os.path.join(root, n)) and is_text_name(n)]
    except (OSError, subprocess.CalledProcessError):
        pass
    names = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if is_text_name(rel):
                names.append(rel)
    return names


def is_text_name(rel):
    base = os.path.basename(rel)
    return base.endswith(TEXT_SUFFIXES) or base in TEXT_NAMES or base.startswith("Dockerfile")


def check_mentions(root, problems):
    myself = os.path.realpath(__file__)  # its self-test trees mention pages of their own
    for rel in text_files(root):
        if os.path.realpath(os.path.join(root, rel)) == myself:
            continue
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for m in MENTION.finditer(line):
                if not os.path.isfile(os.path.join(root, m.group(0))):
                    problems.append(f"{rel}:{number}: mentions {m.group(0)}, which does not exist")


def check_index(root, all_pages, edges, problems):
    if INDEX not in all_pages:
        problems.append(f"{INDEX}: missing (the index every page must be reachable from)")
        return
    reached, todo = {INDEX}, [INDEX]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    for page in all_pages:
        if page.startswith("docs/") and page not in reached:
            problems.append(f"{page}: not reachable from {INDEX}: link it from the index")


def check_report_header(page, text, problems):
    head = [l for l in text.splitlines() if l.strip() and not l.startswith("#")][:3]
    joined = "\n".join(head)
    if not (DATE.search(joined) and COMMIT.search(joined)):
        problems.append(f"{page}:1: a report must state the date (YYYY-MM-DD) and the commit it measured "
                        "in its first lines after the title")


def check(root):
    problems, edges = [], {}
    all_pages = pages(root)
    for page in all_pages:
        with open(os.path.join(root, page), encoding="utf-8") as f:
            text = f.read()
        check_links(root, page, text, problems, edges)
        if page.startswith(REPORTS):
            check_report_header(page, text, problems)
    check_mentions(root, problems)
    check_index(root, all_pages, edges, problems)
    return problems


# --- self-test: small trees, each broken in one way ---------------------------------------------

GOOD = {
    "README.md": "# p\n\nSee [the docs](docs/README.md) and [a](docs/a.md#second-part-x).\n",
    "docs/README.md": "# Index\n\n- [a](a.md)\n- [r](reports/r.md)\n- [g](guide.md#top)\n",
    "docs/a.md": "# A\n\n## Second part: `x`\n\nBack to [the index](README.md), [code](../src/x.h), "
                 "[web](https://example.com/y.md).\n\n```\n[not a link](nowhere.md)\n```\n",
    "docs/guide.md": "# Guide\n\n<a name=\"top\"></a>\n`[not a link](nowhere.md)`\n",
    "docs/reports/r.md": "# R\n\nMeasured 2026-11-25 at commit abc1234.\n\n![plot](img/p.png)\n",
    "docs/reports/img/p.png": "",
    "src/x.h": "// see docs/a.md and docs/reports/r.md\n",
}


def self_test():
    cases = [
        ("good tree", {}, []),
        ("broken link", {"docs/a.md": GOOD["docs/a.md"] + "[gone](gone.md)\n"},
         ["docs/a.md:10: broken link 'gone.md'"]),
        ("broken anchor", {"README.md": "# p\n\n[d](docs/README.md) [a](docs/a.md#third)\n"},
         ["README.md:3: broken link 'docs/a.md#third'"]),
        ("unlinked page", {"docs/orphan.md": "# O\n\n[up](README.md)\n"},
         ["docs/orphan.md: not reachable from docs/README.md"]),
        ("moved page still mentioned in code", {"src/y.py": "# docs/results.md has the table\n"},
         ["src/y.py:1: mentions docs/results.md"]),
        ("report without its date", {"docs/reports/r.md": "# R\n\nSome numbers.\n"},
         ["docs/reports/r.md:1: a report must state"]),
        ("no index", {"docs/README.md": None},
         ["README.md:3: broken link 'docs/README.md'", "docs/a.md:5: broken link 'README.md'",
          "README.md:3: mentions docs/README.md", "docs/README.md: missing"]),
    ]
    failed = 0
    for name, change, expected in cases:
        with tempfile.TemporaryDirectory() as tmp:
            files = dict(GOOD)
            files.update(change)
            for rel, text in files.items():
                if text is None:
                    continue
                os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
                with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            problems = check(tmp)
        ok = (not expected and not problems) or (
            expected and all(any(p.startswith(e) for p in problems) for e in expected) and len(problems) == len(expected))
        print(f"self-test {'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": got {problems}, expected {expected}"))
        failed += not ok
    return 1 if failed else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true", help="check the checker on small broken trees")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    problems = check(os.path.abspath(args.root))
    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s); the index is {INDEX}", file=sys.stderr)
        return 1
    print(f"check-docs: every link resolves and every page is reachable from {INDEX}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
