"""Method knowledge lives in the scheme registry (schemes/registry.h): no product code outside schemes/
names a method, as a string literal (a name to compare with, a key to read, a message naming one) or as
an enum case (kTopk, kScaleCom). What a folder must know of a method it learns from the registry's
capabilities (BoundScheme: global_momentum, reduction_state, elastic_refusal). The methods are the
names the registry lists (schemes/registry.cc), so a new method is covered as it is added.

Checked: the product folders below except kernels/ (which holds the methods' building blocks, named
after the papers that define them: kernels/dgc.h, kernels/sidco.h) and schemes/ itself. Comments,
#include lines, docs, tests, bench and the config examples are not product code. "dense" is left
out: it is also a payload's kind and a reduction's name (engine/phase.h), which the engine and the
peer protocol name in their own right. A hit fails the test naming file, line and method."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKED = ["common", "launch", "engine", "ps", "peer", "job", "server", "worker", "tools", "sim", "python/src"]
SUFFIXES = {".cc", ".h", ".cu", ".cuh"}
NOT_A_METHOD_NAME_ONLY = {"dense"}

# One registry entry: {"name", "summary", ...} in Schemes().
ENTRY = re.compile(r'\{\s*"([a-z][a-z0-9_]*)"\s*,\s*"')
TOKENS = re.compile(r'(?P<string>"(?:[^"\\\n]|\\.)*")|(?P<line>//[^\n]*)|(?P<block>/\*.*?\*/)', re.S)


def method_names() -> list[str]:
    names = ENTRY.findall((REPO / "schemes" / "registry.cc").read_text())
    assert len(names) >= 5, "cannot read the method names from schemes/registry.cc"
    return [n for n in names if n not in NOT_A_METHOD_NAME_ONLY]


def violations(text: str, methods: list[str]) -> list[tuple[int, str]]:
    """(line, what) for each string literal that names a method and each enum-like case kMethod."""
    named = re.compile(r"(?i)(?<![a-z0-9])(" + "|".join(map(re.escape, methods)) + r")(?![a-z0-9])")
    case = re.compile(r"(?i)\bk(" + "|".join(m.replace("_", "_?") for m in methods) + r")\b")
    text = "\n".join("" if line.lstrip().startswith("#") else line for line in text.split("\n"))
    found = []
    code = []  # the text outside literals and comments, kept at its offsets
    last = 0
    for m in TOKENS.finditer(text):
        code.append(text[last:m.start()])
        code.append("".join(c if c == "\n" else " " for c in m.group(0)))
        last = m.end()
        if m.group("string") and (hit := named.search(m.group("string"))):
            found.append((text.count("\n", 0, m.start()) + 1, f"the string {m.group('string')[:80]} names "
                                                                f"'{hit.group(1)}'"))
    code.append(text[last:])
    code_text = "".join(code)
    for m in case.finditer(code_text):
        found.append((code_text.count("\n", 0, m.start()) + 1, f"the case {m.group(0)} names a method"))
    return sorted(found)


def test_no_product_code_outside_schemes_names_a_method():
    methods = method_names()
    found = []
    for name in CHECKED:
        for path in sorted((REPO / name).rglob("*")):
            parts = path.relative_to(REPO).parts
            if path.suffix not in SUFFIXES or "tests" in parts or "bench" in parts:
                continue
            for line, what in violations(path.read_text(errors="replace"), methods):
                found.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert not found, ("method knowledge outside the registry (declare a capability in schemes/registry.h "
                       "instead; tests/structure/test_method_names.py):\n" + "\n".join(found))


def test_the_check_can_fail():
    methods = method_names()
    assert "topk" in methods and "scalecom" in methods
    source = "\n".join([
        '#include "kernels/topk.h"',
        "// a comment may say topk",
        'if (job.scheme.name == "scalecom") Leader();',
        'const char* help = "--set scheme.name=topk";',
        "enum class Method { kTopk, kScaleCom, kOther };",
        'auto ok = "top-k of the sum";',
    ])
    lines = [line for line, _ in violations(source, methods)]
    assert lines == [3, 4, 5, 5], violations(source, methods)
