#!/usr/bin/env python3
"""The build's include check (cmake/SketchpsLayers.cmake): one target's files may include, of the
project's own headers, only the target's own and the public headers of the libraries it links
(directly, or through their PUBLIC links). A lower layer including a higher one fails here, because a
lower library does not link a higher one.

Usage: check_includes.py SPEC STAMP
SPEC is the JSON file CMake wrote for the target:
  {"target": name, "root": repository root, "files": [absolute paths: the target's sources and own
   headers], "visible": [repository-relative headers it may include], "owners": {header: target}}
A quoted include that names a file under the root (outside tests/ and build trees) is a project
header; anything else (the standard library, absl, generated protobuf headers) is not checked.
On success STAMP is touched; on a violation each one is printed as file:line and the exit status is 1.
"""
import json
import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def violations(spec: dict) -> list[str]:
    root = Path(spec["root"])
    visible = set(spec["visible"])
    owners = spec.get("owners", {})
    found = []
    for name in spec["files"]:
        path = Path(name)
        try:
            lines = path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            continue
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(1)
            if header in visible or header.startswith(("tests/", "build/")) or not (root / header).is_file():
                continue
            owner = owners.get(header)
            why = (f"a header of {owner}, which {spec['target']} does not link" if owner else
                   "a header no library declares public")
            found.append(f"{name}:{number}: {spec['target']} includes {header}: {why} "
                         f"(cmake/SketchpsLayers.cmake, docs/design-notes.md \"Layers the build enforces\")")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[1]).read_text())
    found = violations(spec)
    if found:
        print("\n".join(found), file=sys.stderr)
        return 1
    Path(argv[2]).touch()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
